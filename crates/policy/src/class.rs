//! Classes, effects and the error an attempt returns to the policy.
//!
//! A layer (git, forge) classes each failure from the wire with one table of
//! its own and hands the policy an [`AttemptError`]; only the policy decides
//! whether to sleep and try again.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the remote made of one attempt, as far as the client could see.
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
}

impl Class {
    /// The kebab-case name used in JSON and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Unjudged => "unjudged",
            Class::Answered => "answered",
            Class::Unknown => "unknown",
        }
    }
}

/// Whether an operation changes the remote.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
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

impl std::error::Error for AttemptError {}
