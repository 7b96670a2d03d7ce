//! Push against a real `git daemon --enable=receive-pack`, checked on the
//! server with the git CLI.

use crate::common;

use common::*;
use sluice_git::{Lease, PushOptions, RefStatus, RejectReason};
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

#[test]
fn a_new_branch_is_created_and_the_server_is_fsck_clean() {
    let w = World::new();
    let srv = w.small("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "feature", "new work");
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/feature"),
        &local,
        &quick(20_000, 10_000, 3),
    );
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
        out.attempts.last().map(|a| a.phase.as_ref()),
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
    let out = push_with(
        &w.daemon.url("s.git"),
        &[
            update(Some(&tip), "refs/heads/main"),
            update(None, "refs/heads/dev"),
        ],
        &PushOptions::default(),
        &local,
        &quick(20_000, 10_000, 3),
    );
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
    let out = push(
        &w.daemon.url("s.git"),
        update(None, "refs/heads/dev"),
        &local,
        &quick(20_000, 10_000, 3),
    );
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
    let u = update(Some(&tip), "refs/heads/topic").with_lease(Lease::Absent);
    let url = w.daemon.url("s.git");
    let first = push(&url, u, &local, &quick(20_000, 10_000, 3));
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    let other = repo::commit_on(&local, "topic2", "u");
    let u = sluice_git::RefUpdate::create(oid(&other), "refs/heads/topic");
    let second = push(&url, u, &local, &quick(20_000, 10_000, 3));
    assert_eq!(second.kind, OutcomeKind::Answered);
    assert_eq!(second.attempts.len(), 1);
    let r = &second.value.expect("report").refs[0];
    assert_eq!(r.reason, Some(RejectReason::StaleInfo));
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
    let out = push_with(
        &w.daemon.url("s.git"),
        &[
            update(Some(&a), "refs/heads/main"),
            update(Some(&b), "refs/heads/dev"),
        ],
        &PushOptions {
            atomic: true,
            ..PushOptions::default()
        },
        &local,
        &quick(20_000, 10_000, 3),
    );
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
    let stale = update(Some(&b), "refs/heads/dev").with_lease(Lease::Oid(oid(&a)));
    let out = push_with(
        &w.daemon.url("s.git"),
        &[update(Some(&a), "refs/heads/main"), stale],
        &PushOptions {
            atomic: true,
            ..PushOptions::default()
        },
        &local,
        &quick(20_000, 10_000, 3),
    );
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
    let url = w.daemon.url("s.git");
    let out = push(
        &url,
        update(Some(&side), "refs/heads/dev"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    // side was made on top of HEAD (main), which is not a descendant of dev.
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.value);
    assert_eq!(
        out.value.as_ref().expect("report").refs[0].reason,
        Some(RejectReason::NonFastForward)
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/dev"), before);
    let forced = sluice_git::RefUpdate::force(Some(oid(&side)), "refs/heads/dev");
    let out = push(&url, forced, &local, &quick(20_000, 10_000, 3));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/dev").as_deref(),
        Some(side.as_str())
    );
    // With receive.denyNonFastForwards the server's own words come back.
    repo::set_config(&srv, "receive.denyNonFastForwards", "true");
    let forced =
        sluice_git::RefUpdate::force(Some(oid(&before.clone().expect("dev"))), "refs/heads/dev");
    let out = push(&url, forced, &local, &quick(20_000, 10_000, 3));
    assert_eq!(out.kind, OutcomeKind::Answered);
    let r = &out.value.expect("report").refs[0];
    assert_eq!(r.reason, Some(RejectReason::NonFastForward), "{r:?}");
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
    let u = update(Some(&ours), "refs/heads/main").with_lease(Lease::Oid(oid(&old)));
    let out = push(&w.daemon.url("s.git"), u, &local, &quick(20_000, 10_000, 3));
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
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.attempts.len(), 1);
    let r = &out.value.expect("report").refs[0];
    assert_eq!(r.reason, Some(RejectReason::HookDeclined), "{r:?}");
    assert!(
        r.message
            .as_deref()
            .unwrap_or_default()
            .contains("hook declined"),
        "{r:?}"
    );
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
    let out = push_main(&w, "ours.git", &local, &tip);
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
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&main), "refs/heads/copy"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(out.value.expect("report").pack.expect("a pack").objects, 0);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/copy").as_deref(),
        Some(main.as_str())
    );
}

