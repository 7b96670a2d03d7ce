//! The SQLite store: one row per operation id in a WAL-mode database shared
//! by every process on one machine.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{params, Connection, OptionalExtension};
use sluice_policy::{
    Claim, ClaimRequest, FinishRequest, Ledger, LedgerError, PreviousRun, ProgressRequest,
};

use crate::entry::{
    error, from_ms, parse_effect, to_ms, unfinished, EntryState, LedgerEntry, Origin, What,
    DEFAULT_RETENTION, PRUNE_INTERVAL,
};
use crate::import;
use crate::sqlite_schema::{ensure_schema, read_schema, SCHEMA_VERSION};

/// How long a connection waits by default for another process's write to
/// end before a claim fails: 5 s.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How many rows, in id order, one pruning transaction of the SQLite
/// ledger examines (and so deletes at most). The SQLite table has no index
/// on the claim time (see [`SqliteLedger`]'s "Pruning"): a pass walks the
/// ids in slices of this many rows.
pub const SQLITE_PRUNE_SLICE: u32 = 5_000;

/// After how many commits of a ledger value its checkpointer thread is
/// woken: about SQLite's default checkpoint of 1,000 WAL pages at the ~2
/// pages a claim or a finish writes.
pub const CHECKPOINT_EVERY: u32 = 500;

/// The WAL size (pages) past which a commit checkpoints by itself, as
/// SQLite does by default at 1,000: the backstop should the checkpointer
/// thread fall behind.
const AUTOCHECKPOINT_BACKSTOP: u32 = 10_000;

const CLAIM: &str = "INSERT INTO claims
     (id, claimed_at, kind, remote, refs, effect, deadline_ms, host, pid)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
     ON CONFLICT (id) DO NOTHING";
/// What a taken id's row says of its earlier run: the run once it has
/// ended; while it runs, what its claim recorded and when.
const READ_CLAIM: &str = "SELECT run, kind, effect, claimed_at, deadline_ms, host, pid, phase
     FROM claims WHERE id = ?1";
/// The phase a run still running records (best effort).
const PROGRESS: &str = "UPDATE claims SET phase = ?2 WHERE id = ?1 AND run IS NULL";
/// What ran is the claim's when the claim wrote it (a generated id is
/// never claimed: its finish writes it).
const FINISH: &str =
    "INSERT INTO claims (id, claimed_at, finished_at, run, kind, remote, refs, effect)
     VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, run = excluded.run,
       kind = coalesce(claims.kind, excluded.kind),
       remote = coalesce(claims.remote, excluded.remote),
       refs = coalesce(claims.refs, excluded.refs),
       effect = coalesce(claims.effect, excluded.effect)";
/// The first id past a slice of `?2` rows starting at `?1`.
const PRUNE_SLICE_END: &str = "SELECT id FROM claims WHERE id >= ?1 ORDER BY id LIMIT 1 OFFSET ?2";
/// The expired rows of the slice `[?1, ?2)`.
const PRUNE_SLICE: &str = "DELETE FROM claims WHERE id >= ?1 AND id < ?2 AND claimed_at < ?3";
/// The expired rows from `?1` to the end (the last slice).
const PRUNE_TAIL: &str = "DELETE FROM claims WHERE id >= ?1 AND claimed_at < ?2";
/// The columns a row is read back from (schema 5).
const COLUMNS: &str =
    "id, claimed_at, finished_at, run, kind, remote, refs, deadline_ms, host, pid, phase";
/// The same from a ledger of schema 3 or 4, read as it is.
const COLUMNS_BEFORE_5: &str =
    "id, claimed_at, finished_at, run, kind, remote, refs, NULL, NULL, NULL, NULL";
/// The same from a ledger older than schema 3, read as it is.
const COLUMNS_BEFORE_3: &str =
    "id, claimed_at, finished_at, run, NULL, NULL, NULL, NULL, NULL, NULL, NULL";

