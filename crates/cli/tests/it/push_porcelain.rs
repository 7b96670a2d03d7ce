//! `push --porcelain` and `--dry-run`, side by side with `git push` on the
//! same starting state: the same lines, the same server state.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use sluice_testkit::{fixtures, repo};

/// Two servers and two local clones, all of the same state.
struct Twins {
    w: World,
    git_srv: PathBuf,
    our_srv: PathBuf,
    git_local: PathBuf,
    our_local: PathBuf,
}

fn twins() -> Twins {
    twins_of("small")
}

/// [`twins`] of another fixture.
fn twins_of(fixture: &str) -> Twins {
    let w = World::new();
    let git_srv = w.path("srv/by-git.git");
    let our_srv = w.path("srv/by-sluice.git");
    fixtures::copy_of(fixture, &git_srv).expect("fixture");
    fixtures::copy_of(fixture, &our_srv).expect("fixture");
    let clone = |from: &Path, name: &str| {
        let to = w.path(name);
        repo::git(w.dir.path(), &["clone", "-q", "--bare", &p(from), &p(&to)]);
        to
    };
    let git_local = clone(&git_srv, "git-local.git");
    let our_local = clone(&our_srv, "our-local.git");
    Twins {
        w,
        git_srv,
        our_srv,
        git_local,
        our_local,
    }
}

/// The same commit in both local clones (same tree, author, date).
fn same_commit(t: &Twins, branch: &str, on: &str) -> String {
    let mk = |local: &Path| {
        let parent = repo::rev_parse(local, on).expect("parent");
        let tree = repo::git(local, &["rev-parse", &format!("{parent}^{{tree}}")]);
        let out = std::process::Command::new("git")
            .args(["commit-tree", tree.trim(), "-p", &parent, "-m", "twin"])
            .current_dir(local)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_AUTHOR_DATE", "1700000000 +0000")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_DATE", "1700000000 +0000")
            .output()
            .expect("commit-tree");
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        repo::git(local, &["update-ref", &format!("refs/heads/{branch}"), &id]);
        id
    };
    let a = mk(&t.git_local);
    let b = mk(&t.our_local);
    assert_eq!(a, b, "twin commits");
    a
}

fn refs(repo: &Path) -> String {
    repo::git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// Runs the same push by git and by sluice; returns (git's stdout, ours,
/// our exit code), with each `To` line's URL made the same.
fn side_by_side(t: &Twins, specs: &[&str], extra: &[&str]) -> (String, String, i32) {
    let git_url = t.w.daemon.url("by-git.git");
    let our_url = t.w.daemon.url("by-sluice.git");
    let mut args = vec!["push", "--porcelain"];
    args.extend_from_slice(extra);
    args.push(&git_url);
    args.extend_from_slice(specs);
    let git = std::process::Command::new("git")
        .args(&args)
        .current_dir(&t.git_local)
        .output()
        .expect("git push");
    // git's own lines are the reference: it must have printed them.
    assert_eq!(
        String::from_utf8_lossy(&git.stdout).lines().count(),
        specs.len() + 2,
        "git printed To, a line per ref and Done: {git:?}"
    );
    let mut ours = vec!["push", &our_url];
    ours.extend_from_slice(specs);
    let local = p(&t.our_local);
    ours.extend_from_slice(&["--repo", &local, "--porcelain"]);
    ours.extend_from_slice(extra);
    let run = sluice(&ours);
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    let norm = |s: &str, url: &str| s.replace(url, "<URL>");
    (
        norm(&String::from_utf8_lossy(&git.stdout), &git_url),
        norm(&run.stdout, &our_url),
        run.code,
    )
}

#[test]
fn porcelain_lines_are_gits_for_new_fast_forward_forced_deleted_and_up_to_date() {
    let t = twins();
    same_commit(&t, "main", "refs/heads/main");
    // Not a descendant of the server's feature: a forced update.
    same_commit(&t, "rework", "refs/heads/main~1");
    let specs = [
        "refs/heads/main:refs/heads/main",
        "refs/heads/main:refs/heads/fresh",
        "+refs/heads/rework:refs/heads/feature",
        ":refs/heads/release",
        "refs/heads/release:refs/heads/kept",
        "refs/heads/main:refs/heads/main-copy",
    ];
    // An up-to-date ref: pushed once by both beforehand.
    for (local, url) in [
        (&t.git_local, t.w.daemon.url("by-git.git")),
        (&t.our_local, t.w.daemon.url("by-sluice.git")),
    ] {
        repo::git(
            local,
            &["push", "-q", &url, "refs/heads/release:refs/heads/kept"],
        );
    }
    let (git, ours, code) = side_by_side(&t, &specs, &[]);
    assert_eq!(ours, git, "porcelain lines differ from git's");
    assert_eq!(code, 0);
    assert!(ours.ends_with("Done\n"), "{ours}");
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv), "server states differ");
}

