//! Writing to stdout, never silently failing: a reader that went away
//! (`BrokenPipe`, as under `| head -c 10`) ends the writing quietly; any
//! other error (a full disk, an I/O error) is said in one line on stderr.
//! Either way nothing more is written to stdout, and the command still
//! exits with its outcome's code: what happened remotely does not change
//! because the output could not be written.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write failed: later writes are skipped (and not said again).
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Write `bytes` to stdout and flush them.
pub(crate) fn write(bytes: &[u8]) {
    if STOPPED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        STOPPED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("error: the output could not be written to stdout: {e}");
        }
    }
}