fn columns(schema: i32) -> &'static str {
    match schema {
        5.. => COLUMNS,
        3 | 4 => COLUMNS_BEFORE_5,
        _ => COLUMNS_BEFORE_3,
    }
}

fn show_sql(schema: i32) -> String {
    format!("SELECT {} FROM claims WHERE id = ?1", columns(schema))
}

fn list_sql(schema: i32) -> String {
    format!(
        "SELECT {} FROM claims WHERE claimed_at >= ?1 ORDER BY claimed_at, id",
        columns(schema)
    )
}

/// When a commit is synced to disk.
///
/// Both modes run the database in WAL mode; neither loses anything when a
/// process is killed, only when the machine loses power (or the kernel
/// crashes).
///
/// # Default
///
/// [`SyncMode::Full`].
///
/// Not exhaustive: SQLite has other levels (`EXTRA`, `OFF`) that may be
/// offered; a `match` outside this crate keeps a wildcard arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SyncMode {
    /// Every commit is synced before it returns (`PRAGMA synchronous=FULL`):
    /// a claim that returned survives a power cut.
    #[default]
    Full,
    /// Commits are synced only at checkpoints (`PRAGMA synchronous=NORMAL`).
    /// A power cut may lose the last commits before it — never the
    /// database's integrity. A lost claim means its id could run a second
    /// time after the power cut; a lost finish leaves the id reading as
    /// still running.
    Normal,
}

impl SyncMode {
    const fn pragma(self) -> &'static str {
        match self {
            SyncMode::Full => "FULL",
            SyncMode::Normal => "NORMAL",
        }
    }
}

