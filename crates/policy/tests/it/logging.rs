//! Logging: every attempt at debug; a refusal that stands logged per cause
//! and host, not once per try and not once per process: when it starts, at
//! most every ten minutes while it stands (with its repeats), and again at
//! once when it comes back after the host recovered. Each test's subscriber
//! is its own thread's (the policy logs on the caller's thread).

use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::common::*;
use sluice_policy::secrecy::SecretString;
use sluice_policy::{
    fingerprint, AttemptError, AuthSignal, Bounds, Effect, Operation, OutcomeKind, StaticSource,
};
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Buffer {
        self.clone()
    }
}

/// A process-wide subscriber that wants to be asked about every callsite
/// and enables nothing. tracing caches each callsite's interest across the
/// process: a callsite first reached by another test's thread (no
/// subscriber there) while this test's subscriber was being made could be
/// cached as "never" and this test's events lost (seen: all six attempt
/// lines missing, 4 runs in 20). With this one installed every callsite is
/// "sometimes", so each event asks the subscriber of its own thread.
struct AskEveryTime;

impl tracing::Subscriber for AskEveryTime {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Installs [`AskEveryTime`] once, before a test makes its own subscriber.
fn ask_every_time() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::subscriber::set_global_default(AskEveryTime)
            .expect("no other global subscriber in this binary");
    });
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[test]
fn a_refusal_that_stands_is_logged_once_per_cause_and_host_not_once_per_try() {
    ask_every_time();
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(buffer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let secret = "ghs_do_not_log_me";
    let (policy, clock) = manual_policy();
    let source = Arc::new(StaticSource::new(SecretString::from(secret.to_string())));
    let op = |remote: &str| {
        Operation::new("http-get", Effect::Read, remote)
            .bounds(Bounds::default())
            .credentials(source.clone())
    };
    let refuse = |cause: &'static str| {
        move |_ctx: &mut sluice_policy::AttemptCtx<'_>| -> Result<(), AttemptError> {
            Err(AttemptError::answered("response-headers", cause)
                .with_auth(AuthSignal::Unauthorized))
        }
    };
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let out = policy.run(
                op("https://a.example.test/x"),
                refuse("401 Bad credentials"),
            );
            assert_eq!(out.stopped, Some(sluice_policy::Stopped::CredentialRefused));
        }
        for (url, words) in [
            ("https://b.example.test/x", "401 Bad credentials"),
            ("https://a.example.test/x", "401 Requires authentication"),
        ] {
            let out = policy.run(op(url), refuse(words));
            assert_eq!(out.kind, OutcomeKind::Answered);
        }
        // A refusal that does not stand (a fresh token follows) is not logged as one.
        let counting = Arc::new(CountingSource::new(&clock));
        let out = policy.run(
            Operation::new("http-get", Effect::Read, "https://c.example.test/x")
                .credentials(counting),
            |ctx| {
                if ctx.n == 1 {
                    return Err(
                        AttemptError::answered("response-headers", "401 Bad credentials")
                            .with_auth(AuthSignal::Unauthorized),
                    );
                }
                Ok(())
            },
        );
        assert!(out.is_success());
    });
    let text = buffer.text();
    let stands: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("credential refusal stands"))
        .collect();
    assert_eq!(
        stands.len(),
        3,
        "once per (host, cause):\n{}",
        stands.join("\n")
    );
    assert!(stands.iter().all(|l| l.contains("WARN")));
    assert_eq!(
        stands
            .iter()
            .filter(|l| l.contains("a.example.test"))
            .count(),
        2
    );
    assert_eq!(
        stands
            .iter()
            .filter(|l| l.contains("b.example.test"))
            .count(),
        1
    );
    assert!(
        stands[0].contains(&fingerprint(secret)),
        "the fingerprint is named: {}",
        stands[0]
    );
    // Every attempt is logged at debug, and every operation's end.
    let attempts = text
        .lines()
        .filter(|l| l.contains("DEBUG") && l.contains("attempt failed"))
        .count();
    assert_eq!(attempts, 6, "{text}");
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("operation ended"))
            .count(),
        6
    );
    assert!(!text.contains(secret), "a secret reached the log:\n{text}");
    assert!(
        !text.contains("tok-1") && !text.contains("tok-2"),
        "a secret reached the log:\n{text}"
    );
}

