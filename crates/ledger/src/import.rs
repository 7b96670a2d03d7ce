//! Telling a SQLite ledger from a JSON one, and importing the JSON ledger of
//! `FileLedger` once.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rusqlite::{params, Connection};
use serde::Deserialize;
use sluice_policy::LedgerError;

use crate::entry::{error, to_ms};
use crate::sqlite_schema::ensure_schema;

/// The first 16 bytes of every SQLite database.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// What a ledger path holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Content {
    /// A SQLite database, or nothing yet (missing or empty).
    Sqlite,
    /// Text starting with `{`: a JSON ledger.
    Json,
}

/// Look at the first bytes of `path`.
pub(crate) fn look(path: &Path) -> Result<Content, LedgerError> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Content::Sqlite),
        Err(e) => return Err(error(path, e)),
    };
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(error(path, e)),
        }
    }
    let head = &head[..n];
    if head.is_empty() || head.starts_with(SQLITE_HEADER) {
        return Ok(Content::Sqlite);
    }
    if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return Ok(Content::Json);
    }
    Err(error(
        path,
        io::Error::new(
            io::ErrorKind::InvalidData,
            "neither a SQLite ledger nor a JSON ledger; refusing to open it",
        ),
    ))
}

/// The JSON ledger's format: a run is kept as the JSON it is, so that a
/// field the current `PreviousRun` lacks (or gained) passes through.
#[derive(Deserialize)]
struct JsonLedger {
    operations: BTreeMap<String, Option<serde_json::Value>>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

/// Import the JSON ledger at `path` into a SQLite database at the same path.
///
/// Runs under an exclusive lock on `<path>.lock` (the lock `FileLedger`
/// writes under) and looks again once it holds it: another process may have
/// imported the file meanwhile. The lock file is removed by its holder
/// before it lets go, whatever the import's end ([`ImportLock`]).
pub(crate) fn import_json(path: &Path) -> Result<(), LedgerError> {
    let lock = ImportLock::take(path)?;
    if look(path)? != Content::Json {
        return Ok(());
    }
    let text = fs::read(path).map_err(|e| error(path, e))?;
    let ledger: JsonLedger = serde_json::from_slice(&text).map_err(|e| {
        error(
            path,
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a JSON ledger that cannot be read, left as it is: {e}"),
            ),
        )
    })?;
    let tmp = with_suffix(path, &format!(".import.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let written = write_database(&tmp, &ledger).and_then(|()| {
        File::open(&tmp)?.sync_all()?;
        let kept = with_suffix(path, ".json-imported");
        fs::copy(path, &kept)?;
        File::open(&kept)?.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(path)?;
        Ok(())
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(error(path, e));
    }
    tracing::info!(
        ledger = %path.display(),
        ids = ledger.operations.len(),
        "imported a JSON ledger; the JSON is kept as .json-imported"
    );
    drop(lock);
    Ok(())
}

/// The import's exclusive lock on `<path>.lock`, whose file is removed when
/// the lock is let go: no file is left beside the ledger.
///
/// Removing it is safe because whoever takes a lock looks at the ledger
/// again before importing: a process that waited on the removed file (or
/// made a new one) finds the import done, or — after a failed import — the
/// same JSON, which it reads (and refuses) alike.
struct ImportLock {
    path: PathBuf,
    /// Locked: a value exists only once the lock is held.
    file: Option<File>,
}

impl ImportLock {
    fn take(ledger: &Path) -> Result<ImportLock, LedgerError> {
        let path = with_suffix(ledger, ".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| error(ledger, e))?;
        file.lock().map_err(|e| error(ledger, e))?;
        // From here on the file is removed whatever happens (a lock that
        // could not be taken leaves the file to whoever holds it).
        Ok(ImportLock {
            path,
            file: Some(file),
        })
    }
}

impl Drop for ImportLock {
    fn drop(&mut self) {
        // Removed while still held, then let go (closing the file unlocks it).
        let _ = fs::remove_file(&self.path);
        self.file.take();
    }
}

fn write_database(tmp: &Path, ledger: &JsonLedger) -> io::Result<()> {
    let sql = |e: rusqlite::Error| io::Error::other(e);
    let mut conn = Connection::open(tmp).map_err(sql)?;
    // WAL before the file takes the ledger's name: WAL is kept in the
    // file, so the processes that open the imported ledger together find
    // it in WAL already. Switching a rollback-journal file to WAL takes an
    // exclusive lock, and several openers asking at once got "database is
    // locked" without waiting (each holding the shared lock the others
    // need), past any busy timeout.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(io::Error::other(format!(
            "cannot use WAL mode (journal mode is {mode})"
        )));
    }
    conn.execute_batch("PRAGMA synchronous = FULL")
        .map_err(sql)?;
    ensure_schema(&conn).map_err(io::Error::other)?;
    let now = to_ms(SystemTime::now());
    let tx = conn.transaction().map_err(sql)?;
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO claims (id, claimed_at, finished_at, run, kind, effect)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sql)?;
        for (id, entry) in &ledger.operations {
            match entry.as_ref().and_then(Running::of) {
                // A claim still running: a row without a run, with what
                // the claim recorded.
                Some(running) => insert.execute(params![
                    id,
                    running.claimed_at.unwrap_or(now),
                    None::<i64>,
                    None::<String>,
                    running.kind,
                    running.effect
                ]),
                None => {
                    let run = entry.as_ref().map(|v| v.to_string());
                    let finished = run.as_ref().map(|_| now);
                    insert.execute(params![
                        id,
                        now,
                        finished,
                        run,
                        None::<String>,
                        None::<String>
                    ])
                }
            }
            .map_err(sql)?;
        }
    }
    tx.commit().map_err(sql)?;
    conn.close().map_err(|(_, e)| sql(e))
}

/// A JSON ledger's entry for a claim still running, as the `FileLedger`
/// writes one: a run of result `running` with the claim's kind,
/// `may_have_applied` by its effect (`true`: a write; `null`: a read) and
/// `claimed_at_ms`.
struct Running {
    kind: Option<String>,
    effect: Option<&'static str>,
    claimed_at: Option<i64>,
}

impl Running {
    fn of(entry: &serde_json::Value) -> Option<Running> {
        if entry.get("result")?.as_str()? != "running" {
            return None;
        }
        Some(Running {
            kind: entry
                .get("kind")
                .and_then(|k| k.as_str())
                .map(str::to_owned),
            effect: match entry.get("may_have_applied") {
                Some(serde_json::Value::Bool(true)) => Some("write"),
                None | Some(serde_json::Value::Null) => Some("read"),
                Some(_) => None,
            },
            claimed_at: entry
                .get("claimed_at_ms")
                .and_then(serde_json::Value::as_u64)
                .and_then(|ms| i64::try_from(ms).ok()),
        })
    }
}

fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}
