//! Operation ids and the ledger that claims them.
//!
//! An id is claimed atomically when its operation starts; asking again for a
//! claimed id — finished or still running — is rejected without calling the
//! operation. [`MemoryLedger`] serves one process; [`FileLedger`] shares the
//! claims between processes through a file under an exclusive lock, written
//! to a temporary file and renamed, so a writer killed mid-write leaves the
//! previous ledger intact.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::class::Effect;
use crate::outcome::PreviousRun;

/// The least time the policy gives a ledger's finish, even when the
/// operation's deadline has passed (or is closer than this): 250 ms. An
/// outcome that took the whole deadline is still recorded when the store
/// answers within this; one that cannot be is `recorded: false` at most
/// this long after the deadline.
pub const FINISH_FLOOR: Duration = Duration::from_millis(250);

/// What a claim asks of a [`Ledger`]: the operation's id and effect, and
/// what remains of the operation's deadline, which bounds the whole claim
/// (connecting, waiting on locks). What the operation is (its kind, its
/// remote without user info, the refs it names) is given too, for a store
/// that keeps a record of what ran; a store may ignore it.
///
/// Built with [`ClaimRequest::new`]: fields may be added (a minor change),
/// so it is never built as a literal outside this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimRequest<'a> {
    /// The operation id to claim.
    pub id: &'a str,
    /// Read or write.
    pub effect: Effect,
    /// What remains of the operation's deadline: the claim's bound.
    pub left: Duration,
    /// The operation's kind (`ls-refs`, `fetch`, `push`, …), when known.
    pub kind: Option<&'a str>,
    /// The remote, without user info, when known.
    pub remote: Option<&'a str>,
    /// The refs the operation names, when known: ls-refs its prefixes
    /// (none: every ref), fetch its refspecs, push one `[+]<new>:<dst>`
    /// per ref (`:<dst>` deletes).
    pub refs: Option<&'a [String]>,
    /// The host the claim is made on (see [`this_host`]), when given: a
    /// store keeps it so that a run whose process died can be found.
    pub host: Option<&'a str>,
    /// The process id making the claim, when given.
    pub pid: Option<u32>,
}

impl<'a> ClaimRequest<'a> {
    /// A claim of `id` for an operation of `effect`, within `left`.
    pub const fn new(id: &'a str, effect: Effect, left: Duration) -> Self {
        ClaimRequest {
            id,
            effect,
            left,
            kind: None,
            remote: None,
            refs: None,
            host: None,
            pid: None,
        }
    }

    /// With what the operation is: its kind and its remote (without user
    /// info).
    pub const fn operation(mut self, kind: &'a str, remote: &'a str) -> Self {
        self.kind = Some(kind);
        self.remote = Some(remote);
        self
    }

    /// With the refs the operation names (see the field).
    pub const fn refs(mut self, refs: &'a [String]) -> Self {
        self.refs = Some(refs);
        self
    }

    /// With the host and process that claim (the policy gives
    /// [`this_host`] and [`std::process::id`]).
    pub const fn origin(mut self, host: Option<&'a str>, pid: u32) -> Self {
        self.host = host;
        self.pid = Some(pid);
        self
    }

    /// The operation's deadline as a store records it: what remains of it
    /// at the claim (`left`). A claim without a finish is abandoned once
    /// this plus [`FINISH_FLOOR`] has passed since it was made.
    pub const fn deadline(&self) -> Duration {
        self.left
    }
}

/// What a progress call asks of a [`Ledger`]: record that the run of `id`
/// is about to take the step that completes `phase` (a push's pack, a forge
/// write's request), within `left`. Best effort: a failure is logged by
/// the policy and never stops the operation.
///
/// Built with [`ProgressRequest::new`] (fields may be added).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProgressRequest<'a> {
    /// The operation id (claimed by this run).
    pub id: &'a str,
    /// The phase the run is entering.
    pub phase: &'a str,
    /// The bound of the whole call.
    pub left: Duration,
}

impl<'a> ProgressRequest<'a> {
    /// Record that `id` is entering `phase`, within `left`.
    pub const fn new(id: &'a str, phase: &'a str, left: Duration) -> Self {
        ProgressRequest { id, phase, left }
    }
}

/// This machine's host name as a claim records it (the kernel's node
/// name), or `None` when it cannot be read. Read once per process.
pub fn this_host() -> Option<&'static str> {
    static HOST: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let name = rustix::system::uname();
        let name = name.nodename().to_string_lossy().trim().to_owned();
        (!name.is_empty()).then_some(name)
    })
    .as_deref()
}

