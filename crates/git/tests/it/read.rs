//! ls-refs and fetch against a real git daemon.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use sluice_policy::OutcomeKind;

fn as_ls_remote(refs: &[sluice_git::RemoteRef]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for r in refs {
        if let Some(oid) = r.oid {
            m.insert(r.name.clone(), oid.to_string());
        }
        if let Some(p) = r.peeled {
            m.insert(format!("{}^{{}}", r.name), p.to_string());
        }
    }
    m
}

#[test]
fn ls_refs_equals_git_ls_remote_ref_for_ref() {
    let w = World::new();
    w.small("small.git");
    let url = w.daemon.url("small.git");
    let out = client()
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    let refs = out.value.expect("refs");
    let ours = as_ls_remote(&refs);
    let theirs = sluice_testkit::repo::ls_remote(w.dir.path(), &url).expect("git ls-remote");
    assert_eq!(ours, theirs);
    let head = refs.iter().find(|r| r.name == "HEAD").expect("HEAD listed");
    assert_eq!(head.symref_target.as_deref(), Some("refs/heads/main"));
    assert!(refs
        .iter()
        .any(|r| r.name == "refs/tags/v1.0" && r.peeled.is_some()));
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].phase, "done");
}

#[test]
fn ls_refs_with_a_prefix_lists_only_that_prefix() {
    let w = World::new();
    w.small("small.git");
    let out = client()
        .ls_refs(
            &w.daemon.url("small.git"),
            &["refs/heads/".into()],
            &quick(10_000, 5_000, 3),
        )
        .expect("valid input");
    let names: Vec<_> = out
        .value
        .expect("refs")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, vec!["refs/heads/dev", "refs/heads/main"]);
}

#[test]
fn a_missing_repository_is_answered_after_one_connection() {
    let w = World::new();
    let out = client()
        .ls_refs(&w.daemon.url("nope.git"), &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].phase, "connect");
}

#[test]
fn a_missing_repository_over_file_is_answered_with_the_servers_words() {
    let w = World::new();
    let url = format!("file://{}", w.path("absent.git").display());
    let out = client()
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(
        cause.contains("not appear to be a git repository") || cause.contains("absent"),
        "{cause}"
    );
}

