//! The PostgreSQL store: one ledger (and one retry budget per host) shared
//! by several sluice replicas through a database the operators already run.
//!
//! Connections come from a small pool of blocking `postgres` clients, each
//! with its statements prepared once. Every claim, finish and budget take is
//! one statement in its own transaction; their atomicity is PostgreSQL's
//! (a primary key for claims, a row lock for a budget's upsert).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use postgres::config::{Host, SslMode};
use postgres::{Client, NoTls, Statement};
use sluice_policy::{
    BudgetStore, Claim, Ledger, LedgerError, LocalBudgets, PreviousRun, RetryBudget,
};

use crate::sqlite::{from_ms, to_ms, LedgerEntry, DEFAULT_RETENTION, PRUNE_BATCH, PRUNE_INTERVAL};

/// The version of the schema this crate writes, kept in `sluice_schema`.
pub const PG_SCHEMA_VERSION: i32 = 1;

/// How long a connection attempt waits when the URL sets no
/// `connect_timeout`: 5 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How many idle connections a store keeps for reuse.
const IDLE: usize = 4;

/// The server's clock in Unix milliseconds (one clock for every replica).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Serializes the schema's creation between replicas starting at once.
const SCHEMA_LOCK: i64 = 0x736c_6c67_0001;

/// Whether `spec` names a PostgreSQL database (`postgres://` or
/// `postgresql://`) rather than a file.
pub fn is_postgres_url(spec: &str) -> bool {
    let lower = spec.get(..13).unwrap_or(spec).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The statements of one connection, prepared when it is made.
struct Prepared {
    claim: Statement,
    read_claim: Statement,
    finish: Statement,
    prune: Statement,
    show: Statement,
    list: Statement,
    spend: Statement,
    credit: Statement,
    drain: Statement,
}

struct Conn {
    client: Client,
    st: Prepared,
}

/// The connections of one store: an idle list, made on demand.
struct Pool {
    config: postgres::Config,
    shown: String,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    fn err(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> LedgerError {
        let e = e.into();
        // postgres's errors say "db error" or "invalid configuration" and
        // keep the reason in their sources: say it all in one line.
        let e: Box<dyn std::error::Error + Send + Sync> = if e.is::<postgres::Error>() {
            let mut text = e.to_string();
            let mut next = e.source();
            while let Some(s) = next {
                text.push_str(": ");
                text.push_str(&s.to_string());
                next = s.source();
            }
            text.into()
        } else {
            e
        };
        let source = match e.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => io::Error::other(other),
        };
        LedgerError {
            path: self.shown.clone(),
            source,
        }
    }

    fn connect(&self) -> Result<Conn, postgres::Error> {
        let mut client = self.config.connect(NoTls)?;
        let st = prepare(&mut client)?;
        Ok(Conn { client, st })
    }

    /// Run `f` on a connection. A failure on a connection taken from the
    /// idle list (the server may have closed it since: a restart, an idle
    /// timeout) is tried once more on a new one; a failure on a new one is
    /// returned. `f` must be safe to run twice (every caller's is).
    fn with<R>(
        &self,
        mut f: impl FnMut(&mut Conn) -> Result<R, postgres::Error>,
    ) -> Result<R, LedgerError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if let Some(mut conn) = pooled {
            match f(&mut conn) {
                Ok(r) => {
                    self.put(conn);
                    return Ok(r);
                }
                Err(e) if !conn.client.is_closed() && e.as_db_error().is_some() => {
                    // The server answered: the connection is fine, the
                    // statement is not; trying again would not mend it.
                    self.put(conn);
                    return Err(self.err(e));
                }
                Err(_) => {}
            }
        }
        let mut conn = self.connect().map_err(|e| self.err(e))?;
        let r = f(&mut conn).map_err(|e| self.err(e));
        self.put(conn);
        r
    }

    fn put(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE {
            idle.push(conn);
        }
    }
}

