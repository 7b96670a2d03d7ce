//! The typed error on every path: whatever way a git call ends with an
//! error, `outcome.error.source_as::<GitError>()` answers, and says what
//! happened — a ref the remote rejected (a hook, a non-fast-forward, an
//! unpack failure), a ref this client refused (a stale lease, git's rules
//! after a fetch), a push settled by reading, a cancelled call, a local
//! failure, a remote that answered `ERR` — each against a real server.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use sluice_git::{GitError, GitPhase, RefUpdate, RejectReason};
use sluice_policy::{AttemptError, Class, OutcomeKind, Stopped, Verdict};
use sluice_testkit::repo;
use sluice_testkit::scripted::{Script, ScriptedServer};
use sluice_testkit::{Fault, FaultProxy};

/// The outcome's error and its typed source, which must be there.
fn typed<T: std::fmt::Debug>(out: &sluice_policy::Outcome<T>) -> (&AttemptError, &GitError) {
    let e = out
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("an error: {out:?}"));
    let typed = e
        .source_as::<GitError>()
        .unwrap_or_else(|| panic!("no GitError as the source of {e:?}"));
    (e, typed)
}

/// A push of a new commit on `main` from a clone of `s.git`, as `update`.
fn push_main(w: &World, url: &str, u: RefUpdate) -> sluice_policy::Outcome<sluice_git::PushReport> {
    push(url, u, &w.path("local.git"), &quick(20_000, 10_000, 3))
}

