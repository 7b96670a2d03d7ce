//! The PostgreSQL store: one ledger (and one retry budget per host) shared
//! by several sluice replicas through a database the operators already run.
//!
//! Connections come from a bounded pool of `tokio-postgres` clients on a
//! runtime of the store's own ([`pool`]), over TLS as the URL's `sslmode`
//! says ([`tls`]); the URL is read as libpq reads it ([`url`]). Every claim,
//! finish and budget take is one unnamed statement (a claim that finds the
//! id taken, two) in its own transaction, bounded by the time the caller
//! has left; their atomicity is PostgreSQL's (a primary key for claims, a
//! row lock for a budget's upsert).

mod pool;
mod tls;
mod url;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sluice_policy::{
    BudgetStore, Claim, ClaimRequest, FinishRequest, Ledger, LedgerError, LocalBudgets,
    PreviousRun, ProgressRequest, RetryBudget,
};
use tokio_postgres::types::Type;
use tokio_postgres::Client;

use crate::entry::{
    from_ms, parse_effect, to_ms, unfinished, EntryState, LedgerEntry, Origin, What,
    DEFAULT_RETENTION, PRUNE_BATCH, PRUNE_INTERVAL,
};
use pool::Pool;
pub use pool::MAX_CONNECTIONS;

/// The version of the schema this crate writes, kept in `sluice_schema`.
///
/// 2 added what ran (`kind`, `remote`, `refs` as a JSON array) to
/// `sluice_ledger`; 3 added its `effect` (`read` or `write`), so that a
/// claim still running says whether it may have written. A database of an
/// older schema is brought to 3 when a store opens it (the rows already
/// there keep NULL: not known); a replica of an earlier version then
/// refuses it, naming the newer schema. 4 added what a claim records of
/// its run (`deadline_ms` from the claim, `host`, `pid`) and the furthest
/// `phase` it recorded: a claim without a finish whose deadline plus the
/// finish's floor has passed by the database's clock is abandoned (rows
/// without a deadline stay running).
pub const PG_SCHEMA_VERSION: i32 = 4;

/// How long a TCP connect waits when the URL sets no `connect_timeout`:
/// 5 s (every call is bounded by its own time left as well).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The bound of opening the store when the caller gives none
/// ([`PostgresLedger::open`]; [`PostgresLedger::open_within`] takes one):
/// 5 s. Claims and finishes are bounded by the time their operation has
/// left ([`ClaimRequest::left`], [`FinishRequest::left`]).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a take of the shared retry budget waits for the database at
/// most before this process's own bucket answers: 1 s (less when the
/// operation has less left). The policy crate's constant.
pub use sluice_policy::BUDGET_WAIT;

/// The bound of `show` and `prune` (a person's question, or housekeeping).
const READ_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) use crate::entry::is_postgres_url;

/// The bound of `list` (it may read many rows).
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// The server's clock in Unix milliseconds (one clock for every replica).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Serializes the schema's creation between replicas starting at once.
const SCHEMA_LOCK: i64 = 0x736c_6c67_0001;

/// The statements, each sent unnamed with its parameters' types (nothing
/// prepared on a connection: PgBouncer's transaction pooling may give the
/// next statement another server connection).
mod sql {
    use super::NOW_MS;

