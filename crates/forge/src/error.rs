//! The forge's errors: [`ForgeError`], a client that cannot be built;
//! [`ForgeInputError`], bad input to one call, refused before any request
//! (the `Err` of every call, never an outcome); and [`ForgeFailure`], why
//! one request of an attempt failed, in the forge's terms — the typed
//! source of the [`AttemptError`](sluice_policy::AttemptError) the policy
//! sees (`error.source_as::<ForgeFailure>()`), as git's attempts carry
//! their `GitError`.
//!
//! A failure on this side is [`ForgeFailure::Local`], whose typed
//! [`LocalCause`] keeps the error that caused it as its source (built in
//! one place, the crate's `local` module).
//!
//! The names are the forge's own (`ForgeInputError`, not `InputError`):
//! a program that uses both clients imports `sluice_git::InputError` and
//! `sluice_forge::ForgeInputError` side by side without renaming either.

use std::sync::Arc;

use crate::phase::ForgePhase;

/// A forge client or credential source that cannot be built (a base URL,
/// a GitHub App's key, the HTTP stack), or a URL that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// A header given to the builder that a caller may not give.
    #[error(transparent)]
    Header(#[from] sluice_policy::HeaderRefused),
}

/// Bad input to one forge call, refused before any request is made: the
/// `Err` of every call (`Result<Outcome<T>, ForgeInputError>`). Nothing was
/// sent, nothing was claimed in the ledger, and no outcome exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeInputError {
    /// Not an absolute `http(s)` URL, or a path that does not make one
    /// with the base URL (user info is redacted from the text).
    #[error("invalid URL {0}")]
    Url(String),
    /// Not a commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
    #[error("{0:?} is not a commit id (40 or 64 lowercase hex digits)")]
    Sha(String),
    /// Not a ref name as the call takes it (`heads/main`, `main`, `v1.0`):
    /// empty, starting with `/` or `refs/`, or not a valid git ref name.
    #[error("{name:?} is not a ref name such as heads/main: {why}")]
    RefName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A pull request, issue or check run number of 0 (they start at 1).
    #[error("{what} number 0: numbers start at 1")]
    Number {
        /// `pull request`, `issue` or `check run`.
        what: &'static str,
    },
    /// A pull request state other than `open`, `closed` or `all`.
    #[error("{0:?} is not a pull request state (open, closed or all)")]
    State(String),
    /// Not a head: `branch`, or `owner:branch` for a fork's.
    #[error("{label:?} is not a head (branch, or owner:branch): {why}")]
    Head {
        /// The head given.
        label: String,
        /// What is wrong with it.
        why: String,
    },
    /// A check name (required or excluded) that is empty.
    #[error("{0:?} is not a check name: empty")]
    CheckName(String),
    /// A check name both required and excluded: its runs would be left
    /// out, so it could never report.
    #[error("{name:?} is both required and excluded")]
    RequiredAndExcluded {
        /// The name.
        name: String,
    },
    /// Not a repository: an owner or a name that is empty, `.` or `..`, or
    /// holds anything but ASCII letters, digits, `-`, `_` and `.`.
    #[error("{repo:?} is not owner/name: {why}")]
    Repo {
        /// The repository given, as `owner/name`.
        repo: String,
        /// What is wrong with it.
        why: String,
    },
    /// An operation id that cannot be a comment's marker (it holds `--` or
    /// `>`, which would end the HTML comment the marker is).
    #[error("operation id {0:?} cannot mark a comment: it holds \"--\" or \">\"")]
    MarkerId(String),
}

/// Why one request to the forge failed: what the exchange showed, with the
/// forge's own words as data. Its class comes from the forge's table
/// (`classify`), never from these words. More kinds of failure may come:
/// a match needs an arm for the others.
///
/// `Clone`, not `PartialEq`: a local failure keeps its typed cause (an
/// HTTP stack's error among them), which cannot be compared; match with
/// `matches!`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
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
        phase: ForgePhase,
        /// The answer's `x-github-request-id` (else `x-request-id`): what
        /// GitHub's support asks for.
        request_id: Option<String>,
    },
    /// A success whose body was cut: the forge said yes, its value was not
    /// read.
    #[error("HTTP {status}, but the body was cut: {detail}")]
    Cut {
        /// The status code.
        status: u16,
        /// What the HTTP stack said.
        detail: String,
        /// The answer's `x-github-request-id` (else `x-request-id`).
        request_id: Option<String>,
    },
    /// A success whose body is not the JSON the call expects.
    #[error("HTTP {status}: the answer is not the expected JSON: {detail}")]
    Undecodable {
        /// The status code.
        status: u16,
        /// What the decoder said.
        detail: String,
        /// The answer's `x-github-request-id` (else `x-request-id`).
        request_id: Option<String>,
    },
    /// No answer: a refused connection, a DNS failure, a handshake cut, a
    /// reset, a timeout, a cut, a cancel while waiting; `phase` says how
    /// far the request got (`connect`: never sent).
    #[error("{detail}")]
    NoAnswer {
        /// The last phase completed.
        phase: ForgePhase,
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
    /// This side could not make the request: the operation stops with
    /// `local-error`, never retried. The cause is typed and keeps its own
    /// source (`std::error::Error::source` reaches it).
    #[error("{cause}")]
    Local {
        /// What failed, typed.
        #[source]
        cause: Arc<LocalCause>,
    },
    /// No credential could be bought for the request, so it was not made:
    /// the operation's credential source failed (a token command that
    /// cannot start, or a GitHub App key that cannot sign, is `local`: the
    /// operation stops with `local-error`; a GitHub App's token endpoint
    /// answering 401, 403 or 404 is `answered`, typed as
    /// [`CredentialError::TokenEndpoint`]; anything else — a failed
    /// command, a mint without an answer, a cancel — is unjudged). The
    /// source's own error is kept (`std::error::Error::source`).
    #[error("{error}")]
    Credential {
        /// What the credential source said.
        #[source]
        error: CredentialError,
    },
}