/// How a [`SqliteLedger`] is opened: a builder from
/// [`SqliteLedger::options`].
///
/// # Default
///
/// - sync: [`SyncMode::Full`];
/// - retention: [`DEFAULT_RETENTION`] (7 days);
/// - busy timeout: [`DEFAULT_BUSY_TIMEOUT`] (5 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    sync: SyncMode,
    retention: Duration,
    busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl SqliteOptions {
    /// The defaults.
    pub const fn new() -> Self {
        SqliteOptions {
            sync: SyncMode::Full,
            retention: DEFAULT_RETENTION,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }

    /// When commits are synced to disk.
    pub const fn sync(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }

    /// How long an id is kept after its claim, at least: rows claimed
    /// before `now - retention` are deleted by [`SqliteLedger::prune`].
    pub const fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How long a statement waits for another connection's write to end
    /// before it fails (a claim that fails so is a `local-error`).
    pub const fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// When commits are synced to disk.
    pub const fn sync_mode(&self) -> SyncMode {
        self.sync
    }

    /// How long an id is kept after its claim, at least.
    pub const fn retention_window(&self) -> Duration {
        self.retention
    }

    /// How long a statement waits for another connection's write to end.
    pub const fn busy_wait(&self) -> Duration {
        self.busy_timeout
    }

    /// Open (or create) the ledger at `path`; see [`SqliteLedger`] for what
    /// happens to a JSON ledger found there.
    pub fn open(self, path: impl AsRef<Path>) -> Result<SqliteLedger, LedgerError> {
        SqliteLedger::open_with(path.as_ref(), self)
    }

    /// Open the ledger at `path` to read it only; see
    /// [`SqliteLedger::open_read_only`].
    pub fn open_read_only(self, path: impl AsRef<Path>) -> Result<SqliteLedger, LedgerError> {
        SqliteLedger::read_only_with(path.as_ref(), self)
    }
}

/// A ledger in one SQLite file, shared by every process on one machine.
///
/// Each value keeps one connection behind a mutex: it is `Send + Sync`, and
/// its calls from several threads run one at a time. Processes (and other
/// values) sharing the file wait for each other's writes through SQLite's
/// locks, up to the busy timeout.
///
/// # Pruning
///
/// Rows claimed more than the retention window ago are deleted by
/// [`prune`](Self::prune), which walks the table in id order, one slice of
/// [`SQLITE_PRUNE_SLICE`] rows per transaction. [`claim`](Ledger::claim)
/// also prunes one slice by itself, on the first claim of a value and then
/// at most once per [`PRUNE_INTERVAL`], each time the slice after the last
/// one (from the first id again after the last); a failure there is logged
/// and does not fail the claim. So with claims alone, an expired row is
/// deleted within one sweep of the table — rows ÷ 5,000 minutes (a million
/// rows: under 4 hours) — after its window ends. An expired row not yet
/// pruned still answers [`Claim::Taken`]: an id is kept for *at least* the
/// window.
///
/// The table has no index on the claim time, on purpose: with one, every
/// claim wrote two pages (the row's and the index's last one) where the
/// floor of any store — a commit of one row — writes one, and the claim
/// cost about 1.5× as much. [`list`](Self::list) and pruning read the whole
/// table (in slices) instead, which a person's question or a background
/// sweep can afford.
///
/// # Importing a JSON ledger
///
/// [`open`](SqliteOptions::open) looks at the file's first bytes. A missing
/// or empty file, or one starting with SQLite's header, is opened as the
/// database. One whose content starts with `{` is taken for the JSON ledger
/// of [`FileLedger`](sluice_policy::FileLedger)
/// (`{"operations": {"<id>": null | <run>}}`) and imported once, under the
/// same `<file>.lock` lock the `FileLedger` writes under: the JSON is read,
/// a database holding every id (claimed now; a run's JSON kept as it is,
/// finished now; a claim still running — `null`, or a run of result
/// `running` — without a run, with the kind, effect and claim time it
/// records) is written to a temporary file beside it and synced, the
/// JSON is copied to `<file>.json-imported` (replacing an earlier copy), and
/// the database is renamed over `<file>` — so the path never disappears, and
/// a process that dies midway leaves the JSON ledger in place. A JSON file
/// that cannot be parsed is refused with an error naming it, untouched; so
/// is any other content. The lock file is removed once the import is over
/// (by its holder, before letting go), so nothing is left beside the
/// ledger but the `.json-imported` copy.
///
/// # Reading only
///
/// [`open_read_only`](Self::open_read_only) never creates, imports,
/// migrates or writes a ledger, and leaves no file beside it. See there.
#[derive(Debug)]
pub struct SqliteLedger {
    path: PathBuf,
    options: SqliteOptions,
    /// The schema version of the file (`0`: an empty database; older
    /// schemas are read as they are).
    schema: i32,
    /// Opened by [`SqliteLedger::open_read_only`]: claims and finishes are
    /// refused.
    read_only: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    conn: Connection,
    /// Commits since the checkpointer was last woken.
    commits: u32,
    checkpointer: Option<Checkpointer>,
    /// When this value last pruned from `claim`.
    last_prune: Option<Instant>,
    /// Where `claim`'s next pruning slice starts (`""`: the first id).
    prune_from: String,
}

impl SqliteLedger {
    /// Open (or create) the ledger at `path` with the default options (see
    /// [`SqliteOptions`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        SqliteOptions::new().open(path)
    }

    /// A builder for a ledger with other options.
    pub const fn options() -> SqliteOptions {
        SqliteOptions::new()
    }

    fn open_with(path: &Path, options: SqliteOptions) -> Result<Self, LedgerError> {
        match import::look(path)? {
            import::Content::Sqlite => {}
            import::Content::Json => import::import_json(path)?,
        }
        let conn = connect(path, &options).map_err(|e| error(path, e))?;
        Ok(SqliteLedger {
            path: path.to_path_buf(),
            options,
            schema: SCHEMA_VERSION,
            read_only: false,
            state: Mutex::new(State {
                conn,
                commits: 0,
                checkpointer: Checkpointer::start(path, &options),
                last_prune: None,
                prune_from: String::new(),
            }),
        })
    }

    /// Open the ledger at `path` to read it ([`show`](Self::show),
    /// [`list`](Self::list)) and nothing else, with the default options.
    ///
    /// Nothing is created, imported, migrated or written, and no file is
    /// left beside it:
    ///
    /// - no file at `path` is an error of kind
    ///   [`NotFound`](io::ErrorKind::NotFound) naming it (a read never
    ///   creates a ledger; an operation's claim does);
    /// - a JSON ledger of [`FileLedger`](sluice_policy::FileLedger) not yet
    ///   imported is an error saying so (the first claim imports it);
    /// - a file this process may write is opened as a writer opens it,
    ///   without creating it: its WAL files come and go as any
    ///   connection's (the last to close removes them);
    /// - a file it may not write (mode 0444, another user's) is opened
    ///   read-only when its WAL files are there already (a writer has it
    ///   open: its latest commits are seen); otherwise, or when that fails
    ///   (a read-only directory), it is opened *immutable*: SQLite reads
    ///   the database file alone, without locks, and creates no `-wal` or
    ///   `-shm` file (which a read-only connection would leave behind).
    ///   An immutable read does not see commits still in a WAL whose
    ///   writer died before checkpointing them.
    ///
    /// An older schema is read as it is: the columns it lacks (what ran)
    /// read as `None`. [`claim`](Ledger::claim) and
    /// [`finish`](Ledger::finish) on such a value are errors.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        SqliteOptions::new().open_read_only(path)
    }

    fn read_only_with(path: &Path, options: SqliteOptions) -> Result<Self, LedgerError> {
        if !path.try_exists().map_err(|e| error(path, e))? {
            return Err(error(
                path,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "no ledger at this path (a read never creates one; an operation given this --ledger does)",
                ),
            ));
        }
        if import::look(path)? == import::Content::Json {
            return Err(error(
                path,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a JSON ledger of an earlier version, not imported yet (a read never writes; the next operation given this ledger imports it)",
                ),
            ));
        }
        let (conn, schema) = connect_reader(path, &options).map_err(|e| error(path, e))?;
        Ok(SqliteLedger {
            path: path.to_path_buf(),
            options,
            schema,
            read_only: true,
            state: Mutex::new(State {
                conn,
                commits: 0,
                checkpointer: None,
                last_prune: None,
                prune_from: String::new(),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was opened with.
    pub fn settings(&self) -> SqliteOptions {
        self.options
    }

    /// Delete the rows claimed before `now` minus the retention window: one
    /// pass over the whole table in id order, a transaction per slice of
    /// [`SQLITE_PRUNE_SLICE`] rows. Returns how many rows were deleted.
    ///
    /// Between two batches it pauses as long as the last batch took. A
    /// writer on another connection waiting for the lock polls for it
    /// (SQLite keeps no queue): without the pause, the next batch would take
    /// the lock again within microseconds and such a writer could wait for
    /// the whole prune, past its busy timeout. With it, the lock is free
    /// half of the time, so a waiting claim finds it free at about every
    /// other poll; the prune takes twice as long.
    pub fn prune(&self, now: SystemTime) -> Result<u64, LedgerError> {
        self.writable()?;
        let cutoff = self.cutoff(now);
        let mut total = 0;
        let mut from = String::new();
        loop {
            let started = Instant::now();
            let (n, next) = {
                let st = self.lock();
                prune_slice(&st.conn, &from, cutoff).map_err(|e| self.err(e))?
            };
            total += n as u64;
            match next {
                Some(next) => from = next,
                None => return Ok(total),
            }
            std::thread::sleep(started.elapsed());
        }
    }

    /// The row of `id`, if it is kept.
    pub fn show(&self, id: &str) -> Result<Option<LedgerEntry>, LedgerError> {
        if self.schema == 0 {
            return Ok(None);
        }
        let st = self.lock();
        let row = st
            .conn
            .prepare_cached(&show_sql(self.schema))
            .and_then(|mut s| s.query_row(params![id], raw_entry).optional())
            .map_err(|e| self.err(e))?;
        row.map(|r| self.entry(r)).transpose()
    }

    /// The rows claimed at or after `since`, oldest first (ties by id).
    pub fn list(&self, since: SystemTime) -> Result<Vec<LedgerEntry>, LedgerError> {
        if self.schema == 0 {
            return Ok(Vec::new());
        }
        let st = self.lock();
        let rows = st
            .conn
            .prepare_cached(&list_sql(self.schema))
            .and_then(|mut s| {
                s.query_map(params![to_ms(since)], raw_entry)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| self.err(e))?;
        rows.into_iter().map(|r| self.entry(r)).collect()
    }

    fn cutoff(&self, now: SystemTime) -> i64 {
        now.checked_sub(self.options.retention)
            .map_or(i64::MIN, to_ms)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves nothing half-done in the
        // connection: every statement is its own transaction.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait for another process's write at most `left` (never longer than
    /// the busy timeout) in the calls that follow on `st`'s connection.
    fn bound(&self, st: &State, left: Duration) -> Result<(), LedgerError> {
        st.conn
            .busy_timeout(left.min(self.options.busy_timeout))
            .map_err(|e| self.err(e))
    }

    fn err(&self, e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> LedgerError {
        error(&self.path, e)
    }

    /// An error when this value was opened to read only.
    fn writable(&self) -> Result<(), LedgerError> {
        if self.read_only {
            return Err(self.err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "opened to read only: nothing is claimed or recorded through it",
            )));
        }
        Ok(())
    }

    /// The row as an entry, its state judged by this reader's clock.
    fn entry(&self, raw: RawEntry) -> Result<LedgerEntry, LedgerError> {
        let run = self.parse_run(&raw.id, raw.run.as_deref())?;
        let since = Duration::from_millis(
            to_ms(SystemTime::now())
                .saturating_sub(raw.claimed_at)
                .max(0) as u64,
        );
        let deadline_ms = raw.deadline_ms.map(|d| d.max(0) as u64);
        Ok(LedgerEntry {
            state: EntryState::judge(run.is_some(), since, deadline_ms),
            run,
            id: raw.id,
            claimed_at: from_ms(raw.claimed_at),
            finished_at: raw.finished_at.map(from_ms),
            kind: raw.kind,
            remote: raw.remote,
            refs: What::parse_refs(raw.refs.as_deref()),
            deadline_ms,
            phase: raw.phase,
            host: raw.host,
            pid: raw.pid.and_then(|p| u32::try_from(p).ok()),
        })
    }

    fn parse_run(&self, id: &str, run: Option<&str>) -> Result<Option<PreviousRun>, LedgerError> {
        run.map(|text| {
            serde_json::from_str(text).map_err(|e| {
                error(
                    &self.path,
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the recorded run of id {id:?} cannot be read: {e}"),
                    ),
                )
            })
        })
        .transpose()
    }

    /// One pruning slice from `claim`, at most once per interval, after the
    /// last one; a failure is logged, not returned (the claim was made).
    fn prune_now_and_then(&self, st: &mut State) {
        if st.last_prune.is_some_and(|t| t.elapsed() < PRUNE_INTERVAL) {
            return;
        }
        st.last_prune = Some(Instant::now());
        match prune_slice(&st.conn, &st.prune_from, self.cutoff(SystemTime::now())) {
            Ok((_, next)) => st.prune_from = next.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(ledger = %self.path.display(), error = %e, "pruning the ledger failed");
            }
        }
    }
}

impl Ledger for SqliteLedger {
    /// One `INSERT … ON CONFLICT DO NOTHING`; when it inserted nothing, one
    /// read of the earlier row. A recorded run that cannot be read back as a
    /// [`PreviousRun`] is an error naming the id (the id stays taken).
    ///
    /// Another process's write is waited for at most the busy timeout or
    /// the request's `left`, whichever is shorter.
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        self.writable()?;
        let id = req.id;
        let what = What::of(req.kind, req.remote, req.refs).effect(req.effect);
        let origin = Origin::of(req);
        let now = to_ms(SystemTime::now());
        let mut st = self.lock();
        self.bound(&st, req.left)?;
        let claim = loop {
            let inserted = st
                .conn
                .prepare_cached(CLAIM)
                .and_then(|mut s| {
                    s.execute(params![
                        id,
                        now,
                        what.kind,
                        what.remote,
                        what.refs,
                        what.effect,
                        origin.deadline_ms,
                        origin.host,
                        origin.pid
                    ])
                })
                .map_err(|e| self.err(e))?;
            if inserted == 1 {
                committed(&mut st);
                break Claim::Claimed;
            }
            let row = st
                .conn
                .prepare_cached(READ_CLAIM)
                .and_then(|mut s| {
                    s.query_row(params![id], |r| {
                        Ok(Unfinished {
                            run: r.get(0)?,
                            kind: r.get(1)?,
                            effect: r.get(2)?,
                            claimed_at: r.get(3)?,
                            deadline_ms: r.get(4)?,
                            host: r.get(5)?,
                            pid: r.get(6)?,
                            phase: r.get(7)?,
                        })
                    })
                    .optional()
                })
                .map_err(|e| self.err(e))?;
            match row {
                Some(Unfinished {
                    run: Some(run),
                    host,
                    pid,
                    ..
                }) => {
                    // The claim's host and pid stay with the run.
                    let run = self.parse_run(id, Some(&run))?.map(|mut r| {
                        r.host = r.host.take().or(host);
                        r.pid = r.pid.or_else(|| pid.and_then(|p| u32::try_from(p).ok()));
                        r
                    });
                    break Claim::Taken(run);
                }
                Some(u) => {
                    // Judged by this process's clock.
                    let since =
                        Duration::from_millis(now.saturating_sub(u.claimed_at).max(0) as u64);
                    let effect = u.effect.as_deref().and_then(parse_effect);
                    break Claim::Taken(Some(unfinished(
                        u.kind,
                        effect,
                        since,
                        u.deadline_ms,
                        u.host,
                        u.pid,
                        u.phase,
                    )));
                }
                // Pruned (by another process) between the two statements:
                // its window had passed, so the id is free again.
                None => continue,
            }
        };
        self.prune_now_and_then(&mut st);
        Ok(claim)
    }

    /// One upsert: the row gets its run and `finished_at`; an id not claimed
    /// here (or pruned since) gets a row of its own. Waits for another
    /// process's write as a claim does.
    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        self.writable()?;
        let id = req.id;
        let text = serde_json::to_string(req.run).map_err(|e| self.err(e))?;
        let what = What::of(req.kind, req.remote, req.refs).effect(req.effect);
        let now = to_ms(SystemTime::now());
        let mut st = self.lock();
        self.bound(&st, req.left)?;
        st.conn
            .prepare_cached(FINISH)
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    now,
                    text,
                    what.kind,
                    what.remote,
                    what.refs,
                    what.effect
                ])
            })
            .map_err(|e| self.err(e))?;
        committed(&mut st);
        Ok(())
    }

    /// One update of the row's phase while it has no run; waits for
    /// another process's write at most the request's `left`.
    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        self.writable()?;
        let mut st = self.lock();
        self.bound(&st, req.left)?;
        st.conn
            .prepare_cached(PROGRESS)
            .and_then(|mut s| s.execute(params![req.id, req.phase]))
            .map_err(|e| self.err(e))?;
        committed(&mut st);
        Ok(())
    }
}

