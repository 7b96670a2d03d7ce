//! Credentials: a refused one is never sent again; a fresh one waits for the
//! settle pause; a refusal that stands is answered with its fingerprints.

use std::sync::Arc;

use crate::common::*;
use sluice_policy::secrecy::SecretString;
use sluice_policy::{
    fingerprint, AttemptError, AuthSignal, Bounds, Class, Credential, CredentialError,
    CredentialSource, Operation, OutcomeKind, StaticSource, Stopped, SAME_CREDENTIAL,
};

const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

fn http_op(bounds: Bounds) -> Operation {
    Operation::new(
        "http-get",
        sluice_policy::Effect::Read,
        "https://api.example.test/repos/o/r",
    )
    .bounds(bounds)
}

fn unauthorized() -> AttemptError {
    AttemptError::answered("response-headers", "401 Bad credentials")
        .with_auth(AuthSignal::Unauthorized)
}

fn forbidden() -> AttemptError {
    AttemptError::answered(
        "response-headers",
        "403 Resource not accessible by integration",
    )
    .with_auth(AuthSignal::ForbiddenOrNotFound)
}

#[test]
fn a_refused_credential_is_replaced_by_a_fresh_one_after_the_settle_pause() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(60), secs(10), 4);
    let out = policy.run(http_op(bounds).credentials(source.clone()), |ctx| {
        rec.record(ctx);
        if ctx.n == 1 {
            return Err(unauthorized());
        }
        Ok(200)
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    let calls = rec.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].secret.as_deref(), Some("tok-1"));
    assert_eq!(
        calls[1].secret.as_deref(),
        Some("tok-2"),
        "never the refused one"
    );
    let purchases = source.purchases();
    assert_eq!(
        purchases.len(),
        2,
        "bought once at the start, once after the refusal"
    );
    let (ref token, bought) = purchases[1];
    assert_eq!(token, "tok-2");
    assert!(
        calls[1].started >= bought + SETTLE,
        "the fresh token was bought at {bought:?} and sent at {:?}, before it settled",
        calls[1].started
    );
    assert_eq!(clock.sleeps().len(), 1);
    assert!(clock.sleeps()[0] >= SETTLE, "{:?}", clock.sleeps());
    assert_eq!(out.refused_credentials, vec![fingerprint("tok-1")]);
    assert_eq!(
        out.attempts[0].class,
        Some(Class::Unjudged),
        "a refusal is not the remote's judgement"
    );
}

#[test]
fn a_static_credential_refused_stands_at_once_with_its_fingerprint() {
    let (policy, clock) = manual_policy();
    let secret = "ghs_static_secret_value";
    let source = Arc::new(StaticSource::new(SecretString::from(secret.to_string())));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(unauthorized())
        },
    );
    assert_eq!(rec.count(), 1, "the refused credential is never sent again");
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    assert_eq!(out.refused_credentials, vec![fingerprint(secret)]);
    // Why it stands: the source gave back the refused one.
    assert_eq!(
        out.error.as_ref().unwrap().cause,
        format!("401 Bad credentials ({SAME_CREDENTIAL})")
    );
    assert_eq!(
        out.attempts[0].cause,
        out.error.as_ref().map(|e| e.cause.clone())
    );
    assert!(SAME_CREDENTIAL.starts_with(
        "the same credential was refused again: a missing route or permission, not an expired token"
    ));
    assert!(
        clock.sleeps().is_empty(),
        "no pause for a credential that cannot change"
    );
    let json = serde_json::to_string(&out).unwrap();
    assert!(
        !json.contains(secret),
        "the secret reached the output: {json}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["result"], "answered");
    assert_eq!(v["stopped"], "credential-refused");
    assert_eq!(v["refused_credentials"][0], fingerprint(secret));
    assert_eq!(fingerprint(secret).len(), 12);
}

#[test]
fn a_refusal_stands_when_the_settle_pause_does_not_fit_the_budget() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(4), secs(2), 4)).credentials(source.clone()),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(unauthorized())
        },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    assert_eq!(out.refused_credentials, vec![fingerprint("tok-1")]);
    assert_eq!(
        source.purchases().len(),
        1,
        "no token bought that cannot be used"
    );
    assert!(clock.sleeps().is_empty());
    let cause = &out.error.as_ref().unwrap().cause;
    assert!(!cause.contains(SAME_CREDENTIAL), "another reason: {cause}");
}

