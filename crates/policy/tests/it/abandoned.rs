//! A claim without a finish: `running` while its deadline (plus the
//! finish's floor) has not passed, `abandoned` after it, with the phase its
//! run recorded before its risky step, its host and its pid — in memory and
//! in the JSON file ledger. (The SQLite and PostgreSQL stores: the ledger
//! crate's tests.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_policy::{
    this_host, AttemptError, Bounds, Claim, ClaimRequest, Effect, FileLedger, FinishRequest,
    Ledger, MemoryLedger, Operation, OutcomeKind, Policy, PreviousResult, PreviousRun,
    ProgressRequest, FINISH_FLOOR,
};

/// The earlier run a claim of a taken id answers.
fn taken(ledger: &dyn Ledger, id: &str) -> PreviousRun {
    let req = ClaimRequest::new(id, Effect::Write, Duration::from_secs(5));
    match ledger.claim(&req).expect("the ledger answers") {
        Claim::Taken(Some(run)) => run,
        other => panic!("{id} is taken, got {other:?}"),
    }
}

/// Wait until `deadline` plus the finish's floor has passed since `since`
/// (the event the judgement depends on is the time itself).
fn past(since: Instant, deadline: Duration) {
    let until = since + deadline + FINISH_FLOOR + Duration::from_millis(20);
    while Instant::now() < until {
        std::thread::sleep(until - Instant::now());
    }
}

fn claim_then_die(ledger: &dyn Ledger) {
    // A claim whose deadline is far: running, whatever it recorded.
    let long = ClaimRequest::new("far", Effect::Write, Duration::from_secs(600))
        .operation("push", "git://127.0.0.1/r.git")
        .origin(Some("builder-1"), 4242);
    assert_eq!(ledger.claim(&long).unwrap(), Claim::Claimed);
    ledger
        .progress(&ProgressRequest::new(
            "far",
            "pack-sent",
            Duration::from_secs(1),
        ))
        .unwrap();
    let run = taken(ledger, "far");
    assert_eq!(run.result, PreviousResult::Running);
    assert_eq!(run.phase.as_deref(), Some("pack-sent"));

    // A claim whose deadline is short, its process "dead" after recording
    // that it was about to send its pack.
    let deadline = Duration::from_millis(100);
    let claimed = Instant::now();
    let short = ClaimRequest::new("dead", Effect::Write, deadline)
        .operation("push", "git://127.0.0.1/r.git")
        .origin(Some("builder-1"), 4242);
    assert_eq!(ledger.claim(&short).unwrap(), Claim::Claimed);
    ledger
        .progress(&ProgressRequest::new(
            "dead",
            "pack-sent",
            Duration::from_secs(1),
        ))
        .unwrap();
    past(claimed, deadline);
    let run = taken(ledger, "dead");
    assert_eq!(run.result, PreviousResult::Abandoned, "{run:?}");
    assert_eq!(run.may_have_applied, Some(true));
    assert_eq!(run.phase.as_deref(), Some("pack-sent"));
    assert_eq!(run.kind.as_deref(), Some("push"));
    assert!(run.elapsed_ms >= 100, "{run:?}");
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(json["result"], "abandoned");
    assert_eq!(json["phase"], "pack-sent");

    // A read abandoned: nothing applied by it.
    let read = ClaimRequest::new("dead-read", Effect::Read, Duration::ZERO);
    let claimed = Instant::now();
    assert_eq!(ledger.claim(&read).unwrap(), Claim::Claimed);
    past(claimed, Duration::ZERO);
    let run = taken(ledger, "dead-read");
    assert_eq!(run.result, PreviousResult::Abandoned);
    assert_eq!(run.may_have_applied, None);
    assert_eq!(run.phase, None);

    // A finish, even late, is what the id's row says; progress after it
    // changes nothing.
    let finished = PreviousRun::running(Some("push".into()), Some(Effect::Write), Duration::ZERO);
    let mut finished = finished;
    finished.result = PreviousResult::Unknown;
    ledger
        .finish(&FinishRequest::new(
            "dead",
            Effect::Write,
            &finished,
            Duration::from_secs(1),
        ))
        .unwrap();
    ledger
        .progress(&ProgressRequest::new(
            "dead",
            "reported",
            Duration::from_secs(1),
        ))
        .unwrap();
    let run = taken(ledger, "dead");
    assert_eq!(run.result, PreviousResult::Unknown);
    assert_eq!(run.phase, None);
}

#[test]
fn a_memory_claim_without_a_finish_is_abandoned_after_its_deadline_with_its_phase() {
    let ledger = MemoryLedger::new();
    claim_then_die(&ledger);
    // One process: the host and pid are this one's.
    let run = taken(&ledger, "far");
    assert_eq!(run.pid, Some(std::process::id()));
    assert_eq!(run.host.as_deref(), this_host());
}

#[test]
fn a_file_claim_without_a_finish_is_abandoned_after_its_deadline_with_its_phase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    let ledger = FileLedger::new(&path);
    claim_then_die(&ledger);
    let run = taken(&ledger, "far");
    assert_eq!(run.host.as_deref(), Some("builder-1"));
    assert_eq!(run.pid, Some(4242));
    // The finished run keeps its claim's host and pid.
    let run = taken(&ledger, "dead");
    assert_eq!(
        (run.host.as_deref(), run.pid),
        (Some("builder-1"), Some(4242))
    );
}

#[test]
fn a_file_entry_written_before_deadlines_were_kept_stays_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.json");
    std::fs::write(
        &path,
        r#"{"operations":{"old":{"kind":"push","result":"running","may_have_applied":true,"elapsed_ms":0,"attempts":[],"claimed_at_ms":1000},"older":null}}"#,
    )
    .unwrap();
    let ledger = FileLedger::new(&path);
    let run = taken(&ledger, "old");
    assert_eq!(run.result, PreviousResult::Running);
    assert_eq!((run.phase, run.host, run.pid), (None, None, None));
    assert_eq!(taken(&ledger, "older").result, PreviousResult::Running);
}

#[test]
fn a_write_records_the_phase_it_enters_before_taking_it_and_a_read_records_none() {
    let ledger = Arc::new(MemoryLedger::new());
    let policy = Policy::builder().ledger(ledger.clone()).build();
    let bounds = Bounds::new(Duration::from_secs(30), Duration::from_secs(10), 1);
    let seen = std::sync::Mutex::new(Vec::new());
    let out = policy.run(
        Operation::new("push", Effect::Write, "git://127.0.0.1/r.git")
            .bounds(bounds)
            .id("w-1"),
        |ctx| {
            ctx.entering("pack-sent");
            // What another process asking for the id sees now.
            seen.lock().unwrap().push(taken(&*ledger, "w-1"));
            Err::<(), _>(AttemptError::answered("pack-sent", "refused"))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Answered);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen[0].result, PreviousResult::Running);
    assert_eq!(seen[0].phase.as_deref(), Some("pack-sent"));
    assert_eq!(seen[0].pid, Some(std::process::id()));
    assert_eq!(seen[0].deadline_ms.map(|d| d > 20_000), Some(true));

    let out = policy.run(
        Operation::new("fetch", Effect::Read, "git://127.0.0.1/r.git")
            .bounds(bounds)
            .id("r-1"),
        |ctx| {
            ctx.entering("pack-sent");
            Ok(taken(&*ledger, "r-1"))
        },
    );
    let run = out.value.expect("the read ran");
    assert_eq!(run.result, PreviousResult::Running);
    assert_eq!(run.phase, None, "a read records no risky phase");
}
