//! The conveniences a git user reaches for, beside git on twin clones:
//! `-q` (nothing for what went well, everything else still said), `-v`
//! (git's verbose lines and no more), tracing only with `--trace` or
//! RUST_LOG, metrics only with `--metrics`, and `-C <dir>` as git's.

use crate::common;

use common::*;
use sluice_testkit::repo;

/// Two clones of the served repository (`origin` is the daemon's URL),
/// `a` for git and `b` for sluice-remote.
fn twins(w: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    (
        clone_of(&w.url(), &w.path("a")),
        clone_of(&w.url(), &w.path("b")),
    )
}

fn sl_env(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_in(env!("CARGO_BIN_EXE_sluice-remote"), dir, args, env)
}

#[test]
fn quiet_prints_nothing_for_what_went_well_and_everything_else_as_before() {
    let w = World::new();
    let srv = w.server();
    let (a, b) = twins(&w);

    // A fetch that moved a branch: git -q says nothing, nor do we.
    repo::commit_on(&srv, "main", "moved on the server");
    let g = git_in(&a, &["fetch", "-q", "origin"]);
    let s = sl_in(&b, &["fetch", "-q", "origin"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!((g.stdout.as_str(), g.stderr.as_str()), ("", ""), "{g:?}");
    assert_eq!((s.stdout.as_str(), s.stderr.as_str()), ("", ""), "{s:?}");
    assert_eq!(
        repo::rev_parse(&a, "refs/remotes/origin/main"),
        repo::rev_parse(&b, "refs/remotes/origin/main")
    );
    // Without -q the same kind of fetch prints its line and a summary.
    repo::commit_on(&srv, "main", "moved again");
    let loud = sl_in(&b, &["fetch", "origin"]);
    assert_eq!(loud.code, 0, "{loud:?}");
    assert!(loud.stderr.contains("succeeded: fetch"), "{loud:?}");

    // A push that landed: nothing, as git push -q.
    repo::git(&a, &["fetch", "-q", "origin"]);
    repo::git(&b, &["fetch", "-q", "origin"]);
    repo::git(&b, &["checkout", "-q", "-B", "topic", "origin/main"]);
    repo::commit_on(&b, "topic", "a topic");
    let s = sl_in(&b, &["push", "-q", "origin", "topic"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!((s.stdout.as_str(), s.stderr.as_str()), ("", ""), "{s:?}");
    assert!(repo::rev_parse(&srv, "refs/heads/topic").is_some());
    // The remote's words are still said, as git -q says them.
    repo::install_hook(
        &srv,
        "post-receive",
        "#!/bin/sh\necho hello from the hook\n",
    )
    .expect("hook");
    repo::commit_on(&b, "topic", "a second topic commit");
    let s = sl_in(&b, &["push", "-q", "origin", "topic"]);
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!(s.stdout, "", "{s:?}");
    assert_eq!(s.stderr, "remote: hello from the hook\n", "{s:?}");
    let hook = repo::install_hook(&srv, "post-receive", "#!/bin/sh\ntrue\n").expect("hook");
    assert!(hook.exists());

    // A refused ref is still said, with its outcome's summary.
    repo::commit_on(&srv, "main", "moved under the push");
    repo::git(
        &b,
        &["checkout", "-q", "-B", "main", "refs/remotes/origin/main"],
    );
    repo::commit_on(&b, "main", "behind the server");
    let s = sl_in(&b, &["push", "-q", "origin", "main"]);
    assert_eq!(s.code, 1, "{s:?}");
    assert!(
        s.stdout.lines().any(|l| l.starts_with(" ! [rejected]")),
        "{s:?}"
    );
    assert!(s.stderr.contains("answered: push"), "{s:?}");

    // ls-refs -q: the refs, as ever.
    let listed = sl_in(&b, &["ls-refs", "-q", "origin", "main"]);
    assert_eq!(listed.code, 0);
    assert!(listed.stdout.ends_with("\trefs/heads/main\n"), "{listed:?}");

    // With --json, -q changes nothing: the same document's keys.
    let doc = sl_in(&b, &["ls-refs", "-q", "--json", "origin"]).json();
    check_document(&doc, "ls-refs", "read");
}

#[test]
fn verbose_adds_gits_lines_only_and_tracing_and_metrics_come_when_asked() {
    let w = World::new();
    let (a, b) = twins(&w);
    let g = git_in(&a, &["fetch", "-v", "origin"]);
    let s = sl_in(&b, &["fetch", "-v", "origin"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    let up_to_date = |text: &str| {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with(" = [up to date]"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        v.sort();
        v
    };
    let ours = format!("{}{}", s.stdout, s.stderr);
    assert!(!up_to_date(&g.stderr).is_empty(), "{g:?}");
    assert_eq!(up_to_date(&ours), up_to_date(&g.stderr), "{s:?}");
    // No tracing, no metrics.
    for word in ["DEBUG", "TRACE", " INFO ", "metrics:"] {
        assert!(!ours.contains(word), "{word}: {s:?}");
    }
    // --trace: the sluice crates' debug events; --metrics: the sums.
    let traced = sl_in(&b, &["ls-refs", "--trace", "origin"]);
    assert_eq!(traced.code, 0);
    assert!(traced.stderr.contains("DEBUG"), "{traced:?}");
    assert!(!traced.stderr.contains("metrics:"), "{traced:?}");
    let counted = sl_in(&b, &["ls-refs", "--metrics", "origin"]);
    assert!(!counted.stderr.contains("DEBUG"), "{counted:?}");
    assert!(
        counted.stderr.contains("metrics:\n")
            && counted
                .stderr
                .contains(r#"sluice_remote_operations_total{kind="ls-refs",result="succeeded"} 1"#),
        "{counted:?}"
    );
    // RUST_LOG alone turns tracing on, with its own filter.
    let logged = sl_env(
        &b,
        &["ls-refs", "origin"],
        &[("RUST_LOG", "sluice_policy=debug")],
    );
    assert!(logged.stderr.contains("DEBUG"), "{logged:?}");
    assert!(
        logged
            .stderr
            .lines()
            .all(|l| !l.contains("DEBUG") || l.contains("sluice_policy")),
        "{logged:?}"
    );
}

#[test]
fn dash_c_runs_as_if_started_there_as_git_does() {
    let w = World::new();
    let srv = w.server();
    let (a, b) = twins(&w);
    repo::commit_on(&srv, "main", "moved");
    let top = w.dir.path();
    // Repeated, each relative to the one before.
    let g = git_in(top, &["-C", "a", "-C", ".", "fetch", "-q", "origin"]);
    let s = sl_in(top, &["-C", "b", "-C", ".", "fetch", "-q", "origin"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(
        repo::rev_parse(&a, "refs/remotes/origin/main"),
        repo::rev_parse(&b, "refs/remotes/origin/main")
    );
    assert_eq!(
        repo::rev_parse(&b, "refs/remotes/origin/main"),
        repo::rev_parse(&srv, "refs/heads/main")
    );
    // Relative paths resolve against it: --ledger, --repo.
    let run = sl_in(
        top,
        &[
            "-C",
            "b",
            "--ledger",
            "ops.db",
            "--operation-id",
            "c-1",
            "ls-refs",
            "origin",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        b.join("ops.db").exists(),
        "the ledger is made in -C's directory"
    );
    let run = sl_in(
        &srv,
        &["-C", "..", "-C", "..", "fetch", &w.url(), "--repo", "b"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    // An empty -C is no change, as git's; one that is not there is bad
    // input naming -C, nothing run.
    let run = sl_in(&b, &["-C", "", "ls-refs", "origin", "main"]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = sl_in(top, &["-C", "nowhere", "ls-refs", "origin"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.first_err_line().contains("-C"), "{run:?}");
}
