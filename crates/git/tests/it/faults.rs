//! Reads and pushes through the testkit's fault proxy: each fault point of
//! the design's table, on the first connection only and persistently.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use sluice_policy::{Class, OutcomeKind, Verdict};
use sluice_testkit::repo;
use sluice_testkit::{Fault, FaultProxy};

fn class_of(out: &sluice_policy::Outcome<impl Sized>, n: usize) -> (String, Option<Class>) {
    let a = &out.attempts[n];
    (a.phase.to_string(), a.class)
}

#[test]
fn each_read_fault_on_the_first_connection_is_retried_with_its_phase_and_class() {
    let w = World::new();
    w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let cases = [
        (Fault::Refuse, "connect", Class::Unjudged),
        (Fault::ResetBeforeAdvert, "connect", Class::Unjudged),
        (Fault::StallBeforeAdvert, "connect", Class::Unjudged),
        (Fault::CutAfterAdvert, "advertised", Class::Unjudged),
    ];
    for (fault, phase, class) in cases {
        proxy.set_fault(fault.clone(), 1);
        let out = client()
            .ls_refs(&proxy.url("s.git"), &[], &quick(10_000, 1_000, 3))
            .expect("valid input");
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{fault:?}: {:?}",
            out.attempts
        );
        assert_eq!(out.attempts.len(), 2, "{fault:?}");
        // A cut right after the advertisement races the client's small
        // ls-refs command: when the whole command was written before the
        // close arrived, nothing tells the client the server never read it
        // (`unknown`). Either way a read is tried again.
        let first = class_of(&out, 0);
        if fault == Fault::CutAfterAdvert && first.1 == Some(Class::Unknown) {
            assert_eq!(first.0, "advertised", "{fault:?}");
            continue;
        }
        assert_eq!(first, (phase.to_string(), Some(class)), "{fault:?}");
    }
}

#[test]
fn a_fetch_cut_in_the_middle_of_its_pack_is_unknown_and_retried() {
    let w = World::new();
    w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutInFetchPack, 1);
    let dst = w.path("dst.git");
    let repo_ = empty_repo(&dst);
    let out = client()
        .fetch(
            &proxy.url("s.git"),
            &["+refs/heads/*:refs/heads/*".into()],
            &repo_,
            &quick(20_000, 5_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        class_of(&out, 0),
        ("negotiated".to_string(), Some(Class::Unknown))
    );
    repo::fsck(&dst).expect("fsck clean");
}

#[test]
fn a_persistent_fault_ends_unknown_within_the_deadline_and_no_connection_follows_it() {
    let w = World::new();
    w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault_always(Fault::StallBeforeAdvert);
    let start = Instant::now();
    let out = client()
        .ls_refs(&proxy.url("s.git"), &[], &quick(3_000, 1_000, 10))
        .expect("valid input");
    let took = start.elapsed();
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(out.attempts.len() <= 3, "{}", out.attempts.len());
    let deadline = start + Duration::from_secs(3);
    for c in proxy.connections() {
        assert!(c.accepted <= deadline, "a connection after the deadline");
    }
}

#[test]
fn an_advertisement_trickled_a_byte_a_second_is_cut_at_the_attempt_timeout() {
    let w = World::new();
    w.small("s.git");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault_always(Fault::TrickleAdvert {
        every: Duration::from_millis(300),
    });
    let start = Instant::now();
    let out = client()
        .ls_refs(&proxy.url("s.git"), &[], &quick(1_500, 1_000, 1))
        .expect("valid input");
    let took = start.elapsed();
    assert_eq!(out.kind, OutcomeKind::Unknown);
    // Not before its attempt timeout (load only makes it later), and
    // within the deadline plus the suite's one second of tolerance.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1_500 + 1_000),
        "{took:?}"
    );
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap_or_default()
        .contains("timed out"));
}

#[test]
fn a_stalled_file_child_is_gone_when_its_attempt_ends() {
    let w = World::new();
    w.small("s.git");
    let pidfile = w.path("pid");
    let script = w.path("stall-git");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 30\n",
            pidfile.display()
        ),
    )
    .expect("script");
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .expect("chmod");
    let c = client().with_git_program(&script);
    let url = format!("file://{}", w.srv("s.git").display());
    let start = Instant::now();
    let out = c
        .ls_refs(&url, &[], &quick(1_200, 1_000, 1))
        .expect("valid input");
    assert!(start.elapsed() < Duration::from_millis(2_200));
    assert_eq!(out.kind, OutcomeKind::Unknown);
    let pid = std::fs::read_to_string(&pidfile)
        .expect("pid written")
        .trim()
        .to_string();
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(!alive, "the stalled child {pid} is still running");
}

#[test]
fn a_missing_repository_behind_the_proxy_costs_exactly_one_connection() {
    let w = World::new();
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let out = client()
        .ls_refs(&proxy.url("absent.git"), &[], &quick(10_000, 2_000, 5))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    proxy.wait_idle(Duration::from_secs(2));
    assert_eq!(proxy.connections().len(), 1);
}

