//! What fails on this side of a transfer, kept apart from the wire: the
//! local object store (an object missing, of another kind, or unreadable)
//! and the local disk (creating, writing, syncing, renaming or removing a
//! temporary pack, an index or a `.keep`).
//!
//! Both end as [`GitError::Local`]: the operation stops at once with
//! `local-error`, never tried again and never blamed on the remote. What
//! the remote sent or was sent (the pack stream, the socket) is not here:
//! the callers keep those as the wire's and class them from it.

use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::error::{GitError, GitPhase};

/// Reading the local object store failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ObjectStoreError {
    /// An object the transfer needs is not in the local object store.
    #[error("{} {id} is missing from the local object store", kind_name(*.kind))]
    Missing {
        /// The object.
        id: ObjectId,
        /// What it had to be, when known.
        kind: Option<gix::object::Kind>,
    },
    /// An object is of another kind than the one its referrer names.
    #[error("{id} is a {found}, not a {expected}")]
    WrongKind {
        /// The object.
        id: ObjectId,
        /// Its kind in the store.
        found: gix::object::Kind,
        /// The kind it had to be.
        expected: gix::object::Kind,
    },
    /// An object or pack of the store could not be read or decoded
    /// (corrupt, truncated, an i/o error).
    #[error("cannot read {what} from the local object store: {detail}")]
    Unreadable {
        /// What was being read (`object <id>`, `the objects to send`).
        what: String,
        /// The store's words.
        detail: String,
    },
}

fn kind_name(kind: Option<gix::object::Kind>) -> String {
    kind.map_or_else(|| "object".to_string(), |k| k.to_string())
}

impl ObjectStoreError {
    /// `what` could not be read: `e`'s chain as the detail.
    pub(crate) fn unreadable(
        what: impl Into<String>,
        e: &(dyn std::error::Error + 'static),
    ) -> ObjectStoreError {
        ObjectStoreError::Unreadable {
            what: what.into(),
            detail: sluice_policy::text::error_chain(e),
        }
    }
}

/// A step on the local disk that failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} in {}: {cause}", dir.display())]
pub(crate) struct DiskError {
    /// What was being done (`write the temporary pack`).
    pub(crate) action: &'static str,
    /// The directory it was done in.
    pub(crate) dir: PathBuf,
    /// The file system's answer.
    pub(crate) cause: std::io::Error,
}

impl DiskError {
    /// `action` in `dir` failed with `cause`.
    pub(crate) fn new(action: &'static str, dir: &Path, cause: std::io::Error) -> DiskError {
        DiskError {
            action,
            dir: dir.to_path_buf(),
            cause,
        }
    }
}

/// A local failure as the attempt's error: `local-error`, never retried.
pub(crate) fn local(phase: GitPhase, what: impl std::fmt::Display) -> GitError {
    GitError::Local {
        phase,
        detail: what.to_string(),
    }
}

/// A copy of `e` (an `io::Error` is not `Clone`): its kind and its words.
pub(crate) fn copy_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}
