//! One operation's run as a value: what every step reads ([`Run`]: the
//! policy, the operation's id, host, bounds, start and reserve) and what the
//! steps write as they go ([`RunState`], behind a mutex the retry loop and
//! its backoff share). The steps are methods of [`Run`], one file each:
//! `claim`, `attempt`, `classify`, `wait`, `settle`, `finish`.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Span;

use super::operation::Operation;
use super::policy::Policy;
use crate::bounds::Bounds;
use crate::class::{AttemptError, Effect};
use crate::clock::CancelFlag;
use crate::credential::{Credential, CredentialSource};
use crate::metric;
use crate::outcome::{AttemptRecord, OperationInfo, Outcome, OutcomeKind, Reconciled, Stopped};

/// Why the retry loop stopped calling, beyond an ordinary failure.
pub(super) enum Step<T> {
    /// An attempt failed; `when` decides.
    Failed(AttemptError),
    /// Stop before another attempt.
    Stop(Stopped),
    /// A settling read found the write moved (or it was still not landed
    /// at the last read the deadline allowed): never sent again, and it may
    /// have landed (or may still land). The value is what the read made of
    /// it, when the layer kept one; why the reads stopped (`deadline` when
    /// time ran out while it was still not landed).
    Settled(AttemptError, Option<T>, Option<Stopped>),
    /// A write's answer is unknown and no read settled it; why the reads
    /// stopped (none when there was no reconciler or a read was answered).
    Unsettled(AttemptError, Option<Stopped>),
}

/// What the steps of one run write as they go.
#[derive(Default)]
pub(super) struct RunState {
    /// Every attempt so far, a failed credential purchase included.
    pub(super) attempts: Vec<AttemptRecord>,
    /// The remote's retry hint from the last failed attempt.
    pub(super) retry_after: Option<Duration>,
    /// A credential was refused: the next pause is at least the settle time.
    pub(super) settle_needed: bool,
    /// Why the backoff stopped, when it did.
    pub(super) stopped: Option<Stopped>,
    /// The credential held, and when it was bought.
    pub(super) current: Option<(Credential, Duration)>,
    /// The remote asked for a credential once (a source bought only after
    /// a challenge is bought before every later attempt, as any source).
    pub(super) challenged: bool,
    /// Fingerprints of the credentials refused.
    pub(super) refused: Vec<String>,
    /// The last attempt failure that was a credential refusal.
    pub(super) last_refusal: Option<AttemptError>,
    /// The refusal stood because the source gave a credential already
    /// refused (its fingerprint among `refused`).
    pub(super) same_credential: bool,
    /// The last attempt failure.
    pub(super) last_error: Option<AttemptError>,
    /// What the settling reads found.
    pub(super) reconciled: Option<Reconciled>,
    /// A write's request was complete and its answer never read (nor
    /// settled as landed).
    pub(super) unsettled_complete: bool,
    /// The last attempt's value was found by a read made first and nothing
    /// was sent ([`AttemptCtx::sent_nothing`](super::AttemptCtx::sent_nothing)):
    /// the write did not apply in this operation.
    pub(super) sent_nothing: bool,
    /// When the attempt that succeeded ended: the operation ended then too
    /// (nothing runs after a success), so the clock is not read again.
    pub(super) succeeded_at: Option<Duration>,
    /// The server's words beside the protocol, from every attempt.
    pub(super) remote_messages: crate::remote_text::RemoteText,
    /// The end of an attempt whose class is not settled yet: a refused
    /// credential is `unjudged` while a fresh one may mend it, and
    /// `answered` when the refusal stands. Its span and metrics say the
    /// record's class once it is known (the next pause, or the finish).
    pub(super) pending_end: Option<PendingEnd>,
}

/// An attempt's end whose class waits for the next step (see
/// [`RunState::pending_end`]).
pub(super) struct PendingEnd {
    /// The attempt's span (held open until its class is recorded).
    pub(super) span: Span,
    /// The phase it reached.
    pub(super) phase: String,
    /// How long it took.
    pub(super) elapsed: Duration,
}

/// One operation's run: what its steps read, and its [`RunState`].
pub(super) struct Run<'p> {
    /// The policy the operation runs under.
    pub(super) policy: &'p Policy,
    /// The operation as the outcome shows it (its id, kind, effect, remote).
    pub(super) info: OperationInfo,
    /// The refs it names, for the ledger's record.
    pub(super) refs: Option<Vec<String>>,
    /// The id was generated: it needs no claim, and only a write's
    /// outcome is recorded at the end.
    pub(super) generated: bool,
    /// The host whose retry budget the operation spends.
    pub(super) host: String,
    /// The operation is a write.
    pub(super) write: bool,
    /// The policy's clock when the operation started.
    pub(super) start: Duration,
    /// The operation's bounds.
    pub(super) bounds: Bounds,
    /// What a write keeps for its settling reads (zero for a read).
    pub(super) reserve: Duration,
    /// Where credentials are bought.
    pub(super) credentials: Option<Arc<dyn CredentialSource>>,
    /// The caller's cancel flag.
    pub(super) cancel: CancelFlag,
    /// The caller's headers for every HTTP request.
    pub(super) headers: Vec<(String, String)>,
    /// What the steps wrote so far.
    pub(super) state: Mutex<RunState>,
}

