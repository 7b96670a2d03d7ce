//! The hard deadline of one attempt: a thread that, when the attempt's time
//! runs out or the caller cancels, shuts the socket or kills the child, so a
//! blocked read or write fails at once — whatever the server trickles.
//!
//! What the attempt timeout covers (DESIGN, "What an attempt timeout
//! covers"): until a transfer moves, the whole attempt (connection setup,
//! the advertisement, the wait for the server) ends at the timeout. Once a
//! transfer moves ([`WireState::moving`](crate::wire::WireState)), the
//! attempt runs on while bytes keep moving — it is cut when nothing moved
//! for the timeout (a stall, or the wait for the report after the pack), or
//! when fewer than [`LOW_SPEED_FLOOR`] bytes a second moved averaged over
//! the last timeout (as git's `http.lowSpeedLimit/Time`), and always at the
//! limit (the operation's deadline less the reconcile reserve).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_policy::CancelFlag;

use crate::error::TimeoutLimit;
use crate::wire::Wire;

/// The least a moving transfer keeps: 1 KiB/s averaged over the attempt
/// timeout.
pub(crate) const LOW_SPEED_FLOOR: u64 = 1024;

/// How often the watchdog looks at the wire.
const TICK: Duration = Duration::from_millis(25);

/// Disarms the watchdog when dropped (the attempt ended in time).
pub(crate) struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// An attempt's time limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Waits, stalls, and everything before a transfer moves.
    pub timeout: Duration,
    /// The most a moving transfer may run (at least `timeout`).
    pub limit: Duration,
}

/// Why the watchdog fires now, if it does: the limit and its figure. An
/// attempt timeout capped by the operation's deadline (`timeout >=
/// limit`) is the deadline.
fn expired(
    limits: Limits,
    start: Instant,
    now: Instant,
    moving_since: Option<Instant>,
    last_move: Instant,
    window: &VecDeque<(Instant, u64)>,
    moved: u64,
) -> Option<(TimeoutLimit, Duration)> {
    let elapsed = now - start;
    let capped = limits.timeout >= limits.limit;
    let timeout = if capped {
        (TimeoutLimit::Deadline, limits.timeout)
    } else {
        (TimeoutLimit::AttemptTimeout, limits.timeout)
    };
    let Some(since) = moving_since else {
        return (elapsed >= limits.timeout).then_some(timeout);
    };
    if elapsed >= limits.limit.max(limits.timeout) {
        return Some((TimeoutLimit::Deadline, limits.limit.max(limits.timeout)));
    }
    if now - last_move >= limits.timeout {
        return Some((TimeoutLimit::Stalled, limits.timeout));
    }
    // The floor, once the transfer has moved for a whole window.
    if now - since >= limits.timeout {
        if let Some(&(_, base)) = window.front() {
            let need = LOW_SPEED_FLOOR as f64 * limits.timeout.as_secs_f64();
            if ((moved - base) as f64) < need {
                return Some((TimeoutLimit::Floor, limits.timeout));
            }
        }
    }
    None
}

impl Watchdog {
    /// Fire `action` when the attempt's limits are passed or `cancel` is
    /// raised.
    pub fn arm(
        limits: Limits,
        cancel: CancelFlag,
        wire: Wire,
        action: impl FnOnce() + Send + 'static,
    ) -> Watchdog {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let d = Arc::clone(&done);
        let start = Instant::now();
        // The watchdog belongs to the attempt that armed it: its events are
        // the attempt's.
        let span = tracing::Span::current();
        let thread = std::thread::Builder::new()
            .name("sluice-watchdog".into())
            .spawn(move || {
                let _attempt = span.enter();
                let (lock, cv) = &*d;
                let mut finished = lock.lock().unwrap_or_else(|p| p.into_inner());
                let mut moving_since = None;
                let mut last_moved = 0u64;
                let mut last_move = start;
                // (when, bytes moved so far), covering the last timeout.
                let mut window: VecDeque<(Instant, u64)> = VecDeque::new();
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
                    let (moving, moved) = {
                        let st = wire.lock();
                        (st.moving, st.bytes_read + st.bytes_written)
                    };
                    if moving && moving_since.is_none() {
                        moving_since = Some(now);
                    }
                    if moved != last_moved {
                        last_moved = moved;
                        last_move = now;
                    }
                    window.push_back((now, moved));
                    while window.len() > 1 && now - window[1].0 >= limits.timeout {
                        window.pop_front();
                    }
                    if let Some(by) =
                        expired(limits, start, now, moving_since, last_move, &window, moved)
                    {
                        {
                            let mut st = wire.lock();
                            st.timed_out = true;
                            st.timed_out_by = Some(by);
                        }
                        tracing::debug!(
                            timeout_ms = limits.timeout.as_millis() as u64,
                            moving = moving_since.is_some(),
                            "attempt timed out: cutting it"
                        );
                        break;
                    }
                    finished = cv
                        .wait_timeout(finished, TICK)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(2),
            limit: Duration::from_secs(20),
        }
    }

    #[test]
    fn before_a_transfer_the_whole_attempt_ends_at_the_timeout() {
        let t0 = Instant::now();
        let w = VecDeque::new();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // Bytes trickling in (an advertisement a byte a second) change nothing.
        assert_eq!(expired(limits(), t0, at(1.9), None, at(1.8), &w, 100), None);
        assert_eq!(
            expired(limits(), t0, at(2.0), None, at(1.99), &w, 100),
            Some((TimeoutLimit::AttemptTimeout, Duration::from_secs(2)))
        );
        // An attempt timeout capped by what remained of the deadline is
        // the deadline.
        let capped = Limits {
            timeout: Duration::from_secs(2),
            limit: Duration::from_secs(2),
        };
        assert_eq!(
            expired(capped, t0, at(2.0), None, at(1.99), &w, 100).map(|e| e.0),
            Some(TimeoutLimit::Deadline)
        );
    }

    #[test]
    fn a_moving_transfer_runs_on_past_the_timeout_until_it_stalls_or_crawls() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        // 10 KiB/s for 6 s: well above the floor, not cut.
        let w: VecDeque<_> = [(at(4.0), 40_960), (at(6.0), 61_440)].into();
        assert!(expired(limits(), t0, at(6.0), Some(at(0.5)), at(6.0), &w, 61_440).is_none());
        // Nothing moved for the timeout: a stall.
        assert_eq!(
            expired(limits(), t0, at(8.0), Some(at(0.5)), at(6.0), &w, 61_440).map(|e| e.0),
            Some(TimeoutLimit::Stalled)
        );
        // 100 B/s over the last window: under the floor.
        let slow: VecDeque<_> = [(at(4.0), 61_440), (at(6.0), 61_640)].into();
        assert_eq!(
            expired(limits(), t0, at(6.0), Some(at(0.5)), at(6.0), &slow, 61_640).map(|e| e.0),
            Some(TimeoutLimit::Floor)
        );
        // The limit is hard, however fast it moves.
        assert_eq!(
            expired(
                limits(),
                t0,
                at(20.0),
                Some(at(0.5)),
                at(20.0),
                &w,
                61_440 + 1
            )
            .map(|e| e.0),
            Some(TimeoutLimit::Deadline)
        );
    }
}