#[test]
fn fetch_into_an_empty_repo_is_complete_and_fsck_clean() {
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("dst.git");
    let repo = empty_repo(&dst);
    let out = client()
        .fetch(
            &w.daemon.url("small.git"),
            &[
                "+refs/heads/*:refs/remotes/origin/*".into(),
                "+refs/tags/*:refs/tags/*".into(),
            ],
            &repo,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    sluice_testkit::repo::fsck(&dst).expect("fsck clean");
    for (name, oid) in sluice_testkit::repo::refs(&src) {
        if let Some(b) = name.strip_prefix("refs/heads/") {
            assert_eq!(
                sluice_testkit::repo::rev_parse(&dst, &format!("refs/remotes/origin/{b}"))
                    .as_deref(),
                Some(oid.as_str())
            );
        }
    }
    assert_eq!(out.attempts[0].phase, "done");
}

#[test]
fn fetch_with_a_catch_all_refspec_brings_every_ref() {
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("mirror.git");
    let repo = empty_repo(&dst);
    let out = client()
        .fetch(
            &w.daemon.url("small.git"),
            &["+refs/*:refs/*".into()],
            &repo,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(
        sluice_testkit::repo::refs(&dst),
        sluice_testkit::repo::refs(&src)
    );
}

#[test]
fn an_incremental_fetch_transfers_only_the_new_objects_and_reports_progress() {
    use std::sync::{Arc, Mutex};
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("dst.git");
    let repo = empty_repo(&dst);
    let url = w.daemon.url("small.git");
    let specs = vec!["+refs/heads/*:refs/remotes/origin/*".to_string()];
    let first = client()
        .fetch(&url, &specs, &repo, &quick(20_000, 10_000, 3))
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    let old = sluice_testkit::repo::rev_parse(&src, "refs/heads/main").expect("main");
    sluice_testkit::repo::commit_on(&src, "main", "one");
    let new = sluice_testkit::repo::commit_on(&src, "main", "two");
    let expected =
        sluice_testkit::repo::git(&src, &["rev-list", "--objects", &new, &format!("^{old}")])
            .lines()
            .count() as u64;
    let seen: Arc<Mutex<Vec<sluice_git::Progress>>> = Arc::default();
    let mut opts = quick(20_000, 10_000, 3);
    let sink = Arc::clone(&seen);
    opts = opts.progress(Arc::new(move |p: &sluice_git::Progress| {
        sink.lock().expect("lock").push(p.clone())
    }));
    let repo = gix::open(&dst).expect("reopen");
    let second = client()
        .fetch(&url, &specs, &repo, &opts)
        .expect("valid input");
    assert_eq!(second.kind, OutcomeKind::Succeeded, "{:?}", second.error);
    let events = seen.lock().expect("lock").clone();
    let received = events
        .iter()
        .rev()
        .find(|p| p.stage == "received")
        .expect("a final progress event")
        .objects;
    assert_eq!(received, expected, "{events:?}");
    assert_eq!(
        sluice_testkit::repo::rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
        Some(new.as_str())
    );
    sluice_testkit::repo::fsck(&dst).expect("fsck clean");
}

#[test]
fn a_fetch_into_a_repository_with_many_refs_negotiates_from_its_own_refs() {
    use std::sync::{Arc, Mutex};
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("dst.git");
    let repo = empty_repo(&dst);
    let url = w.daemon.url("small.git");
    let specs = vec!["+refs/heads/*:refs/remotes/origin/*".to_string()];
    let first = client()
        .fetch(&url, &specs, &repo, &quick(20_000, 10_000, 3))
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    // 1,500 refs of the local repository's own, packed: past the 64 KiB of
    // `packed-refs` where the negotiation starts from HEAD and the fetch's
    // own local refs instead of every ref.
    let old = sluice_testkit::repo::rev_parse(&src, "refs/heads/main").expect("main");
    let mut input = String::new();
    for i in 0..1_500 {
        input.push_str(&format!("create refs/keep/many-{i:05} {old}\n"));
    }
    sluice_testkit::repo::try_git_with_input(&dst, &["update-ref", "--stdin"], input.as_bytes())
        .expect("git update-ref");
    sluice_testkit::repo::git(&dst, &["pack-refs", "--all"]);
    let packed = std::fs::metadata(dst.join("packed-refs"))
        .expect("packed-refs")
        .len();
    assert!(packed > 64 << 10, "packed-refs is {packed} bytes");
    sluice_testkit::repo::commit_on(&src, "main", "one");
    let new = sluice_testkit::repo::commit_on(&src, "main", "two");
    let expected =
        sluice_testkit::repo::git(&src, &["rev-list", "--objects", &new, &format!("^{old}")])
            .lines()
            .count() as u64;
    let seen: Arc<Mutex<Vec<sluice_git::Progress>>> = Arc::default();
    let mut opts = quick(20_000, 10_000, 3);
    let sink = Arc::clone(&seen);
    opts = opts.progress(Arc::new(move |p: &sluice_git::Progress| {
        sink.lock().expect("lock").push(p.clone())
    }));
    let repo = gix::open(&dst).expect("reopen");
    let second = client()
        .fetch(&url, &specs, &repo, &opts)
        .expect("valid input");
    assert_eq!(second.kind, OutcomeKind::Succeeded, "{:?}", second.error);
    let received = seen
        .lock()
        .expect("lock")
        .iter()
        .rev()
        .find(|p| p.stage == "received")
        .expect("a final progress event")
        .objects;
    // Only what the local refs do not reach: the negotiation found them.
    assert_eq!(received, expected);
    assert_eq!(
        sluice_testkit::repo::rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
        Some(new.as_str())
    );
    sluice_testkit::repo::fsck(&dst).expect("fsck clean");
}

#[test]
fn fetches_through_one_open_repository_see_the_packs_earlier_fetches_wrote() {
    // A service keeps its repository open between calls: each fetch's
    // negotiation must find the objects the previous fetches stored (it
    // once failed with "object could not be found" for the remote-tracking
    // ref the previous fetch had just set; then again once the repository
    // held more packs than the open handle's object store had slots for,
    // at least 32: every fetch adds a pack).
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("dst.git");
    let repo = empty_repo(&dst);
    let url = w.daemon.url("small.git");
    let specs = vec!["+refs/heads/*:refs/remotes/origin/*".to_string()];
    for round in 0..40 {
        let old = sluice_testkit::repo::rev_parse(&src, "refs/heads/main").expect("main");
        let new = if round == 0 {
            old.clone()
        } else {
            sluice_testkit::repo::commit_on(&src, "main", &format!("round {round}"))
        };
        let out = client()
            .fetch(&url, &specs, &repo, &quick(20_000, 10_000, 1))
            .expect("valid input");
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "round {round}: {:?}",
            out.error
        );
        assert_eq!(out.attempts.len(), 1, "round {round}");
        assert_eq!(
            sluice_testkit::repo::rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
            Some(new.as_str())
        );
    }
    sluice_testkit::repo::fsck(&dst).expect("fsck clean");
}

fn keep_files(repo: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(repo.join("objects/pack"))
        .expect("pack dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "keep") || p.to_string_lossy().contains("tmp_")
        })
        .collect()
}

