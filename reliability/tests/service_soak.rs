//! The service soak at CI size: one process, one policy, one client, 8
//! threads, repositories opened once, 60 operations per transport over
//! git:// (fault proxy → git daemon), smart HTTP (fault proxy →
//! http-backend behind lighttpd) and ssh (the `ssh-fault` relay → sshd),
//! with faults, slow and declining hooks, cancels and `git gc` — every
//! verdict checked against the server (see `sluice_reliability::service`).
//!
//! `SERVICE_SOAK_OPS=<operations per transport>` makes it larger; the large
//! run is the `service-soak` binary.

use sluice_reliability::service::{self, ServiceConfig};

#[test]
fn a_long_lived_service_keeps_every_promise_over_every_transport() {
    let mut cfg = ServiceConfig::ci(env!("CARGO_BIN_EXE_ssh-fault").into());
    if let Some(n) = std::env::var("SERVICE_SOAK_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.ops_per_transport = n;
    }
    let report = service::run(&cfg);
    println!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.second_packs, 0, "{report}");
    // The soak exercised what it is about.
    for t in ["git", "http", "ssh"] {
        assert!(
            report.ops.get(t).copied().unwrap_or(0) >= cfg.ops_per_transport,
            "{report}"
        );
    }
    assert!(report.landed > 0, "{report}");
    assert!(report.answered > 0, "{report}");
    assert!(report.fetches_checked > 0, "{report}");
    assert!(report.packs_received >= report.landed, "{report}");
    assert!(report.gcs > 0, "{report}");
    assert!(!report.cancels.is_empty(), "{report}");
    for f in [
        "cut-before-report",
        "ssh-cut-before-report",
        "http-cut-response-after-body",
    ] {
        assert!(
            report.faults.contains_key(f),
            "no {f} fault acted: {report}"
        );
    }
    assert!(report.settled.values().sum::<usize>() > 0, "{report}");
}
