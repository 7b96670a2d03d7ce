//! The service soak at CI size: one process, one policy, one client, 8
//! threads, repositories opened once, 45 operations per transport over
//! git:// (fault proxy → git daemon), smart HTTP (fault proxy →
//! http-backend behind lighttpd), https (the proxy in https mode, ending
//! TLS, → the same lighttpd) and ssh (the `ssh-fault` relay → sshd),
//! with faults, slow and declining hooks, cancels and `git gc` — every
//! verdict checked against the server (see `sluice_reliability::service`).
//!
//! `SERVICE_SOAK_OPS=<operations per transport>` makes it larger; the large
//! run is the `service-soak` binary.
//!
//! A binary of its own: a service soak sets the process's
//! `GIT_SSH_COMMAND`, so its two tests take turns ([`one_soak`]) and no
//! other test shares the process.

use std::sync::{Mutex, MutexGuard};

use sluice_reliability::service::{self, ServiceConfig};

static ONE_SOAK: Mutex<()> = Mutex::new(());

/// Waits until no other service soak runs in this process.
fn one_soak() -> MutexGuard<'static, ()> {
    ONE_SOAK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_long_lived_service_keeps_every_promise_over_every_transport() {
    let _turn = one_soak();
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
    for t in ["git", "http", "ssh", "https"] {
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
        "https-cut-response-after-body",
    ] {
        assert!(
            report.faults.contains_key(f),
            "no {f} fault acted: {report}"
        );
    }
    assert!(report.settled.values().sum::<usize>() > 0, "{report}");
}

/// The service soak's coverage check holds by construction, not by the luck of the
/// draw: with no fault planned at random at all, each thread's owed fault
/// (one cut after a complete push per transport) is still planned until
/// it acted, and its push's verdict is checked like any other.
#[test]
fn every_owed_fault_acts_even_when_the_mix_plans_none() {
    let _turn = one_soak();
    let mut cfg = ServiceConfig::ci(env!("CARGO_BIN_EXE_ssh-fault").into());
    cfg.threads = 3;
    cfg.ops_per_transport = 6;
    cfg.fault_rate = 0.0;
    cfg.cancel_rate = 0.0;
    let report = service::run(&cfg);
    println!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.second_packs, 0, "{report}");
    for f in [
        "cut-before-report",
        "ssh-cut-before-report",
        "http-cut-response-after-body",
        "https-cut-response-after-body",
    ] {
        assert!(
            report.faults.contains_key(f),
            "no {f} fault acted: {report}"
        );
    }
}
