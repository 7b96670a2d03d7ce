//! `fetch` prints what it did the way `git fetch` does, and a ref refused by
//! git's rules is exit 1 with the others still updated.

mod common;

use common::*;
use sluice_testkit::repo;

#[test]
fn fetch_prints_like_git_and_a_refused_ref_is_exit_1() {
    let w = World::new();
    let local = w.empty("local.git");
    let spec = "refs/heads/*:refs/remotes/origin/*";
    let first = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local)]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.starts_with("From git://"), "{first:?}");
    assert!(
        first
            .stdout
            .lines()
            .any(|l| l.starts_with(" * [new branch]") && l.ends_with("-> origin/main")),
        "{first:?}"
    );
    // Nothing changed: nothing printed, unless -v.
    let quiet = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local)]);
    assert_eq!(quiet.code, 0);
    assert_eq!(quiet.stdout, "", "{quiet:?}");
    let verbose = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local), "-v"]);
    assert!(verbose.stdout.contains(" = [up to date]"), "{verbose:?}");

    // main rewritten on the server: refused without +, the JSON says so.
    let srv = w.server();
    let old = repo::rev_parse(&local, "refs/remotes/origin/main").expect("main");
    repo::git(
        &srv,
        &["update-ref", "refs/heads/main", "refs/heads/main~1"],
    );
    let new = repo::commit_on(&srv, "main", "rewritten");
    let refused = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local)]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stdout
            .lines()
            .any(|l| l.starts_with(" ! [rejected]") && l.ends_with("(non-fast-forward)")),
        "{refused:?}"
    );
    let doc = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local), "--json"]).json();
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["result"], "answered");
    let main = doc["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["remote_ref"] == "refs/heads/main")
        .expect("main")
        .clone();
    assert_eq!(main["status"], "rejected");
    assert_eq!(main["reason"], "non-fast-forward");
    assert_eq!(main["old"], old.as_str());
    assert_eq!(main["oid"], new.as_str());
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main").as_deref(),
        Some(old.as_str())
    );
    let forced = sluice(&["fetch", &w.url(), &format!("+{spec}"), "--repo", &p(&local)]);
    assert_eq!(forced.code, 0, "{forced:?}");
    assert!(
        forced
            .stdout
            .lines()
            .any(|l| l.starts_with(" + ") && l.ends_with("(forced update)")),
        "{forced:?}"
    );
}