/// A taken id's row as a claim reads it.
struct Unfinished {
    run: Option<String>,
    kind: Option<String>,
    effect: Option<String>,
    claimed_at: i64,
    deadline_ms: Option<i64>,
    host: Option<String>,
    pid: Option<i64>,
    phase: Option<String>,
}

struct RawEntry {
    id: String,
    claimed_at: i64,
    finished_at: Option<i64>,
    run: Option<String>,
    kind: Option<String>,
    remote: Option<String>,
    refs: Option<String>,
    deadline_ms: Option<i64>,
    host: Option<String>,
    pid: Option<i64>,
    phase: Option<String>,
}

fn raw_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEntry> {
    Ok(RawEntry {
        id: r.get(0)?,
        claimed_at: r.get(1)?,
        finished_at: r.get(2)?,
        run: r.get(3)?,
        kind: r.get(4)?,
        remote: r.get(5)?,
        refs: r.get(6)?,
        deadline_ms: r.get(7)?,
        host: r.get(8)?,
        pid: r.get(9)?,
        phase: r.get(10)?,
    })
}

/// Delete the expired rows among [`SQLITE_PRUNE_SLICE`] rows from `from`
/// (in id order), in one transaction. Returns how many were deleted and
/// where the next slice starts (`None`: this one reached the end).
fn prune_slice(
    conn: &Connection,
    from: &str,
    cutoff: i64,
) -> rusqlite::Result<(usize, Option<String>)> {
    // IMMEDIATE: a read transaction turned writer fails at once (no busy
    // wait) when another connection committed in between.
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let end: Option<String> = tx
        .prepare_cached(PRUNE_SLICE_END)?
        .query_row(params![from, SQLITE_PRUNE_SLICE], |r| r.get(0))
        .optional()?;
    let n = match &end {
        Some(end) => tx
            .prepare_cached(PRUNE_SLICE)?
            .execute(params![from, end, cutoff])?,
        None => tx
            .prepare_cached(PRUNE_TAIL)?
            .execute(params![from, cutoff])?,
    };
    tx.commit()?;
    Ok((n, end))
}

