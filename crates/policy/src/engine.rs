//! The policy engine: runs one operation's attempts under its budget.
//!
//! The loop itself is backon's `BlockingRetry`; the policy plugs in through
//! backon's extension points: a [`Backoff`](backon::Backoff) iterator that
//! wraps the exponential one and applies the remote's retry hint, the settle
//! pause, the deadline and the per-host retry budget (returning `None` to
//! stop, with the reason noted), the `when` predicate (the class × effect
//! table), and the injected sleeper.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backon::{BackoffBuilder, BlockingRetryable, ExponentialBuilder};
use tracing::field::Empty;

use crate::bounds::Bounds;
use crate::bucket::{BudgetStore, LocalBudgets, RetryBudget};
use crate::class::{AttemptError, AuthSignal, Class, Effect};
use crate::clock::{CancelFlag, Clock, Sleeper, SystemClock, ThreadSleeper};
use crate::credential::{Credential, CredentialSource};
use crate::ledger::{Claim, Ledger, MemoryLedger};
use crate::metric;
use crate::outcome::{
    AttemptRecord, OperationInfo, Outcome, OutcomeKind, PreviousRun, Reconciled, Stopped, Verdict,
};
use crate::refusal_log::{Line, RefusalLog};

/// A value that is the remote's answer rather than success (see
/// [`Policy::run_write_judged`]).
#[derive(Clone, Debug)]
pub struct Rejection {
    /// The answer, as the outcome's error (class `answered`).
    pub error: AttemptError,
    /// Whether part of the write applied (a ref updated beside one rejected).
    pub may_have_applied: bool,
}

/// What one operation is, and its bounds.
#[derive(Clone)]
pub struct Operation {
    /// `ls-refs`, `fetch`, `push`, `http-get`, ...
    pub kind: String,
    /// Read or write.
    pub effect: Effect,
    /// The remote, without user info (shown in outcomes).
    pub remote: String,
    /// The host whose retry budget the operation spends.
    pub host: String,
    /// The operation id; generated when `None`.
    pub id: Option<String>,
    /// Deadline, attempt timeout, attempts, backoff.
    pub bounds: Bounds,
    /// Where credentials are bought, when the remote needs one.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// The caller's cancel flag.
    pub cancel: CancelFlag,
}

impl Operation {
    /// An operation of `kind` and `effect` against `remote` (no user info),
    /// with the default (`command`) bounds.
    pub fn new(kind: impl Into<String>, effect: Effect, remote: impl Into<String>) -> Self {
        let remote = remote.into();
        let host = host_of(&remote);
        Operation {
            kind: kind.into(),
            effect,
            remote,
            host,
            id: None,
            bounds: Bounds::default(),
            credentials: None,
            cancel: CancelFlag::new(),
        }
    }

    /// Set the bounds.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Set the operation id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Set the credential source.
    pub fn credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// Set the cancel flag.
    pub fn cancel(mut self, flag: CancelFlag) -> Self {
        self.cancel = flag;
        self
    }
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("kind", &self.kind)
            .field("effect", &self.effect)
            .field("remote", &self.remote)
            .field("id", &self.id)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

/// The host of a URL-like remote (`scheme://[user@]host[:port]/...`, or
/// git's `[user@]host:path`), with its port when not the scheme's default
/// (http 80, https 443, ssh 22, git 9418); `local` for a local path or a
/// `file://` URL. Never user info or a path: it keys the retry budget and is
/// the `host` of spans and metrics.
pub fn host_of(remote: &str) -> String {
    let (scheme, rest) = match remote.split_once("://") {
        Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
        None => (None, remote),
    };
    let authority = match scheme {
        Some(_) => rest.split(['/', '?', '#']).next().unwrap_or(rest),
        // git's scp-like form: a colon before any slash.
        None => match remote.split_once(':') {
            Some((before, _)) if !before.contains('/') && !before.is_empty() => before,
            _ => return "local".to_string(),
        },
    };
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if hostport.is_empty() {
        return "local".to_string();
    }
    // `[v6]:port` or `host:port`.
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, tail)) => (&hostport[..addr.len() + 2], tail.strip_prefix(':')),
            None => (hostport, None),
        },
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let default = match scheme.as_deref() {
        Some("http") => Some("80"),
        Some("https") => Some("443"),
        Some("ssh" | "git+ssh" | "ssh+git") => Some("22"),
        Some("git") => Some("9418"),
        _ => None,
    };
    match port.filter(|p| !p.is_empty() && Some(*p) != default) {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
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
    credential: Option<&'a Credential>,
    cancel: &'a CancelFlag,
    clock: &'a dyn Clock,
    phase: Cow<'static, str>,
    messages: Vec<String>,
}

impl AttemptCtx<'_> {
    /// Keep a line the server said beside the protocol (side-band 2, a
    /// hook's words): the outcome's `remote_messages`, in order.
    pub fn remote_message(&mut self, line: impl Into<String>) {
        self.messages.push(line.into());
    }

    /// The credential bought for this attempt, when the operation has a source.
    pub fn credential(&self) -> Option<&Credential> {
        self.credential
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
    cancel: &'a CancelFlag,
    credential: Option<Credential>,
}

impl ReconcileCtx<'_> {
    /// The caller's cancel flag (a cancelled write is still settled).
    pub fn cancel_flag(&self) -> &CancelFlag {
        self.cancel
    }

    /// The credential of the attempt being settled, when the operation has
    /// a source (the read goes to the same remote with the same right).
    pub fn credential(&self) -> Option<&Credential> {
        self.credential.as_ref()
    }
}