fn push_once(
    url: &str,
    local: &std::path::Path,
    tip: &str,
    opts: &sluice_git::CallOptions,
) -> sluice_policy::Outcome<sluice_git::PushReport> {
    push(url, update(Some(tip), "refs/heads/main"), local, opts)
}

fn updates_of_main(srv: &std::path::Path) -> usize {
    repo::reflog(srv, "refs/heads/main").len()
}

#[test]
fn a_push_cut_before_or_after_the_advertisement_lands_exactly_once() {
    for fault in [
        Fault::Refuse,
        Fault::ResetBeforeAdvert,
        Fault::CutAfterAdvert,
    ] {
        let w = World::new();
        let srv = w.small("s.git");
        let before = updates_of_main(&srv);
        let old = repo::rev_parse(&srv, "refs/heads/main");
        let local = local_clone(&srv, &w.path("local.git"));
        let tip = repo::commit_on(&local, "main", "x");
        let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
        proxy.set_fault(fault.clone(), 1);
        let out = push_once(&proxy.url("s.git"), &local, &tip, &quick(20_000, 5_000, 3));
        // A cut right after the advertisement races the client's small
        // request: when the client saw the close before its last byte, the
        // attempt is unjudged and tried again; when its whole request was
        // already written, nothing tells it the server never read it, so it
        // is settled by reading and never pushed again.
        // (The proxy may also have forwarded that request before its cut:
        // then the read finds it landed.)
        if fault == Fault::CutAfterAdvert && out.attempts[0].class == Some(Class::Unknown) {
            assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
            let verdict = out.reconciled.as_ref().expect("settled").verdict;
            if out.kind == OutcomeKind::Succeeded {
                assert_eq!(verdict, Some(Verdict::Landed));
                assert_eq!(
                    repo::rev_parse(&srv, "refs/heads/main").as_deref(),
                    Some(tip.as_str())
                );
                assert_eq!(updates_of_main(&srv), before + 1, "applied once");
            } else {
                assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
                assert_eq!(out.may_have_applied, Some(true));
                assert_eq!(verdict, Some(Verdict::NotLanded));
                assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), old);
                assert_eq!(updates_of_main(&srv), before);
            }
            continue;
        }
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{fault:?} {:?}",
            out.attempts
        );
        assert_eq!(
            out.attempts[0].class,
            Some(Class::Unjudged),
            "{fault:?} {:?}",
            out.attempts
        );
        assert_eq!(out.reconciled, None);
        assert_eq!(
            repo::rev_parse(&srv, "refs/heads/main").as_deref(),
            Some(tip.as_str())
        );
        assert_eq!(updates_of_main(&srv), before + 1, "{fault:?}");
    }
}

#[test]
fn a_push_cut_in_the_middle_of_a_large_pack_is_unjudged_and_lands_exactly_once() {
    let w = World::new();
    let srv = w.small("s.git");
    let before = updates_of_main(&srv);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = big_commit(&local, "main", 16 << 20, 7);
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutInPushPack, 1);
    let out = push_once(&proxy.url("s.git"), &local, &tip, &quick(60_000, 30_000, 3));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        class_of(&out, 0),
        ("commands-sent".to_string(), Some(Class::Unjudged))
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    assert_eq!(updates_of_main(&srv), before + 1);
    repo::fsck(&srv).expect("fsck clean");
}

#[test]
fn a_push_whose_report_is_cut_is_settled_by_reading_and_never_sent_again() {
    let w = World::new();
    let srv = w.small("s.git");
    let before = updates_of_main(&srv);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let out = push_once(&proxy.url("s.git"), &local, &tip, &quick(20_000, 5_000, 3));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        class_of(&out, 0),
        ("pack-sent".to_string(), Some(Class::Unknown))
    );
    let rec = out.reconciled.expect("settled by reading");
    assert_eq!(rec.verdict, Some(Verdict::Landed));
    assert_eq!(
        rec.observed.get("refs/heads/main").map(String::as_str),
        Some(tip.as_str())
    );
    proxy.wait_idle(Duration::from_secs(2));
    let with_pack = proxy
        .connections()
        .iter()
        .filter(|c| c.pack_bytes_client_to_server > 0)
        .count();
    assert_eq!(with_pack, 1, "a second connection carried a pack");
    assert_eq!(updates_of_main(&srv), before + 1);
}

#[test]
fn a_push_whose_report_stalls_is_settled_by_reading_inside_the_deadline() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::StallBeforeReport, 1);
    let start = Instant::now();
    let out = push_once(&proxy.url("s.git"), &local, &tip, &quick(5_000, 1_000, 3));
    assert!(start.elapsed() < Duration::from_secs(6));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        out.reconciled.expect("settled").verdict,
        Some(Verdict::Landed)
    );
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap_or_default()
        .contains("timed out"));
}

