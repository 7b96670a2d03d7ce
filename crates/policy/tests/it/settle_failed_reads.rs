//! Settling reads that fail: a read that fails without an answer
//! (`unjudged`, `unknown`) is read again with the settling backoff while
//! the deadline allows, as a `not-landed` one; a read whose failure is an
//! answer ends the reads; after a cancel the reads stop at the first read
//! that answered or once the reconcile reserve has passed since the cancel.
//! `reconciled` lists every read, a failed one with `verdict: null` and its
//! cause. Clock and sleeper are one `ManualClock`, backoff unjittered.

use std::cell::Cell;

use crate::common::*;
use crate::settle_kit::*;
use sluice_policy::{
    AttemptError, Bounds, CancelFlag, Clock, ManualClock, OutcomeKind, Settlement, Stopped, Verdict,
};

fn refused() -> AttemptError {
    AttemptError::unjudged("connect", "connection refused")
}

fn now_ms(clock: &ManualClock) -> u64 {
    clock.now().as_millis() as u64
}

#[test]
fn a_push_whose_reads_are_refused_for_two_seconds_of_twelve_settles_landed() {
    let (policy, clock) = manual_policy();
    let sent = Cell::new(0u32);
    let start = Cell::new(None);
    // Three attempts at most: the reads are bounded by the deadline, not
    // by it (the issue saw three refused reads end the settling).
    let bounds = Bounds::new(secs(12), secs(4), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> {
            sent.set(sent.get() + 1);
            Err(unknown_push())
        },
        |_ctx| {
            let t0 = start.get().unwrap_or_else(|| now_ms(&clock));
            start.set(Some(t0));
            clock.advance(millis(20));
            // The daemon is down for two seconds from the first read.
            if now_ms(&clock) - t0 < 2000 {
                Err(refused())
            } else {
                Ok(Settlement::landed("ok", observed(NEW)))
            }
        },
    );
    assert_eq!(sent.get(), 1, "the push is never sent again");
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.value, Some("ok"));
    assert_eq!(out.stopped, None);
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert!(r.reads.len() >= 4, "{:?}", r.reads);
    let (last, failed) = r.reads.split_last().expect("reads");
    assert_eq!(last.verdict, Some(Verdict::Landed));
    assert_eq!(last.cause, None);
    for f in failed {
        assert_eq!(f.verdict, None);
        assert_eq!(f.cause.as_deref(), Some("connection refused"));
    }
    // One backoff for the failed reads: growing pauses, each at most half
    // the 2 s reserve.
    assert_eq!(whole_ms(&clock.sleeps()), vec![100, 200, 400, 800, 1000]);
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["reads"][0]["verdict"], serde_json::Value::Null);
    assert_eq!(json["reads"][0]["cause"], "connection refused");
}

#[test]
fn reads_that_never_answer_run_to_the_deadline_and_say_so() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(12), secs(4), 1).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(10));
            Err(AttemptError::unknown("body", "502 Bad Gateway"))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    let r = out
        .reconciled
        .expect("reconciled after an unknown write with a settling read");
    assert_eq!(r.verdict, None);
    assert!(r.observed.is_empty());
    assert_eq!(r.reads.len() as u32, reads.get(), "every read listed");
    assert!(reads.get() > 10, "read until the deadline: {}", reads.get());
    assert!(r
        .reads
        .iter()
        .all(|x| x.verdict.is_none() && x.cause.as_deref() == Some("502 Bad Gateway")));
    let end = r.reads.last().expect("a read").elapsed_ms;
    assert!(
        end > 12_000 - 250 - 1000 - 10 && end <= 12_000 - 250,
        "the reads ran to the deadline less the finish's moment: {end}"
    );
}

#[test]
fn a_read_whose_failure_is_an_answer_ends_the_reads_with_its_words() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(12), secs(4), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            match reads.get() {
                1 => Err(refused()),
                _ => Err(AttemptError::answered("body", "404 Not Found")),
            }
        },
    );
    assert_eq!(reads.get(), 2, "the answered failure is not read again");
    assert_eq!(whole_ms(&clock.sleeps()), vec![100]);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, None, "an answer, not the deadline");
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, None);
    let causes: Vec<_> = r.reads.iter().map(|x| x.cause.as_deref()).collect();
    assert_eq!(
        causes,
        vec![Some("connection refused"), Some("404 Not Found")]
    );
}

#[test]
fn after_a_cancel_failed_reads_stop_once_the_reserve_has_passed() {
    let (policy, clock) = manual_policy();
    let cancel = CancelFlag::new();
    let reads = Cell::new(0u32);
    let cancelled_at = Cell::new(0u64);
    let bounds = Bounds::new(secs(30), secs(4), 3)
        .with_backoff(doubling(100))
        .with_reconcile_reserve(secs(2));
    let out = policy.run_write(
        write_op(bounds).cancel(cancel.clone()),
        |_ctx| -> Result<&str, _> {
            // The cancel cuts the write after its request was complete.
            clock.advance(secs(1));
            cancel.cancel();
            cancelled_at.set(now_ms(&clock));
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(30));
            Err(refused())
        },
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, None);
    assert!(
        reads.get() >= 3,
        "read again within the reserve: {}",
        reads.get()
    );
    let last = r.reads.last().expect("a read").elapsed_ms;
    assert!(
        last <= cancelled_at.get() + 2000,
        "the reads stopped within the reserve of the cancel: {last} ms, cancelled at {} ms",
        cancelled_at.get()
    );
    assert!(
        out.elapsed_ms <= cancelled_at.get() + 2000,
        "{} ms",
        out.elapsed_ms
    );
}

