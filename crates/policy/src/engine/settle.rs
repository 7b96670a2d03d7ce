//! The settle step: a write whose request was complete and whose answer was
//! not read is settled by the caller's read, never sent again. A
//! `not-landed` verdict is read again with backoff (backon, jittered,
//! capped; each pause at most half the reconcile reserve) while the
//! operation's deadline allows, stopping in time to leave the ledger's
//! finish its moment ([`FINISH_MOMENT`]); `landed` or `moved` ends it at
//! once, and so does the caller's cancel (a cancelled write is settled by
//! its read, not read again until the deadline). Every read is listed in
//! `reconciled.reads`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use backon::BlockingRetryable;

use super::ctx::{ReconcileCtx, Settlement};
use super::state::{ms, Run, Step};
use super::wait::ReadBackoff;
use crate::class::{AttemptError, Class};
use crate::outcome::{Reconciled, SettlingRead, Stopped, Verdict};

/// What the settling reads leave of the deadline for the ledger's finish
/// (at most half of what remained when settling began, so a short budget
/// still gets its read).
pub(crate) const FINISH_MOMENT: Duration = Duration::from_millis(250);

/// What the settling reads of one write found so far.
struct Reads<T> {
    /// How many reads were made (failed ones included).
    n: u32,
    /// Every read, as `reconciled.reads` lists it.
    log: Vec<SettlingRead>,
    /// The last read that answered.
    last: Option<Settlement<T>>,
}

impl Run<'_> {
    /// Settle the unknown write that failed with `err` by the caller's read.
    /// A read that fails is read again (as reads are, through backon, at
    /// most `max_attempts` reads in a row); a read that finds the write not
    /// landed is read again with backoff until the deadline (less the
    /// finish's moment); `landed` or `moved` ends the reads at once. The
    /// write is never attempted again.
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
        let until = self.settle_until();
        let mut reads = Reads {
            n: 0,
            log: Vec::new(),
            last: None,
        };
        let why = self.read_until_settled(reconcile, until, &mut reads);
        let Some(s) = reads.last else {
            return Err(Step::Unsettled(err, why));
        };
        tracing::debug!(op = %id, verdict = s.verdict.as_str(), reads = reads.n, "unknown write settled by reading");
        let mut st = self.state();
        st.reconciled = Some(Reconciled {
            verdict: s.verdict,
            observed: s.observed,
            reads: reads.log,
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
                keep_source(
                    AttemptError::unknown(
                        err.phase.clone(),
                        format!(
                            "{} (settled by reading: not landed as of the last read, \
                             read {} times until the deadline; it may still land, \
                             and it is not sent again)",
                            err.cause, reads.n
                        ),
                    ),
                    &err,
                ),
                s.value,
            )),
            Verdict::Moved => Err(Step::Settled(
                keep_source(
                    AttemptError::unknown(
                        err.phase.clone(),
                        s.cause.unwrap_or_else(|| "moved by somebody else".into()),
                    ),
                    &err,
                ),
                s.value,
            )),
        }
    }

    /// Where the settling reads must stop on the policy's clock: the
    /// deadline less the finish's moment (at most half of what remains).
    fn settle_until(&self) -> Duration {
        let end = self.end();
        let remaining = end.saturating_sub(self.policy.clock.now());
        end - FINISH_MOMENT.min(remaining / 2)
    }

    /// Read until a read answers `landed` or `moved`, or a `not-landed`
    /// read has no room for another before `until`. A `not-landed` verdict
    /// waits the next pause of the settling backoff (at most half the
    /// reserve) and reads again. `Err` of the reads (none answered, or the
    /// reads after a `not-landed` one) is returned as why they stopped.
    fn read_until_settled<T, R>(
        &self,
        reconcile: &mut R,
        until: Duration,
        reads: &mut Reads<T>,
    ) -> Option<Stopped>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let id = self.id();
        let cap = self.reserve / 2;
        let mut pauses = (!cap.is_zero()).then(|| self.policy.settling_pauses(&self.bounds, cap));
        loop {
            match self.settling_read(reconcile, until, reads) {
                Ok(s) => {
                    let again = s.verdict == Verdict::NotLanded;
                    reads.last = Some(s);
                    if !again {
                        return None;
                    }
                    // The caller asked to stop: the write is settled by
                    // this read (not landed as of it, and it may still
                    // land), not read again until the deadline.
                    if self.cancel.is_cancelled() {
                        tracing::debug!(op = %id, "not landed yet, and cancelled: not read again");
                        return None;
                    }
                }
                // A read after a `not-landed` one that never answered:
                // the verdict stays what the last answer said.
                Err(why) => return why,
            }
            // The server may still be applying what it received (hooks and
            // checks run after the last byte, whether or not we are there;
            // a forge may lag its own write): read again while there is
            // room. No reserve, no pause: the caller kept no time for it.
            let pause = pauses.as_mut().and_then(Iterator::next)?.min(cap);
            let room = until.saturating_sub(self.policy.clock.now());
            if pause >= room {
                tracing::debug!(op = %id, reads = reads.n, "not landed, and no room for another read");
                return None;
            }
            tracing::debug!(op = %id, pause = ?pause, "not landed yet: reading again");
            // The caller's flag does not cut the pause short: a cancelled
            // write is still settled (the deadline bounds the reads).
            self.policy.sleeper.sleep(pause, &AtomicBool::new(false));
        }
    }

    /// One settling read, retried through backon until it answers or the
    /// budget (to `end`) is spent; every read is counted and logged in
    /// `reads`. `Err` carries why the reads stopped (`None` when a read was
    /// answered).
    fn settling_read<T, R>(
        &self,
        reconcile: &mut R,
        end: Duration,
        reads: &mut Reads<T>,
    ) -> Result<Settlement<T>, Option<Stopped>>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let id = self.id();
        let clock = &*self.policy.clock;
        let first = reads.n;
        let start = self.start;
        // `Err(None)`: no time left for a read.
        let read = || -> Result<Settlement<T>, Option<AttemptError>> {
            let remaining = end.saturating_sub(clock.now());
            if remaining.is_zero() {
                return Err(None);
            }
            reads.n += 1;
            let _span = tracing::info_span!("settling_read", n = reads.n).entered();
            let credential = self.state().current.as_ref().map(|(c, _)| c.clone());
            let ctx = ReconcileCtx {
                remaining,
                timeout: remaining.min(self.bounds.attempt_timeout),
                n: reads.n,
                cancel: &self.cancel,
                credential,
            };
            let result = reconcile(&ctx);
            reads.log.push(SettlingRead {
                elapsed_ms: ms(clock.now().saturating_sub(start)),
                verdict: result.as_ref().ok().map(|s| s.verdict),
            });
            result.map_err(Some)
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
            tracing::debug!(op = %id, reads = reads.n, "no settling read answered");
            match &e {
                Some(e) if e.class == Class::Answered => {
                    tracing::debug!(op = %id, cause = %e.cause, "settling read answered");
                    None
                }
                Some(_) if reads.n - first >= self.bounds.max_attempts.max(1) => {
                    Some(Stopped::MaxAttempts)
                }
                _ => Some(Stopped::Deadline),
            }
        })
    }
}

/// The settled error keeps the layer's typed error of the attempt it
/// settles (`source_as::<GitError>()` still answers), with the words of
/// what the reads found.
fn keep_source(mut settled: AttemptError, attempt: &AttemptError) -> AttemptError {
    settled.source = attempt.source.clone();
    settled
}
