//! Push against a real `git daemon --enable=receive-pack`, checked on the
//! server with the git CLI.

mod common;

use common::*;
use sluice_git::{Lease, PushOptions, RefStatus};
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

#[test]
fn a_new_branch_is_created_and_the_server_is_fsck_clean() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "feature", "new work");
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[update(Some(&tip), "refs/heads/feature")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{:?} {:?}",
        out.error,
        out.attempts
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/feature").as_deref(),
        Some(tip.as_str())
    );
    repo::fsck(&srv).expect("fsck clean");
    let report = out.value.expect("report");
    assert_eq!(report.refs[0].status, RefStatus::Ok);
    assert_eq!(
        out.attempts.last().map(|a| a.phase.as_str()),
        Some("reported")
    );
    assert_eq!(out.may_have_applied, Some(true));
}

#[test]
fn a_fast_forward_lands_and_a_delete_removes_the_ref() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "next");
    let c = client();
    let out = c
        .push(
            &w.daemon.url("s.git"),
            &[
                update(Some(&tip), "refs/heads/main"),
                update(None, "refs/heads/dev"),
            ],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), None);
    repo::fsck(&srv).expect("fsck clean");
}

#[test]
fn a_deletion_only_push_sends_no_pack() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[update(None, "refs/heads/dev")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert!(out.value.expect("report").pack.is_none());
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), None);
}

#[test]
fn create_with_an_absent_lease_lands_once_and_is_stale_the_second_time() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "topic", "t");
    let mut u = update(Some(&tip), "refs/heads/topic");
    u.expect = Lease::Absent;
    let c = client();
    let url = w.daemon.url("s.git");
    let first = c
        .push(
            &url,
            std::slice::from_ref(&u),
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    let other = repo::commit_on(&local, "topic2", "u");
    u.src = Some(oid(&other));
    let second = c
        .push(
            &url,
            &[u],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(second.kind, OutcomeKind::Answered);
    assert_eq!(second.attempts.len(), 1);
    let r = &second.value.expect("report").refs[0];
    assert_eq!(r.reason.as_deref(), Some("stale info"));
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/topic").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn an_atomic_two_ref_push_lands_both() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let a = repo::commit_on(&local, "main", "a");
    let b = repo::commit_on(&local, "dev", "b");
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[
                update(Some(&a), "refs/heads/main"),
                update(Some(&b), "refs/heads/dev"),
            ],
            &PushOptions {
                atomic: true,
                push_options: vec![],
            },
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(a.as_str())
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(b.as_str())
    );
}

#[test]
fn an_atomic_push_with_one_stale_ref_changes_nothing() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let a = repo::commit_on(&local, "main", "a");
    let b = repo::commit_on(&local, "dev", "b");
    let main_before = repo::rev_parse(&srv, "refs/heads/main");
    let mut stale = update(Some(&b), "refs/heads/dev");
    stale.expect = Lease::Oid(oid(&a));
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[update(Some(&a), "refs/heads/main"), stale],
            &PushOptions {
                atomic: true,
                push_options: vec![],
            },
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), main_before);
}

#[test]
fn a_non_fast_forward_is_refused_locally_without_a_pack_and_lands_with_force() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    // dev forked from main: pushing dev's parent-less line onto main is not a fast-forward.
    let dev = repo::rev_parse(&local, "refs/heads/dev").expect("dev");
    let side = repo::commit_on(&local, "refs/heads/side", "side");
    let _ = dev;
    let before = repo::rev_parse(&srv, "refs/heads/dev");
    let c = client();
    let url = w.daemon.url("s.git");
    let out = c
        .push(
            &url,
            &[update(Some(&side), "refs/heads/dev")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    // side was made on top of HEAD (main), which is not a descendant of dev.
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.value);
    assert_eq!(
        out.value.as_ref().expect("report").refs[0]
            .reason
            .as_deref(),
        Some("non-fast-forward")
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), before);
    let mut forced = update(Some(&side), "refs/heads/dev");
    forced.force = true;
    let out = c
        .push(
            &url,
            &[forced.clone()],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(side.as_str())
    );
    // With receive.denyNonFastForwards the server's own words come back.
    repo::set_config(&srv, "receive.denyNonFastForwards", "true");
    forced.src = Some(oid(&before.clone().expect("dev")));
    let out = c
        .push(
            &url,
            &[forced],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    let reason = out.value.expect("report").refs[0]
        .reason
        .clone()
        .unwrap_or_default();
    assert!(reason.contains("non-fast-forward"), "{reason}");
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(side.as_str())
    );
}

#[test]
fn a_stale_lease_is_answered_without_a_second_connection() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let old = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    let theirs = repo::commit_on(&srv, "main", "somebody else");
    let ours = repo::commit_on(&local, "main", "ours");
    let mut u = update(Some(&ours), "refs/heads/main");
    u.expect = Lease::Oid(oid(&old));
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[u],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(theirs.as_str())
    );
}

#[test]
fn a_declining_pre_receive_hook_is_answered_with_its_words() {
    let w = World::new();
    let srv = w.small("s.git");
    repo::install_hook(
        &srv,
        "pre-receive",
        "#!/bin/sh\necho 'policy says no' >&2\nexit 1\n",
    )
    .expect("hook");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[update(Some(&tip), "refs/heads/main")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.attempts.len(), 1);
    let reason = out.value.expect("report").refs[0]
        .reason
        .clone()
        .unwrap_or_default();
    assert!(reason.contains("hook declined"), "{reason}");
}

#[test]
fn a_thousand_commit_history_into_an_empty_repo_equals_git_push() {
    let w = World::new();
    let local = sluice_testkit::RepoBuilder::new()
        .branch("main", 1000)
        .build(&w.path("big.git"))
        .expect("builds");
    repo::init_bare(&w.srv("ours.git")).expect("init");
    repo::init_bare(&w.srv("theirs.git")).expect("init");
    let tip = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let out = client()
        .push(
            &w.daemon.url("ours.git"),
            &[update(Some(&tip), "refs/heads/main")],
            &PushOptions::default(),
            &open(&local),
            &quick(60_000, 30_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    repo::git(
        &local,
        &[
            "push",
            "-q",
            &w.srv("theirs.git").display().to_string(),
            "refs/heads/main:refs/heads/main",
        ],
    );
    assert_eq!(
        repo::refs(&w.srv("ours.git")),
        repo::refs(&w.srv("theirs.git"))
    );
    let objects = |p: &std::path::Path| {
        let mut v: Vec<String> = repo::git(p, &["rev-list", "--objects", "--all"])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(objects(&w.srv("ours.git")), objects(&w.srv("theirs.git")));
    repo::fsck(&w.srv("ours.git")).expect("fsck clean");
}

#[test]
fn a_branch_at_an_object_the_remote_has_goes_with_an_empty_pack() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let main = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let out = client()
        .push(
            &w.daemon.url("s.git"),
            &[update(Some(&main), "refs/heads/copy")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(out.value.expect("report").pack.expect("a pack").objects, 0);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/copy").as_deref(),
        Some(main.as_str())
    );
}
