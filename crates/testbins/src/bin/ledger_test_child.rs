//! A child process of the SQLite ledger's tests
//! (`tests/it/sqlite_children.rs`); not for use on its own. Run as
//! `ledger-test-child <role> <ledger> <seed> [<log>]`; it talks to its
//! parent through pipes (a line on stdin to start, lines on stdout), so no
//! test sleeps on a guessed delay.
//!
//! * `claim-all`: open the ledger, wait for a line on stdin, claim `id-0`
//!   to `id-999` (ascending for an even seed, descending for an odd one),
//!   printing `CLAIMED <id>` for each id won, then `DONE`.
//! * `claim-and-log`: claim `id-0` to `id-1999` in an order given by the
//!   seed, logging each id won to `<log>` (synced) once its claim
//!   returned, printing `TICK` after each claim, then finishing it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use sluice_ledger::SqliteLedger;
use sluice_policy::{AttemptError, Claim, Effect, Ledger, Operation, Policy, PreviousRun};

use sluice_testbins::shuffle::shuffled;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [role, path, seed, rest @ ..] = args.as_slice() else {
        eprintln!("usage: ledger-test-child <role> <ledger> <seed> [<log>]");
        std::process::exit(2);
    };
    let path = PathBuf::from(path);
    let seed: u64 = seed.parse().expect("a number");
    match role.as_str() {
        "claim-all" => claim_all(&path, seed),
        "claim-and-log" => claim_and_log(&path, seed, Path::new(rest.first().expect("a log path"))),
        other => panic!("unknown child role {other}"),
    }
}

/// A run summary as the policy makes one.
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

/// Open the ledger, wait for the parent's line on stdin, claim `id-0` to
/// `id-999` (ascending for an even seed, descending for an odd one) and
/// print `CLAIMED <id>` for each id won.
fn claim_all(path: &Path, seed: u64) {
    let ledger = SqliteLedger::open(path).expect("the ledger opens");
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .expect("the parent's go");
    let mut out = std::io::stdout().lock();
    let ids: Vec<u64> = if seed.is_multiple_of(2) {
        (0..1000).collect()
    } else {
        (0..1000).rev().collect()
    };
    for i in ids {
        let id = format!("id-{i}");
        match ledger.claim(&req(&id)).expect("a claim never fails") {
            Claim::Claimed => writeln!(out, "CLAIMED {id}").expect("stdout"),
            Claim::Taken(_) => {}
        }
    }
    writeln!(out, "DONE").expect("stdout");
}

/// Claim `id-0` to `id-1999` in an order given by the seed; log each id won
/// to the log file (synced) once the claim returned, then finish it. Prints
/// `TICK` after each claim so the parent can choose when to kill.
fn claim_and_log(path: &Path, seed: u64, log_path: &Path) {
    let ledger = SqliteLedger::open(path).expect("the ledger opens");
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .expect("the log opens");
    let run = a_run();
    let mut out = std::io::stdout().lock();
    for i in shuffled(2000, seed) {
        let id = format!("id-{i}");
        let claim = ledger.claim(&req(&id)).expect("a claim never fails");
        if claim == Claim::Claimed {
            writeln!(log, "{id}").expect("log");
            log.sync_data().expect("log synced");
        }
        writeln!(out, "TICK").expect("stdout");
        out.flush().expect("stdout");
        if claim == Claim::Claimed {
            ledger.finish(&done(&id, &run)).expect("finish");
        }
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