#[test]
fn over_an_hour_a_standing_refusal_is_logged_when_it_starts_each_ten_minutes_with_its_repeats_and_again_after_recovery(
) {
    ask_every_time();
    let capture = sluice_testkit::Capture::new();
    let (policy, clock) = manual_policy();
    let source = Arc::new(StaticSource::new(SecretString::from("t0k".to_string())));
    let refused = |host: &str| {
        let out = policy.run(
            Operation::new("http-get", Effect::Read, format!("https://{host}/x"))
                .credentials(source.clone()),
            |_ctx| -> Result<(), AttemptError> {
                Err(
                    AttemptError::answered("response-headers", "401 Bad credentials")
                        .with_auth(AuthSignal::Unauthorized),
                )
            },
        );
        assert_eq!(out.stopped, Some(sluice_policy::Stopped::CredentialRefused));
    };
    // (minute, host, message, repeats) of every line about a refusal.
    let mut lines: Vec<(u64, String, String, Option<String>)> = Vec::new();
    tracing::subscriber::with_default(capture.subscriber(), || {
        let mut read = 0;
        for minute in 0..=62u64 {
            match minute {
                // a.test refuses every minute of the hour, and again after
                // it recovered at 60.
                60 => assert!(policy
                    .run(
                        Operation::new("http-get", Effect::Read, "https://a.test/x"),
                        |_ctx| Ok(())
                    )
                    .is_success()),
                _ => refused("a.test"),
            }
            // b.test refuses every seven minutes from minute 3.
            if minute >= 3 && (minute - 3).is_multiple_of(7) {
                refused("b.test:8443");
            }
            let events = capture.events();
            for e in &events[read..] {
                if e.message.contains("credential refusal") {
                    assert_eq!(
                        e.span_field("operation", "host"),
                        e.fields.get("host").map(String::as_str)
                    );
                    lines.push((
                        minute,
                        e.fields["host"].clone(),
                        format!("{} {}", e.level, e.message),
                        e.fields.get("repeats").cloned(),
                    ));
                }
            }
            read = events.len();
            clock.advance(secs(60));
        }
    });
    let expected: Vec<(u64, &str, &str, Option<&str>)> = vec![
        (0, "a.test", "WARN credential refusal stands", None),
        (3, "b.test:8443", "WARN credential refusal stands", None),
        (10, "a.test", "WARN credential refusal stands", Some("10")),
        (
            17,
            "b.test:8443",
            "WARN credential refusal stands",
            Some("2"),
        ),
        (20, "a.test", "WARN credential refusal stands", Some("10")),
        (30, "a.test", "WARN credential refusal stands", Some("10")),
        (
            31,
            "b.test:8443",
            "WARN credential refusal stands",
            Some("2"),
        ),
        (40, "a.test", "WARN credential refusal stands", Some("10")),
        (
            45,
            "b.test:8443",
            "WARN credential refusal stands",
            Some("2"),
        ),
        (50, "a.test", "WARN credential refusal stands", Some("10")),
        (
            59,
            "b.test:8443",
            "WARN credential refusal stands",
            Some("2"),
        ),
        // Recovered: the nine repeats since minute 50 are reported...
        (
            60,
            "a.test",
            "INFO credential refusal no longer stands",
            Some("9"),
        ),
        // ...and the refusal that comes back is logged at once.
        (61, "a.test", "WARN credential refusal stands", None),
    ];
    let expected: Vec<(u64, String, String, Option<String>)> = expected
        .into_iter()
        .map(|(m, h, msg, r)| (m, h.to_string(), msg.to_string(), r.map(str::to_string)))
        .collect();
    assert_eq!(lines, expected);
}

#[test]
fn a_wait_the_remote_asked_for_and_a_retry_refused_by_an_empty_budget_are_events() {
    ask_every_time();
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(buffer.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let (builder, clock) = manual_builder();
    let policy = builder
        .retry_budget(sluice_policy::RetryBudget {
            capacity: 1.0,
            refill_per_sec: 0.0,
            success_credit: 0.0,
        })
        .build();
    tracing::subscriber::with_default(subscriber, || {
        let out = policy.run(
            Operation::new("http-get", Effect::Read, "https://six.test/x").bounds(Bounds::new(
                secs(60),
                secs(5),
                5,
            )),
            |_ctx| -> Result<(), AttemptError> {
                clock.advance(secs(1));
                Err(AttemptError::unjudged("response-headers", "HTTP 429")
                    .with_retry_after(Some(secs(2))))
            },
        );
        assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    });
    let text = buffer.text();
    let asked: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("waiting as the remote asked"))
        .collect();
    assert_eq!(asked.len(), 1, "{text}");
    assert!(
        asked[0].contains("wait_ms=2000") && asked[0].contains("six.test"),
        "{text}"
    );
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("retry refused: the host's retry budget is empty"))
        .collect();
    assert_eq!(refused.len(), 1, "{text}");
    assert!(
        refused[0].contains("operation{"),
        "in the operation's span: {text}"
    );
}
