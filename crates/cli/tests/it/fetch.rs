//! `fetch` prints what it did the way `git fetch` does (on stderr, as git), and a ref refused by
//! git's rules is exit 1 with the others still updated.

use crate::common;

use common::*;
use sluice_testkit::repo;

#[test]
fn fetch_prints_like_git_and_a_refused_ref_is_exit_1() {
    let w = World::new();
    let local = w.empty("local.git");
    let spec = "refs/heads/*:refs/remotes/origin/*";
    let first = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local)]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stderr.starts_with("From git://"), "{first:?}");
    assert!(
        first
            .stderr
            .lines()
            .any(|l| l.starts_with(" * [new branch]") && l.ends_with("-> origin/main")),
        "{first:?}"
    );
    // Nothing changed: nothing printed, unless -v.
    let quiet = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local)]);
    assert_eq!(quiet.code, 0);
    assert_eq!(quiet.stdout, "", "{quiet:?}");
    assert!(
        !quiet.stderr.lines().any(|l| l.starts_with(' ')),
        "{quiet:?}"
    );
    let verbose = sluice(&["fetch", &w.url(), spec, "--repo", &p(&local), "-v"]);
    assert!(verbose.stderr.contains(" = [up to date]"), "{verbose:?}");

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
            .stderr
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
            .stderr
            .lines()
            .any(|l| l.starts_with(" + ") && l.ends_with("(forced update)")),
        "{forced:?}"
    );
}

/// The refs of `repo`, without HEAD.
fn local_refs(repo: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    repo::refs(repo)
        .into_iter()
        .filter(|(k, _)| k != "HEAD")
        .collect()
}

