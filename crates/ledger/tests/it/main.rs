//! The ledger stores' integration tests in one binary (one link instead of
//! one per file), each file a module built with its store's feature.

#[cfg(all(feature = "sqlite", feature = "postgres"))]
mod abandoned;
#[cfg(feature = "sqlite")]
mod ledger;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_fleet;

/// Runs a read through `policy` whose ledger cannot answer, and checks
/// that it ends `local-error` with its attempt never run.
#[cfg(feature = "postgres")]
fn assert_a_read_ends_local_error_and_nothing_runs(policy: &sluice_policy::Policy, id: &str) {
    use sluice_policy::{AttemptError, Effect, Operation, OutcomeKind};
    let mut calls = 0;
    let outcome = policy.run(
        Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/r").id(id),
        |_| {
            calls += 1;
            Ok::<_, AttemptError>(())
        },
    );
    assert_eq!(outcome.kind, OutcomeKind::LocalError, "{outcome:?}");
    assert_eq!(calls, 0, "an attempt ran");
}
