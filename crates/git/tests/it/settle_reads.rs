//! Settling reads that fail, against a real `git daemon` behind the test
//! kit's fault proxy: a push whose answer was lost is settled by ls-refs,
//! and reads the proxy refuses are read again while the deadline allows
//! (as a `not-landed` one); after a cancel they stop within the reconcile
//! reserve.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use sluice_git::PushOptions;
use sluice_policy::{Bounds, CancelFlag, Class, OutcomeKind, Stopped, Verdict};
use sluice_testkit::proxy::{Fault, FaultProxy, Service};
use sluice_testkit::repo;

/// A pre-receive hook that says it started (creates `started`) and holds
/// the push until `release` exists (at most a minute).
struct HeldHook {
    started: PathBuf,
    release: PathBuf,
}

impl HeldHook {
    fn install(srv: &Path, dir: &Path) -> HeldHook {
        let started = dir.join("hook-started");
        let release = dir.join("hook-release");
        let script = format!(
            "#!/bin/sh\necho run >> '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done\nexit 0\n",
            started.display(),
            release.display()
        );
        repo::install_hook(srv, "pre-receive", &script).expect("hook");
        HeldHook { started, release }
    }

    /// Packs the server got (hook runs).
    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.started)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// Wait (on the hook's own event) until the server holds the pack.
    fn wait_started(&self) {
        let end = Instant::now() + Duration::from_secs(60);
        while !self.started.exists() {
            assert!(Instant::now() < end, "the hook never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn release(&self) {
        std::fs::write(&self.release, b"").expect("release the hook");
    }
}

impl Drop for HeldHook {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.release, b"");
    }
}

fn opts(deadline: Duration) -> sluice_git::CallOptions {
    sluice_git::CallOptions::new().bounds(
        Bounds::new(deadline, Duration::from_secs(4), 3)
            .with_reconcile_reserve(Duration::from_secs(2)),
    )
}

fn receive_packs(proxy: &FaultProxy) -> usize {
    proxy
        .connections()
        .iter()
        .filter(|c| c.service == Some(Service::ReceivePack))
        .count()
}

#[test]
fn a_push_whose_settling_reads_are_refused_for_two_seconds_of_twelve_settles_landed() {
    let w = World::new();
    let srv = w.small("s.git");
    let hook = HeldHook::install(&srv, w.dir.path());
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "lands while the daemon is away");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    // The push's connection loses its report; every connection after it
    // (the settling reads) is refused until the outage ends.
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let (refusing_tx, refusing_rx) = mpsc::channel();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            hook.wait_started();
            proxy.set_fault_always(Fault::Refuse);
            let since = Instant::now();
            hook.release();
            // The daemon is away two seconds (the scenario, not a wait
            // for something to happen).
            std::thread::sleep(Duration::from_secs(2));
            proxy.clear_fault();
            refusing_tx.send(since).expect("send");
        });
        client()
            .push(
                &proxy.url("s.git"),
                &[update(Some(&tip), "refs/heads/main")],
                &PushOptions::default(),
                &open(&local),
                &opts(Duration::from_secs(12)),
            )
            .expect("valid input")
    });
    let _since = refusing_rx.recv().expect("the outage ran");
    let r = out.reconciled.as_ref().expect("reconciled");
    println!("reads: {:?}", r.reads);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    assert_eq!(r.verdict, Some(Verdict::Landed));
    let (last, before) = r.reads.split_last().expect("reads");
    assert_eq!(last.verdict, Some(Verdict::Landed));
    assert!(
        before.len() >= 2,
        "the refused reads are listed: {:?}",
        r.reads
    );
    for f in before {
        assert_eq!(f.verdict, None, "{:?}", r.reads);
        assert!(f.cause.as_deref().is_some_and(|c| !c.is_empty()));
    }
    assert!(
        last.elapsed_ms < 12_000,
        "landed within the deadline: {:?}",
        r.reads
    );
    assert_eq!(receive_packs(&proxy), 1, "one pack, never pushed again");
    assert_eq!(hook.runs(), 1);
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), Some(tip));
}

