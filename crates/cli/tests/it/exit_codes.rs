//! Every exit code of the contract, reached for a real reason against the
//! testkit's git daemon and fault proxy; and every kind of bad input gets
//! exit 2, nothing on stdout, and a first stderr line naming the argument.

use crate::common;

use std::time::Instant;

use common::*;
use sluice_testkit::{repo, Fault};

#[test]
fn ls_refs_of_a_served_repository_exits_0_and_prints_what_git_ls_remote_prints() {
    let w = World::new();
    let run = sluice(&["ls-refs", &w.url()]);
    assert_eq!(run.code, 0, "{run:?}");
    let git = repo::git(w.dir.path(), &["ls-remote", &w.url()]);
    assert_eq!(run.stdout.trim_end(), git.trim_end());
    assert!(
        run.stderr.is_empty(),
        "one clean attempt prints no summary: {run:?}"
    );
}

#[test]
fn ls_refs_with_a_prefix_lists_only_refs_under_it() {
    let w = World::new();
    let run = sluice(&["ls-refs", &w.url(), "--prefix", "refs/tags/"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.is_empty());
    for line in run.stdout.lines() {
        assert!(
            line.split('\t')
                .nth(1)
                .is_some_and(|n| n.starts_with("refs/tags/")),
            "{line}"
        );
    }
}

#[test]
fn a_fetch_into_a_repository_exits_0_and_stores_the_refs() {
    let w = World::new();
    let local = w.empty("local.git");
    let run = sluice(&[
        "fetch",
        &w.url(),
        "+refs/heads/*:refs/remotes/origin/*",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let served = repo::rev_parse(&w.server(), "refs/heads/main").expect("the served main");
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main"),
        Some(served)
    );
}

#[test]
fn a_push_with_a_stale_lease_exits_1_and_leaves_the_other_commit() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let seen = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let theirs = repo::commit_on(&w.server(), "main", "somebody else");
    repo::commit_on(&local, "main", "ours");
    let lease = format!("refs/heads/main={seen}");
    let run = sluice(&[
        "push",
        &w.proxied(),
        "main:refs/heads/main",
        "--repo",
        &p(&local),
        "--lease",
        &lease,
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("[rejected]") && run.stdout.contains("stale info"),
        "{run:?}"
    );
    assert_eq!(w.receive_packs(), 1, "answered, never tried again");
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main"),
        Some(theirs)
    );
}

#[test]
fn a_non_fast_forward_push_exits_1_without_sending_a_pack() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let before = repo::rev_parse(&w.server(), "refs/heads/main");
    let run = sluice(&[
        "push",
        &w.proxied(),
        "main~1:refs/heads/main",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("non-fast-forward"), "{run:?}");
    assert!(w.proxy.wait_idle(std::time::Duration::from_secs(5)));
    assert!(w
        .proxy
        .connections()
        .iter()
        .all(|c| c.pack_bytes_client_to_server == 0));
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), before);
}

#[test]
fn a_forced_push_and_a_delete_exit_0_and_change_the_server() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let target = repo::rev_parse(&local, "refs/heads/main~1").expect("main~1");
    let run = sluice(&[
        "push",
        &w.url(),
        "+main~1:refs/heads/main",
        ":refs/heads/feature",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        // As git prints them.
        run.stdout
            .lines()
            .any(|l| l.starts_with(" + ") && l.ends_with("(forced update)"))
            && run.stdout.contains(" - [deleted]         feature"),
        "{run:?}"
    );
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main"),
        Some(target)
    );
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/feature"), None);
}

