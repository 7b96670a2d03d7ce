//! What fails on this side of a transfer, kept apart from the wire: the
//! local object store (an object missing, of another kind, or unreadable)
//! and the local disk (creating, writing, syncing, renaming or removing a
//! temporary pack, an index or a `.keep`).
//!
//! Every local failure ends as [`crate::GitError::Local`] with a typed
//! [`LocalCause`], built here: the operation stops at once with
//! `local-error`, never tried again and never blamed on the remote. What
//! the remote sent or was sent (the pack stream, the socket) is not here:
//! the callers keep those as the wire's and class them from it.
//!
//! A floor under `error`: it names no `GitError` (the variant is assembled
//! by `GitError::local`), so the error table can carry its causes.

use std::path::{Path, PathBuf};

use gix::ObjectId;

/// What failed on this side of a transfer, typed; each keeps its source,
/// and its words are the ones `local-error` has always printed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum LocalCause {
    /// The local object store could not give an object (missing, of
    /// another kind, unreadable).
    #[error("{words}")]
    ObjectStore {
        /// What failed, in words (as printed).
        words: String,
        /// The store's failure.
        #[source]
        source: ObjectStoreError,
    },
    /// The local disk refused a step (creating, writing, syncing, renaming
    /// or removing a file: a full disk, a read-only one, a permission).
    #[error("{words}")]
    Disk {
        /// What failed, in words (as printed).
        words: String,
        /// The file system's answer (its [`std::io::Error::kind`] says
        /// which: `StorageFull`, `PermissionDenied`, …).
        #[source]
        source: std::io::Error,
    },
    /// The local refs could not be read or written (a lock held by another
    /// process, a ref that cannot be written).
    #[error("{words}")]
    Refs {
        /// What failed, in words (as printed).
        words: String,
        /// The ref store's (or the configuration's) failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No fresh view of the caller's repository could be opened.
    #[error("{source}")]
    View {
        /// Why.
        #[source]
        source: crate::view::ViewError,
    },
    /// This build lacks a feature the remote needs.
    #[error("{words}")]
    MissingFeature {
        /// The cargo feature (`http`, `https`).
        feature: &'static str,
        /// What failed, in words (as printed).
        words: String,
    },
    /// Anything else on this side: a pack too large for one pack, a worker
    /// thread that panicked, an HTTP client that cannot be built, a
    /// remote's configuration gix cannot read.
    #[error("{words}")]
    Other {
        /// What failed, in words (as printed).
        words: String,
        /// The failure beneath, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl LocalCause {
    /// `words` about the object store's `source`.
    pub(crate) fn object_store(words: impl Into<String>, source: ObjectStoreError) -> LocalCause {
        LocalCause::ObjectStore {
            words: words.into(),
            source,
        }
    }

    /// `words` about the file system's `source`.
    pub(crate) fn disk(words: impl Into<String>, source: std::io::Error) -> LocalCause {
        LocalCause::Disk {
            words: words.into(),
            source,
        }
    }

    /// A step on the disk that failed, in its own words.
    pub(crate) fn from_disk(e: DiskError) -> LocalCause {
        LocalCause::Disk {
            words: e.to_string(),
            source: e.cause,
        }
    }

    /// The object store's failure, in its own words.
    pub(crate) fn from_object_store(e: ObjectStoreError) -> LocalCause {
        LocalCause::ObjectStore {
            words: e.to_string(),
            source: e,
        }
    }

    /// `words` about the ref store's `source`.
    pub(crate) fn refs(
        words: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> LocalCause {
        LocalCause::Refs {
            words: words.into(),
            source: Box::new(source),
        }
    }

    /// No view of the repository.
    pub(crate) fn view(source: crate::view::ViewError) -> LocalCause {
        LocalCause::View { source }
    }

    /// `feature` is left out of this build.
    #[cfg(not(feature = "http"))]
    pub(crate) fn missing_feature(feature: &'static str, words: impl Into<String>) -> LocalCause {
        LocalCause::MissingFeature {
            feature,
            words: words.into(),
        }
    }

    /// Anything else, in `words`, with the failure beneath when there is one.
    pub(crate) fn other(
        words: impl Into<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> LocalCause {
        LocalCause::Other {
            words: words.into(),
            source,
        }
    }
}

/// Reading the local object store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectStoreError {
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

/// A copy of `e` (an `io::Error` is not `Clone`): its kind and its words.
pub(crate) fn copy_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}
