//! Maintenance: a repository fetched into for months stays as small and
//! fast as on its first day. Each fetch stores a pack; once more than
//! `gc.autoPackLimit` packs (default 50) are counted as git counts them
//! (those without a `.keep`), the small ones are rolled up into one by
//! git's geometric split with factor 2 (as `git repack --geometric=2`; the
//! large base pack left alone), in-process through gix-pack: every object
//! of every pack taken is copied, none dropped.
//!
//! * `select` — the packs on disk and the geometric split;
//! * `lock` — `gc.pid`, one consolidation at a time per repository, shared
//!   with `git gc`;
//! * `consolidate` — the new pack and its index written, the old packs
//!   removed;
//! * `error` — [`MaintenanceError`].
//!
//! It runs at the end of a fetch call that stored a pack, after the outcome
//! and the ledger's finish are fixed, outside every attempt and the
//! deadline; a failure is logged and left for the next fetch, and never
//! changes the fetch's outcome. [`maintain`] runs it for callers who
//! schedule it themselves (with [`crate::FetchOptions::maintenance`] off).
//! This module reads only gix and its own files (a leaf below `fetch` and
//! `push`).

mod consolidate;
mod error;
mod lock;
mod select;

pub use error::MaintenanceError;

use std::time::Instant;

/// Whether a fetch runs [`maintain`] after it stored a pack
/// ([`crate::FetchOptions::maintenance`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfterFetch {
    /// As the repository's configuration says (git's `gc --auto` rules:
    /// `gc.autoPackLimit`, `gc.auto`, `maintenance.auto`).
    #[default]
    Auto,
    /// Never after this call (a caller who schedules [`maintain`] itself).
    Off,
}

/// What [`maintain`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Maintained {
    /// Turned off by the configuration: `gc.auto=0`, `gc.autoPackLimit=0`
    /// or `maintenance.auto=false`, as in git.
    Off,
    /// No more packs than `limit` (`gc.autoPackLimit`), or the packs
    /// already form a geometric progression.
    NotNeeded {
        /// Packs counted (those without a `.keep`).
        packs: usize,
        /// `gc.autoPackLimit`.
        limit: usize,
    },
    /// Another process holds `$GIT_DIR/gc.pid` (a `git gc`, another
    /// consolidation): skipped, never waited for.
    Busy {
        /// What holds it: `gc.pid`'s words (`<pid> <host>`), or
        /// `gc.pid.lock`.
        holder: String,
    },
    /// Packs rolled up into one.
    Consolidated {
        /// Packs taken (and removed).
        taken: usize,
        /// Objects in the new pack.
        objects: u64,
        /// Packs counted after it.
        packs: usize,
    },
}

impl Maintained {
    /// The `result` label of the maintenance metrics: `off`, `not-needed`,
    /// `skipped` or `consolidated` (a failure is `failed`).
    pub fn result(&self) -> &'static str {
        match self {
            Maintained::Off => "off",
            Maintained::NotNeeded { .. } => "not-needed",
            Maintained::Busy { .. } => "skipped",
            Maintained::Consolidated { .. } => "consolidated",
        }
    }
}

/// Consolidate `repo`'s packs when git's `gc --auto` rules ask for it:
/// more than `gc.autoPackLimit` (default 50) packs without a `.keep`, and
/// neither `gc.auto=0`, `gc.autoPackLimit=0` nor `maintenance.auto=false`.
/// The packs git's geometric split (factor 2) leaves out of its
/// progression are rolled up into one; a pack with a `.keep`, `.promisor`
/// or `.mtimes` is never taken.
///
/// One at a time per repository through `$GIT_DIR/gc.pid`, in git's own
/// format, so `git gc` and this exclude each other; when another process
/// holds it, [`Maintained::Busy`] at once. Works on a view of `repo`
/// opened now; a handle kept open reads through it (gix looks again on
/// disk for an object whose pack is gone; see [`crate::fresh_view`]).
///
/// Records `sluice_remote_maintenance_seconds{result}` and
/// `sluice_remote_maintenance_total{result}`, and logs one `info` event
/// when packs were consolidated or the lock was held.
pub fn maintain(repo: &gix::Repository) -> Result<Maintained, MaintenanceError> {
    let span = tracing::info_span!("maintenance", git_dir = %repo.git_dir().display());
    let _entered = span.enter();
    let t0 = Instant::now();
    let result = run(repo);
    let label = match &result {
        Ok(m) => m.result(),
        Err(_) => "failed",
    };
    let elapsed = t0.elapsed();
    sluice_policy::metric::maintenance(label, elapsed);
    let ms = elapsed.as_millis() as u64;
    match &result {
        Ok(Maintained::Consolidated {
            taken,
            objects,
            packs,
        }) => tracing::info!(
            result = label,
            taken,
            objects,
            packs,
            elapsed_ms = ms,
            "consolidated packs"
        ),
        Ok(Maintained::Busy { holder }) => tracing::info!(
            result = label,
            holder = %holder,
            "maintenance skipped: gc.pid is held"
        ),
        Ok(other) => tracing::debug!(result = label, ?other, "no maintenance"),
        Err(e) => tracing::debug!(result = label, error = %e, "maintenance failed"),
    }
    result
}