/// What a finish asks of a [`Ledger`]: record `run` as how the operation
/// with `id` ended, within `left` (what remains of the operation's
/// deadline, at least [`FINISH_FLOOR`] when the policy asks).
///
/// Built with [`FinishRequest::new`] (fields may be added).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct FinishRequest<'a> {
    /// The operation id.
    pub id: &'a str,
    /// Read or write.
    pub effect: Effect,
    /// The bound of the whole call.
    pub left: Duration,
    /// How the operation ended.
    pub run: &'a PreviousRun,
    /// The operation's kind, when known.
    pub kind: Option<&'a str>,
    /// The remote, without user info, when known.
    pub remote: Option<&'a str>,
    /// The refs the operation names, when known (as
    /// [`ClaimRequest::refs`]); a store keeps those of the claim when it
    /// has them, these only for an id it never saw claimed (a generated
    /// one).
    pub refs: Option<&'a [String]>,
}

impl<'a> FinishRequest<'a> {
    /// Record `run` for `id` (an operation of `effect`), within `left`.
    pub const fn new(id: &'a str, effect: Effect, run: &'a PreviousRun, left: Duration) -> Self {
        FinishRequest {
            id,
            effect,
            left,
            run,
            kind: None,
            remote: None,
            refs: None,
        }
    }

    /// With what the operation is: its kind and its remote (without user
    /// info).
    pub const fn operation(mut self, kind: &'a str, remote: &'a str) -> Self {
        self.kind = Some(kind);
        self.remote = Some(remote);
        self
    }

    /// With the refs the operation names (see the field).
    pub const fn refs(mut self, refs: &'a [String]) -> Self {
        self.refs = Some(refs);
        self
    }
}

/// The answer to a claim.
///
/// Closed: an id is free or taken; there is no third answer (a store that
/// cannot tell answers an error), so it is not `#[non_exhaustive]`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a taken id must not run: a Claim says whether the operation may start"]
pub enum Claim {
    /// The id was free and is now ours.
    Claimed,
    /// The id was claimed before: the earlier run, as far as the store
    /// knows it. One that has not finished is
    /// [`PreviousRun::running`] (its result
    /// [`PreviousResult::Running`](crate::PreviousResult::Running)) with
    /// the kind and effect its claim recorded. The stores of this
    /// workspace always answer `Some`; `None` (a store that keeps nothing
    /// of a claim) is read by the policy as running, of this call's effect.
    Taken(Option<PreviousRun>),
}

/// A ledger failed to read or write its store.
#[derive(Debug, thiserror::Error)]
#[error("ledger {path}: {source}")]
pub struct LedgerError {
    /// The ledger file.
    pub path: String,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

/// Where operation ids are claimed.
///
/// Both calls are bounded by the request's `left`: a store that can wait
/// (for a lock, a database) waits no longer, and answers an error when it
/// could not finish in that time (a claim's error ends the operation
/// `local-error`, nothing run; a finish's is tried again while the
/// operation's budget lasts, then `recorded: false`).
pub trait Ledger: Send + Sync {
    /// Claim `req.id` atomically, within `req.left`.
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError>;
    /// Record how the operation with `req.id` ended, within `req.left`.
    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError>;
    /// Record that the run of `req.id` (claimed by this process) is about
    /// to take the step that completes `req.phase`, within `req.left`: an
    /// abandoned run's entry shows the furthest phase it reached. Best
    /// effort: the policy logs a failure and goes on. An id the store
    /// never saw claimed, or one already finished, is left as it is.
    /// Default: nothing is recorded.
    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        let _ = req;
        Ok(())
    }
    /// Whether the outcomes of writes under ids the policy generates are
    /// recorded here too (default: yes). A generated id is unique by
    /// construction, so it needs no claim; a ledger that outlives the
    /// process keeps a write's so that one copied from an outcome and asked
    /// again is found with its earlier run. A read under a generated id is
    /// never written to any ledger: one id names one logical operation, and
    /// nobody can need the record of a read under an id nobody was given
    /// beforehand (copied back, such an id runs the read again).
    fn keeps_generated_ids(&self) -> bool {
        true
    }
}

/// Claims in memory, for one process.
///
/// The map hashes with foldhash (seeded per process): a claim is on every
/// call with a caller's id, and SipHash was a fifth of its cost.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    entries: Mutex<HashMap<String, Slot, foldhash::fast::RandomState>>,
}

