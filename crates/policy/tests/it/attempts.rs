//! The budget, the backoff and what is tried again, on an injected clock.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, CancelFlag, Class, Clock, ManualClock, OutcomeKind, Policy,
    Sleeper, Stopped,
};

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[test]
fn success_on_the_first_try_calls_the_operation_once() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()), |ctx| {
        rec.record(ctx);
        ctx.reached("done");
        Ok("refs")
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.value, Some("refs"));
    assert_eq!(rec.count(), 1);
    assert_eq!(out.stopped, None);
    assert_eq!(out.may_have_applied, None, "a read has no may_have_applied");
    assert_eq!(out.attempts.len(), 1);
    let a = &out.attempts[0];
    assert_eq!(
        (a.n, a.phase.as_ref(), a.class, a.cause.as_deref()),
        (1, "done", None, None)
    );
    assert_eq!(a.delay_ms, None);
    assert!(clock.sleeps().is_empty());
}

#[test]
fn an_unjudged_failure_then_success_makes_two_calls_a_jittered_delay_apart() {
    // The default shape starts at 200 ms; backon's jitter adds [0, 200 ms).
    for _ in 0..100 {
        let (policy, clock) = manual_policy();
        let rec = Recorder::default();
        let out = policy.run(read_op(Bounds::default()), |ctx| {
            rec.record(ctx);
            if ctx.n == 1 {
                return Err(AttemptError::unjudged("connect", "connection refused"));
            }
            Ok(())
        });
        assert_eq!(out.kind, OutcomeKind::Succeeded);
        assert_eq!(rec.count(), 2);
        let sleeps = clock.sleeps();
        assert_eq!(sleeps.len(), 1);
        let delay = sleeps[0];
        assert!(
            delay >= millis(200) && delay < millis(400),
            "delay {delay:?} outside [200 ms, 400 ms)"
        );
        let starts = rec.starts();
        assert_eq!(
            starts[1] - starts[0],
            delay,
            "the second call follows the delay"
        );
        assert_eq!(out.attempts[0].delay_ms, Some(ms(delay)));
        assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
        assert_eq!(out.attempts[0].cause.as_deref(), Some("connection refused"));
        assert_eq!(out.attempts[1].delay_ms, None);
    }
}

#[test]
fn attempts_that_use_their_whole_timeout_get_two_tries_in_twelve_seconds() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(12), secs(5), 5).with_backoff(BackoffShape::constant(secs(2)));
    let out = policy.run(read_op(bounds), |ctx| -> Result<(), _> {
        rec.record(ctx);
        clock.advance(ctx.timeout);
        Err(AttemptError::unjudged(
            "connect",
            "stalled before the advertisement",
        ))
    });
    assert_eq!(rec.count(), 2, "{:?}", rec.calls());
    assert_eq!(rec.starts(), vec![secs(0), secs(7)]);
    let calls = rec.calls();
    assert_eq!((calls[0].timeout, calls[0].remaining), (secs(5), secs(12)));
    assert_eq!(
        (calls[1].timeout, calls[1].remaining),
        (secs(5), secs(5)),
        "the second attempt gets what remained"
    );
    assert_eq!(clock.now(), secs(12));
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    assert_eq!(out.attempts.len(), 2);
    let (a, b) = (&out.attempts[0], &out.attempts[1]);
    assert_eq!(
        (a.n, a.remaining_ms, a.timeout_ms, a.delay_ms, a.elapsed_ms),
        (1, 12_000, 5_000, Some(2_000), 5_000)
    );
    assert_eq!(
        (b.n, b.remaining_ms, b.timeout_ms, b.delay_ms, b.elapsed_ms),
        (2, 5_000, 5_000, None, 5_000)
    );
    assert_eq!(out.elapsed_ms, 12_000);
    assert_eq!(out.deadline_ms, 12_000);
    assert_eq!(clock.sleeps(), vec![secs(2)]);
}

#[test]
fn an_attempt_timeout_is_capped_by_what_remains_of_the_deadline() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(11), secs(5), 5).with_backoff(BackoffShape::constant(secs(2)));
    let out = policy.run(read_op(bounds), |ctx| -> Result<(), _> {
        rec.record(ctx);
        clock.advance(ctx.timeout);
        Err(AttemptError::unjudged("connect", "timed out"))
    });
    let calls = rec.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[1].started, calls[1].remaining, calls[1].timeout),
        (secs(7), secs(4), secs(4))
    );
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    assert_eq!(clock.now(), secs(11), "nothing runs past the deadline");
}

#[test]
fn instant_failures_stop_at_the_maximum_number_of_attempts() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(12), secs(5), 5).with_backoff(BackoffShape::constant(secs(2)));
    let out = policy.run(read_op(bounds), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::unjudged("connect", "connection refused"))
    });
    assert_eq!(
        rec.starts(),
        vec![secs(0), secs(2), secs(4), secs(6), secs(8)]
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::MaxAttempts));
    assert_eq!(out.attempts.len(), 5);
    assert_eq!(out.attempts.last().unwrap().delay_ms, None);
    assert_eq!(clock.sleeps(), vec![secs(2); 4]);
}

