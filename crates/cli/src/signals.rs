//! SIGINT and SIGTERM (what a service manager sends), in three levels: the
//! first cancels the operation (a write whose request was complete is
//! still settled by reading), the second stops it (the settling and any
//! read in flight end at once; the outcome as it stands is printed and the
//! ledger's finish written, bounded by the finish's floor), the third exits
//! at once. After the outcome was printed and recorded, the process dies by
//! the first signal it got ([`die_if_signalled`]), so that a shell loop
//! around it stops, as with git: the parent sees 130 for SIGINT, 143 for
//! SIGTERM.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use sluice_policy::CancelFlag;

/// The first signal received (0: none).
static FIRST: AtomicI32 = AtomicI32::new(0);

/// What the first signal says on stderr.
pub(crate) const FIRST_WORDS: &str = "interrupted: stopping; a write whose request was complete is settled by reading (Ctrl-C again stops that too)";

/// What the second says.
const SECOND_WORDS: &str =
    "interrupted again: stopping now with the outcome as it stands (Ctrl-C again exits at once)";

/// The cancel flag the signals raise; the first call starts the thread
/// that waits for them (commands that run no operation never do, and keep
/// the signals' default actions).
pub(crate) fn cancel_flag() -> &'static CancelFlag {
    static FLAG: OnceLock<CancelFlag> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = CancelFlag::new();
        let raised = flag.clone();
        match Signals::new([SIGINT, SIGTERM]) {
            Ok(mut signals) => {
                let started = std::thread::Builder::new()
                    .name("sluice-signals".into())
                    .spawn(move || {
                        let mut count = 0u32;
                        for signal in signals.forever() {
                            count += 1;
                            let _ = FIRST.compare_exchange(
                                0,
                                signal,
                                Ordering::SeqCst,
                                Ordering::SeqCst,
                            );
                            match count {
                                1 => {
                                    eprintln!("{FIRST_WORDS}");
                                    raised.cancel();
                                }
                                2 => {
                                    eprintln!("{SECOND_WORDS}");
                                    raised.stop();
                                }
                                _ => die_by(signal),
                            }
                        }
                    });
                if let Err(e) = started {
                    tracing::warn!(error = %e, "cannot wait for signals: SIGINT and SIGTERM end the process at once");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot catch signals: SIGINT and SIGTERM end the process at once");
            }
        }
        flag
    })
}

/// After the outcome was printed and the ledger's finish written: when a
/// signal stopped the operation, die by it (its default action restored
/// and the signal raised again). Returns when no signal came.
pub(crate) fn die_if_signalled() {
    match FIRST.load(Ordering::SeqCst) {
        0 => {}
        signal => die_by(signal),
    }
}

/// Remove the temporary pack files, then die by `signal`: its default
/// action restored and the signal raised again; should that not end the
/// process, exit as a shell reports a death by it (128 + the signal).
fn die_by(signal: i32) -> ! {
    let _ = std::io::stdout().flush();
    sluice_git::remove_temporary_files();
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    std::process::exit(128 + signal)
}
