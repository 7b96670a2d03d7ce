//! The integrator's example (`examples/integrator.rs`) run for real: a
//! `git daemon` with a fault proxy in front, the testkit's fake forge for
//! the CI read, a SQLite ledger, and a bare repository kept open across
//! rounds. Each test drives the loop down one of its paths.

use std::path::Path;

use sluice_forge::RepoRef;
use sluice_git::gix;
use sluice_testkit::fake_forge::FakeForge;
use sluice_testkit::{repo, Fault};

use crate::common::World;
use crate::integrator::{clients, land, Job, JobEnd};

const REPO: &str = "octo/small";

/// The served repository with a `feature` branch one commit ahead of
/// `main`; the forge's CI of that commit set to `state`. Returns the
/// feature's tip.
fn scene(w: &World, forge: &FakeForge, state: &str) -> String {
    let srv = w.server();
    repo::git(&srv, &["branch", "candidate", "refs/heads/main"]);
    let tip = repo::commit_on(&srv, "candidate", "the change to land");
    forge.set_commit_statuses(REPO, &tip, &[("build", state)]);
    tip
}

fn job(url: &str) -> Job<'_> {
    Job {
        name: "job-7",
        url,
        repo: RepoRef::new("octo", "small"),
        candidate: "candidate",
        target: "main",
    }
}

fn parents(srv: &Path, commit: &str) -> Vec<String> {
    repo::git(srv, &["rev-list", "--parents", "-n1", commit])
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn a_green_candidate_lands_as_a_merge_commit_under_a_lease() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let main_before = repo::rev_parse(&w.server(), "refs/heads/main").expect("main");
    let feature = scene(&w, &forge, "success");
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    let url = w.url();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    let JobEnd::Landed { commit, rounds } = out else {
        panic!("{out:?}")
    };
    assert_eq!(rounds, 1);
    let main = repo::rev_parse(&w.server(), "refs/heads/main").expect("main");
    assert_eq!(main, commit.to_string());
    assert_eq!(parents(&w.server(), &main), [main_before, feature]);
    repo::fsck(&w.server()).expect("the served repository is whole");
}

#[test]
fn a_red_candidate_is_not_pushed() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let main_before = repo::rev_parse(&w.server(), "refs/heads/main");
    scene(&w, &forge, "failure");
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    let url = w.proxied();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    assert_eq!(out, JobEnd::CiNotGreen("failure".into()));
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), main_before);
    assert_eq!(w.receive_packs(), 0, "a push was attempted");
}

#[test]
fn a_lost_report_is_settled_by_reading_and_the_push_is_sent_once() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    scene(&w, &forge, "success");
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    w.proxy.set_fault(Fault::CutBeforeReport, 1);
    let url = w.proxied();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    let JobEnd::Landed { commit, rounds } = out else {
        panic!("{out:?}")
    };
    assert_eq!(rounds, 1);
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main"),
        Some(commit.to_string())
    );
    assert_eq!(w.receive_packs(), 1, "the push was sent again");
}

#[test]
fn a_target_moved_under_the_lease_is_answered_read_again_and_lands_on_the_new_tip() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let first = scene(&w, &forge, "success");
    let srv = w.server();
    let feature = repo::commit_on(&srv, "candidate", "the second change");
    forge.set_commit_statuses(REPO, &feature, &[("build", "success")]);
    // Somebody else lands the candidate's first commit while the first
    // push is received: the pre-receive hook moves main once (outside the
    // quarantine git keeps a hook in), so round 1's lease is stale.
    repo::install_hook(
        &srv,
        "pre-receive",
        &format!(
            "#!/bin/sh\nif [ ! -e moved ]; then touch moved; env -u GIT_QUARANTINE_PATH -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES git update-ref refs/heads/main {first}; fi\nexit 0\n"
        ),
    )
    .expect("hook");
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    let url = w.url();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    let JobEnd::Landed { commit, rounds } = out else {
        panic!("{out:?}\n{}", w.daemon.stderr())
    };
    assert_eq!(rounds, 2, "round 1's push was not refused");
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    assert_eq!(main, commit.to_string());
    assert_eq!(
        parents(&srv, &main),
        [first, feature],
        "not merged on the new tip"
    );
}

/// The served repository with a `candidate` branch that writes
/// `candidate_file` (its CI green) and a `main` that moved on after it
/// branched by writing `target_file`. Returns the candidate's and the
/// target's tips.
fn moved_target_scene(
    w: &World,
    forge: &FakeForge,
    candidate_file: (&str, &[u8]),
    target_file: (&str, &[u8]),
) -> (String, String) {
    let srv = w.server();
    repo::git(&srv, &["branch", "candidate", "refs/heads/main"]);
    let feature = repo::commit_file(&srv, "candidate", candidate_file.0, candidate_file.1);
    forge.set_commit_statuses(REPO, &feature, &[("build", "success")]);
    let moved = repo::commit_file(&srv, "main", target_file.0, target_file.1);
    (feature, moved)
}

#[test]
fn a_candidate_behind_a_moved_target_lands_as_a_three_way_merge_of_both_changes() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let srv = w.server();
    // The target moves on after the candidate branched: the candidate no
    // longer contains it.
    let (feature, moved) = moved_target_scene(
        &w,
        &forge,
        ("feature.txt", b"the feature\n"),
        ("other.txt", b"somebody else's change\n"),
    );
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    let url = w.url();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    let JobEnd::Landed { commit, rounds } = out else {
        panic!("{out:?}")
    };
    assert_eq!(rounds, 1);
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    assert_eq!(main, commit.to_string());
    assert_eq!(parents(&srv, &main), [moved, feature]);
    // The merged tree holds both sides' files.
    assert_eq!(
        repo::git(&srv, &["show", &format!("{main}:feature.txt")]),
        "the feature"
    );
    assert_eq!(
        repo::git(&srv, &["show", &format!("{main}:other.txt")]),
        "somebody else's change"
    );
    repo::fsck(&srv).expect("the served repository is whole");
}

#[test]
fn a_candidate_that_conflicts_with_the_target_needs_a_rebase_and_is_not_pushed() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let (_, moved) = moved_target_scene(
        &w,
        &forge,
        ("shared.txt", b"the candidate's line\n"),
        ("shared.txt", b"the target's line\n"),
    );
    let (git, forge_client) = clients(&forge.url(), &w.path("ops.db")).expect("clients");
    let kept = gix::open(w.empty("kept.git")).expect("open");
    let url = w.proxied();

    let out = land(&git, &forge_client, &job(&url), &kept).expect("runs");

    assert_eq!(out, JobEnd::NeedsRebase);
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(moved));
    assert_eq!(w.receive_packs(), 0, "a push was attempted");
}