    pub(super) fn claim() -> String {
        format!(
            "INSERT INTO sluice_ledger
               (id, claimed_at, token, kind, remote, refs, effect, deadline_ms, host, pid)
             VALUES ($1, {NOW_MS}, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (id) DO NOTHING"
        )
    }

    /// A taken id's row: its claim's token, its run once it has ended;
    /// while it runs, what its claim recorded and how long ago (ms, by the
    /// server's clock).
    pub(super) fn read_claim() -> String {
        format!(
            "SELECT token, run, kind, effect, {NOW_MS} - claimed_at, deadline_ms, host, pid, phase
             FROM sluice_ledger WHERE id = $1"
        )
    }

    /// The phase a run still running records (best effort).
    pub(super) const PROGRESS: &str =
        "UPDATE sluice_ledger SET phase = $2 WHERE id = $1 AND run IS NULL";

    pub(super) fn finish() -> String {
        format!(
            "INSERT INTO sluice_ledger AS l
               (id, claimed_at, finished_at, run, kind, remote, refs, effect)
             VALUES ($1, {NOW_MS}, {NOW_MS}, $2, $3, $4, $5, $6)
             ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, run = excluded.run,
               kind = coalesce(l.kind, excluded.kind),
               remote = coalesce(l.remote, excluded.remote),
               refs = coalesce(l.refs, excluded.refs),
               effect = coalesce(l.effect, excluded.effect)"
        )
    }

    pub(super) fn prune() -> String {
        format!(
            "DELETE FROM sluice_ledger WHERE id IN
             (SELECT id FROM sluice_ledger WHERE claimed_at < {NOW_MS} - $1
              ORDER BY claimed_at LIMIT $2)"
        )
    }

    /// The columns of a row read back from a ledger of `schema` (what it
    /// lacks read as NULL), the last one the row's age by the server's
    /// clock (ms).
    fn row_columns(schema: i32) -> String {
        let what = if schema >= 2 {
            "kind, remote, refs"
        } else {
            "NULL::text, NULL::text, NULL::text"
        };
        let claim = if schema >= 4 {
            "deadline_ms, host, pid, phase"
        } else {
            "NULL::bigint, NULL::text, NULL::bigint, NULL::text"
        };
        format!("id, claimed_at, finished_at, run, {what}, {claim}, {NOW_MS} - claimed_at")
    }

    /// `ledger show` of a ledger of `schema`.
    pub(super) fn show(schema: i32) -> String {
        format!(
            "SELECT {} FROM sluice_ledger WHERE id = $1",
            row_columns(schema)
        )
    }

    /// `ledger list` of a ledger of `schema`.
    pub(super) fn list(schema: i32) -> String {
        format!(
            "SELECT {} FROM sluice_ledger WHERE claimed_at >= $1 ORDER BY claimed_at, id",
            row_columns(schema)
        )
    }

    /// $1 host, $2 capacity, $3 refill per second. `level` is the bucket
    /// refilled to the server's now; a token is spent when it holds one.
    pub(super) const SPEND: &str = "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
         VALUES ($1, CASE WHEN $2::float8 >= 1 THEN $2::float8 - 1 ELSE $2::float8 END, clock_timestamp(), $2::float8 >= 1)
         ON CONFLICT (host) DO UPDATE SET
           tokens = CASE
             WHEN least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) >= 1
             THEN least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) - 1
             ELSE least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8)
           END,
           spent = least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) >= 1,
           at = greatest(b.at, clock_timestamp())
         RETURNING spent, tokens";

    /// $4 the success credit.
    pub(super) const CREDIT: &str = "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
         VALUES ($1, $2::float8, clock_timestamp(), false)
         ON CONFLICT (host) DO UPDATE SET
           tokens = least($2::float8, b.tokens
             + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8 + $4::float8),
           spent = false,
           at = greatest(b.at, clock_timestamp())
         RETURNING tokens";

    pub(super) const DRAIN: &str = "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
         VALUES ($1, 0, clock_timestamp(), false)
         ON CONFLICT (host) DO UPDATE SET tokens = 0, spent = false,
           at = greatest(b.at, clock_timestamp())";

    pub(super) const CREATE: &str = "CREATE TABLE sluice_ledger (
             id text PRIMARY KEY,
             claimed_at bigint NOT NULL,
             finished_at bigint,
             run text,
             token text,
             kind text,
             remote text,
             refs text,
             effect text,
             deadline_ms bigint,
             host text,
             pid bigint,
             phase text
         );
         CREATE INDEX sluice_ledger_claimed_at ON sluice_ledger (claimed_at);
         CREATE TABLE sluice_retry_budget (
             host text PRIMARY KEY,
             tokens double precision NOT NULL,
             at timestamptz NOT NULL,
             spent boolean NOT NULL
         );";

    /// Schema 1 to 2: what ran, NULL in the rows already there.
    pub(super) const MIGRATE_1_TO_2: &str = "ALTER TABLE sluice_ledger
         ADD COLUMN IF NOT EXISTS kind text,
         ADD COLUMN IF NOT EXISTS remote text,
         ADD COLUMN IF NOT EXISTS refs text;
         UPDATE sluice_schema SET version = 2 WHERE component = 'ledger'";

    /// Schema 2 to 3: the effect, NULL in the rows already there.
    pub(super) const MIGRATE_2_TO_3: &str = "ALTER TABLE sluice_ledger
         ADD COLUMN IF NOT EXISTS effect text;
         UPDATE sluice_schema SET version = 3 WHERE component = 'ledger'";

    /// Schema 3 to 4: what a claim records of its run, NULL in the rows
    /// already there.
    pub(super) const MIGRATE_3_TO_4: &str = "ALTER TABLE sluice_ledger
         ADD COLUMN IF NOT EXISTS deadline_ms bigint,
         ADD COLUMN IF NOT EXISTS host text,
         ADD COLUMN IF NOT EXISTS pid bigint,
         ADD COLUMN IF NOT EXISTS phase text;
         UPDATE sluice_schema SET version = 4 WHERE component = 'ledger'";
}

