//! The cost of one operation's ledger work — a claim and a finish — per
//! store, at 1,000, 100,000 and 1,000,000 ids already kept, beside a floor:
//! two commits of one row each in a plain SQLite table (WAL, same sync
//! mode), what any store that commits a claim and a finish pays at least.
//!
//! ```text
//! cargo run --release -p sluice-ledger --example ledger_bench
//! cargo run --release -p sluice-ledger --example ledger_bench -- --quick
//! cargo run --release -p sluice-ledger --example ledger_bench -- --only "SqliteLedger FULL" --ids 1000
//! ```
//!
//! `--quick` leaves out the 1,000,000-id rows; `--only TEXT` runs the rows
//! whose store name contains TEXT; `--ids N` runs the SQLite, PostgreSQL
//! and memory rows at N ids only; `--pg-fsync off` runs the PostgreSQL
//! server without `fsync` (what is left is the round trips, TLS's cost
//! among them, not the disk's).
//!
//! The PostgreSQL rows run against a server the example starts itself (the
//! testkit's: Debian's `postgresql`, a throwaway data directory, `fsync`
//! on, loopback TCP, TLS on), beside a floor of two one-row commits on the
//! same server in plain TCP: the store in plain TCP (`PostgresLedger`) and
//! over TLS, the certificate checked (`PostgresLedger TLS`); they are left
//! out when PostgreSQL is not installed.
//!
//! Each figure is the median of 7 rounds of a batch of operations on fresh
//! ids (ids look like UUIDs: random, so a claim lands anywhere in the
//! index). The JSON `FileLedger` rewrites its whole file per change and is
//! measured only at 1,000 and 10,000 ids. The same measurement, under
//! criterion, is `crates/bench/benches/ledger.rs`.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_ledger::{PostgresLedger, SqliteLedger, SyncMode};
use sluice_policy::{Claim, FileLedger, Ledger, MemoryLedger, PreviousRun};

mod common;
use common::{a_run, id};

const RUNS: usize = 7;