/// Why no credential could be bought for a forge request: the cause of
/// [`ForgeFailure::Credential`]. More kinds may come: a match needs an arm
/// for the others.
///
/// (Not [`sluice_policy::CredentialError`], the trait's error, which the
/// [`CredentialError::Source`] arm keeps.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// The credential source failed: a token command, a mint that got no
    /// answer, a key that cannot sign, a cancel.
    #[error("{0}")]
    Source(#[source] sluice_policy::CredentialError),
    /// A GitHub App's token endpoint answered 401, 403 or 404: the app's
    /// key, its id or the installation is wrong (or the app lost its
    /// access). Trying again cannot mend it: the operation's one attempt
    /// for it is `answered`, phase `credential`.
    #[error(
        "the GitHub App's token endpoint answered HTTP {status}{}",
        words(message)
    )]
    TokenEndpoint {
        /// The status code (401, 403 or 404).
        status: u16,
        /// GitHub's `message` (empty when the answer had none).
        message: String,
        /// The answer's `x-github-request-id` (else `x-request-id`).
        request_id: Option<String>,
    },
}

impl CredentialError {
    /// The credential source's error as a forge client sees it: the
    /// typed detail the GitHub App source keeps when its token endpoint
    /// answered, else the source's error itself.
    pub(crate) fn of(e: &sluice_policy::CredentialError) -> Self {
        match e.detail_as::<CredentialError>() {
            Some(typed) => typed.clone(),
            None => CredentialError::Source(e.clone()),
        }
    }
}

impl ForgeFailure {
    /// The status the forge answered with, when it answered (the GitHub
    /// App's token endpoint included).
    pub fn status(&self) -> Option<u16> {
        match self {
            ForgeFailure::Status { status, .. }
            | ForgeFailure::Cut { status, .. }
            | ForgeFailure::Undecodable { status, .. } => Some(*status),
            ForgeFailure::Credential {
                error: CredentialError::TokenEndpoint { status, .. },
            } => Some(*status),
            _ => None,
        }
    }

    /// GitHub's `message`, when the forge answered with one (the GitHub
    /// App's token endpoint included).
    pub fn message(&self) -> Option<&str> {
        match self {
            ForgeFailure::Status { message, .. } if !message.is_empty() => Some(message),
            ForgeFailure::Credential {
                error: CredentialError::TokenEndpoint { message, .. },
            } if !message.is_empty() => Some(message),
            _ => None,
        }
    }

    /// The server's request id (`x-github-request-id`, else
    /// `x-request-id`) of an answer, the GitHub App's token endpoint's
    /// included; `None` when nothing answered or the answer named none.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            ForgeFailure::Status { request_id, .. }
            | ForgeFailure::Cut { request_id, .. }
            | ForgeFailure::Undecodable { request_id, .. }
            | ForgeFailure::Credential {
                error: CredentialError::TokenEndpoint { request_id, .. },
            } => request_id.as_deref(),
            _ => None,
        }
    }

    /// The last phase the request completed.
    pub fn phase(&self) -> ForgePhase {
        match self {
            ForgeFailure::Status { phase, .. } | ForgeFailure::NoAnswer { phase, .. } => *phase,
            ForgeFailure::Cut { .. } => ForgePhase::ResponseHeaders,
            ForgeFailure::Undecodable { .. } | ForgeFailure::ForeignLink { .. } => ForgePhase::Body,
            ForgeFailure::NotSent { .. }
            | ForgeFailure::Tls { .. }
            | ForgeFailure::ProxyRefused { .. }
            | ForgeFailure::Local { .. }
            | ForgeFailure::Credential { .. } => ForgePhase::Connect,
            ForgeFailure::Redirect { .. } => ForgePhase::ResponseHeaders,
        }
    }
}

/// Why this side could not make a request to the forge: the cause of
/// [`ForgeFailure::Local`], each keeping the error it came from as its
/// `#[source]`. More causes may come: a match needs an arm for the others.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalCause {
    /// A path or URL that does not make a request URL (a settling read's
    /// path, say).
    #[error("{0}")]
    Url(#[source] ForgeInputError),
    /// The credential bought is not a valid HTTP header value (a token
    /// with a newline, say): sending it would not be the credential.
    #[error("credential {fingerprint} is not a valid HTTP header value")]
    CredentialHeader {
        /// The credential's fingerprint (never the secret).
        fingerprint: String,
        /// What the header parser said.
        #[source]
        source: reqwest::header::InvalidHeaderValue,
    },
    /// The HTTP stack could not build the request.
    #[error("{detail}")]
    Request {
        /// What the HTTP stack said, its causes joined (no URL).
        detail: String,
        /// The HTTP stack's error.
        #[source]
        source: reqwest::Error,
    },
}

impl LocalCause {
    /// A request the HTTP stack could not build, its words kept.
    pub(crate) fn request(source: reqwest::Error) -> Self {
        LocalCause::Request {
            detail: sluice_policy::text::error_chain(&source),
            source,
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
