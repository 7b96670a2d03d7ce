//! The binary against this side's trouble: a repository its user cannot
//! write is exit 5 (`local-error`) after one attempt, with nothing
//! written; and eight processes fetching into one repository that keeps
//! its refs in `packed-refs` all succeed.
//!
//! As root, permission bits do not apply: the fetch runs as `nobody`
//! through `runuser`, from a copy of the binary in a 0755 directory, with a
//! HOME of its own, on a repository `nobody` owns (so the user's-side
//! ownership check lets it through) with its write bits removed.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use sluice_testkit::repo;

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("readable") {
            let path = e.expect("an entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("a file");
                out.insert(path, bytes);
            }
        }
    }
    out
}

#[track_caller]
fn run_ok(cmd: &mut Command) {
    let status = cmd.status().expect("runs");
    assert!(status.success(), "{cmd:?} failed");
}

#[test]
fn a_fetch_into_a_repository_its_user_cannot_write_exits_5_after_one_attempt_and_writes_nothing() {
    let w = World::new();
    // Everything `nobody` reaches lives in a 0755 directory.
    let open_dir = tempfile::tempdir().expect("tempdir");
    let root = open_dir.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = root.join("sluice-remote");
    std::fs::copy(env!("CARGO_BIN_EXE_sluice-remote"), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let home = root.join("home");
    std::fs::create_dir(&home).expect("home");
    let local = repo::init_bare(&root.join("local.git")).expect("init");
    run_ok(
        Command::new("chown")
            .args(["-R", "nobody:"])
            .arg(&home)
            .arg(&local),
    );
    run_ok(Command::new("chmod").args(["-R", "a-w"]).arg(&local));
    let before = snapshot(&local);

    let out = Command::new("runuser")
        .args(["-u", "nobody", "--", "env"])
        .arg(format!("HOME={}", home.display()))
        .arg(&bin)
        .args([
            "fetch",
            &w.proxied(),
            "+refs/heads/*:refs/remotes/origin/*",
            "--repo",
            &p(&local),
            "--max-attempts",
            "4",
            "--json",
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("runuser runs");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(run.code, 5, "{run:?}");
    let doc = run.json();
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["result"], "local-error", "{doc}");
    assert_eq!(doc["stopped"], "local-error", "{doc}");
    let attempts = doc["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{doc}");
    assert_eq!(attempts[0]["class"], "local-error", "{doc}");
    let cause = attempts[0]["cause"].as_str().unwrap_or_default();
    assert!(
        cause.contains("objects/pack") && cause.contains("Permission denied"),
        "the cause says where and why: {cause}"
    );
    w.proxy.wait_idle(std::time::Duration::from_secs(10));
    assert_eq!(w.proxy.connections().len(), 1, "one connection: {doc}");
    assert_eq!(snapshot(&local), before, "nothing was written");
}

#[test]
fn eight_processes_fetching_into_one_repository_with_packed_refs_all_succeed() {
    let w = World::new();
    let local = w.empty("local.git");
    // The refs of an earlier fetch, packed: every process reads and
    // updates refs beside `packed-refs`.
    repo::git(
        &local,
        &[
            "fetch",
            "-q",
            &p(&w.server()),
            "+refs/heads/*:refs/remotes/earlier/*",
        ],
    );
    repo::git(&local, &["pack-refs", "--all"]);
    assert!(local.join("packed-refs").is_file());
    for round in 0..2 {
        let children: Vec<_> = (0..8)
            .map(|i| {
                Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
                    .args([
                        "fetch",
                        &w.url(),
                        &format!("+refs/heads/*:refs/remotes/p{i}/*"),
                        "--repo",
                        &p(&local),
                        "--json",
                    ])
                    .env_remove("RUST_LOG")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("the binary runs")
            })
            .collect();
        for (i, child) in children.into_iter().enumerate() {
            let out = child.wait_with_output().expect("waited for");
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {round} process {i}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The next round updates refs that now sit in packed-refs.
        repo::git(&local, &["pack-refs", "--all"]);
        repo::commit_on(&w.server(), "main", &format!("round {round}"));
    }
    let main = repo::rev_parse(&w.server(), "refs/heads/main").expect("main");
    let before_last = repo::git(&w.server(), &["rev-parse", "main~1"]);
    for i in 0..8 {
        assert_eq!(
            repo::rev_parse(&local, &format!("refs/remotes/p{i}/main")).as_deref(),
            Some(before_last.trim()),
            "process {i}'s ref is the server's main of the last round"
        );
    }
    assert_ne!(main.trim(), before_last.trim());
    repo::fsck(&local).expect("the repository is whole");
}
