//! Maintenance: a repository fetched into again and again keeps few packs
//! (the small ones consolidated in-process after a fetch, as git's
//! `gc --auto` with `repack --geometric=2`), nothing lost, beside `git gc`,
//! a handle kept open and other processes fetching.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use sluice_git::{AfterFetch, FetchOptions, Maintained};
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

/// Packs of `repo` as git's `gc --auto` counts them (no `.keep`).
fn packs(repo: &Path) -> Vec<PathBuf> {
    let dir = repo.join("objects/pack");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("pack dir")
        .filter_map(|e| {
            let p = e.expect("entry").path();
            (p.extension().is_some_and(|x| x == "pack") && !p.with_extension("keep").exists())
                .then_some(p)
        })
        .collect();
    out.sort();
    out
}

/// A served repository with one commit on `main`.
fn served(w: &World) -> PathBuf {
    let srv = w.srv("s.git");
    repo::init_bare(&srv).expect("init");
    repo::commit_on(&srv, "main", "first");
    srv
}

/// A new commit on the server's `main`, fetched into `local` as
/// `refs/fetched/<n>`; the commit.
fn one_more(
    w: &World,
    srv: &Path,
    local: &sluice_git::gix::Repository,
    n: usize,
    fetch: &FetchOptions,
) -> String {
    let tip = repo::commit_on(srv, "main", &format!("commit {n}"));
    let out = client()
        .fetch_with(
            &w.daemon.url("s.git"),
            &[format!("+refs/heads/main:refs/fetched/{n}")],
            local,
            fetch,
            &quick(30_000, 15_000, 1),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    tip
}

fn assert_every_ref_resolves(local: &Path, tips: &[String]) {
    for (n, tip) in tips.iter().enumerate() {
        assert_eq!(
            repo::rev_parse(local, &format!("refs/fetched/{n}^{{commit}}")).as_deref(),
            Some(tip.as_str()),
            "refs/fetched/{n}"
        );
    }
}

#[test]
fn sixty_fetches_with_a_pack_limit_of_eight_leave_at_most_nine_packs_and_lose_nothing() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "8");
    let mut tips = Vec::new();
    let mut most = 0;
    for n in 0..60 {
        tips.push(one_more(&w, &srv, &local, n, &FetchOptions::default()));
        let now = packs(&path).len();
        assert!(now <= 9, "{now} packs after fetch {n}");
        most = most.max(now);
    }
    assert!(most >= 8, "the packs never came near the limit: {most}");
    repo::fsck(&path).expect("git fsck --full is clean");
    assert_every_ref_resolves(&path, &tips);
    // Every object the server holds is here (none dropped), in packs.
    let count = |p: &Path| {
        repo::git(p, &["rev-list", "--objects", "--all"])
            .lines()
            .count()
    };
    assert_eq!(count(&path), count(&srv));
    assert!(!path.join("gc.pid").exists(), "gc.pid is left behind");
    // Delta chains no deeper than git's pack.depth (50): each tree is a
    // delta of the one before, and rolled-up packs would chain them all.
    let mut deepest = 0;
    for idx in packs(&path) {
        let v = repo::git(
            &path,
            &[
                "verify-pack",
                "-v",
                &idx.with_extension("idx").display().to_string(),
            ],
        );
        for line in v.lines() {
            if let Some(rest) = line.strip_prefix("chain length = ") {
                let n: usize = rest
                    .split(':')
                    .next()
                    .expect("n")
                    .trim()
                    .parse()
                    .expect("a number");
                deepest = deepest.max(n);
            }
        }
    }
    assert!(deepest <= 50, "a delta chain of {deepest}");
}