/// [`maintain`] at the end of a fetch call: a failure is logged at warn and
/// left for the next fetch.
pub(crate) fn after_fetch(repo: &gix::Repository) {
    if let Err(e) = maintain(repo) {
        tracing::warn!(
            error = %sluice_policy::text::error_chain(&e),
            git_dir = %repo.git_dir().display(),
            "maintenance failed; left for the next fetch"
        );
    }
}

fn run(repo: &gix::Repository) -> Result<Maintained, MaintenanceError> {
    let view = gix::open_opts(repo.git_dir(), repo.open_options().clone()).map_err(|e| {
        MaintenanceError::Open {
            path: repo.git_dir().to_path_buf(),
            detail: sluice_policy::text::error_chain(&e),
        }
    })?;
    if view.git_dir_trust() != gix::sec::Trust::Full {
        return Err(MaintenanceError::Untrusted {
            path: view.git_dir().to_path_buf(),
        });
    }
    let Some(limit) = pack_limit(&view) else {
        return Ok(Maintained::Off);
    };
    let pack_dir = view.objects.store_ref().path().join("pack");
    let listed = list(&pack_dir)?;
    let packs = select::counted(&listed);
    if packs <= limit {
        return Ok(Maintained::NotNeeded { packs, limit });
    }
    let _held = match lock::take(view.git_dir()).map_err(|source| MaintenanceError::Io {
        what: format!("taking {}", view.git_dir().join("gc.pid").display()),
        source,
    })? {
        lock::Taken::Held(held) => held,
        lock::Taken::Busy(holder) => return Ok(Maintained::Busy { holder }),
    };
    // Listed again under the lock: another process may have consolidated
    // between the first listing and the lock.
    let listed = list(&pack_dir)?;
    let packs = select::counted(&listed);
    if packs <= limit {
        return Ok(Maintained::NotNeeded { packs, limit });
    }
    let taken = select::geometric(&listed);
    if taken.is_empty() {
        return Ok(Maintained::NotNeeded { packs, limit });
    }
    // A view opened after the listing: it knows every pack taken.
    let view = gix::open_opts(view.git_dir(), view.open_options().clone()).map_err(|e| {
        MaintenanceError::Open {
            path: repo.git_dir().to_path_buf(),
            detail: sluice_policy::text::error_chain(&e),
        }
    })?;
    let rolled = consolidate::roll_up(&view, &taken, threads(&view))?;
    tracing::debug!(index = ?rolled.index, "the consolidated pack is in place");
    let packs = select::counted(&list(&pack_dir)?);
    Ok(Maintained::Consolidated {
        taken: taken.len(),
        objects: rolled.objects,
        packs,
    })
}

fn list(dir: &std::path::Path) -> Result<Vec<select::Pack>, MaintenanceError> {
    select::list(dir).map_err(|source| MaintenanceError::Io {
        what: format!("listing {}", dir.display()),
        source,
    })
}

/// `gc.autoPackLimit` when maintenance is on (git's rules: `gc.auto` ≤ 0,
/// `gc.autoPackLimit` ≤ 0 or `maintenance.auto=false` turn it off).
fn pack_limit(repo: &gix::Repository) -> Option<usize> {
    let config = repo.config_snapshot();
    if config.boolean("maintenance.auto") == Some(false) {
        return None;
    }
    if config.integer("gc.auto").is_some_and(|n| n <= 0) {
        return None;
    }
    match config.integer("gc.autoPackLimit") {
        Some(n) if n <= 0 => None,
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => Some(50),
    }
}

/// Threads for writing and indexing: `pack.threads` when set (0 meaning
/// every core), else every core; at most 8.
fn threads(repo: &gix::Repository) -> usize {
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = match repo.config_snapshot().integer("pack.threads") {
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(1),
        _ => cores(),
    };
    n.clamp(1, 8)
}
