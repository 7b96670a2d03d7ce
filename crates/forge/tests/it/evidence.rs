//! The forge's evidence: every outcome with an error carries the forge's
//! typed failure as the error's source (`source_as::<ForgeFailure>()`),
//! whatever path ended it — answered, unknown, settled by reading,
//! cancelled, a credential refusal that stands, a credential source that
//! failed — and bad input is an `Err` before any request.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{client, client_with, policy, repo, REPO};
use secrecy::SecretString;
use sluice_forge::{
    CallOptions, CheckRunUpdate, ForgeClient, ForgeFailure, ForgeInputError, ForgePhase,
    MergeMethod, NewCheckRun, NewPullRequest, RepoRef,
};
use sluice_policy::{
    Bounds, CancelFlag, Class, CommandSource, CredentialError, Outcome, OutcomeKind, StaticSource,
    Stopped, Verdict,
};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

const HEAD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OTHER: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// The outcome's error's typed source, or a failure naming the outcome.
fn failure<T: std::fmt::Debug>(out: &Outcome<T>) -> &ForgeFailure {
    let e = out
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("no error: {out:?}"));
    e.source_as::<ForgeFailure>()
        .unwrap_or_else(|| panic!("no ForgeFailure source: {e:?}"))
}

/// A client whose writes are paced 10 ms apart, under `bounds`.
fn writer(forge: &FakeForge, bounds: Bounds) -> ForgeClient {
    ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(100)))
        .write_spacing(Duration::from_millis(10))
        .bounds(bounds)
        .build()
        .expect("client")
}

#[test]
fn each_answered_status_keeps_the_forges_failure_with_its_status() {
    let forge = FakeForge::start().expect("fake forge");
    let c = client(&forge);
    for status in [401, 403, 404, 409, 422] {
        forge.push(
            Endpoint::GetPull,
            Behaviour::Status {
                status,
                retry_after: None,
            },
        );
        let out = c
            .get_pull(&repo(), 1, &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Answered, "{status}: {out:?}");
        let f = failure(&out);
        assert_eq!(f.status(), Some(status), "{f:?}");
        assert_eq!(f.phase(), ForgePhase::Body);
    }
}

#[test]
fn a_secondary_rate_limit_that_outlasts_the_deadline_keeps_the_forges_403() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::GetPull, Behaviour::SecondaryLimit);
    let out = client(&forge)
        .get_pull(
            &repo(),
            1,
            &CallOptions::new().bounds(Bounds::new(
                Duration::from_secs(10),
                Duration::from_secs(5),
                2,
            )),
        )
        .expect("valid input");
    assert_eq!(
        out.stopped,
        Some(Stopped::RetryHintExceedsBudget),
        "{out:?}"
    );
    let f = failure(&out);
    assert_eq!(f.status(), Some(403));
    assert!(
        sluice_forge::is_secondary_rate_limit(f.message().unwrap_or("")),
        "{f:?}"
    );
}

#[test]
fn a_read_cut_after_its_request_and_one_that_times_out_keep_no_answer_at_request_sent() {
    let forge = FakeForge::start().expect("fake forge");
    let c = client(&forge);
    let bounds = Bounds::new(Duration::from_secs(4), Duration::from_secs(1), 2);
    for (behaviour, what) in [
        (Behaviour::ApplyThenCut, "cut"),
        (Behaviour::Delay(Duration::from_secs(30)), "timeout"),
    ] {
        forge.set(Endpoint::GetPull, behaviour);
        let out = c
            .get_pull(&repo(), 1, &CallOptions::new().bounds(bounds))
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Unknown, "{what}: {out:?}");
        assert_eq!(out.error.as_ref().map(|e| e.class), Some(Class::Unknown));
        let f = failure(&out);
        assert!(
            matches!(
                f,
                ForgeFailure::NoAnswer {
                    phase: ForgePhase::RequestSent,
                    ..
                }
            ),
            "{what}: {f:?}"
        );
    }
}

