//! `RefUpdate`'s constructors against a real `git daemon`: each does what
//! its name says and nothing more (a lease implies force; an unleased
//! force exists only as `RefUpdate::force`).

use crate::common;

use common::*;
use sluice_git::{Lease, RefStatus, RefUpdate, RejectReason};
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

fn push_one(
    w: &World,
    local: &std::path::Path,
    u: RefUpdate,
) -> sluice_policy::Outcome<sluice_git::PushReport> {
    push(&w.daemon.url("s.git"), u, local, &quick(20_000, 10_000, 3))
}

fn rejected(out: &sluice_policy::Outcome<sluice_git::PushReport>) -> Option<RejectReason> {
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.error);
    let r = &out.value.as_ref().expect("report").refs[0];
    assert_eq!(r.status, RefStatus::Rejected);
    r.reason
}

#[test]
fn the_constructors_say_what_they_may_do() {
    let a = oid("1111111111111111111111111111111111111111");
    let b = oid("2222222222222222222222222222222222222222");
    let ff = RefUpdate::fast_forward(a, "refs/heads/main");
    assert_eq!(
        (ff.src(), ff.lease(), ff.is_forced()),
        (Some(a), &Lease::Any, false)
    );
    let leased = RefUpdate::leased(a, "refs/heads/main", b);
    assert_eq!((leased.lease(), leased.is_forced()), (&Lease::Oid(b), true));
    let create = RefUpdate::create(a, "refs/heads/new");
    assert_eq!((create.lease(), create.is_forced()), (&Lease::Absent, true));
    let delete = RefUpdate::delete("refs/heads/old", b);
    assert_eq!((delete.src(), delete.lease()), (None, &Lease::Oid(b)));
    let force = RefUpdate::force(Some(a), "refs/heads/main");
    assert_eq!((force.lease(), force.is_forced()), (&Lease::Any, true));
    // A lease given later makes the update leased, whatever it was.
    let later = RefUpdate::fast_forward(a, "refs/heads/main").with_lease(Lease::Oid(b));
    assert_eq!(later, RefUpdate::leased(a, "refs/heads/main", b));
    assert_eq!(later.dst(), "refs/heads/main");
}

#[test]
fn fast_forward_refuses_a_rewrite_and_force_clobbers_it() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    // A commit on main's parent: not a descendant of main.
    repo::git(&local, &["branch", "side", "refs/heads/main~1"]);
    let side = repo::commit_on(&local, "side", "beside main");
    let out = push_one(
        &w,
        &local,
        RefUpdate::fast_forward(oid(&side), "refs/heads/main"),
    );
    assert_eq!(rejected(&out), Some(RejectReason::NonFastForward));
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), Some(main));
    let out = push_one(
        &w,
        &local,
        RefUpdate::force(Some(oid(&side)), "refs/heads/main"),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), Some(side));
}

#[test]
fn create_and_delete_refuse_what_they_did_not_expect() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    let dev = repo::rev_parse(&srv, "refs/heads/dev").expect("dev");
    // dev exists: creating it is refused, and it is left as it was.
    let out = push_one(&w, &local, RefUpdate::create(oid(&main), "refs/heads/dev"));
    assert_eq!(rejected(&out), Some(RejectReason::StaleInfo));
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(dev.as_str())
    );
    // A delete leased on main's value does not delete dev.
    let out = push_one(&w, &local, RefUpdate::delete("refs/heads/dev", oid(&main)));
    assert_eq!(rejected(&out), Some(RejectReason::StaleInfo));
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(dev.as_str())
    );
    // Leased on what it holds, it does.
    let out = push_one(&w, &local, RefUpdate::delete("refs/heads/dev", oid(&dev)));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), None);
    // And a create of a ref that is absent lands.
    let out = push_one(
        &w,
        &local,
        RefUpdate::create(oid(&main), "refs/heads/fresh"),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(repo::rev_parse(&srv, "refs/heads/fresh"), Some(main));
}

/// Options kept as a template: one call given a flag and cancelled, the
/// next call from the same template runs. (Before, every clone of a
/// template shared one flag that could not be lowered again, so every
/// later call ended `cancelled` with no attempt.)
#[test]
fn a_cancelled_call_leaves_the_template_it_came_from_usable() {
    let w = World::new();
    w.small("s.git");
    let url = w.daemon.url("s.git");
    let template = quick(20_000, 10_000, 3);
    let flag = sluice_policy::CancelFlag::new();
    flag.cancel();
    let c = client();
    let cancelled = c
        .ls_refs(&url, &[], &template.clone().cancel(&flag))
        .expect("valid input");
    assert_eq!(
        cancelled.kind,
        OutcomeKind::Unknown,
        "{:?}",
        cancelled.error
    );
    assert_eq!(cancelled.stopped, Some(sluice_policy::Stopped::Cancelled));
    assert!(cancelled.attempts.is_empty());
    let next = c.ls_refs(&url, &[], &template).expect("valid input");
    assert_eq!(next.kind, OutcomeKind::Succeeded, "{:?}", next.error);
}
