//! A configured remote's remote-tracking refs after a push that landed
//! ([`NamedRemote::update_tracking_refs`]), as `git push <remote>` moves
//! them, and why writing them failed ([`TrackingRefError`]).

use crate::named_remote::NamedRemote;
use crate::push::{RefResult, RefStatus};

/// Why the remote-tracking refs of a push were not written: this side's
/// trouble (the push's outcome stands).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrackingRefError {
    /// A `fetch` line maps a pushed ref to a name that is no valid ref name.
    #[error("invalid tracking ref {name}: {source}")]
    InvalidName {
        /// The name the `fetch` line gave.
        name: String,
        /// Why it is not a valid ref name.
        #[source]
        source: gix::validate::reference::name::Error,
    },
    /// The refs could not be written (a lock held, the disk).
    #[error("{}", sluice_policy::text::error_chain(.source))]
    Write {
        /// The ref store's error.
        #[source]
        source: gix::Error,
    },
}

impl NamedRemote {
    /// After a push to this remote, the remote-tracking refs of the refs
    /// that landed, as git updates them: set to the value pushed, or
    /// deleted for a deletion that landed. A ref rejected, or whose fate is
    /// unknown, leaves its tracking ref alone; so does a dry run (give no
    /// results). Returns the tracking refs written. A ref that cannot be
    /// written is this side's trouble ([`TrackingRefError`]).
    pub fn update_tracking_refs(
        &self,
        repo: &gix::Repository,
        results: &[RefResult],
    ) -> Result<Vec<String>, TrackingRefError> {
        use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
        let mut edits = Vec::new();
        let mut written = Vec::new();
        for r in results {
            let landed =
                r.status == RefStatus::Ok || r.verdict == Some(sluice_policy::Verdict::Landed);
            let Some(tracking) = self.tracking_ref(&r.name).filter(|_| landed) else {
                continue;
            };
            let name: gix::refs::FullName =
                tracking
                    .as_str()
                    .try_into()
                    .map_err(|source| TrackingRefError::InvalidName {
                        name: tracking.clone(),
                        source,
                    })?;
            let change = match r.new {
                Some(new) => Change::Update {
                    log: LogChange {
                        mode: RefLog::AndReference,
                        force_create_reflog: false,
                        message: "update by push".into(),
                    },
                    expected: PreviousValue::Any,
                    new: gix::refs::Target::Object(new),
                },
                None => {
                    if repo
                        .try_find_reference(tracking.as_str())
                        .ok()
                        .flatten()
                        .is_none()
                    {
                        continue;
                    }
                    Change::Delete {
                        expected: PreviousValue::Any,
                        log: RefLog::AndReference,
                    }
                }
            };
            edits.push(RefEdit {
                change,
                name,
                deref: false,
            });
            written.push(tracking);
        }
        if !edits.is_empty() {
            repo.edit_references(edits)
                .map_err(|source| TrackingRefError::Write { source })?;
        }
        Ok(written)
    }
}
