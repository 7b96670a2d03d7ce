//! A child process for the ledger tests (`tests/it/ledger.rs`); not for use
//! on its own.
//!
//! * `ledger-worker claim <ledger> <start-file> <ids...>`: prints `ready`,
//!   waits until `<start-file>` exists, then claims every id in the order given and
//!   finishes the ones it claimed; prints `claimed <id>` for each, as it
//!   goes.
//! * `ledger-worker churn <ledger> <prefix>`: claims and finishes
//!   `<prefix>-0`, `<prefix>-1`, ... without end, printing `done <id>`
//!   after each finish (the parent kills it).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use sluice_policy::{
    AttemptRecord, Claim, Class, Effect, FileLedger, Ledger, PreviousResult, PreviousRun,
};

fn run_of(n: u64) -> PreviousRun {
    let mut run = PreviousRun::running(None, Some(Effect::Read), Duration::from_millis(n));
    run.result = PreviousResult::Succeeded;
    run.attempts = vec![AttemptRecord {
        n: 1,
        phase: "done".into(),
        class: None::<Class>,
        cause: None,
        remaining_ms: 1000,
        timeout_ms: 1000,
        delay_ms: None,
        elapsed_ms: n,
        request_id: None,
        waited_ms: None,
    }];
    run
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = std::io::stdout();
    match args.first().map(String::as_str) {
        Some("claim") if args.len() >= 3 => {
            let ledger = FileLedger::new(&args[1]);
            let start = Path::new(&args[2]);
            // Up and about to wait: the parent starts no one before every
            // worker has said so.
            {
                let mut o = out.lock();
                writeln!(o, "ready").expect("stdout");
                o.flush().expect("stdout");
            }
            let until = Instant::now() + Duration::from_secs(30);
            while !start.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_micros(200));
            }
            for (i, id) in args[3..].iter().enumerate() {
                match ledger.claim(&req(id)) {
                    Ok(Claim::Claimed) => {
                        ledger.finish(&done(id, &run_of(i as u64))).expect("finish");
                        let mut o = out.lock();
                        writeln!(o, "claimed {id}").expect("stdout");
                        o.flush().expect("stdout");
                    }
                    Ok(Claim::Taken(_)) => {}
                    Err(e) => {
                        eprintln!("ledger error: {e}");
                        std::process::exit(3);
                    }
                }
            }
        }
        Some("churn") if args.len() == 3 => {
            let ledger = FileLedger::new(&args[1]);
            for n in 0u64.. {
                let id = format!("{}-{n}", args[2]);
                match ledger.claim(&req(&id)) {
                    Ok(Claim::Claimed) => {}
                    other => {
                        eprintln!("unexpected claim of {id}: {other:?}");
                        std::process::exit(3);
                    }
                }
                ledger.finish(&done(&id, &run_of(n))).expect("finish");
                let mut o = out.lock();
                writeln!(o, "done {id}").expect("stdout");
                o.flush().expect("stdout");
            }
        }
        _ => {
            eprintln!("usage: ledger-worker claim <ledger> <start-file> <ids...> | churn <ledger> <prefix>");
            std::process::exit(2);
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
