//! Input refused before any call to the remote ([`InputError`]): a leaf,
//! so the parsers of the textual forms and the operations stand on it.

use crate::remote::BadUrl;

/// Input refused before any call to the remote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// A URL that is not a usable remote.
    #[error(transparent)]
    Url(#[from] BadUrl),
    /// A refspec that does not parse.
    #[error("invalid refspec {spec:?}: {reason}")]
    Refspec {
        /// The refspec.
        spec: String,
        /// Why.
        reason: String,
    },
    /// A ref prefix with a glob (prefixes are literal).
    #[error("invalid prefix {0:?}: a prefix is literal and may not contain '*'")]
    Prefix(String),
    /// A ref name that is not a full, valid ref name.
    #[error("invalid ref name {name:?}: {reason}")]
    RefName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A source revision not found in the local repository.
    #[error("cannot resolve {rev:?} in the local repository: {reason}")]
    Revision {
        /// The revision.
        rev: String,
        /// Why.
        reason: String,
    },
    /// A configured remote that cannot be used (no URL, a configuration
    /// that does not parse, a URL no configured remote has).
    #[error("remote {name:?}: {reason}")]
    Remote {
        /// The remote's name, or the URL given.
        name: String,
        /// Why.
        reason: String,
    },
    /// The same destination twice, or no update at all.
    #[error("invalid push: {0}")]
    Push(String),
}
