//! The hard deadline of one attempt: a thread that, when the attempt's time
//! runs out or the caller cancels, shuts the socket or kills the child, so a
//! blocked read or write fails at once — whatever the server trickles.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_policy::CancelFlag;

use crate::wire::Wire;

/// Disarms the watchdog when dropped (the attempt ended in time).
pub(crate) struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Fire `action` when `timeout` passes or `cancel` is raised.
    pub fn arm(
        timeout: Duration,
        cancel: CancelFlag,
        wire: Wire,
        action: impl FnOnce() + Send + 'static,
    ) -> Watchdog {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let d = Arc::clone(&done);
        let deadline = Instant::now() + timeout;
        // The watchdog belongs to the attempt that armed it: its events are
        // the attempt's.
        let span = tracing::Span::current();
        let thread = std::thread::Builder::new()
            .name("sluice-watchdog".into())
            .spawn(move || {
                let _attempt = span.enter();
                let (lock, cv) = &*d;
                let mut finished = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if *finished {
                        return;
                    }
                    if cancel.is_cancelled() {
                        wire.lock().cancelled = true;
                        tracing::debug!("cancelled: cutting the attempt");
                        break;
                    }
                    let now = Instant::now();
                    if now >= deadline {
                        wire.lock().timed_out = true;
                        tracing::debug!(
                            timeout_ms = timeout.as_millis() as u64,
                            "attempt timed out: cutting it"
                        );
                        break;
                    }
                    let wait = (deadline - now).min(Duration::from_millis(25));
                    finished = cv
                        .wait_timeout(finished, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                drop(finished);
                action();
            })
            .expect("spawning the watchdog thread");
        Watchdog {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, cv) = &*self.done;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
