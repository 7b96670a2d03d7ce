//! Every command's help has examples, the exit codes and the profiles'
//! figures; demo's help offers only what demo takes. `--progress` shows
//! real counts on stderr even into a pipe; `--no-progress` and the default
//! into a pipe show none.

use crate::common;

use common::*;
use sluice_testkit::repo;

#[test]
fn every_command_help_has_examples_exit_codes_and_profiles() {
    for cmd in [
        &["ls-refs"][..],
        &["fetch"],
        &["push"],
        &["http"],
        &["http", "get"],
        &["ledger"],
        &["ledger", "show"],
        &["ledger", "list"],
    ] {
        let mut args = cmd.to_vec();
        args.push("--help");
        let run = sluice(&args);
        assert_eq!(run.code, 0, "{cmd:?}: {run:?}");
        for words in [
            "Examples:",
            "Exit codes: 0 succeeded",
            "5 local-error",
            "Profiles",
            "submit   60s deadline",
        ] {
            assert!(
                run.stdout.contains(words),
                "{cmd:?} lacks {words:?}:\n{}",
                run.stdout
            );
        }
    }
    let demo = sluice(&["demo", "--help"]);
    assert_eq!(demo.code, 0, "{demo:?}");
    assert!(demo.stdout.contains("--trace"), "{}", demo.stdout);
    for offered in [
        "--json",
        "--deadline",
        "--ledger",
        "--operation-id",
        "--proxy",
    ] {
        assert!(
            !demo.stdout.contains(offered),
            "demo offers {offered}:\n{}",
            demo.stdout
        );
    }
}

#[test]
fn progress_into_a_pipe_only_when_asked_with_real_counts() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let url = w.url();
    let mut pushed = Vec::new();
    for (flag, branch) in [
        (Some("--progress"), "p1"),
        (Some("--no-progress"), "p2"),
        (None, "p3"),
    ] {
        // A commit with a file of its own, so the pack is not empty.
        let tip = repo::commit_file(
            &local,
            branch,
            &format!("{branch}.txt"),
            branch.repeat(5000).as_bytes(),
        );
        let spec = format!("{tip}:refs/heads/{branch}");
        let mut args = vec!["push", url.as_str(), spec.as_str(), "--repo"];
        let dir = p(&local);
        args.push(&dir);
        args.extend(flag);
        let run = sluice(&args);
        assert_eq!(run.code, 0, "{run:?}");
        pushed.push((flag, run));
    }
    let shown = &pushed[0].1.stderr;
    let sent = shown
        .lines()
        .find(|l| l.starts_with("push: sent: "))
        .unwrap_or_else(|| panic!("no sent line: {shown}"));
    // `push: sent: N objects, X` with N at least the commit, its tree and blob.
    let objects: u64 = sent
        .trim_start_matches("push: sent: ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {sent}"));
    assert!(objects >= 3, "{sent}");
    assert!(
        shown.lines().any(|l| l.starts_with("push: counted: ")),
        "{shown}"
    );
    for (flag, run) in &pushed[1..] {
        assert!(!run.stderr.contains("push: "), "{flag:?}: {}", run.stderr);
    }
}
