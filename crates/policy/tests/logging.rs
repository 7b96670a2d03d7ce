//! Logging: every attempt at debug; a refusal that stands once per cause and
//! host, however many tries and operations meet it. One test in its own
//! binary, so no other thread's events land in the buffer.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::*;
use sluice_policy::secrecy::SecretString;
use sluice_policy::{
    fingerprint, AttemptError, AuthSignal, Bounds, Effect, Operation, StaticSource,
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

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[test]
fn a_refusal_that_stands_is_logged_once_per_cause_and_host_not_once_per_try() {
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
        policy.run(
            op("https://b.example.test/x"),
            refuse("401 Bad credentials"),
        );
        policy.run(
            op("https://a.example.test/x"),
            refuse("401 Requires authentication"),
        );
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
