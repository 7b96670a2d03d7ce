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

use serde::{Deserialize, Serialize};

use crate::outcome::PreviousRun;

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The id was free and is now ours.
    Claimed,
    /// The id was claimed before; the earlier run when it has ended.
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
pub trait Ledger: Send + Sync {
    /// Claim `id` atomically.
    fn claim(&self, id: &str) -> Result<Claim, LedgerError>;
    /// Record how the operation with `id` ended.
    fn finish(&self, id: &str, run: PreviousRun) -> Result<(), LedgerError>;
    /// Whether ids the policy generates are claimed and recorded here too
    /// (default: yes). A generated id is unique by construction, so it needs
    /// no claim; a ledger that outlives the process keeps them so that one
    /// copied from an outcome and asked again is found with its earlier run.
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
    entries: Mutex<HashMap<String, Option<PreviousRun>, foldhash::fast::RandomState>>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Ledger for MemoryLedger {
    fn claim(&self, id: &str) -> Result<Claim, LedgerError> {
        let mut e = self.entries.lock().expect("ledger lock poisoned");
        // One lookup: a taken id (rare) pays for its key's copy.
        match e.entry(id.to_owned()) {
            Entry::Occupied(prev) => Ok(Claim::Taken(prev.get().clone())),
            Entry::Vacant(slot) => {
                slot.insert(None);
                Ok(Claim::Claimed)
            }
        }
    }

    fn finish(&self, id: &str, run: PreviousRun) -> Result<(), LedgerError> {
        let mut e = self.entries.lock().expect("ledger lock poisoned");
        match e.get_mut(id) {
            Some(slot) => *slot = Some(run),
            None => {
                e.insert(id.to_string(), Some(run));
            }
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
    operations: BTreeMap<String, Option<PreviousRun>>,
}

/// Claims in a JSON file shared by processes.
///
/// Every change takes an exclusive lock on `<file>.lock`, reads the file,
/// writes the new content to a temporary file beside it and renames it over
/// the ledger.
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

    fn with_lock<R>(&self, f: impl FnOnce(&mut LedgerFile) -> (bool, R)) -> Result<R, LedgerError> {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.err(e))?;
        lock.lock().map_err(|e| self.err(e))?;
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

impl Ledger for FileLedger {
    fn claim(&self, id: &str) -> Result<Claim, LedgerError> {
        self.with_lock(|data| match data.operations.get(id) {
            Some(prev) => (false, Claim::Taken(prev.clone())),
            None => {
                data.operations.insert(id.to_string(), None);
                (true, Claim::Claimed)
            }
        })
    }

    fn finish(&self, id: &str, run: PreviousRun) -> Result<(), LedgerError> {
        self.with_lock(|data| {
            data.operations.insert(id.to_string(), Some(run.clone()));
            (true, ())
        })
    }
}
