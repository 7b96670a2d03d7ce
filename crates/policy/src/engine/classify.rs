//! The classify step: an attempt's end is recorded (its span, its metrics,
//! the history), a refused credential is noted (the credential class: the
//! policy's one decision beside the layer's table), and the class × effect
//! table says whether backon tries again.

use tracing::Span;

use super::state::{ms, PendingEnd, Run, RunState, Step, Tried};
use crate::class::{AttemptError, AuthSignal, Class};
use crate::metric;
use crate::outcome::AttemptRecord;

impl Run<'_> {
    /// The attempt returned a value: `answered` when the judge made it the
    /// remote's answer (a push's rejected ref), as the outcome will say,
    /// else `succeeded`. A refusal that stood against the host ends here.
    pub(super) fn succeeded(&self, span: &Span, st: &mut RunState, tried: Tried, rejected: bool) {
        let class = if rejected {
            Class::Answered.as_str()
        } else {
            "succeeded"
        };
        self.ended(span, class, &tried.phase, tried.elapsed);
        tracing::debug!(op = %self.id(), n = tried.n, phase = %tried.phase, "attempt succeeded");
        if let (Some(source), Some((cred, _))) = (&self.credentials, &st.current) {
            source.accepted(cred.fingerprint());
        }
        for e in self.policy.refusals.recovered(&self.host, tried.end) {
            tracing::info!(
                host = %self.host, cause = %e.cause, repeats = e.unreported,
                standing_s = e.standing.as_secs(),
                "credential refusal no longer stands"
            );
        }
        let waited_ms = tried.waited_ms();
        st.attempts.push(AttemptRecord {
            n: tried.n,
            phase: tried.phase,
            class: None,
            cause: None,
            remaining_ms: ms(tried.remaining),
            timeout_ms: ms(tried.timeout),
            delay_ms: None,
            elapsed_ms: ms(tried.elapsed),
            request_id: tried.request_id,
            waited_ms,
        });
        st.succeeded_at = Some(tried.end);
    }

    /// The attempt failed with `e`, classed by its layer's table (for HTTP,
    /// the one table in `sluice-https`, which answers a 401 and attaches
    /// the credential signal). The policy keeps that class, with one
    /// decision of its own, the credential class of the design: a refusal
    /// of the credential held (any 401; a 403 or 404 within the fresh
    /// window of buying it) is noted, the credential dropped, the next
    /// pause made at least the settle time, and the attempt is `unjudged`
    /// (the remote judged the credential, not the call). A 401 with no
    /// credential source stays the remote's answer (nothing to buy afresh);
    /// its words say how to give one.
    pub(super) fn classify(
        &self,
        span: &Span,
        st: &mut RunState,
        tried: Tried,
        mut e: AttemptError,
    ) -> AttemptError {
        if e.auth == Some(AuthSignal::Unauthorized) && self.credentials.is_none() {
            // Nothing to buy afresh: the table's answer stands.
            e.cause = format!(
                "{} (no credential was given: give one with --token-command, \
                 git's credential helpers or askpass, or user info in the URL)",
                e.cause
            );
        }
        let mut refusal = false;
        if let (Some(auth), Some((cred, bought))) = (e.auth, &st.current) {
            let refused = match auth {
                AuthSignal::Unauthorized => true,
                // Within the window of buying, when the answer came.
                AuthSignal::ForbiddenOrNotFound => {
                    tried.end.saturating_sub(*bought) <= self.policy.fresh_window
                }
            };
            if refused {
                let fp = cred.fingerprint().to_string();
                tracing::debug!(op = %self.id(), n = tried.n, credential = %fp, "credential refused");
                metrics::counter!(metric::CREDENTIAL_REFUSALS_TOTAL, "host" => self.host.clone())
                    .increment(1);
                if let Some(source) = &self.credentials {
                    source.refused(&fp);
                }
                if !st.refused.contains(&fp) {
                    st.refused.push(fp);
                }
                st.current = None;
                st.settle_needed = true;
                e.class = Class::Unjudged;
                st.last_refusal = Some(e.clone());
                refusal = true;
            }
        }
        if refusal {
            // A refusal: `unjudged` if a fresh credential is tried, or
            // `answered` if it stands; the span and the metrics wait for
            // the record's class.
            st.pending_end = Some(PendingEnd {
                span: span.clone(),
                phase: e.phase.to_string(),
                elapsed: tried.elapsed,
            });
        } else {
            self.ended(span, e.class.as_str(), &e.phase, tried.elapsed);
        }
        tracing::debug!(
            op = %self.id(), n = tried.n, phase = %e.phase, class = e.class.as_str(),
            cause = %e.cause, "attempt failed"
        );
        st.attempts.push(AttemptRecord {
            n: tried.n,
            phase: e.phase.clone(),
            class: Some(e.class),
            cause: Some(e.cause.clone()),
            remaining_ms: ms(tried.remaining),
            timeout_ms: ms(tried.timeout),
            delay_ms: None,
            elapsed_ms: ms(tried.elapsed),
            request_id: tried.request_id.clone(),
            waited_ms: tried.waited_ms(),
        });
        st.retry_after = e.retry_after;
        st.last_error = Some(e.clone());
        e
    }

    /// backon's `when`: tried again are what the remote never judged and a
    /// read's unknown answer; never an answer, a local failure, a write's
    /// unknown answer (settled by reading instead), a stop, or anything
    /// after a cancel.
    pub(super) fn tried_again<T>(&self, step: &Step<T>) -> bool {
        match step {
            Step::Failed(e) => {
                let settled_elsewhere = match e.class {
                    Class::Answered | Class::Local => true,
                    Class::Unknown => self.write,
                    Class::Unjudged => false,
                };
                !settled_elsewhere && !self.cancel.is_cancelled()
            }
            _ => false,
        }
    }
}