/// One id in a [`MemoryLedger`].
#[derive(Debug)]
enum Slot {
    /// Claimed, not finished: what the claim said, and when; the phase
    /// its run recorded last.
    Running {
        kind: Option<Box<str>>,
        effect: Effect,
        at: Instant,
        deadline: Duration,
        phase: Option<Box<str>>,
    },
    /// Finished.
    Ended(PreviousRun),
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Ledger for MemoryLedger {
    /// Never waits but for its mutex: `left` is not needed.
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        let id = req.id;
        let mut e = self.entries.lock().expect("ledger lock poisoned");
        // One lookup: a taken id (rare) pays for its key's copy.
        match e.entry(id.to_owned()) {
            Entry::Occupied(prev) => Ok(Claim::Taken(Some(match prev.get() {
                Slot::Running {
                    kind,
                    effect,
                    at,
                    deadline,
                    phase,
                } => PreviousRun::running(
                    kind.as_deref().map(str::to_owned),
                    Some(*effect),
                    at.elapsed(),
                )
                // One process: the host and pid are this process's.
                .claimed_by(
                    Some(*deadline),
                    this_host().map(str::to_owned),
                    Some(std::process::id()),
                )
                .at_phase(phase.as_deref().map(str::to_owned))
                .judged_at(at.elapsed()),
                Slot::Ended(run) => run.clone(),
            }))),
            Entry::Vacant(slot) => {
                slot.insert(Slot::Running {
                    kind: req.kind.map(Box::from),
                    effect: req.effect,
                    at: Instant::now(),
                    deadline: req.deadline(),
                    phase: None,
                });
                Ok(Claim::Claimed)
            }
        }
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        let (id, run) = (req.id, req.run.clone());
        let mut e = self.entries.lock().expect("ledger lock poisoned");
        match e.get_mut(id) {
            Some(slot) => *slot = Slot::Ended(run),
            None => {
                e.insert(id.to_string(), Slot::Ended(run));
            }
        }
        Ok(())
    }

    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        let mut e = self.entries.lock().expect("ledger lock poisoned");
        if let Some(Slot::Running { phase, .. }) = e.get_mut(req.id) {
            *phase = Some(Box::from(req.phase));
        }
        Ok(())
    }

    /// No: an in-process ledger would grow by every generated id for the
    /// life of the process. The policy knows its own ids (a prefix and a
    /// counter) and rejects one passed back to it, without the earlier
    /// run's summary.
    fn keeps_generated_ids(&self) -> bool {
        false
    }
}

#[derive(Serialize, Deserialize, Default)]
struct LedgerFile {
    operations: BTreeMap<String, Option<FileEntry>>,
}

/// One id in a [`FileLedger`]'s file: its run once it has ended; while it
/// runs, a run of result `running` saying what its claim knew (kind,
/// `may_have_applied` by its effect, no attempts) and when it was claimed.
/// `null` is a claim written before the file kept that: running, nothing
/// known of it. (A process of an earlier version reads a running entry as
/// the earlier run it is, the extra field ignored.)
#[derive(Serialize, Deserialize)]
struct FileEntry {
    #[serde(flatten)]
    run: PreviousRun,
    /// When the claim of a run still running was made (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    claimed_at_ms: Option<u64>,
    /// The operation's deadline as its claim recorded it (ms from the
    /// claim); absent in an entry written before the file kept it (such a
    /// run reads as running, never abandoned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deadline_ms: Option<u64>,
}

impl FileEntry {
    /// The earlier run as a claim answers it: a running one's elapsed time
    /// is how long ago it was claimed.
    fn previous(entry: Option<&FileEntry>) -> PreviousRun {
        match entry {
            None => PreviousRun::running(None, None, Duration::ZERO),
            Some(e) => {
                let mut run = e.run.clone();
                run.deadline_ms = e.deadline_ms;
                if let Some(at) = e.claimed_at_ms {
                    run.elapsed_ms = unix_ms().saturating_sub(at);
                    // Judged by the reader's clock.
                    let elapsed = Duration::from_millis(run.elapsed_ms);
                    run = run.judged_at(elapsed);
                }
                run
            }
        }
    }
}

/// The wall clock in Unix milliseconds (0 before the epoch).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Claims in a JSON file shared by processes.
///
/// Every change takes an exclusive lock on `<file>.lock` (waiting for
/// another process's at most the request's `left`), reads the file,
/// writes the new content to a temporary file beside it and renames it over
/// the ledger.
///
/// The file is `{"operations": {"<id>": <run>}}`: an id's run once it has
/// ended; while it runs, a run of result `running` carrying the claim's
/// kind, `may_have_applied` by its effect and `claimed_at_ms`, so that
/// another process asking for the id learns what it is. A `null` (written
/// by an earlier version) reads as running, nothing known of it.
#[derive(Debug, Clone)]
pub struct FileLedger {
    path: PathBuf,
}

