//! The ledger's reads and what its entries say: `ledger show|list` never
//! create or write a ledger (one that is not there is exit 5 naming it; a
//! read-only one is listed, by another user too), nothing is left beside a
//! ledger, each entry says what ran (kind, remote, refs), and an
//! `--operation-id` without `--ledger` is said to be remembered only within
//! the process.
//!
//! As root, permission bits do not apply: the read-only listing runs as
//! `nobody` through `runuser`, from a copy of the binary in a 0755
//! directory (when the tests do not run as root, the binary runs as the
//! same user, to whom the bits apply).

use crate::common;

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

/// The names in `dir`.
fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("readable")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_read_of_a_ledger_that_is_not_there_is_exit_5_naming_it_and_creates_nothing() {
    let w = World::new();
    let dir = w.path("ledgers");
    std::fs::create_dir(&dir).expect("dir");
    let typo = dir.join("ledgr.db");
    let typo_s = p(&typo);
    for args in [
        vec!["ledger", "list"],
        vec!["ledger", "list", "--json"],
        vec!["ledger", "show", "land-1"],
        vec!["ledger", "show", "land-1", "--json"],
    ] {
        let mut args = args.clone();
        args.extend(["--ledger", typo_s.as_str()]);
        let run = sluice(&args);
        assert_eq!(run.code, 5, "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
        assert!(run.stderr.contains(&p(&typo)), "names the path: {run:?}");
        assert!(run.stderr.contains("no ledger"), "says why: {run:?}");
        assert!(names_in(&dir).is_empty(), "nothing created: {args:?}");
    }
    // An operation's --ledger creates it on first use, and leaves nothing
    // beside it.
    let first = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-1",
        "--ledger",
        &p(&typo),
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(names_in(&dir), names(&["ledgr.db"]));
    let show = sluice(&["ledger", "show", "land-1", "--ledger", &p(&typo)]);
    assert_eq!(show.code, 0, "{show:?}");
    assert_eq!(names_in(&dir), names(&["ledgr.db"]));
}

#[test]
fn a_json_ledger_is_imported_by_an_operation_not_by_a_read_and_no_lock_file_is_left() {
    let w = World::new();
    let dir = w.path("ledgers");
    std::fs::create_dir(&dir).expect("dir");
    let ledger = dir.join("ledger.json");
    let json = br#"{"operations": {"old-1": null}}"#;
    std::fs::write(&ledger, json).expect("write");
    let read = sluice(&["ledger", "list", "--ledger", &p(&ledger)]);
    assert_eq!(read.code, 5, "{read:?}");
    assert!(read.stderr.contains("JSON ledger"), "{read:?}");
    assert_eq!(std::fs::read(&ledger).expect("read"), json, "left as it is");
    assert_eq!(names_in(&dir), names(&["ledger.json"]));
    let op = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "new-1",
        "--ledger",
        &p(&ledger),
    ]);
    assert_eq!(op.code, 0, "{op:?}");
    assert_eq!(
        names_in(&dir),
        names(&["ledger.json", "ledger.json.json-imported"]),
        "the JSON kept, no lock file"
    );
    let list = sluice(&["ledger", "list", "--ledger", &p(&ledger), "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    let doc = list.json();
    assert_eq!(doc["schema"], 1, "{doc}");
    let ids: Vec<Value> = doc["entries"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(ids, [Value::from("old-1"), Value::from("new-1")]);
}

/// Run the binary as a user to whom `ledger`'s permission bits apply:
/// `nobody` when the tests run as root, else this user.
fn run_as_other(bin: &Path, args: &[&str]) -> Run {
    let probe = tempfile::NamedTempFile::new().expect("a file");
    let root = probe.as_file().metadata().expect("metadata").uid() == 0;
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let out = cmd
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_read_only_ledger_is_listed_by_another_user_and_nothing_is_written_or_left_beside_it() {
    let w = World::new();
    let open_dir = tempfile::tempdir().expect("tempdir");
    let root = open_dir.path();
    chmod(root, 0o755);
    let bin = root.join("sluice-remote");
    std::fs::copy(env!("CARGO_BIN_EXE_sluice-remote"), &bin).expect("copy the binary");
    chmod(&bin, 0o755);
    let dir = root.join("ledgers");
    std::fs::create_dir(&dir).expect("dir");
    let ledger = dir.join("ops.db");
    for id in ["ro-1", "ro-2"] {
        let run = sluice(&[
            "ls-refs",
            &w.proxied(),
            "--prefix",
            "refs/heads/",
            "--operation-id",
            id,
            "--ledger",
            &p(&ledger),
        ]);
        assert_eq!(run.code, 0, "{run:?}");
    }
    chmod(&ledger, 0o444);
    let ledger_s = p(&ledger);
    let bytes = std::fs::read(&ledger).expect("read");
    // A read-only file in a read-only directory, then in one anybody may
    // write (where a read-only SQLite connection would leave -wal and -shm
    // files behind).
    for dir_mode in [0o555, 0o777] {
        chmod(&dir, dir_mode);
        for args in [
            vec!["ledger", "list", "--json"],
            vec!["ledger", "show", "ro-2", "--json"],
        ] {
            let mut args = args.clone();
            args.extend(["--ledger", ledger_s.as_str()]);
            let run = run_as_other(&bin, &args);
            assert_eq!(run.code, 0, "{dir_mode:o} {args:?}: {run:?}");
            let doc = run.json();
            assert_eq!(doc["schema"], 1, "{doc}");
            let entries = match doc["entries"].as_array() {
                Some(list) => list.clone(),
                None => vec![doc["entry"].clone()],
            };
            assert!(!entries.is_empty(), "{run:?}");
            for e in &entries {
                assert_eq!(e["run"]["result"], "succeeded", "{e}");
                assert_eq!(e["kind"], "ls-refs", "{e}");
                assert_eq!(e["refs"], serde_json::json!(["refs/heads/"]), "{e}");
            }
            assert_eq!(
                names_in(&dir),
                names(&["ops.db"]),
                "{dir_mode:o}: nothing beside it"
            );
            assert_eq!(std::fs::read(&ledger).expect("read"), bytes, "not written");
        }
    }
    // While a writer has it open, a claim still in its WAL is seen: the
    // file is opened read-only beside the writer's WAL files (an immutable
    // open would miss it), and those files stay the writer's.
    chmod(&dir, 0o755);
    chmod(&ledger, 0o644);
    let writer = sluice_ledger::SqliteLedger::open(&ledger).expect("a writer opens it");
    let refs = vec!["refs/heads/main".to_string()];
    let claim = sluice_policy::ClaimRequest::new(
        "ro-3",
        sluice_policy::Effect::Read,
        std::time::Duration::from_secs(10),
    )
    .operation("fetch", "git://127.0.0.1/small.git")
    .refs(&refs);
    let _claim = sluice_policy::Ledger::claim(&writer, &claim).expect("claimed");
    chmod(&ledger, 0o444);
    assert_eq!(
        names_in(&dir),
        names(&["ops.db", "ops.db-shm", "ops.db-wal"])
    );
    let run = run_as_other(
        &bin,
        &["ledger", "show", "ro-3", "--json", "--ledger", &ledger_s],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["schema"], 1, "{doc}");
    let entry = doc["entry"].clone();
    assert_eq!(entry["run"], Value::Null, "still running: {entry}");
    assert_eq!(entry["kind"], "fetch", "{entry}");
    assert_eq!(
        entry["refs"],
        serde_json::json!(["refs/heads/main"]),
        "{entry}"
    );
    chmod(&ledger, 0o644);
    drop(writer);
    assert_eq!(
        names_in(&dir),
        names(&["ops.db"]),
        "the writer's WAL files went with it"
    );
}

#[test]
fn each_entry_says_what_ran_kind_remote_and_refs_and_previous_is_unchanged() {
    let w = World::new();
    let ledger = w.path("ops.db");
    let local = w.empty("local.git");
    let work = w.clone_bare("work.git");
    let url = w.proxied();
    let runs = [
        vec![
            "ls-refs",
            &url,
            "--prefix",
            "refs/heads/",
            "--prefix",
            "refs/tags/",
            "--operation-id",
            "op-ls",
        ],
        vec![
            "fetch",
            &url,
            "+refs/heads/*:refs/remotes/origin/*",
            "--repo",
            local.to_str().unwrap(),
            "--operation-id",
            "op-fetch",
        ],
        vec![
            "push",
            &url,
            "+main:refs/heads/copy",
            "main:refs/heads/copy2",
            "--repo",
            work.to_str().unwrap(),
            "--operation-id",
            "op-push",
        ],
        vec![
            "push",
            &url,
            ":refs/heads/copy2",
            "--repo",
            work.to_str().unwrap(),
            "--operation-id",
            "op-delete",
        ],
    ];
    for args in &runs {
        let mut args = args.clone();
        args.extend(["--ledger", ledger.to_str().unwrap()]);
        let run = sluice(&args);
        assert_eq!(run.code, 0, "{args:?}: {run:?}");
    }
    let main = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "main"])
            .current_dir(&work)
            .output()
            .expect("git")
            .stdout,
    )
    .expect("utf-8")
    .trim()
    .to_string();
    let list = sluice(&["ledger", "list", "--ledger", &p(&ledger), "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    let doc = list.json();
    let by_id = |id: &str| {
        doc["entries"]
            .as_array()
            .expect("a list")
            .iter()
            .find(|e| e["id"] == id)
            .unwrap_or_else(|| panic!("{id} listed: {doc}"))
            .clone()
    };
    let expect = [
        (
            "op-ls",
            "ls-refs",
            serde_json::json!(["refs/heads/", "refs/tags/"]),
        ),
        (
            "op-fetch",
            "fetch",
            serde_json::json!(["+refs/heads/*:refs/remotes/origin/*"]),
        ),
        (
            "op-push",
            "push",
            serde_json::json!([
                format!("+{main}:refs/heads/copy"),
                format!("{main}:refs/heads/copy2")
            ]),
        ),
        (
            "op-delete",
            "push",
            serde_json::json!([":refs/heads/copy2"]),
        ),
    ];
    for (id, kind, refs) in &expect {
        let e = by_id(id);
        assert_eq!(e["kind"], *kind, "{e}");
        assert_eq!(e["remote"], url.as_str(), "{e}");
        assert_eq!(e["refs"], *refs, "{e}");
        assert_eq!(e["run"]["result"], "succeeded", "{e}");
    }
    // Human: what ran between the claim's time and how it ended.
    let human = sluice(&["ledger", "show", "op-push", "--ledger", &p(&ledger)]);
    assert_eq!(human.code, 0, "{human:?}");
    let fields: Vec<&str> = human.stdout.trim_end().split('\t').collect();
    assert_eq!(fields[0], "op-push", "{human:?}");
    assert_eq!(fields[2], "push", "{human:?}");
    assert_eq!(fields[3], url, "{human:?}");
    assert_eq!(
        fields[4],
        format!("+{main}:refs/heads/copy {main}:refs/heads/copy2"),
        "{human:?}"
    );
    assert_eq!(fields[5], "succeeded", "{human:?}");
    // `previous` of a rejection keeps its keys, and adds what ran (`kind`).
    let again = sluice(&[
        "ls-refs",
        &url,
        "--operation-id",
        "op-ls",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(again.code, 4, "{again:?}");
    let previous = again.json()["previous"].clone();
    let keys: BTreeSet<String> = previous
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        names(&[
            "kind",
            "result",
            "may_have_applied",
            "elapsed_ms",
            "attempts",
            "phase",
            "host",
            "pid"
        ]),
        "{previous}"
    );
    assert_eq!(previous["kind"], "ls-refs", "{previous}");
}

#[test]
fn an_operation_id_without_a_ledger_is_said_to_be_remembered_only_within_the_process() {
    let w = World::new();
    let run = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-9",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["operation"]["id"], "land-9");
    assert!(
        run.stderr.contains("--operation-id") && run.stderr.contains("only within this process"),
        "{run:?}"
    );
    let ledger = w.path("ops.db");
    let with = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-9",
        "--ledger",
        &p(&ledger),
    ]);
    assert_eq!(with.code, 0, "{with:?}");
    assert!(
        !with.stderr.contains("only within this process"),
        "{with:?}"
    );
    let without_id = sluice(&["ls-refs", &w.proxied()]);
    assert!(!without_id.stderr.contains("only within"), "{without_id:?}");
}
