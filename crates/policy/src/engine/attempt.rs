//! The attempt step: check the cancel flag and the budget, buy a
//! credential when one is needed, run the caller's attempt inside its
//! `attempt` span, and hand its result to the classify step (and an unknown
//! write to the settle step).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use tracing::field::Empty;
use tracing::Span;

use super::ctx::{AttemptCtx, AttemptFacts, ReconcileCtx, Rejection, Settlement};
use super::state::{ms, usable, Run, Step, Tried};
use crate::class::{AttemptError, AuthSignal, Class};
use crate::credential::Challenge;
use crate::outcome::{AttemptRecord, Stopped};

impl Run<'_> {
    /// The pause planned after the last attempt was slept (or cut), and no
    /// attempt followed it (a cancel, or a deadline that a late wake-up
    /// passed): the record says no delay, as for any last attempt.
    fn no_attempt_followed(&self) {
        if let Some(last) = self.state().attempts.last_mut() {
            last.delay_ms = None;
        }
    }

    /// One attempt, as backon's retry loop calls it: `Ok` is the value the
    /// operation ends with; `Err` says why it did not (a failure the `when`
    /// predicate judges, a stop, or a settled or unsettled write).
    pub(super) fn attempt<T, A, R>(
        &self,
        n: &mut u32,
        attempt: &mut A,
        reconcile: &mut Option<R>,
        judge: &impl Fn(&T) -> Option<Rejection>,
    ) -> Result<T, Step<T>>
    where
        A: FnMut(&mut AttemptCtx<'_>) -> Result<T, AttemptError>,
        R: FnMut(&ReconcileCtx<'_>) -> Result<Settlement<T>, AttemptError>,
    {
        if self.cancel.is_cancelled() {
            self.no_attempt_followed();
            return Err(Step::Stop(Stopped::Cancelled));
        }
        let now = self.policy.clock.now();
        let remaining = self.remaining_at(now);
        if usable(remaining, self.reserve).is_zero() {
            self.no_attempt_followed();
            return Err(Step::Stop(Stopped::Deadline));
        }
        // Everything the attempt does, on this thread and on the threads
        // it starts (they enter `Span::current()`), is inside this span;
        // its phase and class are recorded when it ends.
        // OpenTelemetry's names beside ours (the layer records the HTTP
        // method and status of an http(s) attempt on this span).
        let http =
            self.info.remote.starts_with("http://") || self.info.remote.starts_with("https://");
        let span = tracing::info_span!(
            "attempt",
            n = *n + 1,
            phase = Empty,
            class = Empty,
            request_id = Empty,
            "otel.kind" = "client",
            "server.address" = %self.server_address(),
            "url.full" = %self.info.remote,
            "http.request.method" = Empty,
            "http.response.status_code" = Empty,
            "http.request.resend_count" = Empty,
            "error.type" = Empty,
        );
        if http && *n > 0 {
            // Attempts before this one: OpenTelemetry's count of resends.
            span.record("http.request.resend_count", i64::from(*n));
        }
        let entered = span.enter();
        let now = self.buy_credential(&span, n, now, remaining)?;
        // Buying takes time: the budget is computed again.
        let remaining = self.remaining_at(now);
        let usable = usable(remaining, self.reserve);
        if usable.is_zero() {
            self.no_attempt_followed();
            return Err(Step::Stop(Stopped::Deadline));
        }
        *n += 1;
        let timeout = self.bounds.attempt_timeout.min(usable);
        let credential = self.state().current.as_ref().map(|(c, _)| c.clone());
        let renew = || self.renew_credential(usable, now);
        let challenge = match &self.credentials {
            Some(source) if source.after_challenge() && credential.is_none() => {
                Some(Challenge::new(
                    Arc::clone(source),
                    usable,
                    self.cancel.clone(),
                    &self.info.remote,
                    &self.headers,
                ))
            }
            _ => None,
        };
        let mut ctx = AttemptCtx {
            n: *n,
            timeout,
            remaining,
            limit: usable,
            credential,
            renew: &renew,
            challenge: challenge.clone(),
            cancel: &self.cancel,
            clock: &*self.policy.clock,
            id: self.id(),
            sent_nothing: false,
            phase: Cow::Borrowed("connect"),
            messages: Vec::new(),
            dropped: Default::default(),
            progress: &|phase| self.progress(phase),
            facts: AttemptFacts::new(),
            headers: &self.headers,
        };
        let result = attempt(&mut ctx);
        let phase = ctx.phase.clone();
        let messages = std::mem::take(&mut ctx.messages);
        let end = self.policy.clock.now();
        let request_id = ctx.facts.request_id();
        if let Some(id) = &request_id {
            span.record("request_id", id.as_str());
        }
        let tried = Tried {
            n: *n,
            phase,
            remaining,
            timeout,
            end,
            elapsed: end.saturating_sub(now),
            request_id,
            waited: ctx.facts.waited_total(),
        };
        let mut st = self.state();
        // A credential bought inside the attempt, when the remote asked:
        // held from now on as if bought before it.
        let unfilled = match challenge.as_ref().and_then(Challenge::take) {
            Some(Ok(c)) => {
                st.current = Some((c, now));
                st.challenged = true;
                None
            }
            Some(Err(e)) => Some(e),
            None => None,
        };
        let result = match (result, unfilled) {
            (Err(mut e), Some(why)) if e.auth == Some(AuthSignal::Unauthorized) => {
                e.cause = format!("{} (no credential was found: {})", e.cause, why.message);
                Err(e)
            }
            (r, _) => r,
        };
        st.sent_nothing = ctx.sent_nothing;
        st.remote_messages.add_dropped(ctx.dropped);
        for m in messages {
            st.remote_messages.push_line(m);
        }
        match result {
            Ok(v) => {
                self.succeeded(&span, &mut st, tried, judge(&v).is_some());
                Ok(v)
            }
            Err(e) => {
                let e = self.classify(&span, &mut st, tried, e);
                if e.class == Class::Unknown && self.write {
                    st.unsettled_complete = true;
                    drop(st);
                    // The settling reads are not this attempt: each has
                    // a span of its own.
                    drop(entered);
                    return self.settle(e, reconcile.as_mut());
                }
                Err(Step::Failed(e))
            }
        }
    }

    /// A credential bought inside an attempt to replace the held one, which
    /// is due (see [`AttemptCtx::credential_for_request`]): bounded by what
    /// the attempt may still use, held for the rest of the operation. `None`
    /// when there is no source, the purchase failed, or it gave a
    /// credential already refused.
    pub(super) fn renew_credential(
        &self,
        usable: Duration,
        started: Duration,
    ) -> Option<crate::Credential> {
        let source = self.credentials.as_ref()?;
        let spent = self.policy.clock.now().saturating_sub(started);
        let limit = usable.saturating_sub(spent);
        match source.credential_for(&self.purchase(limit)) {
            Ok(c) => {
                let mut st = self.state();
                if st.refused.iter().any(|f| f == c.fingerprint()) {
                    return None;
                }
                tracing::debug!(op = %self.id(), credential = %c.fingerprint(), "credential renewed before its refresh time passed");
                st.current = Some((c.clone(), self.policy.clock.now()));
                Some(c)
            }
            Err(e) => {
                tracing::debug!(op = %self.id(), error = %e, "could not renew a credential due for renewal; the one held is sent");
                None
            }
        }
    }

    /// Buy a credential when the operation needs one and holds none or
    /// holds one that is due ([`crate::Credential::is_due`]: within its
    /// refresh margin of expiring) — the first attempt, a purchase after a
    /// refusal that failed, or a token that aged between attempts. The purchase
    /// is bounded by what remains and by the cancel flag; a failed one is
    /// an attempt of its own, phase `credential`. `Ok` is the clock after
    /// the purchase (`now` when nothing was bought).
    fn buy_credential<T>(
        &self,
        span: &Span,
        n: &mut u32,
        now: Duration,
        remaining: Duration,
    ) -> Result<Duration, Step<T>> {
        let Some(source) = &self.credentials else {
            return Ok(now);
        };
        let mut st = self.state();
        let held_due = match &st.current {
            Some((c, _)) if !c.is_due(std::time::SystemTime::now()) => return Ok(now),
            Some(_) => true,
            None => false,
        };
        if !held_due && source.after_challenge() && !st.challenged {
            // Asked inside the attempt, once the remote asks.
            return Ok(now);
        }
        let limit = usable(remaining, self.reserve);
        match source.credential_for(&self.purchase(limit)) {
            Err(e) if held_due && !e.local && !e.answered => {
                // Not expired yet: sent, and a refusal of it is judged as any.
                tracing::debug!(op = %self.id(), error = %e, "could not renew a credential due for renewal; the one held is sent");
                Ok(now)
            }
            Ok(c) if held_due && st.refused.iter().any(|f| f == c.fingerprint()) => Ok(now),
            Ok(c) => {
                if st.refused.iter().any(|f| f == c.fingerprint()) {
                    st.same_credential = true;
                    return Err(Step::Stop(Stopped::CredentialRefused));
                }
                let now = self.policy.clock.now();
                st.current = Some((c, now));
                Ok(now)
            }
            Err(e) if source.after_challenge() && st.last_refusal.is_some() && !e.local => {
                // Nothing more to offer after a refusal (git's helpers and
                // askpass gave none): the refusal stands.
                tracing::debug!(op = %self.id(), cause = %e.message, "no credential after a refusal");
                Err(Step::Stop(Stopped::CredentialRefused))
            }
            Err(e) => {
                *n += 1;
                let request_id = e.request_id.clone();
                let err = if e.local {
                    AttemptError::local("credential", e.message.clone())
                } else if e.answered {
                    AttemptError::answered("credential", e.message.clone())
                } else {
                    AttemptError::unjudged("credential", e.message.clone())
                }
                .with_source(e);
                let took = self.policy.clock.now().saturating_sub(now);
                if let Some(id) = &request_id {
                    span.record("request_id", id.as_str());
                }
                self.ended(span, err.class.as_str(), "credential", took);
                tracing::debug!(op = %self.id(), n = *n, class = err.class.as_str(), cause = %err.cause, "credential purchase failed");
                st.attempts.push(AttemptRecord {
                    n: *n,
                    phase: "credential".into(),
                    class: Some(err.class),
                    cause: Some(err.cause.clone()),
                    remaining_ms: ms(remaining),
                    timeout_ms: ms(limit),
                    delay_ms: None,
                    elapsed_ms: ms(took),
                    request_id,
                    waited_ms: None,
                });
                st.last_error = Some(err.clone());
                Err(Step::Failed(err))
            }
        }
    }
}