/// Median, min and max of some durations.
#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    min: Duration,
    max: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    Stats {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// `RUNS` rounds; each round times a batch of `ops` operations of every
/// contender in turn (`op(i)` runs operation `i`, fresh per call), so a
/// change in the disk's speed meanwhile (other work on the machine) hits
/// them alike. Per contender: the time per operation of each round.
fn rounds(ops: u64, contenders: &mut [&mut dyn FnMut(u64)]) -> Vec<Vec<Duration>> {
    let mut times = vec![Vec::new(); contenders.len()];
    for round in 0..RUNS as u64 {
        for (c, op) in contenders.iter_mut().enumerate() {
            let start = Instant::now();
            for j in 0..ops {
                op(round * ops + j);
            }
            times[c].push(start.elapsed() / ops as u32);
        }
    }
    times
}

fn measure(ops: u64, mut op: impl FnMut(u64)) -> Stats {
    stats(rounds(ops, &mut [&mut op]).remove(0))
}

fn claim_finish(ledger: &dyn Ledger, id: &str, run: &PreviousRun) {
    assert_eq!(ledger.claim(&req(id)).expect("claim"), Claim::Claimed);
    ledger.finish(&done(id, run)).expect("finish");
}

fn row(store: &str, ids: u64, ops: u64, t: Stats, vs_floor: Option<f64>) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let ratio = vs_floor.map_or(String::new(), |r| format!("{r:.2}"));
    println!(
        "| {store:<24} | {ids:>9} | {ops:>6} | {:>9.1} | {:>9.1} | {:>9.1} | {ratio:>7} |",
        us(t.median),
        us(t.min),
        us(t.max)
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

/// A plain table in WAL mode, `sync`, for the floor: two commits of one
/// row each per operation.
fn floor_table(path: &Path, sync: &str) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("floor db");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode, "wal");
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {sync}; CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);"
    ))
    .expect("floor table");
    conn
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args.get(i + 1).expect("--only TEXT").clone());
    let wanted = |store: &str| only.as_ref().is_none_or(|o| store.contains(o.as_str()));
    let ids_arg = args.iter().position(|a| a == "--ids").map(|i| {
        args.get(i + 1)
            .expect("--ids N")
            .parse::<u64>()
            .expect("a number")
    });
    let sizes: Vec<u64> = match ids_arg {
        Some(n) => vec![n],
        None if quick => vec![1_000, 100_000],
        None => vec![1_000, 100_000, 1_000_000],
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let run = a_run();
    println!(
        "claim + finish, µs per operation: median (min, max) of {RUNS} rounds; \
         × floor: the median of the rounds' ratios to the floor timed beside it\n"
    );
    println!(
        "| {:<24} | {:>9} | {:>6} | {:>9} | {:>9} | {:>9} | {:>7} |",
        "store", "ids kept", "ops", "median µs", "min µs", "max µs", "× floor"
    );
    println!(
        "|{:-<26}|{:->11}|{:->8}|{:->11}|{:->11}|{:->11}|{:->9}|",
        "", "", "", "", "", "", ""
    );

    for (name, sync, pragma, ops) in [
        ("FULL", SyncMode::Full, "FULL", 300),
        ("NORMAL", SyncMode::Normal, "NORMAL", 5_000),
    ] {
        let store = format!("SqliteLedger {name}");
        for &n in sizes.iter().filter(|_| wanted(&store)) {
            let path = dir.path().join(format!("sqlite-{name}-{n}.db"));
            let floor_path = dir.path().join(format!("floor-{name}-{n}.db"));
            let ledger = prefilled(&path, n, sync, &run);
            let floor = floor_table(&floor_path, pragma);
            let mut insert = floor
                .prepare("INSERT INTO t (v) VALUES (?1)")
                .expect("prepare");
            let mut t = rounds(
                ops,
                &mut [
                    &mut |_| {
                        insert.execute(["claim"]).expect("commit 1");
                        insert.execute(["finish"]).expect("commit 2");
                    },
                    &mut |i| claim_finish(&ledger, &id(i), &run),
                ],
            );
            let ours = t.pop().expect("the ledger's times");
            let floor_t = t.pop().expect("the floor's times");
            let mut ratios: Vec<f64> = ours
                .iter()
                .zip(&floor_t)
                .map(|(o, f)| o.as_secs_f64() / f.as_secs_f64())
                .collect();
            ratios.sort_by(f64::total_cmp);
            row(
                &format!("floor, 2 commits, {name}"),
                0,
                ops,
                stats(floor_t),
                None,
            );
            row(&store, n, ops, stats(ours), Some(ratios[ratios.len() / 2]));
            drop(insert);
            drop(floor);
            drop(ledger);
            remove_db(&path);
            remove_db(&floor_path);
        }
    }

    if wanted("PostgresLedger") {
        let fsync = args
            .iter()
            .position(|a| a == "--pg-fsync")
            .is_none_or(|i| args.get(i + 1).map(String::as_str) != Some("off"));
        postgres_rows(&sizes, &run, fsync);
    }

    for &n in sizes.iter().filter(|_| wanted("MemoryLedger")) {
        let ledger = MemoryLedger::new();
        for i in 0..n {
            let filled = ledger.claim(&req(&id(1 << 40 | i))).expect("claim");
            assert_eq!(filled, sluice_policy::Claim::Claimed, "ids are fresh");
        }
        let m = measure(100_000, |i| claim_finish(&ledger, &id(i), &run));
        row("MemoryLedger", n, 100_000, m, None);
    }

    for n in [1_000u64, 10_000]
        .into_iter()
        .filter(|_| wanted("FileLedger (JSON)"))
    {
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
        row("FileLedger (JSON)", n, ops, m, None);
    }
}