/// Create the schema in a database that has none, or check that the one
/// there is of a version this crate reads. Replicas starting at once take
/// turns through a transaction-scoped advisory lock. Simple-protocol
/// statements in one transaction: nothing is prepared, nothing outlives it.
async fn ensure_schema(c: &mut Client) -> Result<Result<(), String>, tokio_postgres::Error> {
    let tx = c.transaction().await?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({SCHEMA_LOCK});
         CREATE TABLE IF NOT EXISTS sluice_schema (
             component text PRIMARY KEY,
             version integer NOT NULL
         )"
    ))
    .await?;
    let version: Option<i32> = tx
        .query_typed_opt(
            "SELECT version FROM sluice_schema WHERE component = 'ledger'",
            &[],
        )
        .await?
        .map(|r| r.get(0));
    match version {
        Some(PG_SCHEMA_VERSION) => {}
        Some(v @ 1..=3) => {
            if v < 2 {
                tx.batch_execute(sql::MIGRATE_1_TO_2).await?;
            }
            if v < 3 {
                tx.batch_execute(sql::MIGRATE_2_TO_3).await?;
            }
            tx.batch_execute(sql::MIGRATE_3_TO_4).await?;
        }
        Some(v) if v > PG_SCHEMA_VERSION => {
            return Ok(Err(format!(
                "written by a newer sluice (ledger schema {v}; this one reads {PG_SCHEMA_VERSION})"
            )))
        }
        Some(v) => return Ok(Err(format!("unknown ledger schema {v}"))),
        None => {
            tx.batch_execute(sql::CREATE).await?;
            tx.execute_typed(
                "INSERT INTO sluice_schema (component, version) VALUES ('ledger', $1)",
                &[(&PG_SCHEMA_VERSION, Type::INT4)],
            )
            .await?;
        }
    }
    tx.commit().await?;
    Ok(Ok(()))
}

