//! The evidence every operation ends with: an [`Outcome`] and its attempt
//! history, serialisable to the JSON shape of the design.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::class::{AttemptError, Class, Effect};

/// The version of the JSON document an [`Outcome`] serialises to
/// (additions keep it, changes bump it).
pub const SCHEMA: u32 = 2;

/// How this call ended: the `result` of an [`Outcome`].
///
/// Closed: the design's vocabulary of results, every one of which a caller
/// must handle, so it is not `#[non_exhaustive]` and a `match` on it needs
/// no wildcard arm (a new kind would be a breaking change, as it should:
/// every caller's handling would be incomplete). An earlier run's state,
/// which may also be `running`, is a [`PreviousResult`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// An attempt succeeded (or an unknown write was settled: landed).
    Succeeded,
    /// The remote answered; never tried again.
    Answered,
    /// No answer within the bounds. Never a claim that the work failed.
    Unknown,
    /// The operation id had been claimed already; nothing was called.
    Rejected,
    /// Stopped on this side (the object store, the disk, a lock, a token
    /// command that cannot start, a ledger that cannot be read): never the
    /// remote's answer, never tried again.
    LocalError,
}

impl OutcomeKind {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Succeeded => "succeeded",
            OutcomeKind::Answered => "answered",
            OutcomeKind::Unknown => "unknown",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::LocalError => "local-error",
        }
    }
}

/// The state of an earlier run of an operation id, as a ledger keeps it:
/// the `result` of a [`PreviousRun`], with the same kebab-case names as
/// [`OutcomeKind`] in JSON.
///
/// Closed, like [`OutcomeKind`]: a `match` on it needs no wildcard arm.
///
/// There is no `rejected`: a ledger's row is written by the run that
/// claimed the id, and a rejected call claimed nothing and records
/// nothing (the policy returns before its finish step), so no earlier run
/// can have been a rejection. [`TryFrom<OutcomeKind>`] refuses
/// [`OutcomeKind::Rejected`] for that reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreviousResult {
    /// It succeeded (or its unknown write was settled: landed).
    Succeeded,
    /// The remote answered it.
    Answered,
    /// It had no answer within its bounds.
    Unknown,
    /// It stopped on this side.
    LocalError,
    /// It has not finished and its deadline (plus the finish's floor) has
    /// not passed: it may still be running. Nothing may start it again.
    Running,
    /// It never finished and its deadline (plus the finish's floor) has
    /// passed: its process died without a finish (SIGKILL, a power loss).
    /// A write's `may_have_applied` is `true` (what it reached is in
    /// [`PreviousRun::phase`]); nothing may start it again.
    Abandoned,
}

impl PreviousResult {
    /// The kebab-case name (the same as [`OutcomeKind::as_str`] for the
    /// kinds both have).
    pub const fn as_str(self) -> &'static str {
        match self {
            PreviousResult::Succeeded => "succeeded",
            PreviousResult::Answered => "answered",
            PreviousResult::Unknown => "unknown",
            PreviousResult::LocalError => "local-error",
            PreviousResult::Running => "running",
            PreviousResult::Abandoned => "abandoned",
        }
    }

    /// How the earlier run ended as an [`OutcomeKind`]; `None` while it
    /// is running and when it was abandoned (it never ended).
    pub const fn ended(self) -> Option<OutcomeKind> {
        match self {
            PreviousResult::Succeeded => Some(OutcomeKind::Succeeded),
            PreviousResult::Answered => Some(OutcomeKind::Answered),
            PreviousResult::Unknown => Some(OutcomeKind::Unknown),
            PreviousResult::LocalError => Some(OutcomeKind::LocalError),
            PreviousResult::Running | PreviousResult::Abandoned => None,
        }
    }
}

/// A [`OutcomeKind::Rejected`] outcome offered as an earlier run's result:
/// a rejection ran nothing and is never recorded (see [`PreviousResult`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a rejected call ran nothing: it is never an earlier run's result")]
pub struct RejectedIsNotARun;

impl TryFrom<OutcomeKind> for PreviousResult {
    type Error = RejectedIsNotARun;

    fn try_from(kind: OutcomeKind) -> Result<Self, Self::Error> {
        match kind {
            OutcomeKind::Succeeded => Ok(PreviousResult::Succeeded),
            OutcomeKind::Answered => Ok(PreviousResult::Answered),
            OutcomeKind::Unknown => Ok(PreviousResult::Unknown),
            OutcomeKind::LocalError => Ok(PreviousResult::LocalError),
            OutcomeKind::Rejected => Err(RejectedIsNotARun),
        }
    }
}

