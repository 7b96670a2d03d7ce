//! The exercise, against the fake forge over loopback: a CI-status
//! read under a policy of two attempts, five seconds each, inside a
//! twelve-second budget (and the writes of points 8–10).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::paged::PagedForge;
use crate::common::*;
use sluice_forge::{CallOptions, ForgeClient, MergeMethod, NewCheckRun, NewPullRequest};
use sluice_policy::{
    fingerprint, Bounds, Class, ManualClock, OutcomeKind, Policy, Sleeper, Stopped, Verdict,
};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, Event, FakeForge};

fn opts() -> CallOptions {
    CallOptions::new().bounds(exercise())
}

fn seed_ci(forge: &FakeForge) {
    forge.set_commit_statuses(REPO, SHA, &[("build", "success"), ("lint", "success")]);
    forge.add_check_run(
        REPO,
        "test",
        SHA,
        "completed",
        Some("success"),
        Some("ext-1"),
    );
}

// 1
#[test]
fn an_ok_ci_status_read_returns_the_real_status_with_one_request_each() {
    let forge = FakeForge::start().expect("fake forge");
    seed_ci(&forge);
    let out = client(&forge)
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{:?}\n{}",
        out.error,
        forge.log_text()
    );
    let ci = out.value.expect("value");
    assert_eq!(ci.combined.state, "success");
    assert_eq!(ci.combined.sha, SHA);
    let contexts: Vec<_> = ci
        .combined
        .statuses
        .iter()
        .map(|s| s.context.as_str())
        .collect();
    assert_eq!(contexts, ["build", "lint"]);
    assert_eq!(ci.check_runs.len(), 1);
    assert_eq!(ci.check_runs[0].name, "test");
    assert_eq!(ci.check_runs[0].conclusion.as_deref(), Some("success"));
    assert_eq!(ci.state, sluice_forge::CiState::Success);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].phase, "body");
    assert_eq!(forge.arrivals(Endpoint::CombinedStatus).len(), 1);
    assert_eq!(forge.arrivals(Endpoint::ListCheckRuns).len(), 1);
    assert_eq!(forge.all_arrivals().len(), 2);
    assert_eq!(out.may_have_applied, None);
    assert_eq!(out.operation.kind, "ci-status");
}

// 2
#[test]
fn a_delay_beyond_the_attempt_timeout_ends_unknown_after_both_attempts_and_the_late_answers_never_become_the_result(
) {
    let forge = FakeForge::start().expect("fake forge");
    seed_ci(&forge);
    forge.set(
        Endpoint::CombinedStatus,
        Behaviour::Delay(Duration::from_secs(6)),
    );
    let client = client(&forge);
    let out = client
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    let returned = Instant::now();
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert!(out.value.is_none());
    assert!(planned_ms(&out) <= out.deadline_ms, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    for a in &out.attempts {
        assert_eq!(a.class, Some(Class::Unknown), "{a:?}");
        assert_eq!(a.phase, "request-sent");
        assert!(a.timeout_ms <= 5_000);
        // Each attempt waited for its answer until its timeout cut it.
        assert!(a.elapsed_ms >= 4_900, "{a:?}");
    }
    assert_eq!(out.stopped, Some(Stopped::MaxAttempts));
    // The fake forge went on with the delayed work after the caller stopped
    // waiting: both requests complete, each about 6 s after it arrived, the
    // last one after the outcome was returned.
    assert!(
        forge.wait_for_completions(Endpoint::CombinedStatus, 2, Duration::from_secs(5)),
        "{}",
        forge.log_text()
    );
    let arrivals = forge.arrivals(Endpoint::CombinedStatus);
    let done = forge.completions(Endpoint::CombinedStatus);
    assert_eq!(arrivals.len(), 2);
    for (a, d) in arrivals.iter().zip(&done) {
        assert!(
            gap(a.at, d.at) >= Duration::from_secs(6),
            "{}",
            forge.log_text()
        );
        assert!(
            matches!(d.event, Event::Answered(200) | Event::ClientGone(200)),
            "{d}"
        );
    }
    // The first answer came after the first attempt had given up (5 s).
    assert!(gap(arrivals[0].at, done[0].at) > Duration::from_millis(out.attempts[0].elapsed_ms));
    assert!(done[1].at > returned, "{}", forge.log_text());
    // The late answers were never read: the check runs were never asked for.
    assert!(forge.arrivals(Endpoint::ListCheckRuns).is_empty());
}

// 3
#[test]
fn a_persistent_5xx_ends_unknown_after_at_most_two_requests_within_the_budget() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CombinedStatus, Behaviour::Fail5xx);
    let client = client(&forge);
    let out = client
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert!(planned_ms(&out) <= out.deadline_ms, "{:?}", out.attempts);
    assert!(forge.arrivals(Endpoint::CombinedStatus).len() <= 2);
    assert_eq!(out.attempts.len(), 2);
    assert!(out
        .attempts
        .iter()
        .all(|a| a.class == Some(Class::Unjudged)));
    assert_eq!(out.stopped, Some(Stopped::MaxAttempts));
    assert!(out.error.expect("error").cause.starts_with("HTTP 500"));
}