/// The PostgreSQL rows: one server (fsync on unless `--pg-fsync off`, TLS on with a certificate of
/// a per-run CA), the ledger's tables filled to each size in turn with
/// finished rows (ids: md5 of a number, random hex like the others), timed
/// beside a floor of two one-row commits in plain TCP: the store in plain
/// TCP (`sslmode=disable`) and over TLS (`sslmode=verify-full`).
fn postgres_rows(sizes: &[u64], run: &PreviousRun, fsync: bool) {
    let pki = sluice_testkit::TestPki::new().expect("a per-run CA");
    let pg = match sluice_testkit::Postgres::start_with(sluice_testkit::PostgresOptions {
        fsync,
        tls: Some(sluice_testkit::PostgresTls {
            cert: pki.server(sluice_testkit::ServerCert::Good),
            client_ca: None,
            auth: sluice_testkit::TlsAuth::PasswordAnyTransport,
        }),
    }) {
        Ok(pg) => pg,
        Err(e) => {
            eprintln!("PostgreSQL rows left out: {e}");
            return;
        }
    };
    let url = format!("{}?sslmode=disable", pg.url_with_password());
    let ledger = PostgresLedger::open(&url).expect("the PostgreSQL ledger opens");
    let tls_url = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.url_with_password(),
        pki.ca_file().display()
    );
    let tls_ledger = PostgresLedger::open(&tls_url).expect("the PostgreSQL ledger opens over TLS");
    let mut raw = postgres::Client::connect(&url, postgres::NoTls).expect("a raw connection");
    raw.batch_execute("CREATE TABLE floor (id bigserial PRIMARY KEY, v text)")
        .expect("floor table");
    let floor = raw
        .prepare("INSERT INTO floor (v) VALUES ($1)")
        .expect("prepare");
    // The same commits sent as the store sends its statements: unnamed,
    // parsed and planned by the server each time (PgBouncer's transaction
    // pooling allows nothing else).
    let mut unnamed = postgres::Client::connect(&url, postgres::NoTls).expect("a raw connection");
    let text = serde_json::to_string(run).expect("run as JSON");
    let mut filled = 0u64;
    let ops = 200;
    for &n in sizes {
        // Fill up to n (sizes ascend), then let autovacuum's analyze not
        // land inside a round: analyze now.
        raw.execute(
            "INSERT INTO sluice_ledger (id, claimed_at, finished_at, run)
             SELECT md5(i::text), (extract(epoch from now()) * 1000)::bigint,
                    (extract(epoch from now()) * 1000)::bigint, $3
             FROM generate_series($1::bigint, $2::bigint) AS i",
            &[&(filled as i64), &(n as i64 - 1), &text],
        )
        .expect("prefill");
        filled = n;
        raw.batch_execute("VACUUM ANALYZE sluice_ledger")
            .expect("vacuum");
        raw.batch_execute("CHECKPOINT").expect("checkpoint");
        let offset = n << 20;
        let mut t = rounds(
            ops,
            &mut [
                &mut |_| {
                    raw.execute(&floor, &[&"claim"]).expect("commit 1");
                    raw.execute(&floor, &[&"finish"]).expect("commit 2");
                },
                &mut |_| {
                    for v in ["claim", "finish"] {
                        unnamed
                            .execute_typed(
                                "INSERT INTO floor (v) VALUES ($1)",
                                &[(&v, postgres::types::Type::TEXT)],
                            )
                            .expect("an unnamed commit");
                    }
                },
                &mut |i| claim_finish(&ledger, &id(offset + i), run),
                &mut |i| claim_finish(&tls_ledger, &id(offset + (1 << 19) + i), run),
            ],
        );
        let over_tls = t.pop().expect("the ledger's times over TLS");
        let ours = t.pop().expect("the ledger's times");
        let unnamed_t = t.pop().expect("the unnamed floor's times");
        let floor_t = t.pop().expect("the floor's times");
        let ratio = |v: &[Duration]| {
            let mut r: Vec<f64> = v
                .iter()
                .zip(&floor_t)
                .map(|(o, f)| o.as_secs_f64() / f.as_secs_f64())
                .collect();
            r.sort_by(f64::total_cmp);
            r[r.len() / 2]
        };
        let (plain_ratio, tls_ratio) = (ratio(&ours), ratio(&over_tls));
        let unnamed_ratio = ratio(&unnamed_t);
        row("floor, 2 commits, PG", 0, ops, stats(floor_t), None);
        row(
            "floor, 2 unnamed, PG",
            0,
            ops,
            stats(unnamed_t),
            Some(unnamed_ratio),
        );
        row("PostgresLedger", n, ops, stats(ours), Some(plain_ratio));
        row(
            "PostgresLedger TLS",
            n,
            ops,
            stats(over_tls),
            Some(tls_ratio),
        );
    }
}

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
