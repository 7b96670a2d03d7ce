//! Evidence that agrees with itself: a rejection ran nothing and says so
//! (no attempt-shaped error, a `may_have_applied` that `previous` does not
//! contradict, the earlier run's kind); an answered outcome's error and its
//! last attempt tell the same class and phase; a read under a generated id
//! costs the ledger nothing.

use std::sync::{Arc, Mutex};

use crate::common::*;
use sluice_policy::secrecy::SecretString;
use sluice_policy::{
    AttemptError, AuthSignal, Bounds, Claim, ClaimRequest, Class, Effect, FinishRequest, Ledger,
    LedgerError, Operation, OutcomeKind, PreviousResult, Rejection, Settlement, StaticSource,
    Stopped,
};

#[test]
fn a_rejected_write_has_no_error_and_its_may_have_applied_is_the_earlier_runs() {
    let (policy, _clock) = manual_policy();
    let first = policy.run(
        write_op(Bounds::default()).id("land-1"),
        |_ctx| -> Result<(), _> {
            Err(AttemptError::unknown(
                "pack-sent",
                "connection reset after the last pack byte",
            ))
        },
    );
    assert_eq!(first.kind, OutcomeKind::Unknown);
    assert_eq!(first.may_have_applied, Some(true));

    let again = policy.run(
        write_op(Bounds::default()).id("land-1"),
        |_ctx| -> Result<(), _> { unreachable!("a claimed id never runs again") },
    );
    assert_eq!(again.kind, OutcomeKind::Rejected);
    assert!(again.attempts.is_empty());
    assert!(
        again.error.is_none(),
        "nothing ran, yet the rejection carries an attempt's error: {:?}",
        again.error
    );
    let previous = again.previous.as_ref().expect("the earlier run");
    assert_eq!(previous.may_have_applied, Some(true));
    assert_eq!(
        again.may_have_applied, previous.may_have_applied,
        "the rejection contradicts its earlier run"
    );
    let v = serde_json::to_value(&again).expect("serialises");
    assert_eq!(v["may_have_applied"], v["previous"]["may_have_applied"]);
}

#[test]
fn an_id_reused_by_another_kind_of_call_says_what_the_earlier_run_was() {
    let (policy, _clock) = manual_policy();
    let fetch = Operation::new("fetch", Effect::Read, "git://example.test/repo");
    let fetched = policy.run(fetch.id("job-7"), |ctx| {
        ctx.reached("done");
        Ok(())
    });
    assert!(fetched.is_success());

    let push = policy.run(
        write_op(Bounds::default()).id("job-7"),
        |_ctx| -> Result<(), _> { unreachable!("the id names the fetch: the push never runs") },
    );
    assert_eq!(push.kind, OutcomeKind::Rejected);
    let previous = push.previous.as_ref().expect("the earlier run");
    assert_eq!(previous.kind.as_deref(), Some("fetch"));
    assert_eq!(previous.result, OutcomeKind::Succeeded);
    assert_eq!(
        push.may_have_applied,
        Some(false),
        "nothing under this id ever wrote: the earlier run was a read"
    );
    let v = serde_json::to_value(&push).expect("serialises");
    assert_eq!(v["operation"]["kind"], "push");
    assert_eq!(v["previous"]["kind"], "fetch");
}

#[test]
fn a_rejection_of_an_id_still_running_says_a_write_may_have_applied() {
    let (policy, _clock) = manual_policy();
    let out = policy.run(write_op(Bounds::default()).id("busy"), |_ctx| {
        let nested = policy.run(
            write_op(Bounds::default()).id("busy"),
            |_ctx| -> Result<(), _> { unreachable!("the id is running") },
        );
        assert_eq!(nested.kind, OutcomeKind::Rejected);
        let previous = nested.previous.as_ref().expect("running");
        assert_eq!(previous.result, PreviousResult::Running);
        assert_eq!(previous.kind.as_deref(), Some("push"));
        assert_eq!(nested.may_have_applied, Some(true));
        assert_eq!(nested.may_have_applied, previous.may_have_applied);
        assert!(nested.error.is_none());
        Ok(())
    });
    assert!(out.is_success());
}

#[test]
fn a_refusal_that_stands_is_answered_in_its_error_and_its_last_attempt() {
    let (policy, _clock) = manual_policy();
    let source = Arc::new(StaticSource::new(SecretString::from(
        "ghs_static".to_string(),
    )));
    let op = Operation::new(
        "get-pull",
        Effect::Read,
        "https://api.example.test/repos/o/r/pulls/1",
    )
    .bounds(Bounds::new(secs(60), secs(10), 4))
    .credentials(source);
    let out = policy.run(op, |ctx| -> Result<(), _> {
        ctx.reached("response-headers");
        Err(
            AttemptError::answered("response-headers", "401 Bad credentials")
                .with_auth(AuthSignal::Unauthorized),
        )
    });
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    let error = out.error.as_ref().expect("the refusal");
    assert_eq!(
        error.class,
        Class::Answered,
        "an answered outcome whose error says {}",
        error.class.as_str()
    );
    let last = out.attempts.last().expect("an attempt");
    assert_eq!(last.class, Some(Class::Answered));
    assert_eq!(last.phase, error.phase);
}

