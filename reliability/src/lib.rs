//! Reliability evidence for sluice-remote: the figures behind
//! `RELIABILITY.md`, from tests anyone can rerun.
//!
//! The library holds what the test targets and the `soak` binary share:
//!
//! * [`soak`] — N workers running a seeded mix of ls-refs, fetch and leased
//!   pushes through fault proxies against a real `git daemon`, then checked
//!   against the server's reflogs and the proxies' connection logs;
//! * [`service`] — the service soak: one process, one client, repositories
//!   kept open, 8 threads over git://, smart HTTP and ssh at once, with
//!   faults, slow hooks, cancels and `git gc`, every verdict checked against
//!   the server and the process's resources sampled through the run;
//! * [`sshfault`] — the relay standing in for `ssh` that injects the
//!   service soak's ssh faults (binary `ssh-fault`);
//! * [`forge_soak`] — threads sharing one forge client run merges, ref
//!   updates and check-run updates against the testkit's stateful fake
//!   GitHub under faults, checked against the fake's own record (no write
//!   applied twice, every verdict equal to its final state);
//! * [`mem`] — the process's resident memory, read from `/proc/self/status`;
//! * [`Rng`] — a small seeded generator, so every run can be replayed.
//!
//! The test targets (`tests/`) are: `service_soak` (the service soak at CI
//! size), `hostile` (the scripted server of
//! `sluice_testkit::scripted`), `soak` (the CI-sized soak), `storm` (the
//! per-host retry budget and jitter against an outage), `ledger` (the file
//! ledger shared by processes, and killed while writing), `properties`
//! (proptest versions of the fuzz targets) and `regressions` (inputs the
//! fuzzers found).

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod forge_soak;
pub mod mem;
pub mod service;
pub mod soak;
pub mod sshfault;

/// A seeded pseudo-random generator (splitmix64): small, fast, replayable.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_replays_from_its_seed_and_stays_in_range() {
        let a: Vec<u64> = (0..5).map(|_| Rng::new(7).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            assert!(r.below(3) < 3);
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
