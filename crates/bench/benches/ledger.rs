//! The ledger's cost per operation — a claim and a finish on a fresh id —
//! per store, at 1,000, 100,000 and 1,000,000 ids already kept, beside a
//! floor: two commits of one row each in a plain SQLite table (WAL, same
//! sync mode), what any store that commits a claim and a finish pays at
//! least. Targets: the SQLite store flat (1,000,000 ids ≤ 1.2× 1,000) and
//! ≤ 1.2× its floor.
//!
//! The SQLite ledgers are filled in one transaction of raw inserts; the
//! JSON `FileLedger` rewrites its file per change and is measured at 1,000
//! and 10,000 ids only. Ids look like UUIDs (random), so a claim lands
//! anywhere in the index. The same measurement as a plain timing loop,
//! cheaper to build: `cargo run --release -p sluice-ledger --example
//! ledger_bench` (figures in BENCHMARKS.md).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_ledger::{SqliteLedger, SyncMode};
use sluice_policy::{
    AttemptError, Claim, Effect, FileLedger, Ledger, MemoryLedger, Operation, Policy, PreviousRun,
};

const SIZES: [u64; 3] = [1_000, 100_000, 1_000_000];

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

/// Ids of the pre-filled rows; the timed ones count from 0.
const PREFILLED: u64 = 1 << 40;

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
        .expect("a run that ran")
}

/// Time `iters` claim + finish pairs on fresh ids (made before the clock
/// starts); `next` counts the ids used so far across criterion's batches.
fn claim_finish(ledger: &dyn Ledger, run: &PreviousRun, next: &mut u64, iters: u64) -> Duration {
    let ids: Vec<String> = (*next..*next + iters).map(id).collect();
    *next += iters;
    let start = std::time::Instant::now();
    for id in &ids {
        assert_eq!(ledger.claim(&req(id)).expect("claim"), Claim::Claimed);
        ledger.finish(&done(id, run)).expect("finish");
    }
    start.elapsed()
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
                .execute(rusqlite::params![id(PREFILLED | i), now, text])
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

fn ledger(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = a_run();

    let mut g = c.benchmark_group("ledger claim+finish");
    g.sample_size(20);
    for (name, sync, pragma) in [
        ("sqlite FULL", SyncMode::Full, "FULL"),
        ("sqlite NORMAL", SyncMode::Normal, "NORMAL"),
    ] {
        let floor = rusqlite::Connection::open(dir.path().join(format!("floor-{pragma}.db")))
            .expect("floor db");
        floor
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .expect("wal");
        floor
            .execute_batch(&format!(
                "PRAGMA synchronous = {pragma}; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
            ))
            .expect("floor table");
        g.bench_function(format!("floor: 2 commits of 1 row, {pragma}"), |b| {
            let mut insert = floor
                .prepare("INSERT INTO t (v) VALUES (?1)")
                .expect("prepare");
            b.iter(|| {
                insert.execute(["claim"]).expect("commit 1");
                insert.execute(["finish"]).expect("commit 2");
            })
        });
        for n in SIZES {
            let ledger = prefilled(&dir.path().join(format!("{pragma}-{n}.db")), n, sync, &run);
            let mut next = 0;
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_custom(|iters| claim_finish(&ledger, &run, &mut next, iters))
            });
        }
    }

    for n in SIZES {
        let ledger = MemoryLedger::new();
        for i in 0..n {
            let _claim = ledger.claim(&req(&id(PREFILLED | i))).expect("claim");
        }
        let mut next = 0;
        g.bench_with_input(BenchmarkId::new("memory", n), &n, |b, _| {
            b.iter_custom(|iters| claim_finish(&ledger, &run, &mut next, iters))
        });
    }

    for n in [1_000u64, 10_000] {
        let path = dir.path().join(format!("file-{n}.json"));
        let text = serde_json::to_string(&run).expect("run as JSON");
        let body: Vec<String> = (0..n)
            .map(|i| format!("\"{}\":{text}", id(PREFILLED | i)))
            .collect();
        std::fs::write(&path, format!("{{\"operations\":{{{}}}}}", body.join(",")))
            .expect("prefill");
        let ledger = FileLedger::new(&path);
        let mut next = 0;
        g.sample_size(10);
        g.bench_with_input(BenchmarkId::new("file (JSON)", n), &n, |b, _| {
            b.iter_custom(|iters| claim_finish(&ledger, &run, &mut next, iters))
        });
    }
    g.finish();
    black_box(dir);
}

criterion_group!(benches, ledger);
criterion_main!(benches);

/// What remains of a deadline, in the calls these tests make outside any
/// operation: 10 s.
const LEFT: std::time::Duration = std::time::Duration::from_secs(10);

/// A claim of `id` (a write) with [`LEFT`] left.
fn req(id: &str) -> sluice_policy::ClaimRequest<'_> {
    sluice_policy::ClaimRequest::new(id, sluice_policy::Effect::Write, LEFT)
}

/// A finish of `id` with `run`, with [`LEFT`] left.
fn done<'a>(id: &'a str, run: &'a sluice_policy::PreviousRun) -> sluice_policy::FinishRequest<'a> {
    sluice_policy::FinishRequest::new(id, sluice_policy::Effect::Write, run, LEFT)
}
