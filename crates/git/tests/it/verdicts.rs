//! Verdicts that stay true: an unknown push is never pushed again, local
//! failures are ours, answers that cannot change are answered once, and
//! what the server said is kept — each against a real server.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use sluice_git::{GitError, PushOptions, RefStatus, RejectReason};
use sluice_policy::{Class, CommandSource, OutcomeKind, Stopped, Verdict};
use sluice_testkit::repo;
use sluice_testkit::{Fault, FaultProxy, HttpBackend};

/// A pre-receive hook that says it started (creates `started`) and then
/// holds the push until the test creates `release`: the server has the
/// whole pack and has not updated the ref, for as long as the test wants.
struct HeldHook {
    started: PathBuf,
    release: PathBuf,
}

impl HeldHook {
    fn install(srv: &Path, dir: &Path) -> HeldHook {
        let started = dir.join("hook-started");
        let release = dir.join("hook-release");
        let script = format!(
            // Held at most a minute, whatever becomes of the test.
            "#!/bin/sh\n: > '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done\nexit 0\n",
            started.display(),
            release.display()
        );
        repo::install_hook(srv, "pre-receive", &script).expect("hook");
        HeldHook { started, release }
    }

    /// Waits (on the hook's own signal) until the server runs the hook.
    fn wait_started(&self) {
        let t0 = Instant::now();
        while !self.started.exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the hook never started"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn release(&self) {
        std::fs::write(&self.release, b"").expect("release");
    }
}

impl Drop for HeldHook {
    /// A test that fails before it releases the hook still lets the
    /// server's receive-pack end.
    fn drop(&mut self) {
        let _ = std::fs::write(&self.release, b"");
    }
}

fn wait_for_ref(srv: &Path, name: &str, want: &str) {
    let t0 = Instant::now();
    while repo::rev_parse(srv, name).as_deref() != Some(want) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{name} never became {want}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn packs_delivered(proxy: &FaultProxy) -> usize {
    proxy.wait_idle(Duration::from_secs(10));
    proxy
        .connections()
        .iter()
        .filter(|c| c.pack_bytes_client_to_server > 0)
        .count()
}

/// Case 1 and 2: the client side is cut (or cancelled) right after the
/// pack while a slow hook runs. The read finds the old value twice; the
/// push is never sent again, ends `unknown` with `may_have_applied: true`,
/// and the server has the commit once the hook ends.
#[test]
fn a_push_cut_right_after_its_pack_while_a_hook_runs_is_never_pushed_again() {
    for how in ["cut", "cancel"] {
        let w = World::new();
        let srv = w.small("s.git");
        let old = repo::rev_parse(&srv, "refs/heads/main").expect("main");
        let updates_before = repo::reflog(&srv, "refs/heads/main").len();
        let hook = HeldHook::install(&srv, w.dir.path());
        let local = local_clone(&srv, &w.path("local.git"));
        let tip = repo::commit_on(&local, "main", "x");
        let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
        proxy.set_fault(Fault::StallBeforeReport, 1);
        let cancel = sluice_policy::CancelFlag::new();
        let opts = quick(30_000, 20_000, 3).cancel(&cancel);
        let url = proxy.url("s.git");
        let pusher = std::thread::spawn({
            let (local, tip) = (local.clone(), tip.clone());
            move || push(&url, update(Some(&tip), "refs/heads/main"), &local, &opts)
        });
        hook.wait_started();
        match how {
            "cut" => assert_eq!(proxy.cut_clients(), 1),
            _ => cancel.cancel(),
        }
        let out = pusher.join().expect("push thread");
        assert_eq!(out.kind, OutcomeKind::Unknown, "{how}: {:?}", out.attempts);
        assert_eq!(out.may_have_applied, Some(true), "{how}");
        assert_eq!(out.attempts.len(), 1, "{how}: {:?}", out.attempts);
        assert_eq!(out.attempts[0].phase, "pack-sent", "{how}");
        assert_eq!(out.attempts[0].class, Some(Class::Unknown), "{how}");
        let rec = out.reconciled.as_ref().expect("settled by reading");
        assert_eq!(rec.verdict, Some(Verdict::NotLanded), "{how}");
        assert_eq!(rec.observed["refs/heads/main"], old, "{how}");
        if how == "cancel" {
            assert_eq!(out.stopped, Some(Stopped::Cancelled));
        }
        let r = &out.value.as_ref().expect("per-ref results").refs[0];
        assert_eq!(r.status, RefStatus::Unknown, "{how}: {r:?}");
        assert_eq!(r.verdict, Some(Verdict::NotLanded), "{how}");
        assert_eq!(r.old.map(|o| o.to_string()), Some(old.clone()));
        assert_eq!(r.new.map(|o| o.to_string()), Some(tip.clone()));
        // The server finishes what it received: the commit lands, once.
        hook.release();
        wait_for_ref(&srv, "refs/heads/main", &tip);
        assert_eq!(packs_delivered(&proxy), 1, "{how}: one pack, never two");
        assert_eq!(
            repo::reflog(&srv, "refs/heads/main").len(),
            updates_before + 1,
            "{how}: applied once"
        );
    }
}

/// Case 3: local trouble is `local-error`, never the remote's answer.
#[test]
fn a_push_whose_objects_cannot_be_read_here_is_a_local_error() {
    let w = World::new();
    let srv = w.small("s.git");
    let before = repo::rev_parse(&srv, "refs/heads/main");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    // Remove the new commit's tree from the local store: counting fails here.
    let tree = repo::git(&local, &["rev-parse", &format!("{tip}^{{tree}}")]);
    let tree = tree.trim();
    let loose = local.join("objects").join(&tree[..2]).join(&tree[2..]);
    std::fs::remove_file(&loose).expect("the new tree is loose");
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].class, Some(Class::Local));
    let e = out.error.as_ref().expect("error");
    assert!(
        matches!(e.source_as::<GitError>(), Some(GitError::Local { .. })),
        "{e:?}"
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), before);
}

