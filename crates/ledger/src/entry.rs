//! What both stores share: one id's row as `ledger show` and `ledger list`
//! print it, the retention and pruning figures, the conversion of times to
//! the Unix milliseconds both schemas keep, and the one way a store's
//! failure becomes a [`LedgerError`] naming the ledger.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};
use sluice_policy::{Effect, LedgerError, PreviousRun};

/// How long ids are kept by default: 7 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How many rows one pruning transaction deletes at most (PostgreSQL).
pub const PRUNE_BATCH: u32 = 500;

/// How often a ledger value prunes by itself from `claim`, at most: one
/// batch of [`PRUNE_BATCH`] expired rows (PostgreSQL) or one slice of
/// [`SQLITE_PRUNE_SLICE`](crate::SQLITE_PRUNE_SLICE) rows (SQLite).
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// One id's row, as `ledger show` and `ledger list` print it.
///
/// Times serialize as RFC 3339 strings in UTC with milliseconds; the
/// fields in the order of the design's `<entry>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LedgerEntry {
    /// The operation id.
    pub id: String,
    /// When it was claimed (or imported).
    #[serde(serialize_with = "rfc3339")]
    pub claimed_at: SystemTime,
    /// When its run was recorded; `None` while it is running (or its
    /// process died).
    #[serde(serialize_with = "rfc3339_opt")]
    pub finished_at: Option<SystemTime>,
    /// Finished, running, or abandoned (judged when the row was read).
    pub state: EntryState,
    /// What ran: the operation's kind (`ls-refs`, `fetch`, `push`, …);
    /// `None` in a row written before the ledger kept it.
    pub kind: Option<String>,
    /// The remote it ran against, without user info; `None` as `kind`.
    pub remote: Option<String>,
    /// The refs it named (ls-refs: its prefixes, none meaning every ref;
    /// fetch: its refspecs; push: `[+]<new>:<dst>` per ref, `:<dst>`
    /// deleting); `None` when the caller gave none to the ledger (a forge
    /// call) or the row is older than the ledger's record of them.
    pub refs: Option<Vec<String>>,
    /// The operation's deadline as its claim recorded it (ms from the
    /// claim); `None` in a row older than that record (or not claimed).
    pub deadline_ms: Option<u64>,
    /// The furthest phase its run recorded before taking it (`pack-sent`,
    /// `request-sent`); `None` when it recorded none.
    pub phase: Option<String>,
    /// The host its claim was made on, when recorded.
    pub host: Option<String>,
    /// The process id that claimed it, when recorded.
    pub pid: Option<u32>,
    /// How it ended; `None` while it is running (or was abandoned).
    pub run: Option<PreviousRun>,
}

/// Where an id's run stands, as a ledger entry shows it.
///
/// Closed: a row has a run (finished) or not, and one without is judged by
/// its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryState {
    /// Its run was recorded.
    Finished,
    /// Not finished, and its deadline (plus the finish's floor) has not
    /// passed, or the row does not record a deadline.
    Running,
    /// Not finished, and its deadline plus the finish's floor has passed:
    /// its process died without a finish.
    Abandoned,
}

impl EntryState {
    /// The kebab-case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryState::Finished => "finished",
            EntryState::Running => "running",
            EntryState::Abandoned => "abandoned",
        }
    }

    /// The state of a row with (or without) a run, claimed `since` ago
    /// with the deadline it recorded (`None`: not recorded, never
    /// abandoned).
    pub(crate) fn judge(finished: bool, since: Duration, deadline_ms: Option<u64>) -> EntryState {
        match deadline_ms {
            _ if finished => EntryState::Finished,
            Some(d) if since > Duration::from_millis(d) + sluice_policy::FINISH_FLOOR => {
                EntryState::Abandoned
            }
            _ => EntryState::Running,
        }
    }
}