#[test]
fn a_refusal_stands_when_attempts_run_out() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 2)).credentials(source),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(unauthorized())
        },
    );
    let secrets: Vec<_> = rec.calls().into_iter().map(|c| c.secret.unwrap()).collect();
    assert_eq!(secrets, ["tok-1", "tok-2"]);
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    assert_eq!(
        out.refused_credentials,
        vec![fingerprint("tok-1"), fingerprint("tok-2")]
    );
}

#[test]
fn a_forbidden_within_the_fresh_window_counts_as_a_refusal() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source),
        |ctx| {
            rec.record(ctx);
            if ctx.n == 1 {
                clock.advance(secs(3));
                return Err(forbidden());
            }
            Ok(200)
        },
    );
    assert_eq!(rec.count(), 2);
    assert_eq!(rec.calls()[1].secret.as_deref(), Some("tok-2"));
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.refused_credentials, vec![fingerprint("tok-1")]);
}

#[test]
fn a_forbidden_after_the_fresh_window_is_the_remote_answer() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(20), 4)).credentials(source.clone()),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            // The answer arrives 11 s after the token was bought: outside the
            // 10 s fresh window, although the attempt started inside it.
            clock.advance(secs(11));
            Err(forbidden())
        },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, None);
    assert!(out.refused_credentials.is_empty());
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    assert_eq!(source.purchases().len(), 1);
}

#[test]
fn a_not_found_on_a_token_held_past_the_window_is_not_a_refusal() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            if ctx.n == 1 {
                // A slow unjudged first attempt: the token is 12 s old by the second.
                clock.advance(secs(10));
                return Err(AttemptError::unjudged("connect", "timed out"));
            }
            Err(AttemptError::answered("connect", "404 Not Found")
                .with_auth(AuthSignal::ForbiddenOrNotFound))
        },
    );
    assert_eq!(rec.count(), 2);
    assert_eq!(
        rec.calls()[1].secret.as_deref(),
        Some("tok-1"),
        "a credential is bought again only after a refusal"
    );
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert!(out.refused_credentials.is_empty());
}

#[test]
fn time_spent_buying_a_credential_counts_against_the_budget() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::costing(&clock, secs(4)));
    let rec = Recorder::default();
    let out = policy.run(
        http_op(Bounds::new(secs(10), secs(8), 3)).credentials(source),
        |ctx| {
            rec.record(ctx);
            Ok(())
        },
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    let call = &rec.calls()[0];
    assert_eq!(call.started, secs(4));
    assert_eq!((call.remaining, call.timeout), (secs(6), secs(6)));
}

/// Fails the first purchase, then sells `tok-ok`.
struct FlakySource(std::sync::atomic::AtomicBool);

impl CredentialSource for FlakySource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        if !self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(CredentialError::new("the token command exited with 1"));
        }
        Ok(Credential::new(SecretString::from("tok-ok".to_string())))
    }
}

#[test]
fn a_failing_credential_source_is_an_unjudged_attempt_not_a_refusal() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let source = Arc::new(FlakySource(Default::default()));
    let out = policy.run(http_op(Bounds::default()).credentials(source), |ctx| {
        rec.record(ctx);
        Ok(())
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(
        rec.count(),
        1,
        "the operation is called only with a credential"
    );
    assert_eq!(rec.calls()[0].secret.as_deref(), Some("tok-ok"));
    assert_eq!(out.attempts.len(), 2);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap()
        .contains("token command"));
    assert!(out.refused_credentials.is_empty());
}

/// A caching source: returns its cached token until told it was refused.
struct Caching {
    minted: std::sync::Mutex<u32>,
    cached: std::sync::Mutex<Option<String>>,
    told: std::sync::Mutex<Vec<String>>,
}

impl CredentialSource for Caching {
    fn credential(&self) -> Result<Credential, CredentialError> {
        let mut cached = self.cached.lock().expect("lock");
        if cached.is_none() {
            let mut m = self.minted.lock().expect("lock");
            *m += 1;
            *cached = Some(format!("cached-{m}"));
        }
        Ok(Credential::new(SecretString::from(
            cached.clone().expect("set above"),
        )))
    }

