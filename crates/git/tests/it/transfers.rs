//! What an attempt timeout covers: a transfer that keeps moving runs on
//! past it (up to the deadline less the reserve); one that stalls or crawls
//! under the low-speed floor is still cut.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use sluice_policy::{Class, OutcomeKind};
use sluice_testkit::{repo, FaultProxy, Point};

/// A served repository whose main holds a 640 KiB incompressible file.
fn big_world() -> (World, String) {
    let w = World::new();
    let srv = w.small("s.git");
    let tip = big_commit(&srv, "main", 640 << 10, 11);
    (w, tip)
}

#[test]
fn a_fetch_longer_than_the_attempt_timeout_succeeds_in_one_attempt_while_it_moves() {
    let (w, tip) = big_world();
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    // ~160 KiB/s: the pack takes about four attempt timeouts.
    proxy.throttle(Some(160 << 10));
    let local = empty_repo(&w.path("local.git"));
    let t0 = Instant::now();
    let out = client()
        .fetch(
            &proxy.url("s.git"),
            &["+refs/heads/main:refs/remotes/origin/main".to_string()],
            &local,
            &quick(60_000, 1_000, 3),
        )
        .expect("valid input");
    let took = t0.elapsed();
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert!(
        took > Duration::from_secs(2),
        "the transfer was meant to outlast the attempt timeout: {took:?}"
    );
    assert_eq!(
        repo::rev_parse(&w.path("local.git"), "refs/remotes/origin/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_fetch_that_crawls_under_the_floor_is_cut_about_an_attempt_timeout_later() {
    let (w, _tip) = big_world();
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.throttle(Some(160 << 10));
    let local = w.path("local.git");
    empty_repo(&local);
    let url = proxy.url("s.git");
    let fetcher = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = client()
            .fetch(
                &url,
                &["+refs/heads/main:refs/remotes/origin/main".to_string()],
                &open(&local),
                &quick(60_000, 1_000, 1),
            )
            .expect("valid input");
        (out, t0.elapsed())
    });
    // Once the pack moves, the link drops to 64 bytes a second.
    let t0 = Instant::now();
    while !proxy
        .connections()
        .iter()
        .any(|c| c.reached >= Point::PackStarted)
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "no pack started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let crawl_from = t0.elapsed();
    proxy.throttle(Some(64));
    let (out, took) = fetcher.join().expect("fetch thread");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert!(
        out.attempts[0]
            .cause
            .as_deref()
            .unwrap_or_default()
            .contains("timed out"),
        "{:?}",
        out.attempts
    );
    // Cut within two attempt timeouts of the crawl (the floor is averaged
    // over one), with a second of slack for a busy machine.
    assert!(
        took < crawl_from
            + Duration::from_secs(2)
            + Duration::from_secs(1)
            + Duration::from_secs(1),
        "took {took:?}, crawl from {crawl_from:?}"
    );
    proxy.throttle(None);
}
