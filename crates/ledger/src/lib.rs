//! The ledger's stores that do I/O: [`SqliteLedger`], the embedded default
//! behind `--ledger FILE`, and [`PostgresLedger`], shared by several
//! replicas behind `--ledger postgres://…` together with their retry budget
//! ([`PostgresBudgets`]). [`Store`] opens either from what `--ledger` names.
//!
//! # Features
//!
//! `sqlite` ([`SqliteLedger`]) and `postgres` ([`PostgresLedger`],
//! [`PostgresBudgets`]), both on by default. A program that needs one store
//! turns the other off (`default-features = false, features =
//! ["sqlite"]`): `sqlite` alone builds no PostgreSQL client, tokio or
//! rustls; `postgres` alone no SQLite. [`Store`] then refuses what names
//! the missing store, with an error of kind
//! [`Unsupported`](std::io::ErrorKind::Unsupported) naming the feature.
//!
//! The policy crate keeps the [`Ledger`] trait and the
//! in-memory store; this crate keeps the stores that outlive a process. A
//! store claims an operation id atomically when the operation starts and
//! records how it ended; asking again for a claimed id — finished or still
//! running — is answered [`Claim::Taken`],
//! carrying the earlier run: how it ended, or, while it runs (or after its
//! process died), [`PreviousRun::running`](sluice_policy::PreviousRun::running)
//! with the kind and effect its claim recorded.
//!
//! # The SQLite store
//!
//! One file, one row per id: `(id, claimed_at, finished_at, run)`, where `run`
//! is the [`PreviousRun`](sluice_policy::PreviousRun) as JSON text and a row
//! whose `run` is NULL is a claim still running (or whose process died —
//! nothing tells them apart, and nothing may start it again).
//!
//! - **A claim is one statement**: `INSERT … ON CONFLICT DO NOTHING`; only
//!   when nothing was inserted is the earlier row read; a finish is one
//!   upsert. Both are B-tree lookups. WAL checkpoints run on a thread of
//!   the ledger value ([`CHECKPOINT_EVERY`]), not inside a claim. With
//!   every commit synced (the default) a claim and a finish cost about two
//!   plain one-row commits, the sync dominating; without, 1.6–2.3× (each
//!   writes a random leaf and an index page where plain commits append to
//!   one page). Figures at 1,000 to 1,000,000 ids: BENCHMARKS.md, "Ledger".
//! - **Many processes, one file**: the database runs in WAL mode, every
//!   connection waits up to a busy timeout (default 5 s) for another
//!   process's write to end, and SQLite's locks make a claim atomic across
//!   processes: of several processes claiming one id at once, exactly one
//!   gets [`Claim::Claimed`].
//! - **Durability** ([`SyncMode`]): `Full` (the default) syncs every commit,
//!   so a claim that returned survives a power cut; `Normal` syncs only at
//!   checkpoints and may lose the last commits before a power cut (never the
//!   database's integrity). A process killed at any point loses nothing in
//!   either mode.
//! - **Retention**: ids are kept for at least a window (default 7 days) and
//!   then pruned — an id is not a permanent duplicate shield.
//!   [`SqliteLedger::prune`] walks the table in slices of
//!   [`SQLITE_PRUNE_SLICE`] rows, one transaction each, so a claim never
//!   waits long behind it; a ledger value also prunes one slice by itself
//!   from `claim`, at most once per [`PRUNE_INTERVAL`] (PostgreSQL: batches
//!   of [`PRUNE_BATCH`] expired rows, by an index on the claim time).
//! - **What ran**: a claim writes the operation's kind, its remote (without
//!   user info), the refs it names (schema 3) and its effect (schema 4)
//!   beside the id; an older file is migrated when opened for writing.
//! - **Reading it back**: [`SqliteLedger::show`] and [`SqliteLedger::list`]
//!   return [`LedgerEntry`] values for `ledger show` / `ledger list`;
//!   [`SqliteLedger::open_read_only`] (and [`Store::open_read`]) open a
//!   ledger to read it and never create, migrate or write one — a
//!   read-only file or directory included — nor leave a file beside it.
//! - **Import of a JSON ledger**: opening a file that holds the JSON ledger
//!   of [`FileLedger`](sluice_policy::FileLedger) imports it once; the JSON
//!   is kept beside it as `<file>.json-imported` (see [`SqliteLedger`]).
//!
//! # The PostgreSQL store
//!
//! The same trait on a database several replicas share: one row per id
//! (`sluice_ledger`), one row per host for the retry budget
//! (`sluice_retry_budget`), the schema created on first use and versioned.
//! A claim is one insert-if-absent carrying a per-claim token (so a claim
//! whose answer was lost can be tried again and know itself), plus a read
//! when the id was taken; a budget take is one upsert. Credentials come
//! from the URL, `PGPASSWORD` or `.pgpass` and are never printed. TLS is
//! rustls, read from the URL's `sslmode` as libpq reads it; every call is
//! bounded by the time its caller has left; a bounded pool survives the
//! server's restart and works behind PgBouncer in transaction pooling. See
//! [`PostgresLedger`] and [`PostgresBudgets`].
//!
//! # Example
//!
//! ```
//! use sluice_ledger::{SqliteLedger, SyncMode};
//! use sluice_policy::{Claim, ClaimRequest, Effect, Ledger, PreviousResult};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), sluice_policy::LedgerError> {
//! let dir = tempfile::tempdir().expect("a temporary directory");
//! let ledger = SqliteLedger::options()
//!     .sync(SyncMode::Full)
//!     .retention(Duration::from_secs(7 * 24 * 3600))
//!     .open(dir.path().join("ledger.db"))?;
//! // The claim is bounded by what remains of the operation's deadline.
//! let claim = ClaimRequest::new("deploy-42", Effect::Write, Duration::from_secs(20))
//!     .operation("push", "git://example.com/repo.git");
//! assert_eq!(ledger.claim(&claim)?, Claim::Claimed);
//! let Claim::Taken(Some(earlier)) = ledger.claim(&claim)? else {
//!     panic!("the id was claimed above");
//! };
//! assert_eq!(earlier.result, PreviousResult::Running); // still running
//! assert_eq!(earlier.kind.as_deref(), Some("push"));
//! assert_eq!(earlier.may_have_applied, Some(true)); // a write
//! let entry = ledger.show("deploy-42")?.expect("claimed above");
//! assert!(entry.run.is_none());
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]
// With neither store, what the stores share is left unused.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