#[test]
fn a_write_settled_by_reading_keeps_the_failure_it_settled_whether_not_landed_or_moved() {
    let forge = FakeForge::start().expect("fake forge");
    let not_landed = forge.add_pull(REPO, "feature", "main", HEAD);
    // Moved: the head the caller checked is no longer the pull request's,
    // and the forge's answer to the merge is lost.
    let moved = forge.add_pull(REPO, "other", "main", HEAD);
    forge.set_pull_head(REPO, moved, OTHER);
    let landed = forge.add_pull(REPO, "third", "main", HEAD);
    forge.set(
        Endpoint::MergePull,
        Behaviour::Status {
            status: 502,
            retry_after: None,
        },
    );
    let c = writer(
        &forge,
        Bounds::new(Duration::from_secs(2), Duration::from_secs(1), 3),
    );
    for (n, verdict) in [(not_landed, Verdict::NotLanded), (moved, Verdict::Moved)] {
        let out = c
            .merge_pull(&repo(), n, HEAD, MergeMethod::Merge, &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
        assert_eq!(
            out.reconciled.as_ref().and_then(|r| r.verdict),
            Some(verdict)
        );
        let f = failure(&out);
        assert_eq!(f.status(), Some(502), "{verdict:?}: {f:?}");
    }
    // Landed: a success, with no error to carry.
    forge.set(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    let out = c
        .merge_pull(
            &repo(),
            landed,
            HEAD,
            MergeMethod::Merge,
            &CallOptions::new(),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        out.reconciled.and_then(|r| r.verdict),
        Some(Verdict::Landed)
    );
    assert!(out.error.is_none());
}

#[test]
fn a_read_cancelled_while_it_waits_keeps_the_forges_no_answer() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(
        Endpoint::GetPull,
        Behaviour::Delay(Duration::from_secs(120)),
    );
    let c = client(&forge);
    let cancel = CancelFlag::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            assert!(forge.wait_for_arrivals(Endpoint::GetPull, 1, Duration::from_secs(60)));
            cancel.cancel();
        });
        c.get_pull(&repo(), 1, &CallOptions::new().cancel(&cancel))
            .expect("valid input")
    });
    assert_eq!(out.stopped, Some(Stopped::Cancelled), "{out:?}");
    assert!(
        matches!(failure(&out), ForgeFailure::NoAnswer { .. }),
        "{out:?}"
    );
}

/// A token command that marks a file when it starts, then runs far longer
/// than any test waits.
fn slow_token_command(mark: &std::path::Path) -> Arc<CommandSource> {
    Arc::new(CommandSource::new(format!(
        "touch '{}'; exec sleep 120",
        mark.display()
    )))
}

#[test]
fn a_call_cancelled_while_its_token_command_runs_keeps_the_credential_failure() {
    let forge = FakeForge::start().expect("fake forge");
    let dir = tempfile::tempdir().expect("temp dir");
    let mark = dir.path().join("started");
    let c = client_with(
        &forge,
        policy(Duration::from_secs(1)),
        Some(slow_token_command(&mark)),
    );
    let cancel = CancelFlag::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            let until = Instant::now() + Duration::from_secs(60);
            while !mark.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            cancel.cancel();
        });
        c.get_pull(&repo(), 1, &CallOptions::new().cancel(&cancel))
            .expect("valid input")
    });
    assert!(mark.exists(), "the token command never started");
    assert_eq!(out.stopped, Some(Stopped::Cancelled), "{out:?}");
    assert!(forge.all_arrivals().is_empty(), "{}", forge.log_text());
    match failure(&out) {
        ForgeFailure::Credential {
            error: sluice_forge::CredentialError::Source(error),
        } => assert!(!error.local, "{error:?}"),
        f => panic!("not the credential's failure: {f:?}"),
    }
    let e = out.error.as_ref().expect("error");
    let typed: &dyn std::error::Error = e.source_as::<ForgeFailure>().expect("typed");
    let inner = std::iter::successors(typed.source(), |s| s.source())
        .find_map(|s| s.downcast_ref::<CredentialError>());
    assert!(inner.is_some(), "the source's own error is kept: {e:?}");
}

#[test]
fn a_write_cancelled_while_its_answer_is_awaited_is_still_settled_by_reading() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    // The merge is applied and its answer never comes: the attempt ends
    // at its timeout, unknown, and is settled by reading the pull request.
    forge.set(
        Endpoint::MergePull,
        Behaviour::ApplyThenStall(Duration::from_secs(120)),
    );
    let c = writer(
        &forge,
        Bounds::new(Duration::from_secs(8), Duration::from_secs(1), 2),
    );
    let cancel = CancelFlag::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            assert!(forge.wait_for_arrivals(Endpoint::MergePull, 1, Duration::from_secs(60)));
            cancel.cancel();
        });
        c.merge_pull(
            &repo(),
            n,
            HEAD,
            MergeMethod::Merge,
            &CallOptions::new().cancel(&cancel),
        )
        .expect("valid input")
    });
    assert_eq!(
        out.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::Landed),
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert!(!forge.arrivals(Endpoint::GetPull).is_empty());
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1);
}