/// A ledger in a PostgreSQL database, shared by several replicas (and
/// every process and thread of each).
///
/// Opened from a URL (`postgres://user@host:port/db?…`, or PostgreSQL's
/// `key=value` form), with the password taken, in order, from the URL,
/// `PGPASSWORD`, or the `.pgpass` file (`PGPASSFILE`, else `~/.pgpass`; its
/// `host:port:database:user:password` lines, `*` matching anything). The
/// password is never printed, nor the user: errors and `Debug` name the
/// database as `postgres://host:port/db`.
///
/// # TLS
///
/// As libpq reads `sslmode` (the URL's, else `PGSSLMODE`), with rustls
/// underneath:
///
/// - `disable`: plain TCP;
/// - `allow` and `prefer` (the default): TLS when the server offers it,
///   plain TCP when it does not; the certificate is not checked;
/// - `require`: TLS or nothing; the certificate is not checked — unless
///   `sslrootcert` is given, when it is checked as `verify-ca` (as libpq
///   does);
/// - `verify-ca`: TLS, the server's chain checked against the roots;
/// - `verify-full`: the chain and that the certificate names the host.
///
/// The roots are the PEM file `sslrootcert` names (`system`: the
/// platform's). Without `sslrootcert`, `~/.postgresql/root.crt` when it
/// exists (as libpq), else the platform's roots (where libpq would refuse).
/// `sslcert` and `sslkey` give a client certificate (PEM; only when
/// named). A certificate the roots do not vouch for, a name that does not
/// match under `verify-full`, or a server without TLS under `require` and
/// above fails the connection: the claim is an error naming the database
/// and what failed, and the policy ends the operation `local-error`.
///
/// # Bounds
///
/// Every call — a connection (TCP, TLS, login), a claim, a finish, a
/// budget's statement — ends by the time its caller has left:
/// [`claim_within`](Self::claim_within) and
/// [`finish_within`](Self::finish_within) take it, and the [`Ledger`]
/// trait's `claim` and `finish` pass them the request's `left` (what
/// remains of the operation's deadline; a finish at least
/// [`FINISH_FLOOR`](sluice_policy::FINISH_FLOOR)). A database that accepts a connection and then says nothing, or
/// holds a statement, makes the call an error when the bound passes (the
/// statement is cancelled on the server, the connection dropped). A claim
/// whose insert the server committed just as its bound passed is an error
/// here and a claim there: the id reads as running (and is rejected when
/// asked again), as after a process that died past its claim — nothing
/// ran, and nothing will run it twice.
///
/// # Connections
///
/// At most [`MAX_CONNECTIONS`] per store, kept between calls; a connection
/// the server closed (a restart) is replaced on the next call, which then
/// works without a new store. Nothing depends on a session outliving a
/// transaction (unnamed statements, transaction-scoped locks, no `SET`),
/// so the store works behind PgBouncer in transaction pooling mode.
///
/// # The schema
///
/// Created on first use (three tables: `sluice_schema` with the version,
/// `sluice_ledger`, `sluice_retry_budget`), under a transaction-scoped
/// advisory lock so that replicas starting at once take turns; a database
/// holding a newer version is refused.
///
/// # Claims
///
/// A claim is one `INSERT … ON CONFLICT DO NOTHING` carrying a token made
/// for that claim; when nothing was inserted, the row is read. A row whose
/// token is the claim's own is the claim itself (its first try reached the
/// server and its answer was lost): [`Claim::Claimed`]. So a claim can be
/// tried again on a new connection without ever being mistaken for another
/// replica's, nor taking an id twice.
///
/// # Pruning
///
/// As the SQLite store: rows claimed more than the retention window ago
/// (by the server's clock) are deleted in batches of [`PRUNE_BATCH`],
/// one batch by itself from a claim at most once per [`PRUNE_INTERVAL`]
/// (within the claim's bound; a prune that does not fit is logged).
pub struct PostgresLedger {
    pool: Arc<Pool>,
    retention: Duration,
    last_prune: Mutex<Option<Instant>>,
    /// The schema version read (older ones are read as they are, by a
    /// value opened to read only).
    schema: i32,
}