/// What a settling read found.
#[derive(Clone, Debug)]
pub struct Settlement<T> {
    /// Landed, not landed, or moved.
    pub verdict: Verdict,
    /// The value of a landed write (and optionally of a moved one).
    pub value: Option<T>,
    /// What the read observed.
    pub observed: BTreeMap<String, String>,
    /// For `Moved`: what was found instead, in words.
    pub cause: Option<String>,
}

impl<T> Settlement<T> {
    /// The write is on the remote.
    pub fn landed(value: T, observed: BTreeMap<String, String>) -> Self {
        Settlement {
            verdict: Verdict::Landed,
            value: Some(value),
            observed,
            cause: None,
        }
    }

    /// The remote still holds what the write expected.
    pub fn not_landed(observed: BTreeMap<String, String>) -> Self {
        Settlement {
            verdict: Verdict::NotLanded,
            value: None,
            observed,
            cause: None,
        }
    }

    /// Keep a value beside a verdict that is not success (a push's per-ref
    /// results with their verdicts): the outcome carries it.
    pub fn with_value(mut self, value: T) -> Self {
        self.value = Some(value);
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
        }
    }
}

/// The policy value: clock, sleeper, ledger, retry budgets, credential
/// figures. `Send + Sync`, meant to be shared by every operation of a client.
pub struct Policy {
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    ledger: Arc<dyn Ledger>,
    retry_budget: RetryBudget,
    budgets: Arc<dyn BudgetStore>,
    settle: Duration,
    fresh_window: Duration,
    jitter_seed: Option<u64>,
    counter: AtomicU64,
    /// `op-<pid>-<instance>-`: the prefix of the ids this policy generates.
    id_prefix: String,
    /// Ids generated so far.
    ids: AtomicU64,
    /// Which standing refusals were logged, and when (see `refusal_log`).
    refusals: RefusalLog,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("retry_budget", &self.retry_budget)
            .field("settle", &self.settle)
            .field("fresh_window", &self.fresh_window)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Policy`].
///
/// # Default
/// real clock and sleeper, in-memory ledger, [`RetryBudget::DEFAULT`] in
/// [`LocalBudgets`] (this policy value's own), settle 5 s, fresh window 10 s, random jitter.
pub struct PolicyBuilder {
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    ledger: Arc<dyn Ledger>,
    retry_budget: RetryBudget,
    budgets: Option<Arc<dyn BudgetStore>>,
    settle: Duration,
    fresh_window: Duration,
    jitter_seed: Option<u64>,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        PolicyBuilder {
            clock: Arc::new(SystemClock::new()),
            sleeper: Arc::new(ThreadSleeper),
            ledger: Arc::new(MemoryLedger::new()),
            retry_budget: RetryBudget::DEFAULT,
            budgets: None,
            settle: Duration::from_secs(5),
            fresh_window: Duration::from_secs(10),
            jitter_seed: None,
        }
    }
}

impl PolicyBuilder {
    /// Use this clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Use this sleeper.
    pub fn sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// Use this ledger (e.g. a [`crate::FileLedger`]).
    pub fn ledger(mut self, ledger: Arc<dyn Ledger>) -> Self {
        self.ledger = ledger;
        self
    }

    /// Use these retry budget figures.
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.retry_budget = budget;
        self
    }

    /// Keep the per-host buckets in `store` (e.g. one shared by several
    /// replicas through a database) instead of this policy value's own
    /// [`LocalBudgets`].
    pub fn budget_store(mut self, store: Arc<dyn BudgetStore>) -> Self {
        self.budgets = Some(store);
        self
    }

    /// The least pause before a credential bought after a refusal.
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// How long after buying a credential a 403/404 counts as its refusal.
    pub fn fresh_window(mut self, window: Duration) -> Self {
        self.fresh_window = window;
        self
    }

    /// Seed the jitter (each operation still draws its own sequence).
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// Build the policy.
    pub fn build(self) -> Policy {
        Policy {
            clock: self.clock,
            sleeper: self.sleeper,
            ledger: self.ledger,
            retry_budget: self.retry_budget,
            budgets: self
                .budgets
                .unwrap_or_else(|| Arc::new(LocalBudgets::new())),
            settle: self.settle,
            fresh_window: self.fresh_window,
            jitter_seed: self.jitter_seed,
            counter: AtomicU64::new(0),
            id_prefix: id_prefix(),
            ids: AtomicU64::new(0),
            refusals: RefusalLog::default(),
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        PolicyBuilder::default().build()
    }
}

/// Why the retry loop stopped calling, beyond an ordinary failure.
enum Step<T> {
    /// An attempt failed; `when` decides.
    Failed(AttemptError),
    /// Stop before another attempt.
    Stop(Stopped),
    /// A settling read found the write moved (or still not landed after the
    /// second read): never sent again, and it may have landed (or may still
    /// land). The value is what the read made of it, when the layer kept one.
    Settled(AttemptError, Option<T>),
    /// A write's answer is unknown and no read settled it; why the reads
    /// stopped (none when there was no reconciler or a read was answered).
    Unsettled(AttemptError, Option<Stopped>),
}

struct RunState {
    attempts: Vec<AttemptRecord>,
    retry_after: Option<Duration>,
    settle_needed: bool,
    stopped: Option<Stopped>,
    current: Option<(Credential, Duration)>,
    refused: Vec<String>,
    last_refusal: Option<AttemptError>,
    last_error: Option<AttemptError>,
    reconciled: Option<Reconciled>,
    unsettled_complete: bool,
    /// When the attempt that succeeded ended: the operation ended then too
    /// (nothing runs after a success), so the clock is not read again.
    succeeded_at: Option<Duration>,
    /// The server's words beside the protocol, from every attempt.
    remote_messages: Vec<String>,
}

/// backon's backoff, wrapped: applies hint, settle, deadline and budget.
struct PolicyBackoff<'a> {
    inner: backon::ExponentialBackoff,
    policy: &'a Policy,
    state: &'a Mutex<RunState>,
    start: Duration,
    deadline: Duration,
    reserve: Duration,
    host: &'a str,
    credentials: Option<&'a Arc<dyn CredentialSource>>,
    cancel: &'a CancelFlag,
}

impl Iterator for PolicyBackoff<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let mut st = self.state.lock().expect("run state lock");
        let Some(mut delay) = self.inner.next() else {
            st.stopped = Some(Stopped::MaxAttempts);
            return None;
        };
        let hinted = match st.retry_after.take() {
            Some(h) => {
                delay = h;
                true
            }
            None => false,
        };
        let settle = st.settle_needed;
        if settle {
            delay = delay.max(self.policy.settle);
        }
        let now = self.policy.clock.now();
        let remaining = (self.start + self.deadline).saturating_sub(now);
        // Room for another attempt once the delay is slept?
        if usable(remaining.saturating_sub(delay), self.reserve).is_zero() {
            st.stopped = Some(if hinted {
                Stopped::RetryHintExceedsBudget
            } else if settle {
                Stopped::CredentialRefused
            } else {
                Stopped::Deadline
            });
            return None;
        }
        let spent = self
            .policy
            .with_bucket(self.host, |s, host, budget| s.try_spend(host, budget, now));
        if !spent {
            st.stopped = Some(Stopped::RetryBudgetEmpty);
            return None;
        }
        if settle {
            // Buy the fresh credential now, before the pause: the settle
            // time is for the new token to settle, so it runs from its
            // purchase. A source that hands back a refused credential makes
            // the refusal stand at once, with no pause.
            if let Some(source) = self.credentials {
                let limit = usable(remaining.saturating_sub(delay), self.reserve);
                match source.credential_within(limit, self.cancel) {
                    Ok(c) if st.refused.iter().any(|f| f == c.fingerprint()) => {
                        st.stopped = Some(Stopped::CredentialRefused);
                        return None;
                    }
                    Ok(c) => st.current = Some((c, self.policy.clock.now())),
                    // The attempt buys again and records the failure.
                    Err(e) => tracing::debug!(error = %e, "could not buy a fresh credential"),
                }
            }
        }
        st.settle_needed = false;
        if let Some(last) = st.attempts.last_mut() {
            last.delay_ms = Some(ms(delay));
        }
        Some(delay)
    }
}

/// What an attempt may use of `remaining`: for writes, less the reserve for
/// settling reads, but never more than half of what remains, so a write
/// whose deadline is shorter than the reserve is still tried.
fn usable(remaining: Duration, reserve: Duration) -> Duration {
    remaining.saturating_sub(reserve.min(remaining / 2))
}

/// backon's backoff for settling reads: stops when the next read would
/// start after the deadline.
struct ReadBackoff<'a> {
    inner: backon::ExponentialBackoff,
    clock: &'a dyn Clock,
    end: Duration,
}

impl Iterator for ReadBackoff<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.inner.next()?;
        let remaining = self.end.saturating_sub(self.clock.now());
        (delay < remaining).then_some(delay)
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Policy {
    /// A builder with the documented defaults.
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// The policy's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The policy's sleeper.
    pub fn sleeper(&self) -> &Arc<dyn Sleeper> {
        &self.sleeper
    }

    /// Act on `host`'s retry budget, then set its gauge
    /// ([`metric::RETRY_BUDGET_TOKENS`]) to what it holds.
    fn with_bucket<R>(
        &self,
        host: &str,
        f: impl FnOnce(&dyn BudgetStore, &str, &RetryBudget) -> (R, f64),
    ) -> R {
        let (r, tokens) = f(self.budgets.as_ref(), host, &self.retry_budget);
        metrics::gauge!(metric::RETRY_BUDGET_TOKENS, "host" => host.to_string()).set(tokens);
        r
    }

    /// Empty `host`'s retry budget: failures against it are not retried
    /// until it refills.
    pub fn drain_retry_budget(&self, host: &str) {
        let now = self.clock.now();
        self.with_bucket(host, |s, host, budget| {
            s.drain(host, budget, now);
            ((), 0.0)
        });
    }

    fn new_id(&self) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(self.id_prefix.len() + 8);
        id.push_str(&self.id_prefix);
        let _ = std::fmt::Write::write_fmt(&mut id, format_args!("{n}"));
        id
    }

    /// `id` is one this policy generated already (a caller passing back
    /// the id of an earlier outcome): it was run once, so it is taken.
    fn generated_before(&self, id: &str) -> bool {
        id.strip_prefix(self.id_prefix.as_str())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n < self.ids.load(Ordering::Relaxed))
    }

    /// Run a read (or a write that has no settling read: an unknown answer
    /// then ends the operation `unknown` with `may_have_applied: true`).
    pub fn run<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
    ) -> Outcome<T> {
        self.execute(
            op,
            attempt,
            None::<fn(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>>,
            |_: &T| None,
        )
    }

    /// [`Policy::run`], where a value can be the remote's answer rather than
    /// success (a fetch with a ref refused by git's rules): `judge` looks at
    /// the value, and a [`Rejection`] makes the outcome `answered`, keeping
    /// the value.
    pub fn run_judged<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T> {
        self.execute(
            op,
            attempt,
            None::<fn(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>>,
            judge,
        )
    }

    /// Run a write whose unknown answer is settled by `reconcile`, a read.
    ///
    /// `reconcile` is called only after an attempt whose request was
    /// complete and whose answer was not read (a cut, a timeout, a cancel);
    /// it is retried (as reads are, through backon, at most `max_attempts`
    /// reads) until it answers or the budget is spent. **The write is never
    /// attempted again after that**, whatever the read finds: landed is
    /// success; not landed is read once more after half the reconcile
    /// reserve (a server that got the whole request may still be applying
    /// it) and, still not there, ends `unknown` with `may_have_applied:
    /// true` and verdict `not-landed`; moved ends `unknown` with
    /// `may_have_applied: true` (the write may have landed and been built
    /// upon before the read). The caller's next round acts on what the
    /// remote holds.
    pub fn run_write<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: impl FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    ) -> Outcome<T> {
        self.execute(op, attempt, Some(reconcile), |_: &T| None)
    }

    /// [`Policy::run_write`], where a value can be the remote's answer
    /// rather than success (a push whose report rejected a ref): `judge`
    /// looks at every value the write ends with, and a [`Rejection`] makes
    /// the outcome `answered`, keeping the value.
    pub fn run_write_judged<T>(
        &self,
        op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: impl FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T> {
        self.execute(op, attempt, Some(reconcile), judge)
    }

    /// Run one operation inside its `operation` span; record its metrics
    /// and log its end.
    fn execute<T, R>(
        &self,
        mut op: Operation,
        attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        reconcile: Option<R>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        // A generated id is unique by construction (process, clock, counter):
        // it needs no claim, only its record at the end.
        let generated = op.id.is_none();
        let id = op.id.take().unwrap_or_else(|| self.new_id());
        let span = tracing::info_span!(
            "operation",
            id = %id,
            kind = %op.kind,
            effect = op.effect.as_str(),
            host = %op.host,
        );
        let _entered = span.enter();
        let host = op.host.clone();
        let write = op.effect == Effect::Write;
        let out = self.execute_in_span(op, id, generated, attempt, reconcile, judge);

        let kind = out.operation.kind.clone();
        let result = out.kind.as_str();
        metrics::counter!(metric::OPERATIONS_TOTAL, "kind" => kind.clone(), "result" => result)
            .increment(1);
        metrics::histogram!(metric::OPERATION_DURATION_SECONDS, "kind" => kind.clone(), "result" => result)
            .record(out.elapsed_ms as f64 / 1000.0);
        // A write had an unknown attempt at most once: it is settled, never
        // sent again.
        if write && out.attempts.iter().any(|a| a.class == Some(Class::Unknown)) {
            let verdict = out
                .reconciled
                .as_ref()
                .map_or("unsettled", |r| r.verdict.as_str());
            metrics::counter!(metric::UNKNOWN_WRITES_TOTAL, "host" => host.clone(), "verdict" => verdict)
                .increment(1);
        }
        tracing::info!(
            op = %out.operation.id, kind = %kind, result,
            stopped = out.stopped.map(|s| s.as_str()), attempts = out.attempts.len(),
            elapsed_ms = out.elapsed_ms, recorded = out.recorded, "operation ended"
        );
        if write && out.kind == OutcomeKind::Unknown && out.may_have_applied == Some(true) {
            tracing::warn!(
                op = %out.operation.id, kind = %kind, host = %host,
                verdict = out.reconciled.as_ref().map(|r| r.verdict.as_str()),
                "a write ended unknown and may have applied: read what the remote holds before acting"
            );
        }
        out
    }

    fn execute_in_span<T, R>(
        &self,
        mut op: Operation,
        id: String,
        generated: bool,
        mut attempt: impl FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        mut reconcile: Option<R>,
        judge: impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let start = self.clock.now();
        let info = OperationInfo {
            id: id.clone(),
            kind: std::mem::take(&mut op.kind),
            effect: op.effect,
            remote: std::mem::take(&mut op.remote),
        };
        let bounds = op.bounds;
        let deadline = bounds.deadline;
        let write = op.effect == Effect::Write;
        let blank = |kind: OutcomeKind, info: OperationInfo| Outcome {
            kind,
            value: None,
            error: None,
            operation: info,
            deadline_ms: ms(deadline),
            elapsed_ms: 0,
            may_have_applied: if write { Some(false) } else { None },
            stopped: None,
            attempts: Vec::new(),
            reconciled: None,
            refused_credentials: Vec::new(),
            previous: None,
            remote_messages: Vec::new(),
            recorded: None,
        };
        let known_here = self.generated_before(&id) && !self.ledger.keeps_generated_ids();
        let claim = if generated {
            Ok(Claim::Claimed)
        } else if known_here {
            Ok(Claim::Taken(None))
        } else {
            self.ledger.claim(&id)
        };
        match claim {
            Ok(Claim::Claimed) => {}
            Ok(Claim::Taken(previous)) => {
                tracing::debug!(op = %id, "operation id already claimed: rejected");
                let mut o = blank(OutcomeKind::Rejected, info);
                // A claim without a finished run is still running (or its
                // process died): a write may have applied.
                o.previous = previous.or_else(|| {
                    (!known_here).then(|| PreviousRun {
                        result: OutcomeKind::Running,
                        may_have_applied: write.then_some(true),
                        elapsed_ms: 0,
                        attempts: Vec::new(),
                    })
                });
                o.error = Some(AttemptError::answered(
                    "connect",
                    format!("operation id {id:?} was claimed before"),
                ));
                return o;
            }
            Err(e) => {
                // Nothing ran: the claim could not be made on this side.
                tracing::warn!(op = %id, error = %e, "the ledger could not claim the operation id");
                let mut o = blank(OutcomeKind::LocalError, info);
                o.stopped = Some(Stopped::LocalError);
                o.error = Some(AttemptError::local("connect", e.to_string()).with_source(e));
                return o;
            }
        }

        let reserve = if write {
            bounds.reconcile_reserve
        } else {
            Duration::ZERO
        };
        let state = Mutex::new(RunState {
            attempts: Vec::new(),
            retry_after: None,
            settle_needed: false,
            stopped: None,
            current: None,
            refused: Vec::new(),
            last_refusal: None,
            last_error: None,
            reconciled: None,
            unsettled_complete: false,
            succeeded_at: None,
            remote_messages: Vec::new(),
        });
        let backoff = PolicyBackoff {
            inner: self.exponential(&bounds),
            policy: self,
            state: &state,
            start,
            deadline,
            reserve,
            host: &op.host,
            credentials: op.credentials.as_ref(),
            cancel: &op.cancel,
        };
        let cancel = op.cancel.clone();
        let sleeper = Arc::clone(&self.sleeper);
        let sleep_cancel = op.cancel.clone();
        let mut n: u32 = 0;

        let kind = info.kind.clone();
        let step = || -> Result<T, Step<T>> {
            if cancel.is_cancelled() {
                return Err(Step::Stop(Stopped::Cancelled));
            }
            let mut now = self.clock.now();
            let remaining = (start + deadline).saturating_sub(now);
            if usable(remaining, reserve).is_zero() {
                return Err(Step::Stop(Stopped::Deadline));
            }
            // Everything the attempt does, on this thread and on the threads
            // it starts (they enter `Span::current()`), is inside this span;
            // its phase and class are recorded when it ends.
            let span = tracing::info_span!("attempt", n = n + 1, phase = Empty, class = Empty);
            let entered = span.enter();
            let ended = |class: &str, phase: &str, elapsed: Duration| {
                span.record("phase", phase);
                span.record("class", class);
                metrics::counter!(
                    metric::ATTEMPTS_TOTAL,
                    "host" => op.host.clone(), "kind" => kind.clone(), "class" => class.to_string()
                )
                .increment(1);
                metrics::histogram!(
                    metric::ATTEMPT_DURATION_SECONDS,
                    "host" => op.host.clone(), "kind" => kind.clone()
                )
                .record(elapsed.as_secs_f64());
            };
            // Buy a credential when the operation needs one and holds none
            // (the first attempt, or a purchase after a refusal failed). The
            // purchase is bounded by what remains and by the cancel flag; a
            // failed one is an attempt of its own, phase `credential`.
            if let Some(source) = &op.credentials {
                let mut st = state.lock().expect("run state lock");
                if st.current.is_none() {
                    let before = now;
                    let limit = usable(remaining, reserve);
                    match source.credential_within(limit, &cancel) {
                        Ok(c) => {
                            if st.refused.iter().any(|f| f == c.fingerprint()) {
                                return Err(Step::Stop(Stopped::CredentialRefused));
                            }
                            now = self.clock.now();
                            st.current = Some((c, now));
                        }
                        Err(e) => {
                            n += 1;
                            let local = e.local;
                            let err = if local {
                                AttemptError::local("credential", e.message.clone())
                            } else {
                                AttemptError::unjudged("credential", e.message.clone())
                            }
                            .with_source(e);
                            let took = self.clock.now().saturating_sub(before);
                            ended(err.class.as_str(), "credential", took);
                            tracing::debug!(op = %id, n, class = err.class.as_str(), cause = %err.cause, "credential purchase failed");
                            st.attempts.push(AttemptRecord {
                                n,
                                phase: "credential".into(),
                                class: Some(err.class),
                                cause: Some(err.cause.clone()),
                                remaining_ms: ms(remaining),
                                timeout_ms: ms(limit),
                                delay_ms: None,
                                elapsed_ms: ms(took),
                            });
                            st.last_error = Some(err.clone());
                            return Err(Step::Failed(err));
                        }
                    }
                }
            }
            // Buying takes time: the budget is computed again.
            let remaining = (start + deadline).saturating_sub(now);
            let usable = usable(remaining, reserve);
            if usable.is_zero() {
                return Err(Step::Stop(Stopped::Deadline));
            }
            n += 1;
            let timeout = bounds.attempt_timeout.min(usable);
            let credential = state.lock().expect("run state lock").current.clone();
            let mut ctx = AttemptCtx {
                n,
                timeout,
                remaining,
                limit: usable,
                credential: credential.as_ref().map(|(c, _)| c),
                cancel: &cancel,
                clock: &*self.clock,
                phase: Cow::Borrowed("connect"),
                messages: Vec::new(),
            };
            let result = attempt(&mut ctx);
            let phase = ctx.phase.clone();
            let messages = std::mem::take(&mut ctx.messages);
            let end = self.clock.now();
            let elapsed = end.saturating_sub(now);
            let mut st = state.lock().expect("run state lock");
            st.remote_messages.extend(messages);
            match result {
                Ok(v) => {
                    // A value the remote's answer (a push's rejected ref) is
                    // an answered attempt, as the outcome will say.
                    let class = if judge(&v).is_some() {
                        Class::Answered.as_str()
                    } else {
                        "succeeded"
                    };
                    ended(class, &phase, elapsed);
                    tracing::debug!(op = %id, n, phase = %phase, "attempt succeeded");
                    for e in self.refusals.recovered(&op.host, end) {
                        tracing::info!(
                            host = %op.host, cause = %e.cause, repeats = e.unreported,
                            standing_s = e.standing.as_secs(),
                            "credential refusal no longer stands"
                        );
                    }
                    st.attempts.push(AttemptRecord {
                        n,
                        phase,
                        class: None,
                        cause: None,
                        remaining_ms: ms(remaining),
                        timeout_ms: ms(timeout),
                        delay_ms: None,
                        elapsed_ms: ms(elapsed),
                    });
                    st.succeeded_at = Some(end);
                    Ok(v)
                }
                Err(mut e) => {
                    if e.auth == Some(AuthSignal::Unauthorized) && op.credentials.is_none() {
                        // Nothing to buy afresh: trying again cannot change it.
                        e.class = Class::Answered;
                        e.cause = format!(
                            "{} (no credential was given: give one with --token-command \
                             or user info in the URL)",
                            e.cause
                        );
                    }
                    if let (Some(auth), Some((cred, bought))) = (e.auth, &st.current) {
                        let refused = match auth {
                            AuthSignal::Unauthorized => true,
                            // Within the window of buying, when the answer came.
                            AuthSignal::ForbiddenOrNotFound => {
                                end.saturating_sub(*bought) <= self.fresh_window
                            }
                        };
                        if refused {
                            let fp = cred.fingerprint().to_string();
                            tracing::debug!(op = %id, n, credential = %fp, "credential refused");
                            metrics::counter!(metric::CREDENTIAL_REFUSALS_TOTAL, "host" => op.host.clone())
                                .increment(1);
                            if let Some(source) = &op.credentials {
                                source.refused(&fp);
                            }
                            if !st.refused.contains(&fp) {
                                st.refused.push(fp);
                            }
                            st.current = None;
                            st.settle_needed = true;
                            e.class = Class::Unjudged;
                            st.last_refusal = Some(e.clone());
                        }
                    }
                    ended(e.class.as_str(), &e.phase, elapsed);
                    tracing::debug!(
                        op = %id, n, phase = %e.phase, class = e.class.as_str(),
                        cause = %e.cause, "attempt failed"
                    );
                    st.attempts.push(AttemptRecord {
                        n,
                        phase: e.phase.clone(),
                        class: Some(e.class),
                        cause: Some(e.cause.clone()),
                        remaining_ms: ms(remaining),
                        timeout_ms: ms(timeout),
                        delay_ms: None,
                        elapsed_ms: ms(elapsed),
                    });
                    st.retry_after = e.retry_after;
                    st.last_error = Some(e.clone());
                    if e.class == Class::Unknown && write {
                        st.unsettled_complete = true;
                        drop(st);
                        // The settling reads are not this attempt: each has
                        // a span of its own.
                        drop(entered);
                        return self.settle(
                            &id,
                            e,
                            reconcile.as_mut(),
                            &state,
                            start,
                            &bounds,
                            &cancel,
                        );
                    }
                    Err(Step::Failed(e))
                }
            }
        };

        let result = step
            .retry(backoff)
            .sleep(move |d: Duration| sleeper.sleep(d, sleep_cancel.as_atomic()))
            .when(|s: &Step<T>| match s {
                Step::Failed(e) => {
                    // Tried again: what the remote never judged, and a
                    // read's unknown answer; never an answer, a local
                    // failure, a write's unknown answer, or after a cancel.
                    let settled_elsewhere = match e.class {
                        Class::Answered | Class::Local => true,
                        Class::Unknown => write,
                        Class::Unjudged => false,
                    };
                    !settled_elsewhere && !op.cancel.is_cancelled()
                }
                _ => false,
            })
            .call();

        let st = state.into_inner().expect("run state lock");
        let ended = match (&result, st.succeeded_at) {
            (Ok(_), Some(at)) => at,
            _ => self.clock.now(),
        };
        let elapsed = ended.saturating_sub(start);
        let mut out = blank(OutcomeKind::Unknown, info);
        out.elapsed_ms = ms(elapsed);
        out.attempts = st.attempts;
        out.reconciled = st.reconciled;
        out.refused_credentials = st.refused;
        out.stopped = st.stopped;
        out.remote_messages = st.remote_messages;
        let cancelled = op.cancel.is_cancelled();
        let mut rejected_applied = None;
        match result {
            Ok(v) => match judge(&v) {
                None => {
                    out.kind = OutcomeKind::Succeeded;
                    out.value = Some(v);
                    out.stopped = None;
                    if write {
                        out.may_have_applied = Some(true);
                    }
                    self.with_bucket(&op.host, |s, host, budget| {
                        ((), s.credit(host, budget, ended))
                    });
                }
                Some(r) => {
                    // The remote's answer, with the value kept: the attempt
                    // that read it (or the read that found it) is answered.
                    out.kind = OutcomeKind::Answered;
                    out.value = Some(v);
                    out.stopped = None;
                    if out.reconciled.is_none() {
                        if let Some(last) = out.attempts.last_mut() {
                            last.class = Some(Class::Answered);
                            last.cause = Some(r.error.cause.clone());
                        }
                    }
                    rejected_applied = Some(r.may_have_applied);
                    out.error = Some(r.error);
                }
            },
            Err(Step::Failed(e)) => {
                let refusal_stands =
                    e.class == Class::Unjudged && st.last_refusal.as_ref() == Some(&e);
                if e.class == Class::Answered {
                    out.kind = OutcomeKind::Answered;
                    out.stopped = None;
                } else if e.class == Class::Local {
                    out.kind = OutcomeKind::LocalError;
                    out.stopped = Some(Stopped::LocalError);
                } else if refusal_stands {
                    out.kind = OutcomeKind::Answered;
                    out.stopped = Some(Stopped::CredentialRefused);
                } else if cancelled {
                    out.stopped = Some(Stopped::Cancelled);
                }
                out.error = Some(e);
            }
            Err(Step::Stop(reason)) => {
                // Stopping right after a refusal (no time or no token left
                // for a fresh credential) is a refusal that stands.
                let after_refusal = st.last_refusal.is_some() && st.last_refusal == st.last_error;
                if reason == Stopped::CredentialRefused
                    || (after_refusal && reason != Stopped::Cancelled)
                {
                    out.kind = OutcomeKind::Answered;
                    out.stopped = Some(Stopped::CredentialRefused);
                    out.error = st.last_refusal.or(st.last_error);
                } else {
                    out.stopped = Some(reason);
                    out.error = st.last_error;
                }
            }
            Err(Step::Settled(e, value)) => {
                // A read cannot tell "moved before the write" from "landed,
                // then built upon", nor "not landed" from "not landed yet":
                // never sent again, never called a failure.
                out.kind = OutcomeKind::Unknown;
                out.stopped = if cancelled {
                    Some(Stopped::Cancelled)
                } else {
                    None
                };
                out.value = value;
                out.error = Some(e);
            }
            Err(Step::Unsettled(e, why)) => {
                out.stopped = if cancelled {
                    Some(Stopped::Cancelled)
                } else {
                    why
                };
                out.error = Some(e);
            }
        }
        if write && out.kind != OutcomeKind::Succeeded {
            out.may_have_applied = Some(st.unsettled_complete || rejected_applied == Some(true));
        }
        if out.kind == OutcomeKind::Answered && out.stopped == Some(Stopped::CredentialRefused) {
            let cause = out
                .error
                .as_ref()
                .map(|e| e.cause.clone())
                .unwrap_or_default();
            match self.refusals.stood(&op.host, &cause, ended) {
                Line::Started => tracing::warn!(
                    host = %op.host, cause = %cause, refused = ?out.refused_credentials,
                    "credential refusal stands"
                ),
                Line::Repeats { repeats, standing } => tracing::warn!(
                    host = %op.host, cause = %cause, refused = ?out.refused_credentials,
                    repeats, standing_s = standing.as_secs(),
                    "credential refusal stands"
                ),
                Line::Quiet => {}
            }
        }
        let record = !generated || self.ledger.keeps_generated_ids();
        if record {
            out.recorded = Some(self.record(&id, &out, start + deadline));
        }
        out
    }

    /// Write the outcome to the ledger, trying again (as reads are, with
    /// backoff) while the operation's budget lasts; `false` when it never
    /// was written.
    fn record<T>(&self, id: &str, out: &Outcome<T>, end: Duration) -> bool {
        let summary = out.summary();
        let mut tries = 0u32;
        loop {
            tries += 1;
            match self.ledger.finish(id, summary.clone()) {
                Ok(()) => return true,
                Err(e) => {
                    let pause = Duration::from_millis(50) * tries.min(10);
                    let remaining = end.saturating_sub(self.clock.now());
                    if remaining <= pause {
                        tracing::warn!(op = %id, error = %e, tries, "could not record the outcome in the ledger");
                        return false;
                    }
                    tracing::debug!(op = %id, error = %e, "recording the outcome failed; trying again");
                    self.sleeper.sleep(pause, &AtomicBool::new(false));
                }
            }
        }
    }

    /// backon's exponential backoff in `bounds`' shape, allowing at most
    /// `max_attempts - 1` retries.
    fn exponential(&self, bounds: &Bounds) -> backon::ExponentialBackoff {
        let max_retries = bounds.max_attempts.max(1).saturating_sub(1) as usize;
        let shape = bounds.backoff;
        let mut exp = ExponentialBuilder::new()
            .with_min_delay(shape.min_delay)
            .with_max_delay(shape.max_delay)
            .with_factor(shape.factor)
            .with_max_times(max_retries);
        if shape.jitter {
            exp = exp.with_jitter();
            if let Some(seed) = self.jitter_seed {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                exp = exp.with_jitter_seed(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
        }
        exp.build()
    }

    /// Settle an unknown write by the caller's read, retried (as reads are,
    /// through backon, at most `max_attempts` reads) until it answers or the
    /// budget is spent. A `not-landed` verdict is read once more after half
    /// the reconcile reserve; the write is never attempted again.
    #[allow(clippy::too_many_arguments)]
    fn settle<T, R>(
        &self,
        id: &str,
        err: AttemptError,
        reconcile: Option<&mut R>,
        state: &Mutex<RunState>,
        start: Duration,
        bounds: &Bounds,
        cancel: &CancelFlag,
    ) -> Result<T, Step<T>>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let Some(reconcile) = reconcile else {
            return Err(Step::Unsettled(err, None));
        };
        let end = start + bounds.deadline;
        let mut reads = 0u32;
        let mut s = match self.settling_read(id, reconcile, state, end, bounds, cancel, &mut reads)
        {
            Ok(s) => s,
            Err(why) => return Err(Step::Unsettled(err, why)),
        };
        if s.verdict == Verdict::NotLanded {
            // The server may still be applying what it received (hooks and
            // checks run after the last byte, whether or not we are there):
            // look once more after half the reserve.
            let pause = (bounds.reconcile_reserve / 2).min(end.saturating_sub(self.clock.now()));
            tracing::debug!(op = %id, pause = ?pause, "not landed yet: reading once more");
            self.sleeper.sleep(pause, &AtomicBool::new(false));
            if let Ok(again) =
                self.settling_read(id, reconcile, state, end, bounds, cancel, &mut reads)
            {
                s = again;
            }
        }
        tracing::debug!(op = %id, verdict = s.verdict.as_str(), "unknown write settled by reading");
        let mut st = state.lock().expect("run state lock");
        st.reconciled = Some(Reconciled {
            verdict: s.verdict,
            observed: s.observed,
        });
        match s.verdict {
            Verdict::Landed => match s.value {
                Some(v) => {
                    st.unsettled_complete = false;
                    Ok(v)
                }
                // Landed without a value to return: the write is on the
                // remote, but the caller gave nothing to succeed with.
                None => Err(Step::Unsettled(err, None)),
            },
            Verdict::NotLanded => Err(Step::Settled(
                AttemptError::unknown(
                    err.phase.clone(),
                    format!(
                        "{} (settled by reading: not landed as of the last read; \
                         it may still land, and it is not sent again)",
                        err.cause
                    ),
                ),
                s.value,
            )),
            Verdict::Moved => Err(Step::Settled(
                AttemptError::unknown(
                    err.phase.clone(),
                    s.cause.unwrap_or_else(|| "moved by somebody else".into()),
                ),
                s.value,
            )),
        }
    }

    /// One settling read, retried through backon until it answers or the
    /// budget is spent; `Err` carries why the reads stopped (`None` when a
    /// read was answered).
    #[allow(clippy::too_many_arguments)]
    fn settling_read<T, R>(
        &self,
        id: &str,
        reconcile: &mut R,
        state: &Mutex<RunState>,
        end: Duration,
        bounds: &Bounds,
        cancel: &CancelFlag,
        reads: &mut u32,
    ) -> Result<Settlement<T>, Option<Stopped>>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let first = *reads;
        // `Err(None)`: no time left for a read.
        let read = || -> Result<Settlement<T>, Option<AttemptError>> {
            let remaining = end.saturating_sub(self.clock.now());
            if remaining.is_zero() {
                return Err(None);
            }
            *reads += 1;
            let _span = tracing::info_span!("settling_read", n = *reads).entered();
            let credential = state
                .lock()
                .expect("run state lock")
                .current
                .as_ref()
                .map(|(c, _)| c.clone());
            let ctx = ReconcileCtx {
                remaining,
                timeout: remaining.min(bounds.attempt_timeout),
                n: *reads,
                cancel,
                credential,
            };
            reconcile(&ctx).map_err(Some)
        };
        let backoff = ReadBackoff {
            inner: self.exponential(bounds),
            clock: &*self.clock,
            end,
        };
        // A cancelled write is still settled: the caller's flag does not cut
        // the pauses between settling reads short (the deadline bounds them).
        let sleeper = Arc::clone(&self.sleeper);
        let uncancelled = AtomicBool::new(false);
        let result = read
            .retry(backoff)
            .sleep(move |d: Duration| sleeper.sleep(d, &uncancelled))
            .when(|e: &Option<AttemptError>| matches!(e, Some(e) if e.class != Class::Answered))
            .notify(|e: &Option<AttemptError>, d: Duration| {
                if let Some(e) = e {
                    tracing::debug!(op = %id, cause = %e.cause, delay = ?d, "settling read failed; reading again");
                }
            })
            .call();
        result.map_err(|e| {
            tracing::debug!(op = %id, reads = *reads, "no settling read answered");
            match &e {
                Some(e) if e.class == Class::Answered => {
                    tracing::debug!(op = %id, cause = %e.cause, "settling read answered");
                    None
                }
                Some(_) if *reads - first >= bounds.max_attempts.max(1) => {
                    Some(Stopped::MaxAttempts)
                }
                _ => Some(Stopped::Deadline),
            }
        })
    }
}

