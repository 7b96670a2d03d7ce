//! What the settling tests (`writes`, `settling`, `settle_failed_reads`)
//! share: the ref values a read observes, the unknown push, unjittered
//! backoff shapes and how pauses and verdicts are compared.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;
use sluice_policy::{AttemptError, BackoffShape, SettlingRead, Verdict};

/// The target's value before the write.
pub const OLD: &str = "1111111111111111111111111111111111111111";
/// The value the write sets.
pub const NEW: &str = "2222222222222222222222222222222222222222";
/// A value somebody else set.
pub const THEIRS: &str = "3333333333333333333333333333333333333333";

/// What a read of `refs/heads/main` at `oid` observes.
pub fn observed(oid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("refs/heads/main".to_string(), oid.to_string())])
}

/// A push whose connection was reset after its last pack byte.
pub fn unknown_push() -> AttemptError {
    AttemptError::unknown("pack-sent", "connection reset after the last pack byte")
}

/// `first` ms doubling, no jitter (with the 2 s reserve each pause is at
/// most 1 s, half the reserve).
pub fn doubling(first: u64) -> BackoffShape {
    BackoffShape {
        min_delay: millis(first),
        max_delay: secs(30),
        factor: 2.0,
        jitter: false,
    }
}

/// Pauses in whole milliseconds (backon's `f32` factor leaves
/// nanoseconds over).
pub fn whole_ms(pauses: &[Duration]) -> Vec<u128> {
    pauses.iter().map(Duration::as_millis).collect()
}

/// Each read's verdict.
pub fn verdicts(reads: &[SettlingRead]) -> Vec<Option<Verdict>> {
    reads.iter().map(|r| r.verdict).collect()
}
