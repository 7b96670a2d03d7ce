//! ssh:// through a real OpenSSH `sshd` on loopback (keys made by the
//! fixture). One test function: `GIT_SSH_COMMAND` is process-wide, so it is
//! set once, before any other thread of this binary runs.

mod common;

use common::*;
use sluice_policy::OutcomeKind;
use sluice_testkit::{repo, Sshd};

#[test]
fn ssh_lists_fetches_pushes_and_a_missing_repository_is_answered_once() {
    let sshd = Sshd::start().expect("sshd starts (scripts/test.sh installs openssh-server)");
    std::env::set_var("GIT_SSH_COMMAND", sshd.git_ssh_command());
    let w = World::new();
    let srv = w.small("s.git");

    let out = client()
        .ls_refs(&sshd.url(&srv), &[], &quick(20_000, 10_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert!(out
        .value
        .expect("refs")
        .iter()
        .any(|r| r.name == "refs/heads/main"));

    let dst = w.path("dst.git");
    let r = empty_repo(&dst);
    let out = client()
        .fetch(
            &sshd.url(&srv),
            &["+refs/heads/*:refs/heads/*".into()],
            &r,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    repo::fsck(&dst).expect("fsck clean");

    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "over ssh");
    let out = push(
        &sshd.url(&srv),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );

    let missing = w.path("absent.git");
    let log_before = sshd.log().matches("Accepted publickey").count();
    let out = client()
        .ls_refs(&sshd.url(&missing), &[], &quick(20_000, 10_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.contains("does not appear to be a git repository"),
        "{cause}"
    );
    // sshd logs the login before it runs the command; wait on that line
    // (not on a guessed pause), then check there was exactly one.
    let t0 = std::time::Instant::now();
    while sshd.log().matches("Accepted publickey").count() <= log_before {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "sshd never logged the login: {}",
            sshd.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        sshd.log().matches("Accepted publickey").count(),
        log_before + 1,
        "{}",
        sshd.log()
    );
}