/// The prefix of one policy's generated ids: the process, and this policy
/// among the process's policies (the clock at its making, and a counter).
fn id_prefix() -> String {
    static POLICIES: AtomicU64 = AtomicU64::new(0);
    let k = POLICIES.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!("op-{}-{:x}-", std::process::id(), t ^ k.rotate_left(48))
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn a_host_keeps_a_port_that_is_not_the_default_and_never_user_info_or_a_path() {
        let cases = [
            (
                "https://x-access-token:s3cret@example.com/o/r.git",
                "example.com",
            ),
            ("https://user@example.com:443/o/r", "example.com"),
            ("HTTPS://example.com:8443/o/r", "example.com:8443"),
            ("http://127.0.0.1:80", "127.0.0.1"),
            ("http://127.0.0.1:8080?q=1", "127.0.0.1:8080"),
            ("git://127.0.0.1:9418/r", "127.0.0.1"),
            ("git://127.0.0.1:39418/r", "127.0.0.1:39418"),
            ("ssh://git@example.com:2222/r", "example.com:2222"),
            ("ssh://git@example.com:22/r", "example.com"),
            ("http://[::1]:8080/r", "[::1]:8080"),
            ("http://u:p@[::1]/r", "[::1]"),
            ("git@example.com:o/r.git", "example.com"),
            ("/srv/git/r.git", "local"),
            ("./r.git", "local"),
            ("file:///srv/git/r.git", "local"),
        ];
        for (remote, host) in cases {
            assert_eq!(host_of(remote), host, "{remote}");
        }
    }
}
