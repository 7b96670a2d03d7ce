//! The soak at CI size: 4 workers × 60 operations of ls-refs, fetch and
//! leased pushes through fault proxies (about 20% of calls faulted) against
//! a real `git daemon`, checked against the server's reflogs and the
//! proxies' logs (see `sluice_reliability::soak` for every check).
//!
//! `SOAK_OPS=<operations per worker>` and `SOAK_WORKERS=<n>` make it larger;
//! `cargo run --release -p sluice-reliability --bin soak -- --ops 10000` is
//! the large run.

use sluice_reliability::soak::{self, SoakConfig};

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn under_faults_no_push_is_lost_or_doubled_and_every_unknown_is_settled_by_reading() {
    let _alone = crate::alone();
    let mut cfg = SoakConfig::ci();
    if let Some(n) = env_usize("SOAK_OPS") {
        cfg.ops_per_worker = n;
    }
    if let Some(n) = env_usize("SOAK_WORKERS") {
        cfg.workers = n;
    }
    let report = soak::run(&cfg);
    println!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.lost_updates, 0);
    assert_eq!(report.doubled_updates, 0);
    // The soak exercised what it is about.
    assert!(report.landed > 0, "{report}");
    assert!(
        report.answered > 0,
        "the shared branch saw no race: {report}"
    );
    assert!(report.faults.values().sum::<usize>() > 0, "{report}");
    assert!(report.retries > 0, "{report}");
}
