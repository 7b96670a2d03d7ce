//! Operation ids: asked again, an id is rejected without any call, in one
//! process. Across processes sharing a ledger file: `sluice-testbins`
//! (`crates/testbins/tests/it/policy_file_ledger.rs`), where the second
//! process's program lives.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, BudgetStore, Claim, ClaimRequest, Clock, Effect,
    FileLedger, FinishRequest, Ledger, MemoryLedger, OutcomeKind, Policy, PreviousResult,
    PreviousRun, RetryBudget, FINISH_FLOOR,
};

fn exhausting_bounds() -> Bounds {
    Bounds::new(secs(10), secs(2), 3).with_backoff(BackoffShape::constant(millis(100)))
}

fn failing(
    rec: &Recorder,
) -> impl FnMut(&mut sluice_policy::AttemptCtx<'_>) -> Result<(), AttemptError> + '_ {
    move |ctx| {
        rec.record(ctx);
        Err(AttemptError::unjudged("connect", "connection refused"))
    }
}

#[test]
fn an_id_asked_again_after_exhaustion_is_rejected_without_a_call() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let first = policy.run(
        read_op(exhausting_bounds()).id("op-exhausted"),
        failing(&rec),
    );
    assert_eq!(first.kind, OutcomeKind::Unknown);
    assert_eq!(rec.count(), 3);

    let again = Recorder::default();
    let out = policy.run(read_op(exhausting_bounds()).id("op-exhausted"), |ctx| {
        again.record(ctx);
        Ok(())
    });
    assert_eq!(again.count(), 0, "no downstream call");
    assert_eq!(out.kind, OutcomeKind::Rejected);
    assert!(out.attempts.is_empty());
    let previous = out.previous.as_ref().expect("the earlier run is carried");
    assert_eq!(previous.result, OutcomeKind::Unknown);
    assert_eq!(previous.attempts, first.attempts);
    assert_eq!(previous.elapsed_ms, first.elapsed_ms);
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["result"], "rejected");
    assert_eq!(json["previous"]["result"], "unknown");
    assert_eq!(json["previous"]["attempts"].as_array().unwrap().len(), 3);
}

#[test]
fn an_id_asked_again_after_success_is_rejected_without_a_call() {
    let (policy, _clock) = manual_policy();
    let first = policy.run(write_op(Bounds::default()).id("op-done"), |_ctx| Ok(1));
    assert!(first.is_success());
    let again = Recorder::default();
    let out = policy.run(write_op(Bounds::default()).id("op-done"), |ctx| {
        again.record(ctx);
        Ok(2)
    });
    assert_eq!(again.count(), 0);
    assert_eq!(out.kind, OutcomeKind::Rejected);
    assert_eq!(out.value, None);
    assert_eq!(out.previous.unwrap().result, OutcomeKind::Succeeded);
}

#[test]
fn an_id_asked_again_while_it_still_runs_is_rejected_with_a_running_previous_run() {
    let (policy, _clock) = manual_policy();
    let inner = Recorder::default();
    let out = policy.run(read_op(Bounds::default()).id("op-running"), |_ctx| {
        let nested = policy.run(read_op(Bounds::default()).id("op-running"), |ctx| {
            inner.record(ctx);
            Ok(())
        });
        assert_eq!(nested.kind, OutcomeKind::Rejected);
        let previous = nested.previous.expect("the earlier run, still running");
        assert_eq!(previous.result, PreviousResult::Running);
        assert_eq!(previous.may_have_applied, None, "a read");
        Ok(())
    });
    assert!(out.is_success());
    assert_eq!(inner.count(), 0);
}

#[test]
fn operations_without_an_id_get_distinct_generated_ids() {
    let (policy, _clock) = manual_policy();
    let a = policy.run(read_op(Bounds::default()), |_ctx| Ok(()));
    let b = policy.run(read_op(Bounds::default()), |_ctx| Ok(()));
    assert!(a.is_success() && b.is_success());
    assert!(!a.operation.id.is_empty());
    assert_ne!(a.operation.id, b.operation.id);
}

/// A claim of `id` with ten seconds left.
fn req(id: &str) -> ClaimRequest<'_> {
    ClaimRequest::new(id, Effect::Write, secs(10))
}

/// `r` for another id.
fn with_id<'a>(mut r: ClaimRequest<'a>, id: &'a str) -> ClaimRequest<'a> {
    r.id = id;
    r
}

/// The earlier run a claim answers for an id still running.
fn running(claim: Claim) -> PreviousRun {
    match claim {
        Claim::Taken(Some(run)) if run.result == PreviousResult::Running => {
            assert!(run.attempts.is_empty(), "{run:?}");
            run
        }
        other => panic!("not a running earlier run: {other:?}"),
    }
}

