//! Storm protection: 50 concurrent ls-refs against a remote that refuses
//! every connection for 10 s (the fault proxy with `Fault::Refuse` on every
//! connection), then recovers.
//!
//! Four storms run at once, each with its own client (its own per-host
//! retry budget) and its own proxy:
//!
//! | storm | retry budget | jitter |
//! |---|---|---|
//! | `budget+jitter` | capacity 20, refill 1/s, credit 0.1 (the default) | yes |
//! | `budget` | the default | no |
//! | `jitter` | unlimited | yes |
//! | `lockstep` | unlimited | no |
//!
//! Asserted: with the budget, the total downstream connections are at most
//! `N + capacity + refill × outage` (a first attempt is free; every retry
//! spends a token before its pause; a retry is only ever needed after a
//! failed attempt, and attempts only fail during the outage; a little
//! slack, 0.5 s of refill, for the attempts in flight when it ends); every
//! operation of every storm ends inside its deadline (+ 0.5 s); and jitter
//! spreads the retries: the largest number of retry arrivals in any 100 ms
//! window is lower with jitter than in lockstep. The figures are printed.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use sluice_git::{CallOptions, GitClient};
use sluice_policy::{BackoffShape, Bounds, OutcomeKind, Policy, RetryBudget};
use sluice_testkit::{Fault, FaultProxy, GitDaemon, RepoBuilder};

const OPS: usize = 50;
const OUTAGE: Duration = Duration::from_secs(10);
const DEADLINE: Duration = Duration::from_secs(20);

struct Storm {
    name: &'static str,
    budget: RetryBudget,
    jitter: bool,
}

struct Figures {
    name: &'static str,
    budget: RetryBudget,
    connections: usize,
    during_outage: usize,
    peak_retry_window: usize,
    succeeded: usize,
    budget_empty: usize,
    other: usize,
    longest: Duration,
}

/// The largest number of `times` in any window of `width` (times sorted).
fn peak_window(times: &[Duration], width: Duration) -> usize {
    let mut best = 0;
    let mut j = 0;
    for i in 0..times.len() {
        while times[i] - times[j] >= width {
            j += 1;
        }
        best = best.max(i - j + 1);
    }
    best
}

fn storm(s: &Storm, daemon: &GitDaemon, seed: u64) -> Figures {
    let proxy = FaultProxy::git(daemon.addr()).expect("proxy");
    proxy.set_fault_always(Fault::Refuse);
    let policy = Policy::builder()
        .retry_budget(s.budget)
        .jitter_seed(seed)
        .build();
    let client = GitClient::new(Arc::new(policy));
    let url = proxy.url("r.git");
    let opts = CallOptions::new().bounds(
        Bounds::new(DEADLINE, Duration::from_secs(2), 100).with_backoff(BackoffShape {
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            factor: 2.0,
            jitter: s.jitter,
        }),
    );
    let barrier = Barrier::new(OPS + 1);
    let (t0, outcomes) = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..OPS)
            .map(|_| {
                let (client, url, opts, barrier) = (&client, &url, &opts, &barrier);
                sc.spawn(move || {
                    barrier.wait();
                    let t = Instant::now();
                    let out = client.ls_refs(url, &[], opts).expect("valid input");
                    (out, t.elapsed())
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        std::thread::sleep(OUTAGE);
        proxy.clear_fault();
        let outcomes: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("operation thread"))
            .collect();
        (t0, outcomes)
    });
    proxy.wait_idle(Duration::from_secs(5));
    let mut times: Vec<Duration> = proxy
        .connections()
        .iter()
        .map(|c| c.accepted.saturating_duration_since(t0))
        .collect();
    times.sort();
    let during_outage = times.iter().filter(|t| **t < OUTAGE).count();
    // Every operation's first attempt is at the start; what follows them
    // are retries.
    let retries = &times[OPS.min(times.len())..];
    let stopped_by_budget =
        |o: &sluice_policy::Outcome<_>| o.stopped == Some(sluice_policy::Stopped::RetryBudgetEmpty);
    Figures {
        name: s.name,
        budget: s.budget,
        connections: times.len(),
        during_outage,
        peak_retry_window: peak_window(retries, Duration::from_millis(100)),
        succeeded: outcomes
            .iter()
            .filter(|(o, _)| o.kind == OutcomeKind::Succeeded)
            .count(),
        budget_empty: outcomes
            .iter()
            .filter(|(o, _)| stopped_by_budget(o))
            .count(),
        other: outcomes
            .iter()
            .filter(|(o, _)| o.kind != OutcomeKind::Succeeded && !stopped_by_budget(o))
            .count(),
        longest: outcomes.iter().map(|(_, t)| *t).max().unwrap_or_default(),
    }
}