/// Text files for the delta tests: `n` files of 100 numbered lines.
struct Files {
    files: Vec<Vec<String>>,
}

impl Files {
    fn new(n: usize) -> Files {
        Files {
            files: (0..n)
                .map(|f| {
                    (0..100)
                        .map(|l| format!("file {f} line {l}: some text that stays the same"))
                        .collect()
                })
                .collect(),
        }
    }

    fn blob(&self, f: usize) -> String {
        self.files[f].join("\n") + "\n"
    }
}

fn data(out: &mut String, text: &str) {
    out.push_str(&format!("data {}\n{text}\n", text.len()));
}

/// `commits` commits on `refs/heads/main` after `from`, written as loose
/// objects (fast-import explodes its pack below `fastimport.unpackLimit`),
/// each editing one line of one file, appending to `hot` (a chain longer
/// than git's depth of 50) and flipping `toggle` between two contents (a
/// file changed back and forth).
fn loose_edits(local: &std::path::Path, from: &str, files: &mut Files, commits: usize) -> String {
    let mut s = String::new();
    let mut hot = String::from("hot\n");
    for k in 0..commits {
        s.push_str("commit refs/heads/main\n");
        s.push_str(&format!(
            "committer T <t@example.com> {} +0000\n",
            1_700_000_000 + k
        ));
        data(&mut s, &format!("edit {k}"));
        if k == 0 {
            s.push_str(&format!("from {from}\n"));
        }
        let f = (k * 7) % files.files.len();
        let l = (k * 13) % 100;
        files.files[f][l] = format!("file {f} line {l}: edited in commit {k}");
        s.push_str(&format!("M 100644 inline dir/f{f}.txt\n"));
        data(&mut s, &files.blob(f));
        hot.push_str(&format!(
            "hot line {k}, a little longer than it needs to be\n"
        ));
        s.push_str("M 100644 inline hot.txt\n");
        data(&mut s, &hot);
        s.push_str("M 100644 inline toggle.txt\n");
        let toggle = if k % 2 == 0 {
            files.blob(0)
        } else {
            files.blob(1)
        };
        data(&mut s, &toggle);
    }
    import_loose(local, &s)
}

/// Runs a fast-import stream in `local` with its objects left loose (below
/// `fastimport.unpackLimit`, fast-import explodes its pack); returns main.
fn import_loose(local: &std::path::Path, stream: &str) -> String {
    repo::try_git_with_input(
        local,
        &[
            "-c",
            "fastimport.unpackLimit=100000",
            "fast-import",
            "--quiet",
        ],
        stream.as_bytes(),
    )
    .expect("fast-import");
    repo::rev_parse(local, "refs/heads/main").expect("main")
}

/// Pushes `tip` to `refs/heads/main` of the world's repository `name`.
fn push_main(
    w: &World,
    name: &str,
    local: &std::path::Path,
    tip: &str,
) -> sluice_policy::Outcome<sluice_git::PushReport> {
    push(
        &w.daemon.url(name),
        update(Some(tip), "refs/heads/main"),
        local,
        &quick(60_000, 30_000, 3),
    )
}

/// A base commit (20 files), on the server and locally.
fn delta_world(w: &World) -> (std::path::PathBuf, std::path::PathBuf, Files, String) {
    let srv = repo::init_bare(&w.srv("s.git")).expect("init");
    let local = repo::init_bare(&w.path("local.git")).expect("init");
    let files = Files::new(20);
    let mut s =
        String::from("commit refs/heads/main\ncommitter T <t@example.com> 1600000000 +0000\n");
    data(&mut s, "base");
    for f in 0..20 {
        s.push_str(&format!("M 100644 inline dir/f{f}.txt\n"));
        data(&mut s, &files.blob(f));
    }
    s.push_str("M 100644 inline toggle.txt\n");
    data(&mut s, "neither\n");
    repo::try_git_with_input(&local, &["fast-import", "--quiet"], s.as_bytes()).expect("base");
    repo::git(
        &local,
        &["push", "-q", &srv.display().to_string(), "refs/heads/main"],
    );
    let base = repo::rev_parse(&local, "refs/heads/main").expect("main");
    (srv, local, files, base)
}

