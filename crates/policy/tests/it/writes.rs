//! Writes: an unknown answer is settled by reading, never by sending again.

use std::cell::Cell;

use crate::common::*;
use crate::settle_kit::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, CancelFlag, Class, Clock, OutcomeKind, Settlement, Stopped,
    Verdict,
};

#[test]
fn an_unknown_write_is_settled_by_reading_not_retried() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let reads = Cell::new(0);
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            ctx.reached("pack-sent");
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(Settlement::landed("ok", observed(NEW)))
        },
    );
    assert_eq!(rec.count(), 1, "the write is not sent again");
    assert_eq!(reads.get(), 1, "the reconciler is called");
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.value, Some("ok"));
    let reconciled = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(reconciled.verdict, Some(Verdict::Landed));
    assert_eq!(reconciled.observed, observed(NEW));
    assert_eq!(
        out.attempts.len(),
        1,
        "settling reads are not push attempts"
    );
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["reconciled"]["verdict"], "landed");
    assert_eq!(json["reconciled"]["observed"]["refs/heads/main"], NEW);
}

#[test]
fn a_write_found_not_landed_is_read_again_until_the_deadline_and_never_sent_again() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let reads = Cell::new(0);
    // The default shape without its jitter, so every pause is known.
    let bounds = Bounds::default().with_backoff(BackoffShape {
        jitter: false,
        ..BackoffShape::DEFAULT
    });
    let out = policy.run_write(
        write_op(bounds),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(Settlement::not_landed(observed(OLD)).with_value("per-ref"))
        },
    );
    assert_eq!(rec.count(), 1, "an unknown write is never sent again");
    // 20 s, reads taking no time: pauses 200, 400, 800 ms, then half the
    // 2 s reserve (1 s) while one fits before 19.75 s (the finish's 250 ms
    // kept): reads at 0, 0.2, 0.6, 1.4, 2.4, ..., 19.4 s.
    assert_eq!(
        reads.get(),
        22,
        "not landed is read again until the deadline"
    );
    let mut pauses = vec![200, 400, 800];
    pauses.extend([bounds.reconcile_reserve.as_millis() / 2; 18]);
    let slept: Vec<u128> = clock.sleeps().iter().map(|d| d.as_millis()).collect();
    assert_eq!(slept, pauses, "backoff capped at half the reserve");
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(
        out.stopped,
        Some(Stopped::Deadline),
        "the reads ran out of time"
    );
    assert_eq!(out.value, Some("per-ref"), "the layer's per-ref verdicts");
    assert_eq!(
        out.reconciled.as_ref().unwrap().verdict,
        Some(Verdict::NotLanded)
    );
    assert_eq!(out.reconciled.as_ref().unwrap().reads.len(), 22);
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["reconciled"]["verdict"], "not-landed");
    assert_eq!(json["reconciled"]["reads"][21]["elapsed_ms"], 19_400);
    assert_eq!(json["may_have_applied"], true);
}

#[test]
fn a_write_not_landed_at_the_first_read_and_landed_at_the_second_succeeds() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let reads = Cell::new(0);
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(if reads.get() == 1 {
                Settlement::not_landed(observed(OLD))
            } else {
                Settlement::landed("ok", observed(NEW))
            })
        },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(reads.get(), 2);
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(
        out.reconciled.as_ref().unwrap().verdict,
        Some(Verdict::Landed)
    );
}