/// An earlier run that ended as `kind` (never a `running` one).
impl PartialEq<OutcomeKind> for PreviousResult {
    fn eq(&self, kind: &OutcomeKind) -> bool {
        self.ended() == Some(*kind)
    }
}

/// As `PreviousResult == OutcomeKind`.
impl PartialEq<PreviousResult> for OutcomeKind {
    fn eq(&self, result: &PreviousResult) -> bool {
        result == self
    }
}

impl TryFrom<PreviousResult> for OutcomeKind {
    /// The earlier run is still `running`, or was `abandoned`.
    type Error = PreviousResult;

    fn try_from(result: PreviousResult) -> Result<Self, Self::Error> {
        result.ended().ok_or(result)
    }
}

/// Why the operation stopped trying.
///
/// Not exhaustive: a new bound or a new way to stop (a new kind of budget)
/// adds a reason, and a caller's `match` keeps a wildcard arm for it (the
/// outcome's kind says what to do; this says why).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// The overall deadline left no room for another attempt.
    Deadline,
    /// The maximum number of attempts was made.
    MaxAttempts,
    /// The remote asked for a wait longer than what remained.
    RetryHintExceedsBudget,
    /// The host's retry budget (token bucket) was empty.
    RetryBudgetEmpty,
    /// A credential refusal stands.
    CredentialRefused,
    /// The caller raised the cancel flag.
    Cancelled,
    /// A failure on this side stopped it.
    LocalError,
}

impl Stopped {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stopped::Deadline => "deadline",
            Stopped::MaxAttempts => "max-attempts",
            Stopped::RetryHintExceedsBudget => "retry-hint-exceeds-budget",
            Stopped::RetryBudgetEmpty => "retry-budget-empty",
            Stopped::CredentialRefused => "credential-refused",
            Stopped::Cancelled => "cancelled",
            Stopped::LocalError => "local-error",
        }
    }
}

/// One attempt in the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Attempt number, from 1.
    pub n: u32,
    /// The last phase the attempt completed (a phase name is usually a
    /// `&'static str`, so recording it allocates nothing).
    pub phase: Cow<'static, str>,
    /// The class of its failure; `None` on success.
    pub class: Option<Class>,
    /// The remote's words or what happened; `None` on success.
    pub cause: Option<String>,
    /// The operation's remaining budget when the attempt started (ms).
    pub remaining_ms: u64,
    /// The attempt's timeout (ms), capped by the remaining budget.
    pub timeout_ms: u64,
    /// The delay chosen after it (ms); `None` when no attempt followed.
    pub delay_ms: Option<u64>,
    /// How long the attempt itself took (ms).
    pub elapsed_ms: u64,
    /// The server's request id (`x-github-request-id`, else
    /// `x-request-id`) of the attempt's last answered HTTP request (for a
    /// failed purchase of a credential, the seller's); `None` when no
    /// HTTP request of it was answered, or the answer named none. What to
    /// give the forge's support.
    #[serde(default)]
    pub request_id: Option<String>,
    /// How long the attempt was held on this side before its request went
    /// out (the forge's write gate), when it was (ms). Shown by the CLI's
    /// attempt table; not part of the JSON document.
    #[serde(skip)]
    pub waited_ms: Option<u64>,
}

/// What settling an unknown write by reading found.
///
/// Closed: a read finds the write, the expected value, or something else;
/// there is no fourth answer, so it is not `#[non_exhaustive]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The write is on the remote: success.
    Landed,
    /// The remote held the value the write expected when it was read, at
    /// every read until the operation's deadline (read again with backoff,
    /// each pause at most half the reconcile reserve). A server that got the
    /// whole request may still apply it, so the write is never sent again:
    /// the outcome stays `unknown` with `may_have_applied: true`.
    NotLanded,
    /// Somebody else changed it: not retried. A read cannot tell whether the
    /// write landed before that change, so the outcome is `unknown` with
    /// `may_have_applied: true`.
    Moved,
}

impl Verdict {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Landed => "landed",
            Verdict::NotLanded => "not-landed",
            Verdict::Moved => "moved",
        }
    }
}