#[test]
fn a_credential_refusal_that_stands_keeps_the_forges_401() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(
        Endpoint::GetPull,
        Behaviour::Token {
            valid: vec!["the-right-token".into()],
        },
    );
    let c = client_with(
        &forge,
        policy(Duration::from_millis(100)),
        Some(Arc::new(StaticSource::new(SecretString::from(
            "a-wrong-token".to_string(),
        )))),
    );
    let out = c
        .get_pull(&repo(), 1, &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    assert_eq!(failure(&out).status(), Some(401));
}

#[test]
fn a_token_command_that_cannot_start_is_a_local_error_with_the_credential_failure() {
    let forge = FakeForge::start().expect("fake forge");
    let c = client_with(
        &forge,
        policy(Duration::from_secs(1)),
        Some(Arc::new(CommandSource::new(
            "sluice-test-no-such-token-command",
        ))),
    );
    let out = c
        .get_pull(&repo(), 1, &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::LocalError, "{out:?}");
    match failure(&out) {
        ForgeFailure::Credential {
            error: sluice_forge::CredentialError::Source(error),
        } => assert!(error.local, "{error:?}"),
        f => panic!("not the credential's failure: {f:?}"),
    }
    assert!(forge.all_arrivals().is_empty());
}

#[test]
fn bad_input_to_every_call_is_refused_before_any_request() {
    let forge = FakeForge::start().expect("fake forge");
    let c = client(&forge);
    let o = CallOptions::new();
    let r = repo();
    let no_repo = RepoRef::new("octo", "..");
    let sha = |e: Result<_, ForgeInputError>| matches!(e, Err(ForgeInputError::Sha(_)));
    let name = |e: Result<_, ForgeInputError>| matches!(e, Err(ForgeInputError::RefName { .. }));
    let number = |e: Result<_, ForgeInputError>| matches!(e, Err(ForgeInputError::Number { .. }));
    let head = |e: Result<_, ForgeInputError>| matches!(e, Err(ForgeInputError::Head { .. }));
    let repo_err = |e: Result<_, ForgeInputError>| matches!(e, Err(ForgeInputError::Repo { .. }));

    assert!(number(c.get_pull(&r, 0, &o).map(|_| ())));
    assert!(repo_err(c.get_pull(&no_repo, 1, &o).map(|_| ())));
    assert!(matches!(
        c.list_pulls_by_head(&r, "feature", None, "merged", &o),
        Err(ForgeInputError::State(_))
    ));
    assert!(head(
        c.list_pulls_by_head(&r, "octo:fea ture", None, "open", &o)
            .map(|_| ())
    ));
    assert!(name(
        c.list_pulls_by_head(&r, "feature", Some("../main"), "open", &o)
            .map(|_| ())
    ));
    assert!(name(c.ci_status(&r, "refs/heads/main", &o).map(|_| ())));
    assert!(name(c.ci_status(&r, "", &o).map(|_| ())));
    assert!(name(
        c.find_check_run(&r, "heads/../x", None, "ext", &o)
            .map(|_| ())
    ));
    assert!(head(
        c.create_pull(&r, &NewPullRequest::new("t", "", "main"), &o)
            .map(|_| ())
    ));
    assert!(sha(c
        .create_check_run(&r, &NewCheckRun::new("ci", "abc", "ext"), &o)
        .map(|_| ())));
    assert!(number(c.create_issue_comment(&r, 0, "hi", &o).map(|_| ())));
    assert!(sha(c
        .merge_pull(&r, 1, &HEAD.to_uppercase(), MergeMethod::Merge, &o)
        .map(|_| ())));
    assert!(number(
        c.merge_pull(&r, 0, HEAD, MergeMethod::Merge, &o)
            .map(|_| ())
    ));
    assert!(name(c.update_ref(&r, "main", HEAD, false, &o).map(|_| ())));
    assert!(name(
        c.update_ref(&r, "/heads/main", HEAD, false, &o).map(|_| ())
    ));
    assert!(name(
        c.update_ref(&r, "heads/ma\u{7}in", HEAD, false, &o)
            .map(|_| ())
    ));
    assert!(sha(c
        .update_ref(&r, "heads/main", "1234", false, &o)
        .map(|_| ())));
    assert!(number(
        c.update_check_run(&r, 0, &CheckRunUpdate::new().status("completed"), &o)
            .map(|_| ())
    ));
    assert!(matches!(
        c.get_url("/relative", &o),
        Err(ForgeInputError::Url(_))
    ));
    assert!(
        forge.all_arrivals().is_empty(),
        "a request was sent:\n{}",
        forge.log_text()
    );
    // Good input of each kind still goes out: a 64-digit id, a fork's head.
    let sha256 = "c".repeat(64);
    assert!(c
        .ci_status(&r, &sha256, &CallOptions::new().bounds(common::exercise()))
        .is_ok());
    assert!(c
        .list_pulls_by_head(&r, "octo:feature/x", Some("main"), "all", &o)
        .is_ok());
    assert!(!forge.all_arrivals().is_empty());
}

