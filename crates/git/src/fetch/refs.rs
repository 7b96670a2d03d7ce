//! The local side of a fetch: the refs the refspecs map to, updated the way
//! `git fetch` does, in one transaction whose every edit names the value it
//! expects to replace.
//!
//! * a ref that does not exist is created;
//! * a ref already at the fetched value is left alone;
//! * a forced (`+`) refspec moves a ref anywhere;
//! * otherwise a ref under `refs/tags/` is never moved, and any other ref
//!   only moves forward (its old commit an ancestor of the new one); a
//!   refused update is skipped and logged, the rest go ahead.

use gix::bstr::{BString, ByteSlice};
use gix::protocol::fetch::RefMap;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;

/// The reflog message's prefix.
const ACTION: &str = "sluice-remote fetch";

/// One refused update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub local: String,
    pub why: &'static str,
}

/// Update the refs `map` names; returns the refs changed and those refused.
pub(crate) fn update(repo: &gix::Repository, map: &RefMap) -> gix::Result<(usize, Vec<Refused>)> {
    let mut edits = Vec::new();
    let mut refused = Vec::new();
    for m in &map.mappings {
        let (Some(local), Some(new)) = (m.local.as_ref(), m.remote.as_id()) else {
            continue;
        };
        let new = new.to_owned();
        let force = m
            .spec_index
            .get(&map.refspecs, &map.extra_refspecs)
            .is_some_and(|s| s.allow_non_fast_forward());
        let name: gix::refs::FullName = local
            .as_bstr()
            .try_into()
            .map_err(|e| gix_error::message!("invalid local ref {local}: {e}"))?;
        let is_tag = name.as_bstr().starts_with(b"refs/tags/");
        let (expected, deref, context, old) = match repo.try_find_reference(name.as_ref())? {
            None => (
                PreviousValue::MustNotExist,
                false,
                if is_tag {
                    "storing tag"
                } else {
                    "storing head"
                },
                None,
            ),
            Some(r) => match r.target().try_id().map(|id| id.to_owned()) {
                Some(old) => (
                    PreviousValue::MustExistAndMatch(Target::Object(old)),
                    false,
                    "",
                    Some(old),
                ),
                // A symbolic local ref: its target is what moves.
                None => {
                    let old = r.clone().into_fully_peeled_id().ok().map(|id| id.detach());
                    (PreviousValue::MustExist, true, "", old)
                }
            },
        };
        let context = match old {
            None => context,
            Some(old) if old == new => continue,
            Some(_) if force => "forced-update",
            Some(_) if is_tag => {
                refused.push(Refused {
                    local: local.to_string(),
                    why: "would clobber existing tag",
                });
                continue;
            }
            Some(old) => {
                if is_ancestor(repo, old, new) {
                    "fast-forward"
                } else {
                    refused.push(Refused {
                        local: local.to_string(),
                        why: "non-fast-forward",
                    });
                    continue;
                }
            }
        };
        edits.push(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: BString::from(format!("{ACTION}: {context}")),
                },
                expected,
                new: Target::Object(new),
            },
            name,
            deref,
        });
    }
    for r in &refused {
        tracing::info!(local = %r.local, why = r.why, "fetch left a ref alone");
    }
    let n = edits.len();
    if n > 0 {
        let fallback_time = format!(
            "{} +0000",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        );
        let committer = match repo.committer() {
            Some(Ok(c)) => c,
            _ => gix::actor::SignatureRef {
                name: "sluice-remote".into(),
                email: "sluice-remote@localhost".into(),
                time: &fallback_time,
            },
        };
        repo.edit_references_as(edits, Some(committer))?;
    }
    Ok((n, refused))
}

/// `old` is an ancestor of (or equal to) `new`; anything that is not a
/// pair of commits is not.
fn is_ancestor(repo: &gix::Repository, old: gix::ObjectId, new: gix::ObjectId) -> bool {
    repo.merge_base(old, new)
        .ok()
        .flatten()
        .is_some_and(|base| base.detach() == old)
}