/// What one attempt was, for its record and its class: the numbers every
/// [`AttemptRecord`] of it carries.
pub(super) struct Tried {
    /// The attempt number.
    pub(super) n: u32,
    /// The last phase the attempt reached.
    pub(super) phase: Cow<'static, str>,
    /// What remained of the budget when it started.
    pub(super) remaining: Duration,
    /// Its timeout.
    pub(super) timeout: Duration,
    /// The clock when it ended.
    pub(super) end: Duration,
    /// How long it took.
    pub(super) elapsed: Duration,
    /// The server's request id of its last answered HTTP request.
    pub(super) request_id: Option<String>,
    /// How long it was held on this side before sending.
    pub(super) waited: Duration,
}

impl Tried {
    /// The attempt's wait as its record keeps it: `None` when it was not
    /// held.
    pub(super) fn waited_ms(&self) -> Option<u64> {
        (!self.waited.is_zero()).then(|| ms(self.waited))
    }
}

impl<'p> Run<'p> {
    /// The run of `op` under `policy`, starting now, with the id `id`
    /// (`generated` when the policy made it).
    pub(super) fn new(policy: &'p Policy, mut op: Operation, id: String, generated: bool) -> Self {
        let start = policy.clock.now();
        let info = OperationInfo {
            id,
            kind: std::mem::take(&mut op.kind),
            effect: op.effect,
            remote: std::mem::take(&mut op.remote),
            redirected: None,
        };
        let write = op.effect == Effect::Write;
        let reserve = if write {
            op.bounds.reconcile_reserve
        } else {
            Duration::ZERO
        };
        Run {
            policy,
            info,
            refs: op.refs.take(),
            generated,
            host: op.host,
            write,
            start,
            bounds: op.bounds,
            reserve,
            credentials: op.credentials,
            cancel: op.cancel,
            headers: op.headers,
            state: Mutex::new(RunState::default()),
        }
    }

    /// OpenTelemetry's `server.address`: the remote's host without its
    /// port or user info (`host` keeps a port that is not the default).
    pub(super) fn server_address(&self) -> &str {
        let h = self.host.as_str();
        match h.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(h),
            None => h.rsplit_once(':').map_or(h, |(host, _)| host),
        }
    }

    /// A credential purchase for this operation, bounded by `limit` and
    /// the operation's cancel flag, carrying its remote and its caller's
    /// headers (a source that buys over HTTP sends them to the
    /// operation's host).
    pub(super) fn purchase(&self, limit: Duration) -> crate::credential::Purchase<'_> {
        crate::credential::Purchase::new(&self.info.remote, limit, &self.cancel)
            .with_headers(&self.headers)
    }

    /// The operation's id.
    pub(super) fn id(&self) -> &str {
        &self.info.id
    }

    /// The operation's deadline on the policy's clock.
    pub(super) fn end(&self) -> Duration {
        self.start + self.bounds.deadline
    }

    /// What remains of the budget at `now`.
    pub(super) fn remaining_at(&self, now: Duration) -> Duration {
        self.end().saturating_sub(now)
    }

    /// An outcome of `kind` for `info` with nothing in it yet: no attempt,
    /// and for a write `may_have_applied: false`.
    pub(super) fn blank<T>(&self, kind: OutcomeKind, info: OperationInfo) -> Outcome<T> {
        Outcome {
            kind,
            value: None,
            error: None,
            operation: info,
            deadline_ms: ms(self.bounds.deadline),
            elapsed_ms: 0,
            may_have_applied: if self.write { Some(false) } else { None },
            stopped: None,
            attempts: Vec::new(),
            reconciled: None,
            refused_credentials: Vec::new(),
            previous: None,
            remote_messages: Vec::new(),
            remote_messages_dropped: Default::default(),
            recorded: None,
        }
    }

    /// An attempt ended with `class` at `phase`: its span records both, and
    /// its metrics count it.
    pub(super) fn ended(&self, span: &Span, class: &str, phase: &str, elapsed: Duration) {
        span.record("phase", phase);
        span.record("class", class);
        if class != "succeeded" {
            // OpenTelemetry's `error.type`: the attempt's class, low in
            // cardinality as it asks.
            span.record("error.type", class);
        }
        metrics::counter!(
            metric::ATTEMPTS_TOTAL,
            "host" => self.host.clone(), "kind" => self.info.kind.clone(), "class" => class.to_string()
        )
        .increment(1);
        metrics::histogram!(
            metric::ATTEMPT_DURATION_SECONDS,
            "host" => self.host.clone(), "kind" => self.info.kind.clone()
        )
        .record(elapsed.as_secs_f64());
    }

    /// The pending attempt's end, recorded with `class` (the class its
    /// record says now).
    pub(super) fn settle_pending_end(&self, pending: Option<PendingEnd>, class: &str) {
        if let Some(p) = pending {
            self.ended(&p.span, class, &p.phase, p.elapsed);
        }
    }

    /// Lock the run's state.
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().expect("run state lock")
    }
}

/// What an attempt may use of `remaining`: for writes, less the reserve for
/// settling reads, but never more than half of what remains, so a write
/// whose deadline is shorter than the reserve is still tried.
pub(super) fn usable(remaining: Duration, reserve: Duration) -> Duration {
    remaining.saturating_sub(reserve.min(remaining / 2))
}

/// Whole milliseconds, saturating.
pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