#[test]
fn porcelain_says_rejected_as_git_does_and_dry_run_sends_nothing() {
    let t = twins();
    // A local main that is not a descendant of the server's.
    same_commit(&t, "main", "refs/heads/main~2");
    let specs = ["refs/heads/main:refs/heads/main"];
    let (git, ours, code) = side_by_side(&t, &specs, &[]);
    assert_eq!(ours, git, "porcelain lines differ from git's");
    assert_eq!(code, 1);
    same_commit(&t, "fresh", "refs/heads/main");
    let before = refs(&t.our_srv);
    let (git, ours, code) =
        side_by_side(&t, &["refs/heads/fresh:refs/heads/fresh"], &["--dry-run"]);
    assert_eq!(ours, git, "dry-run lines differ from git's");
    assert_eq!(code, 0);
    assert_eq!(refs(&t.our_srv), before, "a dry run sends nothing");
    let json = sluice(&[
        "push",
        &t.w.daemon.url("by-sluice.git"),
        "refs/heads/fresh:refs/heads/fresh",
        "--repo",
        &p(&t.our_local),
        "--dry-run",
        "--json",
    ])
    .json();
    assert_eq!(json["operation"]["effect"], "read");
    assert_eq!(json["value"][0]["status"], "ok");
    let refused = sluice(&[
        "push",
        &t.w.daemon.url("by-sluice.git"),
        "refs/heads/fresh:refs/heads/fresh",
        "--repo",
        &p(&t.our_local),
        "--dry-run",
        "--operation-id",
        "x",
    ]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.first_err_line().contains("--operation-id"),
        "{refused:?}"
    );
}

#[test]
fn short_names_and_a_source_alone_push_where_git_pushes() {
    let t = twins();
    same_commit(&t, "main", "refs/heads/main");
    // HEAD (a bare clone's HEAD is main) to a short new branch; a tag to a
    // short new name, which takes the tag's kind; a branch alone.
    let specs = ["HEAD:topic", "v1.0:v9", "main"];
    let (git, ours, code) = side_by_side(&t, &specs, &[]);
    assert_eq!(ours, git, "porcelain lines differ from git's");
    assert_eq!(code, 0);
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv), "server states differ");
    assert!(refs(&t.our_srv).contains("refs/tags/v9 "));
    assert!(refs(&t.our_srv).contains("refs/heads/topic "));

    // A short destination for a source that is no branch or tag: git would
    // look at the remote; here it is refused before any call, naming it.
    let before = t.w.receive_packs();
    let oid = repo::rev_parse(&t.our_local, "refs/heads/main~1").expect("oid");
    let run = sluice(&[
        "push",
        &t.w.daemon.url("by-sluice.git"),
        &format!("{oid}:elsewhere"),
        "--repo",
        &p(&t.our_local),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("SRC:DST"), "{run:?}");
    assert!(run.first_err_line().contains("elsewhere"), "{run:?}");
    assert_eq!(t.w.receive_packs(), before);
}