#[test]
fn with_gc_auto_zero_no_fetch_consolidates_and_maintain_says_off() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "8");
    repo::set_config(&path, "gc.auto", "0");
    let tips: Vec<String> = (0..12)
        .map(|n| one_more(&w, &srv, &local, n, &FetchOptions::default()))
        .collect();
    assert_eq!(packs(&path).len(), 12);
    assert_eq!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::Off
    );
    assert_eq!(packs(&path).len(), 12);
    // maintenance.auto=false and gc.autoPackLimit=0 turn it off too.
    repo::set_config(&path, "gc.auto", "6700");
    repo::set_config(&path, "maintenance.auto", "false");
    assert_eq!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::Off
    );
    repo::set_config(&path, "maintenance.auto", "true");
    repo::set_config(&path, "gc.autoPackLimit", "0");
    assert_eq!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::Off
    );
    assert_eq!(packs(&path).len(), 12);
    assert_every_ref_resolves(&path, &tips);
}

#[test]
fn a_fetch_with_maintenance_off_leaves_its_packs_to_maintain_called_later() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "8");
    let off = FetchOptions {
        maintenance: AfterFetch::Off,
        ..FetchOptions::default()
    };
    let tips: Vec<String> = (0..12)
        .map(|n| one_more(&w, &srv, &local, n, &off))
        .collect();
    assert_eq!(packs(&path).len(), 12);
    let before = packs(&path);
    match sluice_git::maintain(&local).expect("maintain") {
        Maintained::Consolidated {
            taken,
            objects,
            packs: left,
        } => {
            // Twelve packs of one commit each (a commit, a tree, a blob;
            // the first fetch two commits' worth): all rolled up.
            assert_eq!(taken, 12);
            assert_eq!(left, 1);
            assert!(objects >= 36, "{objects}");
        }
        other => panic!("expected a consolidation: {other:?}"),
    }
    let after = packs(&path);
    assert_eq!(after.len(), 1);
    assert!(before.iter().all(|p| !p.exists()), "an old pack is left");
    assert!(
        !path.join("objects/pack").read_dir().expect("dir").any(|e| {
            let name = e.expect("entry").file_name();
            let name = name.to_string_lossy();
            name.starts_with("tmp_") || name.ends_with(".keep")
        }),
        "a temporary file or a .keep is left"
    );
    // Nothing more to do: below the limit.
    assert_eq!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::NotNeeded { packs: 1, limit: 8 }
    );
    repo::fsck(&path).expect("fsck");
    assert_every_ref_resolves(&path, &tips);
}

/// The pack index names a `multi-pack-index` lists.
fn midx_names(path: &Path) -> Vec<String> {
    let midx = sluice_git::gix::odb::pack::multi_index::File::at(
        path.join("objects/pack/multi-pack-index"),
        None,
    )
    .expect("the multi-pack-index reads");
    let mut names: Vec<String> = midx
        .index_names()
        .iter()
        .map(|n| n.display().to_string())
        .collect();
    names.sort();
    names
}

