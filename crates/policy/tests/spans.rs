//! Spans: eight operations on eight threads under one capturing subscriber
//! (installed for the whole process, as a service installs its own), and
//! every event attributed to its operation and, inside an attempt, to that
//! attempt. One test in its own binary: the subscriber is global.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, Effect, Operation, OutcomeKind, Policy, Settlement,
};
use sluice_testkit::Capture;

#[test]
fn eight_operations_on_eight_threads_have_every_event_in_their_own_operation_and_attempt() {
    let capture = Capture::new();
    tracing::subscriber::set_global_default(capture.subscriber()).expect("the only subscriber");
    let (builder, _clock) = manual_builder();
    let policy = Arc::new(builder.build());
    let bounds = Bounds::new(secs(60), secs(5), 4).with_backoff(BackoffShape::constant(millis(10)));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let policy: Arc<Policy> = Arc::clone(&policy);
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || run_one(&policy, i, bounds))
                .expect("thread")
        })
        .collect();
    let outcomes: BTreeMap<String, (OutcomeKind, usize)> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();

    let events = capture.events();
    assert!(!events.is_empty());
    let mut seen_attempts: BTreeMap<String, usize> = BTreeMap::new();
    let mut settling_reads = 0;
    for e in events.iter().filter(|e| e.target.starts_with("sluice")) {
        let i: usize = e
            .thread
            .strip_prefix("worker-")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("an event on another thread: {e:?}"));
        let id = format!("op-{i}");
        // Every event is in exactly its own operation's span.
        let ops: Vec<_> = e.spans.iter().filter(|s| s.name == "operation").collect();
        assert_eq!(ops.len(), 1, "{e:?}");
        assert_eq!(ops[0].fields.get("id"), Some(&id), "{e:?}");
        assert_eq!(
            ops[0].fields.get("host").map(String::as_str),
            Some("example.test:8443")
        );
        let effect = if i.is_multiple_of(2) { "write" } else { "read" };
        assert_eq!(
            ops[0].fields.get("effect").map(String::as_str),
            Some(effect)
        );
        match e.message.as_str() {
            // The attempt's own events: in its span, whose phase and class
            // are recorded by the time it says how it ended.
            "layer says" | "attempt failed" | "attempt succeeded" => {
                let n = e
                    .span_field("attempt", "n")
                    .unwrap_or_else(|| panic!("{e:?}"));
                assert_eq!(Some(n), e.fields.get("n").map(String::as_str), "{e:?}");
                if e.message != "layer says" {
                    assert!(e.span_field("attempt", "phase").is_some(), "{e:?}");
                    assert!(e.span_field("attempt", "class").is_some(), "{e:?}");
                }
                if e.message.starts_with("attempt") {
                    *seen_attempts.entry(id.clone()).or_default() += 1;
                }
            }
            "settling read" => {
                assert!(e.span("attempt").is_none(), "{e:?}");
                assert_eq!(e.span_field("settling_read", "n"), Some("1"), "{e:?}");
                settling_reads += 1;
            }
            // The end of the operation is outside every attempt.
            "operation ended" => assert!(e.span("attempt").is_none(), "{e:?}"),
            _ => {}
        }
    }
    assert_eq!(settling_reads, 4, "one per write");
    for (id, (kind, attempts)) in &outcomes {
        assert_eq!(*kind, OutcomeKind::Succeeded, "{id}");
        assert_eq!(seen_attempts.get(id), Some(attempts), "{id}");
        let ended = events
            .iter()
            .filter(|e| {
                e.message == "operation ended" && e.span_field("operation", "id") == Some(id)
            })
            .count();
        assert_eq!(ended, 1, "one info event per operation: {id}");
    }
}

/// Operation `op-i`: `i % 3` unjudged failures, then success; even ones are
/// writes whose last failure is unknown, settled by reading.
fn run_one(policy: &Policy, i: usize, bounds: Bounds) -> (String, (OutcomeKind, usize)) {
    let id = format!("op-{i}");
    let fails = (i % 3) as u32;
    let attempt = |ctx: &mut sluice_policy::AttemptCtx<'_>| -> Result<&str, AttemptError> {
        tracing::debug!(target: "sluice_git::fake", n = ctx.n, "layer says");
        std::thread::yield_now();
        if ctx.n <= fails {
            return Err(AttemptError::unjudged("connect", "connection refused"));
        }
        ctx.reached("done");
        Ok("value")
    };
    let remote = "https://user:secret@example.test:8443/r";
    let out = if i.is_multiple_of(2) {
        let op = Operation::new("push", Effect::Write, remote)
            .bounds(bounds)
            .id(id.clone());
        policy.run_write(
            op,
            |ctx| {
                let v = attempt(ctx)?;
                Err(AttemptError::unknown("pack-sent", format!("cut after {v}")))
            },
            |read| {
                tracing::debug!(target: "sluice_git::fake", n = read.n, "settling read");
                Ok(Settlement::landed("value", BTreeMap::new()))
            },
        )
    } else {
        let op = Operation::new("ls-refs", Effect::Read, remote)
            .bounds(bounds)
            .id(id.clone());
        policy.run(op, attempt)
    };
    (id, (out.kind, out.attempts.len()))
}