/// `git push --porcelain --force-with-lease=<lease> origin <spec>` in
/// git's clone, `sluice-remote push <URL> <spec> --lease <lease>` in ours;
/// both clones have `origin` configured with their server's URL.
fn leased_side_by_side(
    t: &Twins,
    spec: &str,
    git_lease: &str,
    our_lease: &str,
) -> (String, String, i32) {
    let git_url = t.w.daemon.url("by-git.git");
    let our_url = t.w.daemon.url("by-sluice.git");
    let git = std::process::Command::new("git")
        .args([
            "push",
            "--porcelain",
            &format!("--force-with-lease={git_lease}"),
            "origin",
            spec,
        ])
        .current_dir(&t.git_local)
        .output()
        .expect("git push");
    let run = sluice(&[
        "push",
        &our_url,
        spec,
        "--repo",
        &p(&t.our_local),
        "--porcelain",
        "--lease",
        our_lease,
    ]);
    assert!(matches!(run.code, 0 | 1), "{run:?}");
    (
        String::from_utf8_lossy(&git.stdout).replace(&git_url, "<URL>"),
        run.stdout.replace(&our_url, "<URL>"),
        run.code,
    )
}

#[test]
fn leases_without_a_value_or_abbreviated_decide_as_gits() {
    let t = twins();
    for (local, url) in [
        (&t.git_local, t.w.daemon.url("by-git.git")),
        (&t.our_local, t.w.daemon.url("by-sluice.git")),
    ] {
        repo::git(local, &["remote", "set-url", "origin", &url]);
        repo::git(
            local,
            &[
                "config",
                "remote.origin.fetch",
                "+refs/heads/*:refs/remotes/origin/*",
            ],
        );
        repo::git(local, &["fetch", "-q", "origin"]);
    }
    same_commit(&t, "main", "refs/heads/main~1");
    // origin/main is the server's main: the lease holds, the rewrite lands.
    let (git, ours, code) = leased_side_by_side(&t, "main:main", "main", "main");
    assert_eq!(ours, git);
    assert_eq!(code, 0);
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv));

    // Somebody else moves the servers' feature; origin/feature is stale now:
    // the lease without a value is refused as stale, by both.
    for srv in [&t.git_srv, &t.our_srv] {
        repo::git(
            srv,
            &["update-ref", "refs/heads/feature", "refs/heads/release"],
        );
    }
    same_commit(&t, "feature2", "refs/heads/main");
    let (git, ours, code) =
        leased_side_by_side(&t, "refs/heads/feature2:feature", "feature", "feature");
    assert_eq!(ours, git);
    assert_eq!(code, 1);
    assert!(ours.contains("stale info"), "{ours}");

    // An abbreviated id of the value the server holds now: it holds.
    let release = repo::rev_parse(&t.our_srv, "refs/heads/release").expect("release");
    let short = &release[..9];
    let (git, ours, code) = leased_side_by_side(
        &t,
        "refs/heads/feature2:feature",
        &format!("feature:{release}"),
        &format!("feature={short}"),
    );
    assert_eq!(ours, git);
    assert_eq!(code, 0);
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv));

    // No remote configured with the URL: a lease without a value is exit 2.
    let url = t.w.daemon.url("by-sluice.git");
    repo::git(
        &t.our_local,
        &["remote", "set-url", "origin", "git://127.0.0.1:1/other.git"],
    );
    let run = sluice(&[
        "push",
        &url,
        "main:main",
        "--repo",
        &p(&t.our_local),
        "--lease",
        "main",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("--lease"), "{run:?}");
    // An id no object starts with: exit 2.
    let run = sluice(&[
        "push",
        &url,
        "main:main",
        "--repo",
        &p(&t.our_local),
        "--lease",
        "main=0000000",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("--lease"), "{run:?}");
}

#[test]
fn porcelain_abbreviates_as_git_does_past_seven_digits() {
    // The medium fixture holds about 41,000 objects: git abbreviates to 8.
    let t = twins_of("medium");
    same_commit(&t, "main", "refs/heads/main");
    same_commit(&t, "rework", "refs/heads/main~3");
    let specs = [
        "refs/heads/main:refs/heads/main",
        "+refs/heads/rework:refs/heads/main-old",
        "refs/heads/main~1:refs/heads/fresh",
    ];
    for (local, url) in [
        (&t.git_local, t.w.daemon.url("by-git.git")),
        (&t.our_local, t.w.daemon.url("by-sluice.git")),
    ] {
        repo::git(
            local,
            &["push", "-q", &url, "refs/heads/main~1:refs/heads/main-old"],
        );
    }
    let (git, ours, code) = side_by_side(&t, &specs, &[]);
    assert_eq!(ours, git, "porcelain lines differ from git's");
    assert_eq!(code, 0);
    let range = ours
        .lines()
        .find(|l| l.contains(".."))
        .unwrap_or_else(|| panic!("a range: {ours}"));
    let summary = range.rsplit('\t').next().unwrap_or("");
    let first = summary.split("..").next().unwrap_or("");
    assert!(first.len() > 7, "abbreviated past 7 digits: {ours}");
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv), "server states differ");
}