#[test]
fn instant_failures_never_start_an_attempt_after_the_deadline() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let bounds = Bounds::new(secs(12), secs(5), 50).with_backoff(BackoffShape::constant(secs(2)));
    let out = policy.run(read_op(bounds), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::unjudged("connect", "connection refused"))
    });
    assert_eq!(
        rec.starts(),
        (0..6).map(|i| secs(2 * i)).collect::<Vec<_>>()
    );
    assert!(rec.starts().iter().all(|s| *s < secs(12)));
    assert_eq!(out.stopped, Some(Stopped::Deadline));
}

#[test]
fn a_zero_deadline_makes_no_call_at_all() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::new(Duration::ZERO, secs(5), 3)), |ctx| {
        rec.record(ctx);
        Ok(())
    });
    assert_eq!(rec.count(), 0);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Deadline));
}

#[test]
fn an_answered_failure_is_called_once_and_reported_in_the_remote_words() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let words = "ERR access denied or repository not exported: /repo";
    let out = policy.run(read_op(Bounds::default()), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::answered("connect", words))
    });
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, None);
    assert_eq!(out.error.as_ref().map(|e| e.cause.as_str()), Some(words));
    assert_eq!(out.attempts[0].cause.as_deref(), Some(words));
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    assert!(clock.sleeps().is_empty());
}

#[test]
fn an_unknown_failure_of_a_read_is_tried_again() {
    let (policy, _clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()), |ctx| {
        rec.record(ctx);
        if ctx.n == 1 {
            ctx.reached("negotiated");
            return Err(AttemptError::unknown(
                "negotiated",
                "connection reset after the wants",
            ));
        }
        Ok("pack")
    });
    assert_eq!(rec.count(), 2);
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert_eq!(out.attempts[0].phase, "negotiated");
}

#[test]
fn a_retry_after_of_two_seconds_is_honoured() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let op = sluice_policy::Operation::new(
        "http-get",
        sluice_policy::Effect::Read,
        "https://api.example.test/repos/o/r",
    );
    let out = policy.run(op, |ctx| {
        rec.record(ctx);
        if ctx.n == 1 {
            return Err(
                AttemptError::unjudged("response-headers", "503 Service Unavailable")
                    .with_retry_after(Some(secs(2))),
            );
        }
        Ok(200)
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(clock.sleeps(), vec![secs(2)]);
    assert_eq!(rec.starts(), vec![secs(0), secs(2)]);
    assert_eq!(out.attempts[0].delay_ms, Some(2_000));
}

#[test]
fn a_retry_after_longer_than_the_budget_ends_the_operation_at_once() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let op = sluice_policy::Operation::new(
        "http-get",
        sluice_policy::Effect::Read,
        "https://api.example.test/repos/o/r",
    )
    .bounds(Bounds::new(secs(10), secs(5), 5));
    let out = policy.run(op, |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(
            AttemptError::unjudged("response-headers", "429 Too Many Requests")
                .with_retry_after(Some(secs(60))),
        )
    });
    assert_eq!(rec.count(), 1, "no second call");
    assert!(clock.sleeps().is_empty(), "no sleeping past the deadline");
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::RetryHintExceedsBudget));
    assert_eq!(out.attempts[0].delay_ms, None);
    assert_eq!(out.error.unwrap().cause, "429 Too Many Requests");
}

/// One operation on its own client, failing once at time zero; its delay.
fn first_delay(policy: Policy, clock: &ManualClock) -> Duration {
    let out = policy.run(read_op(Bounds::default()), |ctx| {
        if ctx.n == 1 {
            return Err(AttemptError::unjudged("connect", "connection refused"));
        }
        Ok(())
    });
    assert!(out.is_success());
    clock.sleeps()[0]
}

#[test]
fn two_clients_failing_at_the_same_instant_choose_different_delays() {
    let trials = 200;
    let mut differ = 0;
    for _ in 0..trials {
        let (a, clock_a) = manual_policy();
        let (b, clock_b) = manual_policy();
        let (da, db) = (first_delay(a, &clock_a), first_delay(b, &clock_b));
        assert_eq!(clock_a.sleeps().len(), 1);
        for d in [da, db] {
            assert!(d >= millis(200) && d < millis(400), "{d:?}");
        }
        if da != db {
            differ += 1;
        }
    }
    assert!(
        differ >= trials - 2,
        "only {differ} of {trials} pairs differ"
    );
}

#[test]
fn two_operations_of_one_seeded_client_draw_different_delays() {
    let (builder, clock) = manual_builder();
    let policy = builder
        .jitter_seed(7)
        .retry_budget(sluice_policy::RetryBudget::UNLIMITED)
        .build();
    let trials = 200;
    let mut delays = Vec::new();
    for _ in 0..trials {
        let out = policy.run(read_op(Bounds::default()), |ctx| {
            if ctx.n == 1 {
                return Err(AttemptError::unjudged("connect", "connection refused"));
            }
            Ok(())
        });
        delays.push(out.attempts[0].delay_ms.unwrap());
    }
    assert_eq!(clock.sleeps().len(), trials);
    let differ = delays.chunks(2).filter(|p| p[0] != p[1]).count();
    assert!(
        differ >= trials / 2 - 10,
        "only {differ} of {} pairs differ",
        trials / 2
    );
}

