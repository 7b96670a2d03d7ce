//! The settling loop: a write found `not-landed` is read again with backoff
//! until the deadline (less the ledger finish's moment), never sent again;
//! `landed` or `moved` ends the reads at once; every read is listed in
//! `reconciled.reads`. Clock and sleeper are one `ManualClock`, and the
//! backoff shapes are unjittered, so every pause is known.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::common::*;
use crate::settle_kit::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, OutcomeKind, Settlement, Stopped, Verdict,
};

/// What the loop leaves of the deadline for the ledger's finish.
const FINISH: Duration = Duration::from_millis(250);

#[test]
fn a_write_that_lands_on_the_fifth_read_succeeds_after_four_growing_pauses() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let reads = Cell::new(0u32);
    // Two attempts at most: the reads are not bounded by it.
    let bounds = Bounds::new(secs(20), secs(8), 2).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(if reads.get() < 5 {
                Settlement::not_landed(observed(OLD))
            } else {
                Settlement::landed("ok", observed(NEW))
            })
        },
    );
    assert_eq!(rec.count(), 1, "the write is never sent again");
    assert_eq!(reads.get(), 5, "read until it landed, past max_attempts");
    assert_eq!(
        whole_ms(&clock.sleeps()),
        vec![100, 200, 400, 800],
        "backon's exponential pauses between the reads"
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.value, Some("ok"));
    let reconciled = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(reconciled.verdict, Some(Verdict::Landed));
    assert_eq!(reconciled.observed, observed(NEW));
    let nl = Some(Verdict::NotLanded);
    assert_eq!(
        verdicts(&reconciled.reads),
        vec![nl, nl, nl, nl, Some(Verdict::Landed)]
    );
    let at: Vec<u64> = reconciled.reads.iter().map(|r| r.elapsed_ms).collect();
    assert_eq!(at, vec![0, 100, 300, 700, 1500], "when each read ended");
    let json = serde_json::to_value(&out).expect("json");
    assert_eq!(
        json["reconciled"]["reads"].as_array().expect("reads").len(),
        5
    );
    assert_eq!(json["reconciled"]["reads"][0]["verdict"], "not-landed");
    assert_eq!(json["reconciled"]["reads"][4]["verdict"], "landed");
    assert_eq!(json["reconciled"]["reads"][4]["elapsed_ms"], 1500);
}

#[test]
fn a_write_never_landed_is_read_until_the_deadline_and_ends_unknown() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let remaining = RefCell::new(Vec::new());
    // One attempt at most; 2 s reserve: pauses capped at 1 s.
    let bounds = Bounds::new(secs(10), secs(4), 1)
        .with_backoff(doubling(200))
        .with_reconcile_reserve(secs(2));
    let out = policy.run_write(
        write_op(bounds),
        |ctx| -> Result<&str, _> {
            rec.record(ctx);
            clock.advance(ctx.timeout);
            Err(AttemptError::unknown(
                "pack-sent",
                "timed out after the last pack byte",
            ))
        },
        |ctx| {
            remaining.borrow_mut().push(ctx.remaining);
            clock.advance(millis(100));
            Ok(Settlement::not_landed(observed(OLD)).with_value("per-ref"))
        },
    );
    // The attempt ran 4 s; the reads stop by 9.75 s (the finish's 250 ms):
    // reads at 4.0, 4.3, 4.8, 5.7, 6.8, 7.9 and 9.0 s, each taking 100 ms;
    // after the last (9.1 s) a 1 s pause does not fit.
    assert_eq!(rec.count(), 1, "never sent again");
    assert_eq!(
        whole_ms(&clock.sleeps()),
        vec![200, 400, 800, 1000, 1000, 1000]
    );
    assert!(
        clock
            .sleeps()
            .iter()
            .all(|p| *p <= bounds.reconcile_reserve / 2),
        "each pause at most half the reserve"
    );
    assert_eq!(remaining.borrow().len(), 7, "seven reads, max_attempts 1");
    let last = remaining.borrow().last().copied().expect("a read");
    assert!(
        last <= millis(750) && last > millis(749),
        "the last read may run to 250 ms before the deadline, no further: {last:?}"
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    // Still not landed when the reads ran out of time: they say so.
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    assert_eq!(out.value, Some("per-ref"));
    assert_eq!(out.attempts.len(), 1, "settling reads are not attempts");
    let reconciled = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(reconciled.verdict, Some(Verdict::NotLanded));
    assert_eq!(reconciled.observed, observed(OLD));
    assert_eq!(
        verdicts(&reconciled.reads),
        vec![Some(Verdict::NotLanded); 7]
    );
    let at: Vec<u64> = reconciled.reads.iter().map(|r| r.elapsed_ms).collect();
    assert_eq!(at, vec![4100, 4400, 4900, 5800, 6900, 8000, 9100]);
    let cause = &out.error.as_ref().expect("error").cause;
    assert!(
        cause.contains("not landed") && cause.contains("read 7 times"),
        "{cause}"
    );
}

