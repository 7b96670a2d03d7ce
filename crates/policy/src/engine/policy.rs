//! The policy value ([`Policy`], built by [`PolicyBuilder`]): what every
//! operation of a client shares — clock, sleeper, ledger, retry budgets,
//! credential figures — and the helpers the steps of a run call on it
//! (the host's bucket, generated ids, the ledger's finish, backon's
//! exponential backoff).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backon::{BackoffBuilder, ExponentialBuilder};

use crate::bounds::Bounds;
use crate::bucket::{BudgetStore, LocalBudgets, RetryBudget, BUDGET_WAIT};
use crate::clock::{Clock, Sleeper, SystemClock, ThreadSleeper};
use crate::ledger::{FinishRequest, Ledger, MemoryLedger, FINISH_FLOOR};
use crate::metric;
use crate::outcome::Outcome;
use crate::refusal_log::RefusalLog;

/// The policy value: clock, sleeper, ledger, retry budgets, credential
/// figures. `Send + Sync`, meant to be shared by every operation of a client.
pub struct Policy {
    pub(super) clock: Arc<dyn Clock>,
    pub(super) sleeper: Arc<dyn Sleeper>,
    pub(super) ledger: Arc<dyn Ledger>,
    pub(super) retry_budget: RetryBudget,
    pub(super) budgets: Arc<dyn BudgetStore>,
    pub(super) settle: Duration,
    pub(super) fresh_window: Duration,
    pub(super) jitter_seed: Option<u64>,
    pub(super) counter: AtomicU64,
    /// `op-<pid>-<instance>-`: the prefix of the ids this policy generates.
    pub(super) id_prefix: String,
    /// Ids generated so far.
    pub(super) ids: AtomicU64,
    /// Which standing refusals were logged, and when (see `refusal_log`).
    pub(super) refusals: RefusalLog,
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
    pub(super) fn with_bucket<R>(
        &self,
        host: &str,
        f: impl FnOnce(&dyn BudgetStore, &str, &RetryBudget) -> (R, f64),
    ) -> R {
        let (r, tokens) = f(self.budgets.as_ref(), host, &self.retry_budget);
        metrics::gauge!(metric::RETRY_BUDGET_TOKENS, "host" => host.to_string()).set(tokens);
        r
    }

    /// Empty `host`'s retry budget: failures against it are not retried
    /// until it refills. A shared store is waited for at most
    /// [`BUDGET_WAIT`](crate::BUDGET_WAIT) (no operation's deadline bounds it).
    pub fn drain_retry_budget(&self, host: &str) {
        let now = self.clock.now();
        self.with_bucket(host, |s, host, budget| {
            s.drain(host, budget, now, BUDGET_WAIT);
            ((), 0.0)
        });
    }

    /// A new generated id: this policy's prefix and a counter.
    pub(super) fn new_id(&self) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(self.id_prefix.len() + 8);
        id.push_str(&self.id_prefix);
        let _ = std::fmt::Write::write_fmt(&mut id, format_args!("{n}"));
        id
    }

    /// `id` is one this policy generated already (a caller passing back
    /// the id of an earlier outcome): it was run once, so it is taken.
    pub(super) fn generated_before(&self, id: &str) -> bool {
        id.strip_prefix(self.id_prefix.as_str())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n < self.ids.load(Ordering::Relaxed))
    }

    /// Write the outcome to the ledger, trying again (as reads are, with
    /// backoff) while the operation's budget lasts; `false` when it never
    /// was written. Each try is bounded by what remains of the deadline,
    /// but at least [`FINISH_FLOOR`]: a store that hangs makes it
    /// `recorded: false` at most that long after the deadline.
    pub(super) fn record<T>(
        &self,
        out: &Outcome<T>,
        end: Duration,
        refs: Option<&[String]>,
    ) -> bool {
        // A run that got this far claimed its id and ran: never `rejected`.
        let Some(summary) = out.summary() else {
            return false;
        };
        let info = &out.operation;
        let id = info.id.as_str();
        let mut tries = 0u32;
        loop {
            tries += 1;
            let left = end.saturating_sub(self.clock.now()).max(FINISH_FLOOR);
            let mut req = FinishRequest::new(id, info.effect, &summary, left)
                .operation(&info.kind, &info.remote);
            if let Some(refs) = refs {
                req = req.refs(refs);
            }
            match self.ledger.finish(&req) {
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
    pub(super) fn exponential(&self, bounds: &Bounds) -> backon::ExponentialBackoff {
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

    /// backon's exponential backoff for the pauses between settling reads
    /// that found a write not landed yet: `bounds`' shape, without a count
    /// (the deadline bounds them), never longer than `cap` once jittered
    /// (jitter adds up to the delay again, so a jittered shape is capped at
    /// half of it) and at least [`MIN_SETTLING_PAUSE`] (a shape of zero
    /// does not spin). The caller still clamps each pause to `cap`.
    pub(super) fn settling_pauses(
        &self,
        bounds: &Bounds,
        cap: Duration,
    ) -> backon::ExponentialBackoff {
        let shape = bounds.backoff;
        let top = if shape.jitter { cap / 2 } else { cap };
        let max = shape.max_delay.min(top).max(MIN_SETTLING_PAUSE.min(cap));
        let min = shape.min_delay.max(MIN_SETTLING_PAUSE).min(max);
        let mut exp = ExponentialBuilder::new()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(shape.factor)
            .without_max_times();
        if shape.jitter {
            exp = exp.with_jitter();
            if let Some(seed) = self.jitter_seed {
                let n = self.counter.fetch_add(1, Ordering::Relaxed);
                exp = exp.with_jitter_seed(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
        }
        exp.build()
    }
}

/// The least pause between two settling reads.
pub(super) const MIN_SETTLING_PAUSE: Duration = Duration::from_millis(10);

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