fn prepare(c: &mut Client) -> Result<Prepared, postgres::Error> {
    Ok(Prepared {
        claim: c.prepare(&format!(
            "INSERT INTO sluice_ledger (id, claimed_at, token) VALUES ($1, {NOW_MS}, $2)
             ON CONFLICT (id) DO NOTHING"
        ))?,
        read_claim: c.prepare("SELECT token, run FROM sluice_ledger WHERE id = $1")?,
        finish: c.prepare(&format!(
            "INSERT INTO sluice_ledger (id, claimed_at, finished_at, run)
             VALUES ($1, {NOW_MS}, {NOW_MS}, $2)
             ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, run = excluded.run"
        ))?,
        prune: c.prepare(&format!(
            "DELETE FROM sluice_ledger WHERE id IN
             (SELECT id FROM sluice_ledger WHERE claimed_at < {NOW_MS} - $1
              ORDER BY claimed_at LIMIT $2)"
        ))?,
        show: c.prepare(
            "SELECT id, claimed_at, finished_at, run FROM sluice_ledger WHERE id = $1",
        )?,
        list: c.prepare(
            "SELECT id, claimed_at, finished_at, run FROM sluice_ledger
             WHERE claimed_at >= $1 ORDER BY claimed_at, id",
        )?,
        // $1 host, $2 capacity, $3 refill per second. `level` is the bucket
        // refilled to the server's now; a token is spent when it holds one.
        spend: c.prepare(
            "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
             VALUES ($1, CASE WHEN $2::float8 >= 1 THEN $2::float8 - 1 ELSE $2::float8 END, clock_timestamp(), $2::float8 >= 1)
             ON CONFLICT (host) DO UPDATE SET
               tokens = CASE
                 WHEN least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) >= 1
                 THEN least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) - 1
                 ELSE least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8)
               END,
               spent = least($2::float8, b.tokens + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8) >= 1,
               at = greatest(b.at, clock_timestamp())
             RETURNING spent, tokens",
        )?,
        // $4::float8 the success credit.
        credit: c.prepare(
            "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
             VALUES ($1, $2::float8, clock_timestamp(), false)
             ON CONFLICT (host) DO UPDATE SET
               tokens = least($2::float8, b.tokens
                 + greatest(0, extract(epoch from clock_timestamp() - b.at)) * $3::float8 + $4::float8),
               spent = false,
               at = greatest(b.at, clock_timestamp())
             RETURNING tokens",
        )?,
        drain: c.prepare(
            "INSERT INTO sluice_retry_budget AS b (host, tokens, at, spent)
             VALUES ($1, 0, clock_timestamp(), false)
             ON CONFLICT (host) DO UPDATE SET tokens = 0, spent = false,
               at = greatest(b.at, clock_timestamp())",
        )?,
    })
}

