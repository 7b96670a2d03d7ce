//! Operation ids across processes sharing the policy's ledger file: an id
//! asked again by a second process is rejected without any call, and of
//! processes claiming one id at once, one calls the operation. The second
//! process is this package's `ledger-probe` (`src/bin/ledger_probe.rs`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use sluice_policy::{
    AttemptError, BackoffShape, Bounds, Effect, FileLedger, ManualClock, Operation, OutcomeKind,
    Policy,
};

/// A policy on a [`ManualClock`] (no sleep is real) whose ledger is the
/// file `ledger`.
fn policy_on(ledger: &Path) -> Policy {
    let clock = ManualClock::new();
    Policy::builder()
        .clock(Arc::new(clock.clone()))
        .sleeper(Arc::new(clock))
        .ledger(Arc::new(FileLedger::new(ledger)))
        .build()
}

/// An ls-refs read against `git://example.test/repo`, as the probe runs.
fn read_op(bounds: Bounds) -> Operation {
    Operation::new("ls-refs", Effect::Read, "git://example.test/repo").bounds(bounds)
}

/// Three attempts 100 ms apart: an operation whose every attempt fails
/// exhausts them.
fn exhausting_bounds() -> Bounds {
    Bounds::new(Duration::from_secs(10), Duration::from_secs(2), 3)
        .with_backoff(BackoffShape::constant(Duration::from_millis(100)))
}

/// The probe binary: the second process of the cross-process tests.
const PROBE: &str = env!("CARGO_BIN_EXE_ledger-probe");

fn spawn_probe(ledger: &Path, id: &str, calls: &Path, out: &Path, wait: bool) -> Child {
    let mut cmd = Command::new(PROBE);
    cmd.arg(ledger)
        .arg(id)
        .arg(calls)
        .arg(out)
        .stdin(if wait { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null());
    if wait {
        cmd.arg("--wait");
    }
    cmd.spawn().expect("the probe starts")
}

fn finish_probe(mut child: Child, out: &Path) -> serde_json::Value {
    let status = child.wait().unwrap();
    assert!(status.success(), "the probe failed: {status}");
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_second_process_asking_for_an_exhausted_or_succeeded_id_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let policy = policy_on(&ledger);
    let mut calls = 0;
    let exhausted = policy.run(read_op(exhausting_bounds()).id("op-exhausted"), |_ctx| {
        calls += 1;
        Err::<(), _>(AttemptError::unjudged("connect", "connection refused"))
    });
    assert_eq!(calls, 3, "every attempt ran");
    assert_eq!(exhausted.kind, OutcomeKind::Unknown);
    let done = policy.run(read_op(Bounds::default()).id("op-done"), |_ctx| {
        Ok("parent")
    });
    assert!(done.is_success());

    for (id, previous) in [("op-exhausted", "unknown"), ("op-done", "succeeded")] {
        let calls = dir.path().join(format!("{id}.calls"));
        let out = dir.path().join(format!("{id}.out"));
        let child = spawn_probe(&ledger, id, &calls, &out, false);
        let v = finish_probe(child, &out);
        assert_eq!(v["result"], "rejected", "{id}: {v}");
        assert_eq!(v["previous"]["result"], previous, "{id}: {v}");
        assert_eq!(v["attempts"], serde_json::json!([]));
        assert_eq!(
            lines(&calls),
            0,
            "{id}: the second process called the operation"
        );
    }
    let v = {
        let out = dir.path().join("fresh.out");
        let calls = dir.path().join("fresh.calls");
        let v = finish_probe(spawn_probe(&ledger, "op-fresh", &calls, &out, false), &out);
        assert_eq!(lines(&calls), 1);
        v
    };
    assert_eq!(v["result"], "succeeded", "a fresh id runs: {v}");
}

#[test]
fn processes_claiming_one_id_at_the_same_instant_call_the_operation_once() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let calls = dir.path().join("calls");
    let n = 8;
    let mut children = Vec::new();
    for i in 0..n {
        let out = dir.path().join(format!("out-{i}"));
        let child = spawn_probe(&ledger, "op-race", &calls, &out, true);
        children.push((child, out));
    }
    // Release them all at once.
    for (child, _) in &mut children {
        drop(child.stdin.take());
    }
    let results: Vec<serde_json::Value> = children
        .into_iter()
        .map(|(child, out)| finish_probe(child, &out))
        .collect();
    let succeeded = results
        .iter()
        .filter(|v| v["result"] == "succeeded")
        .count();
    let rejected = results.iter().filter(|v| v["result"] == "rejected").count();
    let kinds: Vec<_> = results.iter().map(|v| v["result"].to_string()).collect();
    assert_eq!((succeeded, rejected), (1, n - 1), "{kinds:?}");
    assert_eq!(lines(&calls), 1, "exactly one process called the operation");
}