/// What a claim records of its run beside what ran: its deadline (ms
/// from the claim), host and pid.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) deadline_ms: Option<i64>,
    pub(crate) host: Option<String>,
    pub(crate) pid: Option<i64>,
}

impl Origin {
    pub(crate) fn of(req: &sluice_policy::ClaimRequest<'_>) -> Origin {
        Origin {
            deadline_ms: Some(i64::try_from(req.deadline().as_millis()).unwrap_or(i64::MAX)),
            host: req.host.map(str::to_owned),
            pid: req.pid.map(i64::from),
        }
    }
}

/// The earlier run a claim answers for a row without a run: running or
/// abandoned, judged at `since` (the claim's age by the store's clock).
pub(crate) fn unfinished(
    kind: Option<String>,
    effect: Option<Effect>,
    since: Duration,
    deadline_ms: Option<i64>,
    host: Option<String>,
    pid: Option<i64>,
    phase: Option<String>,
) -> PreviousRun {
    let run = PreviousRun::running(kind, effect, since)
        .claimed_by(
            deadline_ms.map(|d| Duration::from_millis(d.max(0) as u64)),
            host,
            pid.and_then(|p| u32::try_from(p).ok()),
        )
        .at_phase(phase);
    match EntryState::judge(false, since, run.deadline_ms) {
        EntryState::Abandoned => run.abandon(),
        _ => run,
    }
}

/// Whether `spec` names a PostgreSQL database (`postgres://` or
/// `postgresql://`) rather than a file. (Known whatever the features: a
/// build without `postgres` refuses such a spec rather than taking it for
/// a file name.)
pub fn is_postgres_url(spec: &str) -> bool {
    let lower = spec.get(..13).unwrap_or(spec).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// What an operation is, as a store writes it beside its id: kind, remote,
/// the refs as JSON text (an array of strings) and the effect (`read` or
/// `write`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct What {
    pub(crate) kind: Option<String>,
    pub(crate) remote: Option<String>,
    pub(crate) refs: Option<String>,
    pub(crate) effect: Option<&'static str>,
}

impl What {
    /// From what a claim or a finish carries; the remote is stripped of
    /// any user info it still has (the policy gives it without).
    pub(crate) fn of(kind: Option<&str>, remote: Option<&str>, refs: Option<&[String]>) -> What {
        What {
            kind: kind.map(str::to_owned),
            remote: remote.map(sluice_policy::text::redact),
            refs: refs.map(|r| serde_json::to_string(r).expect("a list of strings serializes")),
            effect: None,
        }
    }

    /// With the operation's effect.
    pub(crate) fn effect(mut self, effect: Effect) -> What {
        self.effect = Some(effect.as_str());
        self
    }

    /// The refs column read back: `None` for NULL or text that is not a
    /// list of strings (never an error: the record of what ran is a
    /// courtesy, the run is what counts).
    pub(crate) fn parse_refs(text: Option<&str>) -> Option<Vec<String>> {
        text.and_then(|t| serde_json::from_str(t).ok())
    }
}

/// The effect column read back (`read` or `write`); `None` for NULL (a
/// row claimed before the store kept it) or anything else.
pub(crate) fn parse_effect(text: &str) -> Option<Effect> {
    match text {
        "read" => Some(Effect::Read),
        "write" => Some(Effect::Write),
        _ => None,
    }
}

fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*t))
}

fn rfc3339_opt<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => rfc3339(t, s),
        None => s.serialize_none(),
    }
}

/// A failure of the ledger at `path` (a file), its cause kept as the
/// source: an [`io::Error`] as it is, anything else wrapped.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn error(
    path: &Path,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> LedgerError {
    let e = e.into();
    let source = match e.downcast::<io::Error>() {
        Ok(io) => *io,
        Err(other) => io::Error::other(other),
    };
    LedgerError {
        path: path.display().to_string(),
        source,
    }
}

/// Unix milliseconds (0 before the epoch).
pub(crate) fn to_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}