fn idx_name(pack: &Path) -> String {
    pack.with_extension("idx")
        .file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn packs_with_a_keep_or_a_promisor_stay_and_a_multi_pack_index_naming_a_taken_pack_is_written_again(
) {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "4");
    let off = FetchOptions {
        maintenance: AfterFetch::Off,
        ..FetchOptions::default()
    };
    let tips: Vec<String> = (0..8)
        .map(|n| one_more(&w, &srv, &local, n, &off))
        .collect();
    let all = packs(&path);
    assert_eq!(all.len(), 8);
    let (kept, promised) = (all[0].clone(), all[1].clone());
    std::fs::write(kept.with_extension("keep"), "").expect("keep");
    // With a bitmap (and its reverse index), which name the file's
    // checksum; before the `.promisor` (git 2.47.3's `multi-pack-index
    // write --bitmap` dies of a segmentation fault beside a promisor pack).
    repo::git(&path, &["multi-pack-index", "write", "--bitmap"]);
    std::fs::write(promised.with_extension("promisor"), "").expect("promisor");
    let midx = path.join("objects/pack/multi-pack-index");
    assert!(midx.exists());
    assert_eq!(midx_names(&path).len(), 8);
    let bitmaps = || {
        std::fs::read_dir(path.join("objects/pack"))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("multi-pack-index-"))
            .collect::<Vec<_>>()
    };
    assert!(!bitmaps().is_empty(), "git wrote a bitmap");
    match sluice_git::maintain(&local).expect("maintain") {
        // Seven counted (the kept one is not), six taken (nor the promisor).
        Maintained::Consolidated { taken, packs, .. } => {
            assert_eq!(taken, 6);
            assert_eq!(packs, 2, "the promisor pack and the new one");
        }
        other => panic!("expected a consolidation: {other:?}"),
    }
    assert!(kept.exists() && kept.with_extension("idx").exists());
    assert!(promised.exists() && promised.with_extension("idx").exists());
    let mut left: Vec<PathBuf> = std::fs::read_dir(path.join("objects/pack"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    left.sort();
    assert_eq!(left.len(), 3);
    // Written again: present, naming exactly the packs left (the kept,
    // the promisor and the new one), none removed; its old bitmap gone.
    assert!(
        midx.exists(),
        "the multi-pack-index was removed, not written again"
    );
    let mut want: Vec<String> = left.iter().map(|p| idx_name(p)).collect();
    want.sort();
    assert_eq!(midx_names(&path), want);
    assert!(!midx.with_extension("lock").exists());
    assert_eq!(bitmaps(), Vec::<String>::new(), "a bitmap of the old file");
    repo::git(&path, &["multi-pack-index", "verify"]);
    repo::fsck(&path).expect("fsck");
    assert_every_ref_resolves(&path, &tips);
    // The handle kept open through it reads every fetched commit, and so
    // does one opened now (gix reads packs through the new file).
    for (n, tip) in tips.iter().enumerate() {
        local
            .find_object(oid(tip))
            .unwrap_or_else(|e| panic!("commit {n} through the kept handle: {e}"));
        assert!(open(&path).has_object(oid(tip)), "commit {n}, a new handle");
    }
    // git reads its objects through it, and writes it again itself.
    assert_eq!(
        repo::git(&path, &["cat-file", "-t", &tips[0]]),
        "commit",
        "an object of a removed pack"
    );
    repo::git(&path, &["multi-pack-index", "write"]);
    repo::git(&path, &["multi-pack-index", "verify"]);
}

/// git's `multi-pack-index.lock` held (a `git multi-pack-index write`
/// running): the consolidation fails before removing anything, the
/// multi-pack-index untouched; once the lock is gone the next one goes
/// through and writes it again.
#[test]
fn a_multi_pack_index_lock_held_stops_the_consolidation_before_anything_is_removed() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "4");
    let off = FetchOptions {
        maintenance: AfterFetch::Off,
        ..FetchOptions::default()
    };
    let tips: Vec<String> = (0..6)
        .map(|n| one_more(&w, &srv, &local, n, &off))
        .collect();
    let before = packs(&path);
    repo::git(&path, &["multi-pack-index", "write"]);
    let midx = path.join("objects/pack/multi-pack-index");
    let midx_bytes = std::fs::read(&midx).expect("the multi-pack-index");
    let lock = path.join("objects/pack/multi-pack-index.lock");
    std::fs::write(&lock, "").expect("the lock");
    let err = sluice_git::maintain(&local).expect_err("the lock is held");
    assert!(err.to_string().contains("multi-pack-index.lock"), "{err}");
    assert!(
        before
            .iter()
            .all(|p| p.exists() && p.with_extension("idx").exists()),
        "a pack was removed"
    );
    assert_eq!(std::fs::read(&midx).expect("still there"), midx_bytes);
    assert!(lock.exists(), "git's lock is not ours to remove");
    repo::git(&path, &["multi-pack-index", "verify"]);
    repo::fsck(&path).expect("fsck");
    assert_every_ref_resolves(&path, &tips);
    std::fs::remove_file(&lock).expect("git is done");
    match sluice_git::maintain(&local).expect("maintain") {
        Maintained::Consolidated { packs, .. } => assert_eq!(packs, 1),
        other => panic!("expected a consolidation: {other:?}"),
    }
    assert_eq!(midx_names(&path), vec![idx_name(&packs(&path)[0])]);
    repo::git(&path, &["multi-pack-index", "verify"]);
    repo::fsck(&path).expect("fsck");
    assert_every_ref_resolves(&path, &tips);
}