#[test]
fn a_retried_read_carries_opentelemetrys_names_through_an_in_memory_exporter() {
    use opentelemetry::trace::{SpanKind, TracerProvider as _};
    use opentelemetry::Value;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt;

    let forge = sluice_testkit::fake_forge::FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", "a".repeat(40).as_str());
    forge.push(
        sluice_testkit::fake_forge::Endpoint::GetPull,
        sluice_testkit::fake_forge::Behaviour::Status {
            status: 503,
            retry_after: None,
        },
    );
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("sluice-test")));
    // Scoped to this thread (the binary's other tests trace as they like);
    // the forge's request threads enter the attempt's span themselves.
    let out = tracing::subscriber::with_default(subscriber, || {
        client_with(&forge, policy(Duration::from_millis(10)), None)
            .get_pull(&repo(), n, &CallOptions::new())
            .expect("valid input")
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    provider.force_flush().expect("flushed");
    let spans = exporter.get_finished_spans().expect("spans");
    let attr = |s: &opentelemetry_sdk::trace::SpanData, k: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == k)
            .map(|kv| kv.value.clone())
    };
    let mut attempts: Vec<_> = spans.iter().filter(|s| s.name == "attempt").collect();
    attempts.sort_by_key(|s| s.start_time);
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    let url = out.operation.remote.clone();
    for (i, s) in attempts.iter().enumerate() {
        assert_eq!(s.span_kind, SpanKind::Client, "{s:#?}");
        assert_eq!(
            attr(s, "server.address"),
            Some(Value::from("127.0.0.1")),
            "{s:#?}"
        );
        assert_eq!(
            attr(s, "url.full"),
            Some(Value::from(url.clone())),
            "{s:#?}"
        );
        assert_eq!(
            attr(s, "http.request.method"),
            Some(Value::from("GET")),
            "{s:#?}"
        );
        // Today's fields stay beside them.
        assert!(
            attr(s, "phase").is_some() && attr(s, "class").is_some(),
            "{s:#?}"
        );
        let request_id = out.attempts[i].request_id.clone().expect("a request id");
        assert_eq!(
            attr(s, "request_id"),
            Some(Value::from(request_id)),
            "{s:#?}"
        );
    }
    let (first, second) = (attempts[0], attempts[1]);
    assert_eq!(
        attr(first, "http.response.status_code"),
        Some(Value::I64(503))
    );
    assert_eq!(attr(first, "error.type"), Some(Value::from("unjudged")));
    assert_eq!(attr(first, "http.request.resend_count"), None);
    assert_eq!(
        attr(second, "http.response.status_code"),
        Some(Value::I64(200))
    );
    assert_eq!(attr(second, "error.type"), None);
    assert_eq!(
        attr(second, "http.request.resend_count"),
        Some(Value::I64(1))
    );
    // Both inside the operation's span.
    let op = spans
        .iter()
        .find(|s| s.name == "operation")
        .expect("the operation's span");
    for s in [first, second] {
        assert_eq!(s.parent_span_id, op.span_context.span_id());
    }
}