#[test]
fn with_the_retry_budget_drained_a_failure_is_not_tried_again() {
    let (policy, clock) = manual_policy();
    policy.drain_retry_budget("example.test");
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::unjudged("connect", "connection refused"))
    });
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::RetryBudgetEmpty));
    assert!(clock.sleeps().is_empty());
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["stopped"], "retry-budget-empty");

    // Another host's budget is its own.
    let other = sluice_policy::Operation::new(
        "ls-refs",
        sluice_policy::Effect::Read,
        "git://elsewhere.test/repo",
    );
    let out = policy.run(other, |ctx| {
        if ctx.n == 1 {
            return Err(AttemptError::unjudged("connect", "connection refused"));
        }
        Ok(())
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
}

#[test]
fn a_retry_budget_bounds_the_retries_of_many_operations_against_one_host() {
    let (builder, _clock) = manual_builder();
    let policy = builder
        .retry_budget(sluice_policy::RetryBudget {
            capacity: 3.0,
            refill_per_sec: 0.0,
            success_credit: 0.0,
        })
        .build();
    let rec = Recorder::default();
    for _ in 0..5 {
        let _unknown = policy.run(read_op(Bounds::default()), |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(AttemptError::unjudged("connect", "connection refused"))
        });
    }
    // Five first attempts, and only three retries among them all.
    assert_eq!(rec.count(), 5 + 3);
}

#[test]
fn a_cancel_raised_during_an_attempt_stops_before_the_next() {
    let (policy, clock) = manual_policy();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()), |ctx| -> Result<(), _> {
        rec.record(ctx);
        ctx.cancel_flag().cancel();
        Err(AttemptError::unjudged("connect", "cancelled by the caller"))
    });
    assert_eq!(rec.count(), 1);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert!(clock.sleeps().is_empty());
    assert_eq!(serde_json::to_value(&out).unwrap()["stopped"], "cancelled");
}

#[test]
fn a_cancel_raised_before_the_start_makes_no_call() {
    let (policy, _clock) = manual_policy();
    let flag = CancelFlag::new();
    flag.cancel();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()).cancel(flag), |ctx| {
        rec.record(ctx);
        Ok(())
    });
    assert_eq!(rec.count(), 0);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.kind, OutcomeKind::Unknown);
}

/// A sleeper that raises the cancel flag while it sleeps.
struct CancellingSleeper {
    clock: ManualClock,
    flag: CancelFlag,
}

impl Sleeper for CancellingSleeper {
    fn sleep(&self, dur: Duration, cancel: &AtomicBool) {
        self.flag.cancel();
        self.clock.sleep(dur, cancel);
    }
}

#[test]
fn a_cancel_raised_while_sleeping_stops_before_the_next_attempt() {
    let clock = ManualClock::new();
    let flag = CancelFlag::new();
    let policy = Policy::builder()
        .clock(Arc::new(clock.clone()))
        .sleeper(Arc::new(CancellingSleeper {
            clock: clock.clone(),
            flag: flag.clone(),
        }))
        .build();
    let rec = Recorder::default();
    let out = policy.run(
        read_op(Bounds::default()).cancel(flag),
        |ctx| -> Result<(), _> {
            rec.record(ctx);
            Err(AttemptError::unjudged("connect", "connection refused"))
        },
    );
    assert_eq!(rec.count(), 1);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        out.attempts[0].delay_ms, None,
        "no attempt followed the pause"
    );
}

/// A sleeper that wakes up a minute late (a loaded machine).
struct LateSleeper {
    clock: ManualClock,
}

impl Sleeper for LateSleeper {
    fn sleep(&self, dur: Duration, cancel: &AtomicBool) {
        self.clock.sleep(dur, cancel);
        self.clock.advance(Duration::from_secs(60));
    }
}

#[test]
fn a_pause_that_wakes_past_the_deadline_leaves_the_last_attempt_without_a_delay() {
    let clock = ManualClock::new();
    let policy = Policy::builder()
        .clock(Arc::new(clock.clone()))
        .sleeper(Arc::new(LateSleeper {
            clock: clock.clone(),
        }))
        .build();
    let rec = Recorder::default();
    let out = policy.run(read_op(Bounds::default()), |ctx| -> Result<(), _> {
        rec.record(ctx);
        Err(AttemptError::unjudged("connect", "connection refused"))
    });
    assert_eq!(rec.count(), 1);
    assert_eq!(out.stopped, Some(Stopped::Deadline));
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        out.attempts[0].delay_ms, None,
        "the planned pause was slept but no attempt followed it"
    );
}
