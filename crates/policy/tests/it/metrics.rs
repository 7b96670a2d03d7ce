//! Metrics: a scripted run under a recording `metrics` recorder (local to
//! this thread, so tests do not share a global one), and every metric's
//! value after it — one retry, one refusal that stands, one unknown push
//! settled by reading, one answered push.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::*;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use sluice_policy::secrecy::SecretString;
use sluice_policy::{
    metric, AttemptError, AuthSignal, BackoffShape, Bounds, Effect, Operation, OutcomeKind,
    RetryBudget, Settlement, StaticSource, Verdict,
};

/// Every metric recorded, as `name{label=value,...}` (labels sorted).
fn snapshot(run: impl FnOnce()) -> BTreeMap<String, DebugValue> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, run);
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

fn counter(n: u64) -> DebugValue {
    DebugValue::Counter(n)
}

fn gauge(v: f64) -> DebugValue {
    DebugValue::Gauge(v.into())
}

fn histogram(values: &[f64]) -> DebugValue {
    DebugValue::Histogram(values.iter().map(|v| (*v).into()).collect())
}

#[test]
fn every_metric_counts_a_scripted_run_of_a_retry_a_standing_refusal_an_unknown_push_and_an_answer()
{
    let (builder, clock) = manual_builder();
    let policy = builder
        .retry_budget(RetryBudget {
            capacity: 10.0,
            refill_per_sec: 0.0,
            success_credit: 0.5,
        })
        .build();
    // A fixed backoff of one second, no jitter: durations are exact.
    let bounds = Bounds {
        backoff: BackoffShape::constant(secs(1)),
        ..Bounds::new(secs(60), secs(10), 3)
    };
    let op = |kind: &str, effect, remote: &str| Operation::new(kind, effect, remote).bounds(bounds);
    let values = snapshot(|| {
        // One retry: refused connection, then the refs (each attempt takes 2 s).
        let out = policy.run(
            op("ls-refs", Effect::Read, "git://user@one.test:9418/r"),
            |ctx| {
                clock.advance(secs(2));
                if ctx.n == 1 {
                    return Err(AttemptError::unjudged("connect", "connection refused"));
                }
                ctx.reached("done");
                Ok(())
            },
        );
        assert_eq!(out.kind, OutcomeKind::Succeeded);
        assert_eq!(out.elapsed_ms, 5_000);

        // A refusal that stands: the source hands back the refused token.
        let source = Arc::new(StaticSource::new(SecretString::from("t0k".to_string())));
        let out = policy.run(
            op("http-get", Effect::Read, "https://two.test:8443/x").credentials(source),
            |_ctx| -> Result<(), AttemptError> {
                clock.advance(secs(1));
                Err(
                    AttemptError::answered("response-headers", "401 Bad credentials")
                        .with_auth(AuthSignal::Unauthorized),
                )
            },
        );
        assert_eq!(out.kind, OutcomeKind::Answered);
        assert_eq!(out.elapsed_ms, 1_000);

        // A push cut after its pack: settled by reading, landed.
        let out = policy.run_write(
            op("push", Effect::Write, "git://three.test/r"),
            |ctx| -> Result<&str, AttemptError> {
                clock.advance(secs(3));
                ctx.reached("pack-sent");
                Err(AttemptError::unknown("pack-sent", "connection reset"))
            },
            |_read| {
                clock.advance(secs(1));
                Ok(Settlement::landed("pushed", BTreeMap::new()))
            },
        );
        assert_eq!(out.kind, OutcomeKind::Succeeded);
        assert_eq!(
            out.reconciled.and_then(|r| r.verdict),
            Some(Verdict::Landed)
        );
        assert_eq!(out.elapsed_ms, 4_000);

        // A push the remote answered (a hook declined it).
        let out = policy.run_write(
            op("push", Effect::Write, "git://four.test/r"),
            |ctx| -> Result<&str, AttemptError> {
                clock.advance(secs(1));
                ctx.reached("reported");
                Err(AttemptError::answered(
                    "reported",
                    "pre-receive hook declined",
                ))
            },
            |_read| panic!("an answered push is not read"),
        );
        assert_eq!(out.kind, OutcomeKind::Answered);
    });

    let expected: BTreeMap<String, DebugValue> = [
        // Operations by kind and result, and their elapsed time.
        (
            "sluice_remote_operations_total{kind=ls-refs,result=succeeded}",
            counter(1),
        ),
        (
            "sluice_remote_operations_total{kind=http-get,result=answered}",
            counter(1),
        ),
        (
            "sluice_remote_operations_total{kind=push,result=succeeded}",
            counter(1),
        ),
        (
            "sluice_remote_operations_total{kind=push,result=answered}",
            counter(1),
        ),
        (
            "sluice_remote_operation_duration_seconds{kind=ls-refs,result=succeeded}",
            histogram(&[5.0]),
        ),
        (
            "sluice_remote_operation_duration_seconds{kind=http-get,result=answered}",
            histogram(&[1.0]),
        ),
        (
            "sluice_remote_operation_duration_seconds{kind=push,result=succeeded}",
            histogram(&[4.0]),
        ),
        (
            "sluice_remote_operation_duration_seconds{kind=push,result=answered}",
            histogram(&[1.0]),
        ),
        // Attempts by host (default port and user info dropped, another
        // port kept), kind and class; the refused credential's class is
        // its record's: the refusal stood, so `answered`.
        (
            "sluice_remote_attempts_total{class=unjudged,host=one.test,kind=ls-refs}",
            counter(1),
        ),
        (
            "sluice_remote_attempts_total{class=succeeded,host=one.test,kind=ls-refs}",
            counter(1),
        ),
        (
            "sluice_remote_attempts_total{class=answered,host=two.test:8443,kind=http-get}",
            counter(1),
        ),
        (
            "sluice_remote_attempts_total{class=unknown,host=three.test,kind=push}",
            counter(1),
        ),
        (
            "sluice_remote_attempts_total{class=answered,host=four.test,kind=push}",
            counter(1),
        ),
        (
            "sluice_remote_attempt_duration_seconds{host=one.test,kind=ls-refs}",
            histogram(&[2.0, 2.0]),
        ),
        (
            "sluice_remote_attempt_duration_seconds{host=two.test:8443,kind=http-get}",
            histogram(&[1.0]),
        ),
        (
            "sluice_remote_attempt_duration_seconds{host=three.test,kind=push}",
            histogram(&[3.0]),
        ),
        (
            "sluice_remote_attempt_duration_seconds{host=four.test,kind=push}",
            histogram(&[1.0]),
        ),
        // The budget: one retry spent (10 → 9), a success credited (9.5);
        // the refusal spent one on the way to standing; the settled push's
        // success is credited up to the capacity; the answer touches none.
        (
            "sluice_remote_retry_budget_tokens{host=one.test}",
            gauge(9.5),
        ),
        (
            "sluice_remote_retry_budget_tokens{host=two.test:8443}",
            gauge(9.0),
        ),
        (
            "sluice_remote_retry_budget_tokens{host=three.test}",
            gauge(10.0),
        ),
        (
            "sluice_remote_unknown_writes_total{host=three.test,verdict=landed}",
            counter(1),
        ),
        (
            "sluice_remote_credential_refusals_total{host=two.test:8443}",
            counter(1),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(values, expected);
    // Every name DESIGN lists was recorded, but the one a layer records
    // itself (the forge's 304s: see the next test).
    for name in metric::ALL
        .into_iter()
        .filter(|n| *n != metric::NOT_MODIFIED_TOTAL)
        // Recorded by the git layer's maintenance (its own tests).
        .filter(|n| *n != metric::MAINTENANCE_SECONDS && *n != metric::MAINTENANCE_TOTAL)
        // Recorded by the forge's write gate (its own tests), and by an
        // empty retry budget (the test below).
        .filter(|n| *n != metric::GATE_WAIT_SECONDS && *n != metric::RETRY_BUDGET_REFUSALS_TOTAL)
    {
        assert!(
            values.keys().any(|k| k.starts_with(&format!("{name}{{"))),
            "{name}"
        );
    }
}

#[test]
fn a_retry_refused_by_an_empty_budget_is_counted_by_host() {
    let (builder, clock) = manual_builder();
    let policy = builder
        .retry_budget(RetryBudget {
            capacity: 1.0,
            refill_per_sec: 0.0,
            success_credit: 0.0,
        })
        .build();
    let bounds = Bounds {
        backoff: BackoffShape::constant(secs(1)),
        ..Bounds::new(secs(60), secs(10), 5)
    };
    let values = snapshot(|| {
        let out = policy.run(
            Operation::new("ls-refs", Effect::Read, "git://five.test/r").bounds(bounds),
            |_ctx| -> Result<(), AttemptError> {
                clock.advance(secs(1));
                Err(AttemptError::unjudged("connect", "connection refused"))
            },
        );
        // One retry paid for, the next refused.
        assert_eq!(out.attempts.len(), 2);
        assert_eq!(out.stopped, Some(sluice_policy::Stopped::RetryBudgetEmpty));
    });
    assert_eq!(
        values.get("sluice_remote_retry_budget_refusals_total{host=five.test}"),
        Some(&counter(1)),
        "{values:?}"
    );
}

#[test]
fn an_unknown_push_no_read_settles_is_counted_unsettled_and_a_not_landed_one_by_its_verdict() {
    let (policy, clock) = manual_policy();
    let bounds = Bounds::new(secs(10), secs(2), 2);
    let values = snapshot(|| {
        let cut = |_ctx: &mut sluice_policy::AttemptCtx<'_>| -> Result<(), AttemptError> {
            Err(AttemptError::unknown("pack-sent", "timed out"))
        };
        let out = policy.run_write(
            Operation::new("push", Effect::Write, "git://h.test/r").bounds(bounds),
            cut,
            |_read| -> Result<Settlement<()>, AttemptError> {
                clock.advance(secs(1));
                Err(AttemptError::unjudged("connect", "connection refused"))
            },
        );
        assert_eq!(out.kind, OutcomeKind::Unknown);
        let out = policy.run_write(
            Operation::new("push", Effect::Write, "git://h.test/r").bounds(bounds),
            cut,
            |_read| Ok(Settlement::not_landed(BTreeMap::new())),
        );
        assert_eq!(out.kind, OutcomeKind::Unknown);
    });
    assert_eq!(
        values.get("sluice_remote_unknown_writes_total{host=h.test,verdict=unsettled}"),
        Some(&counter(1))
    );
    assert_eq!(
        values.get("sluice_remote_unknown_writes_total{host=h.test,verdict=not-landed}"),
        Some(&counter(1))
    );
    assert_eq!(
        values.get("sluice_remote_operations_total{kind=push,result=unknown}"),
        Some(&counter(2))
    );
}

#[test]
fn a_read_answered_not_modified_is_counted_by_host() {
    let values = snapshot(|| {
        metric::not_modified("api.example.test");
        metric::not_modified("api.example.test");
        metric::not_modified("ghe.example.test:8443");
    });
    assert_eq!(
        values.get("sluice_remote_not_modified_total{host=api.example.test}"),
        Some(&counter(2))
    );
    assert_eq!(
        values.get("sluice_remote_not_modified_total{host=ghe.example.test:8443}"),
        Some(&counter(1))
    );
}