#[test]
fn a_dead_remote_under_a_short_deadline_exits_3_with_the_attempt_history() {
    let url = format!("git://127.0.0.1:{}/small.git", dead_port());
    let start = Instant::now();
    let run = sluice(&["ls-refs", &url, "--deadline", "1s", "--max-attempts", "20"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(start.elapsed().as_millis() < 3_000, "{:?}", start.elapsed());
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(run.stderr.starts_with("unknown: ls-refs"), "{run:?}");
    assert!(run.stderr.contains("stopped: deadline"), "{run:?}");
    assert!(run.stderr.contains("#2"), "more than one attempt: {run:?}");
}

#[test]
fn the_same_operation_id_asked_twice_with_a_ledger_exits_4_without_calling_the_remote() {
    let w = World::new();
    let ledger = w.path("ledger.db");
    let args = [
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "op-twice",
        "--ledger",
        &p(&ledger),
    ];
    let first = sluice(&args);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(w.proxy.wait_idle(std::time::Duration::from_secs(5)));
    let calls = w.proxy.connections().len();
    let second = sluice(&args);
    assert_eq!(second.code, 4, "{second:?}");
    assert!(second.stderr.starts_with("rejected:"), "{second:?}");
    assert!(
        second
            .stderr
            .contains("operation id \"op-twice\" was claimed before"),
        "{second:?}"
    );
    assert!(
        second.stderr.contains("the earlier run: ls-refs succeeded"),
        "{second:?}"
    );
    assert_eq!(w.proxy.connections().len(), calls, "no downstream call");
}

#[test]
fn a_refused_first_connection_is_tried_again_and_the_history_is_printed() {
    let w = World::new();
    w.proxy.set_fault(Fault::Refuse, 1);
    let run = sluice(&["ls-refs", &w.proxied(), "--prefix", "refs/heads/main"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    assert!(run.stderr.starts_with("succeeded: ls-refs"), "{run:?}");
    assert!(
        run.stderr.contains("#1") && run.stderr.contains("unjudged"),
        "{run:?}"
    );
}

/// A bad command line: exit 2, nothing on stdout, the first stderr line
/// `error: ...` naming `arg`, no panic.
fn assert_bad(args: &[&str], arg: &str) {
    let run = sluice(args);
    assert_eq!(run.code, 2, "{args:?}: {run:?}");
    assert!(run.stdout.is_empty(), "{args:?}: stdout not empty: {run:?}");
    let first = run.first_err_line();
    assert!(first.starts_with("error:"), "{args:?}: {first}");
    assert!(
        first.contains(arg),
        "{args:?}: first line does not name {arg}: {first}"
    );
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("backtrace"),
        "{run:?}"
    );
}

#[test]
fn each_kind_of_bad_input_exits_2_with_empty_stdout_and_names_the_argument() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let repo_dir = p(&local);
    let not_a_repo = w.path("plain");
    std::fs::create_dir_all(&not_a_repo).expect("dir");
    let not_a_repo = p(&not_a_repo);
    let url = w.url();
    let u = url.as_str();
    let r = repo_dir.as_str();
    let cases: &[(&[&str], &str)] = &[
        // malformed URLs
        (&["ls-refs", "ftp://127.0.0.1/x"], "<URL>"),
        (&["ls-refs", "git://"], "<URL>"),
        (&["http", "get", "git://127.0.0.1/x"], "<URL>"),
        // durations and attempts
        (&["ls-refs", u, "--deadline", "soon"], "--deadline"),
        (&["ls-refs", u, "--deadline", "12"], "--deadline"),
        (
            &["ls-refs", u, "--attempt-timeout", "0ms"],
            "--attempt-timeout",
        ),
        (&["ls-refs", u, "--settle", "a while"], "--settle"),
        (&["ls-refs", u, "--max-attempts", "0"], "--max-attempts"),
        (&["ls-refs", u, "--max-attempts", "many"], "--max-attempts"),
        (&["ls-refs", u, "--profile", "fastest"], "--profile"),
        // prefix, refspec, push spec, lease, object id, push option
        (&["ls-refs", u, "--prefix", "refs/heads/*"], "--prefix"),
        (
            &["fetch", u, "refs/heads/main:refs/x:y", "--repo", r],
            "<REFSPEC>",
        ),
        (&["push", u, "main:HEAD", "--repo", r], "SRC:DST"),
        (&["push", u, "HEAD~1:elsewhere", "--repo", r], "SRC:DST"),
        (&["push", u, ":short", "--repo", r], "SRC:DST"),
        (
            &["push", u, "main", "--repo", r, "--lease", "main=0000000"],
            "--lease",
        ),
        (
            &["push", u, "main", "--repo", r, "--lease", "main"],
            "--lease",
        ),
        (
            &["push", u, "nosuchrev:refs/heads/x", "--repo", r],
            "SRC:DST",
        ),
        (
            &[
                "push",
                u,
                "main:refs/heads/x",
                "--repo",
                r,
                "--lease",
                "refs/heads/x",
            ],
            "--lease",
        ),
        (
            &[
                "push",
                u,
                "main:refs/heads/x",
                "--repo",
                r,
                "--lease",
                "refs/heads/x=abc123",
            ],
            "--lease",
        ),
        (
            &[
                "push",
                u,
                "main:refs/heads/x",
                "--repo",
                r,
                "--lease",
                "refs/heads/y=absent",
            ],
            "--lease",
        ),
        (
            &[
                "push",
                u,
                "main:refs/heads/x",
                "--repo",
                r,
                "--push-option",
                "a\nb",
            ],
            "--push-option",
        ),
        // repositories
        (
            &["fetch", u, "refs/heads/main", "--repo", &not_a_repo],
            "--repo",
        ),
        (
            &[
                "push",
                u,
                "main:refs/heads/main",
                "--repo",
                "/nonexistent/sluice",
            ],
            "--repo",
        ),
        // credentials and ids
        (
            &["ls-refs", u, "--token-command", "cat /dev/null"],
            "--token-command",
        ),
        (
            &["ls-refs", u, "--operation-id", "has space"],
            "--operation-id",
        ),
        // clap's own usage errors
        (&["ls-refs", u, "--bogus"], "--bogus"),
        // (--repo is optional: the repository is found from the working
        // directory; a fetch without refspecs fetches a remote's fetch
        // lines, or a URL's HEAD, as git does.)
        (&["push", u, "--repo", r], "SRC:DST"),
        (&["fetch", "--repo", r], "URL"),
    ];
    for (args, arg) in cases {
        assert_bad(args, arg);
    }
    assert!(w.proxy.connections().is_empty());
}

#[test]
fn no_command_is_a_usage_error_and_help_and_version_exit_0() {
    let none = sluice(&[]);
    assert_eq!(none.code, 2, "{none:?}");
    assert!(none.stdout.is_empty());
    let help = sluice(&["--help"]);
    assert_eq!(help.code, 0, "{help:?}");
    assert!(help.stdout.contains("ls-refs") && help.stdout.contains("--deadline"));
    let version = sluice(&["--version"]);
    assert_eq!(version.code, 0, "{version:?}");
    assert!(version.stdout.starts_with("sluice-remote "));
    let sub_help = sluice(&["push", "--help"]);
    assert_eq!(sub_help.code, 0, "{sub_help:?}");
    assert!(sub_help.stdout.contains("--lease"));
}