#[test]
fn a_memory_ledger_claims_an_id_once() {
    let ledger = MemoryLedger::new();
    assert_eq!(ledger.claim(&req("x")).unwrap(), Claim::Claimed);
    running(ledger.claim(&req("x")).unwrap());
}

#[test]
fn a_memory_ledger_answers_a_claim_still_running_with_its_kind_and_effect() {
    let ledger = MemoryLedger::new();
    let fetch = ClaimRequest::new("job", Effect::Read, secs(10)).operation("fetch", "git://h/r");
    assert_eq!(ledger.claim(&fetch).unwrap(), Claim::Claimed);
    let push = req("job").operation("push", "git://h/r");
    let earlier = running(ledger.claim(&push).unwrap());
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(earlier.may_have_applied, None, "the earlier run is a read");

    assert_eq!(ledger.claim(&with_id(push, "w")).unwrap(), Claim::Claimed);
    let earlier = running(ledger.claim(&with_id(fetch, "w")).unwrap());
    assert_eq!(earlier.kind.as_deref(), Some("push"));
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "a write still running"
    );
}

#[test]
fn a_file_ledger_answers_a_claim_still_running_with_its_kind_effect_and_age() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    let push = req("job").operation("push", "git://h/r");
    assert_eq!(FileLedger::new(&path).claim(&push).unwrap(), Claim::Claimed);
    // Another value over the file (another process) sees what the claim was.
    let fetch = ClaimRequest::new("job", Effect::Read, secs(10)).operation("fetch", "git://h/r");
    let earlier = running(FileLedger::new(&path).claim(&fetch).unwrap());
    assert_eq!(earlier.kind.as_deref(), Some("push"));
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "a write still running"
    );

    // A claim made a minute ago says so; one an earlier version wrote
    // (`null`) is running, nothing known of it.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let text = serde_json::json!({"operations": {
        "a-minute-ago": {"kind": "fetch", "result": "running", "may_have_applied": null,
                         "elapsed_ms": 0, "attempts": [], "claimed_at_ms": now_ms - 60_000},
        "old": null,
    }});
    std::fs::write(&path, text.to_string()).unwrap();
    let ledger = FileLedger::new(&path);
    let earlier = running(ledger.claim(&with_id(push, "a-minute-ago")).unwrap());
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(earlier.may_have_applied, None);
    assert!(earlier.elapsed_ms >= 60_000, "{earlier:?}");
    let earlier = running(ledger.claim(&with_id(fetch, "old")).unwrap());
    assert_eq!(earlier.kind, None);
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "nothing says it did not write"
    );
}

#[test]
fn a_file_ledger_claims_an_id_once_and_keeps_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    let (builder, _clock) = manual_builder();
    let policy = builder.ledger(Arc::new(FileLedger::new(&path))).build();
    let first = policy.run(read_op(Bounds::default()).id("op-file"), |_ctx| Ok(()));
    assert!(first.is_success());
    // A fresh value over the same file sees the claim and its outcome.
    let ledger = FileLedger::new(&path);
    match ledger.claim(&req("op-file")).unwrap() {
        Claim::Taken(Some(prev)) => assert_eq!(prev.result, OutcomeKind::Succeeded),
        other => panic!("{other:?}"),
    }
    assert_eq!(ledger.claim(&req("op-other")).unwrap(), Claim::Claimed);
    // No temporary file is left beside the ledger.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
}

#[test]
fn a_generated_id_passed_back_is_rejected_and_a_memory_ledger_does_not_keep_it() {
    let policy = Policy::default();
    let first = policy.run(read_op(Bounds::default()), |_ctx| Ok(1));
    assert_eq!(first.kind, OutcomeKind::Succeeded);
    let id = first.operation.id.clone();
    let again = policy.run(
        read_op(Bounds::default()).id(id.clone()),
        |_ctx| -> Result<u32, _> { unreachable!("an id run once is never run again") },
    );
    assert_eq!(again.kind, OutcomeKind::Rejected);
    // An id of the same form that this policy never issued is a new one.
    let (prefix, n) = id.rsplit_once('-').expect("prefix-counter");
    let unissued = format!("{prefix}-{}", n.parse::<u64>().unwrap() + 1000);
    let fresh = policy.run(read_op(Bounds::default()).id(unissued), |_ctx| Ok(2));
    assert_eq!(fresh.kind, OutcomeKind::Succeeded);
    // Another policy's generated ids differ.
    let other = Policy::default().run(read_op(Bounds::default()), |_ctx| Ok(3));
    assert_ne!(other.operation.id, id);
}

/// A claim as the ledger saw it: id, time left, kind, remote.
type Claimed = (String, Duration, Option<String>, Option<String>);

/// What a ledger and a budget store were asked, with the time left.
#[derive(Debug, Default)]
struct Asked {
    claims: std::sync::Mutex<Vec<Claimed>>,
    finishes: std::sync::Mutex<Vec<(String, Duration, PreviousResult)>>,
    spends: std::sync::Mutex<Vec<Duration>>,
    credits: std::sync::Mutex<Vec<Duration>>,
}