#[test]
fn a_kept_open_handle_reads_objects_from_a_consolidated_pack() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let kept = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "8");
    let first = one_more(&w, &srv, &kept, 0, &FetchOptions::default());
    // The handle has the first pack mapped.
    let first_pack = packs(&path);
    assert_eq!(first_pack.len(), 1);
    let commit = kept.find_object(oid(&first)).expect("the first commit");
    assert_eq!(commit.kind, sluice_git::gix::object::Kind::Commit);
    drop(commit);
    let mut tips = vec![first];
    // Eight more packs: the ninth is over the limit, and all are rolled up.
    for n in 1..9 {
        tips.push(one_more(&w, &srv, &kept, n, &FetchOptions::default()));
    }
    assert!(
        !first_pack[0].exists(),
        "the first pack was not consolidated"
    );
    assert_eq!(packs(&path).len(), 1);
    for (n, tip) in tips.iter().enumerate() {
        let commit = kept
            .find_object(oid(tip))
            .unwrap_or_else(|e| panic!("commit {n} through the kept handle: {e}"));
        let tree = commit.into_commit().tree().expect("its tree");
        assert!(!tree.data.is_empty());
    }
    let view = sluice_git::fresh_view(&kept).expect("a view");
    assert!(tips.iter().all(|t| view.has_object(oid(t))));
}

#[test]
fn a_gc_pid_held_by_git_gc_makes_maintenance_skip_and_a_stale_one_does_not() {
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "4");
    let off = FetchOptions {
        maintenance: AfterFetch::Off,
        ..FetchOptions::default()
    };
    let tips: Vec<String> = (0..6)
        .map(|n| one_more(&w, &srv, &local, n, &off))
        .collect();
    // A live process of this host named in gc.pid, as `git gc` writes it.
    let mut holder = std::process::Command::new("git")
        .args(["cat-file", "--batch"])
        .current_dir(&path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("a live process");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let line = format!("{} {}", holder.id(), host.trim());
    std::fs::write(path.join("gc.pid"), &line).expect("gc.pid");
    // git reads it as its own: `git gc` refuses to run beside it.
    let gc = repo::git_output(&path, &["gc"]);
    assert!(!gc.status.success(), "git gc ran beside a held gc.pid");
    assert!(
        String::from_utf8_lossy(&gc.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert_eq!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::Busy { holder: line }
    );
    // A fetch beside it: skipped too, the fetch unchanged.
    let tip = one_more(&w, &srv, &local, 6, &FetchOptions::default());
    assert_eq!(packs(&path).len(), 7);
    assert_eq!(
        std::fs::read_to_string(path.join("gc.pid")).expect("gc.pid"),
        format!("{} {}", holder.id(), host.trim()),
        "gc.pid was taken from its holder"
    );
    // The holder gone: its gc.pid is stale, and the next run goes ahead.
    holder.kill().expect("kill");
    holder.wait().expect("wait");
    assert!(matches!(
        sluice_git::maintain(&local).expect("maintain"),
        Maintained::Consolidated { taken: 7, .. }
    ));
    assert!(!path.join("gc.pid").exists());
    // `git gc` then runs on what maintenance left, and fetches go on.
    repo::git(&path, &["gc", "-q"]);
    let mut all = tips;
    all.push(tip);
    all.push(one_more(&w, &srv, &local, 7, &FetchOptions::default()));
    repo::fsck(&path).expect("fsck");
    assert_every_ref_resolves(&path, &all);
}

#[test]
fn a_consolidation_is_one_info_event_in_its_span_and_counted_by_result() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let w = World::new();
    let srv = served(&w);
    let path = w.path("local.git");
    let local = empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "4");
    let off = FetchOptions {
        maintenance: AfterFetch::Off,
        ..FetchOptions::default()
    };
    for n in 0..5 {
        one_more(&w, &srv, &local, n, &off);
    }
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let capture = sluice_testkit::Capture::new();
    let results = tracing::subscriber::with_default(capture.subscriber(), || {
        metrics::with_local_recorder(&recorder, || {
            [
                sluice_git::maintain(&local).expect("maintain"),
                sluice_git::maintain(&local).expect("maintain"),
            ]
        })
    });
    assert!(matches!(
        results[0],
        Maintained::Consolidated {
            taken: 5,
            packs: 1,
            ..
        }
    ));
    assert_eq!(results[1], Maintained::NotNeeded { packs: 1, limit: 4 });
    let values: std::collections::BTreeMap<String, DebugValue> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect();
    let total = |r: &str| values.get(&format!("sluice_remote_maintenance_total{{result={r}}}"));
    assert_eq!(total("consolidated"), Some(&DebugValue::Counter(1)));
    assert_eq!(total("not-needed"), Some(&DebugValue::Counter(1)));
    match values.get("sluice_remote_maintenance_seconds{result=consolidated}") {
        Some(DebugValue::Histogram(v)) => assert_eq!(v.len(), 1),
        other => panic!("no histogram: {other:?}"),
    }
    let infos: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.level == tracing::Level::INFO)
        .collect();
    assert_eq!(infos.len(), 1, "{infos:?}");
    assert_eq!(
        infos[0].fields.get("result").map(String::as_str),
        Some("consolidated")
    );
    assert!(
        infos[0].span("maintenance").is_some(),
        "{:?}",
        infos[0].spans
    );
}

