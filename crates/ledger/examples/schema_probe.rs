//! Why the SQLite ledger's claim + finish grows with the ids kept: the
//! ledger's SQL, and one alternative layout, run raw against SQLite beside
//! the floor of `ledger_bench` (two one-row commits, same sync mode).
//!
//! ```text
//! cargo run --release -p sluice-ledger --example schema_probe -- 1000 1000000
//! cargo run --release -p sluice-ledger --example schema_probe -- --cache-kib 131072 1000 1000000
//! ```
//!
//! Contenders, each on its own database, timed in turn in every round:
//!
//! * `floor`: `INSERT` of a short row into a rowid table, twice;
//! * `schema 2`: the ledger's own statements on its own table (one row per
//!   id, `WITHOUT ROWID`, the run's JSON in the row; the finish makes the
//!   row grow by the JSON);
//! * `split`: the run's JSON appended to a rowid table of its own, the
//!   id's row holding only times and the run's rowid (the finish is one
//!   transaction of an append and an `UPDATE` that changes no row's size
//!   much).
//!
//! Both layouts get what the ledger gives its database: a checkpointer
//! thread with its own connection woken every 500 commits, and a
//! self-checkpoint backstop at 10,000 WAL pages; the floor keeps SQLite's
//! defaults, as in `ledger_bench`. `--cache-kib N` sets both layouts'
//! page cache (`PRAGMA cache_size = -N`; SQLite's default is 2,000 KiB).
//! Raw: no mutex, no JSON encoding per call, so `schema 2` here is a few
//! µs under the ledger's own row in `ledger_bench`.

use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

mod common;
use common::{a_run, id};

const RUNS: usize = 7;
const OPS: u64 = 5_000;
const NOW: i64 = 1_700_000_000_000;

fn open(path: &Path, extra: &str) -> Connection {
    let conn = Connection::open(path).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    conn.execute_batch(&format!("PRAGMA synchronous = NORMAL; {extra}"))
        .expect("pragmas");
    conn
}

/// A thread checkpointing `path` (PASSIVE) whenever it is woken.
fn checkpointer(path: &Path) -> SyncSender<()> {
    let (wake, woken) = sync_channel::<()>(1);
    let conn = open(path, "");
    std::thread::spawn(move || {
        while woken.recv().is_ok() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        }
    });
    wake
}

