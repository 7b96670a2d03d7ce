//! Why maintenance failed: [`MaintenanceError`].

use std::path::PathBuf;

/// Why [`maintain`](super::maintain) failed. Nothing taken is removed before the new pack
/// and its index are in place; a failure leaves at most a pack that holds
/// objects some other pack holds too.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaintenanceError {
    /// The repository could not be opened again.
    #[error("reopening the repository at {}: {detail}", path.display())]
    Open {
        /// Its git directory.
        path: PathBuf,
        /// gix's words, with their causes.
        detail: String,
    },
    /// The repository is not trusted as its owner's (gix opened it with
    /// reduced trust): nothing is written into it.
    #[error("the repository at {} is not trusted: no maintenance", path.display())]
    Untrusted {
        /// Its git directory.
        path: PathBuf,
    },
    /// A file of the object directory could not be read, written or
    /// removed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// gix-pack could not read an object, or write the pack or its index.
    #[error("{what}: {detail}")]
    Pack {
        /// What was being done.
        what: String,
        /// gix's words, with their causes.
        detail: String,
    },
}
