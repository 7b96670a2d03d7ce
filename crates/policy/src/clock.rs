//! The clock and the sleeper, injectable so tests never sleep for real.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A monotonic clock: time since an arbitrary fixed origin.
pub trait Clock: Send + Sync {
    /// Time elapsed since the clock's origin; never goes backwards.
    fn now(&self) -> Duration;
}

/// Sleeps for a while, returning early when `cancel` is raised.
pub trait Sleeper: Send + Sync {
    /// Sleep for `dur`, or until `cancel` becomes true.
    fn sleep(&self, dur: Duration, cancel: &AtomicBool);
}

/// The real monotonic clock ([`Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// The real sleeper: `thread::sleep` in slices of at most 20 ms so a cancel
/// is seen promptly.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&self, dur: Duration, cancel: &AtomicBool) {
        let end = Instant::now() + dur;
        loop {
            if cancel.load(Ordering::SeqCst) {
                return;
            }
            let now = Instant::now();
            if now >= end {
                return;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }
}

/// A clock that moves only when told to, for deterministic tests.
///
/// It is also a [`Sleeper`]: sleeping advances the clock at once and records
/// the delay.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Debug, Default)]
struct ManualState {
    now: Duration,
    sleeps: Vec<Duration>,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Move the clock forward.
    pub fn advance(&self, by: Duration) {
        self.inner.lock().expect("manual clock lock").now += by;
    }

    /// Every sleep requested so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.inner.lock().expect("manual clock lock").sleeps.clone()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        self.inner.lock().expect("manual clock lock").now
    }
}

impl Sleeper for ManualClock {
    fn sleep(&self, dur: Duration, _cancel: &AtomicBool) {
        let mut s = self.inner.lock().expect("manual clock lock");
        s.now += dur;
        s.sleeps.push(dur);
    }
}

/// A cancel flag a caller raises to stop an operation between and during
/// attempts, with a second level: a stop.
///
/// [`cancel`](CancelFlag::cancel) stops the operation's attempts; a write
/// whose request was complete is still settled by reading (its first
/// answered read, or the reconcile reserve after the cancel).
/// [`stop`](CancelFlag::stop) also ends that settling and any read in
/// flight at once: the outcome is what stands. A stop implies a cancel
/// ([`is_cancelled`](CancelFlag::is_cancelled) is true after either).
/// The CLI raises the first level on the first SIGINT or SIGTERM and the
/// second on the next.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag {
    cancelled: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
}

impl CancelFlag {
    /// A flag not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raise the flag (the first level).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Raise the second level: stop at once, settling reads included. A
    /// stop is a cancel too.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is raised (by [`cancel`](Self::cancel) or
    /// [`stop`](Self::stop)).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Whether the second level is raised: nothing more is read, the
    /// outcome is what stands.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// A flag that reads as cancelled only once this one is stopped: what
    /// a settling read watches (a cancel leaves it alone, a stop cuts it).
    /// Raising it stops this one.
    pub fn stops_only(&self) -> CancelFlag {
        CancelFlag {
            cancelled: Arc::clone(&self.stopped),
            stopped: Arc::clone(&self.stopped),
        }
    }

    /// The underlying atomic of the first level, for sleepers and
    /// watchdogs (raised by a cancel and by a stop).
    pub fn as_atomic(&self) -> &AtomicBool {
        &self.cancelled
    }

    /// The underlying atomic of the second level (raised by a stop only),
    /// for a settling read's watchdog.
    pub fn stop_atomic(&self) -> &AtomicBool {
        &self.stopped
    }
}

#[cfg(test)]
mod cancel_tests {
    use super::CancelFlag;

    #[test]
    fn a_stop_is_a_cancel_and_a_cancel_is_not_a_stop() {
        let f = CancelFlag::new();
        assert!(!f.is_cancelled() && !f.is_stopped());
        f.cancel();
        assert!(f.is_cancelled() && !f.is_stopped());
        let g = CancelFlag::new();
        let seen = g.clone();
        g.stop();
        assert!(seen.is_cancelled() && seen.is_stopped());
        assert!(seen.as_atomic().load(std::sync::atomic::Ordering::SeqCst));
        // What a settling read watches: a cancel leaves it, a stop cuts it.
        let h = CancelFlag::new();
        let read = h.stops_only();
        h.cancel();
        assert!(!read.is_cancelled());
        h.stop();
        assert!(read.is_cancelled() && read.is_stopped());
    }
}
