//! A replica process of the PostgreSQL ledger's tests
//! (`tests/it/pg_replicas.rs`); not for use on its own. Run as
//! `pg-test-replica <role> <seed>`, the database's URL in
//! `SLUICE_PG_TEST_URL` (kept out of the command line: it holds the
//! password); it talks to its parent through pipes (a line on stdin to
//! start, lines on stdout), so no test sleeps on a guessed delay.
//!
//! * `run-all`: wait for a line on stdin, run operations `id-0` to
//!   `id-999` under the policy, printing `RAN <id>` from inside each run,
//!   then `DONE`.
//! * `run-and-log`: run `id-0` to `id-1999` in an order given by the seed,
//!   each run appending its id to `SLUICE_PG_TEST_LOG` (synced); `TICK`
//!   after each.
//! * `storm`: run a few operations against the refusing remote at
//!   `SLUICE_PG_TEST_REMOTE` under a small shared budget, printing
//!   `ATTEMPTS <n> <stopped>` for each, then `DONE`.
//! * `open`: open the ledger and print `OPENED` or `ERROR <error>`.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use sluice_ledger::PostgresLedger;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, Effect, Operation, OutcomeKind, Policy, RetryBudget,
};

use sluice_testbins::shuffle::shuffled;

const URL: &str = "SLUICE_PG_TEST_URL";
const LOG: &str = "SLUICE_PG_TEST_LOG";
const REMOTE: &str = "SLUICE_PG_TEST_REMOTE";

/// The shared budget of the storm test: 6 tokens, no refill, no credit, so
/// the bound on connections is exact (the parent's test reads the same).
const STORM_BUDGET: RetryBudget = RetryBudget {
    capacity: 6.0,
    refill_per_sec: 0.0,
    success_credit: 0.0,
};
/// Operations each replica of the storm test runs.
const STORM_OPS: u32 = 3;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [role, seed] = args.as_slice() else {
        eprintln!("usage: pg-test-replica <role> <seed>");
        std::process::exit(2);
    };
    let url = std::env::var(URL).expect("the database's URL");
    let seed: u64 = seed.parse().expect("a number");
    match role.as_str() {
        "run-all" => run_all(&url, seed),
        "run-and-log" => run_and_log(&url, seed),
        "storm" => storm(&url),
        "open" => match PostgresLedger::open(&url) {
            Ok(_) => println!("OPENED"),
            Err(e) => println!("ERROR {e}"),
        },
        other => panic!("unknown child role {other}"),
    }
}

/// A replica's policy: the PostgreSQL ledger and its shared budget.
fn replica_policy(url: &str, budget: RetryBudget) -> Policy {
    let ledger = Arc::new(PostgresLedger::open(url).expect("the ledger opens"));
    Policy::builder()
        .budget_store(ledger.budget_store())
        .retry_budget(budget)
        .ledger(ledger)
        .build()
}

fn wait_for_go() {
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .expect("the parent's go");
}

/// Run operations `id-0` to `id-999` (ascending for an even seed, descending
/// for an odd one) under the policy; print `RAN <id>` from inside each run.
fn run_all(url: &str, seed: u64) {
    let policy = replica_policy(url, RetryBudget::DEFAULT);
    wait_for_go();
    let mut out = std::io::stdout().lock();
    let ids: Vec<u64> = if seed.is_multiple_of(2) {
        (0..1000).collect()
    } else {
        (0..1000).rev().collect()
    };
    for i in ids {
        let id = format!("id-{i}");
        let outcome = policy.run(
            Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/r").id(&id),
            |ctx| {
                writeln!(out, "RAN {id}").expect("stdout");
                ctx.reached("done");
                Ok::<_, AttemptError>(())
            },
        );
        assert!(
            matches!(outcome.kind, OutcomeKind::Succeeded | OutcomeKind::Rejected),
            "{id}: {:?}",
            outcome.kind
        );
    }
    writeln!(out, "DONE").expect("stdout");
}

/// Run operations `id-0` to `id-1999` in an order given by the seed; each
/// run appends its id to the log (synced) before it returns. Prints `TICK`
/// after each operation, so the parent can choose when to kill.
fn run_and_log(url: &str, seed: u64) {
    let policy = replica_policy(url, RetryBudget::DEFAULT);
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(std::env::var_os(LOG).expect("a log path"))
        .expect("the log opens");
    let mut out = std::io::stdout().lock();
    for i in shuffled(2000, seed) {
        let id = format!("id-{i}");
        // Whether it ran or was rejected, the log line written before the
        // call is what the parent counts.
        let _ran_or_rejected = policy.run(
            Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/r").id(&id),
            |ctx| {
                writeln!(log, "{id}").expect("log");
                log.sync_data().expect("log synced");
                ctx.reached("done");
                Ok::<_, AttemptError>(())
            },
        );
        writeln!(out, "TICK").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// Run `STORM_OPS` operations against a remote that refuses every
/// connection, under the shared budget; print each operation's attempts
/// (`ATTEMPTS <n> <stopped>`).
fn storm(url: &str) {
    let remote: SocketAddr = std::env::var(REMOTE)
        .expect("the refusing remote")
        .parse()
        .expect("an address");
    let policy = replica_policy(url, STORM_BUDGET);
    wait_for_go();
    let mut out = std::io::stdout().lock();
    for n in 0..STORM_OPS {
        let outcome = policy.run(
            Operation::new("ls-refs", Effect::Read, format!("git://{remote}/r"))
                .id(format!("storm-{}-{n}", std::process::id()))
                .bounds(
                    Bounds::new(Duration::from_secs(10), Duration::from_secs(2), 1000)
                        .with_backoff(BackoffShape::constant(Duration::from_millis(5))),
                ),
            |_| match TcpStream::connect(remote) {
                Ok(_) => Ok(()),
                Err(e) => Err(AttemptError::unjudged("connect", e.to_string())),
            },
        );
        writeln!(
            out,
            "ATTEMPTS {} {:?}",
            outcome.attempts.len(),
            outcome.stopped
        )
        .expect("stdout");
    }
    writeln!(out, "DONE").expect("stdout");
}