const CHILD_URL: &str = "SLUICE_TEST_MAINT_URL";
const CHILD_REPO: &str = "SLUICE_TEST_MAINT_REPO";
const CHILD_CHAIN: &str = "SLUICE_TEST_MAINT_CHAIN";
/// Commits per chain: fetches per child process.
const CHAIN: usize = 10;
const CHILDREN: usize = 8;

/// The child of [`eight_processes_fetching_while_consolidations_fire_leave_every_ref_and_a_clean_repository`]:
/// one chain's fetches, in a process of its own. Run only by that test (it
/// is ignored).
#[test]
#[ignore = "run by eight_processes_fetching_while_consolidations_fire_... in child processes"]
fn fetch_chain_in_a_child() {
    let url = std::env::var(CHILD_URL).expect("run by the concurrency test");
    let local = std::env::var(CHILD_REPO).expect("run by the concurrency test");
    let chain = std::env::var(CHILD_CHAIN).expect("run by the concurrency test");
    let repo = open(Path::new(&local));
    for n in 0..CHAIN {
        let out = client()
            .fetch(
                &url,
                &[format!(
                    "+refs/heads/c{chain}/{n}:refs/fetched/c{chain}/{n}"
                )],
                &repo,
                &quick(60_000, 30_000, 1),
            )
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
        let view = sluice_git::fresh_view(&repo).expect("a view");
        let got = view
            .find_reference(format!("refs/fetched/c{chain}/{n}").as_str())
            .expect("the ref fetched")
            .peel_to_commit()
            .expect("its commit, readable");
        assert!(!got.tree().expect("its tree").data.is_empty());
    }
}

