//! Why storing a received pack failed ([`StoreError`]), and the
//! shorthands every room of the indexer builds it with.

use std::io;
use std::path::Path;

use crate::local::{DiskError, ObjectStoreError};

/// Why storing a received pack failed: the pack as the server sent it
/// (the wire's, classed from it), or this side (the disk, the object
/// store: `local-error`, never tried again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The pack stream could not be read, or is no valid pack: an entry,
    /// a delta or the trailer is wrong, a base is missing.
    #[error("{0}")]
    Stream(String),
    /// The local disk refused a step: creating, writing, syncing, reading
    /// back or moving a temporary pack or index, writing the `.keep`.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// A thin pack's base could not be read from the local object store.
    #[error(transparent)]
    ObjectStore(#[from] ObjectStoreError),
    /// The pack passed a limit the caller set: the server's pack, stopped.
    #[error("{0}")]
    Limit(crate::fetch::options::LimitExceeded),
}

impl StoreError {
    /// The failure as the attempt's typed cause, in its own words: the
    /// disk's or the object store's (the server's pack is the wire's, and
    /// never asked for this).
    pub(crate) fn into_cause(self) -> crate::local::LocalCause {
        match self {
            StoreError::Disk(e) => crate::local::LocalCause::from_disk(e),
            StoreError::ObjectStore(e) => crate::local::LocalCause::from_object_store(e),
            StoreError::Stream(words) => crate::local::LocalCause::other(words, None),
            StoreError::Limit(e) => crate::local::LocalCause::other(e.to_string(), None),
        }
    }

    /// Whether this side failed (the disk, the object store), not the
    /// pack the server sent.
    pub(crate) fn is_local(&self) -> bool {
        !matches!(self, StoreError::Stream(_) | StoreError::Limit(_))
    }
}

pub(super) type Result<T> = std::result::Result<T, StoreError>;

/// The pack is not a valid one: `what`.
pub(super) fn fail(what: impl Into<String>) -> StoreError {
    StoreError::Stream(what.into())
}

/// The pack is not a valid one, in the words of `e` (a gix-pack parser,
/// the inflater, the hasher).
pub(super) fn stream(e: impl std::error::Error + 'static) -> StoreError {
    StoreError::Stream(sluice_policy::text::error_chain(&e))
}

/// `action` on the disk in `dir` failed.
pub(super) fn disk<'a>(
    action: &'static str,
    dir: &'a Path,
) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |e| DiskError::new(action, dir, e).into()
}