    fn refused(&self, fp: &str) {
        self.told.lock().expect("lock").push(fp.to_string());
        *self.cached.lock().expect("lock") = None;
    }
}

#[test]
fn a_caching_source_is_told_of_a_refusal_and_mints_afresh() {
    let (policy, _clock) = manual_policy();
    let source = Arc::new(Caching {
        minted: Default::default(),
        cached: Default::default(),
        told: Default::default(),
    });
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source.clone()),
        |ctx| {
            let secret = ctx.credential().map(|c| {
                sluice_policy::secrecy::ExposeSecret::expose_secret(c.secret()).to_string()
            });
            if secret.as_deref() == Some("cached-1") {
                return Err(unauthorized());
            }
            Ok(secret)
        },
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.value, Some(Some("cached-2".to_string())));
    assert_eq!(
        *source.told.lock().expect("lock"),
        vec![fingerprint("cached-1")]
    );
}

/// Sells `tok-1`, `tok-2`, ...; the first `due` of them are already due for
/// replacement (their refresh time passed), the rest are good for a day.
struct AgingSource {
    sold: std::sync::atomic::AtomicUsize,
    due: usize,
}

impl CredentialSource for AgingSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        let n = self.sold.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let at = if n <= self.due {
            std::time::SystemTime::UNIX_EPOCH
        } else {
            std::time::SystemTime::now() + std::time::Duration::from_secs(86_400)
        };
        Ok(Credential::new(SecretString::from(format!("tok-{n}"))).with_refresh_at(at))
    }
}

#[test]
fn a_credential_due_for_replacement_is_replaced_before_the_next_request_not_after_a_refusal() {
    use sluice_policy::secrecy::ExposeSecret;
    let (policy, _clock) = manual_policy();
    let source = Arc::new(AgingSource {
        sold: Default::default(),
        due: 1,
    });
    let mut sent = Vec::new();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source.clone()),
        |ctx| -> Result<(), AttemptError> {
            // Two requests in one attempt, each asking first.
            for _ in 0..2 {
                let c = ctx.credential_for_request().expect("a credential");
                sent.push(c.secret().expose_secret().to_string());
            }
            Ok(())
        },
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.attempts.len(), 1);
    // tok-1 is due: replaced before the first request; tok-2 is good,
    // kept for both.
    assert_eq!(sent, ["tok-2", "tok-2"]);
    assert!(out.refused_credentials.is_empty());

    // A credential held from an earlier attempt that became due is
    // replaced when the next attempt starts.
    let source = Arc::new(AgingSource {
        sold: Default::default(),
        due: 1,
    });
    let mut sent = Vec::new();
    let out = policy.run(
        http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source),
        |ctx| -> Result<(), AttemptError> {
            sent.push(
                ctx.credential()
                    .map(|c| c.secret().expose_secret().to_string()),
            );
            if ctx.n == 1 {
                // Never asks before its request: tok-1 is sent as held.
                return Err(AttemptError::unjudged("connect", "connection refused"));
            }
            Ok(())
        },
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        sent,
        [Some("tok-1".to_string()), Some("tok-2".to_string())],
        "the second attempt starts with a new one"
    );
    assert!(out.refused_credentials.is_empty());
}

