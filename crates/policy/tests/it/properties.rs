//! Properties of the budget and the one rule, for random sequences of
//! failures, attempt durations, settling reads and budgets.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;
use proptest::prelude::*;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, Clock, Effect, OutcomeKind, RetryBudget, Settlement,
    Stopped,
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Try {
    Ok,
    Unjudged,
    Answered,
    Unknown,
    /// Unjudged with a retry hint (ms).
    Hinted(u64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Read {
    Landed,
    NotLanded,
    Moved,
    Unjudged,
    Answered,
}

#[derive(Clone, Debug, PartialEq)]
enum Event {
    Attempt {
        at: Duration,
        timeout: Duration,
        outcome: Try,
    },
    Read {
        at: Duration,
        outcome: Read,
    },
}

fn a_try() -> impl Strategy<Value = Try> {
    prop_oneof![
        1 => Just(Try::Ok),
        4 => Just(Try::Unjudged),
        1 => Just(Try::Answered),
        3 => Just(Try::Unknown),
        1 => (0u64..15_000).prop_map(Try::Hinted),
    ]
}

fn a_read() -> impl Strategy<Value = Read> {
    prop_oneof![
        1 => Just(Read::Landed),
        2 => Just(Read::NotLanded),
        1 => Just(Read::Moved),
        2 => Just(Read::Unjudged),
        1 => Just(Read::Answered),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    effect: Effect,
    bounds: Bounds,
    budget: RetryBudget,
    tries: Vec<(Try, u64)>,
    reads: Vec<(Read, u64)>,
}

fn a_case() -> impl Strategy<Value = Case> {
    let shape = (0u64..3_000, 0u64..10_000, 1.0f32..3.0, any::<bool>()).prop_map(
        |(min, extra, factor, jitter)| BackoffShape {
            min_delay: Duration::from_millis(min),
            max_delay: Duration::from_millis(min + extra),
            factor,
            jitter,
        },
    );
    let bounds = (0u64..30_000, 1u64..12_000, 0u32..8, shape, 0u64..4_000).prop_map(
        |(deadline, timeout, attempts, backoff, reserve)| {
            Bounds::new(
                Duration::from_millis(deadline),
                Duration::from_millis(timeout),
                attempts,
            )
            .with_backoff(backoff)
            .with_reconcile_reserve(Duration::from_millis(reserve))
        },
    );
    let budget = prop_oneof![
        Just(RetryBudget::UNLIMITED),
        (0.0f64..6.0, 0.0f64..2.0).prop_map(|(capacity, refill_per_sec)| RetryBudget {
            capacity,
            refill_per_sec,
            success_credit: 0.1,
        }),
    ];
    (
        prop_oneof![Just(Effect::Read), Just(Effect::Write)],
        bounds,
        budget,
        prop::collection::vec((a_try(), 0u64..15_000), 1..12),
        prop::collection::vec((a_read(), 0u64..6_000), 1..8),
    )
        .prop_map(|(effect, bounds, budget, tries, reads)| Case {
            effect,
            bounds,
            budget,
            tries,
            reads,
        })
}

fn run(case: &Case) -> (sluice_policy::Outcome<()>, Vec<Event>) {
    let (builder, clock) = manual_builder();
    let policy = builder.retry_budget(case.budget).build();
    let events = RefCell::new(Vec::new());
    let op = match case.effect {
        Effect::Read => read_op(case.bounds),
        Effect::Write => write_op(case.bounds),
    };
    let attempt = |ctx: &mut sluice_policy::AttemptCtx<'_>| {
        let n = events
            .borrow()
            .iter()
            .filter(|e| matches!(e, Event::Attempt { .. }))
            .count();
        let (outcome, took) = case.tries[n % case.tries.len()];
        events.borrow_mut().push(Event::Attempt {
            at: clock.now(),
            timeout: ctx.timeout,
            outcome,
        });
        clock.advance(Duration::from_millis(took));
        match outcome {
            Try::Ok => Ok(()),
            Try::Unjudged => Err(AttemptError::unjudged("connect", "refused")),
            Try::Answered => Err(AttemptError::answered("connect", "ERR no")),
            Try::Unknown => Err(AttemptError::unknown("pack-sent", "cut")),
            Try::Hinted(ms) => Err(AttemptError::unjudged("response-headers", "429")
                .with_retry_after(Some(Duration::from_millis(ms)))),
        }
    };
    let reconcile = |_ctx: &sluice_policy::ReconcileCtx<'_>| {
        let n = events
            .borrow()
            .iter()
            .filter(|e| matches!(e, Event::Read { .. }))
            .count();
        let (outcome, took) = case.reads[n % case.reads.len()];
        events.borrow_mut().push(Event::Read {
            at: clock.now(),
            outcome,
        });
        clock.advance(Duration::from_millis(took));
        let observed = BTreeMap::from([("refs/heads/main".to_string(), "absent".to_string())]);
        match outcome {
            Read::Landed => Ok(Settlement::landed((), observed)),
            Read::NotLanded => Ok(Settlement::not_landed(observed)),
            Read::Moved => Ok(Settlement::moved(None, observed, "moved")),
            Read::Unjudged => Err(AttemptError::unjudged("connect", "refused")),
            Read::Answered => Err(AttemptError::answered("connect", "ERR no")),
        }
    };
    let out = match case.effect {
        Effect::Read => policy.run(op, attempt),
        Effect::Write => policy.run_write(op, attempt, reconcile),
    };
    (out, events.into_inner())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_attempt_or_settling_read_starts_after_the_deadline(case in a_case()) {
        let (_out, events) = run(&case);
        for e in &events {
            let at = match e {
                Event::Attempt { at, .. } | Event::Read { at, .. } => *at,
            };
            prop_assert!(at < case.bounds.deadline, "{e:?} at or after the deadline {:?}", case.bounds.deadline);
            if let Event::Attempt { at, timeout, .. } = e {
                prop_assert!(!timeout.is_zero(), "{e:?}: an attempt with no time");
                prop_assert!(*at + *timeout <= case.bounds.deadline, "{e:?}: its timeout runs past the deadline");
            }
        }
    }

    #[test]
    fn the_attempt_count_never_exceeds_the_maximum(case in a_case()) {
        let (out, events) = run(&case);
        let attempts = events.iter().filter(|e| matches!(e, Event::Attempt { .. })).count();
        prop_assert!(attempts <= case.bounds.max_attempts.max(1) as usize);
        prop_assert_eq!(out.attempts.len(), attempts, "every call is in the trace");
        for (i, a) in out.attempts.iter().enumerate() {
            prop_assert_eq!(a.n as usize, i + 1);
            prop_assert!(a.timeout_ms <= a.remaining_ms);
        }
        // Stopped for want of attempts (not of settling reads): all were made.
        let last_was_attempt = matches!(events.last(), Some(Event::Attempt { .. }));
        if out.stopped == Some(Stopped::MaxAttempts) && last_was_attempt {
            prop_assert_eq!(attempts, case.bounds.max_attempts.max(1) as usize);
        }
    }

    #[test]
    fn a_write_is_never_attempted_again_after_an_unknown_answer(case in a_case()) {
        let (out, events) = run(&case);
        let mut after_unknown = false;
        for e in &events {
            match e {
                Event::Attempt { outcome, .. } => {
                    if case.effect == Effect::Write {
                        prop_assert!(!after_unknown, "a write sent again after an unknown answer: {events:?}");
                    }
                    after_unknown |= *outcome == Try::Unknown;
                }
                Event::Read { .. } => {
                    prop_assert_eq!(case.effect, Effect::Write, "a read is never settled");
                }
            }
        }
        // Nothing is tried again after an answer.
        if let Some(i) = events.iter().position(|e| matches!(e, Event::Attempt { outcome: Try::Answered, .. })) {
            prop_assert_eq!(i, events.len() - 1);
            prop_assert_eq!(out.kind, OutcomeKind::Answered);
        }
        // A write that did not succeed may have applied exactly when one of
        // its attempts' requests was complete (an unknown answer): a read
        // that finds it not landed cannot tell "not yet" from "never".
        if case.effect == Effect::Write && out.kind != OutcomeKind::Succeeded {
            let expected = events
                .iter()
                .any(|e| matches!(e, Event::Attempt { outcome: Try::Unknown, .. }));
            prop_assert_eq!(out.may_have_applied, Some(expected), "{:?}", events);
        }
        if case.effect == Effect::Read {
            prop_assert_eq!(out.may_have_applied, None);
        }
    }

    #[test]
    fn every_settling_read_is_listed_and_the_finish_keeps_its_moment(case in a_case()) {
        let (out, events) = run(&case);
        let reads: Vec<Duration> = events
            .iter()
            .filter_map(|e| match e {
                Event::Read { at, .. } => Some(*at),
                Event::Attempt { .. } => None,
            })
            .collect();
        if let Some(reconciled) = &out.reconciled {
            prop_assert_eq!(reconciled.reads.len(), reads.len(), "{:?}", events);
        }
        // A read starts only where the finish keeps its 250 ms (or half of
        // what remained when settling began, when less was left).
        let first_unknown_end = events.iter().position(|e| matches!(e, Event::Read { .. }));
        if let Some(i) = first_unknown_end {
            let settle_start = match &events[i] { Event::Read { at, .. } => *at, Event::Attempt { .. } => unreachable!() };
            let left = (case.bounds.deadline.saturating_sub(settle_start) / 2).min(Duration::from_millis(250));
            for at in &reads {
                prop_assert!(*at < case.bounds.deadline - left, "a read at {at:?} inside the finish's moment: {events:?}");
            }
        }
    }
}
