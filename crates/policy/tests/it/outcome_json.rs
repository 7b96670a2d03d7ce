//! The outcome's JSON shape, the profiles' figures, and the policy's
//! thread-safety.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::common::*;
use serde_json::Value;
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, Class, Effect, Operation, OutcomeKind, Policy,
    PreviousResult, PreviousRun, Profile, Settlement, Stopped, Verdict,
};

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
    names.iter().copied().collect()
}

const TOP: &[&str] = &[
    "schema",
    "result",
    "operation",
    "deadline_ms",
    "elapsed_ms",
    "may_have_applied",
    "stopped",
    "attempts",
    "reconciled",
    "refused_credentials",
    "previous",
    "remote_messages",
    "remote_messages_dropped",
    "recorded",
    "value",
];
const OPERATION: &[&str] = &["id", "kind", "effect", "remote", "redirected"];
const ATTEMPT: &[&str] = &[
    "n",
    "phase",
    "class",
    "cause",
    "remaining_ms",
    "timeout_ms",
    "delay_ms",
    "elapsed_ms",
    "request_id",
];

fn check_shape(v: &Value) {
    assert_eq!(keys(v), set(TOP), "{v}");
    assert_eq!(keys(&v["operation"]), set(OPERATION), "{v}");
    for a in v["attempts"].as_array().unwrap() {
        assert_eq!(keys(a), set(ATTEMPT), "{a}");
        for k in ["n", "remaining_ms", "timeout_ms", "elapsed_ms"] {
            assert!(a[k].is_u64(), "{k} is not an integer: {a}");
        }
        assert!(a["delay_ms"].is_null() || a["delay_ms"].is_u64());
        assert!(a["request_id"].is_null() || a["request_id"].is_string());
    }
    assert!(v["deadline_ms"].is_u64() && v["elapsed_ms"].is_u64());
    assert!(v["refused_credentials"].is_array());
}

#[test]
fn a_succeeded_read_has_every_key_with_nulls_where_they_do_not_apply() {
    let (policy, _clock) = manual_policy();
    let out = policy.run(read_op(Bounds::default()).id("op-1"), |ctx| {
        if ctx.n == 1 {
            return Err(AttemptError::unjudged("connect", "connection refused"));
        }
        ctx.reached("done");
        Ok(vec!["refs/heads/main"])
    });
    let v = serde_json::to_value(&out).unwrap();
    check_shape(&v);
    assert_eq!(v["result"], "succeeded");
    assert_eq!(
        v["operation"],
        serde_json::json!({"id": "op-1", "kind": "ls-refs", "effect": "read", "remote": "git://example.test/repo", "redirected": null})
    );
    assert_eq!(v["deadline_ms"], 20_000);
    assert_eq!(v["may_have_applied"], Value::Null);
    assert_eq!(v["stopped"], Value::Null);
    assert_eq!(v["reconciled"], Value::Null);
    assert_eq!(v["previous"], Value::Null);
    assert_eq!(v["refused_credentials"], serde_json::json!([]));
    assert_eq!(v["value"], serde_json::json!(["refs/heads/main"]));
    let a = &v["attempts"];
    assert_eq!(a[0]["n"], 1);
    assert_eq!(a[0]["phase"], "connect");
    assert_eq!(a[0]["class"], "unjudged");
    assert_eq!(a[0]["cause"], "connection refused");
    assert!(a[0]["delay_ms"].is_u64());
    assert_eq!(a[1]["n"], 2);
    assert_eq!(a[1]["phase"], "done");
    assert_eq!(a[1]["class"], Value::Null);
    assert_eq!(a[1]["cause"], Value::Null);
    assert_eq!(a[1]["delay_ms"], Value::Null);
}