#[test]
fn eight_processes_fetching_while_consolidations_fire_leave_every_ref_and_a_clean_repository() {
    let w = World::new();
    let srv = served(&w);
    // Chains of commits, one per process, each commit on a branch of its
    // own so that every fetch brings one new commit.
    let mut expected = Vec::new();
    for c in 0..CHILDREN {
        for n in 0..CHAIN {
            let branch = format!("c{c}/{n}");
            if n > 0 {
                repo::git(
                    &srv,
                    &["branch", &branch, &format!("refs/heads/c{c}/{}", n - 1)],
                );
            }
            let tip = repo::commit_on(&srv, &branch, &format!("chain {c} commit {n}"));
            expected.push((format!("refs/fetched/{branch}"), tip));
        }
    }
    let path = w.path("local.git");
    empty_repo(&path);
    repo::set_config(&path, "gc.autoPackLimit", "4");
    let children: Vec<std::process::Child> = (0..CHILDREN)
        .map(|c| {
            std::process::Command::new(std::env::current_exe().expect("this test binary"))
                .args([
                    "--exact",
                    "maintenance::fetch_chain_in_a_child",
                    "--ignored",
                    "--test-threads",
                    "1",
                    "--quiet",
                ])
                .env(CHILD_URL, w.daemon.url("s.git"))
                .env(CHILD_REPO, &path)
                .env(CHILD_CHAIN, c.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a child")
        })
        .collect();
    for (c, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("the child ends");
        assert!(
            out.status.success(),
            "child {c}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (name, tip) in &expected {
        assert_eq!(
            repo::rev_parse(&path, &format!("{name}^{{commit}}")).as_deref(),
            Some(tip.as_str()),
            "{name}"
        );
    }
    repo::fsck(&path).expect("git fsck --full is clean");
    let left = packs(&path).len();
    // 80 fetches, a pack each: consolidations fired.
    assert!(left < CHILDREN * CHAIN / 4, "{left} packs left");
    assert!(!path.join("gc.pid").exists(), "gc.pid is left behind");
}

/// Fetches of one new commit each into `refs/remotes/origin/main` of a
/// bare clone of a served history of 1,000 commits, the new commits dated
/// before that history (a library user commits with any dates; the
/// testkit's fixed date is the history's first): the server must send only
/// the new commit's objects each time (its `Total N` line: the count on the
/// wire, before a thin pack is completed here). The negotiation offered
/// the clone's `main` and then its history newest first, never the tips
/// fetched before (the oldest by date), and every fetch brought every
/// commit since the clone again.
/// `algorithm` is the clone's `fetch.negotiationAlgorithm` (`None`: unset,
/// git's default `consecutive`).
fn each_fetch_receives_only_its_commit(
    tags: sluice_git::TagMode,
    tagged: bool,
    algorithm: Option<&str>,
) {
    let w = World::new();
    let srv = w.srv("s.git");
    let mut builder = sluice_testkit::RepoBuilder::new().branch("main", 1_000);
    if tagged {
        builder =
            builder
                .lightweight_tag("light", "main")
                .annotated_tag("v1.0", "main", "release 1.0");
    }
    builder.build(&srv).expect("the served history");
    let path = local_clone(&srv, &w.path("local.git"));
    if let Some(algorithm) = algorithm {
        repo::set_config(&path, "fetch.negotiationAlgorithm", algorithm);
    }
    let fetch = FetchOptions {
        tags,
        ..FetchOptions::default()
    };
    let mut old = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    for n in 0..6 {
        let new = repo::commit_on(&srv, "main", &format!("fetch {n}"));
        let expected = repo::git(&srv, &["rev-list", "--objects", &new, &format!("^{old}")])
            .lines()
            .count();
        let out = client()
            .fetch_with(
                &w.daemon.url("s.git"),
                &["+refs/heads/main:refs/remotes/origin/main".to_string()],
                &open(&path),
                &fetch,
                &quick(30_000, 15_000, 1),
            )
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
        let sent: Vec<usize> = out
            .remote_messages
            .iter()
            .filter_map(|m| m.trim().strip_prefix("Total "))
            .filter_map(|m| m.split(' ').next()?.parse().ok())
            .collect();
        assert_eq!(
            sent,
            [expected],
            "fetch {n} ({tags:?}, tagged: {tagged}, {algorithm:?}): the server's pack held more than the new commit's objects: {:?}",
            out.remote_messages
        );
        assert_eq!(
            repo::rev_parse(&path, "refs/remotes/origin/main").as_deref(),
            Some(new.as_str())
        );
        old = new;
    }
    repo::fsck(&path).expect("git fsck --full is clean");
}

#[test]
fn fetches_of_commits_dated_before_the_history_receive_only_their_own_objects() {
    each_fetch_receives_only_its_commit(sluice_git::TagMode::None, false, None);
}

#[test]
fn skipping_negotiation_fetches_of_commits_dated_before_the_history_receive_only_their_own_objects()
{
    each_fetch_receives_only_its_commit(sluice_git::TagMode::None, false, Some("skipping"));
}

#[test]
fn fetches_following_tags_of_commits_dated_before_the_history_receive_only_their_own_objects() {
    each_fetch_receives_only_its_commit(sluice_git::TagMode::Follow, true, None);
}