// 4
#[test]
fn an_invalid_request_is_answered_after_exactly_one_request() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CombinedStatus, Behaviour::Invalid);
    let out = client(&forge)
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    let err = out.error.expect("error");
    assert_eq!(err.class, Class::Answered);
    assert!(
        err.cause.starts_with("HTTP 422: Validation Failed"),
        "{}",
        err.cause
    );
    assert_eq!(forge.all_arrivals().len(), 1);
    assert_eq!(out.stopped, None);
}

// 5
#[test]
fn asking_again_for_an_exhausted_read_by_its_operation_id_is_rejected_without_a_request() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CombinedStatus, Behaviour::Fail5xx);
    let client = client(&forge);
    let first = client
        .ci_status(&repo(), SHA, &opts().id("ci-read-7"))
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Unknown);
    let before = forge.all_arrivals().len();
    assert_eq!(before, 2);
    let again = client
        .ci_status(&repo(), SHA, &opts().id("ci-read-7"))
        .expect("valid input");
    assert_eq!(again.kind, OutcomeKind::Rejected);
    assert!(again.attempts.is_empty());
    let previous = again.previous.expect("the earlier run");
    assert_eq!(previous.result, OutcomeKind::Unknown);
    assert_eq!(previous.attempts.len(), 2);
    assert_eq!(forge.all_arrivals().len(), before, "{}", forge.log_text());
}

// 6
#[test]
fn a_429_with_retry_after_two_seconds_is_retried_no_sooner_than_two_seconds_later() {
    let forge = FakeForge::start().expect("fake forge");
    seed_ci(&forge);
    forge.push(
        Endpoint::CombinedStatus,
        Behaviour::RateLimited { retry_after: 2 },
    );
    let out = client(&forge)
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let a = forge.arrivals(Endpoint::CombinedStatus);
    assert_eq!(a.len(), 2);
    assert!(
        gap(a[0].at, a[1].at) >= Duration::from_secs(2),
        "{}",
        forge.log_text()
    );
    assert_eq!(out.attempts[0].delay_ms, Some(2_000));
}

// 6
#[test]
fn a_retry_after_beyond_the_budget_stops_at_once_without_a_second_request() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(
        Endpoint::CombinedStatus,
        Behaviour::RateLimited { retry_after: 30 },
    );
    let (policy, sleeper) = recorded_policy();
    let client = client_with(&forge, policy, None);
    let out = client
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::RetryHintExceedsBudget));
    assert_eq!(forge.all_arrivals().len(), 1);
    assert!(
        sleeper.pauses().is_empty(),
        "stopped at once: {:?}",
        sleeper.pauses()
    );
    assert_eq!(out.attempts[0].delay_ms, None);
}