/// Case 4: a refspec naming a ref the remote does not have is answered in
/// one attempt, as git's "couldn't find remote ref".
#[test]
fn a_fetch_of_a_ref_the_remote_does_not_have_is_answered_in_one_attempt() {
    let w = World::new();
    w.small("s.git");
    let local = empty_repo(&w.path("local.git"));
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let out = client()
        .fetch(
            &proxy.url("s.git"),
            &["refs/heads/nope:refs/remotes/origin/nope".to_string()],
            &local,
            &quick(20_000, 5_000, 4),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].phase, "advertised");
    let e = out.error.as_ref().expect("error");
    assert_eq!(e.cause, "couldn't find remote ref refs/heads/nope");
    assert!(matches!(
        e.source_as::<GitError>(),
        Some(GitError::NotAdvertised { .. })
    ));
    assert_eq!(packs_delivered(&proxy), 0);
    assert_eq!(proxy.connections().len(), 1);
}

/// Case 4: a 401 with no credential source is answered at once, with a
/// message saying how to give one.
#[test]
fn a_401_without_a_credential_source_is_answered_in_one_attempt() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = HttpBackend::start_with_auth(&w.dir.path().join("srv"), "u", "p").expect("http");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 5_000, 4),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].phase, "connect");
    let cause = &out.error.as_ref().expect("error").cause;
    assert!(cause.contains("401"), "{cause}");
    assert!(cause.contains("--token-command"), "{cause}");
    assert_eq!(out.may_have_applied, Some(false));
}

/// Case 5: buying a credential runs inside the budget: a token command
/// that hangs is killed at the deadline and recorded as an attempt of
/// phase `credential`; one that cannot start is a local error.
#[test]
fn a_hanging_token_command_ends_within_the_deadline() {
    let w = World::new();
    w.small("s.git");
    let http = HttpBackend::start_with_auth(&w.dir.path().join("srv"), "u", "p").expect("http");
    let mut opts = quick(2_000, 2_000, 3);
    opts = opts.credentials(std::sync::Arc::new(CommandSource::new("sleep 8; echo tok")));
    let t0 = Instant::now();
    let out = client()
        .ls_refs(&http.url("s.git"), &[], &opts)
        .expect("valid input");
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].phase, "credential");
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));

    opts = opts.credentials(std::sync::Arc::new(CommandSource::new(
        "/nonexistent/token-command",
    )));
    let out = client()
        .ls_refs(&http.url("s.git"), &[], &opts)
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].phase, "credential");
}

/// Case 6: a hook's words reach `remote_messages`, in order, and the
/// rejection is typed with the remote's words beside it.
#[test]
fn a_hooks_words_are_kept_in_remote_messages() {
    let w = World::new();
    let srv = w.small("s.git");
    repo::install_hook(
        &srv,
        "pre-receive",
        "#!/bin/sh\necho 'protected is frozen by policy 42' >&2\necho 'ask in #landing' >&2\nexit 1\n",
    )
    .expect("hook");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(
        out.remote_messages,
        vec![
            "protected is frozen by policy 42".to_string(),
            "ask in #landing".to_string()
        ]
    );
    let r = &out.value.as_ref().expect("report").refs[0];
    assert_eq!(r.reason, Some(RejectReason::HookDeclined));
    assert_eq!(r.message.as_deref(), Some("pre-receive hook declined"));
}