/// Bytes of git's own thin pack for `new ^old` (its delta search).
fn git_thin_pack_bytes(local: &std::path::Path, new: &str, old: &str) -> usize {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(local)
        .args(["pack-objects", "--revs", "--thin", "--stdout", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(format!("{new}\n^{old}\n").as_bytes())?;
            c.wait_with_output()
        })
        .expect("git pack-objects");
    assert!(out.status.success());
    out.stdout.len()
}

#[test]
fn loose_commits_go_as_deltas_the_server_accepts() {
    let w = World::new();
    let (srv, local, mut files, base) = delta_world(&w);
    // Past twice the commits one counting thread takes: on two or more
    // cores the walk is counted in parts, joined without repeats.
    let tip = loose_edits(&local, &base, &mut files, 130);
    let loose: usize = repo::git(&local, &["count-objects"])
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("count-objects");
    assert!(loose >= 390, "the new objects are loose ({loose})");
    let out = push_main(&w, "s.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    repo::fsck(&srv).expect("fsck clean");
    let objects = |p: &std::path::Path| {
        let mut v: Vec<String> = repo::git(p, &["rev-list", "--objects", "--all"])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(objects(&srv), objects(&local));
    let pack = out.value.expect("report").pack.expect("a pack");
    let git_bytes = git_thin_pack_bytes(&local, &tip, &base);
    // Whole, these objects take several times git's bytes; deltas bring
    // them near git's own delta search.
    assert!(
        (pack.bytes as f64) < git_bytes as f64 * 1.3,
        "{} bytes against git's {git_bytes}",
        pack.bytes
    );
    // Over receive.unpackLimit the server kept our pack: its chains stay
    // within git's depth of 50 (the appended thin bases add one).
    let packs: Vec<_> = std::fs::read_dir(srv.join("objects/pack"))
        .expect("pack dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .collect();
    let mut deepest = 0;
    for idx in &packs {
        for line in repo::git(&srv, &["verify-pack", "-v", &idx.display().to_string()]).lines() {
            if let Some(rest) = line.strip_prefix("chain length = ") {
                let n: usize = rest
                    .split(':')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("n");
                deepest = deepest.max(n);
            }
        }
    }
    assert!(deepest >= 10, "long chains were built ({deepest})");
    assert!(deepest <= 51, "chains within depth ({deepest})");
}

#[test]
fn a_few_loose_commits_go_thin_through_unpack_objects() {
    let w = World::new();
    let (srv, local, mut files, base) = delta_world(&w);
    let tip = loose_edits(&local, &base, &mut files, 4);
    let out = push_main(&w, "s.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    repo::fsck(&srv).expect("fsck clean");
    let pack = out.value.expect("report").pack.expect("a pack");
    let git_bytes = git_thin_pack_bytes(&local, &tip, &base);
    assert!(
        (pack.bytes as f64) < git_bytes as f64 * 1.3,
        "{} bytes against git's {git_bytes}",
        pack.bytes
    );
}

#[test]
fn a_merge_with_renames_deletions_and_a_file_become_directory_arrives_complete() {
    let w = World::new();
    let (srv, local, _files, base) = delta_world(&w);
    let mut s = String::new();
    let text = |n: usize, salt: &str| -> String {
        (0..n)
            .map(|i| format!("{salt} line {i} with enough text to be worth a delta\n"))
            .collect()
    };
    // A side branch adding a deep directory and editing a file.
    s.push_str("commit refs/heads/side\ncommitter T <t@example.com> 1700000001 +0000\n");
    data(&mut s, "side");
    s.push_str(&format!("from {base}\n"));
    s.push_str("M 100644 inline new/deep/x.txt\n");
    data(&mut s, &text(50, "deep"));
    s.push_str("M 100644 inline dir/f3.txt\n");
    data(&mut s, &text(80, "three"));
    // Main edits another file.
    s.push_str("commit refs/heads/main\ncommitter T <t@example.com> 1700000002 +0000\n");
    data(&mut s, "main");
    s.push_str(&format!("from {base}\n"));
    s.push_str("M 100644 inline dir/f4.txt\n");
    data(&mut s, &text(60, "four"));
    // The merge: takes the side's files, renames, deletes, and turns the
    // file `toggle.txt` into a directory.
    s.push_str("commit refs/heads/main\ncommitter T <t@example.com> 1700000003 +0000\n");
    data(&mut s, "merge");
    s.push_str("from refs/heads/main^0\nmerge refs/heads/side\n");
    s.push_str("M 100644 inline new/deep/x.txt\n");
    data(&mut s, &text(50, "deep"));
    s.push_str("M 100644 inline dir/f3.txt\n");
    data(&mut s, &text(80, "three"));
    s.push_str("R dir/f5.txt dir/renamed.txt\nD dir/f6.txt\nD toggle.txt\n");
    s.push_str("M 100755 inline toggle.txt/now-a-dir.sh\n");
    data(&mut s, "#!/bin/sh\necho hello\n");
    let tip = import_loose(&local, &s);
    let out = push_main(&w, "s.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    repo::fsck(&srv).expect("fsck clean: nothing missing");
    let objects = |p: &std::path::Path, rev: &str| {
        let mut v: Vec<String> = repo::git(p, &["rev-list", "--objects", rev])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(objects(&srv, "main"), objects(&local, "main"));
    // The new objects went, and one more: the renamed file's blob, which
    // the remote has under its old name (counting compares paths; git's
    // own counting marks every object of the boundary trees instead).
    let needed = repo::git(
        &local,
        &["rev-list", "--objects", &tip, &format!("^{base}")],
    )
    .lines()
    .count() as u64;
    assert_eq!(
        out.value.expect("report").pack.expect("pack").objects,
        needed + 1
    );
}

/// The size of the only pack of a repository.
fn only_pack_size(repo: &std::path::Path) -> u64 {
    let packs: Vec<_> = std::fs::read_dir(repo.join("objects/pack"))
        .expect("pack dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    std::fs::metadata(&packs[0]).expect("pack").len()
}

#[test]
fn a_repacked_history_with_bitmaps_goes_whole_into_an_empty_repo() {
    let w = World::new();
    let local = sluice_testkit::RepoBuilder::new()
        .branch("main", 300)
        .build(&w.path("big.git"))
        .expect("builds");
    repo::git(&local, &["repack", "-adbq"]);
    repo::init_bare(&w.srv("ours.git")).expect("init");
    let tip = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let out = push_main(&w, "ours.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    repo::fsck(&w.srv("ours.git")).expect("fsck clean");
    let objects = |p: &std::path::Path| {
        let mut v: Vec<String> = repo::git(p, &["rev-list", "--objects", "--all"])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    assert_eq!(objects(&w.srv("ours.git")), objects(&local));
    // The bitmap showed main reaches the whole pack: the file went as it is.
    let pack = out.value.expect("report").pack.expect("pack");
    assert_eq!(pack.bytes, only_pack_size(&local));
}

#[test]
fn a_pack_holding_more_than_the_tip_reaches_is_counted_not_sent_whole() {
    let w = World::new();
    let local = sluice_testkit::RepoBuilder::new()
        .branch("main", 100)
        .branch_from("other", "main", 20)
        .build(&w.path("big.git"))
        .expect("builds");
    repo::git(&local, &["repack", "-adbq"]);
    repo::init_bare(&w.srv("ours.git")).expect("init");
    let tip = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let out = push_main(&w, "ours.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    repo::fsck(&w.srv("ours.git")).expect("fsck clean");
    assert!(repo::rev_parse(&w.srv("ours.git"), "refs/heads/other").is_none());
    let sent = out.value.expect("report").pack.expect("pack");
    let main_objects = repo::git(&local, &["rev-list", "--objects", "main"])
        .lines()
        .count() as u64;
    assert_eq!(sent.objects, main_objects);
    assert!(sent.bytes < only_pack_size(&local));
}

#[test]
fn a_skewed_clock_and_a_merge_send_exactly_the_new_objects() {
    let w = World::new();
    let (srv, local, _files, base) = delta_world(&w);
    let mut s = String::new();
    // A commit dated long before its parent (a wrong clock), then one
    // dated normally; a side branch; and a merge of the two.
    let commit = |s: &mut String, branch: &str, time: u64, msg: &str| {
        s.push_str(&format!(
            "commit refs/heads/{branch}\ncommitter T <t@example.com> {time} +0000\n"
        ));
        data(s, msg);
    };
    commit(&mut s, "main", 1_000_000_000, "skewed");
    s.push_str(&format!("from {base}\nM 100644 inline skew.txt\n"));
    data(&mut s, "written on a machine whose clock was wrong\n");
    commit(&mut s, "main", 1_700_000_000, "after");
    s.push_str("M 100644 inline dir/f2.txt\n");
    data(&mut s, "replaced\n");
    commit(&mut s, "side", 1_700_000_001, "side");
    s.push_str(&format!("from {base}\nM 100644 inline side.txt\n"));
    data(&mut s, "from the side\n");
    commit(&mut s, "main", 1_700_000_002, "merge");
    s.push_str("from refs/heads/main^0\nmerge refs/heads/side\nM 100644 inline side.txt\n");
    data(&mut s, "from the side\n");
    let tip = import_loose(&local, &s);
    let out = push_main(&w, "s.git", &local, &tip);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    repo::fsck(&srv).expect("fsck clean: nothing missing");
    let needed = repo::git(
        &local,
        &["rev-list", "--objects", &tip, &format!("^{base}")],
    )
    .lines()
    .count() as u64;
    assert_eq!(
        out.value.expect("report").pack.expect("pack").objects,
        needed
    );
}

#[test]
fn a_bitmapped_pack_answers_an_incremental_push_renamed_files_included() {
    let w = World::new();
    let (srv, local, mut files, base) = delta_world(&w);
    // 150 commits (past git's bitmap spacing of about 100, so some commits
    // have no bitmap of their own), then a merge that renames a file.
    let edits = loose_edits(&local, &base, &mut files, 150);
    let mut s = String::new();
    s.push_str("commit refs/heads/side\ncommitter T <t@example.com> 1700000500 +0000\n");
    data(&mut s, "side");
    s.push_str(&format!("from {edits}\n"));
    s.push_str("M 100644 inline new/deep/x.txt\n");
    data(&mut s, "deep\n");
    s.push_str("commit refs/heads/main\ncommitter T <t@example.com> 1700000501 +0000\n");
    data(&mut s, "merge");
    s.push_str(&format!("from {edits}\nmerge refs/heads/side\n"));
    s.push_str("M 100644 inline new/deep/x.txt\n");
    data(&mut s, "deep\n");
    s.push_str("R dir/f5.txt dir/renamed.txt\n");
    let tip = import_loose(&local, &s);
    repo::git(&local, &["repack", "-adbq"]);
    let middle = repo::rev_parse(&local, "refs/heads/main~40").expect("main~40");
    let needed = |new: &str, old: &str| {
        repo::git(&local, &["rev-list", "--objects", new, &format!("^{old}")])
            .lines()
            .count() as u64
    };
    let objects = |p: &std::path::Path, rev: &str| {
        let mut v: Vec<String> = repo::git(p, &["rev-list", "--objects", rev])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    for (new, old) in [(&middle, &base), (&tip, &middle)] {
        let out = push_main(&w, "s.git", &local, new);
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
        repo::fsck(&srv).expect("fsck clean: nothing missing");
        assert_eq!(objects(&srv, "main"), objects(&local, new));
        // Exactly the new objects: the bitmaps know the remote has the
        // renamed file's blob (counting by path would send it again).
        let sent = out.value.expect("report").pack.expect("pack");
        assert_eq!(sent.objects, needed(new, old), "{new} ^{old}");
        // As the pack stores them: about git's own bytes.
        let git_bytes = git_thin_pack_bytes(&local, new, old) as f64;
        assert!(
            (sent.bytes as f64) < git_bytes * 1.3,
            "{} bytes against git's {git_bytes}",
            sent.bytes
        );
    }
}
