//! What the engine hands the caller's closures and what it takes back:
//! [`AttemptCtx`] (one attempt), [`ReconcileCtx`] (one settling read),
//! [`Settlement`] (what a settling read found) and [`Rejection`] (a value
//! that is the remote's answer).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::class::AttemptError;
use crate::clock::{CancelFlag, Clock};
use crate::credential::{Challenge, Credential};
use crate::outcome::Verdict;

/// A value that is the remote's answer rather than success (see
/// [`Policy::run_write_judged`](crate::Policy::run_write_judged)).
#[derive(Clone, Debug)]
#[must_use = "a Rejection makes the outcome answered only when the judge returns it"]
pub struct Rejection {
    /// The answer, as the outcome's error (class `answered`).
    pub error: AttemptError,
    /// Whether part of the write applied (a ref updated beside one rejected).
    pub may_have_applied: bool,
}

/// What a layer notes about one attempt as it goes, from any thread the
/// attempt runs on: the server's request id of its last answered HTTP
/// request, and how long it was held on this side before sending (a
/// write gate). Cheap to clone; clones share the notes. The policy puts
/// them in the attempt's record and span when the attempt ends.
#[derive(Clone, Debug, Default)]
pub struct AttemptFacts(Arc<Mutex<Facts>>);

#[derive(Debug, Default)]
struct Facts {
    request_id: Option<String>,
    waited: Duration,
}

impl AttemptFacts {
    /// Facts of nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An HTTP request of the attempt was answered, naming `id` (the
    /// answer's `x-github-request-id`, else `x-request-id`; `None` when it
    /// named none): the last answered request's stands.
    pub fn answered(&self, id: Option<String>) {
        self.lock().request_id = id;
    }

    /// The attempt was held `d` on this side before a request went out.
    pub fn waited(&self, d: Duration) {
        self.lock().waited += d;
    }

    /// The request id of the last answered request, if it named one.
    pub fn request_id(&self) -> Option<String> {
        self.lock().request_id.clone()
    }

    /// How long the attempt was held so far.
    pub fn waited_total(&self) -> Duration {
        self.lock().waited
    }
}

/// What one attempt is given.
pub struct AttemptCtx<'a> {
    /// The attempt number, from 1.
    pub n: u32,
    /// The attempt's hard deadline, capped by what remains of the budget.
    pub timeout: Duration,
    /// What remained of the budget when the attempt started.
    pub remaining: Duration,
    /// The most this attempt may run while a transfer keeps moving: the
    /// operation's deadline less the reconcile reserve (see "What an attempt
    /// timeout covers": waits and stalls end at `timeout`, a moving pack
    /// runs on to this limit).
    pub limit: Duration,
    pub(super) credential: Option<Credential>,
    /// Buys the credential that replaces a due one (see
    /// [`AttemptCtx::credential_for_request`]); `None` keeps the one held.
    pub(super) renew: &'a dyn Fn() -> Option<Credential>,
    /// Where a credential is bought inside this attempt when the remote
    /// asks for one (see [`Challenge`]).
    pub(super) challenge: Option<Challenge>,
    pub(super) cancel: &'a CancelFlag,
    pub(super) clock: &'a dyn Clock,
    /// The operation's id (the caller's, or the one the policy generated).
    pub(super) id: &'a str,
    /// The value was found by a read made first: nothing was sent.
    pub(super) sent_nothing: bool,
    pub(super) phase: Cow<'static, str>,
    pub(super) messages: Vec<String>,
    pub(super) dropped: crate::remote_text::RemoteTextDropped,
    /// Records a phase in the ledger before a write takes its step.
    pub(super) progress: &'a dyn Fn(&str),
    /// What the layer notes as the attempt goes.
    pub(super) facts: AttemptFacts,
    /// The caller's headers for every HTTP request.
    pub(super) headers: &'a [(String, String)],
}