// 7
#[test]
fn a_refused_token_is_bought_afresh_and_the_next_attempt_waits_the_settle_pause_and_succeeds() {
    let forge = FakeForge::start().expect("fake forge");
    seed_ci(&forge);
    let valid = Behaviour::Token {
        valid: vec!["tok-fresh-B".into()],
    };
    forge.set(Endpoint::CombinedStatus, valid.clone());
    forge.set(Endpoint::ListCheckRuns, valid);
    let source = Scripted::new(&["tok-stale-A", "tok-fresh-B"]);
    let settle = Duration::from_secs(1);
    let client = client_with(&forge, policy(settle), Some(source.clone()));
    let (out, logs) = capture(|| {
        client
            .ci_status(&repo(), SHA, &opts())
            .expect("valid input")
    });
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(source.calls(), 2, "the token source is called twice");
    let a = forge.arrivals(Endpoint::CombinedStatus);
    assert_eq!(a.len(), 2);
    assert_eq!(
        a[0].token.as_deref(),
        Some(fingerprint("tok-stale-A").as_str())
    );
    assert_eq!(
        a[1].token.as_deref(),
        Some(fingerprint("tok-fresh-B").as_str())
    );
    assert!(gap(a[0].at, a[1].at) >= settle, "{}", forge.log_text());
    assert_eq!(out.refused_credentials, vec![fingerprint("tok-stale-A")]);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0].delay_ms.expect("delay") >= 1_000);
    // The token text is nowhere; its fingerprint is in the logs.
    let everything = format!(
        "{logs}\n{out:?}\n{}\n{client:?}",
        serde_json::to_string(&out).expect("json")
    );
    for t in ["tok-stale-A", "tok-fresh-B"] {
        assert!(!everything.contains(t), "{t} leaked:\n{everything}");
    }
    assert!(logs.contains(&fingerprint("tok-stale-A")), "{logs}");
}

// 7
#[test]
fn a_refusal_that_stands_is_answered_with_the_fingerprint_of_every_refused_token_and_no_token_text()
{
    let forge = FakeForge::start().expect("fake forge");
    forge.set(
        Endpoint::CombinedStatus,
        Behaviour::Token {
            valid: vec!["never-handed-out".into()],
        },
    );
    let source = Scripted::new(&["tok-one-x", "tok-two-y", "tok-three-z"]);
    let client = client_with(
        &forge,
        policy(Duration::from_millis(300)),
        Some(source.clone()),
    );
    let (out, logs) = capture(|| {
        client
            .ci_status(&repo(), SHA, &opts())
            .expect("valid input")
    });
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::CredentialRefused));
    assert_eq!(
        out.refused_credentials,
        vec![fingerprint("tok-one-x"), fingerprint("tok-two-y")]
    );
    let err = out.error.clone().expect("error");
    assert!(err.cause.contains("401"), "{}", err.cause);
    assert_eq!(forge.all_arrivals().len(), 2);
    let everything = format!(
        "{logs}\n{out:?}\n{err}\n{err:?}\n{}",
        serde_json::to_string(&out).expect("json")
    );
    for t in ["tok-one-x", "tok-two-y", "tok-three-z"] {
        assert!(!everything.contains(t), "{t} leaked:\n{everything}");
    }
    assert!(logs.contains("credential refusal stands"), "{logs}");
}

// 8
#[test]
fn a_created_pull_request_whose_answer_is_cut_is_not_sent_again_and_is_found_by_head_and_base() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CreatePull, Behaviour::ApplyThenCut);
    let new = NewPullRequest::new("Land feature", "feature", "main").body("from sluice");
    let out = client(&forge)
        .create_pull(&repo(), &new, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    let pr = out.value.clone().expect("pull request");
    assert_eq!(
        (
            pr.number,
            pr.head.git_ref.as_str(),
            pr.base.git_ref.as_str()
        ),
        (1, "feature", "main")
    );
    let r = out.reconciled.clone().expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(r.observed.get("pull").map(String::as_str), Some("1"));
    assert_eq!(
        forge.arrivals(Endpoint::CreatePull).len(),
        1,
        "not sent again"
    );
    assert!(forge.wait_for_completions(Endpoint::CreatePull, 1, Duration::from_secs(5)));
    assert_eq!(forge.completions(Endpoint::CreatePull)[0].event, Event::Cut);
    assert!(!forge.arrivals(Endpoint::ListPulls).is_empty());
    assert_eq!(forge.pulls(REPO).len(), 1);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert_eq!(out.attempts[0].phase, "request-sent");
}