#[test]
fn a_cancelled_write_whose_request_was_complete_is_settled_and_may_have_applied() {
    let (policy, _clock) = manual_policy();
    let cancel = CancelFlag::new();
    let out = policy.run_write(
        write_op(Bounds::default()).cancel(cancel.clone()),
        |_ctx| -> Result<&str, _> {
            cancel.cancel();
            Err(AttemptError::unknown(
                "pack-sent",
                "cancelled (at pack-sent)",
            ))
        },
        |_ctx| Ok(Settlement::not_landed(observed(OLD))),
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(
        out.reconciled.as_ref().unwrap().verdict,
        Some(Verdict::NotLanded)
    );
}

#[test]
fn a_local_failure_stops_at_once_and_is_never_the_remotes_answer() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            Err(AttemptError::local(
                "advertised",
                "reading objects: the object database has too few index slots",
            ))
        },
        |_ctx| -> Result<Settlement<&str>, _> { panic!("nothing to settle") },
    );
    assert_eq!(rec.count(), 1, "trying again will not mend it");
    assert_eq!(out.kind, OutcomeKind::LocalError);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.attempts[0].class, Some(Class::Local));
    assert!(clock.sleeps().is_empty());
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["result"], "local-error");
    assert_eq!(json["stopped"], "local-error");
    assert_eq!(json["attempts"][0]["class"], "local-error");
}

#[test]
fn a_write_found_moved_is_not_retried_and_may_have_applied() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(unknown_push())
        },
        |_ctx| {
            Ok(Settlement::moved(
                None,
                observed(THEIRS),
                "refs/heads/main moved to 3333333 by somebody else",
            ))
        },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, None);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(
        out.reconciled.as_ref().unwrap().verdict,
        Some(Verdict::Moved)
    );
    assert_eq!(
        out.error.unwrap().cause,
        "refs/heads/main moved to 3333333 by somebody else"
    );
    assert!(clock.sleeps().is_empty());
}

#[test]
fn a_write_with_no_settling_read_in_time_is_unknown_and_may_have_applied() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let reads = Cell::new(0);
    let out = policy.run_write(
        write_op(Bounds::new(secs(10), secs(5), 10)),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            clock.advance(ctx.timeout);
            Err(unknown_push())
        },
        |ctx| {
            reads.set(reads.get() + 1);
            clock.advance(ctx.remaining.min(secs(2)));
            Err(AttemptError::unjudged("connect", "connection refused"))
        },
    );
    assert_eq!(rec.count(), 1, "never sent again");
    assert!(reads.get() >= 1);
    assert!(clock.now() <= secs(10), "the reads stay within the budget");
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    // Every failed read is listed; none answered.
    let r = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(r.verdict, None);
    assert_eq!(r.reads.len(), reads.get());
    assert!(r.reads.iter().all(|x| x.cause.is_some()));
    assert_eq!(
        serde_json::to_value(&out).unwrap()["may_have_applied"],
        true
    );
}

#[test]
fn settling_reads_that_fail_at_once_are_bounded() {
    // A zero pause between reads must not make the settling loop endless.
    let (policy, _clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(10), secs(5), 4).with_backoff(BackoffShape::constant(secs(0)));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<(), _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            assert!(reads.get() < 1000, "settling reads never end");
            Err(AttemptError::unjudged("connect", "connection refused"))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    // Bounded by the deadline (each pause at least the settling floor),
    // not by max_attempts: failed reads are read again like not-landed ones.
    assert!(reads.get() > 4, "read past max_attempts: {}", reads.get());
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    assert_eq!(
        out.reconciled.expect("reconciled").reads.len() as u32,
        reads.get()
    );
}

#[test]
fn a_write_without_a_reconciler_ends_unknown_on_an_unknown_answer() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run(write_op(Bounds::default()), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::unknown(
            "body",
            "502 Bad Gateway after the body was sent",
        ))
    });
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
}

#[test]
fn an_unjudged_write_is_tried_again_and_may_not_have_applied() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run_write(
        write_op(Bounds::default().with_max_attempts(2)),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(AttemptError::unjudged(
                "commands-sent",
                "connection reset during the pack",
            ))
        },
        |_ctx| -> Result<Settlement<()>, _> { panic!("an unjudged write needs no settling") },
    );
    assert_eq!(rec.count(), 2);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.stopped, Some(Stopped::MaxAttempts));
}

#[test]
fn an_answered_write_is_not_retried_or_settled() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(AttemptError::answered(
                "reported",
                "ng refs/heads/main stale info",
            ))
        },
        |_ctx| -> Result<Settlement<()>, _> { panic!("an answered write needs no settling") },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.error.unwrap().cause, "ng refs/heads/main stale info");
}

