//! The settle step: a write whose request was complete and whose answer was
//! not read is settled by the caller's read, never sent again. A
//! `not-landed` verdict is read once more after half the reconcile reserve.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use backon::BlockingRetryable;

use super::ctx::{ReconcileCtx, Settlement};
use super::state::{Run, Step};
use super::wait::ReadBackoff;
use crate::class::{AttemptError, Class};
use crate::outcome::{Reconciled, Stopped, Verdict};

impl Run<'_> {
    /// Settle the unknown write that failed with `err` by the caller's read,
    /// retried (as reads are, through backon, at most `max_attempts` reads)
    /// until it answers or the budget is spent. A `not-landed` verdict is
    /// read once more after half the reconcile reserve; the write is never
    /// attempted again.
    pub(super) fn settle<T, R>(
        &self,
        err: AttemptError,
        reconcile: Option<&mut R>,
    ) -> Result<T, Step<T>>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let Some(reconcile) = reconcile else {
            return Err(Step::Unsettled(err, None));
        };
        let id = self.id();
        let end = self.end();
        let mut reads = 0u32;
        let mut s = match self.settling_read(reconcile, end, &mut reads) {
            Ok(s) => s,
            Err(why) => return Err(Step::Unsettled(err, why)),
        };
        if s.verdict == Verdict::NotLanded {
            // The server may still be applying what it received (hooks and
            // checks run after the last byte, whether or not we are there):
            // look once more after half the reserve.
            let pause = (self.bounds.reconcile_reserve / 2)
                .min(end.saturating_sub(self.policy.clock.now()));
            tracing::debug!(op = %id, pause = ?pause, "not landed yet: reading once more");
            self.policy.sleeper.sleep(pause, &AtomicBool::new(false));
            if let Ok(again) = self.settling_read(reconcile, end, &mut reads) {
                s = again;
            }
        }
        tracing::debug!(op = %id, verdict = s.verdict.as_str(), "unknown write settled by reading");
        let mut st = self.state();
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
    /// budget (to `end`) is spent; `reads` counts every read of the
    /// operation. `Err` carries why the reads stopped (`None` when a read
    /// was answered).
    fn settling_read<T, R>(
        &self,
        reconcile: &mut R,
        end: Duration,
        reads: &mut u32,
    ) -> Result<Settlement<T>, Option<Stopped>>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let id = self.id();
        let clock = &*self.policy.clock;
        let first = *reads;
        // `Err(None)`: no time left for a read.
        let read = || -> Result<Settlement<T>, Option<AttemptError>> {
            let remaining = end.saturating_sub(clock.now());
            if remaining.is_zero() {
                return Err(None);
            }
            *reads += 1;
            let _span = tracing::info_span!("settling_read", n = *reads).entered();
            let credential = self.state().current.as_ref().map(|(c, _)| c.clone());
            let ctx = ReconcileCtx {
                remaining,
                timeout: remaining.min(self.bounds.attempt_timeout),
                n: *reads,
                cancel: &self.cancel,
                credential,
            };
            reconcile(&ctx).map_err(Some)
        };
        let backoff = ReadBackoff {
            inner: self.policy.exponential(&self.bounds),
            clock,
            end,
        };
        // A cancelled write is still settled: the caller's flag does not cut
        // the pauses between settling reads short (the deadline bounds them).
        let sleeper = Arc::clone(&self.policy.sleeper);
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
                Some(_) if *reads - first >= self.bounds.max_attempts.max(1) => {
                    Some(Stopped::MaxAttempts)
                }
                _ => Some(Stopped::Deadline),
            }
        })
    }
}
