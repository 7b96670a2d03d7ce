//! The settle step: a write whose request was complete and whose answer was
//! not read is settled by the caller's read, never sent again. One loop
//! for every write that has a settling read (a push, every typed forge
//! write): a read that finds the write `not-landed`, and a read that fails
//! without an answer (`unjudged` or `unknown`: refused, cut, a 5xx, a
//! timeout), is read again after the next pause of the settling backoff
//! (backon, jittered, capped; each pause at most half the reconcile
//! reserve) while the operation's deadline allows, stopping in time to leave
//! the ledger's finish its moment ([`FINISH_MOMENT`]). `landed` or `moved`
//! ends the reads at once, and so does a read whose failure is an answer
//! (`answered`: a 404, an `ERR`; or `local`). After the caller's cancel the
//! reads stop at the first read that answered, or once the reconcile
//! reserve has passed since the cancel was seen; a stop (the cancel's
//! second level) ends them at once. Every read is listed in
//! `reconciled.reads`, a failed one with its cause; `reconciled` is there
//! whenever the write had a settling read, its verdict null when no read
//! answered. Reads that run out of time say so (`stopped: deadline`),
//! whether none answered or the last that answered found it not landed.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ctx::{ReconcileCtx, Settlement};
use super::state::{ms, Run, Step};
use crate::class::{AttemptError, Class};
use crate::outcome::{Reconciled, SettlingRead, Stopped, Verdict};

/// What the settling reads leave of the deadline for the ledger's finish
/// (at most half of what remained when settling began, so a short budget
/// still gets its read).
pub(crate) const FINISH_MOMENT: Duration = Duration::from_millis(250);

/// What the settling reads of one write found so far.
struct Reads<T> {
    /// Every read, as `reconciled.reads` lists it (failed ones included).
    log: Vec<SettlingRead>,
    /// The last read that answered with a verdict.
    last: Option<Settlement<T>>,
}

/// How one settling read ended.
enum ReadEnd {
    /// It found `landed` or `moved`, or its failure was an answer: no
    /// more reads.
    Final,
    /// It found `not-landed` (or `landed` asking to be read again): read
    /// again while there is room; after a cancel it ends the reads.
    Answered,
    /// It failed without an answer (`unjudged`, `unknown`): read again
    /// while there is room.
    Failed,
}