/// The `reconciled` member of an outcome: present after every write that
/// has a settling read and whose attempt was `unknown`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciled {
    /// The verdict of the last settling read that answered; `None` (JSON
    /// `null`) when no read answered (each failed, or none could be made
    /// in time).
    pub verdict: Option<Verdict>,
    /// What that read observed, per ref (`oid` or `absent`), or per key the
    /// caller chooses for forge writes; empty when no read answered.
    pub observed: BTreeMap<String, String>,
    /// Every settling read of the operation, in order, failed ones
    /// included.
    #[serde(default)]
    pub reads: Vec<SettlingRead>,
}

/// One settling read, as `reconciled.reads` lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlingRead {
    /// When the read ended, from the operation's start (ms).
    pub elapsed_ms: u64,
    /// What it found; `None` (JSON `null`) when the read itself failed (a
    /// refused connection, a cut, a timeout, a 5xx: read again; or an
    /// answer such as a 404: the reads end).
    pub verdict: Option<Verdict>,
    /// Why the read failed, in the remote's words or what happened; `None`
    /// when it found a verdict.
    #[serde(default)]
    pub cause: Option<String>,
}

/// The earlier run of a claimed operation id, carried by a rejection.
///
/// One id names one logical operation: a call that re-asks an id under
/// another kind (a job's fetch id reused for its push) is rejected like any
/// other, and `kind` says what the earlier run was.
///
/// Fields may be added (a minor change): it is `#[non_exhaustive]`, built
/// by [`PreviousRun::running`] or [`Outcome::summary`] and the builders
/// beside them, never as a literal outside this crate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PreviousRun {
    /// What the earlier run was (`ls-refs`, `fetch`, `push`, `merge-pull`,
    /// …), also while it is still running; `None` when the store did not
    /// say (a run claimed or recorded before the ledger kept it).
    #[serde(default)]
    pub kind: Option<String>,
    /// How it ended, [`PreviousResult::Running`] when it has not, or
    /// [`PreviousResult::Abandoned`] when it never will.
    pub result: PreviousResult,
    /// Writes: whether the remote may hold the write (always `true` for a
    /// write still running or abandoned). Reads: `None`. A run still
    /// running whose effect the store does not know (claimed before the
    /// store kept it) is `true`: nothing says it did not write.
    #[serde(default)]
    pub may_have_applied: Option<bool>,
    /// How long it ran (ms); while it is running (or abandoned), how long
    /// ago it was claimed, as far as the store knows (`0` when it does
    /// not).
    pub elapsed_ms: u64,
    /// Its attempt history.
    pub attempts: Vec<AttemptRecord>,
    /// The furthest phase a run that has not finished recorded before
    /// taking it (a push's `pack-sent` before the pack's last byte, a
    /// forge write's `request-sent` before its request); `None` when it
    /// recorded none or the store does not keep it (a finished run's
    /// phases are in its attempts).
    #[serde(default)]
    pub phase: Option<String>,
    /// The host its claim was made on; `None` where the store did not
    /// record it.
    #[serde(default)]
    pub host: Option<String>,
    /// The process id that made its claim; `None` where the store did not
    /// record it.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The operation's deadline as its claim recorded it (ms from the
    /// claim); `None` where the store did not record it. Not part of the
    /// JSON document's `previous` (a ledger entry shows it).
    #[serde(skip)]
    pub deadline_ms: Option<u64>,
}

impl PreviousRun {
    /// An earlier run that has not finished, as a store that holds its
    /// claim answers it: `kind` as the claim recorded it, `effect` when the
    /// store knows it (`may_have_applied` is `Some(true)` for a write and
    /// when the effect is not known — nothing says it did not write —, and
    /// `None` for a read), and how long ago it was claimed (`elapsed`, as
    /// far as the store knows; zero when it does not). No attempts: they
    /// are recorded when it finishes.
    pub fn running(kind: Option<String>, effect: Option<Effect>, elapsed: Duration) -> PreviousRun {
        PreviousRun {
            kind,
            result: PreviousResult::Running,
            may_have_applied: match effect {
                Some(Effect::Read) => None,
                Some(Effect::Write) | None => Some(true),
            },
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            attempts: Vec::new(),
            phase: None,
            host: None,
            pid: None,
            deadline_ms: None,
        }
    }

    /// With what its claim recorded: the operation's deadline, the host
    /// and the process id (each `None` where the store did not keep it).
    #[must_use]
    pub fn claimed_by(
        mut self,
        deadline: Option<Duration>,
        host: Option<String>,
        pid: Option<u32>,
    ) -> Self {
        self.deadline_ms = deadline.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.host = host;
        self.pid = pid;
        self
    }