#[test]
fn fetch_updates_refs_as_git_fetch_does() {
    use sluice_testkit::repo::{commit_on, git, reflog_entries, rev_parse};
    let w = World::new();
    let src = w.small("small.git");
    let dst = w.path("dst.git");
    let repo = empty_repo(&dst);
    let url = w.daemon.url("small.git");
    let unforced = vec![
        "refs/heads/*:refs/remotes/origin/*".to_string(),
        "refs/tags/*:refs/tags/*".to_string(),
    ];
    let fetch = |specs: &[String], kind: OutcomeKind| {
        let repo = gix::open(&dst).expect("open");
        let out = client()
            .fetch(&url, specs, &repo, &quick(20_000, 10_000, 3))
            .expect("valid input");
        assert_eq!(out.kind, kind, "{:?}", out.error);
        out
    };
    drop(repo);
    // Created, with our reflog message, and no .keep left behind.
    let _ = fetch(&unforced, OutcomeKind::Succeeded);
    let main0 = rev_parse(&src, "refs/heads/main").expect("main");
    let dev0 = rev_parse(&src, "refs/heads/dev").expect("dev");
    let light0 = rev_parse(&src, "refs/tags/light").expect("light");
    assert_eq!(
        rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
        Some(main0.as_str())
    );
    assert_eq!(
        rev_parse(&dst, "refs/tags/light").as_deref(),
        Some(light0.as_str())
    );
    let log = reflog_entries(&dst, "refs/remotes/origin/main");
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].message.starts_with("sluice-remote fetch"), "{log:?}");
    assert_eq!(keep_files(&dst), Vec::<std::path::PathBuf>::new());

    // main rewritten (not a fast-forward), dev advanced, a tag moved.
    git(
        &src,
        &["update-ref", "refs/heads/main", &format!("{main0}~2")],
    );
    let main1 = commit_on(&src, "main", "rewritten");
    let dev1 = commit_on(&src, "dev", "advanced");
    git(&src, &["update-ref", "refs/tags/light", &main1]);
    // Refused refs are the fetch's answer; the others still update.
    let out = fetch(&unforced, OutcomeKind::Answered);
    let main1_id = gix::ObjectId::from_hex(main1.as_bytes()).expect("hex");
    let v = out.value.expect("refs");
    let main = v
        .iter()
        .find(|r| r.remote_ref == "refs/heads/main")
        .expect("main");
    assert_eq!(main.oid, main1_id);
    assert_eq!(main.status, sluice_git::FetchStatus::Rejected);
    assert_eq!(main.old.map(|o| o.to_string()), Some(main0.clone()));
    assert_eq!(
        rev_parse(&dst, "refs/remotes/origin/dev").as_deref(),
        Some(dev1.as_str())
    );
    assert_eq!(
        rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
        Some(main0.as_str())
    );
    assert_eq!(
        rev_parse(&dst, "refs/tags/light").as_deref(),
        Some(light0.as_str())
    );
    assert_ne!(dev0, dev1);
    assert_eq!(keep_files(&dst), Vec::<std::path::PathBuf>::new());

    // Forced: both move.
    let forced: Vec<String> = unforced.iter().map(|s| format!("+{s}")).collect();
    let _ = fetch(&forced, OutcomeKind::Succeeded);
    assert_eq!(
        rev_parse(&dst, "refs/remotes/origin/main").as_deref(),
        Some(main1.as_str())
    );
    assert_eq!(
        rev_parse(&dst, "refs/tags/light").as_deref(),
        Some(main1.as_str())
    );
    let log = reflog_entries(&dst, "refs/remotes/origin/main");
    assert_eq!(log.last().map(|e| e.new.as_str()), Some(main1.as_str()));
    assert!(
        log.iter()
            .all(|e| e.message.starts_with("sluice-remote fetch")),
        "{log:?}"
    );
    sluice_testkit::repo::fsck(&dst).expect("fsck clean");
}