impl AttemptCtx<'_> {
    /// Say that a write is about to take the step that completes `phase`,
    /// after which it may have applied (a push's `pack-sent`, before the
    /// pack's last byte; a forge write's `request-sent`, before its request
    /// goes out). The ledger records it first, so that a run whose process
    /// dies shows how far it got. Best effort and bounded: a ledger that
    /// cannot record it is logged and the attempt goes on. Nothing for a
    /// read, nor for an id no ledger claimed.
    pub fn entering(&self, phase: &str) {
        (self.progress)(phase);
    }

    /// Keep a line the server said beside the protocol (side-band 2, a
    /// hook's words): the outcome's `remote_messages`, in order.
    pub fn remote_message(&mut self, line: impl Into<String>) {
        self.messages.push(line.into());
    }

    /// Count what the attempt's own cap on the remote's text left out
    /// before it reached [`AttemptCtx::remote_message`]: the outcome's
    /// `remote_messages_dropped`.
    pub fn remote_messages_dropped(&mut self, dropped: crate::remote_text::RemoteTextDropped) {
        self.dropped.add(dropped);
    }

    /// The operation's id, as the outcome and the ledger name it: the
    /// caller's, or the one the policy generated for this operation (a
    /// write may carry it, e.g. in a marker a settling read looks for).
    pub fn operation_id(&self) -> &str {
        self.id
    }

    /// Say that this attempt's value is what a read made first found on
    /// the remote, and that nothing was sent: when the attempt succeeds,
    /// the write's outcome — and the ledger's record of it — says
    /// `may_have_applied: false`.
    pub fn sent_nothing(&mut self) {
        self.sent_nothing = true;
    }

    /// The credential bought for this attempt, when the operation has a source.
    pub fn credential(&self) -> Option<&Credential> {
        self.credential.as_ref()
    }

    /// The credential to send with the next request of this attempt: the
    /// one held, unless it is due ([`Credential::is_due`]: a token within
    /// its refresh margin of expiring), when a new one is bought from the
    /// operation's source first (within what remains, under the cancel
    /// flag) and held for the rest of the operation. A purchase that fails
    /// or gives a credential already refused keeps the one held (it has
    /// not expired yet; a refusal of it goes through the credential class
    /// as any other). Call it before each request of an attempt of several
    /// (pages of a list, a read then a write).
    pub fn credential_for_request(&mut self) -> Option<&Credential> {
        let due = self
            .credential
            .as_ref()
            .is_some_and(|c| c.is_due(std::time::SystemTime::now()));
        if due {
            if let Some(c) = (self.renew)() {
                self.credential = Some(c);
            }
        }
        self.credential.as_ref()
    }

    /// Where this attempt buys a credential when the remote answers its
    /// first request with 401: present when the operation's source is
    /// bought only after a challenge
    /// ([`CredentialSource::after_challenge`](crate::CredentialSource::after_challenge))
    /// and no credential is held yet.
    pub fn challenge(&self) -> Option<&Challenge> {
        self.challenge.as_ref()
    }

    /// The caller's cancel flag (for watchdogs).
    pub fn cancel_flag(&self) -> &CancelFlag {
        self.cancel
    }

    /// The policy's clock.
    pub fn clock(&self) -> &dyn Clock {
        self.clock
    }

    /// Record that the attempt completed `phase`.
    pub fn reached(&mut self, phase: impl Into<Cow<'static, str>>) {
        self.phase = phase.into();
    }

    /// The last phase recorded.
    pub fn phase(&self) -> &str {
        &self.phase
    }

    /// Where the layer notes the attempt's request id and waits (a clone
    /// may go to the threads the attempt starts).
    pub fn facts(&self) -> &AttemptFacts {
        &self.facts
    }

    /// The caller's headers, for every HTTP request of the attempt to the
    /// operation's host (see [`CallOptions::header`](crate::CallOptions::header)).
    pub fn headers(&self) -> &[(String, String)] {
        self.headers
    }
}

/// What a settling read is given.
pub struct ReconcileCtx<'a> {
    /// What remains of the operation's budget.
    pub remaining: Duration,
    /// This read's hard deadline: the attempt timeout, capped by what
    /// remains. A read that stalls is cut here and read again, so one stalled
    /// read cannot spend the whole operation.
    pub timeout: Duration,
    /// The number of the settling read, from 1.
    pub n: u32,
    pub(super) cancel: &'a CancelFlag,
    pub(super) credential: Option<Credential>,
    pub(super) headers: &'a [(String, String)],
}

impl ReconcileCtx<'_> {
    /// The caller's cancel flag (a cancelled write is still settled). A
    /// settling read watches it through [`CancelFlag::stops_only`]: a cancel
    /// leaves the read alone, a stop cuts it in flight.
    pub fn cancel_flag(&self) -> &CancelFlag {
        self.cancel
    }

    /// The credential of the attempt being settled, when the operation has
    /// a source (the read goes to the same remote with the same right).
    pub fn credential(&self) -> Option<&Credential> {
        self.credential.as_ref()
    }

    /// The caller's headers, for the read's HTTP requests (as the
    /// attempts'; see [`CallOptions::header`](crate::CallOptions::header)).
    pub fn headers(&self) -> &[(String, String)] {
        self.headers
    }
}

/// What a settling read found.
#[derive(Clone, Debug)]
#[must_use = "a Settlement is what the settling read found: the policy's verdict comes from it"]
pub struct Settlement<T> {
    /// Landed, not landed, or moved.
    pub verdict: Verdict,
    /// The value of a landed write (and optionally of a moved one).
    pub value: Option<T>,
    /// What the read observed.
    pub observed: BTreeMap<String, String>,
    /// For `Moved`: what was found instead, in words.
    pub cause: Option<String>,
    /// Read again while the deadline allows, though this read answered: a
    /// `landed` whose value lacks a part a later read may give (a merge
    /// whose merge commit is not readable yet). The reads go on as after a
    /// `not-landed` one; when no later read answers, this one stands.
    pub read_again: bool,
}

impl<T> Settlement<T> {
    /// The write is on the remote.
    pub fn landed(value: T, observed: BTreeMap<String, String>) -> Self {
        Settlement {
            verdict: Verdict::Landed,
            value: Some(value),
            observed,
            cause: None,
            read_again: false,
        }
    }

    /// The remote still holds what the write expected.
    pub fn not_landed(observed: BTreeMap<String, String>) -> Self {
        Settlement {
            verdict: Verdict::NotLanded,
            value: None,
            observed,
            cause: None,
            read_again: false,
        }
    }

    /// Keep a value beside a verdict that is not success (a push's per-ref
    /// results with their verdicts): the outcome carries it.
    pub fn with_value(mut self, value: T) -> Self {
        self.value = Some(value);
        self
    }

    /// Read again while the deadline allows (see
    /// [`Settlement::read_again`]); this settlement stands when no later
    /// read answers, or after a cancel.
    pub fn and_read_again(mut self) -> Self {
        self.read_again = true;
        self
    }

    /// Somebody else changed it.
    pub fn moved(
        value: Option<T>,
        observed: BTreeMap<String, String>,
        cause: impl Into<String>,
    ) -> Self {
        Settlement {
            verdict: Verdict::Moved,
            value,
            observed,
            cause: Some(cause.into()),
            read_again: false,
        }
    }
}