/// A connection in WAL mode with the schema in place.
///
/// Processes opening one new file at once race to turn it to WAL mode, and
/// SQLite takes that lock without calling the busy handler: a step that
/// finds the database busy is taken again, with a fresh connection, until
/// the busy timeout has passed since the first try.
fn connect(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Connection, Box<dyn std::error::Error + Send + Sync>> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match connect_once(path, options) {
            Err(e) if is_busy(&*e) && start.elapsed() < options.busy_timeout => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Whether an error is SQLite's "database is busy" or "locked".
fn is_busy(e: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    matches!(
        e.downcast_ref::<rusqlite::Error>(),
        Some(rusqlite::Error::SqliteFailure(f, _))
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// One try of [`connect`].
fn connect_once(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Connection, Box<dyn std::error::Error + Send + Sync>> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(options.busy_timeout)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!("cannot use WAL mode (journal mode is {mode})").into());
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_BACKSTOP}",
        options.sync.pragma()
    ))?;
    ensure_schema(&conn)?;
    Ok(conn)
}

/// Why a way of opening a ledger to read failed.
enum ReadOpen {
    /// SQLite could not open or read it this way; another way may.
    Open(rusqlite::Error),
    /// It is not a ledger this crate reads: no way of opening helps.
    NotLedger(Box<dyn std::error::Error + Send + Sync>),
}

