//! The ledger on the command line: the store an operation's `--ledger`
//! opens (created on first use), `ledger show` and `ledger list` (which
//! open it to read only: a ledger that is not there is exit 5 naming it,
//! nothing created, and a read-only file can be read), and the warning
//! for an `--operation-id` given without a ledger.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_cli::{human, Common};

use crate::stdout;
use sluice_ledger::{EntryState, LedgerEntry, Store};
use sluice_policy::{
    BudgetStore, Claim, ClaimRequest, FinishRequest, Ledger, LedgerError, OutcomeKind,
};

/// A ledger that could not be opened: every claim fails with why (its path
/// named), so the operation ends `local-error` (exit 5) and nothing runs.
struct Unopened {
    path: String,
    why: String,
}

impl Unopened {
    fn error(&self) -> LedgerError {
        LedgerError {
            path: self.path.clone(),
            source: std::io::Error::other(self.why.clone()),
        }
    }
}

impl Ledger for Unopened {
    fn claim(&self, _: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        Err(self.error())
    }

    fn finish(&self, _: &FinishRequest<'_>) -> Result<(), LedgerError> {
        Err(self.error())
    }
}

/// `--ledger FILE` for an operation: the SQLite ledger, created on first
/// use (a JSON ledger of earlier versions is imported once); `--ledger
/// postgres://…`: the PostgreSQL ledger and its shared retry budget.
/// Opening is bounded by the operation's deadline: a database that does
/// not answer in that time is a claim that fails.
pub(crate) fn open_ledger(
    path: &Path,
    deadline: Duration,
) -> (Arc<dyn Ledger>, Option<Arc<dyn BudgetStore>>) {
    match Store::open_within(path, deadline) {
        Ok(l) => {
            let budgets = l.budget_store();
            (Arc::new(l), budgets)
        }
        Err(e) => (
            Arc::new(Unopened {
                path: e.path,
                why: e.source.to_string(),
            }),
            None,
        ),
    }
}

/// `--operation-id` without `--ledger`: the id names the operation (its
/// document, its logs) and is claimed in this process's memory only, so a
/// later run asking for it again is not rejected. Said on stderr rather
/// than refused: an id given for correlation alone is a use the CLI
/// contract allows (`recorded: null`, "no ledger"), and the library's
/// in-memory store is one of the design's stores.
pub(crate) fn warn_id_without_ledger(common: &Common) {
    if let (Some(id), None) = (&common.operation_id, &common.ledger) {
        eprintln!(
            "warning: --operation-id {id:?} without --ledger: the id is remembered only within this process, so another run asking for it again is not rejected (give --ledger FILE to claim it once across runs)"
        );
    }
}

/// The version of `ledger show --json`'s `{ "schema", "entry" }` and
/// `ledger list --json`'s `{ "schema", "entries" }` (additions keep it,
/// changes bump it).
const LEDGER_SCHEMA: u32 = 1;

/// A ledger read failed: said on stderr, exit 5.
fn ledger_failed(e: impl std::fmt::Display) -> u8 {
    eprintln!("error: {e}");
    sluice_cli::EXIT_LOCAL_ERROR
}

/// The ledger `--ledger` names, opened to read only (never created or
/// written; bounded by the deadline), or the exit code of a failure.
fn read_ledger(common: &Common) -> Result<Store, u8> {
    let path = common
        .ledger
        .as_ref()
        .expect("validated: --ledger is given");
    Store::open_read(path, common.bounds.deadline).map_err(ledger_failed)
}

/// `ledger show <ID>`: exit 0 with the entry, 1 when the id is not in the
/// ledger (`"entry": null` with `--json`), 5 when the ledger cannot be
/// read (or is not there).
pub(crate) fn show(common: &Common, id: &str) -> anyhow::Result<u8> {
    let ledger = match read_ledger(common) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let entry = match ledger.show(id) {
        Ok(e) => e,
        Err(e) => return Ok(ledger_failed(e)),
    };
    match (&entry, common.json) {
        (_, true) => {
            let doc = serde_json::json!({ "schema": LEDGER_SCHEMA, "entry": &entry });
            stdout::write(format!("{doc}\n").as_bytes());
        }
        (Some(e), false) => stdout::write(entry_line(e).as_bytes()),
        (None, false) => eprintln!("{id}: not in the ledger (never claimed, or pruned)"),
    }
    Ok(if entry.is_some() {
        sluice_cli::EXIT_SUCCEEDED
    } else {
        sluice_cli::EXIT_ANSWERED
    })
}

/// `ledger list [--since DUR]`: every id claimed since then, oldest first.
pub(crate) fn list(common: &Common, since: Duration) -> anyhow::Result<u8> {
    let ledger = match read_ledger(common) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let from = SystemTime::now().checked_sub(since).unwrap_or(UNIX_EPOCH);
    let entries = match ledger.list(from) {
        Ok(e) => e,
        Err(e) => return Ok(ledger_failed(e)),
    };
    let text = if common.json {
        let doc = serde_json::json!({ "schema": LEDGER_SCHEMA, "entries": &entries });
        format!("{doc}\n")
    } else {
        entries.iter().map(entry_line).collect()
    };
    stdout::write(text.as_bytes());
    Ok(sluice_cli::EXIT_SUCCEEDED)
}

/// One ledger entry on a line, tab-separated: id, when claimed, what ran
/// (kind, remote, refs space-separated; `-` for what the ledger does not
/// know), how it ended (or `running`), its time and attempts.
fn entry_line(e: &LedgerEntry) -> String {
    let claimed = humantime::format_rfc3339_seconds(e.claimed_at);
    let refs = match e.refs.as_deref() {
        Some(refs) if !refs.is_empty() => refs.join(" "),
        _ => "-".to_string(),
    };
    let what = format!(
        "{}\t{}\t{refs}",
        e.kind.as_deref().unwrap_or("-"),
        e.remote.as_deref().unwrap_or("-"),
    );
    match &e.run {
        Some(run) => format!(
            "{}\t{claimed}\t{what}\t{}\t{} ms\t{} attempt(s){}\n",
            e.id,
            run.result.as_str(),
            run.elapsed_ms,
            run.attempts.len(),
            match run.may_have_applied {
                Some(true) if run.result != OutcomeKind::Succeeded => "\tmay have applied",
                _ => "",
            }
        ),
        None => {
            let state = match e.state {
                EntryState::Abandoned => {
                    "abandoned (its deadline passed without a finish: its process died)"
                }
                _ => "running (not finished; its deadline has not passed)",
            };
            format!(
                "{}\t{claimed}\t{what}\t{state}{}\n",
                e.id,
                human::origin(e.phase.as_deref(), e.host.as_deref(), e.pid)
            )
        }
    }
}
