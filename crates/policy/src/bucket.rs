//! The per-host retry budget: a token bucket shared by every operation of one
//! policy value, so retries add bounded load when a remote is down for all.

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

    fn refill(&mut self, budget: &RetryBudget, now: Duration) {
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