#[test]
fn a_refusal_that_stands_after_attempts_ran_out_is_answered_everywhere() {
    let (policy, clock) = manual_policy();
    let source = Arc::new(CountingSource::new(&clock));
    let op = Operation::new("http-get", Effect::Read, "https://api.example.test/x")
        .bounds(Bounds::new(secs(60), secs(10), 2))
        .credentials(source);
    let out = policy.run(op, |_ctx| -> Result<(), _> {
        Err(
            AttemptError::answered("response-headers", "401 Bad credentials")
                .with_auth(AuthSignal::Unauthorized),
        )
    });
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.attempts.len(), 2);
    assert_eq!(
        out.attempts[0].class,
        Some(Class::Unjudged),
        "the first refusal was mended by a fresh credential"
    );
    assert_eq!(out.attempts[1].class, Some(Class::Answered));
    assert_eq!(out.error.as_ref().map(|e| e.class), Some(Class::Answered));
}

#[test]
fn an_answer_judged_from_a_value_keeps_the_phase_its_attempt_reached() {
    let (policy, _clock) = manual_policy();
    // A lease refused by the client: the attempt read the advertisement
    // and sent nothing; the layer's answer names another phase.
    let out = policy.run_write_judged(
        write_op(Bounds::default()),
        |ctx| {
            ctx.reached("advertised");
            Ok("stale")
        },
        |_ctx| -> Result<Settlement<&str>, AttemptError> {
            unreachable!("an answer is never settled by reading")
        },
        |_v| {
            Some(Rejection {
                error: AttemptError::answered("reported", "stale info"),
                may_have_applied: false,
            })
        },
    );
    assert_eq!(out.kind, OutcomeKind::Answered);
    let error = out.error.as_ref().expect("the answer");
    let last = out.attempts.last().expect("an attempt");
    assert_eq!(last.phase, "advertised");
    assert_eq!(
        error.phase, last.phase,
        "the error and its attempt disagree on how far it got"
    );
    assert_eq!(last.class, Some(error.class));
    assert_eq!(out.may_have_applied, Some(false));
}

/// A ledger that keeps generated ids (as a store that outlives the
/// process does) and lists what it was asked.
#[derive(Default)]
struct Persistent {
    claims: Mutex<Vec<String>>,
    finishes: Mutex<Vec<String>>,
}

impl Ledger for Persistent {
    fn claim(&self, req: &ClaimRequest<'_>) -> Result<Claim, LedgerError> {
        self.claims.lock().unwrap().push(req.id.to_string());
        Ok(Claim::Claimed)
    }

    fn finish(&self, req: &FinishRequest<'_>) -> Result<(), LedgerError> {
        self.finishes.lock().unwrap().push(req.id.to_string());
        Ok(())
    }
}

#[test]
fn a_read_under_a_generated_id_is_not_written_to_a_persistent_ledger() {
    let ledger = Arc::new(Persistent::default());
    let (builder, _clock) = manual_builder();
    let policy = builder.ledger(ledger.clone()).build();

    let read = policy.run(read_op(Bounds::default()), |_ctx| Ok(()));
    assert!(read.is_success());
    assert_eq!(read.recorded, None, "nothing was to be recorded");
    let write = policy.run(write_op(Bounds::default()), |_ctx| Ok(()));
    assert_eq!(write.recorded, Some(true));
    let named = policy.run(read_op(Bounds::default()).id("job-9-ls"), |_ctx| Ok(()));
    assert_eq!(named.recorded, Some(true));

    assert_eq!(*ledger.claims.lock().unwrap(), ["job-9-ls"]);
    assert_eq!(
        *ledger.finishes.lock().unwrap(),
        [write.operation.id.as_str(), "job-9-ls"],
        "the generated read {} reached the ledger",
        read.operation.id
    );
}

/// A layer's typed error, as a git or forge error would be.
#[derive(Debug, PartialEq)]
struct CutAfterPack;

impl std::fmt::Display for CutAfterPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cut after the last pack byte")
    }
}

impl std::error::Error for CutAfterPack {}

#[test]
fn a_write_settled_by_reading_keeps_the_layers_typed_error() {
    let (policy, _clock) = manual_policy();
    let out = policy.run_write(
        write_op(Bounds::default()),
        |_ctx| -> Result<(), _> {
            Err(AttemptError::unknown("pack-sent", "connection reset").with_source(CutAfterPack))
        },
        |_ctx| {
            Ok(Settlement::moved(
                None,
                std::collections::BTreeMap::from([("refs/heads/main".into(), "abc".into())]),
                "somebody else moved it",
            ))
        },
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    let error = out.error.as_ref().expect("the unknown attempt");
    assert_eq!(error.source_as::<CutAfterPack>(), Some(&CutAfterPack));
}

#[test]
fn a_rejection_of_an_id_a_running_fetch_holds_says_it_is_a_fetch_that_wrote_nothing() {
    let (policy, _clock) = manual_policy();
    let fetch = Operation::new("fetch", Effect::Read, "git://example.test/repo");
    let out = policy.run(fetch.id("job-8"), |_ctx| {
        let push = policy.run(
            write_op(Bounds::default()).id("job-8"),
            |_ctx| -> Result<(), _> { unreachable!("the id names the fetch: the push never runs") },
        );
        assert_eq!(push.kind, OutcomeKind::Rejected);
        let previous = push
            .previous
            .as_ref()
            .expect("the earlier run, still running");
        assert_eq!(previous.kind.as_deref(), Some("fetch"));
        assert_eq!(previous.result, PreviousResult::Running);
        assert_eq!(previous.may_have_applied, None, "the earlier run is a read");
        assert_eq!(
            push.may_have_applied,
            Some(false),
            "nothing under this id writes: the earlier run is a read"
        );
        let v = serde_json::to_value(&push).expect("serialises");
        assert_eq!(v["previous"]["kind"], "fetch");
        assert_eq!(v["previous"]["result"], "running");
        Ok(())
    });
    assert!(out.is_success());
}