/// A push whose report is lost is settled by reading for the ref it sent
/// only: a ref this client refused before sending its commands (a stale
/// lease) keeps its refusal, and one already up to date stays so, neither
/// with a verdict — what the attempt decided reaches the settling read and
/// the judge.
#[test]
fn a_settled_push_keeps_what_its_attempt_decided_before_sending() {
    let w = World::new();
    let srv = w.small("s.git");
    let old_main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    let dev = repo::rev_parse(&srv, "refs/heads/dev").expect("dev");
    let light = repo::rev_parse(&srv, "refs/tags/light").expect("light");
    assert_ne!(light, old_main, "the lease below is stale");
    let local = local_clone(&srv, &w.path("local.git"));
    let main = repo::commit_on(&local, "main", "m");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let out = push_with(
        &proxy.url("s.git"),
        &[
            update(Some(&main), "refs/heads/main"),
            update(Some(&dev), "refs/heads/dev"),
            sluice_git::RefUpdate::leased(oid(&main), "refs/tags/light", oid(&old_main)),
        ],
        &PushOptions::default(),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    // Settled as landed, the push is judged as an answered one: the ref
    // refused here is the cause, as this client's refusal.
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(true), "main landed");
    let typed = out
        .error
        .as_ref()
        .and_then(|e| e.source_as::<GitError>())
        .expect("a typed error");
    assert!(
        matches!(
            typed,
            GitError::Refused { name, reason: RejectReason::StaleInfo, .. }
                if name == "refs/tags/light"
        ),
        "{typed:?}"
    );
    assert_eq!(
        out.reconciled.as_ref().expect("settled").verdict,
        Some(Verdict::Landed)
    );
    let refs = &out.value.as_ref().expect("per-ref results").refs;
    let (m, d, l) = (&refs[0], &refs[1], &refs[2]);
    assert_eq!(
        (m.status, m.verdict, m.old),
        (RefStatus::Ok, Some(Verdict::Landed), Some(oid(&old_main))),
        "{m:?}"
    );
    assert_eq!((d.status, d.verdict), (RefStatus::Ok, None), "{d:?}");
    assert!(d.is_up_to_date(), "{d:?}");
    assert_eq!(
        (l.status, l.reason, l.verdict),
        (RefStatus::Rejected, Some(RejectReason::StaleInfo), None),
        "{l:?}"
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(main.as_str())
    );
    assert_eq!(repo::rev_parse(&srv, "refs/tags/light"), Some(light));
    assert_eq!(packs_delivered(&proxy), 1);
}

/// Case 7: a non-atomic push with one ref landed and one rejected gives
/// each ref its own status — read from the report, and, when the report is
/// lost, its own verdict from the settling read.
#[test]
fn a_non_atomic_push_gives_each_ref_its_own_status_and_verdict() {
    for lost_report in [false, true] {
        let w = World::new();
        let srv = w.small("s.git");
        let dev_before = repo::rev_parse(&srv, "refs/heads/dev").expect("dev");
        repo::install_hook(
            &srv,
            "update",
            "#!/bin/sh\nif [ \"$1\" = refs/heads/dev ]; then echo 'dev is frozen' >&2; exit 1; fi\nexit 0\n",
        )
        .expect("hook");
        let local = local_clone(&srv, &w.path("local.git"));
        let main = repo::commit_on(&local, "main", "m");
        let dev = repo::commit_on(&local, "dev", "d");
        let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
        if lost_report {
            proxy.set_fault(Fault::CutBeforeReport, 1);
        }
        let out = push_with(
            &proxy.url("s.git"),
            &[
                update(Some(&main), "refs/heads/main"),
                update(Some(&dev), "refs/heads/dev"),
            ],
            &PushOptions::default(),
            &local,
            &quick(20_000, 10_000, 3),
        );
        assert_eq!(out.may_have_applied, Some(true), "main landed");
        let refs = &out.value.as_ref().expect("per-ref results").refs;
        let (m, d) = (&refs[0], &refs[1]);
        assert_eq!(m.status, RefStatus::Ok, "{m:?}");
        if lost_report {
            assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
            assert_eq!(out.attempts.len(), 1);
            assert_eq!(m.verdict, Some(Verdict::Landed));
            assert_eq!(d.status, RefStatus::Unknown, "{d:?}");
            assert_eq!(d.verdict, Some(Verdict::NotLanded));
            assert_eq!(
                out.reconciled.as_ref().expect("settled").verdict,
                Some(Verdict::NotLanded)
            );
        } else {
            assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
            assert_eq!(m.verdict, None);
            assert_eq!(d.status, RefStatus::Rejected, "{d:?}");
            assert_eq!(d.reason, Some(RejectReason::HookDeclined));
            assert_eq!(d.verdict, None);
            assert!(out
                .remote_messages
                .iter()
                .any(|l| l.contains("dev is frozen")));
        }
        assert_eq!(
            repo::rev_parse(&srv, "refs/heads/main").as_deref(),
            Some(main.as_str())
        );
        assert_eq!(
            repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
            Some(dev_before.as_str())
        );
        assert_eq!(packs_delivered(&proxy), 1);
    }
}