/// Create the schema in a database that has none, or check that the one
/// there is of a version this crate reads. Replicas starting at once take
/// turns through an advisory lock.
fn ensure_schema(c: &mut Client) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS sluice_schema (
             component text PRIMARY KEY,
             version integer NOT NULL
         )",
    )?;
    let version: Option<i32> = tx
        .query_opt(
            "SELECT version FROM sluice_schema WHERE component = 'ledger'",
            &[],
        )?
        .map(|r| r.get(0));
    match version {
        Some(PG_SCHEMA_VERSION) => {}
        Some(v) if v > PG_SCHEMA_VERSION => {
            return Err(format!(
                "written by a newer sluice (ledger schema {v}; this one reads {PG_SCHEMA_VERSION})"
            )
            .into())
        }
        Some(v) => return Err(format!("unknown ledger schema {v}").into()),
        None => {
            tx.batch_execute(
                "CREATE TABLE sluice_ledger (
                     id text PRIMARY KEY,
                     claimed_at bigint NOT NULL,
                     finished_at bigint,
                     run text,
                     token text
                 );
                 CREATE INDEX sluice_ledger_claimed_at ON sluice_ledger (claimed_at);
                 CREATE TABLE sluice_retry_budget (
                     host text PRIMARY KEY,
                     tokens double precision NOT NULL,
                     at timestamptz NOT NULL,
                     spent boolean NOT NULL
                 );",
            )?;
            tx.execute(
                "INSERT INTO sluice_schema (component, version) VALUES ('ledger', $1)",
                &[&PG_SCHEMA_VERSION],
            )?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// A ledger in a PostgreSQL database, shared by several replicas (and
/// every process and thread of each).
///
/// Opened from a URL (`postgres://user@host:port/db?…`, or PostgreSQL's
/// `key=value` form), with the password taken, in order, from the URL,
/// `PGPASSWORD`, or the `.pgpass` file (`PGPASSFILE`, else `~/.pgpass`; its
/// `host:port:database:user:password` lines, `*` matching anything). The
/// password is never printed: errors and `Debug` name the database as
/// `postgres://user@host:port/db`.
///
/// # TLS
///
/// This build has no TLS to the database: `sslmode=require` (and
/// `verify-ca`, `verify-full`) is refused at open with an error saying so;
/// the default `prefer` and `disable` connect without TLS. Reach a database
/// that demands TLS through a local TLS tunnel.
///
/// # The schema
///
/// Created on first use (three tables: `sluice_schema` with the version,
/// `sluice_ledger`, `sluice_retry_budget`), under an advisory lock so that
/// replicas starting at once take turns; a database holding a newer
/// version is refused.
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
/// one batch by itself from a claim at most once per [`PRUNE_INTERVAL`].
pub struct PostgresLedger {
    pool: Arc<Pool>,
    retention: Duration,
    last_prune: Mutex<Option<Instant>>,
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
    /// connection for the first claim. Retention: [`DEFAULT_RETENTION`].
    pub fn open(url: &str) -> Result<Self, LedgerError> {
        Self::open_with_retention(url, DEFAULT_RETENTION)
    }

    /// [`PostgresLedger::open`] with another retention window.
    pub fn open_with_retention(url: &str, retention: Duration) -> Result<Self, LedgerError> {
        let (config, shown) = parse_url(url)?;
        let pool = Pool {
            config,
            shown,
            idle: Mutex::new(Vec::new()),
        };
        let mut client = pool.config.connect(NoTls).map_err(|e| pool.err(e))?;
        ensure_schema(&mut client).map_err(|e| pool.err(e))?;
        let st = prepare(&mut client).map_err(|e| pool.err(e))?;
        pool.put(Conn { client, st });
        Ok(PostgresLedger {
            pool: Arc::new(pool),
            retention,
            last_prune: Mutex::new(None),
        })
    }

    /// The database, as printed: `postgres://user@host:port/db`.
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

    /// Delete the rows claimed more than the retention window ago, in
    /// batches of at most [`PRUNE_BATCH`]; how many were deleted.
    pub fn prune(&self) -> Result<u64, LedgerError> {
        let mut total = 0;
        loop {
            let n = self.prune_batch()?;
            total += n;
            if n < u64::from(PRUNE_BATCH) {
                return Ok(total);
            }
        }
    }

    fn prune_batch(&self) -> Result<u64, LedgerError> {
        let window = i64::try_from(self.retention.as_millis()).unwrap_or(i64::MAX);
        self.pool.with(|c| {
            c.client
                .execute(&c.st.prune, &[&window, &i64::from(PRUNE_BATCH)])
        })
    }

    /// The row of `id`, if it is kept.
    pub fn show(&self, id: &str) -> Result<Option<LedgerEntry>, LedgerError> {
        let row = self.pool.with(|c| c.client.query_opt(&c.st.show, &[&id]))?;
        row.map(|r| self.entry(&r)).transpose()
    }

    /// The rows claimed at or after `since`, oldest first (ties by id).
    pub fn list(&self, since: SystemTime) -> Result<Vec<LedgerEntry>, LedgerError> {
        let since = to_ms(since);
        let rows = self.pool.with(|c| c.client.query(&c.st.list, &[&since]))?;
        rows.iter().map(|r| self.entry(r)).collect()
    }

    fn entry(&self, r: &postgres::Row) -> Result<LedgerEntry, LedgerError> {
        let id: String = r.get(0);
        let run: Option<String> = r.get(3);
        Ok(LedgerEntry {
            run: self.parse_run(&id, run.as_deref())?,
            claimed_at: from_ms(r.get(1)),
            finished_at: r.get::<_, Option<i64>>(2).map(from_ms),
            id,
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

    fn prune_now_and_then(&self) {
        {
            let mut last = self.last_prune.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|t| t.elapsed() < PRUNE_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.prune_batch() {
            tracing::warn!(ledger = %self.pool.shown, error = %e.source, "pruning the ledger failed");
        }
    }
}

impl Ledger for PostgresLedger {
    fn claim(&self, id: &str) -> Result<Claim, LedgerError> {
        let token = claim_token();
        let claim = loop {
            let (inserted, row) = self.pool.with(|c| {
                let n = c.client.execute(&c.st.claim, &[&id, &token])?;
                if n == 1 {
                    return Ok((true, None));
                }
                let row = c.client.query_opt(&c.st.read_claim, &[&id])?;
                Ok((
                    false,
                    row.map(|r| (r.get::<_, Option<String>>(0), r.get::<_, Option<String>>(1))),
                ))
            })?;
            match (inserted, row) {
                (true, _) => break Claim::Claimed,
                (false, Some((Some(t), _))) if t == token => break Claim::Claimed,
                (false, Some((_, run))) => break Claim::Taken(self.parse_run(id, run.as_deref())?),
                // Pruned between the two statements: the id is free again.
                (false, None) => continue,
            }
        };
        self.prune_now_and_then();
        Ok(claim)
    }

    fn finish(&self, id: &str, run: PreviousRun) -> Result<(), LedgerError> {
        let text = serde_json::to_string(&run).map_err(|e| self.pool.err(e))?;
        self.pool
            .with(|c| c.client.execute(&c.st.finish, &[&id, &text]))?;
        Ok(())
    }
}

/// The per-host retry budgets in the database: one bucket per host for
/// every replica, each take one atomic upsert refilled by the server's
/// clock (the policy's monotonic clock is ignored: it means nothing to
/// another replica).
///
/// When the database cannot answer, the take falls back to this process's
/// own bucket ([`LocalBudgets`]) and a warn event says so, once per outage;
/// an info event says when the shared budget answers again.
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

    fn shared<R>(
        &self,
        host: &str,
        f: impl FnMut(&mut Conn) -> Result<R, postgres::Error>,
        fallback: impl FnOnce(&LocalBudgets) -> R,
    ) -> R {
        match self.pool.with(f) {
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
    fn try_spend(&self, host: &str, budget: &RetryBudget, now: Duration) -> (bool, f64) {
        self.shared(
            host,
            |c| {
                let r = c.client.query_one(
                    &c.st.spend,
                    &[&host, &budget.capacity, &budget.refill_per_sec],
                )?;
                Ok((r.get(0), r.get(1)))
            },
            |l| l.try_spend(host, budget, now),
        )
    }

    fn credit(&self, host: &str, budget: &RetryBudget, now: Duration) -> f64 {
        self.shared(
            host,
            |c| {
                let r = c.client.query_one(
                    &c.st.credit,
                    &[
                        &host,
                        &budget.capacity,
                        &budget.refill_per_sec,
                        &budget.success_credit,
                    ],
                )?;
                Ok(r.get(0))
            },
            |l| l.credit(host, budget, now),
        )
    }

    fn drain(&self, host: &str, budget: &RetryBudget, now: Duration) {
        self.shared(
            host,
            |c| c.client.execute(&c.st.drain, &[&host]).map(drop),
            |l| l.drain(host, budget, now),
        )
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

/// The connection figures from a URL, with the password filled in from
/// `PGPASSWORD` or `.pgpass` when the URL has none, and the database as it
/// may be printed.
fn parse_url(url: &str) -> Result<(postgres::Config, String), LedgerError> {
    let refuse = |shown: &str, msg: String| LedgerError {
        path: shown.to_string(),
        source: io::Error::new(io::ErrorKind::InvalidInput, msg),
    };
    let lower = url.to_ascii_lowercase();
    for mode in ["verify-ca", "verify-full", "require"] {
        if lower.contains(&format!("sslmode={mode}")) {
            return Err(refuse(
                &redact_unparsed(url),
                format!(
                    "sslmode={mode}: this build of sluice-remote has no TLS to PostgreSQL \
                     (connections are plain TCP); use sslmode=disable or prefer, or reach \
                     the database through a local TLS tunnel"
                ),
            ));
        }
    }
    let mut config = postgres::Config::from_str(url).map_err(|e| {
        // The parser's words never hold the password; the URL might.
        refuse(
            &redact_unparsed(url),
            format!("not a PostgreSQL connection URL: {e}"),
        )
    })?;
    if config.get_user().is_none() {
        if let Some(u) = std::env::var("PGUSER")
            .ok()
            .or_else(|| std::env::var("USER").ok())
        {
            config.user(&u);
        }
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("sluice-remote");
    }
    if config.get_ssl_mode() == SslMode::Require {
        // Set by the key=value form with spaces the check above missed.
        return Err(refuse(
            &shown(&config),
            "sslmode=require: this build of sluice-remote has no TLS to PostgreSQL".into(),
        ));
    }
    config.ssl_mode(SslMode::Disable);
    let shown = shown(&config);
    if config.get_password().is_none() {
        if let Some(pw) = std::env::var_os("PGPASSWORD") {
            config.password(pw.to_string_lossy().as_bytes());
        } else if let Some(pw) = pgpass_password(&config) {
            config.password(pw.as_bytes());
        }
    }
    Ok((config, shown))
}

/// `postgres://user@host:port/db` for errors and logs.
fn shown(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("");
    let db = config.get_dbname().unwrap_or(user);
    let user = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    format!("postgres://{user}{host}:{port}/{db}")
}

/// A URL that could not be parsed, printed without anything between `://`
/// and the last `@` (user info) and without its query.
fn redact_unparsed(url: &str) -> String {
    let no_query = url.split('?').next().unwrap_or(url);
    match (no_query.find("://"), no_query.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            format!("{}://{}", &no_query[..s], &no_query[at + 1..])
        }
        (Some(_), _) => no_query.to_string(),
        // The key=value form: say nothing of its contents.
        (None, _) => "(a PostgreSQL connection string)".into(),
    }
}

/// The password of the first matching line of the `.pgpass` file, as libpq
/// reads it: `host:port:database:user:password`, `*` for any, `\:` and `\\`
/// escaped; ignored unless the file is readable by its owner alone.
fn pgpass_password(config: &postgres::Config) -> Option<String> {
    let path = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path).ok()?;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(file = %path.display(), "the password file is readable by others: ignored (chmod 0600 it)");
            return None;
        }
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(_)) | None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or("").to_string();
    let db = config
        .get_dbname()
        .map_or_else(|| user.clone(), str::to_string);
    let wanted = [host, port, db, user];
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split_pgpass(line);
            if fields.len() != 5 {
                return None;
            }
            let matches = fields[..4]
                .iter()
                .zip(&wanted)
                .all(|(f, w)| f == "*" || f == w);
            matches.then(|| fields[4].clone())
        })
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().expect("one field at least").push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("one field at least").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let (config, shown) =
            parse_url("postgres://ops:s3cret@db.example:6543/ledger?connect_timeout=3")
                .expect("parsed");
        assert_eq!(shown, "postgres://ops@db.example:6543/ledger");
        assert_eq!(config.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
    }

    #[test]
    fn sslmode_require_is_refused_saying_why_without_the_password() {
        let e = parse_url("postgres://ops:s3cret@db.example/ledger?sslmode=require")
            .expect_err("refused");
        let text = format!("{e}");
        assert!(text.contains("no TLS to PostgreSQL"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_bad_url_is_refused_without_its_user_info() {
        let e = parse_url("postgres://ops:s3cret@db.example:notaport/x").expect_err("refused");
        let text = format!("{e}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("db.example"), "{text}");
    }

    #[test]
    fn pgpass_lines_split_on_unescaped_colons() {
        assert_eq!(
            split_pgpass(r"h:5432:*:u:pa\:ss\\w:rd"),
            vec!["h", "5432", "*", "u", r"pa:ss\w:rd"]
        );
    }

    #[test]
    fn postgres_urls_are_told_from_files() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url("PostgreSQL://h/db"));
        assert!(!is_postgres_url("ledger.db"));
        assert!(!is_postgres_url("postgres.db"));
    }
}
