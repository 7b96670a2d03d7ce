//! The service soak's coverage check (`service_soak.rs`) holds by
//! construction. A process of its own: a service soak sets the process's
//! `GIT_SSH_COMMAND`, so two cannot run in one test binary at once.

use sluice_reliability::service::{self, ServiceConfig};

/// The service soak's coverage check holds by construction, not by the luck of the
/// draw: with no fault planned at random at all, each thread's owed fault
/// (one cut after a complete push per transport) is still planned until
/// it acted, and its push's verdict is checked like any other.
#[test]
fn every_owed_fault_acts_even_when_the_mix_plans_none() {
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
    ] {
        assert!(
            report.faults.contains_key(f),
            "no {f} fault acted: {report}"
        );
    }
}