#[test]
fn after_a_cancel_refused_settling_reads_stop_within_the_reserve() {
    let w = World::new();
    let srv = w.small("s.git");
    let hook = HeldHook::install(&srv, w.dir.path());
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "cancelled after its pack");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let cancel = CancelFlag::new();
    let (tx, rx) = mpsc::channel();
    let reserve = Duration::from_secs(2);
    let (out, returned) = std::thread::scope(|s| {
        s.spawn(|| {
            hook.wait_started();
            // The daemon goes away for good, and the caller cancels.
            proxy.set_fault_always(Fault::Refuse);
            let at = Instant::now();
            cancel.cancel();
            hook.release();
            tx.send(at).expect("send");
        });
        let out = client()
            .push(
                &proxy.url("s.git"),
                &[update(Some(&tip), "refs/heads/main")],
                &PushOptions::default(),
                &open(&local),
                &opts(Duration::from_secs(30)).cancel(&cancel),
            )
            .expect("valid input");
        (out, Instant::now())
    });
    let cancelled = rx.recv().expect("cancelled");
    let after = returned.duration_since(cancelled);
    let r = out.reconciled.as_ref().expect("reconciled");
    println!("after the cancel: {after:?}; reads: {:?}", r.reads);
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(r.verdict, None, "no read answered");
    assert!(!r.reads.is_empty());
    assert!(r
        .reads
        .iter()
        .all(|x| x.verdict.is_none() && x.cause.is_some()));
    // The deadline is 30 s: the reads stopped by the reserve since the
    // cancel (with room for the attempt's own end and a loaded machine).
    assert!(
        after < reserve + Duration::from_millis(2500),
        "the reads ran {after:?} after the cancel"
    );
    assert_eq!(receive_packs(&proxy), 1, "never pushed again");
}

#[test]
fn a_push_still_not_landed_when_its_reads_run_out_says_stopped_deadline() {
    let w = World::new();
    let srv = w.small("s.git");
    // The server holds the pack in its hook past the deadline: every
    // settling read finds the ref where it was.
    let hook = HeldHook::install(&srv, w.dir.path());
    let local = local_clone(&srv, &w.path("local.git"));
    let before = repo::rev_parse(&srv, "refs/heads/main");
    let tip = repo::commit_on(&local, "main", "held past the deadline");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let out = client()
        .push(
            &proxy.url("s.git"),
            &[update(Some(&tip), "refs/heads/main")],
            &PushOptions::default(),
            &open(&local),
            &opts(Duration::from_secs(8)),
        )
        .expect("valid input");
    hook.release();
    let r = out.reconciled.as_ref().expect("reconciled");
    println!("reads: {:?}", r.reads);
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(
        out.stopped,
        Some(Stopped::Deadline),
        "the reads ran out of time"
    );
    assert_eq!(r.verdict, Some(Verdict::NotLanded));
    assert!(r.reads.len() >= 2, "read again: {:?}", r.reads);
    assert!(r
        .reads
        .iter()
        .all(|x| x.verdict == Some(Verdict::NotLanded)));
    assert_eq!(
        r.observed.get("refs/heads/main").map(String::as_str),
        before.as_deref()
    );
    assert_eq!(receive_packs(&proxy), 1, "one pack, never pushed again");
}

#[test]
fn a_stop_cuts_a_stalled_settling_read_of_a_push_at_once() {
    let w = World::new();
    let srv = w.small("s.git");
    let hook = HeldHook::install(&srv, w.dir.path());
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "stopped while settling");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let cancel = CancelFlag::new();
    // A settling read's own limit: 20 s. The stop must cut it long before.
    let bounds = Bounds::new(Duration::from_secs(60), Duration::from_secs(20), 3)
        .with_reconcile_reserve(Duration::from_secs(2));
    let (tx, rx) = mpsc::channel();
    let (out, returned) = std::thread::scope(|s| {
        s.spawn(|| {
            hook.wait_started();
            // Every connection after the push's stalls before the
            // advertisement: the settling read hangs there.
            proxy.set_fault_always(Fault::StallBeforeAdvert);
            hook.release();
            let end = Instant::now() + Duration::from_secs(60);
            while !proxy
                .connections()
                .iter()
                .any(|c| c.service == Some(Service::UploadPack))
            {
                assert!(Instant::now() < end, "no settling read came");
                std::thread::sleep(Duration::from_millis(5));
            }
            let at = Instant::now();
            cancel.stop();
            tx.send(at).expect("send");
        });
        let out = client()
            .push(
                &proxy.url("s.git"),
                &[update(Some(&tip), "refs/heads/main")],
                &PushOptions::default(),
                &open(&local),
                &sluice_git::CallOptions::new()
                    .bounds(bounds)
                    .cancel(&cancel),
            )
            .expect("valid input");
        (out, Instant::now())
    });
    let stopped = rx.recv().expect("stopped");
    let after = returned.duration_since(stopped);
    let r = out.reconciled.as_ref().expect("reconciled");
    println!("after the stop: {after:?}; reads: {:?}", r.reads);
    assert!(
        after < Duration::from_secs(5),
        "the stop cut the stalled read: returned {after:?} after it"
    );
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(r.verdict, None, "no read answered");
    assert_eq!(r.reads.len(), 1, "no read after the stop: {:?}", r.reads);
    assert_eq!(receive_packs(&proxy), 1, "never pushed again");
}