// 8
#[test]
fn a_created_check_run_whose_answer_is_cut_is_not_sent_again_and_is_found_by_its_external_id() {
    let forge = FakeForge::start().expect("fake forge");
    // Another run of the same name on the same commit must not be taken for it.
    forge.add_check_run(
        REPO,
        "sluice",
        SHA,
        "completed",
        Some("success"),
        Some("other-run"),
    );
    forge.set(Endpoint::CreateCheckRun, Behaviour::ApplyThenCut);
    let new = NewCheckRun::new("sluice", SHA, "land-42").status("in_progress", None);
    let out = client(&forge)
        .create_check_run(&repo(), &new, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    let run = out.value.clone().expect("check run");
    assert_eq!(run.external_id.as_deref(), Some("land-42"));
    assert_eq!(run.status, "in_progress");
    let r = out.reconciled.clone().expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(
        r.observed.get("check-run:land-42"),
        Some(&run.id.expect("an id").to_string())
    );
    assert_eq!(
        forge.arrivals(Endpoint::CreateCheckRun).len(),
        1,
        "not sent again"
    );
    assert_eq!(forge.check_runs(REPO).len(), 2);
}

// 9
#[test]
fn a_502_answering_a_pull_request_the_forge_applied_is_settled_by_reading_and_not_sent_again() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CreatePull, Behaviour::ApplyThenStatus(502));
    let new = NewPullRequest::new("Land feature", "feature", "main");
    let out = client(&forge)
        .create_pull(&repo(), &new, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(
        out.reconciled.expect("settled").verdict,
        Some(Verdict::Landed)
    );
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap_or("")
        .starts_with("HTTP 502"));
    assert_eq!(
        forge.arrivals(Endpoint::CreatePull).len(),
        1,
        "not sent again"
    );
    assert_eq!(forge.pulls(REPO).len(), 1);
}

// 9
#[test]
fn a_503_with_retry_after_answering_a_write_is_retried_after_the_hint() {
    let forge = FakeForge::start().expect("fake forge");
    forge.push(
        Endpoint::CreatePull,
        Behaviour::Status {
            status: 503,
            retry_after: Some(1),
        },
    );
    let new = NewPullRequest::new("Land feature", "feature", "main");
    let out = client(&forge)
        .create_pull(&repo(), &new, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert!(
        out.reconciled.is_none(),
        "a 503 is unjudged: nothing to settle"
    );
    let a = forge.arrivals(Endpoint::CreatePull);
    assert_eq!(a.len(), 2);
    assert!(
        gap(a[0].at, a[1].at) >= Duration::from_secs(1),
        "{}",
        forge.log_text()
    );
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert_eq!(out.attempts[0].delay_ms, Some(1_000));
    assert_eq!(forge.pulls(REPO).len(), 1);
    assert!(forge.arrivals(Endpoint::ListPulls).is_empty());
}

// 10
#[test]
fn a_secondary_rate_limit_without_retry_after_under_a_ten_second_budget_stops_at_once_saying_the_wait_did_not_fit(
) {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CombinedStatus, Behaviour::SecondaryLimit);
    let (policy, sleeper) = recorded_policy();
    let client = client_with(&forge, policy, None);
    let bounds = Bounds::new(Duration::from_secs(10), Duration::from_secs(5), 2);
    let out = client
        .ci_status(&repo(), SHA, &CallOptions::new().bounds(bounds))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::RetryHintExceedsBudget));
    assert_eq!(forge.all_arrivals().len(), 1, "no second request");
    assert!(
        sleeper.pauses().is_empty(),
        "stopped at once: {:?}",
        sleeper.pauses()
    );
    let err = out.error.expect("error");
    assert_eq!(err.class, Class::Unjudged);
    assert_eq!(err.retry_after, Some(Duration::from_secs(60)));
    assert!(err.cause.contains("secondary rate limit"), "{}", err.cause);
}

/// A sleeper over a [`ManualClock`]: each pause moves the policy's clock
/// at once by the whole pause, and notes how many requests the forge had
/// seen when it began. A client that broke a pause into shorter waits with
/// requests between them would show several pauses and more arrivals.
struct PauseLog {
    clock: ManualClock,
    forge: Arc<FakeForge>,
    pauses: Mutex<Vec<(Duration, usize)>>,
}