#[test]
fn a_ten_second_outage_costs_at_most_the_retry_budget_and_jitter_spreads_the_retries() {
    let _alone = crate::alone();
    let dir = tempfile::tempdir().expect("tempdir");
    RepoBuilder::new()
        .branch("main", 2)
        .build(&dir.path().join("r.git"))
        .expect("repository");
    let daemon = GitDaemon::start(dir.path()).expect("daemon");
    let storms = [
        Storm {
            name: "budget+jitter",
            budget: RetryBudget::DEFAULT,
            jitter: true,
        },
        Storm {
            name: "budget",
            budget: RetryBudget::DEFAULT,
            jitter: false,
        },
        Storm {
            name: "jitter",
            budget: RetryBudget::UNLIMITED,
            jitter: true,
        },
        Storm {
            name: "lockstep",
            budget: RetryBudget::UNLIMITED,
            jitter: false,
        },
    ];
    let figures: Vec<Figures> = std::thread::scope(|sc| {
        let hs: Vec<_> = storms
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let daemon = &daemon;
                sc.spawn(move || storm(s, daemon, 0x5704 + i as u64))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("storm")).collect()
    });
    println!(
        "{OPS} operations, outage {} s, deadline {} s, backoff 200 ms doubling to 2 s",
        OUTAGE.as_secs(),
        DEADLINE.as_secs()
    );
    for f in &figures {
        println!(
            "{:>14}: {} connections ({} during the outage), peak retry arrivals in 100 ms: {}, succeeded {}, stopped by the budget {}, other {}, longest {} ms",
            f.name,
            f.connections,
            f.during_outage,
            f.peak_retry_window,
            f.succeeded,
            f.budget_empty,
            f.other,
            f.longest.as_millis()
        );
    }
    for f in &figures {
        assert!(
            f.longest <= DEADLINE + Duration::from_millis(500),
            "{}: an operation took {:?}",
            f.name,
            f.longest
        );
        if f.budget.capacity.is_finite() {
            let b = f.budget;
            let stated = OPS as f64 + b.capacity + b.refill_per_sec * OUTAGE.as_secs_f64();
            let bound = stated + b.refill_per_sec * 0.5;
            println!(
                "{:>14}: bound N + capacity + refill × outage = {OPS} + {} + {} × {} = {stated}; observed {}",
                f.name,
                b.capacity,
                b.refill_per_sec,
                OUTAGE.as_secs(),
                f.connections
            );
            assert!(
                f.connections as f64 <= bound,
                "{}: {} connections > {bound}",
                f.name,
                f.connections
            );
        } else {
            // Without a budget every operation rides the outage out.
            assert_eq!(f.succeeded, OPS, "{}", f.name);
        }
    }
    let peak = |n: &str| {
        figures
            .iter()
            .find(|f| f.name == n)
            .map(|f| f.peak_retry_window)
            .expect("storm")
    };
    assert!(
        peak("jitter") < peak("lockstep"),
        "jitter {} vs lockstep {}",
        peak("jitter"),
        peak("lockstep")
    );
    let unlimited = figures
        .iter()
        .find(|f| f.name == "jitter")
        .map(|f| f.connections)
        .expect("storm");
    let budgeted = figures[0].connections;
    assert!(budgeted < unlimited, "{budgeted} vs {unlimited}");
}