impl fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLedger")
            .field("database", &self.pool.shown)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl PostgresLedger {
    /// Connect, create the schema when the database has none, and keep the
    /// connection for the first claim, within [`DEFAULT_CALL_TIMEOUT`].
    /// Retention: [`DEFAULT_RETENTION`].
    pub fn open(url: &str) -> Result<Self, LedgerError> {
        Self::open_within(url, DEFAULT_RETENTION, DEFAULT_CALL_TIMEOUT)
    }

    /// [`PostgresLedger::open`] with another retention window.
    pub fn open_with_retention(url: &str, retention: Duration) -> Result<Self, LedgerError> {
        Self::open_within(url, retention, DEFAULT_CALL_TIMEOUT)
    }

    /// [`PostgresLedger::open`] with another retention window, within
    /// `left`.
    pub fn open_within(
        url: &str,
        retention: Duration,
        left: Duration,
    ) -> Result<Self, LedgerError> {
        let parsed = url::parse_url(url)?;
        let tls = tls::MakeRustls::new(&parsed.tls).map_err(|e| LedgerError {
            path: parsed.shown.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let pool =
            Pool::new(parsed.config, tls, parsed.shown.clone()).map_err(|e| LedgerError {
                path: parsed.shown,
                source: e,
            })?;
        match pool.fresh(left, async |c| ensure_schema(c).await)? {
            Ok(()) => {}
            Err(refused) => {
                return Err(pool.err(io::Error::new(io::ErrorKind::InvalidData, refused)))
            }
        }
        Ok(PostgresLedger {
            pool: Arc::new(pool),
            retention,
            last_prune: Mutex::new(None),
            schema: PG_SCHEMA_VERSION,
        })
    }

    /// Connect to read the ledger ([`show`](Self::show),
    /// [`list`](Self::list)) within `left`, creating and migrating
    /// nothing: a database without a sluice ledger is an error of kind
    /// [`NotFound`](io::ErrorKind::NotFound) naming it; an older schema is
    /// read as it is (what ran reads as `None`).
    pub fn open_read_within(url: &str, left: Duration) -> Result<Self, LedgerError> {
        let parsed = url::parse_url(url)?;
        let tls = tls::MakeRustls::new(&parsed.tls).map_err(|e| LedgerError {
            path: parsed.shown.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let pool =
            Pool::new(parsed.config, tls, parsed.shown.clone()).map_err(|e| LedgerError {
                path: parsed.shown,
                source: e,
            })?;
        let version = pool.fresh(left, async |c| {
            let exists: bool = c
                .query_typed_one(
                    "SELECT to_regclass('sluice_schema') IS NOT NULL AND to_regclass('sluice_ledger') IS NOT NULL",
                    &[],
                )
                .await?
                .get(0);
            if !exists {
                return Ok(None);
            }
            Ok(c
                .query_typed_opt(
                    "SELECT version FROM sluice_schema WHERE component = 'ledger'",
                    &[],
                )
                .await?
                .map(|r| r.get::<_, i32>(0)))
        })?;
        let refused = |kind: io::ErrorKind, why: String| pool.err(io::Error::new(kind, why));
        let schema = match version {
            None => {
                return Err(refused(
                    io::ErrorKind::NotFound,
                    "no sluice ledger in this database (a read never creates one; an operation given this --ledger does)".into(),
                ))
            }
            Some(v) if v > PG_SCHEMA_VERSION => {
                return Err(refused(
                    io::ErrorKind::InvalidData,
                    format!("written by a newer sluice (ledger schema {v}; this one reads {PG_SCHEMA_VERSION})"),
                ))
            }
            Some(v) if v >= 1 => v,
            Some(v) => {
                return Err(refused(
                    io::ErrorKind::InvalidData,
                    format!("unknown ledger schema {v}"),
                ))
            }
        };
        Ok(PostgresLedger {
            pool: Arc::new(pool),
            retention: DEFAULT_RETENTION,
            last_prune: Mutex::new(None),
            schema,
        })
    }

    /// The database, as printed: `postgres://host:port/db` (no user info).
    pub fn database(&self) -> &str {
        &self.pool.shown
    }

    /// The retry budget in this database, shared by every replica using
    /// it; give it to the policy with
    /// [`PolicyBuilder::budget_store`](sluice_policy::PolicyBuilder::budget_store).
    pub fn budget_store(&self) -> Arc<PostgresBudgets> {
        Arc::new(PostgresBudgets {
            pool: self.pool.clone(),
            local: LocalBudgets::new(),
            degraded: AtomicBool::new(false),
        })
    }

    /// Claim `id` atomically, within `left` (connecting included). An error
    /// when the database cannot answer in time: the policy ends the
    /// operation `local-error` and nothing runs.
    ///
    /// It records neither what ran nor its effect (the [`Ledger`] trait's
    /// `claim` does): a claim of the id while it runs is answered running,
    /// its kind `None` and `may_have_applied: Some(true)`.
    pub fn claim_within(&self, id: &str, left: Duration) -> Result<Claim, LedgerError> {
        self.claim_what(id, &What::default(), &Origin::default(), left)
    }

    /// [`claim_within`](Self::claim_within), writing what ran beside the id
    /// and what the claim records of its run.
    fn claim_what(
        &self,
        id: &str,
        what: &What,
        origin: &Origin,
        left: Duration,
    ) -> Result<Claim, LedgerError> {
        let started = Instant::now();
        let token = claim_token();
        let claim_sql = sql::claim();
        let read_claim_sql = sql::read_claim();
        let claim = loop {
            let left_now = left.saturating_sub(started.elapsed());
            let (inserted, row) = self.pool.with(left_now, async |c: &Client| {
                let n = c
                    .execute_typed(
                        &claim_sql,
                        &[
                            (&id, Type::TEXT),
                            (&token, Type::TEXT),
                            (&what.kind, Type::TEXT),
                            (&what.remote, Type::TEXT),
                            (&what.refs, Type::TEXT),
                            (&what.effect, Type::TEXT),
                            (&origin.deadline_ms, Type::INT8),
                            (&origin.host, Type::TEXT),
                            (&origin.pid, Type::INT8),
                        ],
                    )
                    .await?;
                if n == 1 {
                    return Ok((true, None));
                }
                let row = c
                    .query_typed_opt(&read_claim_sql, &[(&id, Type::TEXT)])
                    .await?;
                Ok((false, row.map(|r| TakenRow::of(&r))))
            })?;
            match (inserted, row) {
                (true, _) => break Claim::Claimed,
                (false, Some(row)) if row.token.as_deref() == Some(token.as_str()) => {
                    break Claim::Claimed
                }
                (
                    false,
                    Some(TakenRow {
                        run: Some(run),
                        host,
                        pid,
                        ..
                    }),
                ) => {
                    // The claim's host and pid stay with the run.
                    let run = self.parse_run(id, Some(&run))?.map(|mut r| {
                        r.host = r.host.take().or(host);
                        r.pid = r.pid.or_else(|| pid.and_then(|p| u32::try_from(p).ok()));
                        r
                    });
                    break Claim::Taken(run);
                }
                (false, Some(row)) => {
                    // Judged by the database's clock: one clock for every
                    // replica.
                    let since = Duration::from_millis(row.since_ms.max(0) as u64);
                    let effect = row.effect.as_deref().and_then(parse_effect);
                    break Claim::Taken(Some(unfinished(
                        row.kind,
                        effect,
                        since,
                        row.deadline_ms,
                        row.host,
                        row.pid,
                        row.phase,
                    )));
                }
                // Pruned between the two statements: the id is free again.
                (false, None) => continue,
            }
        };
        self.prune_now_and_then(left.saturating_sub(started.elapsed()));
        Ok(claim)
    }

    /// Record how the operation with `id` ended, within `left`: one upsert
    /// (an id not claimed here, or pruned since, gets a row of its own).
    pub fn finish_within(
        &self,
        id: &str,
        run: &PreviousRun,
        left: Duration,
    ) -> Result<(), LedgerError> {
        self.finish_what(id, run, &What::default(), left)
    }

    /// [`finish_within`](Self::finish_within), writing what ran beside the
    /// id when its claim did not.
    fn finish_what(
        &self,
        id: &str,
        run: &PreviousRun,
        what: &What,
        left: Duration,
    ) -> Result<(), LedgerError> {
        let text = serde_json::to_string(run).map_err(|e| self.pool.err(e))?;
        let finish_sql = sql::finish();
        self.pool.with(left, async |c: &Client| {
            c.execute_typed(
                &finish_sql,
                &[
                    (&id, Type::TEXT),
                    (&text, Type::TEXT),
                    (&what.kind, Type::TEXT),
                    (&what.remote, Type::TEXT),
                    (&what.refs, Type::TEXT),
                    (&what.effect, Type::TEXT),
                ],
            )
            .await
        })?;
        Ok(())
    }

    /// Delete the rows claimed more than the retention window ago, in
    /// batches of at most [`PRUNE_BATCH`]; how many were deleted.
    pub fn prune(&self) -> Result<u64, LedgerError> {
        let mut total = 0;
        loop {
            let n = self.prune_batch(READ_TIMEOUT)?;
            total += n;
            if n < u64::from(PRUNE_BATCH) {
                return Ok(total);
            }
        }
    }

    fn prune_batch(&self, left: Duration) -> Result<u64, LedgerError> {
        let window = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        let prune_sql = sql::prune();
        self.pool.with(left, async |c: &Client| {
            c.execute_typed(
                &prune_sql,
                &[(&window, Type::INT8), (&i64::from(PRUNE_BATCH), Type::INT8)],
            )
            .await
        })
    }

    /// The row of `id`, if it is kept.
    pub fn show(&self, id: &str) -> Result<Option<LedgerEntry>, LedgerError> {
        let show = sql::show(self.schema);
        let row = self.pool.with(READ_TIMEOUT, async |c: &Client| {
            c.query_typed_opt(&show, &[(&id, Type::TEXT)]).await
        })?;
        row.map(|r| self.entry(&r)).transpose()
    }

    /// The rows claimed at or after `since`, oldest first (ties by id).
    pub fn list(&self, since: SystemTime) -> Result<Vec<LedgerEntry>, LedgerError> {
        let since = to_ms(since);
        let list = sql::list(self.schema);
        let rows = self.pool.with(LIST_TIMEOUT, async |c: &Client| {
            c.query_typed(&list, &[(&since, Type::INT8)]).await
        })?;
        rows.iter().map(|r| self.entry(r)).collect()
    }

    /// The row as an entry, its state judged by the database's clock.
    fn entry(&self, r: &tokio_postgres::Row) -> Result<LedgerEntry, LedgerError> {
        let id: String = r.get(0);
        let run = self.parse_run(&id, r.get::<_, Option<&str>>(3))?;
        let deadline_ms = r.get::<_, Option<i64>>(7).map(|d| d.max(0) as u64);
        let since = Duration::from_millis(r.get::<_, i64>(11).max(0) as u64);
        Ok(LedgerEntry {
            state: EntryState::judge(run.is_some(), since, deadline_ms),
            run,
            claimed_at: from_ms(r.get(1)),
            finished_at: r.get::<_, Option<i64>>(2).map(from_ms),
            id,
            kind: r.get(4),
            remote: r.get(5),
            refs: What::parse_refs(r.get::<_, Option<&str>>(6)),
            deadline_ms,
            host: r.get(8),
            pid: r
                .get::<_, Option<i64>>(9)
                .and_then(|p| u32::try_from(p).ok()),
            phase: r.get(10),
        })
    }

    fn parse_run(&self, id: &str, run: Option<&str>) -> Result<Option<PreviousRun>, LedgerError> {
        run.map(|text| {
            serde_json::from_str(text).map_err(|e| {
                self.pool.err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the recorded run of id {id:?} cannot be read: {e}"),
                ))
            })
        })
        .transpose()
    }

    /// One pruning batch, at most once per interval, within `left`; a
    /// failure is logged, not returned (the claim was made).
    fn prune_now_and_then(&self, left: Duration) {
        {
            let mut last = self.last_prune.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < PRUNE_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.prune_batch(left) {
            tracing::warn!(ledger = %self.pool.shown, error = %e.source, "pruning the ledger failed");
        }
    }
}

impl Ledger for PostgresLedger {
    /// [`PostgresLedger::claim_within`] the request's `left`.
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        let what = What::of(req.kind, req.remote, req.refs).effect(req.effect);
        self.claim_what(req.id, &what, &Origin::of(req), req.left)
    }

    /// [`PostgresLedger::finish_within`] the request's `left`.
    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        let what = What::of(req.kind, req.remote, req.refs).effect(req.effect);
        self.finish_what(req.id, req.run, &what, req.left)
    }

    /// One update of the row's phase while it has no run, within the
    /// request's `left`.
    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        let (id, phase) = (req.id, req.phase);
        self.pool.with(req.left, async |c: &Client| {
            c.execute_typed(sql::PROGRESS, &[(&id, Type::TEXT), (&phase, Type::TEXT)])
                .await
        })?;
        Ok(())
    }
}