/// A human push line's flag, summary, source and destination (` * [new
/// branch]      main -> fresh` → `*`, `[new branch]`, `main`, `fresh`) and
/// its parenthesised reason, if any.
fn human_shape(line: &str) -> Option<(char, String, String, String, String)> {
    let mut chars = line.chars();
    if chars.next()? != ' ' {
        return None;
    }
    let flag = chars.next()?;
    let rest = line.get(3..)?.trim_start();
    let (summary, rest) = if rest.starts_with('[') {
        let end = rest.find(']')?;
        (rest[..=end].to_string(), rest[end + 1..].trim_start())
    } else {
        let (s, r) = rest.split_once(' ')?;
        (s.to_string(), r.trim_start())
    };
    // A deletion names only the destination (` - [deleted]   release`).
    let (from, rest) = rest.split_once(" -> ").unwrap_or(("", rest));
    let (to, reason) = match rest.split_once(" (") {
        Some((to, r)) => (to, r.trim_end_matches(')')),
        None => (rest, ""),
    };
    Some((
        flag,
        summary,
        from.to_string(),
        to.trim().to_string(),
        reason.to_string(),
    ))
}

#[test]
fn human_lines_have_gits_flags_summaries_and_names() {
    let t = twins();
    same_commit(&t, "main", "refs/heads/main");
    same_commit(&t, "rework", "refs/heads/main~1");
    same_commit(&t, "behind", "refs/heads/main~2");
    let specs = [
        "main:main",
        "main:refs/heads/fresh",
        "+rework:feature",
        ":refs/heads/release",
        "behind:refs/heads/main-copy",
    ];
    // main-copy exists on both servers at main: `behind` is not a
    // fast-forward of it and is rejected by the client.
    for (local, url) in [
        (&t.git_local, t.w.daemon.url("by-git.git")),
        (&t.our_local, t.w.daemon.url("by-sluice.git")),
    ] {
        repo::git(
            local,
            &["push", "-q", &url, "refs/heads/main:refs/heads/main-copy"],
        );
    }
    let git = std::process::Command::new("git")
        .args(["push", &t.w.daemon.url("by-git.git")])
        .args(specs)
        .current_dir(&t.git_local)
        .output()
        .expect("git push");
    let mut args = vec!["push".to_string(), t.w.daemon.url("by-sluice.git")];
    args.extend(specs.iter().map(|s| s.to_string()));
    args.extend(["--repo".to_string(), p(&t.our_local)]);
    let refs_args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sluice(&refs_args);
    assert_eq!(run.code, 1, "{run:?}");
    let mut theirs: Vec<_> = String::from_utf8_lossy(&git.stderr)
        .lines()
        .filter_map(human_shape)
        .collect();
    let mut ours: Vec<_> = run.stdout.lines().filter_map(human_shape).collect();
    theirs.sort();
    ours.sort();
    assert_eq!(theirs.len(), specs.len(), "{git:?}");
    assert_eq!(ours, theirs, "{run:?}\n{git:?}");
    assert_eq!(refs(&t.our_srv), refs(&t.git_srv), "server states differ");
}