/// A connection that reads `path` and writes nothing, and the schema
/// version found: as a writer opens it (never creating it) when this
/// process may write the file; read-only when it may not and the WAL files
/// are there; immutable otherwise, or when the others fail. See
/// [`SqliteLedger::open_read_only`].
fn connect_reader(
    path: &Path,
    options: &SqliteOptions,
) -> Result<(Connection, i32), Box<dyn std::error::Error + Send + Sync>> {
    use rusqlite::OpenFlags;
    let base = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let beside = |suffix: &str| {
        let mut s = path.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s).exists()
    };
    // Opening for writing writes nothing: it asks whether this process may.
    let writable = std::fs::OpenOptions::new().write(true).open(path).is_ok();
    let wal_there = beside("-wal") && beside("-shm");
    let open = |uri: String, flags: OpenFlags| -> Result<(Connection, i32), ReadOpen> {
        let conn = Connection::open_with_flags(uri, flags).map_err(ReadOpen::Open)?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(ReadOpen::Open)?;
        match read_schema(&conn) {
            Ok(schema) => Ok((conn, schema)),
            Err(e) => match e.downcast::<rusqlite::Error>() {
                Ok(sqlite) => Err(ReadOpen::Open(*sqlite)),
                Err(other) => Err(ReadOpen::NotLedger(other)),
            },
        }
    };
    let uri = file_uri(path);
    let ways = [
        (
            writable,
            uri.clone(),
            base | OpenFlags::SQLITE_OPEN_READ_WRITE,
        ),
        (
            !writable && wal_there,
            format!("{uri}?mode=ro"),
            base | OpenFlags::SQLITE_OPEN_READ_ONLY,
        ),
        (
            true,
            format!("{uri}?immutable=1"),
            base | OpenFlags::SQLITE_OPEN_READ_ONLY,
        ),
    ];
    let mut first_error = None;
    for (wanted, uri, flags) in ways {
        if !wanted {
            continue;
        }
        match open(uri, flags) {
            Ok(found) => return Ok(found),
            Err(ReadOpen::NotLedger(e)) => return Err(e),
            Err(ReadOpen::Open(e)) => {
                tracing::debug!(ledger = %path.display(), error = %e, "opening the ledger to read: trying another way");
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error
        .expect("the immutable way is always tried")
        .into())
}

/// `path` as an SQLite `file:` URI, every byte a URI gives a meaning to
/// (and every non-ASCII one) escaped, so that `mode=ro` and `immutable=1`
/// can be asked of any path.
fn file_uri(path: &Path) -> String {
    use std::fmt::Write as _;
    let text = path.as_os_str().as_encoded_bytes();
    let mut uri = String::from("file:");
    for &b in text {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(&b) {
            uri.push(b as char);
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri
}

/// A thread with its own connection that checkpoints the WAL when a ledger
/// value has committed [`CHECKPOINT_EVERY`] times, so that a claim does not
/// pay for writing the pages back into the database file (SQLite runs a
/// checkpoint in the commit that crosses its threshold). A `PASSIVE`
/// checkpoint waits for no reader or writer; a failed one is logged at
/// debug and left to the next. It ends when its ledger value is dropped.
#[derive(Debug)]
struct Checkpointer {
    wake: Option<std::sync::mpsc::SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// `None` when its connection cannot be opened: commits then
    /// checkpoint by themselves past the backstop.
    fn start(path: &Path, options: &SqliteOptions) -> Option<Checkpointer> {
        let conn = Connection::open(path).ok()?;
        conn.busy_timeout(options.busy_timeout).ok()?;
        let (wake, woken) = std::sync::mpsc::sync_channel::<()>(1);
        let shown = path.display().to_string();
        let thread = std::thread::Builder::new()
            .name("sluice-ledger-checkpoint".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                    {
                        tracing::debug!(ledger = %shown, error = %e, "a WAL checkpoint failed");
                    }
                }
            })
            .ok()?;
        Some(Checkpointer {
            wake: Some(wake),
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.wake.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Count a commit; wake the checkpointer every [`CHECKPOINT_EVERY`].
fn committed(st: &mut State) {
    st.commits += 1;
    if st.commits >= CHECKPOINT_EVERY {
        st.commits = 0;
        if let Some(wake) = st.checkpointer.as_ref().and_then(|c| c.wake.as_ref()) {
            // Full: a checkpoint is already due; one is enough.
            let _ = wake.try_send(());
        }
    }
}
