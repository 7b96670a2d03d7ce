//! `ledger-probe`: the second process of the policy's cross-process ledger
//! tests (`tests/it/policy_file_ledger.rs`, which finds it as
//! `CARGO_BIN_EXE_ledger-probe`). Not for use on its own.
//!
//! `ledger-probe LEDGER ID CALLS OUT [--wait]`: runs one read with id `ID`
//! under a policy whose ledger is the file `LEDGER` (a manual clock: no
//! sleep is real); the operation appends this process's id to the file
//! `CALLS` each time it is called; the outcome is written as JSON to `OUT`.
//! With `--wait` it first reads its stdin to the end: the parent releases
//! every probe at once by closing their stdins.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use sluice_policy::{Bounds, Effect, FileLedger, ManualClock, Operation, Policy};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ledger, id, calls, out, wait) = match args.as_slice() {
        [l, i, c, o] => (l, i, c, o, false),
        [l, i, c, o, w] if w == "--wait" => (l, i, c, o, true),
        _ => {
            eprintln!("usage: ledger-probe LEDGER ID CALLS OUT [--wait]");
            return ExitCode::from(2);
        }
    };
    if wait {
        let mut sink = Vec::new();
        if let Err(e) = std::io::stdin().read_to_end(&mut sink) {
            eprintln!("ledger-probe: reading stdin: {e}");
            return ExitCode::FAILURE;
        }
    }
    let clock = ManualClock::new();
    let policy = Policy::builder()
        .clock(Arc::new(clock.clone()))
        .sleeper(Arc::new(clock))
        .ledger(Arc::new(FileLedger::new(PathBuf::from(ledger))))
        .build();
    let op = Operation::new("ls-refs", Effect::Read, "git://example.test/repo")
        .bounds(Bounds::default())
        .id(id.clone());
    let outcome = policy.run(op, |_ctx| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(calls)
            .map_err(|e| sluice_policy::AttemptError::local("connect", e.to_string()))?;
        writeln!(f, "{}", std::process::id())
            .map_err(|e| sluice_policy::AttemptError::local("connect", e.to_string()))?;
        Ok("child")
    });
    let json = match serde_json::to_vec(&outcome) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("ledger-probe: serialising the outcome: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(out, json) {
        eprintln!("ledger-probe: writing {out}: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