/// The ledger's claim (the same statement in both layouts): a fresh id
/// must be inserted.
fn claim(c: &Connection, id: &str) {
    let n = c
        .prepare_cached(
            "INSERT INTO claims (id, claimed_at) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id, NOW]))
        .expect("claim");
    assert_eq!(n, 1);
}

struct Layout {
    name: &'static str,
    schema: &'static str,
    /// Prefill of one finished id.
    fill: fn(&Connection, &str, &str),
    /// One claim + finish of a fresh id.
    op: fn(&Connection, &str, &str),
}

const LAYOUTS: [Layout; 2] = [
    Layout {
        name: "schema 2",
        schema: "CREATE TABLE claims (id TEXT PRIMARY KEY NOT NULL, claimed_at INTEGER NOT NULL,
                 finished_at INTEGER, run TEXT) WITHOUT ROWID;",
        fill: |c, id, run| {
            c.prepare_cached("INSERT INTO claims VALUES (?1, ?2, ?2, ?3)")
                .and_then(|mut s| s.execute(params![id, NOW, run]))
                .expect("fill");
        },
        op: |c, id, run| {
            claim(c, id);
            c.prepare_cached(
                "INSERT INTO claims (id, claimed_at, finished_at, run) VALUES (?1, ?2, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, run = excluded.run",
            )
            .and_then(|mut s| s.execute(params![id, NOW, run]))
            .expect("finish");
        },
    },
    Layout {
        name: "split",
        schema: "CREATE TABLE claims (id TEXT PRIMARY KEY NOT NULL, claimed_at INTEGER NOT NULL,
                 finished_at INTEGER, run_ref INTEGER) WITHOUT ROWID;
                 CREATE TABLE runs (r INTEGER PRIMARY KEY, run TEXT NOT NULL);",
        fill: |c, id, run| {
            c.prepare_cached("INSERT INTO runs (run) VALUES (?1)")
                .and_then(|mut s| s.execute([run]))
                .expect("fill run");
            c.prepare_cached("INSERT INTO claims VALUES (?1, ?2, ?2, ?3)")
                .and_then(|mut s| s.execute(params![id, NOW, c.last_insert_rowid()]))
                .expect("fill id");
        },
        op: |c, id, run| {
            claim(c, id);
            let tx =
                rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate)
                    .expect("begin");
            tx.prepare_cached("INSERT INTO runs (run) VALUES (?1)")
                .and_then(|mut s| s.execute([run]))
                .expect("append run");
            let n = tx
                .prepare_cached("UPDATE claims SET finished_at = ?2, run_ref = ?3 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, NOW, tx.last_insert_rowid()]))
                .expect("finish");
            assert_eq!(n, 1);
            tx.commit().expect("commit");
        },
    },
];

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut cache = String::new();
    if let Some(i) = args.iter().position(|a| a == "--cache-kib") {
        let kib: u64 = args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .expect("--cache-kib N");
        cache = format!("PRAGMA cache_size = -{kib};");
        args.drain(i..i + 2);
    }
    let sizes: Vec<u64> = args
        .iter()
        .map(|a| a.parse().expect("ids kept: a number"))
        .collect();
    let run = serde_json::to_string(&a_run()).expect("run as JSON");
    println!("claim + finish, µs per operation: median of {RUNS} rounds of {OPS}; × floor: median of the rounds' ratios");
    println!(
        "page cache of the layouts: {}\n",
        if cache.is_empty() {
            "SQLite's default"
        } else {
            &cache
        }
    );
    println!(
        "| {:<10} | {:>9} | {:>9} | {:>9} | {:>7} |",
        "layout", "ids kept", "median µs", "min µs", "× floor"
    );
    println!(
        "|{:-<12}|{:->11}|{:->11}|{:->11}|{:->9}|",
        "", "", "", "", ""
    );
    for &n in &sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let floor = open(&dir.path().join("floor.db"), "");
        floor
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);")
            .expect("floor table");
        let mut dbs = Vec::new();
        for (k, layout) in LAYOUTS.iter().enumerate() {
            let path = dir.path().join(format!("layout-{k}.db"));
            let conn = open(&path, &cache);
            conn.execute_batch(layout.schema).expect("schema");
            conn.execute_batch("BEGIN").expect("begin");
            for i in 0..n {
                (layout.fill)(&conn, &id(1 << 40 | i), &run);
            }
            conn.execute_batch(
                "COMMIT; PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 10000;",
            )
            .expect("prefilled");
            dbs.push((conn, checkpointer(&path)));
        }
        let mut times = vec![Vec::new(); LAYOUTS.len() + 1];
        for round in 0..RUNS as u64 {
            let start = Instant::now();
            for _ in 0..OPS {
                for v in ["claim", "finish"] {
                    floor
                        .prepare_cached("INSERT INTO t (v) VALUES (?1)")
                        .and_then(|mut s| s.execute([v]))
                        .expect("floor commit");
                }
            }
            times[0].push(start.elapsed() / OPS as u32);
            for (k, (layout, (conn, wake))) in LAYOUTS.iter().zip(&dbs).enumerate() {
                let start = Instant::now();
                for j in 0..OPS {
                    if j % 250 == 0 {
                        // 500 commits: as the ledger wakes its checkpointer.
                        let _ = wake.try_send(());
                    }
                    (layout.op)(conn, &id(round * OPS + j), &run);
                }
                times[k + 1].push(start.elapsed() / OPS as u32);
            }
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        for (k, name) in std::iter::once("floor")
            .chain(LAYOUTS.iter().map(|l| l.name))
            .enumerate()
        {
            let mut t = times[k].clone();
            let mut ratios: Vec<f64> = times[k]
                .iter()
                .zip(&times[0])
                .map(|(a, f)| a.as_secs_f64() / f.as_secs_f64())
                .collect();
            ratios.sort_by(f64::total_cmp);
            t.sort();
            println!(
                "| {name:<10} | {n:>9} | {:>9.1} | {:>9.1} | {:>7.2} |",
                us(t[RUNS / 2]),
                us(t[0]),
                ratios[RUNS / 2]
            );
        }
    }
}