/// A taken id's row as a claim reads it ([`sql::read_claim`]).
struct TakenRow {
    token: Option<String>,
    run: Option<String>,
    kind: Option<String>,
    effect: Option<String>,
    /// How long ago it was claimed (ms, the server's clock).
    since_ms: i64,
    deadline_ms: Option<i64>,
    host: Option<String>,
    pid: Option<i64>,
    phase: Option<String>,
}

impl TakenRow {
    fn of(r: &tokio_postgres::Row) -> TakenRow {
        TakenRow {
            token: r.get(0),
            run: r.get(1),
            kind: r.get(2),
            effect: r.get(3),
            since_ms: r.get(4),
            deadline_ms: r.get(5),
            host: r.get(6),
            pid: r.get(7),
            phase: r.get(8),
        }
    }
}

/// The per-host retry budgets in the database: one bucket per host for
/// every replica, each take one atomic upsert refilled by the server's
/// clock (the policy's monotonic clock is ignored: it means nothing to
/// another replica).
///
/// A take waits for the database at most min(time left, [`BUDGET_WAIT`]).
/// When the database cannot answer in that
/// time, the take falls back to this process's own bucket
/// ([`LocalBudgets`]) and a warn event says so, once per outage; an info
/// event says when the shared budget answers again.
pub struct PostgresBudgets {
    pool: Arc<Pool>,
    local: LocalBudgets,
    degraded: AtomicBool,
}

