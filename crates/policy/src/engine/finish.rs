//! The finish step: the retry loop's result and the run's state become the
//! [`Outcome`] — its kind, `stopped`, `may_have_applied` and evidence — a
//! refusal that stands is logged (once per cause and host while it stands),
//! and the outcome is recorded in the ledger.

use std::time::Duration;

use super::ctx::Rejection;
use super::state::{ms, Run, Step};
use crate::class::{AttemptError, Class};
use crate::outcome::{Outcome, OutcomeKind, Stopped};
use crate::refusal_log::Line;

/// Why a refusal stands when the source gave back a credential already
/// refused (a fixed token, a token command that prints the same one): a
/// fresh purchase cannot mend it.
pub const SAME_CREDENTIAL: &str = "the same credential was refused again: \
     a missing route or permission, not an expired token";

/// The failures the run saw last, which the outcome's error is chosen from.
struct LastErrors {
    /// The last failure that was a credential refusal.
    refusal: Option<AttemptError>,
    /// The last failure.
    error: Option<AttemptError>,
}

impl Run<'_> {
    /// The outcome of the run, from the retry loop's `result`; recorded in
    /// the ledger unless the id was generated and the ledger keeps none.
    pub(super) fn finish<T>(
        self,
        result: Result<T, Step<T>>,
        judge: &impl Fn(&T) -> Option<Rejection>,
    ) -> Outcome<T> {
        let mut st = std::mem::take(&mut *self.state());
        let same_credential = st.same_credential;
        let pending = st.pending_end.take();
        let ended = match (&result, st.succeeded_at) {
            (Ok(_), Some(at)) => at,
            _ => self.policy.clock.now(),
        };
        let elapsed = ended.saturating_sub(self.start);
        let mut out = self.blank(OutcomeKind::Unknown, self.info.clone());
        out.elapsed_ms = ms(elapsed);
        out.attempts = st.attempts;
        out.reconciled = st.reconciled;
        out.refused_credentials = st.refused;
        out.stopped = st.stopped;
        (out.remote_messages, out.remote_messages_dropped) = st.remote_messages.into_parts();
        let last = LastErrors {
            refusal: st.last_refusal,
            error: st.last_error,
        };
        let rejected_applied = self.conclude(&mut out, result, last, judge, ended);
        if self.write && out.kind != OutcomeKind::Succeeded {
            out.may_have_applied = Some(st.unsettled_complete || rejected_applied == Some(true));
        }
        // A write answered by what its read-first found sent nothing: the
        // outcome, and the ledger's record of it, say it did not apply.
        if self.write && out.kind == OutcomeKind::Succeeded && st.sent_nothing {
            out.may_have_applied = Some(false);
        }
        if out.kind == OutcomeKind::Answered && out.stopped == Some(Stopped::CredentialRefused) {
            self.log_standing_refusal(&out, ended);
        }
        if out.kind == OutcomeKind::Answered {
            answered_agrees(&mut out);
        }
        if same_credential && out.stopped == Some(Stopped::CredentialRefused) {
            if let Some(e) = out.error.as_mut() {
                let noted = format!("{} ({SAME_CREDENTIAL})", e.cause);
                // The attempt refused says it too (the document's words).
                if let Some(last) = out.attempts.last_mut() {
                    if last.cause.as_deref() == Some(e.cause.as_str()) {
                        last.cause = Some(noted.clone());
                    }
                }
                e.cause = noted;
            }
        }
        // A refused credential's attempt that no other attempt followed:
        // its span and metrics say its record's class (`answered` when the
        // refusal stands).
        let class = out.attempts.last().and_then(|a| a.class);
        self.settle_pending_end(pending, class.map_or("succeeded", Class::as_str));
        if self.records() {
            // After a stop (a second signal) the finish gets its floor, not
            // what remains of the deadline: the outcome is what stands.
            let end = if self.cancel.is_stopped() {
                self.policy.clock.now()
            } else {
                self.end()
            };
            out.recorded = Some(self.policy.record(&out, end, self.refs.as_deref()));
        }
        out
    }

    /// Set the outcome's kind, value, error and `stopped` from the retry
    /// loop's result. `Some(applied)` when a value was the remote's answer
    /// ([`Rejection::may_have_applied`]).
    fn conclude<T>(
        &self,
        out: &mut Outcome<T>,
        result: Result<T, Step<T>>,
        last: LastErrors,
        judge: &impl Fn(&T) -> Option<Rejection>,
        ended: Duration,
    ) -> Option<bool> {
        let cancelled = self.cancel.is_cancelled();
        match result {
            Ok(v) => match judge(&v) {
                None => {
                    out.kind = OutcomeKind::Succeeded;
                    out.value = Some(v);
                    out.stopped = None;
                    if self.write {
                        out.may_have_applied = Some(true);
                    }
                    // What remains of the deadline bounds a shared store's
                    // credit (its own bucket answers past it).
                    let left = self.remaining_at(ended);
                    self.policy.with_bucket(&self.host, |s, host, budget| {
                        ((), s.credit(host, budget, ended, left))
                    });
                }
                Some(r) => {
                    // The remote's answer, with the value kept: the attempt
                    // that read it (or the read that found it) is answered.
                    out.kind = OutcomeKind::Answered;
                    out.value = Some(v);
                    out.stopped = None;
                    let mut error = r.error;
                    if out.reconciled.is_none() {
                        if let Some(last) = out.attempts.last_mut() {
                            last.class = Some(Class::Answered);
                            last.cause = Some(error.cause.clone());
                            // How far the attempt got is the attempt's
                            // record (a lease refused by the client stops
                            // at `advertised`), whatever phase the layer
                            // named in its answer.
                            error.phase = last.phase.clone();
                        }
                    }
                    error.class = Class::Answered;
                    out.error = Some(error);
                    return Some(r.may_have_applied);
                }
            },
            Err(Step::Failed(e)) => {
                let refusal_stands =
                    e.class == Class::Unjudged && last.refusal.as_ref() == Some(&e);
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
                let after_refusal = last.refusal.is_some() && last.refusal == last.error;
                if reason == Stopped::CredentialRefused
                    || (after_refusal && reason != Stopped::Cancelled)
                {
                    out.kind = OutcomeKind::Answered;
                    out.stopped = Some(Stopped::CredentialRefused);
                    out.error = last.refusal.or(last.error);
                } else {
                    out.stopped = Some(reason);
                    out.error = last.error;
                }
            }
            Err(Step::Settled(e, value, why)) => {
                // A read cannot tell "moved before the write" from "landed,
                // then built upon", nor "not landed" from "not landed yet":
                // never sent again, never called a failure.
                out.kind = OutcomeKind::Unknown;
                out.stopped = if cancelled {
                    Some(Stopped::Cancelled)
                } else {
                    why
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
        None
    }

    /// Whether the outcome is written to the ledger: always for a caller's
    /// id; for a generated one, only a write's, and only in a ledger that
    /// keeps generated ids. One id names one logical operation, and a read
    /// under an id nobody was given beforehand cannot be asked again by
    /// anyone who needs its record (a read is tried again whatever
    /// happened), so it costs the store nothing: what budgets and the
    /// policy's own bookkeeping need does not go through the ledger.
    fn records(&self) -> bool {
        !self.generated || (self.write && self.policy.ledger.keeps_generated_ids())
    }

    /// A refusal stands: warn once when it starts, then at most once per
    /// [`crate::REFUSAL_LOG_INTERVAL`] of the policy's clock while it lasts.
    fn log_standing_refusal<T>(&self, out: &Outcome<T>, ended: Duration) {
        let cause = out
            .error
            .as_ref()
            .map(|e| e.cause.clone())
            .unwrap_or_default();
        match self.policy.refusals.stood(&self.host, &cause, ended) {
            Line::Started => tracing::warn!(
                host = %self.host, cause = %cause, refused = ?out.refused_credentials,
                "credential refusal stands"
            ),
            Line::Repeats { repeats, standing } => tracing::warn!(
                host = %self.host, cause = %cause, refused = ?out.refused_credentials,
                repeats, standing_s = standing.as_secs(),
                "credential refusal stands"
            ),
            Line::Quiet => {}
        }
    }
}

/// An `answered` outcome says so everywhere: its error is class `answered`
/// (a credential refusal that stands was `unjudged` while it could still be
/// mended by a fresh credential; standing, it is the remote's answer), and
/// the last attempt, when it is the one that failed with that error, says
/// the same.
fn answered_agrees<T>(out: &mut Outcome<T>) {
    let Some(e) = out.error.as_mut() else {
        return;
    };
    if let Some(last) = out.attempts.last_mut() {
        if last.class.is_some() && last.cause.as_deref() == Some(e.cause.as_str()) {
            last.class = Some(Class::Answered);
            e.phase = last.phase.clone();
        }
    }
    e.class = Class::Answered;
}