    /// With the furthest phase the run recorded.
    #[must_use]
    pub fn at_phase(mut self, phase: Option<String>) -> Self {
        self.phase = phase;
        self
    }

    /// This run, which never finished, as abandoned. A write's (and one of
    /// unknown effect) `may_have_applied` stays `true`: what it recorded is
    /// best effort, so no recorded phase proves that no request of it was
    /// ever complete. A read's stays `None`. A run that ended is returned
    /// as it is.
    #[must_use]
    pub fn abandon(mut self) -> Self {
        if self.result == PreviousResult::Running {
            self.result = PreviousResult::Abandoned;
        }
        self
    }
}

/// What the operation was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationInfo {
    /// The operation id: one id names one logical operation (a job's fetch
    /// and its push are two operations, two ids), global to the ledger
    /// whatever the kind of call. Generated when the caller gave none; a
    /// generated id of a read is not written to a ledger that outlives the
    /// process (nobody can re-ask an id nobody was given beforehand).
    pub id: String,
    /// `ls-refs`, `fetch`, `push`, `http-get`, ...
    pub kind: String,
    /// Read or write.
    pub effect: Effect,
    /// The remote, without user info.
    pub remote: String,
    /// The base an http(s) remote redirected the operation to (without
    /// user info), or `None`.
    #[serde(default)]
    pub redirected: Option<String>,
}

/// How an operation ended, with its evidence.
///
/// Dropping one unread loses the evidence a caller acts on (a write that
/// may have applied, a refusal that stands): it is `#[must_use]`.
///
/// What agrees with what: an outcome's `error` is the last attempt's
/// failure, with the class and phase its last attempt record shows, and
/// an `answered` outcome's error is class `answered`; a `rejected`
/// outcome ran nothing, so it has no error and no attempts — `previous`
/// is its evidence.
#[derive(Clone, Debug)]
#[must_use = "an Outcome is the operation's evidence: a write may have applied although it did not succeed"]
pub struct Outcome<T> {
    /// How it ended.
    pub kind: OutcomeKind,
    /// The value: set on success, and on an answer whose value the layer
    /// kept (a push's per-ref results with a rejected ref).
    pub value: Option<T>,
    /// The failure that ended it (answered, unknown, local), if any: the
    /// last attempt's, with that attempt record's class and phase. `None`
    /// on success and with `rejected` (nothing ran: see `previous`).
    pub error: Option<AttemptError>,
    /// What the operation was.
    pub operation: OperationInfo,
    /// The overall deadline (ms).
    pub deadline_ms: u64,
    /// Time from start to end (ms).
    pub elapsed_ms: u64,
    /// Writes: whether the remote may hold the write although the outcome
    /// is not success. Reads: `None`.
    ///
    /// With `rejected` (this call sent nothing), it speaks of the logical
    /// operation the id names, as far as the ledger knows, so it never
    /// contradicts `previous`: the earlier run's `may_have_applied` when
    /// that run was a write (`true` while it is still running); `false`
    /// when the earlier run was a read (nothing under this id ever wrote);
    /// `true` when nothing is known of the earlier run (the policy's own
    /// generated id passed back to it).
    pub may_have_applied: Option<bool>,
    /// Why it stopped trying, when it did.
    pub stopped: Option<Stopped>,
    /// The attempt history.
    pub attempts: Vec<AttemptRecord>,
    /// What a settling read found, when there was one.
    pub reconciled: Option<Reconciled>,
    /// Fingerprints of refused credentials.
    pub refused_credentials: Vec<String>,
    /// With `rejected`: the earlier run (its result, or `running`; what
    /// kind of operation it was when the ledger knows).
    pub previous: Option<PreviousRun>,
    /// What the server said beside the protocol (side-band 2, a hook's
    /// words), in order, one line each.
    pub remote_messages: Vec<String>,
    /// What the caps on the remote's text left out of `remote_messages`
    /// (zeros when none; see [`crate::remote_text`]).
    pub remote_messages_dropped: crate::remote_text::RemoteTextDropped,
    /// Whether the ledger recorded the outcome: `None` when nothing was to
    /// be recorded (a read under a generated id, or a generated id the
    /// ledger does not keep; a rejection), `Some(false)`
    /// when every try to write it failed.
    pub recorded: Option<bool>,
}

