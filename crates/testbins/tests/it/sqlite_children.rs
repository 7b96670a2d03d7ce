//! The SQLite ledger shared by processes, and killed while writing: the
//! children are this package's `ledger-test-child`
//! (`src/bin/ledger_test_child.rs`), and the parents talk to them through
//! pipes (a line on stdin to start, a line on stdout per claim), so no test
//! sleeps on a guessed delay.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::UNIX_EPOCH;

use sluice_ledger::SqliteLedger;
use sluice_policy::{
    AttemptError, Claim, ClaimRequest, Effect, FileLedger, FinishRequest, Ledger, Operation,
    Policy, PreviousRun,
};
use sluice_testbins::shuffle::mix;

/// The child processes: `src/bin/ledger_test_child.rs`.
const CHILD: &str = env!("CARGO_BIN_EXE_ledger-test-child");

/// Start the child binary in `role`.
fn spawn(role: &str, ledger: &Path, seed: u64, log: Option<&Path>) -> Child {
    let mut cmd = Command::new(CHILD);
    cmd.arg(role)
        .arg(ledger)
        .arg(seed.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(log) = log {
        cmd.arg(log);
    }
    cmd.spawn().expect("the child binary starts")
}

#[test]
fn eight_processes_claiming_the_same_thousand_ids_win_each_exactly_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    // No file yet: the children also race to create the database.
    let path = dir.path().join("ledger.db");
    let mut children: Vec<Child> = (0..8).map(|i| spawn("claim-all", &path, i, None)).collect();
    for child in &mut children {
        let mut stdin = child.stdin.take().expect("piped stdin");
        writeln!(stdin, "go").expect("a child takes its go");
    }
    let mut won: BTreeMap<String, usize> = BTreeMap::new();
    for (n, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("the child ends");
        assert!(out.status.success(), "child {n} failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            text.lines().any(|l| l == "DONE"),
            "child {n} did not finish"
        );
        for id in text.lines().filter_map(|l| l.strip_prefix("CLAIMED ")) {
            *won.entry(id.to_owned()).or_default() += 1;
        }
    }
    let twice: Vec<_> = won.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "ids won more than once: {twice:?}");
    assert_eq!(won.len(), 1000, "every id is won by one process");
    let ledger = SqliteLedger::open(&path).expect("reopens");
    assert_eq!(ledger.list(UNIX_EPOCH).expect("list").len(), 1000);
}

#[test]
fn a_writer_killed_25_times_mid_claim_leaves_a_sound_database_and_no_id_claimed_twice() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let mut logs = Vec::new();
    for round in 0..25u64 {
        let log = dir.path().join(format!("claims-{round}.log"));
        let mut child = spawn("claim-and-log", &path, round, Some(&log));
        drop(child.stdin.take());
        // Kill after a number of claims chosen by the round: at whatever
        // the child is doing by then (claiming, logging, finishing).
        let ticks = 1 + mix(round) % 150;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < ticks {
            match lines.next() {
                Some(Ok(l)) if l == "TICK" => seen += 1,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("reading the child: {e}"),
                None => break, // it ran out of ids and ended
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("the killed child is reaped");
        logs.push(log);
    }

    let conn = rusqlite::Connection::open(&path).expect("the database opens");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check runs");
    assert_eq!(check, "ok");
    drop(conn);

    let ledger = SqliteLedger::open(&path).expect("the ledger opens");
    let mut logged = BTreeSet::new();
    for log in &logs {
        let text = fs::read_to_string(log).unwrap_or_default();
        for id in text.lines() {
            assert!(logged.insert(id.to_owned()), "{id} was claimed twice");
        }
    }
    assert!(!logged.is_empty(), "the children claimed something");
    for id in &logged {
        assert!(ledger.show(id).expect("show").is_some(), "{id} was lost");
    }
}

#[test]
fn four_processes_opening_one_json_ledger_import_it_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger");
    let run = a_run();
    let json = FileLedger::new(&path);
    for i in 0..100 {
        assert_eq!(
            json.claim(&req(&format!("json-{i}"))).expect("claim"),
            Claim::Claimed
        );
        json.finish(&done(&format!("json-{i}"), &run))
            .expect("finish");
    }
    let original = fs::read(&path).expect("the JSON ledger");
    // The children open the ledger as soon as they start: they race to
    // import it, then claim id-0 to id-999 on the go.
    let mut children: Vec<Child> = (0..4).map(|i| spawn("claim-all", &path, i, None)).collect();
    for child in &mut children {
        writeln!(child.stdin.take().expect("piped stdin"), "go").expect("go");
    }
    let mut won = BTreeSet::new();
    for (n, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("the child ends");
        assert!(out.status.success(), "child {n} failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        for id in text.lines().filter_map(|l| l.strip_prefix("CLAIMED ")) {
            assert!(won.insert(id.to_owned()), "{id} won twice");
        }
    }
    assert_eq!(won.len(), 1000);
    let mut kept = path.clone().into_os_string();
    kept.push(".json-imported");
    assert_eq!(fs::read(&kept).expect("the JSON is kept"), original);
    let ledger = SqliteLedger::open(&path).expect("opens");
    for i in 0..100 {
        assert_eq!(
            ledger.claim(&req(&format!("json-{i}"))).expect("claim"),
            Claim::Taken(Some(run.clone()))
        );
    }
    assert_eq!(ledger.list(UNIX_EPOCH).expect("list").len(), 1100);
}

/// A run summary as the policy makes one (built through the policy, so a
/// change of `PreviousRun`'s fields needs no change here).
fn a_run() -> PreviousRun {
    Policy::default()
        .run(
            Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9418/repo.git"),
            |ctx| {
                ctx.reached("done");
                Ok::<_, AttemptError>(())
            },
        )
        .summary()
        .expect("a run that ran")
}

/// What remains of a deadline, in the calls these tests make outside any
/// operation: 10 s.
const LEFT: std::time::Duration = std::time::Duration::from_secs(10);

/// A claim of `id` (a write) with [`LEFT`] left.
fn req(id: &str) -> ClaimRequest<'_> {
    ClaimRequest::new(id, Effect::Write, LEFT)
}

/// A finish of `id` with `run`, with [`LEFT`] left.
fn done<'a>(id: &'a str, run: &'a PreviousRun) -> FinishRequest<'a> {
    FinishRequest::new(id, Effect::Write, run, LEFT)
}