#[test]
fn a_write_keeps_a_reserve_of_its_budget_for_settling_reads() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let read_budget = Cell::new(None);
    let bounds = Bounds::new(secs(10), secs(20), 3).with_reconcile_reserve(secs(2));
    let out = policy.run_write(
        write_op(bounds),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            clock.advance(ctx.timeout);
            Err(unknown_push())
        },
        |ctx| {
            read_budget.set(Some(ctx.remaining));
            Ok(Settlement::landed((), observed(NEW)))
        },
    );
    assert_eq!(rec.calls()[0].timeout, secs(8));
    // The reserve, less the moment kept for the ledger's finish.
    assert_eq!(read_budget.get(), Some(secs(2) - millis(250)));
    assert_eq!(out.kind, OutcomeKind::Succeeded);
}

#[test]
fn a_write_whose_deadline_is_shorter_than_the_reserve_is_still_tried() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(1), secs(5), 3).with_reconcile_reserve(secs(2));
    let out = policy.run_write(
        write_op(bounds),
        |ctx| {
            rec.record(ctx);
            Ok(())
        },
        |_ctx| -> Result<Settlement<()>, _> { unreachable!() },
    );
    assert_eq!(rec.count(), 1);
    assert!(rec.calls()[0].timeout > secs(0) && rec.calls()[0].timeout < secs(1));
    assert_eq!(out.kind, OutcomeKind::Succeeded);
}

#[test]
fn a_cancelled_write_whose_answer_is_unknown_is_still_settled_by_reading() {
    for (verdict, kind) in [
        (Verdict::Landed, OutcomeKind::Succeeded),
        (Verdict::NotLanded, OutcomeKind::Unknown),
        (Verdict::Moved, OutcomeKind::Unknown),
    ] {
        let (policy, _clock) = manual_policy();
        let rec = Recorder::default();
        let reads = Cell::new(0);
        let flag = CancelFlag::new();
        let out = policy.run_write(
            write_op(Bounds::default()).cancel(flag.clone()),
            |ctx| -> Result<(), _> {
                rec.record(ctx);
                ctx.cancel_flag().cancel();
                Err(AttemptError::unknown(
                    "pack-sent",
                    "cancelled after the last pack byte",
                ))
            },
            |ctx| {
                assert!(ctx.cancel_flag().is_cancelled());
                reads.set(reads.get() + 1);
                Ok(match verdict {
                    Verdict::Landed => Settlement::landed((), observed(NEW)),
                    Verdict::NotLanded => Settlement::not_landed(observed(OLD)),
                    Verdict::Moved => Settlement::moved(None, observed(THEIRS), "moved"),
                })
            },
        );
        assert_eq!(
            rec.count(),
            1,
            "{verdict:?}: a cancelled write is not sent again"
        );
        // Settled by its read; a cancelled write found not landed is not
        // read again until the deadline (the caller asked to stop).
        assert_eq!(reads.get(), 1, "{verdict:?}: settled by one read");
        assert_eq!(
            out.reconciled.as_ref().unwrap().reads.len(),
            reads.get(),
            "{verdict:?}: every read listed"
        );
        assert_eq!(out.kind, kind, "{verdict:?}");
        assert_eq!(out.reconciled.unwrap().verdict, Some(verdict));
        if verdict == Verdict::NotLanded {
            // Its request was complete: it may still land.
            assert_eq!(out.stopped, Some(Stopped::Cancelled));
            assert_eq!(out.may_have_applied, Some(true));
        }
    }
}

#[test]
fn a_cancelled_write_that_cannot_be_settled_may_have_applied() {
    let (policy, clock) = manual_policy();
    let out = policy.run_write(
        write_op(Bounds::new(secs(10), secs(5), 3)),
        |ctx| -> Result<(), _> {
            ctx.cancel_flag().cancel();
            Err(unknown_push())
        },
        |_ctx| {
            clock.advance(secs(3));
            Err(AttemptError::unjudged("connect", "connection refused"))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
}
