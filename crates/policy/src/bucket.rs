//! The per-host retry budget: a token bucket shared by every operation of one
//! policy value, so retries add bounded load when a remote is down for all.
//!
//! Where the buckets live is a [`BudgetStore`]: [`LocalBudgets`] (the
//! default) keeps them in the process; a store in a database shared by
//! several replicas (sluice-ledger's PostgreSQL store) makes one budget of
//! them all.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::time::Duration;

/// The figures of the retry budget.
///
/// A retry spends one token; a success earns back `success_credit`; tokens
/// also refill at `refill_per_sec`, up to `capacity`. Over an outage of
/// length `T` with `N` operations the downstream calls are at most
/// `N + capacity + refill_per_sec × T`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    /// Tokens in a full bucket (and at start).
    pub capacity: f64,
    /// Tokens added per second.
    pub refill_per_sec: f64,
    /// Tokens earned back by a success.
    pub success_credit: f64,
}

impl RetryBudget {
    /// # Default
    /// 20 tokens, 1 token a second, 0.1 per success.
    pub const DEFAULT: RetryBudget = RetryBudget {
        capacity: 20.0,
        refill_per_sec: 1.0,
        success_credit: 0.1,
    };

    /// No limit at all (every retry is allowed).
    pub const UNLIMITED: RetryBudget = RetryBudget {
        capacity: f64::INFINITY,
        refill_per_sec: 0.0,
        success_credit: 0.0,
    };
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where the per-host token buckets of a [`Policy`](crate::Policy) live.
///
/// Each call acts on one host's bucket atomically (with respect to every
/// other user of the same store) and returns the tokens it holds afterwards,
/// for the `sluice_remote_retry_budget_tokens` gauge. A bucket not seen
/// before starts full. `now` is the policy's monotonic clock; a store shared
/// by processes may keep its own time instead (the policy's clock means
/// nothing to another process). `left` is what remains of the operation's
/// deadline: a store that waits (on a database) waits at most
/// min(`left`, [`BUDGET_WAIT`]) and then answers from a bucket of its own
/// process, so a retry is never held up longer by the budget than by the
/// operation.
pub trait BudgetStore: Send + Sync + Debug {
    /// Spend one token of `host`'s bucket for a retry: `(true, tokens left)`,
    /// or `(false, tokens)` when it holds less than one.
    fn try_spend(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        left: Duration,
    ) -> (bool, f64);
    /// Earn back `budget.success_credit` after a success; the tokens after.
    fn credit(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) -> f64;
    /// Empty `host`'s bucket (it refills from now on).
    fn drain(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration);
}

/// The longest a [`BudgetStore`] call waits for a store shared by
/// processes before the process's own bucket answers: 1 s (less when the
/// operation has less left).
pub const BUDGET_WAIT: Duration = Duration::from_secs(1);

/// The buckets of one process: a map behind a mutex (the default
/// [`BudgetStore`]).
#[derive(Debug, Default)]
pub struct LocalBudgets {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl LocalBudgets {
    /// No buckets yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<R>(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        f: impl FnOnce(&mut Bucket) -> R,
    ) -> R {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let b = buckets
            .entry(host.to_string())
            .or_insert_with(|| Bucket::new(budget, now));
        f(b)
    }
}

/// `left` is not needed: a local bucket waits for nothing but its mutex.
impl BudgetStore for LocalBudgets {
    fn try_spend(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        _left: Duration,
    ) -> (bool, f64) {
        self.with(host, budget, now, |b| {
            (b.try_spend(budget, now), b.tokens())
        })
    }

    fn credit(&self, host: &str, budget: &RetryBudget, now: Duration, _left: Duration) -> f64 {
        self.with(host, budget, now, |b| {
            b.credit(budget, now);
            b.tokens()
        })
    }

    fn drain(&self, host: &str, budget: &RetryBudget, now: Duration, _left: Duration) {
        self.with(host, budget, now, |b| {
            b.refill(budget, now);
            b.drain()
        })
    }
}

/// One host's bucket.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    tokens: f64,
    at: Duration,
}

impl Bucket {
    pub(crate) fn new(budget: &RetryBudget, now: Duration) -> Self {
        Bucket {
            tokens: budget.capacity,
            at: now,
        }
    }

    pub(crate) fn refill(&mut self, budget: &RetryBudget, now: Duration) {
        if now > self.at {
            let secs = (now - self.at).as_secs_f64();
            self.tokens = (self.tokens + secs * budget.refill_per_sec).min(budget.capacity);
            self.at = now;
        }
    }

    /// Spend a token for one retry; false when the bucket is empty.
    pub(crate) fn try_spend(&mut self, budget: &RetryBudget, now: Duration) -> bool {
        self.refill(budget, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Earn back a fraction after a success.
    pub(crate) fn credit(&mut self, budget: &RetryBudget, now: Duration) {
        self.refill(budget, now);
        self.tokens = (self.tokens + budget.success_credit).min(budget.capacity);
    }

    /// Empty the bucket (tests, and a caller that wants no retries for a while).
    pub(crate) fn drain(&mut self) {
        self.tokens = 0.0;
    }

    /// Tokens in the bucket as of its last refill (the gauge's value).
    pub(crate) fn tokens(&self) -> f64 {
        self.tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_spends_refills_and_credits() {
        let b = RetryBudget {
            capacity: 2.0,
            refill_per_sec: 0.5,
            success_credit: 0.5,
        };
        let mut k = Bucket::new(&b, Duration::ZERO);
        assert!(k.try_spend(&b, Duration::ZERO));
        assert!(k.try_spend(&b, Duration::ZERO));
        assert!(!k.try_spend(&b, Duration::ZERO));
        assert!(k.try_spend(&b, Duration::from_secs(2)));
        assert!(!k.try_spend(&b, Duration::from_secs(2)));
        k.credit(&b, Duration::from_secs(2));
        k.credit(&b, Duration::from_secs(2));
        assert!(k.try_spend(&b, Duration::from_secs(2)));
    }
}