#[test]
fn a_settling_read_is_given_a_new_credential_when_the_held_one_is_due() {
    use sluice_policy::secrecy::ExposeSecret;
    use sluice_policy::Settlement;
    let (policy, _clock) = manual_policy();
    let source = Arc::new(AgingSource {
        sold: Default::default(),
        due: 1,
    });
    let op = Operation::new(
        "update-ref",
        sluice_policy::Effect::Write,
        "https://api.example.test/repos/o/r/git/refs/heads/main",
    )
    .bounds(Bounds::new(secs(60), secs(10), 4))
    .credentials(source);
    let mut sent = Vec::new();
    let mut read_with = Vec::new();
    let out = policy.run_write(
        op,
        |ctx| -> Result<(), AttemptError> {
            sent.push(
                ctx.credential()
                    .map(|c| c.secret().expose_secret().to_string()),
            );
            Err(AttemptError::unknown("request-sent", "connection reset"))
        },
        |rctx| {
            read_with.push(
                rctx.credential()
                    .map(|c| c.secret().expose_secret().to_string()),
            );
            Ok(Settlement::landed((), Default::default()))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(sent, [Some("tok-1".to_string())]);
    assert_eq!(read_with, [Some("tok-2".to_string())], "tok-1 was due");
}

/// What one purchase was for: the remote, the caller's headers, and how
/// many of them would go on a request to the remote's host and to another.
type Seen = (String, Vec<(String, String)>, usize, usize);

/// A source that keeps what each purchase was for.
#[derive(Default)]
struct PurchaseLog {
    challenged: bool,
    /// The first credential is due for replacement at once.
    first_due: bool,
    seen: std::sync::Mutex<Vec<Seen>>,
}

impl CredentialSource for PurchaseLog {
    fn credential(&self) -> Result<Credential, CredentialError> {
        Err(CredentialError::new("bought without the operation's facts"))
    }

    fn credential_for(
        &self,
        purchase: &sluice_policy::Purchase<'_>,
    ) -> Result<Credential, CredentialError> {
        let mut seen = self.seen.lock().expect("log");
        seen.push((
            purchase.remote().to_string(),
            purchase.headers().to_vec(),
            purchase
                .headers_for("https://API.example.test:443/app/installations/9/access_tokens")
                .len(),
            purchase
                .headers_for("https://example.test/app/installations/9/access_tokens")
                .len(),
        ));
        let c = Credential::new(SecretString::from(format!("tok-{}", seen.len())));
        Ok(if self.first_due && seen.len() == 1 {
            c.with_refresh_at(std::time::UNIX_EPOCH)
        } else {
            c
        })
    }

    fn after_challenge(&self) -> bool {
        self.challenged
    }
}

#[test]
fn every_purchase_is_told_the_operations_remote_and_its_callers_headers() {
    let traceparent = (
        "traceparent".to_string(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
    );
    for challenged in [false, true] {
        let (policy, _clock) = manual_policy();
        let source = Arc::new(PurchaseLog {
            challenged,
            ..PurchaseLog::default()
        });
        let mut op = http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source.clone());
        op.headers.push(traceparent.clone());
        let out = policy.run(op, |ctx| {
            if let Some(c) = ctx.challenge() {
                c.fill().map_err(|e| {
                    AttemptError::unjudged("connect", e.message).with_auth(AuthSignal::Unauthorized)
                })?;
            }
            if ctx.n == 1 {
                return Err(unauthorized());
            }
            Ok(200)
        });
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
        let seen = source.seen.lock().expect("log").clone();
        // Bought for the first attempt (on its challenge when the source
        // waits for one) and again after the refusal.
        assert_eq!(seen.len(), 2, "challenged {challenged}: {seen:?}");
        for (remote, headers, on_host, elsewhere) in seen {
            assert_eq!(remote, "https://api.example.test/repos/o/r");
            assert_eq!(headers, vec![traceparent.clone()]);
            assert_eq!(on_host, 1, "the remote's host (its default port written)");
            assert_eq!(elsewhere, 0, "another host is not sent them");
        }
    }
}

#[test]
fn a_purchase_replacing_a_due_credential_inside_an_attempt_is_told_the_callers_headers() {
    let traceparent = (
        "traceparent".to_string(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
    );
    let (policy, _clock) = manual_policy();
    let source = Arc::new(PurchaseLog {
        first_due: true,
        ..PurchaseLog::default()
    });
    let mut op = http_op(Bounds::new(secs(60), secs(10), 4)).credentials(source.clone());
    op.headers.push(traceparent.clone());
    let out = policy.run(op, |ctx| {
        // The one held is due: replaced before this request.
        let c = ctx.credential_for_request().expect("a credential");
        assert_eq!(c.fingerprint(), fingerprint("tok-2"));
        Ok(200)
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let seen = source.seen.lock().expect("log").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|(_, h, _, _)| h == &vec![traceparent.clone()]),
        "{seen:?}"
    );
}
