//! Settling an unknown push by reading, in the two situations the soak
//! found it going wrong, made deterministic: a push that landed and was
//! built upon before the settling read, and a settling read that stalls.
//!
//! Both push through the fault proxy to a real `git daemon` and check the
//! server's reflog.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_git::{CallOptions, GitClient, PushOptions, RefUpdate};
use sluice_policy::{BackoffShape, Bounds, OutcomeKind, Policy, Verdict};
use sluice_testkit::repo;
use sluice_testkit::{Fault, FaultProxy, GitDaemon, RepoBuilder};

struct World {
    _dir: tempfile::TempDir,
    srv: PathBuf,
    local: PathBuf,
    daemon: GitDaemon,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let srv = RepoBuilder::new()
        .branch("main", 3)
        .build(&dir.path().join("srv").join("r.git"))
        .expect("served repository");
    let local = dir.path().join("local.git");
    repo::git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &srv.display().to_string(),
            &local.display().to_string(),
        ],
    );
    let daemon = GitDaemon::start(&dir.path().join("srv")).expect("daemon");
    World {
        _dir: dir,
        srv,
        local,
        daemon,
    }
}

fn opts() -> CallOptions {
    CallOptions::new().bounds(
        Bounds::new(Duration::from_secs(10), Duration::from_secs(1), 3)
            .with_backoff(BackoffShape::constant(Duration::from_millis(50)))
            .with_reconcile_reserve(Duration::from_secs(2)),
    )
}

fn leased_push(
    w: &World,
    url: &str,
    tip: &str,
    lease: &str,
) -> (sluice_policy::Outcome<sluice_git::PushReport>, Duration) {
    let client = GitClient::new(Arc::new(Policy::default()));
    let local = gix::open(&w.local).expect("open");
    let update = RefUpdate::leased(
        gix::ObjectId::from_hex(tip.as_bytes()).expect("hex"),
        "refs/heads/main",
        gix::ObjectId::from_hex(lease.as_bytes()).expect("hex"),
    );
    let t = Instant::now();
    let out = client
        .push(url, &[update], &PushOptions::default(), &local, &opts())
        .expect("valid input");
    (out, t.elapsed())
}

fn landed(srv: &Path, commit: &str) -> usize {
    repo::reflog_entries(srv, "refs/heads/main")
        .iter()
        .filter(|e| e.new == commit)
        .count()
}

/// Bug A (see RELIABILITY.md): the settling read finds the ref at a third
/// value and calls the push `moved` → `answered`, although the push landed
/// and somebody built on it since. A read of the ref cannot tell "moved
/// before us" from "landed, then moved on": the outcome must not claim the
/// push failed. Somebody builds on main in the moment it is updated (the
/// `reference-transaction` hook, before receive-pack sends its report), so
/// the settling read always sees the third value: `moved`, which is
/// `unknown` with `may_have_applied: true`.
#[test]
fn a_push_that_landed_and_was_built_upon_before_the_settling_read_is_never_reported_answered() {
    let w = world();
    repo::install_hook(
        &w.srv,
        "reference-transaction",
        "#!/bin/sh\n\
         [ \"$1\" = committed ] && [ -z \"$BUILT_UPON\" ] || exit 0\n\
         while read old new ref; do\n\
           if [ \"$ref\" = refs/heads/main ]; then\n\
             c=$(git -c user.name=other -c user.email=other@example.invalid commit-tree \"$new^{tree}\" -p \"$new\" -m 'somebody else built on it' </dev/null)\n\
             BUILT_UPON=1 git update-ref -m 'somebody else' \"$ref\" \"$c\" \"$new\" </dev/null\n\
           fi\n\
         done\n",
    )
    .expect("hook");
    let lease = repo::rev_parse(&w.local, "refs/heads/main").expect("main");
    let tip = repo::commit_on(&w.local, "main", "landed, then built upon");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let (out, _) = leased_push(&w, &proxy.url("r.git"), &tip, &lease);
    assert_eq!(landed(&w.srv, &tip), 1, "the push is on the server");
    let built_upon = repo::rev_parse(&w.srv, "refs/heads/main").expect("main");
    assert_ne!(built_upon, tip, "somebody built on the push");
    assert_eq!(
        (out.kind, out.may_have_applied),
        (OutcomeKind::Unknown, Some(true)),
        "a push on the server, moved since: {:?} {:?}",
        out.error,
        out.reconciled
    );
    let reconciled = out.reconciled.as_ref().expect("settled by reading");
    assert_eq!(reconciled.verdict, Some(Verdict::Moved));
    assert_eq!(
        reconciled.observed.get("refs/heads/main"),
        Some(&built_upon),
        "{reconciled:?}"
    );
}

/// Bug B (see RELIABILITY.md): a settling read's hard deadline is the
/// whole remaining budget, so one stalled read spends the operation and
/// the push ends `unknown`; capped by the attempt timeout, the next read
/// settles it.
#[test]
fn a_stalled_settling_read_is_cut_at_the_attempt_timeout_and_read_again() {
    let w = world();
    let lease = repo::rev_parse(&w.local, "refs/heads/main").expect("main");
    let tip = repo::commit_on(&w.local, "main", "settled by a second read");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    // The push's report is cut; the first settling read (ls-refs v2) gets
    // no answer until the client gives up.
    proxy.set_fault(Fault::CutBeforeReport, 2);
    let (out, took) = leased_push(&w, &proxy.url("r.git"), &tip, &lease);
    assert_eq!(landed(&w.srv, &tip), 1, "the push is on the server");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{:?} {:?}",
        out.attempts,
        out.error
    );
    assert!(
        took < Duration::from_secs(5),
        "{took:?}: a stalled read was given the whole deadline"
    );
}

#[test]
fn a_push_whose_report_is_cut_is_settled_by_one_read_and_lands_once() {
    let w = world();
    let lease = repo::rev_parse(&w.local, "refs/heads/main").expect("main");
    let tip = repo::commit_on(&w.local, "main", "settled by reading");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let (out, _) = leased_push(&w, &proxy.url("r.git"), &tip, &lease);
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(
        out.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::Landed)
    );
    assert_eq!(landed(&w.srv, &tip), 1);
    proxy.wait_idle(Duration::from_secs(5));
    let packs = proxy
        .connections()
        .iter()
        .filter(|c| c.pack_bytes_client_to_server > 0)
        .count();
    assert_eq!(packs, 1, "one pack, never a second");
}
