//! What the ledger examples share: the ids they claim and the run they
//! record.

use sluice_policy::{AttemptError, Effect, Operation, Policy, PreviousRun};

/// A 64-bit mix (splitmix64's finaliser): spreads consecutive numbers.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The `i`-th id: 32 random-looking hex digits, like a UUID.
pub fn id(i: u64) -> String {
    format!("{:016x}{:016x}", mix(i), mix(i ^ 0x5555_5555_5555_5555))
}

/// A run as a ledger records it: one push that reached its report.
pub fn a_run() -> PreviousRun {
    Policy::default()
        .run(
            Operation::new("push", Effect::Write, "git://127.0.0.1:9418/repo.git"),
            |ctx| {
                ctx.reached("reported");
                Ok::<_, AttemptError>(())
            },
        )
        .summary()
        .expect("a run that ran")
}