impl fmt::Debug for PostgresBudgets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresBudgets")
            .field("database", &self.pool.shown)
            .field("degraded", &self.degraded.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl PostgresBudgets {
    /// Whether the last take fell back to the in-process bucket.
    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// [`BudgetStore::try_spend`]: waits for the database at most
    /// min(`left`, [`BUDGET_WAIT`]).
    pub fn try_spend_within(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        left: Duration,
    ) -> (bool, f64) {
        self.shared(
            host,
            left,
            async |c: &Client| {
                let r = c
                    .query_typed_one(
                        sql::SPEND,
                        &[
                            (&host, Type::TEXT),
                            (&budget.capacity, Type::FLOAT8),
                            (&budget.refill_per_sec, Type::FLOAT8),
                        ],
                    )
                    .await?;
                Ok((r.get(0), r.get(1)))
            },
            |l| l.try_spend(host, budget, now, left),
        )
    }

    /// [`BudgetStore::credit`] waiting for the database at most
    /// min(`left`, [`BUDGET_WAIT`]).
    pub fn credit_within(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        left: Duration,
    ) -> f64 {
        self.shared(
            host,
            left,
            async |c: &Client| {
                let r = c
                    .query_typed_one(
                        sql::CREDIT,
                        &[
                            (&host, Type::TEXT),
                            (&budget.capacity, Type::FLOAT8),
                            (&budget.refill_per_sec, Type::FLOAT8),
                            (&budget.success_credit, Type::FLOAT8),
                        ],
                    )
                    .await?;
                Ok(r.get(0))
            },
            |l| l.credit(host, budget, now, left),
        )
    }

    /// [`BudgetStore::drain`] waiting for the database at most
    /// min(`left`, [`BUDGET_WAIT`]).
    pub fn drain_within(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) {
        self.shared(
            host,
            left,
            async |c: &Client| {
                c.execute_typed(sql::DRAIN, &[(&host, Type::TEXT)])
                    .await
                    .map(drop)
            },
            |l| l.drain(host, budget, now, left),
        )
    }

    fn shared<R>(
        &self,
        host: &str,
        left: Duration,
        f: impl AsyncFnMut(&Client) -> Result<R, tokio_postgres::Error>,
        fallback: impl FnOnce(&LocalBudgets) -> R,
    ) -> R {
        match self.pool.with(left.min(BUDGET_WAIT), f) {
            Ok(r) => {
                if self.degraded.swap(false, Ordering::Relaxed) {
                    tracing::info!(database = %self.pool.shown, host, "the shared retry budget answers again");
                }
                r
            }
            Err(e) => {
                if !self.degraded.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        database = %self.pool.shown,
                        host,
                        error = %e.source,
                        "the shared retry budget cannot be read: using this process's own bucket until it can"
                    );
                }
                fallback(&self.local)
            }
        }
    }
}

impl BudgetStore for PostgresBudgets {
    /// [`PostgresBudgets::try_spend_within`] `left`.
    fn try_spend(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        left: Duration,
    ) -> (bool, f64) {
        self.try_spend_within(host, budget, now, left)
    }

    /// [`PostgresBudgets::credit_within`] `left`.
    fn credit(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) -> f64 {
        self.credit_within(host, budget, now, left)
    }

    /// [`PostgresBudgets::drain_within`] `left`.
    fn drain(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) {
        self.drain_within(host, budget, now, left)
    }
}

/// A token no other claim has: the process, the time and a counter.
fn claim_token() -> String {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{t:x}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_are_told_from_files() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url("PostgreSQL://h/db"));
        assert!(!is_postgres_url("ledger.db"));
        assert!(!is_postgres_url("postgres.db"));
    }
}
