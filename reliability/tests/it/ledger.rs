//! The file ledger shared by processes, and killed while writing.
//!
//! The children are the `ledger-worker` binary of this package (see
//! `src/bin/ledger_worker.rs`): real processes, each with its own
//! `FileLedger` on the same file.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_policy::{Claim, FileLedger, Ledger, PreviousResult};
use sluice_reliability::Rng;

const WORKER: &str = env!("CARGO_BIN_EXE_ledger-worker");

/// Kills and reaps a child when dropped (a failing test leaves nothing
/// running).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> Reaped {
    Reaped(
        Command::new(WORKER)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ledger-worker starts"),
    )
}

#[test]
fn eight_processes_claiming_the_same_ids_at_once_claim_each_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = dir.path().join("ledger.json");
    let start = dir.path().join("start");
    // Enough ids that the first process to start cannot take them all
    // before the others wake (60 were taken by one, now and then).
    let ids: Vec<String> = (0..240).map(|i| format!("op-{i}")).collect();
    let mut children = Vec::new();
    for p in 0..8u64 {
        // Each process asks for every id, in its own order.
        let mut order = ids.clone();
        let mut rng = Rng::new(p);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut args = vec![
            "claim".to_string(),
            ledger.display().to_string(),
            start.display().to_string(),
        ];
        args.extend(order);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        children.push(spawn(&args));
    }
    // Every worker up and waiting before the start: none can take every
    // id while another is still starting.
    let mut readers = Vec::new();
    for c in &mut children {
        let mut out = BufReader::new(c.0.stdout.take().expect("stdout"));
        let mut first = String::new();
        out.read_line(&mut first).expect("a worker's first line");
        assert_eq!(first.trim_end(), "ready");
        readers.push(out);
    }
    std::fs::write(&start, b"go").expect("start file");
    let mut claimed_by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (p, (mut c, out)) in children.into_iter().zip(readers).enumerate() {
        for line in out.lines() {
            let line = line.expect("line");
            if let Some(id) = line.strip_prefix("claimed ") {
                claimed_by.entry(id.to_string()).or_default().push(p);
            }
        }
        let status = c.0.wait().expect("wait");
        assert!(status.success(), "process {p} failed: {status}");
    }
    let per_process: Vec<usize> = (0..8)
        .map(|p| claimed_by.values().filter(|v| v.contains(&p)).count())
        .collect();
    println!("claims per process: {per_process:?}");
    for id in &ids {
        assert_eq!(
            claimed_by.get(id).map(Vec::len),
            Some(1),
            "{id} claimed by {:?}",
            claimed_by.get(id)
        );
    }
    assert_eq!(claimed_by.len(), ids.len());
    assert!(
        per_process.iter().filter(|n| **n > 0).count() > 1,
        "the claims did not overlap in time: {per_process:?}"
    );
    // Every claim is finished, and a later claim of any id is rejected
    // with the earlier run.
    let l = FileLedger::new(&ledger);
    for id in &ids {
        match l.claim(&req(id)).expect("read") {
            Claim::Taken(Some(prev)) => assert_eq!(prev.attempts.len(), 1),
            other => panic!("{id}: {other:?}"),
        }
    }
}

fn read_done(child: &mut Reaped) -> Vec<String> {
    let out = child.0.stdout.take().expect("stdout");
    BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("done ").map(str::to_owned))
        .collect()
}

#[test]
fn a_writer_killed_at_random_moments_leaves_a_ledger_the_next_process_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = dir.path().join("ledger.json");
    let mut rng = Rng::new(0x1ed9);
    let mut finished_total = 0;
    let rounds = 25;
    for round in 0..rounds {
        let prefix = format!("r{round}");
        let mut child = spawn(&["churn", &ledger.display().to_string(), &prefix]);
        // Let it write for a random 5..80 ms, then SIGKILL it mid-loop.
        std::thread::sleep(Duration::from_millis(5 + rng.below(75) as u64));
        child.0.kill().expect("kill");
        child.0.wait().expect("reap");
        let done = read_done(&mut child);
        finished_total += done.len();
        // A fresh process (here: a fresh ledger value) reads the file.
        let l = FileLedger::new(&ledger);
        let probe = format!("probe-{round}");
        assert_eq!(
            l.claim(&req(&probe))
                .expect("the ledger is readable after a kill"),
            Claim::Claimed,
            "round {round}"
        );
        // Everything the killed writer reported done is there, finished.
        for id in &done {
            match l.claim(&req(id)).expect("read") {
                Claim::Taken(Some(run)) if run.result != PreviousResult::Running => {}
                other => panic!("round {round}: {id} lost after the kill: {other:?}"),
            }
        }
        // The id it was writing when killed is claimed or not, never torn.
        let next = format!("{prefix}-{}", done.len());
        assert!(matches!(
            l.claim(&req(&next)).expect("read"),
            Claim::Claimed | Claim::Taken(_)
        ));
    }
    let text = std::fs::read_to_string(&ledger).expect("ledger");
    let leftovers = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .count();
    println!(
        "{rounds} kills, {finished_total} operations finished before them, ledger {} bytes, {leftovers} temporary files left by killed writers",
        text.len()
    );
    assert!(finished_total > 0, "the writers never got to write");
}

#[test]
fn two_processes_claiming_one_id_at_the_same_instant_leave_exactly_one_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = dir.path().join("ledger.json");
    let mut wins = 0;
    let rounds = 20;
    let t = Instant::now();
    for round in 0..rounds {
        let start = dir.path().join(format!("start-{round}"));
        let id = format!("same-{round}");
        let a = spawn(&[
            "claim",
            &ledger.display().to_string(),
            &start.display().to_string(),
            &id,
        ]);
        let b = spawn(&[
            "claim",
            &ledger.display().to_string(),
            &start.display().to_string(),
            &id,
        ]);
        std::fs::write(&start, b"go").expect("start");
        let mut claimed = 0;
        for mut c in [a, b] {
            let out = c.0.stdout.take().expect("stdout");
            claimed += BufReader::new(out)
                .lines()
                .map_while(Result::ok)
                .filter(|l| l.starts_with("claimed "))
                .count();
            assert!(c.0.wait().expect("wait").success());
        }
        assert_eq!(claimed, 1, "round {round}");
        wins += claimed;
    }
    println!(
        "{rounds} races, {wins} winners, {} ms",
        t.elapsed().as_millis()
    );
}

/// What remains of a deadline, in the calls these tests make outside any
/// operation: 10 s.
const LEFT: std::time::Duration = std::time::Duration::from_secs(10);

/// A claim of `id` (a write) with [`LEFT`] left.
fn req(id: &str) -> sluice_policy::ClaimRequest<'_> {
    sluice_policy::ClaimRequest::new(id, sluice_policy::Effect::Write, LEFT)
}