#[test]
fn a_ref_a_hook_declines_is_a_typed_rejection_of_the_remote() {
    let w = World::new();
    let srv = w.small("s.git");
    repo::install_hook(
        &srv,
        "pre-receive",
        "#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n",
    )
    .expect("hook");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = push_main(
        &w,
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    let (e, typed) = typed(&out);
    match typed {
        GitError::Rejected {
            phase,
            name,
            reason,
            words,
        } => {
            assert_eq!(*phase, GitPhase::Reported);
            assert_eq!(name, "refs/heads/main");
            assert_eq!(*reason, RejectReason::HookDeclined, "{words}");
        }
        other => panic!("not the remote's rejection: {other:?}"),
    }
    assert_eq!(typed.class(), Class::Answered);
    assert_eq!(e.cause, typed.to_string());
    assert_eq!(e.phase, "reported");
}

#[test]
fn a_non_fast_forward_the_remote_refuses_is_a_typed_rejection_of_the_remote() {
    let w = World::new();
    let srv = w.small("s.git");
    repo::set_config(&srv, "receive.denyNonFastForwards", "true");
    let local = local_clone(&srv, &w.path("local.git"));
    // A commit beside main, pushed with force: this client sends it, the
    // remote refuses it.
    repo::git(&local, &["branch", "side", "main~1"]);
    let tip = repo::commit_on(&local, "side", "beside main");
    let u = RefUpdate::force(Some(oid(&tip)), "refs/heads/main");
    let out = push_main(&w, &w.daemon.url("s.git"), u);
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    match typed(&out).1 {
        GitError::Rejected {
            phase,
            name,
            reason,
            ..
        } => {
            assert_eq!(*phase, GitPhase::Reported);
            assert_eq!(name, "refs/heads/main");
            assert_eq!(*reason, RejectReason::NonFastForward);
        }
        other => panic!("not the remote's rejection: {other:?}"),
    }
}

#[test]
fn a_pack_the_remote_cannot_unpack_is_a_typed_rejection_of_the_remote() {
    let w = World::new();
    let srv = w.small("s.git");
    // Any pack is too large: index-pack / unpack-objects stop, and the
    // report says `unpack <error>`.
    repo::set_config(&srv, "receive.maxInputSize", "1");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = push_main(
        &w,
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    match typed(&out).1 {
        GitError::Rejected {
            phase, name, words, ..
        } => {
            assert_eq!(*phase, GitPhase::Reported);
            assert_eq!(name, "refs/heads/main");
            assert!(words.contains("unpack"), "{words}");
        }
        other => panic!("not the remote's rejection: {other:?}"),
    }
}

#[test]
fn a_stale_lease_refused_here_is_a_typed_refusal_at_the_advertisement() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let dev = repo::rev_parse(&srv, "refs/heads/dev").expect("dev");
    let tip = repo::commit_on(&local, "main", "x");
    let u = RefUpdate::leased(oid(&tip), "refs/heads/main", oid(&dev));
    let out = push_main(&w, &w.daemon.url("s.git"), u);
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    let (e, typed) = typed(&out);
    match typed {
        GitError::Refused {
            phase,
            name,
            reason,
            ..
        } => {
            assert_eq!(*phase, GitPhase::Advertised);
            assert_eq!(name, "refs/heads/main");
            assert_eq!(*reason, RejectReason::StaleInfo);
        }
        other => panic!("not this client's refusal: {other:?}"),
    }
    // The error, its source and the attempt agree on how far it got.
    assert_eq!(e.phase, "advertised");
    assert_eq!(out.attempts.last().expect("an attempt").phase, "advertised");
    assert_eq!(out.may_have_applied, Some(false));
}

#[test]
fn a_ref_a_fetch_may_not_move_is_a_typed_refusal_after_the_fetch() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let dev = repo::rev_parse(&local, "refs/heads/dev").expect("dev");
    // dev is three commits past main: main into dev is no fast-forward.
    let out = client()
        .fetch(
            &w.daemon.url("s.git"),
            &["refs/heads/main:refs/heads/dev".to_string()],
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    match typed(&out).1 {
        GitError::Refused {
            phase,
            name,
            reason,
            detail,
        } => {
            assert_eq!(*phase, GitPhase::Done);
            assert_eq!(name, "refs/heads/dev");
            assert_eq!(*reason, RejectReason::NonFastForward, "{detail}");
        }
        other => panic!("not this client's refusal: {other:?}"),
    }
    assert_eq!(repo::rev_parse(&local, "refs/heads/dev"), Some(dev));
}

/// The push lands, a post-receive hook moves the ref on, and the report
/// never reaches the client: the settling read finds the ref moved. The
/// settled error keeps the attempt's typed error.
#[test]
fn a_push_settled_by_reading_keeps_the_typed_error_of_its_attempt() {
    let w = World::new();
    let srv = w.small("s.git");
    let dev = repo::rev_parse(&srv, "refs/heads/dev").expect("dev");
    repo::install_hook(
        &srv,
        "post-receive",
        &format!("#!/bin/sh\ngit update-ref refs/heads/main {dev}\n"),
    )
    .expect("hook");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let out = push_main(
        &w,
        &proxy.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
    );
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(
        out.reconciled.as_ref().expect("settled").verdict,
        Some(Verdict::Moved)
    );
    let (e, typed) = typed(&out);
    assert_eq!(e.class, Class::Unknown);
    assert_eq!(typed.phase(), GitPhase::PackSent, "{typed:?}");
    assert!(
        matches!(
            typed,
            GitError::Transport {
                request_complete: true,
                ..
            }
        ),
        "{typed:?}"
    );
}

#[test]
fn a_call_cancelled_during_its_attempt_carries_the_typed_cancel() {
    let server = ScriptedServer::start(
        Script::EndlessAdvert {
            every: Duration::from_millis(2),
            max_bytes: 50 << 20,
        },
        vec![],
    )
    .expect("scripted server");
    let cancel = sluice_policy::CancelFlag::new();
    let opts = quick(60_000, 30_000, 3).cancel(&cancel);
    let url = server.url("r.git");
    let lister = std::thread::spawn(move || client().ls_refs(&url, &[], &opts).expect("valid"));
    // Cancel once the server has the request (an event, not a delay).
    let t0 = Instant::now();
    while !server.connections().iter().any(|c| c.service.is_some()) {
        assert!(t0.elapsed() < Duration::from_secs(20), "never connected");
        std::thread::sleep(Duration::from_millis(5));
    }
    cancel.cancel();
    let out = lister.join().expect("ls-refs thread");
    assert_eq!(out.stopped, Some(Stopped::Cancelled), "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert!(
        matches!(typed(&out).1, GitError::Cancelled { .. }),
        "{:?}",
        out.error
    );
}

#[test]
fn a_local_failure_carries_the_typed_local_error() {
    let w = World::new();
    w.small("s.git");
    let local = empty_repo(&w.path("gone.git"));
    // The handle outlives its repository: the attempt's view cannot open.
    std::fs::remove_dir_all(w.path("gone.git")).expect("remove");
    let out = client()
        .fetch(
            &w.daemon.url("s.git"),
            &["refs/heads/*:refs/remotes/origin/*".to_string()],
            &local,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    match typed(&out).1 {
        GitError::Local { phase, cause } => {
            assert_eq!(*phase, GitPhase::Connect);
            assert!(
                matches!(&**cause, sluice_git::LocalCause::View { .. }),
                "{cause:?}"
            );
            assert!(
                cause.to_string().contains("reopening the repository"),
                "{cause}"
            );
        }
        other => panic!("not a local error: {other:?}"),
    }
}

#[test]
fn a_repository_the_daemon_does_not_serve_is_the_remotes_typed_answer() {
    let w = World::new();
    let url = w.daemon.url("nope.git");
    let opts = quick(20_000, 10_000, 3);
    let out = client().ls_refs(&url, &[], &opts).expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert!(
        matches!(typed(&out).1, GitError::Remote { .. }),
        "{:?}",
        out.error
    );
    let local = empty_repo(&w.path("local.git"));
    let out = client()
        .fetch(
            &url,
            &["refs/heads/*:refs/remotes/origin/*".to_string()],
            &local,
            &opts,
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert!(
        matches!(typed(&out).1, GitError::Remote { .. }),
        "{:?}",
        out.error
    );
}

#[test]
fn an_err_packet_is_the_remotes_typed_answer_to_a_push() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let server = ScriptedServer::start(
        Script::Err {
            text: "access denied".into(),
        },
        vec![],
    )
    .expect("scripted server");
    let out = push_main(
        &w,
        &server.url("r.git"),
        update(Some(&tip), "refs/heads/main"),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    match typed(&out).1 {
        GitError::Remote { words, .. } => assert_eq!(words, "access denied"),
        other => panic!("not the remote's words: {other:?}"),
    }
}
