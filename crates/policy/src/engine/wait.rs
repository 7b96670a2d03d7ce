//! The wait step: the pause before the next attempt. backon's exponential
//! backoff is wrapped ([`PolicyBackoff`]) so the policy applies the remote's
//! retry hint, the settle pause after a refusal, the deadline and the host's
//! retry budget, returning `None` to stop with the reason noted (settling
//! reads pause by the settling backoff, in `settle`).

use std::time::Duration;

use super::state::{ms, usable, Run};
use crate::class::Class;
use crate::metric;
use crate::outcome::Stopped;

/// backon's backoff, wrapped: each delay goes through [`Run::wait`].
pub(super) struct PolicyBackoff<'r, 'p> {
    /// backon's exponential backoff in the operation's shape.
    pub(super) inner: backon::ExponentialBackoff,
    /// The run the delays are for.
    pub(super) run: &'r Run<'p>,
}

impl Iterator for PolicyBackoff<'_, '_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.run.wait(&mut self.inner)
    }
}

impl Run<'_> {
    /// The pause before the next attempt, or `None` to stop (the reason is
    /// noted in the run's state): backon's next delay, replaced by the
    /// remote's retry hint, at least the settle time after a refusal; there
    /// must be room for another attempt once it is slept, and the host's
    /// retry budget must pay for it. After a refusal the fresh credential is
    /// bought now, before the pause, so the settle time runs from its
    /// purchase.
    pub(super) fn wait(&self, backoff: &mut backon::ExponentialBackoff) -> Option<Duration> {
        let mut st = self.state();
        // A refused credential's attempt is `unjudged` once another
        // attempt is planned; a stop makes it stand (`answered`, at the
        // finish).
        let pending = st.pending_end.take();
        let planned = self.plan(&mut st, backoff);
        match planned {
            Some(_) => self.settle_pending_end(pending, Class::Unjudged.as_str()),
            None => st.pending_end = pending,
        }
        planned
    }

    /// [`Run::wait`]'s decision, with the run's state held.
    fn plan(
        &self,
        st: &mut std::sync::MutexGuard<'_, super::state::RunState>,
        backoff: &mut backon::ExponentialBackoff,
    ) -> Option<Duration> {
        let policy = self.policy;
        let Some(mut delay) = backoff.next() else {
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
            delay = delay.max(policy.settle);
        }
        let now = policy.clock.now();
        let remaining = self.remaining_at(now);
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
        let spent = policy.with_bucket(&self.host, |s, host, budget| {
            s.try_spend(host, budget, now, remaining)
        });
        if !spent {
            metrics::counter!(metric::RETRY_BUDGET_REFUSALS_TOTAL, "host" => self.host.clone())
                .increment(1);
            tracing::info!(
                host = %self.host, op = %self.id(),
                "retry refused: the host's retry budget is empty"
            );
            st.stopped = Some(Stopped::RetryBudgetEmpty);
            return None;
        }
        if settle {
            // A source that hands back a refused credential makes the
            // refusal stand at once, with no pause.
            if let Some(source) = &self.credentials {
                let limit = usable(remaining.saturating_sub(delay), self.reserve);
                match source.credential_for(&self.purchase(limit)) {
                    Ok(c) if st.refused.iter().any(|f| f == c.fingerprint()) => {
                        st.stopped = Some(Stopped::CredentialRefused);
                        st.same_credential = true;
                        return None;
                    }
                    Ok(c) => st.current = Some((c, policy.clock.now())),
                    // The attempt buys again and records the failure.
                    Err(e) => tracing::debug!(error = %e, "could not buy a fresh credential"),
                }
            }
        }
        st.settle_needed = false;
        if let Some(last) = st.attempts.last_mut() {
            last.delay_ms = Some(ms(delay));
        }
        if hinted {
            tracing::info!(
                host = %self.host, op = %self.id(), wait_ms = ms(delay),
                "waiting as the remote asked (Retry-After or a rate limit's reset)"
            );
        }
        Some(delay)
    }
}
