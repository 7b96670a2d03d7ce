//! A write that reads first (a comment by its marker, a check run by its
//! external id): the attempt sees the operation's id — the one the outcome
//! and the ledger name, the policy's when the caller gave none — and a
//! value found by that read, nothing sent, is `may_have_applied: false` in
//! the outcome and in the ledger's record of it.

use std::cell::RefCell;

use crate::common::*;
use sluice_policy::{AttemptError, Bounds, OutcomeKind};

#[test]
fn the_attempt_sees_the_operation_id_the_outcome_names() {
    let (policy, _clock) = manual_policy();
    let seen = RefCell::new(Vec::new());
    let generated = policy.run(write_op(Bounds::default()), |ctx| {
        seen.borrow_mut().push(ctx.operation_id().to_string());
        Ok(())
    });
    let given = policy.run(write_op(Bounds::default()).id("job-3"), |ctx| {
        seen.borrow_mut().push(ctx.operation_id().to_string());
        Ok(())
    });
    assert!(generated.is_success() && given.is_success());
    assert_eq!(
        *seen.borrow(),
        vec![generated.operation.id.clone(), "job-3".to_string()]
    );
    assert!(!generated.operation.id.is_empty());
}

#[test]
fn a_value_found_by_a_read_first_sent_nothing_and_the_ledger_records_it() {
    let (policy, _clock) = manual_policy();
    let out = policy.run_write(
        write_op(Bounds::default()).id("job-found"),
        |ctx| -> Result<&str, AttemptError> {
            ctx.sent_nothing();
            Ok("found")
        },
        |_ctx| unreachable!("nothing to settle"),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.may_have_applied, Some(false));
    // The ledger's record says the same: asked again, the earlier run is
    // the one that applied nothing.
    let again = policy.run(write_op(Bounds::default()).id("job-found"), |_ctx| Ok("x"));
    assert_eq!(again.kind, OutcomeKind::Rejected);
    let previous = again.previous.expect("the earlier run");
    assert_eq!(previous.may_have_applied, Some(false));

    // A write that sent: its record says it may have applied.
    let sent = policy.run(write_op(Bounds::default()).id("job-sent"), |_ctx| {
        Ok("made")
    });
    assert_eq!(sent.may_have_applied, Some(true));
    let again = policy.run(write_op(Bounds::default()).id("job-sent"), |_ctx| Ok("x"));
    assert_eq!(
        again.previous.expect("the earlier run").may_have_applied,
        Some(true)
    );
}

#[test]
fn only_the_attempt_that_succeeds_decides_whether_nothing_was_sent() {
    let (policy, _clock) = manual_policy();
    let n = std::cell::Cell::new(0);
    let out = policy.run_write(
        write_op(Bounds::default()),
        |ctx| -> Result<&str, AttemptError> {
            n.set(n.get() + 1);
            if n.get() == 1 {
                // Found nothing the first time, then refused before sending.
                ctx.sent_nothing();
                return Err(AttemptError::unjudged("connect", "connection refused"));
            }
            Ok("made")
        },
        |_ctx| unreachable!("nothing to settle"),
    );
    assert_eq!(n.get(), 2);
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.may_have_applied, Some(true));
}