impl Sleeper for PauseLog {
    fn sleep(&self, dur: Duration, cancel: &AtomicBool) {
        let seen = self.forge.all_arrivals().len();
        self.clock.sleep(dur, cancel);
        self.pauses.lock().expect("pauses").push((dur, seen));
    }
}

/// A client of `forge` whose policy runs on a manual clock (the pauses
/// noted by the returned log), writes paced 10 ms apart.
fn manual_client(forge: &Arc<FakeForge>) -> (ForgeClient, Arc<PauseLog>) {
    let clock = ManualClock::new();
    let log = Arc::new(PauseLog {
        clock: clock.clone(),
        forge: Arc::clone(forge),
        pauses: Mutex::new(Vec::new()),
    });
    let policy = Policy::builder()
        .clock(Arc::new(clock))
        .sleeper(log.clone())
        .build();
    let client = ForgeClient::builder(&forge.url())
        .policy(Arc::new(policy))
        .write_spacing(Duration::from_millis(10))
        .build()
        .expect("client");
    (client, log)
}

// 10
#[test]
fn a_secondary_rate_limit_without_retry_after_is_waited_out_whole_when_the_deadline_has_room_then_the_read_succeeds(
) {
    let forge = Arc::new(FakeForge::start().expect("fake forge"));
    let n = forge.add_pull(REPO, "feature", "main", SHA);
    forge.push(Endpoint::GetPull, Behaviour::SecondaryLimit);
    let (client, log) = manual_client(&forge);
    let bounds = Bounds::new(Duration::from_secs(120), Duration::from_secs(10), 3);
    let out = client
        .get_pull(&repo(), n, &CallOptions::new().bounds(bounds))
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(out.attempts.len(), 2, "{out:?}");
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert_eq!(
        out.attempts[0].delay_ms,
        Some(60_000),
        "GitHub's least wait"
    );
    // One pause of the whole minute, begun after the limited request; the
    // next request came after it.
    assert_eq!(
        *log.pauses.lock().expect("pauses"),
        vec![(Duration::from_secs(60), 1)]
    );
    assert_eq!(forge.arrivals(Endpoint::GetPull).len(), 2);
    assert!(out.elapsed_ms >= 60_000, "{} ms", out.elapsed_ms);
}

// 10
#[test]
fn a_secondary_rate_limit_whose_retry_after_fits_the_deadline_is_waited_exactly_then_the_write_lands_once(
) {
    let forge = Arc::new(FakeForge::start().expect("fake forge"));
    let n = forge.add_pull(REPO, "feature", "main", SHA);
    forge.push(
        Endpoint::MergePull,
        Behaviour::SecondaryLimitAfter { retry_after: 30 },
    );
    let (client, log) = manual_client(&forge);
    let bounds = Bounds::new(Duration::from_secs(60), Duration::from_secs(10), 3);
    let out = client
        .merge_pull(
            &repo(),
            n,
            SHA,
            MergeMethod::Merge,
            &CallOptions::new().bounds(bounds),
        )
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert_eq!(
        out.attempts[0].delay_ms,
        Some(30_000),
        "Retry-After, not a minute"
    );
    assert_eq!(
        *log.pauses.lock().expect("pauses"),
        vec![(Duration::from_secs(30), 1)]
    );
    assert!(out.reconciled.is_none(), "not taken: nothing to settle");
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 2);
    assert_eq!(forge.applied_count(&format!("pull:{REPO}#{n}")), 1);
}

// 10
#[test]
fn two_threads_writing_to_one_forge_arrive_at_least_a_second_apart() {
    let forge = FakeForge::start().expect("fake forge");
    let client = Arc::new(client(&forge));
    std::thread::scope(|s| {
        for i in 0..2 {
            let client = Arc::clone(&client);
            s.spawn(move || {
                let new = NewCheckRun::new("sluice", SHA, format!("thread-{i}"));
                let out = client
                    .create_check_run(&repo(), &new, &opts())
                    .expect("valid input");
                assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
            });
        }
    });
    let a = forge.arrivals(Endpoint::CreateCheckRun);
    assert_eq!(a.len(), 2);
    assert!(
        gap(a[0].at, a[1].at) >= Duration::from_secs(1),
        "{}",
        forge.log_text()
    );
    assert_eq!(forge.check_runs(REPO).len(), 2);
}

