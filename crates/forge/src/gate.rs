//! Per-host pacing, shared by every thread using one client: a cap on
//! concurrent requests, and writes one at a time, each starting at least the
//! write spacing (GitHub asks for one second) after the previous one ended.
//!
//! Waiting at a gate counts against the attempt's hard deadline; an attempt
//! that cannot pass in time fails unjudged at `connect` (nothing was sent).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_policy::CancelFlag;

/// The longest a waiter sleeps before looking at its cancel flag again.
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Default)]
struct State {
    in_flight: usize,
    writing: bool,
    last_write_end: Option<Instant>,
}

/// One host's gate.
#[derive(Debug, Default)]
pub(crate) struct HostGate {
    state: Mutex<State>,
    cv: Condvar,
}

/// Why an attempt could not pass its host's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateRefusal {
    /// The attempt's deadline came first.
    Deadline,
    /// The caller cancelled.
    Cancelled,
}

/// A pass through the gate; released on drop, or before by
/// [`Permit::release`] (a write's end starts the spacing for the next
/// write).
#[derive(Debug)]
pub(crate) struct Permit {
    gate: Arc<HostGate>,
    write: bool,
    released: AtomicBool,
}

impl Permit {
    /// Give the pass back now (once; dropping it later does nothing more):
    /// what a write abandoned on a cancel does, so the host's other writes
    /// need not wait for its thread to end.
    pub(crate) fn release(&self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut st = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        st.in_flight = st.in_flight.saturating_sub(1);
        if self.write {
            st.writing = false;
            st.last_write_end = Some(Instant::now());
        }
        drop(st);
        self.gate.cv.notify_all();
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.release();
    }
}

/// The gates of every host one client talks to.
#[derive(Debug)]
pub(crate) struct Gates {
    hosts: Mutex<HashMap<String, Arc<HostGate>>>,
    max_concurrent: usize,
    write_spacing: Duration,
}

impl Gates {
    pub(crate) fn new(max_concurrent: usize, write_spacing: Duration) -> Self {
        Gates {
            hosts: Mutex::new(HashMap::new()),
            max_concurrent: max_concurrent.max(1),
            write_spacing,
        }
    }

    fn gate(&self, host: &str) -> Arc<HostGate> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(hosts.entry(host.to_string()).or_default())
    }

    /// Wait for a pass to `host` until `deadline`.
    pub(crate) fn acquire(
        &self,
        host: &str,
        write: bool,
        deadline: Instant,
        cancel: &CancelFlag,
    ) -> Result<Permit, GateRefusal> {
        let gate = self.gate(host);
        let mut st = gate.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if cancel.is_cancelled() {
                return Err(GateRefusal::Cancelled);
            }
            let now = Instant::now();
            let free = st.in_flight < self.max_concurrent;
            let paced_until = if write {
                st.last_write_end.map(|t| t + self.write_spacing)
            } else {
                None
            };
            let write_ok = !write || (!st.writing && paced_until.is_none_or(|t| now >= t));
            if free && write_ok {
                st.in_flight += 1;
                if write {
                    st.writing = true;
                }
                drop(st);
                return Ok(Permit {
                    gate,
                    write,
                    released: AtomicBool::new(false),
                });
            }
            if now >= deadline {
                return Err(GateRefusal::Deadline);
            }
            let mut wake = deadline.min(now + POLL);
            if let Some(t) = paced_until {
                if t > now {
                    wake = wake.min(t);
                }
            }
            let (guard, _) = gate
                .cv
                .wait_timeout(st, wake.saturating_duration_since(now))
                .unwrap_or_else(|e| e.into_inner());
            st = guard;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_to_one_host_start_a_spacing_after_the_previous_one_ended() {
        let gates = Gates::new(8, Duration::from_millis(150));
        let cancel = CancelFlag::new();
        let far = Instant::now() + Duration::from_secs(5);
        let p = gates.acquire("h", true, far, &cancel).expect("first");
        drop(p);
        let ended = Instant::now();
        let _q = gates.acquire("h", true, far, &cancel).expect("second");
        assert!(ended.elapsed() >= Duration::from_millis(150));
        // Another host is not paced by this one: it passes with no time to
        // wait at all (a deadline already past), whatever the machine's load.
        let now = Instant::now();
        let _r = gates
            .acquire("other", true, now, &cancel)
            .expect("other host");
        // Reads are not paced, even beside a write in flight.
        let _s = gates.acquire("h", false, now, &cancel).expect("read");
        // A second write to "h" while one is in flight must wait: with no
        // time to wait it is refused.
        assert_eq!(
            gates.acquire("h", true, now, &cancel).unwrap_err(),
            GateRefusal::Deadline
        );
    }

    #[test]
    fn a_released_write_pass_lets_the_next_write_pass_and_its_drop_releases_nothing_more() {
        let gates = Gates::new(1, Duration::ZERO);
        let cancel = CancelFlag::new();
        let now = Instant::now();
        let far = now + Duration::from_secs(5);
        let p = gates.acquire("h", true, far, &cancel).expect("first");
        assert_eq!(
            gates.acquire("h", true, now, &cancel).unwrap_err(),
            GateRefusal::Deadline
        );
        p.release();
        let q = gates
            .acquire("h", true, now, &cancel)
            .expect("after release");
        // The first pass's drop does not free the second's slot.
        drop(p);
        assert_eq!(
            gates.acquire("h", true, now, &cancel).unwrap_err(),
            GateRefusal::Deadline
        );
        drop(q);
        gates
            .acquire("h", true, now, &cancel)
            .expect("after the second");
    }

    #[test]
    fn the_concurrency_cap_holds_and_a_waiter_gives_up_at_its_deadline() {
        let gates = Gates::new(1, Duration::ZERO);
        let cancel = CancelFlag::new();
        let far = Instant::now() + Duration::from_secs(5);
        let _p = gates.acquire("h", false, far, &cancel).expect("first");
        let soon = Instant::now() + Duration::from_millis(60);
        assert_eq!(
            gates.acquire("h", false, soon, &cancel).unwrap_err(),
            GateRefusal::Deadline
        );
        cancel.cancel();
        assert_eq!(
            gates.acquire("h", false, far, &cancel).unwrap_err(),
            GateRefusal::Cancelled
        );
    }
}