impl<T> Outcome<T> {
    /// An operation refused on this side before any attempt (a repository
    /// that may not be used, say): `local-error`, stopped `local-error`,
    /// no attempt and no value, `cause` kept as the error (class `local`,
    /// phase `connect`: nothing got further, its typed error beside its
    /// words), `may_have_applied: Some(false)` for a write (`None` for a
    /// read), nothing recorded, `elapsed_ms: 0`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sluice_policy::{Effect, OperationInfo, Outcome, OutcomeKind};
    ///
    /// let info = OperationInfo {
    ///     id: "op-1".into(),
    ///     kind: "push".into(),
    ///     effect: Effect::Write,
    ///     remote: "git://127.0.0.1/r.git".into(),
    ///     redirected: None,
    /// };
    /// let cause = std::io::Error::other("the repository may not be used");
    /// let out: Outcome<()> = Outcome::local_error(info, cause, Duration::from_secs(20));
    /// assert_eq!(out.kind, OutcomeKind::LocalError);
    /// assert_eq!(out.may_have_applied, Some(false));
    /// assert!(out.attempts.is_empty());
    /// assert_eq!(out.deadline_ms, 20_000);
    /// ```
    pub fn local_error(
        operation: OperationInfo,
        cause: impl std::error::Error + Send + Sync + 'static,
        deadline: Duration,
    ) -> Self {
        let write = operation.effect == Effect::Write;
        Outcome {
            kind: OutcomeKind::LocalError,
            value: None,
            error: Some(AttemptError::local("connect", cause.to_string()).with_source(cause)),
            operation,
            deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
            elapsed_ms: 0,
            may_have_applied: write.then_some(false),
            stopped: Some(Stopped::LocalError),
            attempts: Vec::new(),
            reconciled: None,
            refused_credentials: Vec::new(),
            previous: None,
            remote_messages: Vec::new(),
            remote_messages_dropped: Default::default(),
            recorded: None,
        }
    }

    /// Whether the operation succeeded.
    #[must_use]
    pub fn is_success(&self) -> bool {
        self.kind == OutcomeKind::Succeeded
    }

    /// Map the value, keeping the evidence.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        Outcome {
            kind: self.kind,
            value: self.value.map(f),
            error: self.error,
            operation: self.operation,
            deadline_ms: self.deadline_ms,
            elapsed_ms: self.elapsed_ms,
            may_have_applied: self.may_have_applied,
            stopped: self.stopped,
            attempts: self.attempts,
            reconciled: self.reconciled,
            refused_credentials: self.refused_credentials,
            previous: self.previous,
            remote_messages: self.remote_messages,
            remote_messages_dropped: self.remote_messages_dropped,
            recorded: self.recorded,
        }
    }

    /// The summary a ledger keeps of this run; `None` for a `rejected`
    /// outcome, which ran nothing and is never recorded (the id's row
    /// keeps the run that claimed it).
    #[must_use]
    pub fn summary(&self) -> Option<PreviousRun> {
        Some(PreviousRun {
            kind: Some(self.operation.kind.clone()),
            result: PreviousResult::try_from(self.kind).ok()?,
            may_have_applied: self.may_have_applied,
            elapsed_ms: self.elapsed_ms,
            attempts: self.attempts.clone(),
            phase: None,
            host: None,
            pid: None,
            deadline_ms: None,
        })
    }
}

impl<T: Serialize> Serialize for Outcome<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(16))?;
        m.serialize_entry("schema", &SCHEMA)?;
        m.serialize_entry("result", &self.kind)?;
        m.serialize_entry("operation", &self.operation)?;
        m.serialize_entry("deadline_ms", &self.deadline_ms)?;
        m.serialize_entry("elapsed_ms", &self.elapsed_ms)?;
        m.serialize_entry("may_have_applied", &self.may_have_applied)?;
        m.serialize_entry("stopped", &self.stopped)?;
        m.serialize_entry("attempts", &self.attempts)?;
        m.serialize_entry("reconciled", &self.reconciled)?;
        m.serialize_entry("refused_credentials", &self.refused_credentials)?;
        m.serialize_entry("previous", &self.previous)?;
        m.serialize_entry("remote_messages", &self.remote_messages)?;
        m.serialize_entry("remote_messages_dropped", &self.remote_messages_dropped)?;
        m.serialize_entry("recorded", &self.recorded)?;
        m.serialize_entry("value", &self.value)?;
        m.end()
    }
}
