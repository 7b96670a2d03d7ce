//! Errors of bad input: they end nothing on the remote, so they are not
//! outcomes.

/// Bad input to the forge client (never a remote's answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// A URL that is not an absolute `http(s)` URL, or a path that does not
    /// make one with the base URL.
    #[error("invalid URL {0}")]
    InvalidUrl(String),
    /// The GitHub App's private key could not be read.
    #[error("invalid GitHub App private key: {0}")]
    Key(String),
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {0}")]
    Http(String),
}