#[test]
fn a_moved_verdict_ends_the_reads_at_once() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(20), secs(8), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(if reads.get() == 1 {
                Settlement::not_landed(observed(OLD))
            } else {
                Settlement::moved(None, observed(THEIRS), "refs/heads/main moved to 3333333")
            })
        },
    );
    assert_eq!(reads.get(), 2, "moved is not read again");
    assert_eq!(clock.sleeps(), vec![millis(100)]);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    let reconciled = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(reconciled.verdict, Some(Verdict::Moved));
    assert_eq!(reconciled.observed, observed(THEIRS));
    assert_eq!(
        verdicts(&reconciled.reads),
        vec![Some(Verdict::NotLanded), Some(Verdict::Moved)]
    );
    assert_eq!(
        out.error.expect("error").cause,
        "refs/heads/main moved to 3333333"
    );
}

#[test]
fn a_stalled_settling_read_leaves_the_ledgers_finish_its_moment() {
    let (policy, clock) = manual_policy();
    let timeouts = RefCell::new(Vec::new());
    // The read's own timeout (8 s) is longer than what remains: the read
    // stalls until it is cut 250 ms before the deadline.
    let bounds = Bounds::new(secs(6), secs(8), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |ctx| -> Result<&str, _> {
            clock.advance(ctx.timeout);
            Err(unknown_push())
        },
        |ctx| {
            timeouts.borrow_mut().push(ctx.timeout);
            clock.advance(ctx.timeout);
            Err(AttemptError::unjudged(
                "advertised",
                "timed out reading the refs",
            ))
        },
    );
    // The attempt kept the 2 s reserve: it ran 4 s.
    assert_eq!(*timeouts.borrow(), vec![secs(2) - FINISH]);
    assert_eq!(out.elapsed_ms, 6000 - 250, "the finish has its 250 ms");
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    let reconciled = out
        .reconciled
        .expect("reconciled: the write had a settling read");
    assert_eq!(reconciled.verdict, None, "no read answered");
    assert_eq!(reconciled.reads.len(), 1);
    assert_eq!(
        reconciled.reads[0].cause.as_deref(),
        Some("timed out reading the refs")
    );
}

#[test]
fn a_failed_read_after_a_not_landed_one_is_listed_and_read_again() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(20), secs(8), 2).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            match reads.get() {
                1 => Ok(Settlement::not_landed(observed(OLD))),
                2 => Err(AttemptError::unjudged("connect", "connection refused")),
                _ => Ok(Settlement::landed("ok", observed(NEW))),
            }
        },
    );
    assert_eq!(reads.get(), 3);
    // One backoff for every read: 100 ms after the not-landed read, the
    // next pause (200 ms) after the failed one.
    assert_eq!(whole_ms(&clock.sleeps()), vec![100, 200]);
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    let reconciled = out.reconciled.expect("reconciled");
    assert_eq!(
        verdicts(&reconciled.reads),
        vec![Some(Verdict::NotLanded), None, Some(Verdict::Landed)]
    );
    let json = serde_json::to_value(&reconciled).expect("json");
    assert_eq!(json["reads"][1]["verdict"], serde_json::Value::Null);
    assert_eq!(json["reads"][1]["cause"], "connection refused");
}

#[test]
fn a_write_that_kept_no_reserve_is_read_once() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(20), secs(8), 2)
        .with_backoff(doubling(100))
        .with_reconcile_reserve(Duration::ZERO);
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(Settlement::not_landed(observed(OLD)))
        },
    );
    assert_eq!(reads.get(), 1, "half of no reserve is no pause");
    assert!(clock.sleeps().is_empty());
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.reconciled.expect("reconciled").reads.len(), 1);
}

#[test]
fn jittered_pauses_between_settling_reads_stay_within_half_the_reserve() {
    let (builder, clock) = manual_builder();
    let policy = builder.jitter_seed(7).build();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(30), secs(8), 2)
        .with_backoff(BackoffShape::DEFAULT)
        .with_reconcile_reserve(millis(1500));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(20));
            Ok(Settlement::not_landed(observed(OLD)))
        },
    );
    let sleeps = clock.sleeps();
    assert!(
        sleeps.len() >= 10,
        "read again until the deadline: {sleeps:?}"
    );
    assert!(sleeps.iter().all(|p| *p <= millis(750)), "{sleeps:?}");
    assert!(
        sleeps.windows(2).any(|w| w[0] != w[1]),
        "jittered: {sleeps:?}"
    );
    let last = out.reconciled.expect("reconciled").reads;
    assert_eq!(last.len() as u32, reads.get());
    let end = last.last().expect("a read").elapsed_ms;
    assert!(
        end > 30_000 - 250 - 750 - 20 && end <= 30_000 - 250,
        "the reads ran to the deadline less the finish's moment: {end}"
    );
}
