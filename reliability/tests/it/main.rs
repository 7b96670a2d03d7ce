//! The reliability package's tests in one binary (one link of gix's weight
//! instead of one per file), each file a module. Two groups stay binaries
//! of their own for the process state they need: `hostile.rs` measures the
//! process's peak resident size (nothing else may run in it), and
//! `service_soak.rs` sets the process's `GIT_SSH_COMMAND`.

use std::sync::{Mutex, MutexGuard};

mod fleet_soak;
mod forge_soak;
mod ledger;
mod properties;
mod regressions;
mod settling;
mod soak;
mod storm;

/// Held by each soak and the storm while it runs: their bounds (deadlines
/// plus a margin, the storm's retry windows) are measured on a machine
/// they have to themselves, as when each was a process run alone; the
/// small tests still run beside them.
static ALONE: Mutex<()> = Mutex::new(());

/// Waits until no other soak or storm runs (a panic in one that held the
/// lock does not stop the others).
fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}