impl Run<'_> {
    /// Settle the unknown write that failed with `err` by the caller's read
    /// (see the module's doc for the loop). The write is never attempted
    /// again.
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
            log: Vec::new(),
            last: None,
        };
        let why = self.read_until_settled(reconcile, until, &mut reads);
        let n = reads.log.len();
        let mut st = self.state();
        let Some(s) = reads.last else {
            tracing::debug!(op = %id, reads = n, "no settling read answered");
            st.reconciled = Some(Reconciled {
                verdict: None,
                observed: BTreeMap::new(),
                reads: reads.log,
            });
            return Err(Step::Unsettled(err, why));
        };
        tracing::debug!(op = %id, verdict = s.verdict.as_str(), reads = n, "unknown write settled by reading");
        st.reconciled = Some(Reconciled {
            verdict: Some(s.verdict),
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
                None => Err(Step::Unsettled(err, why)),
            },
            Verdict::NotLanded => {
                let until = if self.cancel.is_cancelled() {
                    "after the cancel"
                } else {
                    "until the deadline"
                };
                Err(Step::Settled(
                    keep_source(
                        AttemptError::unknown(
                            err.phase.clone(),
                            format!(
                                "{} (settled by reading: not landed as of the last read, \
                                 read {n} times {until}; it may still land, \
                                 and it is not sent again)",
                                err.cause
                            ),
                        ),
                        &err,
                    ),
                    s.value,
                    why,
                ))
            }
            Verdict::Moved => Err(Step::Settled(
                keep_source(
                    AttemptError::unknown(
                        err.phase.clone(),
                        s.cause.unwrap_or_else(|| "moved by somebody else".into()),
                    ),
                    &err,
                ),
                s.value,
                why,
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

    /// Where the reads must stop: `until`, and once the caller cancelled
    /// (first seen at `cancelled_at`), the reconcile reserve after that.
    fn reads_limit(&self, until: Duration, cancelled_at: Option<Duration>) -> Duration {
        match cancelled_at {
            Some(at) => until.min(at + self.reserve),
            None => until,
        }
    }

    /// When the caller's cancel was first seen, noted in `at`.
    fn note_cancel(&self, at: &mut Option<Duration>) {
        if at.is_none() && self.cancel.is_cancelled() {
            *at = Some(self.policy.clock.now());
        }
    }

    /// Read until a read ends the reads ([`ReadEnd::Final`]), or the next
    /// pause of the settling backoff does not fit before the limit (the
    /// deadline less the finish's moment; after a cancel, the reserve
    /// since it). A `not-landed` read and a failed one are both read again
    /// after that pause; after a cancel, the first read that answered ends
    /// the reads. `Some(Deadline)` when time ran out before a read ended
    /// them (none answered, or the last that answered found it not landed
    /// yet); `None` when a read ended them, or a cancel or a stop did.
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
        let clock = &*self.policy.clock;
        let cap = self.reserve / 2;
        let mut pauses = (!cap.is_zero()).then(|| self.policy.settling_pauses(&self.bounds, cap));
        let mut cancelled_at = None;
        // The first read is made even when the cancel came with the
        // answer that was lost: a cancelled write is settled by reading.
        self.note_cancel(&mut cancelled_at);
        loop {
            // A stop (the cancel's second level) ends the reads at once:
            // the outcome is what stands.
            if self.cancel.is_stopped() {
                tracing::debug!(op = %id, reads = reads.log.len(), "stopped: no more settling reads");
                return None;
            }
            let limit = if reads.log.is_empty() {
                until
            } else {
                self.reads_limit(until, cancelled_at)
            };
            let end = match self.settling_read(reconcile, limit, reads) {
                Some(end) => end,
                None => return Some(Stopped::Deadline),
            };
            self.note_cancel(&mut cancelled_at);
            match end {
                ReadEnd::Final => return None,
                // The caller asked to stop: the write is settled by this
                // read (not landed as of it, and it may still land; or
                // landed without all of its value), not read again until
                // the deadline.
                ReadEnd::Answered if cancelled_at.is_some() => {
                    tracing::debug!(op = %id, "not landed yet, and cancelled: not read again");
                    return None;
                }
                ReadEnd::Answered | ReadEnd::Failed => {}
            }
            // The server may still be applying what it received (hooks and
            // checks run after the last byte, whether or not we are there;
            // a forge may lag its own write), and a read that failed told
            // nothing: read again while there is room. No reserve, no
            // pause: the caller kept no time for it. Either way the reads
            // ran out of time (`stopped: deadline`), whether or not one of
            // them answered `not-landed`.
            let out_of_time = Some(Stopped::Deadline);
            let Some(pause) = pauses.as_mut().and_then(Iterator::next) else {
                return out_of_time;
            };
            let pause = pause.min(cap);
            let limit = self.reads_limit(until, cancelled_at);
            let room = limit.saturating_sub(clock.now());
            if pause >= room {
                tracing::debug!(op = %id, reads = reads.log.len(), "no room for another settling read");
                return out_of_time;
            }
            tracing::debug!(op = %id, pause = ?pause, "not settled yet: reading again");
            // The caller's cancel does not cut the pause short: a
            // cancelled write is still settled (the reserve since the
            // cancel bounds the reads); a stop does.
            self.policy.sleeper.sleep(pause, self.cancel.stop_atomic());
        }
    }

    /// One settling read, bounded by `limit` on the policy's clock (and by
    /// the attempt timeout), logged in `reads`. `None` when there was no
    /// time left for it.
    fn settling_read<T, R>(
        &self,
        reconcile: &mut R,
        limit: Duration,
        reads: &mut Reads<T>,
    ) -> Option<ReadEnd>
    where
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        let id = self.id();
        let clock = &*self.policy.clock;
        let remaining = limit.saturating_sub(clock.now());
        if remaining.is_zero() {
            return None;
        }
        let n = u32::try_from(reads.log.len() + 1).unwrap_or(u32::MAX);
        let _span = tracing::info_span!("settling_read", n).entered();
        let held = self.state().current.as_ref().map(|(c, _)| c.clone());
        // A read is a request too: a credential due for replacement is
        // replaced first (kept when a new one cannot be bought).
        let credential = match held {
            Some(c) if c.is_due(std::time::SystemTime::now()) => {
                Some(self.renew_credential(remaining, clock.now()).unwrap_or(c))
            }
            held => held,
        };
        let ctx = ReconcileCtx {
            remaining,
            timeout: remaining.min(self.bounds.attempt_timeout),
            n,
            cancel: &self.cancel,
            credential,
            headers: &self.headers,
        };
        let result = reconcile(&ctx);
        let elapsed_ms = ms(clock.now().saturating_sub(self.start));
        Some(match result {
            Ok(s) => {
                reads.log.push(SettlingRead {
                    elapsed_ms,
                    verdict: Some(s.verdict),
                    cause: None,
                });
                let end = match s.verdict {
                    Verdict::NotLanded => ReadEnd::Answered,
                    Verdict::Landed if s.read_again => ReadEnd::Answered,
                    Verdict::Landed | Verdict::Moved => ReadEnd::Final,
                };
                reads.last = Some(s);
                end
            }
            Err(e) => {
                let end = match e.class {
                    Class::Answered | Class::Local => {
                        tracing::debug!(op = %id, cause = %e.cause, "settling read answered: no more reads");
                        ReadEnd::Final
                    }
                    Class::Unjudged | Class::Unknown => {
                        tracing::debug!(op = %id, cause = %e.cause, "settling read failed; reading again");
                        ReadEnd::Failed
                    }
                };
                reads.log.push(SettlingRead {
                    elapsed_ms,
                    verdict: None,
                    cause: Some(e.cause),
                });
                end
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