// Every page
fn paged_client(forge: &PagedForge) -> sluice_forge::ForgeClient {
    sluice_forge::ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_secs(1)))
        .bounds(exercise())
        .build()
        .expect("client")
}

/// How many requests asked for check-run page `page` (1: no `page`).
fn check_run_pages(log: &[String], page: usize) -> usize {
    log.iter()
        .filter(|t| t.contains("/check-runs"))
        .filter(|t| {
            let p = t
                .split('&')
                .find_map(|kv| kv.strip_prefix("page="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            p == page
        })
        .count()
}

#[test]
fn ci_status_reads_250_check_runs_over_three_pages_and_a_failed_page_is_read_again_alone() {
    let forge = PagedForge::start(250, 0, Some(2));
    let out = paged_client(&forge)
        .ci_status(&repo(), SHA, &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{:?}",
        forge.log()
    );
    let ci = out.value.expect("value");
    let ids: Vec<Option<u64>> = ci.check_runs.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        (1..=250).map(Some).collect::<Vec<_>>(),
        "every check run, in order"
    );
    assert!(
        ci.check_runs.iter().all(|r| r.head_sha.is_empty()),
        "a check run without head_sha is still a check run"
    );
    // The failed page was the first attempt's failure; the second attempt
    // read it again, and only it.
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap_or("")
        .starts_with("HTTP 502"));
    let log = forge.log();
    assert_eq!(check_run_pages(&log, 1), 1, "{log:?}");
    assert_eq!(check_run_pages(&log, 2), 2, "{log:?}");
    assert_eq!(check_run_pages(&log, 3), 1, "{log:?}");
    assert_eq!(
        log.iter().filter(|t| t.ends_with("/status")).count(),
        1,
        "the combined status is not read again: {log:?}"
    );
}

#[test]
fn pull_requests_from_a_head_are_listed_to_the_last_page() {
    let forge = PagedForge::start(0, 150, None);
    let out = paged_client(&forge)
        .list_pulls_by_head(&repo(), "feature", None, "open", &opts())
        .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{:?}",
        forge.log()
    );
    let numbers: Vec<u64> = out.value.expect("value").iter().map(|p| p.number).collect();
    assert_eq!(numbers, (1..=150).collect::<Vec<u64>>());
    let log = forge.log();
    assert_eq!(log.len(), 2, "two pages of 100: {log:?}");
    assert!(log[1].contains("page=2"), "{log:?}");
}

// Conditional reads
#[test]
fn an_unchanged_pull_request_read_again_is_answered_304_from_what_was_kept() {
    let forge = PagedForge::start(0, 0, None);
    let client = paged_client(&forge);
    let first = client.get_pull(&repo(), 7, &opts()).expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{first:?}");
    assert_eq!(
        forge.not_modified(),
        0,
        "nothing kept yet: an ordinary read"
    );
    for _ in 0..3 {
        let again = client.get_pull(&repo(), 7, &opts()).expect("valid input");
        assert_eq!(again.kind, OutcomeKind::Succeeded, "{again:?}");
        assert_eq!(again.value, first.value, "the kept answer");
    }
    assert_eq!(
        forge.not_modified(),
        3,
        "each read again sent If-None-Match"
    );
    // Another credential is another key: its first read is unconditional,
    // its second conditional.
    let other = || opts().credentials(Scripted::new(&["tok-other"]));
    let out = client.get_pull(&repo(), 7, &other()).expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(forge.not_modified(), 3, "kept per credential");
    let out = client.get_pull(&repo(), 7, &other()).expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(forge.not_modified(), 4);
}

#[test]
fn a_check_run_on_the_last_page_is_found_and_one_nowhere_is_absent() {
    let forge = PagedForge::start(250, 0, None);
    let client = paged_client(&forge);
    let out = client
        .find_check_run(&repo(), SHA, None, "ext-240", &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let found = out.value.expect("value").expect("found on the third page");
    assert_eq!(found.id, Some(240));
    let log = forge.log();
    assert_eq!(check_run_pages(&log, 3), 1, "{log:?}");
    let out = client
        .find_check_run(&repo(), SHA, None, "ext-999", &opts())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        out.value.expect("value"),
        None,
        "read to the last page, not there"
    );
}