#[test]
fn after_a_cancel_the_first_answered_read_settles_the_write() {
    let (policy, clock) = manual_policy();
    let cancel = CancelFlag::new();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(30), secs(4), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds).cancel(cancel.clone()),
        |_ctx| -> Result<&str, _> {
            cancel.cancel();
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(10));
            match reads.get() {
                1 | 2 => Err(refused()),
                _ => Ok(Settlement::not_landed(observed(OLD))),
            }
        },
    );
    assert_eq!(
        reads.get(),
        3,
        "failed reads read again; the answer ends them"
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, Some(Verdict::NotLanded));
    assert_eq!(
        r.reads.iter().map(|x| x.verdict).collect::<Vec<_>>(),
        vec![None, None, Some(Verdict::NotLanded)]
    );
}

#[test]
fn a_landed_read_that_asks_to_be_read_again_stands_when_no_later_read_adds_to_it() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(6), secs(2), 1).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<Option<&str>, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(10));
            match reads.get() {
                // Landed, its value incomplete: read again.
                1 | 2 => Ok(Settlement::landed(None, observed(NEW)).and_read_again()),
                3 => Err(refused()),
                _ => Ok(Settlement::landed(None, observed(NEW)).and_read_again()),
            }
        },
    );
    assert!(
        reads.get() > 4,
        "read again until the deadline: {}",
        reads.get()
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "never not-landed");
    assert_eq!(out.value, Some(None));
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(r.reads.len() as u32, reads.get());

    // One that gets its value completes at once.
    let (policy, _clock) = manual_policy();
    let reads = Cell::new(0u32);
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<Option<&str>, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            Ok(match reads.get() {
                1 => Settlement::landed(None, observed(NEW)).and_read_again(),
                _ => Settlement::landed(Some("sha"), observed(NEW)),
            })
        },
    );
    assert_eq!(reads.get(), 2);
    assert_eq!(out.value, Some(Some("sha")));
}

#[test]
fn a_stop_ends_the_settling_reads_at_once() {
    let (policy, clock) = manual_policy();
    let cancel = CancelFlag::new();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(30), secs(4), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds).cancel(cancel.clone()),
        |_ctx| -> Result<&str, _> {
            cancel.cancel();
            Err(unknown_push())
        },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(10));
            // The second signal comes while the first failed read is out.
            if reads.get() == 2 {
                cancel.stop();
            }
            Err(refused())
        },
    );
    assert_eq!(reads.get(), 2, "no read after the stop");
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, None);
    assert_eq!(r.reads.len(), 2);
}

#[test]
fn reads_that_still_find_it_not_landed_at_the_deadline_say_deadline() {
    let (policy, clock) = manual_policy();
    let reads = Cell::new(0u32);
    let bounds = Bounds::new(secs(6), secs(2), 3).with_backoff(doubling(100));
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            clock.advance(millis(10));
            // Not landed, and between those answers the daemon restarts.
            if reads.get().is_multiple_of(3) {
                Err(refused())
            } else {
                Ok(Settlement::not_landed(observed(OLD)))
            }
        },
    );
    assert!(reads.get() > 5, "read until the deadline: {}", reads.get());
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(Stopped::Deadline), "time ran out");
    let r = out.reconciled.as_ref().expect("reconciled");
    assert_eq!(r.verdict, Some(Verdict::NotLanded));
    assert_eq!(r.reads.len() as u32, reads.get(), "every read listed");
    let json = serde_json::to_value(&out).expect("json");
    assert_eq!(json["stopped"], "deadline");
    assert_eq!(json["reconciled"]["verdict"], "not-landed");

    // Not landed, then an answered failure: the reads ended on an answer,
    // not on the deadline.
    let (policy, _clock) = manual_policy();
    let reads = Cell::new(0u32);
    let out = policy.run_write(
        write_op(bounds),
        |_ctx| -> Result<&str, _> { Err(unknown_push()) },
        |_ctx| {
            reads.set(reads.get() + 1);
            match reads.get() {
                1 => Ok(Settlement::not_landed(observed(OLD))),
                _ => Err(AttemptError::answered("body", "404 Not Found")),
            }
        },
    );
    assert_eq!(reads.get(), 2);
    assert_eq!(out.stopped, None, "an answer, not the deadline");
    assert_eq!(
        out.reconciled.expect("reconciled").verdict,
        Some(Verdict::NotLanded)
    );
}