impl Ledger for Asked {
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, sluice_policy::LedgerError> {
        self.claims.lock().unwrap().push((
            req.id.to_string(),
            req.left,
            req.kind.map(str::to_string),
            req.remote.map(str::to_string),
        ));
        Ok(Claim::Claimed)
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), sluice_policy::LedgerError> {
        self.finishes
            .lock()
            .unwrap()
            .push((req.id.to_string(), req.left, req.run.result));
        Ok(())
    }
}

impl BudgetStore for Asked {
    fn try_spend(&self, _: &str, _: &RetryBudget, _: Duration, left: Duration) -> (bool, f64) {
        self.spends.lock().unwrap().push(left);
        (true, 1.0)
    }

    fn credit(&self, _: &str, _: &RetryBudget, _: Duration, left: Duration) -> f64 {
        self.credits.lock().unwrap().push(left);
        1.0
    }

    fn drain(&self, _: &str, _: &RetryBudget, _: Duration, _: Duration) {}
}

#[test]
fn the_ledger_and_the_budget_are_given_what_remains_of_the_deadline() {
    let asked = Arc::new(Asked::default());
    let (builder, clock) = manual_builder();
    let policy = builder
        .ledger(asked.clone())
        .budget_store(asked.clone())
        .build();
    let bounds =
        Bounds::new(secs(10), secs(2), 3).with_backoff(BackoffShape::constant(millis(100)));
    let mut n = 0;
    let out = policy.run(read_op(bounds).id("op-left"), |_ctx| {
        n += 1;
        clock.advance(secs(3));
        if n == 1 {
            Err(AttemptError::unjudged("connect", "connection refused"))
        } else {
            Ok(())
        }
    });
    assert!(out.is_success(), "{out:?}");
    assert_eq!(
        *asked.claims.lock().unwrap(),
        vec![(
            "op-left".to_string(),
            secs(10),
            Some("ls-refs".to_string()),
            Some("git://example.test/repo".to_string())
        )]
    );
    // The retry's token was taken 3 s in; the credit after the success,
    // 3 s + 100 ms + 3 s in.
    assert_eq!(*asked.spends.lock().unwrap(), vec![secs(7)]);
    assert_eq!(*asked.credits.lock().unwrap(), vec![millis(3_900)]);
    assert_eq!(
        *asked.finishes.lock().unwrap(),
        vec![(
            "op-left".to_string(),
            millis(3_900),
            PreviousResult::Succeeded
        )]
    );
}

#[test]
fn a_finish_after_the_deadline_is_given_the_floor() {
    let asked = Arc::new(Asked::default());
    let (builder, clock) = manual_builder();
    let policy = builder.ledger(asked.clone()).build();
    let bounds = Bounds::new(secs(2), secs(2), 1);
    let out = policy.run(read_op(bounds).id("op-late"), |_ctx| {
        clock.advance(secs(5));
        Err::<(), _>(AttemptError::unjudged("connect", "timed out"))
    });
    assert_eq!(out.recorded, Some(true));
    assert_eq!(
        *asked.finishes.lock().unwrap(),
        vec![("op-late".to_string(), FINISH_FLOOR, PreviousResult::Unknown)]
    );
}

/// A ledger whose finish fails after taking the time it is given (a
/// database that hangs), on the policy's manual clock.
struct HangingFinish {
    clock: sluice_policy::ManualClock,
    given: std::sync::Mutex<Vec<Duration>>,
}

impl Ledger for HangingFinish {
    fn claim(&self, _: &ClaimRequest<'_>) -> Result<Claim, sluice_policy::LedgerError> {
        Ok(Claim::Claimed)
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), sluice_policy::LedgerError> {
        self.given.lock().unwrap().push(req.left);
        self.clock.advance(req.left);
        Err(sluice_policy::LedgerError {
            path: "postgres://h/db".into(),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer"),
        })
    }
}

#[test]
fn a_finish_that_hangs_ends_recorded_false_at_most_the_floor_past_the_deadline() {
    let (builder, clock) = manual_builder();
    let ledger = Arc::new(HangingFinish {
        clock: clock.clone(),
        given: Default::default(),
    });
    let policy = builder.ledger(ledger.clone()).build();
    let bounds = Bounds::new(secs(2), secs(2), 1);
    let out = policy.run(read_op(bounds).id("op-hang"), |_ctx| {
        clock.advance(millis(500));
        Ok(())
    });
    assert!(out.is_success());
    assert_eq!(out.recorded, Some(false));
    // One try given the 1.5 s left; none after it (no time for another).
    assert_eq!(*ledger.given.lock().unwrap(), vec![millis(1_500)]);
    assert!(clock.now() <= secs(2) + FINISH_FLOOR, "{:?}", clock.now());
}
