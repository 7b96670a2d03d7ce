//! The cost of one operation's ledger work — a claim and a finish — per
//! store, at 1,000, 100,000 and 1,000,000 ids already kept, beside a floor:
//! two commits of one row each in a plain SQLite table (WAL, same sync
//! mode), what any store that commits a claim and a finish pays at least.
//!
//! ```text
//! cargo run --release -p sluice-ledger --example ledger_bench
//! cargo run --release -p sluice-ledger --example ledger_bench -- --quick
//! ```
//!
//! Each figure is the median of 5 runs of a batch of operations on fresh
//! ids (ids look like UUIDs: random, so a claim lands anywhere in the
//! index). The JSON `FileLedger` rewrites its whole file per change and is
//! measured only at 1,000 and 10,000 ids. The same measurement, under
//! criterion, is `crates/bench/benches/ledger.rs`.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_ledger::{SqliteLedger, SyncMode};
use sluice_policy::{
    AttemptError, Claim, Effect, FileLedger, Ledger, MemoryLedger, Operation, Policy, PreviousRun,
};

const RUNS: usize = 5;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The `i`-th id: 32 random-looking hex digits, like a UUID.
fn id(i: u64) -> String {
    format!("{:016x}{:016x}", mix(i), mix(i ^ 0x5555_5555_5555_5555))
}

fn a_run() -> PreviousRun {
    Policy::default()
        .run(
            Operation::new("push", Effect::Write, "git://127.0.0.1:9418/repo.git"),
            |ctx| {
                ctx.reached("reported");
                Ok::<_, AttemptError>(())
            },
        )
        .summary()
}

/// Median, min and max of `RUNS` runs of `ops` operations each, per
/// operation; `op(i)` runs operation `i` (fresh per call).
fn measure(ops: u64, mut op: impl FnMut(u64)) -> (Duration, Duration, Duration) {
    let mut per_op: Vec<Duration> = (0..RUNS as u64)
        .map(|run| {
            let start = Instant::now();
            for j in 0..ops {
                op(run * ops + j);
            }
            start.elapsed() / ops as u32
        })
        .collect();
    per_op.sort();
    (per_op[RUNS / 2], per_op[0], per_op[RUNS - 1])
}

fn claim_finish(ledger: &dyn Ledger, id: &str, run: &PreviousRun) {
    assert_eq!(ledger.claim(id).expect("claim"), Claim::Claimed);
    ledger.finish(id, run.clone()).expect("finish");
}

fn row(store: &str, ids: u64, ops: u64, (median, min, max): (Duration, Duration, Duration)) {
    println!(
        "| {store:<22} | {ids:>9} | {ops:>6} | {:>10.1} | {:>10.1} | {:>10.1} |",
        median.as_secs_f64() * 1e6,
        min.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6
    );
}

/// A SQLite ledger holding `n` finished ids, written in one transaction.
fn prefilled(path: &Path, n: u64, sync: SyncMode, run: &PreviousRun) -> SqliteLedger {
    drop(SqliteLedger::open(path).expect("create"));
    let mut conn = rusqlite::Connection::open(path).expect("raw connection");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let text = serde_json::to_string(run).expect("run as JSON");
    let tx = conn.transaction().expect("begin");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO claims (id, claimed_at, finished_at, run) VALUES (?1, ?2, ?2, ?3)",
            )
            .expect("prepare");
        for i in 0..n {
            insert
                .execute(rusqlite::params![id(1 << 40 | i), now, text])
                .expect("insert");
        }
    }
    tx.commit().expect("commit");
    drop(conn);
    SqliteLedger::options()
        .sync(sync)
        .open(path)
        .expect("reopen")
}

/// Two commits of one row each in a plain table, WAL, `sync`.
fn floor(path: &Path, sync: &str, ops: u64) -> (Duration, Duration, Duration) {
    let conn = rusqlite::Connection::open(path).expect("floor db");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
    ))
    .expect("floor table");
    let mut insert = conn
        .prepare("INSERT INTO t (v) VALUES (?1)")
        .expect("prepare");
    measure(ops, |_| {
        insert.execute(["claim"]).expect("commit 1");
        insert.execute(["finish"]).expect("commit 2");
    })
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[u64] = if quick {
        &[1_000, 100_000]
    } else {
        &[1_000, 100_000, 1_000_000]
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let run = a_run();
    println!("claim + finish, µs per operation: median (min, max) of {RUNS} runs\n");
    println!(
        "| {:<22} | {:>9} | {:>6} | {:>10} | {:>10} | {:>10} |",
        "store", "ids kept", "ops", "median µs", "min µs", "max µs"
    );
    println!(
        "|{:-<24}|{:->11}|{:->8}|{:->12}|{:->12}|{:->12}|",
        "", "", "", "", "", ""
    );

    for (name, sync, pragma, ops) in [
        ("FULL", SyncMode::Full, "FULL", 300),
        ("NORMAL", SyncMode::Normal, "NORMAL", 5_000),
    ] {
        let f = floor(&dir.path().join(format!("floor-{name}.db")), pragma, ops);
        row(&format!("floor, 2 commits, {name}"), 0, ops, f);
        for &n in sizes {
            let path = dir.path().join(format!("sqlite-{name}-{n}.db"));
            let ledger = prefilled(&path, n, sync, &run);
            let m = measure(ops, |i| claim_finish(&ledger, &id(i), &run));
            row(&format!("SqliteLedger {name}"), n, ops, m);
            drop(ledger);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }

    for &n in sizes {
        let ledger = MemoryLedger::new();
        for i in 0..n {
            ledger.claim(&id(1 << 40 | i)).expect("claim");
        }
        let m = measure(100_000, |i| claim_finish(&ledger, &id(i), &run));
        row("MemoryLedger", n, 100_000, m);
    }

    for n in [1_000u64, 10_000] {
        let path = dir.path().join(format!("file-{n}.json"));
        let ledger = FileLedger::new(&path);
        let mut prefill = String::from("{\"operations\":{");
        let text = serde_json::to_string(&run).expect("run as JSON");
        for i in 0..n {
            if i > 0 {
                prefill.push(',');
            }
            prefill.push_str(&format!("\"{}\":{text}", id(1 << 40 | i)));
        }
        prefill.push_str("}}");
        std::fs::write(&path, prefill).expect("prefill");
        let ops = if n > 1_000 { 20 } else { 100 };
        let m = measure(ops, |i| claim_finish(&ledger, &id(i), &run));
        row("FileLedger (JSON)", n, ops, m);
    }
}