/// `git fetch <args>` in `repo`; its output lines (git prints them on stderr).
fn git_fetch(repo: &std::path::Path, args: &[&str]) -> Vec<String> {
    let out = repo::git_output(repo, &[&["fetch"], args].concat());
    assert!(out.status.success(), "git fetch {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The flag, summary and ref names of a fetch line (` - [deleted] (none)
/// -> origin/x` → `-`, `[deleted]`, `(none)`, `origin/x`), whitespace
/// and git's trailing notes aside.
fn shape(line: &str) -> Option<(String, String, String, String)> {
    if !line.starts_with(' ') || line.len() < 4 {
        return None;
    }
    let flag = line[1..2].to_string();
    let rest = line[3..].trim();
    let (summary, rest) = if let Some(r) = rest.strip_prefix('[') {
        let end = r.find(']')?;
        (format!("[{}]", &r[..end]), r[end + 1..].trim())
    } else {
        let (s, r) = rest.split_once(' ')?;
        (s.to_string(), r.trim())
    };
    let (from, to) = rest.split_once("->")?;
    let to = to.split_whitespace().next()?.to_string();
    Some((flag, summary, from.trim().to_string(), to))
}

fn shapes<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = lines.into_iter().filter_map(shape).collect();
    v.sort();
    v
}

#[test]
fn prune_tags_and_no_tags_leave_the_refs_git_leaves_and_print_what_git_prints() {
    let w = World::new();
    let srv = w.server();
    // A tag on history no refspec here fetches: only --tags brings it.
    let lonely = repo::commit_on(&srv, "lonely", "not on any fetched branch");
    repo::git(&srv, &["tag", "lonely-tag", &lonely]);
    repo::git(&srv, &["update-ref", "-d", "refs/heads/lonely"]);
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let url = w.url();
    for (flag, name) in [
        (None, "follow"),
        (Some("--tags"), "tags"),
        (Some("--no-tags"), "no-tags"),
    ] {
        let by_git = w.empty(&format!("git-{name}.git"));
        let by_us = w.empty(&format!("us-{name}.git"));
        let mut args = vec![url.as_str(), spec];
        args.extend(flag);
        git_fetch(&by_git, &args);
        let mut ours = vec!["fetch", url.as_str(), spec, "--repo"];
        let dir = p(&by_us);
        ours.push(&dir);
        ours.extend(flag);
        let run = sluice(&ours);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(local_refs(&by_us), local_refs(&by_git), "{name}: {run:?}");
    }
    assert!(local_refs(&w.path("us-tags.git")).contains_key("refs/tags/lonely-tag"));
    assert!(!local_refs(&w.path("us-follow.git")).contains_key("refs/tags/lonely-tag"));
    assert!(!local_refs(&w.path("us-no-tags.git"))
        .keys()
        .any(|k| k.starts_with("refs/tags/")));

    // The server loses a branch and gains one: --prune deletes the stale
    // remote-tracking ref, as git's does, and prints it as git does.
    let by_git = w.path("git-follow.git");
    let by_us = w.path("us-follow.git");
    repo::git(&srv, &["branch", "-D", "feature"]);
    let added = repo::commit_on(&srv, "added", "a new branch");
    let git_lines = git_fetch(&by_git, &["--prune", &url, spec]);
    let run = sluice(&["fetch", &url, spec, "--repo", &p(&by_us), "--prune"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(local_refs(&by_us), local_refs(&by_git), "{run:?}");
    assert!(!local_refs(&by_us).contains_key("refs/remotes/origin/feature"));
    assert_eq!(
        repo::rev_parse(&by_us, "refs/remotes/origin/added").as_deref(),
        Some(added.as_str())
    );
    let ours = shapes(run.stderr.lines());
    assert_eq!(
        ours,
        shapes(git_lines.iter().map(String::as_str)),
        "{run:?}\n{git_lines:?}"
    );
    assert!(
        ours.iter()
            .any(|s| s.0 == "-" && s.1 == "[deleted]" && s.3 == "origin/feature"),
        "{ours:?}"
    );
    // Deleted lines come first, as git prints them.
    let first = run.stderr.lines().nth(1).unwrap_or("");
    assert!(first.starts_with(" - [deleted]"), "{run:?}");

    // The JSON names the pruned ref with the value it had.
    let by_us2 = w.path("us-tags.git");
    let old = repo::rev_parse(&by_us2, "refs/remotes/origin/feature").expect("still there");
    let doc = sluice(&[
        "fetch",
        &url,
        spec,
        "--repo",
        &p(&by_us2),
        "--prune",
        "--json",
    ])
    .json();
    check_document(&doc, "fetch", "read");
    let pruned: Vec<_> = doc["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "pruned")
        .cloned()
        .collect();
    assert_eq!(pruned.len(), 1, "{doc}");
    assert_eq!(pruned[0]["local_ref"], "refs/remotes/origin/feature");
    assert_eq!(pruned[0]["remote_ref"], "refs/heads/feature");
    assert_eq!(pruned[0]["old"], old.as_str());
    // --tags and --no-tags together are a usage error.
    let both = sluice(&[
        "fetch",
        &url,
        spec,
        "--repo",
        &p(&by_us2),
        "--tags",
        "--no-tags",
    ]);
    assert_eq!(both.code, 2, "{both:?}");
}

/// The lines of a run that look like fetch's ref lines, wherever they went
/// (stdout or stderr).
fn ref_lines(run: &Run) -> Vec<String> {
    run.stdout
        .lines()
        .chain(run.stderr.lines())
        .filter(|l| shape(l).is_some())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_fast_forward_a_force_and_a_moved_tag_print_as_git_prints_them() {
    let w = World::new();
    let srv = w.server();
    let url = w.url();
    let heads = "+refs/heads/*:refs/remotes/origin/*";
    let tags = "+refs/tags/*:refs/tags/*";
    let by_git = w.empty("by-git.git");
    let by_us = w.empty("by-us.git");
    let by_json = w.empty("by-json.git");
    for r in [&by_git, &by_us, &by_json] {
        git_fetch(r, &[url.as_str(), heads, tags]);
    }
    // main moves on, feature is rewritten, the tag `light` moves.
    let ff = repo::commit_on(&srv, "main", "ahead");
    repo::git(
        &srv,
        &["update-ref", "refs/heads/feature", "refs/heads/feature~1"],
    );
    let forced = repo::commit_on(&srv, "feature", "rewritten");
    repo::git(&srv, &["tag", "-f", "light", &ff]);

    let git_lines = git_fetch(&by_git, &[url.as_str(), heads, tags]);
    let run = sluice(&["fetch", &url, heads, tags, "--repo", &p(&by_us)]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(local_refs(&by_us), local_refs(&by_git), "{run:?}");
    let ours = ref_lines(&run);
    assert_eq!(
        shapes(ours.iter().map(String::as_str)),
        shapes(git_lines.iter().map(String::as_str)),
        "{run:?}\n{git_lines:?}"
    );
    // The very lines, whitespace aside (git pads to its widest summary).
    let squeeze = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut want: Vec<String> = git_lines
        .iter()
        .filter(|l| shape(l).is_some())
        .map(|l| squeeze(l))
        .collect();
    let mut got: Vec<String> = ours.iter().map(|l| squeeze(l)).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{run:?}");
    assert!(
        got.iter().any(|l| l.starts_with("t [tag update] light")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|l| !l.starts_with('+') && l.contains("..") && l.ends_with("main -> origin/main")),
        "a fast-forward through + is not forced: {got:?}"
    );
    assert!(
        got.iter()
            .any(|l| l.starts_with("+ ") && l.ends_with("-> origin/feature (forced update)")),
        "{got:?}"
    );

    let doc = sluice(&["fetch", &url, heads, tags, "--repo", &p(&by_json), "--json"]).json();
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["result"], "succeeded", "{doc}");
    let status = |name: &str| {
        doc["value"]
            .as_array()
            .expect("value")
            .iter()
            .find(|r| r["remote_ref"] == name)
            .unwrap_or_else(|| panic!("{name} in {doc}"))["status"]
            .clone()
    };
    assert_eq!(status("refs/heads/main"), "fast-forward");
    assert_eq!(status("refs/heads/feature"), "forced");
    assert_eq!(status("refs/tags/light"), "tag-update");
    assert_eq!(status("refs/tags/v1.0"), "up-to-date");
    assert_eq!(
        repo::rev_parse(&by_json, "refs/remotes/origin/feature").as_deref(),
        Some(forced.as_str())
    );
}