#[test]
fn a_retry_after_a_cut_carries_the_first_old_value_and_never_overwrites_another_update() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = big_commit(&local, "main", 16 << 20, 11);
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutInPushPack, 1);
    let url = proxy.url("s.git");
    let quick_opts = quick(60_000, 30_000, 3);
    let opts = quick_opts.clone().bounds(
        quick_opts
            .given_bounds()
            .expect("quick gives bounds")
            .with_backoff(sluice_policy::BackoffShape::constant(
                Duration::from_millis(1_500),
            )),
    );
    let pusher = std::thread::spawn({
        let local = local.clone();
        move || push(&url, update(Some(&tip), "refs/heads/main"), &local, &opts)
    });
    // Wait for the cut, then somebody else pushes before the retry.
    let t0 = Instant::now();
    while !proxy
        .connections()
        .iter()
        .any(|c| c.fault_fired && c.closed.is_some())
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the cut never happened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let theirs = repo::commit_on(&srv, "main", "somebody else");
    let out = pusher.join().expect("push thread");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.reconciled, None);
    let r = &out.value.expect("report").refs[0];
    // Our lease lost to the other writer: refused here (stale info) or by
    // the server's ref update (failed to update ref), typed either way.
    assert!(
        matches!(
            r.reason,
            Some(sluice_git::RejectReason::StaleInfo | sluice_git::RejectReason::FailedToUpdateRef)
        ),
        "{r:?}"
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(theirs.as_str())
    );
}

#[test]
fn a_deletion_only_push_cut_after_its_commands_is_settled_absent_landed() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let out = push(
        &proxy.url("s.git"),
        update(None, "refs/heads/dev"),
        &local,
        &quick(20_000, 5_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        class_of(&out, 0),
        ("commands-sent".to_string(), Some(Class::Unknown))
    );
    let rec = out.reconciled.expect("settled");
    assert_eq!(rec.verdict, Some(Verdict::Landed));
    assert_eq!(
        rec.observed.get("refs/heads/dev").map(String::as_str),
        Some("absent")
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), None);
}

#[test]
fn eight_leased_pushers_race_and_exactly_one_lands_each_round() {
    let w = World::new();
    let srv = w.small("s.git");
    let url = w.daemon.url("s.git");
    let rounds = 50;
    let locals: Vec<_> = (0..8)
        .map(|i| local_clone(&srv, &w.path(&format!("l{i}.git"))))
        .collect();
    let c = client();
    let before = updates_of_main(&srv);
    for round in 0..rounds {
        let base = repo::rev_parse(&srv, "refs/heads/main").expect("main");
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = locals
                .iter()
                .enumerate()
                .map(|(i, local)| {
                    let c = c.clone();
                    let url = url.clone();
                    let base = base.clone();
                    s.spawn(move || {
                        repo::git(
                            local,
                            &["fetch", "-q", "origin", "+refs/heads/main:refs/heads/main"],
                        );
                        let tip = repo::commit_on(local, "main", &format!("r{round} t{i}"));
                        let u = update(Some(&tip), "refs/heads/main")
                            .with_lease(sluice_git::Lease::Oid(oid(&base)));
                        push_by(&c, &url, u, local, &quick(20_000, 10_000, 3))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let landed = results
            .iter()
            .filter(|o| o.kind == OutcomeKind::Succeeded)
            .count();
        assert_eq!(
            landed,
            1,
            "round {round}: {:?}",
            results
                .iter()
                .map(|o| (o.kind, o.error.clone()))
                .collect::<Vec<_>>()
        );
        assert!(results
            .iter()
            .all(|o| matches!(o.kind, OutcomeKind::Succeeded | OutcomeKind::Answered)));
    }
    assert_eq!(updates_of_main(&srv), before + rounds);
}

#[test]
fn a_push_cancelled_while_waiting_for_its_report_is_settled_by_reading() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::StallBeforeReport, 1);
    let cancel = sluice_policy::CancelFlag::new();
    let opts = quick(20_000, 10_000, 3).cancel(&cancel);
    let url = proxy.url("s.git");
    let pusher = std::thread::spawn({
        let local = local.clone();
        let tip = tip.clone();
        move || push(&url, update(Some(&tip), "refs/heads/main"), &local, &opts)
    });
    let t0 = Instant::now();
    while repo::rev_parse(&srv, "refs/heads/main").as_deref() != Some(tip.as_str()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the push never reached the server"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    cancel.cancel();
    let out = pusher.join().expect("push thread");
    // The attempt ended on the cancel, not on its 10 s timeout: its own
    // cause says so (an event, not a wall-clock bound).
    let cause = out.attempts[0].cause.as_deref().unwrap_or_default();
    assert!(cause.contains("cancelled"), "{cause}");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        class_of(&out, 0),
        ("pack-sent".to_string(), Some(Class::Unknown))
    );
    assert_eq!(
        out.reconciled.expect("settled").verdict,
        Some(Verdict::Landed)
    );
}