mod entry;
#[cfg(feature = "sqlite")]
mod import;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_schema;

pub use entry::{
    is_postgres_url, EntryState, LedgerEntry, DEFAULT_RETENTION, PRUNE_BATCH, PRUNE_INTERVAL,
};
#[cfg(feature = "postgres")]
pub use postgres::{
    PostgresBudgets, PostgresLedger, BUDGET_WAIT, DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT,
    MAX_CONNECTIONS, PG_SCHEMA_VERSION,
};
#[cfg(feature = "sqlite")]
pub use sqlite::{
    SqliteLedger, SqliteOptions, SyncMode, CHECKPOINT_EVERY, DEFAULT_BUSY_TIMEOUT,
    SQLITE_PRUNE_SLICE,
};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_policy::{
    BudgetStore, Claim, ClaimRequest, FinishRequest, Ledger, LedgerError, ProgressRequest,
};

/// The bound [`Store::open`] gives opening a database: PostgreSQL's
/// default call timeout (5 s; SQLite is bounded by its busy timeout).
const OPEN_BOUND: Duration = Duration::from_secs(5);

/// A ledger named by what the CLI's `--ledger` takes: a PostgreSQL URL
/// (`postgres://…`, see [`is_postgres_url`]) or a file (SQLite). Each
/// variant is there when its feature is (see the crate's features).
///
/// Not exhaustive: which variants exist depends on the features, and
/// another store may be added; a `match` outside this crate keeps a
/// wildcard arm (or uses the methods, which answer for every store).
#[derive(Debug)]
#[non_exhaustive]
#[allow(
    clippy::large_enum_variant,
    reason = "one value per process, opened once: its size costs nothing"
)]
pub enum Store {
    /// `--ledger FILE`.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteLedger),
    /// `--ledger postgres://…`.
    #[cfg(feature = "postgres")]
    Postgres(PostgresLedger),
}

