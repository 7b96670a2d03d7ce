//! The forge soak at CI size: 8 threads sharing one forge client, 1,000
//! merges, ref updates, check-run updates and reads against the stateful
//! fake GitHub with about 20% of them faulted (every fault the fake plays),
//! checked against the fake's own record (see
//! `sluice_reliability::forge_soak`), under the retry budget as shipped
//! (a read it stops is `unknown` with `stopped: retry-budget-empty`, and
//! counted).
//!
//! `FORGE_SOAK_OPS=<n>` changes the number of operations;
//! `cargo run --release -p sluice-reliability --bin forge-soak` is the
//! large run (2,000 operations by default).

use sluice_policy::RetryBudget;
use sluice_reliability::forge_soak::{self, ForgeSoakConfig};

#[test]
fn under_faults_no_forge_write_is_applied_twice_and_every_verdict_is_the_forges_state() {
    let _alone = crate::alone();
    let mut cfg = ForgeSoakConfig::ci();
    if let Some(n) = std::env::var("FORGE_SOAK_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.ops = n;
    }
    let report = forge_soak::run(&cfg);
    println!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.applied_twice, 0);
    assert_eq!(report.resent_after_applied, 0);
    assert_eq!(report.verdict_mismatches, 0);
    assert_eq!(
        report.stopped_by_budget as u64, report.budget.refused,
        "{report}"
    );
    // It exercised what it is about: every fault, settled writes, retries.
    assert_eq!(report.faults.len(), 10, "{report}");
    assert!(
        report.verdicts.get("landed").is_some_and(|n| *n > 0),
        "{report}"
    );
    assert!(
        report.verdicts.get("not-landed").is_some_and(|n| *n > 0),
        "{report}"
    );
    assert!(report.applied > report.ops / 2, "{report}");
}

/// The soak's excuse for a read the retry budget stopped holds only with
/// the budget's own evidence: with an empty budget (no token, no refill)
/// every retry is refused, reads end `unknown` with `stopped:
/// retry-budget-empty`, and the soak finds no broken promise because each
/// such operation is one refusal the budget counted.
#[test]
fn with_no_retry_budget_left_reads_stop_unknown_and_each_is_a_refusal_the_budget_counted() {
    let _alone = crate::alone();
    let mut cfg = ForgeSoakConfig::ci();
    cfg.ops = 300;
    cfg.retry_budget = RetryBudget {
        capacity: 0.0,
        refill_per_sec: 0.0,
        success_credit: 0.0,
    };
    let report = forge_soak::run(&cfg);
    println!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.budget.paid, 0, "{report}");
    assert_eq!(report.retries, 0, "no retry without a token: {report}");
    assert!(report.budget.refused > 0, "{report}");
    assert_eq!(
        report.stopped_by_budget as u64, report.budget.refused,
        "{report}"
    );
    let reads = report
        .stopped
        .get(&("GetPull".to_string(), "retry-budget-empty".to_string()))
        .copied()
        .unwrap_or(0);
    assert!(reads > 0, "a read was stopped by the budget: {report}");
    assert_eq!(report.applied_twice, 0);
}
