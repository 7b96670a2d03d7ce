//! Classes, effects and the error an attempt returns to the policy.
//!
//! A layer (git, forge) classes each failure from the wire with one table of
//! its own and hands the policy an [`AttemptError`]; only the policy decides
//! whether to sleep and try again.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the remote made of one attempt, as far as the client could see.
///
/// Closed: the design's four classes, each with its own rule of the class ×
/// effect table; a new one would change the table, so it is not
/// `#[non_exhaustive]` and a `match` on it needs no wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// The remote never judged the call: safe to try again, read or write.
    Unjudged,
    /// The remote answered: never tried again.
    Answered,
    /// The request was complete but its answer was not read: a read is tried
    /// again, a write is settled by reading.
    Unknown,
    /// The failure is on this side (the object store, the disk, a lock, a
    /// token command that cannot start): never the remote's answer, and
    /// trying again will not mend it. The operation stops at once with
    /// `local-error`.
    #[serde(rename = "local-error")]
    Local,
}

impl Class {
    /// The kebab-case name used in JSON and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Unjudged => "unjudged",
            Class::Answered => "answered",
            Class::Unknown => "unknown",
            Class::Local => "local-error",
        }
    }
}

/// Whether an operation changes the remote.
///
/// Closed: an operation reads or writes; not `#[non_exhaustive]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// ls-refs, fetch, GET: tried again whatever happened, unless answered.
    Read,
    /// push, POST/PATCH/PUT/DELETE: tried again only when never judged.
    Write,
}

impl Effect {
    /// The kebab-case name used in JSON and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
        }
    }
}

/// A sign, read from the wire, that the remote may have refused the credential.
///
/// The policy, not the layer, decides whether it is the credential class: a
/// [`AuthSignal::Unauthorized`] always is; a [`AuthSignal::ForbiddenOrNotFound`]
/// only within the fresh window after the credential was bought.
///
/// Not exhaustive: a layer may learn another sign (a proxy's 407, a
/// transport's own refusal); a `match` outside this crate keeps a wildcard
/// arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthSignal {
    /// HTTP 401.
    Unauthorized,
    /// HTTP 403 or 404 (for git: on the advertisement).
    ForbiddenOrNotFound,
}

/// Why one attempt failed, classed by the layer that made it.
///
/// `cause` keeps the remote's words (an `ERR` packet's text, an `ng` reason,
/// an HTTP status line) or, for a local failure, what happened on the wire.
#[derive(Clone)]
pub struct AttemptError {
    /// The class, from the layer's table.
    pub class: Class,
    /// The last protocol phase the attempt completed (`connect` when none).
    pub phase: Cow<'static, str>,
    /// The remote's words, or what happened.
    pub cause: String,
    /// A wait the remote asked for (`Retry-After`, a rate-limit reset).
    pub retry_after: Option<Duration>,
    /// Set when the failure may be a refused credential.
    pub auth: Option<AuthSignal>,
    /// The layer's own typed error (a `GitError`, a forge error), when it
    /// gave one: reach it with [`AttemptError::source_as`].
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for AttemptError {
    /// Equal when class, phase, cause, hint and signal are (the typed
    /// source is the same failure in the layer's terms).
    fn eq(&self, other: &Self) -> bool {
        self.class == other.class
            && self.phase == other.phase
            && self.cause == other.cause
            && self.retry_after == other.retry_after
            && self.auth == other.auth
    }
}

impl Eq for AttemptError {}

impl std::fmt::Debug for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptError")
            .field("class", &self.class)
            .field("phase", &self.phase)
            .field("cause", &self.cause)
            .field("retry_after", &self.retry_after)
            .field("auth", &self.auth)
            .field("source", &self.source)
            .finish()
    }
}

impl AttemptError {
    /// A failure of the given class at the given phase.
    pub fn new(
        class: Class,
        phase: impl Into<Cow<'static, str>>,
        cause: impl Into<String>,
    ) -> Self {
        AttemptError {
            class,
            phase: phase.into(),
            cause: cause.into(),
            retry_after: None,
            auth: None,
            source: None,
        }
    }

    /// An unjudged failure: the remote never judged the call.
    pub fn unjudged(phase: impl Into<Cow<'static, str>>, cause: impl Into<String>) -> Self {
        Self::new(Class::Unjudged, phase, cause)
    }

    /// An answered failure: the remote's answer, never retried.
    pub fn answered(phase: impl Into<Cow<'static, str>>, cause: impl Into<String>) -> Self {
        Self::new(Class::Answered, phase, cause)
    }

    /// An unknown failure: the request was complete, its answer not read.
    pub fn unknown(phase: impl Into<Cow<'static, str>>, cause: impl Into<String>) -> Self {
        Self::new(Class::Unknown, phase, cause)
    }

    /// A failure on this side: stops the operation with `local-error`.
    pub fn local(phase: impl Into<Cow<'static, str>>, cause: impl Into<String>) -> Self {
        Self::new(Class::Local, phase, cause)
    }

    /// Keep the layer's typed error beside the words.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The layer's typed error, when it is an `E`:
    /// `outcome.error.as_ref().and_then(|e| e.source_as::<GitError>())`.
    pub fn source_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.as_deref().and_then(|s| s.downcast_ref::<E>())
    }

    /// Attach the remote's retry hint.
    pub fn with_retry_after(mut self, wait: Option<Duration>) -> Self {
        self.retry_after = wait;
        self
    }

    /// Mark the failure as a possible credential refusal.
    pub fn with_auth(mut self, auth: AuthSignal) -> Self {
        self.auth = Some(auth);
        self
    }
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {}: {}",
            self.class.as_str(),
            self.phase,
            self.cause
        )
    }
}

impl std::error::Error for AttemptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}
