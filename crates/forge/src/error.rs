//! The forge's errors: [`ForgeError`], bad input that ends nothing on the
//! remote (not an outcome), and [`ForgeFailure`], why one request of an
//! attempt failed, in the forge's terms — the typed source of the
//! [`AttemptError`](sluice_policy::AttemptError) the policy sees
//! (`error.source_as::<ForgeFailure>()`), as git's attempts carry their
//! `GitError`.

use crate::phase::Phase;

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

/// Why one request to the forge failed: what the exchange showed, with the
/// forge's own words as data. Its class comes from the forge's table
/// (`classify`), never from these words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeFailure {
    /// The forge answered with a status that is not a success (a redirect
    /// not followed included).
    #[error("HTTP {status}{}", words(message))]
    Status {
        /// The status code.
        status: u16,
        /// GitHub's `message` (with the messages of its `errors`), or the
        /// body's first line when it is not GitHub's JSON; for a redirect,
        /// where it pointed.
        message: String,
        /// GitHub's `documentation_url`, when the body named one.
        documentation_url: Option<String>,
        /// The phase reached: `body`, or `response-headers` when the error
        /// body was cut.
        phase: Phase,
    },
    /// A success whose body was cut: the forge said yes, its value was not
    /// read.
    #[error("HTTP {status}, but the body was cut: {detail}")]
    Cut {
        /// The status code.
        status: u16,
        /// What the HTTP stack said.
        detail: String,
    },
    /// A success whose body is not the JSON the call expects.
    #[error("HTTP {status}: the answer is not the expected JSON: {detail}")]
    Undecodable {
        /// The status code.
        status: u16,
        /// What the decoder said.
        detail: String,
    },
    /// No answer: a refused connection, a DNS failure, a handshake cut, a
    /// reset, a timeout, a cut, a cancel while waiting; `phase` says how
    /// far the request got (`connect`: never sent).
    #[error("{detail}")]
    NoAnswer {
        /// The last phase completed.
        phase: Phase,
        /// What happened on the wire (the proxy named when one was used).
        detail: String,
    },
    /// Never sent: no slot under the host's concurrency cap or write pacing
    /// within the attempt's time, a cancel before sending, no time left, or
    /// the request's thread could not start.
    #[error("{detail}")]
    NotSent {
        /// Why.
        detail: String,
    },
    /// The TLS handshake was refused while connecting (a certificate error
    /// or an alert): the server's answer.
    #[error("{refusal}: {detail}")]
    Tls {
        /// What was refused.
        refusal: sluice_https::TlsRefusal,
        /// What the TLS stack said.
        detail: String,
    },
    /// The proxy refused CONNECT with 407: its answer.
    #[error("407 Proxy Authentication Required: {detail}")]
    ProxyRefused {
        /// What the HTTP stack said, naming the proxy.
        detail: String,
    },
    /// A redirect this client does not follow (too many, or to a scheme it
    /// refuses), seen by the HTTP stack.
    #[error("{detail}")]
    Redirect {
        /// What the HTTP stack said.
        detail: String,
    },
    /// A list answer named its next page on another origin: not followed
    /// (the credential goes only where the list was asked for).
    #[error("the next page is on another host: {link}")]
    ForeignLink {
        /// The link, as the answer gave it.
        link: String,
    },
    /// This side could not make the request (a credential that is no valid
    /// header value; a request the HTTP stack cannot build).
    #[error("{detail}")]
    Local {
        /// What failed.
        detail: String,
    },
}

impl ForgeFailure {
    /// The status the forge answered with, when it answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ForgeFailure::Status { status, .. }
            | ForgeFailure::Cut { status, .. }
            | ForgeFailure::Undecodable { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// GitHub's `message`, when the forge answered with one.
    pub fn message(&self) -> Option<&str> {
        match self {
            ForgeFailure::Status { message, .. } if !message.is_empty() => Some(message),
            _ => None,
        }
    }

    /// The last phase the request completed.
    pub fn phase(&self) -> Phase {
        match self {
            ForgeFailure::Status { phase, .. } | ForgeFailure::NoAnswer { phase, .. } => *phase,
            ForgeFailure::Cut { .. } => Phase::ResponseHeaders,
            ForgeFailure::Undecodable { .. } | ForgeFailure::ForeignLink { .. } => Phase::Body,
            ForgeFailure::NotSent { .. }
            | ForgeFailure::Tls { .. }
            | ForgeFailure::ProxyRefused { .. }
            | ForgeFailure::Local { .. } => Phase::Connect,
            ForgeFailure::Redirect { .. } => Phase::ResponseHeaders,
        }
    }
}

/// `: message`, or nothing for an empty message.
fn words(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}
