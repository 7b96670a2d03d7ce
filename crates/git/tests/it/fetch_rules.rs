//! Fetch updates local refs as `git fetch` does, side by side with git on
//! the same starting states: the same refs end up where git leaves them,
//! and each ref's status says what happened.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use sluice_git::FetchStatus;
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

/// Every ref of `repo` with its value (`git for-each-ref`).
fn refs(repo: &Path) -> String {
    repo::git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// Two identical copies of `from` (one for git, one for sluice).
fn twins(from: &Path, dir: &Path, bare: bool) -> (PathBuf, PathBuf) {
    let make = |name: &str| {
        let to = dir.join(name);
        let mut args = vec!["clone", "-q"];
        if bare {
            args.push("--bare");
        }
        let (f, t) = (from.display().to_string(), to.display().to_string());
        args.push(&f);
        args.push(&t);
        repo::git(dir, &args);
        // Remote-tracking refs as a clone of a bare repository has them.
        repo::git(
            &to,
            &["update-ref", "refs/remotes/origin/main", "refs/heads/main"],
        );
        to
    };
    (make("by-git"), make("by-sluice"))
}

/// Rewrite the server's `main` to a commit that is not a descendant of it.
fn rewrite_main(srv: &Path) -> String {
    repo::git(srv, &["update-ref", "refs/heads/main", "refs/heads/main~2"]);
    repo::commit_on(srv, "main", "rewritten")
}

fn sluice_fetch(
    url: &str,
    spec: &str,
    local: &Path,
) -> sluice_policy::Outcome<Vec<sluice_git::FetchedRef>> {
    client()
        .fetch(
            url,
            &[spec.to_string()],
            &open(local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input")
}

fn git_fetch(url: &str, spec: &str, local: &Path) -> bool {
    repo::try_git(local, &["fetch", "-q", url, spec]).is_ok()
}

#[test]
fn a_non_fast_forward_is_rejected_without_plus_and_forced_with_it_as_git_does() {
    for spec in [
        "refs/heads/main:refs/remotes/origin/main",
        "+refs/heads/main:refs/remotes/origin/main",
    ] {
        let w = World::new();
        let srv = w.small("s.git");
        let (by_git, by_sluice) = twins(&srv, w.dir.path(), true);
        let old = repo::rev_parse(&by_sluice, "refs/remotes/origin/main").expect("old");
        let new = rewrite_main(&srv);
        let url = w.daemon.url("s.git");
        let git_ok = git_fetch(&url, spec, &by_git);
        let out = sluice_fetch(&url, spec, &by_sluice);
        assert_eq!(
            refs(&by_sluice),
            refs(&by_git),
            "{spec}: refs differ from git's"
        );
        let r = &out.value.as_ref().expect("per-ref results")[0];
        assert_eq!(r.old.map(|o| o.to_string()), Some(old.clone()), "{spec}");
        assert_eq!(r.oid.to_string(), new, "{spec}");
        if spec.starts_with('+') {
            assert!(git_ok);
            assert_eq!(out.kind, OutcomeKind::Succeeded, "{spec}");
            assert_eq!(r.status, FetchStatus::Forced);
        } else {
            assert!(!git_ok, "git refuses a non-fast-forward without +");
            assert_eq!(out.kind, OutcomeKind::Answered, "{spec}");
            assert_eq!(out.attempts.len(), 1);
            assert_eq!(r.status, FetchStatus::Rejected);
            assert_eq!(r.reason.as_deref(), Some("non-fast-forward"));
            assert_eq!(
                repo::rev_parse(&by_sluice, "refs/remotes/origin/main"),
                Some(old),
                "nothing reported as written that was not"
            );
        }
    }
}

#[test]
fn a_moved_tag_is_left_alone_unless_forced_as_git_does() {
    for spec in ["refs/tags/*:refs/tags/*", "+refs/tags/*:refs/tags/*"] {
        let w = World::new();
        let srv = w.small("s.git");
        let (by_git, by_sluice) = twins(&srv, w.dir.path(), true);
        // Move the lightweight tag `light` on the server.
        repo::git(&srv, &["tag", "-f", "light", "refs/heads/main"]);
        let url = w.daemon.url("s.git");
        let git_ok = git_fetch(&url, spec, &by_git);
        let out = sluice_fetch(&url, spec, &by_sluice);
        assert_eq!(
            refs(&by_sluice),
            refs(&by_git),
            "{spec}: refs differ from git's"
        );
        let light = out
            .value
            .as_ref()
            .expect("per-ref results")
            .iter()
            .find(|r| r.remote_ref == "refs/tags/light")
            .expect("the tag is listed")
            .clone();
        if spec.starts_with('+') {
            assert!(git_ok);
            assert_eq!(out.kind, OutcomeKind::Succeeded);
            // git prints `t [tag update]`: a moved tag, not a forced update.
            assert_eq!(light.status, FetchStatus::TagUpdate);
            assert_eq!(light.status.as_str(), "tag-update");
        } else {
            assert!(!git_ok, "git refuses to clobber a tag");
            assert_eq!(out.kind, OutcomeKind::Answered);
            assert_eq!(light.status, FetchStatus::Rejected);
            assert_eq!(light.reason.as_deref(), Some("would clobber existing tag"));
        }
        // The other tag was there already: up to date, not rewritten.
        let v1 = out
            .value
            .as_ref()
            .unwrap()
            .iter()
            .find(|r| r.remote_ref == "refs/tags/v1.0")
            .expect("v1.0 listed")
            .clone();
        assert_eq!(v1.status, FetchStatus::UpToDate);
    }
}

/// The words after the last `: ` of `name`'s newest reflog entry (git
/// writes `fetch <args>: fast-forward`, sluice `sluice-remote fetch:
/// fast-forward`; the action differs, the words must not).
fn last_reflog_words(repo: &Path, name: &str) -> String {
    let entries = repo::reflog_entries(repo, name);
    let last = entries
        .last()
        .unwrap_or_else(|| panic!("{name} has a reflog"));
    last.message
        .rsplit_once(": ")
        .map(|(_, w)| w.to_string())
        .unwrap_or_else(|| last.message.clone())
}

#[test]
fn a_fast_forward_through_a_plus_refspec_is_a_fast_forward_and_only_a_rewrite_is_forced() {
    let w = World::new();
    let srv = w.small("s.git");
    // Non-bare twins: git keeps reflogs of remote-tracking refs there.
    let (by_git, by_sluice) = twins(&srv, w.dir.path(), false);
    let url = w.daemon.url("s.git");
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let tracking = "refs/remotes/origin/main";

    // main moves on: an ordinary fast-forward, `+` or not.
    let old = repo::rev_parse(&by_sluice, tracking).expect("origin/main");
    let new = repo::commit_on(&srv, "main", "ahead");
    assert!(git_fetch(&url, spec, &by_git));
    let out = sluice_fetch(&url, spec, &by_sluice);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(refs(&by_sluice), refs(&by_git), "refs differ from git's");
    let v = out.value.expect("per-ref results");
    let main = v
        .iter()
        .find(|r| r.remote_ref == "refs/heads/main")
        .expect("main listed");
    assert_eq!(main.status, FetchStatus::FastForward, "{main:?}");
    assert_eq!(main.status.as_str(), "fast-forward");
    assert_eq!(main.old.map(|o| o.to_string()), Some(old));
    assert_eq!(main.oid.to_string(), new);
    assert_eq!(last_reflog_words(&by_git, tracking), "fast-forward");
    assert_eq!(
        last_reflog_words(&by_sluice, tracking),
        last_reflog_words(&by_git, tracking)
    );
    // dev did not move: up to date, and not written.
    let dev = v
        .iter()
        .find(|r| r.remote_ref == "refs/heads/dev")
        .expect("dev listed");
    assert_eq!(dev.status, FetchStatus::UpToDate);

    // main rewritten: now, and only now, a forced update.
    let old = new;
    let new = rewrite_main(&srv);
    assert!(git_fetch(&url, spec, &by_git));
    let out = sluice_fetch(&url, spec, &by_sluice);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(refs(&by_sluice), refs(&by_git), "refs differ from git's");
    let v = out.value.expect("per-ref results");
    let main = v
        .iter()
        .find(|r| r.remote_ref == "refs/heads/main")
        .expect("main listed");
    assert_eq!(main.status, FetchStatus::Forced, "{main:?}");
    assert_eq!(main.status.as_str(), "forced");
    assert_eq!(main.old.map(|o| o.to_string()), Some(old));
    assert_eq!(main.oid.to_string(), new);
    assert_eq!(last_reflog_words(&by_git, tracking), "forced-update");
    assert_eq!(
        last_reflog_words(&by_sluice, tracking),
        last_reflog_words(&by_git, tracking)
    );
}

#[test]
fn the_checked_out_branch_of_a_non_bare_repository_is_refused_as_git_does() {
    let w = World::new();
    let srv = w.small("s.git");
    let (by_git, by_sluice) = twins(&srv, w.dir.path(), false);
    repo::commit_on(&srv, "main", "ahead");
    let url = w.daemon.url("s.git");
    let spec = "refs/heads/main:refs/heads/main";
    let git_ok = git_fetch(&url, spec, &by_git);
    assert!(!git_ok, "git refuses to fetch into the checked-out branch");
    let out = sluice_fetch(&url, spec, &by_sluice);
    assert_eq!(refs(&by_sluice), refs(&by_git));
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    let r = &out.value.as_ref().expect("per-ref results")[0];
    assert_eq!(r.status, FetchStatus::Rejected);
    assert!(
        r.reason
            .as_deref()
            .unwrap_or_default()
            .contains("checked out"),
        "{r:?}"
    );
    // The work tree is untouched: no phantom staged files.
    assert_eq!(repo::git(&by_sluice, &["status", "--porcelain"]), "");
}

#[test]
fn new_and_fast_forward_refs_say_so_and_the_others_still_update_beside_a_rejection() {
    let w = World::new();
    let srv = w.small("s.git");
    let (_, local) = twins(&srv, w.dir.path(), true);
    let dev_old = repo::rev_parse(&local, "refs/heads/dev").expect("dev");
    let dev_new = repo::commit_on(&srv, "dev", "dev moves on");
    rewrite_main(&srv);
    repo::git(&srv, &["branch", "fresh", "refs/heads/dev"]);
    let out = client()
        .fetch(
            &w.daemon.url("s.git"),
            &[
                "refs/heads/main:refs/heads/main".to_string(),
                "refs/heads/dev:refs/heads/dev".to_string(),
                "refs/heads/fresh:refs/heads/fresh".to_string(),
            ],
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "main is refused");
    let v = out.value.expect("per-ref results");
    let by = |name: &str| v.iter().find(|r| r.remote_ref == name).expect(name).clone();
    assert_eq!(by("refs/heads/main").status, FetchStatus::Rejected);
    let dev = by("refs/heads/dev");
    assert_eq!(dev.status, FetchStatus::FastForward);
    assert_eq!(dev.old.map(|o| o.to_string()), Some(dev_old));
    assert_eq!(by("refs/heads/fresh").status, FetchStatus::New);
    assert_eq!(
        repo::rev_parse(&local, "refs/heads/dev").as_deref(),
        Some(dev_new.as_str())
    );
    assert_eq!(
        repo::rev_parse(&local, "refs/heads/fresh").as_deref(),
        Some(dev_new.as_str())
    );
}

#[test]
fn eight_threads_fetching_into_one_repository_never_fail_on_each_others_locks() {
    let w = World::new();
    w.small("s.git");
    let local = w.path("local.git");
    empty_repo(&local);
    let url = w.daemon.url("s.git");
    let client = client();
    for round in 0..3 {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|t| {
                    let (client, url, local) = (&client, &url, &local);
                    s.spawn(move || {
                        client
                            .fetch(
                                url,
                                &[format!("+refs/heads/*:refs/remotes/t{t}/*")],
                                &open(local),
                                &quick(30_000, 20_000, 3),
                            )
                            .expect("valid input")
                    })
                })
                .collect();
            for (t, h) in handles.into_iter().enumerate() {
                let out = h.join().expect("thread");
                assert_eq!(
                    out.kind,
                    OutcomeKind::Succeeded,
                    "round {round} thread {t}: {:?} {:?}",
                    out.attempts,
                    out.error
                );
            }
        });
    }
    for t in 0..8 {
        assert!(repo::rev_parse(&local, &format!("refs/remotes/t{t}/main")).is_some());
    }
}