/// The error for a store this build left out: kind `Unsupported`, naming
/// the feature that would have it.
#[allow(dead_code, reason = "unused when both stores are built")]
fn left_out(spec: &Path, feature: &str) -> LedgerError {
    LedgerError {
        path: sluice_policy::text::redact(&spec.display().to_string()),
        source: std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("this build of sluice-ledger has no {feature} store (its `{feature}` feature is off)"),
        ),
    }
}

impl Store {
    /// Open the store `spec` names, with the default options.
    pub fn open(spec: &Path) -> Result<Store, LedgerError> {
        Self::open_within(spec, OPEN_BOUND)
    }

    /// [`Store::open`] within `left`: a PostgreSQL database that cannot be
    /// reached, logged into and read in that time is an error (SQLite
    /// opens a local file and is not bounded but by its busy timeout).
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub fn open_within(spec: &Path, left: Duration) -> Result<Store, LedgerError> {
        match spec.to_str().filter(|s| is_postgres_url(s)) {
            #[cfg(feature = "postgres")]
            Some(url) => {
                PostgresLedger::open_within(url, DEFAULT_RETENTION, left).map(Store::Postgres)
            }
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(left_out(spec, "postgres")),
            #[cfg(feature = "sqlite")]
            None => SqliteLedger::open(spec).map(Store::Sqlite),
            #[cfg(not(feature = "sqlite"))]
            None => Err(left_out(spec, "sqlite")),
        }
    }

    /// Open the store `spec` names to read it ([`show`](Self::show),
    /// [`list`](Self::list)) within `left`, never creating, importing,
    /// migrating or writing it (`SqliteLedger::open_read_only`,
    /// `PostgresLedger::open_read_within`): a ledger that is not there is
    /// an error of kind [`NotFound`](std::io::ErrorKind::NotFound) naming
    /// it.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub fn open_read(spec: &Path, left: Duration) -> Result<Store, LedgerError> {
        match spec.to_str().filter(|s| is_postgres_url(s)) {
            #[cfg(feature = "postgres")]
            Some(url) => PostgresLedger::open_read_within(url, left).map(Store::Postgres),
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(left_out(spec, "postgres")),
            #[cfg(feature = "sqlite")]
            None => SqliteLedger::open_read_only(spec).map(Store::Sqlite),
            #[cfg(not(feature = "sqlite"))]
            None => Err(left_out(spec, "sqlite")),
        }
    }

    /// The retry budget to share with the other users of this store: the
    /// database's for PostgreSQL, none (the policy's own) for SQLite.
    pub fn budget_store(&self) -> Option<Arc<dyn BudgetStore>> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(_) => None,
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => Some(p.budget_store()),
        }
    }

    /// The row of `id`, if it is kept.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        allow(unused_variables)
    )]
    pub fn show(&self, id: &str) -> Result<Option<LedgerEntry>, LedgerError> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(ref s) => s.show(id),
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => p.show(id),
        }
    }

    /// The rows claimed at or after `since`, oldest first (ties by id).
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres")),
        allow(unused_variables)
    )]
    pub fn list(&self, since: SystemTime) -> Result<Vec<LedgerEntry>, LedgerError> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(ref s) => s.list(since),
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => p.list(since),
        }
    }
}

#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(unused_variables)
)]
impl Ledger for Store {
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(ref s) => s.claim(req),
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => p.claim(req),
        }
    }

    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(ref s) => s.progress(req),
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => p.progress(req),
        }
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        match *self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(ref s) => s.finish(req),
            #[cfg(feature = "postgres")]
            Store::Postgres(ref p) => p.finish(req),
        }
    }
}