#[test]
fn an_unknown_write_serialises_its_settlement_in_kebab_case() {
    let (policy, _clock) = manual_policy();
    let bounds = Bounds::new(secs(30), secs(5), 2).with_backoff(BackoffShape::constant(secs(1)));
    let out = policy.run_write(
        Operation::new("push", Effect::Write, "https://git.example.test/o/r.git").bounds(bounds),
        |ctx| -> Result<(), _> {
            if ctx.n == 1 {
                ctx.reached("pack-sent");
                return Err(AttemptError::unknown("pack-sent", "connection reset"));
            }
            Err(AttemptError::unjudged("connect", "connection refused"))
        },
        |_ctx| {
            Ok(Settlement::not_landed(BTreeMap::from([
                ("refs/heads/main".to_string(), "1".repeat(40)),
                ("refs/heads/gone".to_string(), "absent".to_string()),
            ])))
        },
    );
    let v = serde_json::to_value(&out).unwrap();
    check_shape(&v);
    assert_eq!(v["result"], "unknown");
    assert_eq!(v["operation"]["effect"], "write");
    // Not landed (read until the deadline, which it says) is never sent
    // again: one attempt, and the write may still land.
    assert_eq!(v["stopped"], "deadline");
    assert_eq!(v["may_have_applied"], true);
    assert_eq!(v["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(v["reconciled"]["verdict"], "not-landed");
    assert_eq!(
        keys(&v["reconciled"]),
        set(&["verdict", "observed", "reads"])
    );
    let reads = v["reconciled"]["reads"].as_array().unwrap();
    assert!(reads.len() > 1, "every settling read listed: {reads:?}");
    for r in reads {
        assert_eq!(keys(r), set(&["elapsed_ms", "verdict", "cause"]));
        assert_eq!(r["verdict"], "not-landed");
        assert_eq!(r["cause"], Value::Null);
    }
    assert_eq!(v["reconciled"]["observed"]["refs/heads/gone"], "absent");
    assert_eq!(v["attempts"][0]["class"], "unknown");
    assert_eq!(v["attempts"][0]["phase"], "pack-sent");
    assert_eq!(v["attempts"][0]["delay_ms"], Value::Null);
    assert_eq!(v["value"], Value::Null);
}

#[test]
fn a_rejected_outcome_carries_the_earlier_run_in_its_documented_shape() {
    let (policy, _clock) = manual_policy();
    let first = policy.run(
        read_op(Bounds::default()).id("op-r"),
        |_ctx| -> Result<(), _> {
            Err(AttemptError::answered("connect", "ERR no such repository"))
        },
    );
    assert_eq!(first.kind, OutcomeKind::Answered);
    let out = policy.run(read_op(Bounds::default()).id("op-r"), |_ctx| Ok(()));
    let v = serde_json::to_value(&out).unwrap();
    check_shape(&v);
    assert_eq!(v["result"], "rejected");
    assert_eq!(v["attempts"], serde_json::json!([]));
    assert_eq!(
        keys(&v["previous"]),
        set(&[
            "kind",
            "result",
            "may_have_applied",
            "elapsed_ms",
            "attempts",
            "phase",
            "host",
            "pid"
        ])
    );
    assert_eq!(v["previous"]["result"], "answered");
    // A finished run's phases are in its attempts.
    assert_eq!(v["previous"]["phase"], Value::Null);
    assert_eq!(v["previous"]["kind"], "ls-refs");
    assert_eq!(
        v["previous"]["attempts"][0]["cause"],
        "ERR no such repository"
    );
    for a in v["previous"]["attempts"].as_array().unwrap() {
        assert_eq!(keys(a), set(ATTEMPT));
    }
}

#[test]
fn enum_values_serialise_as_their_kebab_case_names() {
    for k in [
        OutcomeKind::Succeeded,
        OutcomeKind::Answered,
        OutcomeKind::Unknown,
        OutcomeKind::Rejected,
    ] {
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
    let stopped = [
        (Stopped::Deadline, "deadline"),
        (Stopped::MaxAttempts, "max-attempts"),
        (Stopped::RetryHintExceedsBudget, "retry-hint-exceeds-budget"),
        (Stopped::RetryBudgetEmpty, "retry-budget-empty"),
        (Stopped::CredentialRefused, "credential-refused"),
        (Stopped::Cancelled, "cancelled"),
    ];
    for (s, name) in stopped {
        assert_eq!(serde_json::to_value(s).unwrap(), name);
        assert_eq!(s.as_str(), name);
    }
    for (v, name) in [
        (Verdict::Landed, "landed"),
        (Verdict::NotLanded, "not-landed"),
        (Verdict::Moved, "moved"),
    ] {
        assert_eq!(serde_json::to_value(v).unwrap(), name);
        assert_eq!(v.as_str(), name);
    }
    for c in [Class::Unjudged, Class::Answered, Class::Unknown] {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
    }
    for e in [Effect::Read, Effect::Write] {
        assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
    }
}

/// What a caller does with each kind a call can end with: an exhaustive
/// `match` with no wildcard and no arm for an earlier run's state (with a
/// `running` kind in `OutcomeKind`, this does not compile).
fn handle(kind: OutcomeKind) -> &'static str {
    match kind {
        OutcomeKind::Succeeded => "use the value",
        OutcomeKind::Answered => "read the answer",
        OutcomeKind::Unknown => "read what the remote holds",
        OutcomeKind::Rejected => "read previous",
        OutcomeKind::LocalError => "mend this side",
    }
}

#[test]
fn a_match_on_an_outcome_kind_needs_no_arm_for_an_earlier_runs_state() {
    let kinds = [
        OutcomeKind::Succeeded,
        OutcomeKind::Answered,
        OutcomeKind::Unknown,
        OutcomeKind::Rejected,
        OutcomeKind::LocalError,
    ];
    let handled: BTreeSet<&str> = kinds.into_iter().map(handle).collect();
    assert_eq!(handled.len(), kinds.len());
    assert!(serde_json::from_value::<OutcomeKind>(Value::from("running")).is_err());
    // The earlier run's state has its own enum, with the same names.
    for (r, name) in [
        (PreviousResult::Succeeded, "succeeded"),
        (PreviousResult::Answered, "answered"),
        (PreviousResult::Unknown, "unknown"),
        (PreviousResult::LocalError, "local-error"),
        (PreviousResult::Running, "running"),
        (PreviousResult::Abandoned, "abandoned"),
    ] {
        assert_eq!(serde_json::to_value(r).unwrap(), name);
        assert_eq!(r.as_str(), name);
        match OutcomeKind::try_from(r) {
            Ok(kind) => {
                assert_eq!(kind.as_str(), name);
                assert_eq!(r, kind);
                assert_eq!(PreviousResult::try_from(kind), Ok(r));
            }
            Err(still) => assert!(
                [
                    (PreviousResult::Running, "running"),
                    (PreviousResult::Abandoned, "abandoned")
                ]
                .contains(&(still, name)),
                "{name}"
            ),
        }
    }
    assert!(PreviousResult::try_from(OutcomeKind::Rejected).is_err());
}

#[test]
fn a_stored_running_or_answered_previous_run_reads_back_as_the_same_json() {
    // As the ledgers store a run (JSON text in a row or the file), some
    // written by earlier versions (the last one without `kind`).
    let stored = [
        r#"{"kind":"push","result":"running","may_have_applied":true,"elapsed_ms":0,"attempts":[]}"#,
        r#"{"kind":"ls-refs","result":"answered","may_have_applied":null,"elapsed_ms":12,"attempts":[{"n":1,"phase":"connect","class":"answered","cause":"ERR no such repository","remaining_ms":20000,"timeout_ms":8000,"delay_ms":null,"elapsed_ms":12}]}"#,
        r#"{"kind":"push","result":"unknown","may_have_applied":true,"elapsed_ms":20000,"attempts":[]}"#,
        r#"{"result":"local-error","may_have_applied":false,"elapsed_ms":3,"attempts":[]}"#,
        r#"{"kind":"push","result":"abandoned","may_have_applied":true,"elapsed_ms":90000,"attempts":[],"phase":"pack-sent","host":"ci-7","pid":4242}"#,
    ];
    let results: Vec<PreviousResult> = stored
        .iter()
        .map(|text| {
            let run: PreviousRun = serde_json::from_str(text).expect("a stored run reads");
            let mut want: Value = serde_json::from_str(text).expect("json");
            let obj = want.as_object_mut().expect("an object");
            for key in ["kind", "phase", "host", "pid"] {
                obj.entry(key).or_insert(Value::Null);
            }
            // Attempts stored before request ids were kept read with none.
            for a in obj["attempts"].as_array_mut().expect("attempts") {
                let a = a.as_object_mut().expect("an attempt");
                a.entry("request_id").or_insert(Value::Null);
            }
            assert_eq!(serde_json::to_value(&run).unwrap(), want, "{text}");
            run.result
        })
        .collect();
    assert_eq!(
        results,
        [
            PreviousResult::Running,
            PreviousResult::Answered,
            PreviousResult::Unknown,
            PreviousResult::LocalError,
            PreviousResult::Abandoned
        ]
    );
}

#[test]
fn profile_names_parse_and_their_figures_are_as_documented() {
    let jittered = |min: u64, max: u64| BackoffShape {
        min_delay: millis(min),
        max_delay: millis(max),
        factor: 2.0,
        jitter: true,
    };
    let table = [
        ("wait", Profile::Wait, 300, 30, 40, jittered(1_000, 30_000)),
        ("round", Profile::Round, 30, 10, 5, jittered(200, 5_000)),
        ("submit", Profile::Submit, 60, 20, 5, jittered(500, 10_000)),
        ("command", Profile::Command, 20, 8, 4, jittered(200, 5_000)),
        (
            "transfer",
            Profile::Transfer,
            900,
            30,
            4,
            jittered(200, 5_000),
        ),
    ];
    for (name, profile, deadline, timeout, attempts, backoff) in table {
        assert_eq!(name.parse::<Profile>().unwrap(), profile);
        assert_eq!(profile.name(), name);
        let b = profile.bounds();
        assert_eq!(b.deadline, secs(deadline), "{name}");
        assert_eq!(b.attempt_timeout, secs(timeout), "{name}");
        assert_eq!(b.max_attempts, attempts, "{name}");
        assert_eq!(b.backoff, backoff, "{name}");
        assert_eq!(b.reconcile_reserve, secs(2), "{name}");
    }
    assert_eq!(Profile::ALL.len(), 5);
    assert_eq!(
        Bounds::default(),
        Profile::Command.bounds(),
        "the library's default (and the CLI's, but for fetch and push)"
    );
    let err = "Wait".parse::<Profile>().unwrap_err();
    assert!(
        err.to_string()
            .contains("wait, round, submit, command, transfer"),
        "{err}"
    );
    assert!("".parse::<Profile>().is_err());
}

#[test]
fn explicit_figures_override_the_profile() {
    let b = Profile::Wait
        .bounds()
        .with_deadline(secs(7))
        .with_attempt_timeout(secs(3))
        .with_max_attempts(2);
    assert_eq!(
        (b.deadline, b.attempt_timeout, b.max_attempts),
        (secs(7), secs(3), 2)
    );
    assert_eq!(b.backoff, Profile::Wait.bounds().backoff);
}

// A policy value is shared between threads: checked when compiling.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Policy>();
    send_sync::<Operation>();
    send_sync::<sluice_policy::ManualClock>();
    send_sync::<sluice_policy::FileLedger>();
};

#[test]
fn one_policy_serves_operations_on_many_threads() {
    let (policy, _clock) = manual_policy();
    let policy = Arc::new(policy);
    std::thread::scope(|s| {
        for t in 0..4 {
            let policy = Arc::clone(&policy);
            s.spawn(move || {
                for i in 0..25 {
                    let out = policy.run(
                        read_op(Bounds::default()).id(format!("op-{t}-{i}")),
                        |_ctx| Ok(()),
                    );
                    assert!(out.is_success());
                }
            });
        }
    });
    let again = policy.run(read_op(Bounds::default()).id("op-3-24"), |_ctx| Ok(()));
    assert_eq!(again.kind, OutcomeKind::Rejected);
}