impl FileLedger {
    /// A ledger stored at `path` (created on first claim).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileLedger { path: path.into() }
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: io::Error) -> LedgerError {
        LedgerError {
            path: self.path.display().to_string(),
            source,
        }
    }

    fn with_lock<R>(
        &self,
        left: Duration,
        f: impl FnOnce(&mut LedgerFile) -> (bool, R),
    ) -> Result<R, LedgerError> {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.err(e))?;
        lock_within(&lock, left).map_err(|e| self.err(e))?;
        let mut data = match File::open(&self.path) {
            Ok(mut file) => {
                let mut text = String::new();
                file.read_to_string(&mut text).map_err(|e| self.err(e))?;
                if text.trim().is_empty() {
                    LedgerFile::default()
                } else {
                    serde_json::from_str(&text)
                        .map_err(|e| self.err(io::Error::new(io::ErrorKind::InvalidData, e)))?
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => LedgerFile::default(),
            Err(e) => return Err(self.err(e)),
        };
        let (changed, r) = f(&mut data);
        if changed {
            let text =
                serde_json::to_vec_pretty(&data).map_err(|e| self.err(io::Error::other(e)))?;
            let mut tmp = self.path.clone().into_os_string();
            tmp.push(format!(".tmp.{}", std::process::id()));
            let tmp = PathBuf::from(tmp);
            {
                let mut file = File::create(&tmp).map_err(|e| self.err(e))?;
                file.write_all(&text).map_err(|e| self.err(e))?;
                file.sync_all().map_err(|e| self.err(e))?;
            }
            std::fs::rename(&tmp, &self.path).map_err(|e| self.err(e))?;
        }
        drop(lock);
        Ok(r)
    }
}

/// The longest pause between two tries of a lock another process holds.
const LOCK_POLL: Duration = Duration::from_millis(5);

/// Take `file`'s exclusive lock, waiting at most `left` for another
/// holder: a `WouldBlock` error naming the bound when it is not free by
/// then. (The platform's blocking lock cannot be given a bound, so the
/// lock is tried every few milliseconds.)
fn lock_within(file: &File, left: Duration) -> io::Result<()> {
    let until = Instant::now() + left;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
            Err(std::fs::TryLockError::WouldBlock) => {
                let now = Instant::now();
                if now >= until {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        format!("another process held the lock for {left:?}"),
                    ));
                }
                std::thread::sleep(LOCK_POLL.min(until - now));
            }
        }
    }
}

impl Ledger for FileLedger {
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        let id = req.id;
        self.with_lock(req.left, |data| match data.operations.get(id) {
            Some(prev) => (
                false,
                Claim::Taken(Some(FileEntry::previous(prev.as_ref()))),
            ),
            None => {
                let run = PreviousRun::running(
                    req.kind.map(str::to_owned),
                    Some(req.effect),
                    Duration::ZERO,
                )
                .claimed_by(None, req.host.map(str::to_owned), req.pid);
                let entry = FileEntry {
                    run,
                    claimed_at_ms: Some(unix_ms()),
                    deadline_ms: Some(
                        u64::try_from(req.deadline().as_millis()).unwrap_or(u64::MAX),
                    ),
                };
                data.operations.insert(id.to_string(), Some(entry));
                (true, Claim::Claimed)
            }
        })
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        self.with_lock(req.left, |data| {
            // The claim's host and pid stay with the run.
            let mut run = req.run.clone();
            if let Some(Some(claimed)) = data.operations.get(req.id) {
                run.host = run.host.take().or_else(|| claimed.run.host.clone());
                run.pid = run.pid.or(claimed.run.pid);
            }
            let entry = FileEntry {
                run,
                claimed_at_ms: None,
                deadline_ms: None,
            };
            data.operations.insert(req.id.to_string(), Some(entry));
            (true, ())
        })
    }

    /// Rewrites the file under its lock: the phase of a run still running.
    fn progress(&self, req: &ProgressRequest<'_>) -> Result<(), LedgerError> {
        self.with_lock(req.left, |data| match data.operations.get_mut(req.id) {
            Some(Some(e)) if e.run.result == crate::outcome::PreviousResult::Running => {
                e.run.phase = Some(req.phase.to_owned());
                (true, ())
            }
            _ => (false, ()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_ledger_waits_for_a_held_lock_at_most_the_time_left() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ledger.json");
        let ledger = FileLedger::new(&path);
        // Another holder of the lock (a separate open file: flock locks
        // are per open file, so it conflicts within one process too).
        let holder = File::create(dir.path().join("ledger.json.lock")).expect("lock file");
        holder.lock().expect("held");
        let left = Duration::from_millis(300);
        let started = Instant::now();
        let e = ledger
            .claim(&ClaimRequest::new("x", Effect::Write, left))
            .expect_err("the lock is held");
        let took = started.elapsed();
        assert!(took >= left && took < left * 4, "took {took:?}");
        assert_eq!(e.source.kind(), io::ErrorKind::WouldBlock, "{e}");
        holder.unlock().expect("released");
        assert_eq!(
            ledger
                .claim(&ClaimRequest::new("x", Effect::Write, left))
                .expect("free now"),
            Claim::Claimed
        );
    }
}
