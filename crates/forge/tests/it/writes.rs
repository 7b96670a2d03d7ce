//! The forge's typed writes against the stateful fake GitHub: a merge, a
//! ref update and a check-run update, each with every fault the fake can
//! play, settled by reading and never sent twice once it may have applied.

use crate::common;

use std::time::Duration;

use crate::common::{repo, REPO};
use sluice_forge::{CallOptions, CheckRunUpdate, ForgeClient, MergeMethod};
use sluice_policy::{Bounds, Class, OutcomeKind, Verdict};
use sluice_testkit::fake_forge::{merge_commit_sha, Behaviour, Endpoint, FakeForge};

const HEAD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const OTHER: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const NEXT: &str = "cccccccccccccccccccccccccccccccccccccccc";

/// A client of `forge` whose writes are paced 10 ms apart (the default
/// second would only slow the tests), under `bounds`.
fn client(forge: &FakeForge, bounds: Bounds) -> ForgeClient {
    ForgeClient::builder(&forge.url())
        .policy(common::policy(Duration::from_millis(100)))
        .write_spacing(Duration::from_millis(10))
        .bounds(bounds)
        .build()
        .expect("client")
}

/// Three attempts of two seconds within eight seconds.
fn bounds() -> Bounds {
    Bounds::new(Duration::from_secs(8), Duration::from_secs(2), 3)
}

/// Three attempts of a second within four seconds.
fn four_seconds() -> Bounds {
    Bounds::new(Duration::from_secs(4), Duration::from_secs(1), 3)
}

/// For a write that was not applied, whose settling reads go on to the
/// deadline: two seconds (an attempt gets one, the reserve the other), so
/// the test does not wait out a longer one. The deadline is not what such
/// a test is about.
fn short() -> Bounds {
    Bounds::new(Duration::from_secs(2), Duration::from_secs(1), 3)
}

fn merge(
    forge: &FakeForge,
    n: u64,
    sha: &str,
) -> sluice_policy::Outcome<sluice_forge::MergeResult> {
    client(forge, bounds())
        .merge_pull(&repo(), n, sha, MergeMethod::Squash, &CallOptions::new())
        .expect("valid input")
}

#[test]
fn a_merge_applied_then_answered_502_is_settled_landed_by_reading_with_one_put() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    forge.push(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    let out = merge(&forge, n, HEAD);
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    let rec = out.reconciled.as_ref().expect("settled by reading");
    assert_eq!(rec.verdict, Some(Verdict::Landed));
    let merge_sha = merge_commit_sha(REPO, n, HEAD);
    assert_eq!(rec.observed.get("sha"), Some(&merge_sha));
    let v = out.value.expect("value");
    assert!(v.merged);
    assert_eq!(v.sha.as_deref(), Some(merge_sha.as_str()));
    assert_eq!(
        forge.arrivals(Endpoint::MergePull).len(),
        1,
        "{}",
        forge.log_text()
    );
    assert_eq!(forge.applied_count(&format!("pull:{REPO}#{n}")), 1);
}

#[test]
fn a_merge_applied_then_cut_or_stalled_is_settled_landed_with_one_put() {
    for fault in [
        Behaviour::ApplyThenCut,
        Behaviour::ApplyThenStall(Duration::from_secs(4)),
    ] {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", HEAD);
        forge.push(Endpoint::MergePull, fault.clone());
        // The stall outlasts the attempt's second.
        let out = client(&forge, four_seconds())
            .merge_pull(&repo(), n, HEAD, MergeMethod::Squash, &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{fault:?}: {out:?}");
        assert_eq!(out.attempts[0].class, Some(Class::Unknown), "{fault:?}");
        assert_eq!(
            out.reconciled.as_ref().and_then(|r| r.verdict),
            Some(Verdict::Landed)
        );
        assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "{fault:?}");
    }
}

#[test]
fn a_merge_not_applied_and_answered_502_ends_unknown_that_may_have_applied_with_one_put() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    forge.set(
        Endpoint::MergePull,
        Behaviour::Status {
            status: 502,
            retry_after: None,
        },
    );
    let out = client(&forge, short())
        .merge_pull(&repo(), n, HEAD, MergeMethod::Merge, &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(
        out.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::NotLanded)
    );
    assert_eq!(
        forge.arrivals(Endpoint::MergePull).len(),
        1,
        "{}",
        forge.log_text()
    );
    assert_eq!(forge.applied_count(&format!("pull:{REPO}#{n}")), 0);
    assert_eq!(forge.pull(REPO, n).expect("pull")["merged"], false);
}

#[test]
fn a_merge_whose_head_moved_is_the_forges_answer_409_and_may_not_have_applied() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    forge.set_pull_head(REPO, n, OTHER);
    let out = merge(&forge, n, HEAD);
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.attempts.len(), 1);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("Head branch was modified"), "{cause}");
}

#[test]
fn a_merge_settled_after_the_head_moved_is_moved_and_unknown() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    // The PUT is lost (not applied), and somebody pushes to the head
    // before the settling read.
    forge.push(
        Endpoint::MergePull,
        Behaviour::Status {
            status: 504,
            retry_after: None,
        },
    );
    // The first settling read is held until the head has moved.
    forge.push(
        Endpoint::GetPull,
        Behaviour::Delay(Duration::from_millis(300)),
    );
    let c = client(&forge, bounds());
    let moved = std::thread::scope(|s| {
        let h = s.spawn(|| {
            c.merge_pull(&repo(), n, HEAD, MergeMethod::Merge, &CallOptions::new())
                .expect("valid input")
        });
        assert!(forge.wait_for_completions(Endpoint::MergePull, 1, Duration::from_secs(10)));
        forge.set_pull_head(REPO, n, OTHER);
        h.join().expect("merge")
    });
    assert_eq!(moved.kind, OutcomeKind::Unknown, "{moved:?}");
    assert_eq!(moved.may_have_applied, Some(true));
    assert_eq!(
        moved.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::Moved),
        "{moved:?}"
    );
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1);
}

#[test]
fn a_read_lagging_the_merge_by_a_second_still_ends_landed() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    forge.set_read_lag(Duration::from_secs(1));
    forge.push(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    let out = client(
        &forge,
        Bounds::new(Duration::from_secs(10), Duration::from_secs(2), 3),
    )
    .merge_pull(&repo(), n, HEAD, MergeMethod::Merge, &CallOptions::new())
    .expect("valid input");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(
        out.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::Landed)
    );
    assert!(
        forge.arrivals(Endpoint::GetPull).len() >= 2,
        "the first read saw it open: {}",
        forge.log_text()
    );
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1);
}

#[test]
fn a_merge_the_forge_did_not_take_is_sent_again_and_lands() {
    for fault in [
        Behaviour::Status {
            status: 503,
            retry_after: None,
        },
        Behaviour::RateLimited { retry_after: 0 },
        Behaviour::SecondaryLimitAfter { retry_after: 1 },
    ] {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", HEAD);
        forge.push(Endpoint::MergePull, fault.clone());
        let out = merge(&forge, n, HEAD);
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{fault:?}: {out:?}");
        assert_eq!(out.attempts[0].class, Some(Class::Unjudged), "{fault:?}");
        assert!(out.reconciled.is_none());
        assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 2, "{fault:?}");
        assert_eq!(forge.applied_count(&format!("pull:{REPO}#{n}")), 1);
    }
}

#[test]
fn the_forges_answers_405_409_and_422_end_answered_in_its_words_and_may_not_have_applied() {
    for (status, words) in [
        (405, "not mergeable"),
        (409, "Head branch was modified"),
        (422, "Validation Failed"),
    ] {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", HEAD);
        match status {
            405 => forge.set_pull_mergeable(REPO, n, false),
            409 => forge.set_pull_head(REPO, n, OTHER),
            _ => forge.push(Endpoint::MergePull, Behaviour::Invalid),
        }
        let out = merge(&forge, n, HEAD);
        assert_eq!(out.kind, OutcomeKind::Answered, "{status}: {out:?}");
        assert_eq!(out.may_have_applied, Some(false), "{status}");
        assert_eq!(out.attempts.len(), 1, "{status}: never tried again");
        assert_eq!(out.attempts[0].class, Some(Class::Answered));
        let cause = out.attempts[0].cause.clone().unwrap_or_default();
        assert!(cause.contains(words), "{status}: {cause}");
        assert_eq!(forge.applied_count(&format!("pull:{REPO}#{n}")), 0);
    }
}

fn ref_forge() -> FakeForge {
    let forge = FakeForge::start().expect("fake forge");
    forge.add_commit(NEXT, &[HEAD]);
    forge.set_ref(REPO, "heads/main", HEAD);
    forge
}

fn update_ref(forge: &FakeForge, force: bool) -> sluice_policy::Outcome<sluice_forge::GitRef> {
    update_ref_within(forge, force, four_seconds())
}

fn update_ref_within(
    forge: &FakeForge,
    force: bool,
    bounds: Bounds,
) -> sluice_policy::Outcome<sluice_forge::GitRef> {
    client(forge, bounds)
        .update_ref(&repo(), "heads/main", NEXT, force, &CallOptions::new())
        .expect("valid input")
}

#[test]
fn a_ref_update_reads_the_ref_first_and_moves_it_forward() {
    let forge = ref_forge();
    let out = update_ref(&forge, false);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let v = out.value.expect("the ref");
    assert_eq!(
        (v.name.as_str(), v.object.sha.as_str()),
        ("refs/heads/main", NEXT)
    );
    assert_eq!(forge.arrivals(Endpoint::GetRef).len(), 1, "read first");
    assert_eq!(forge.git_ref(REPO, "heads/main").as_deref(), Some(NEXT));
}

#[test]
fn a_ref_update_applied_then_answered_502_is_landed() {
    let forge = ref_forge();
    forge.push(Endpoint::UpdateRef, Behaviour::ApplyThenStatus(502));
    let out = update_ref(&forge, false);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let rec = out.reconciled.expect("settled");
    assert_eq!(rec.verdict, Some(Verdict::Landed));
    assert_eq!(
        rec.observed.get("refs/heads/main").map(String::as_str),
        Some(NEXT)
    );
    assert_eq!(forge.arrivals(Endpoint::UpdateRef).len(), 1);
}

#[test]
fn a_ref_update_not_applied_is_not_landed_at_the_sha_read_first_and_not_sent_again() {
    let forge = ref_forge();
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::Status {
            status: 502,
            retry_after: None,
        },
    );
    let out = update_ref_within(&forge, false, short());
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.may_have_applied, Some(true));
    let rec = out.reconciled.expect("settled");
    assert_eq!(rec.verdict, Some(Verdict::NotLanded));
    assert_eq!(
        rec.observed.get("refs/heads/main").map(String::as_str),
        Some(HEAD)
    );
    assert_eq!(forge.arrivals(Endpoint::UpdateRef).len(), 1);
    assert_eq!(forge.git_ref(REPO, "heads/main").as_deref(), Some(HEAD));
}

#[test]
fn a_ref_moved_by_somebody_else_before_the_settling_read_is_moved() {
    let forge = ref_forge();
    forge.push(Endpoint::UpdateRef, Behaviour::ApplyThenCut);
    let c = client(&forge, four_seconds());
    // Whoever moves the ref does so between the lost answer and the read:
    // the first settling read is held until then.
    forge.push(Endpoint::GetRef, Behaviour::Ok);
    forge.push(
        Endpoint::GetRef,
        Behaviour::Delay(Duration::from_millis(300)),
    );
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| {
            c.update_ref(&repo(), "heads/main", NEXT, false, &CallOptions::new())
                .expect("valid input")
        });
        assert!(forge.wait_for_completions(Endpoint::UpdateRef, 1, Duration::from_secs(10)));
        forge.set_ref(REPO, "heads/main", OTHER);
        h.join().expect("update")
    });
    assert_eq!(
        out.kind,
        OutcomeKind::Unknown,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.reconciled.and_then(|r| r.verdict), Some(Verdict::Moved));
    assert_eq!(forge.arrivals(Endpoint::UpdateRef).len(), 1);
}

#[test]
fn a_non_fast_forward_ref_update_is_answered_422_and_a_forced_one_lands() {
    let forge = ref_forge();
    forge.set_ref(REPO, "heads/main", OTHER);
    let out = update_ref(&forge, false);
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.may_have_applied, Some(false));
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("not a fast forward"), "{cause}");
    let out = update_ref(&forge, true);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(forge.git_ref(REPO, "heads/main").as_deref(), Some(NEXT));
}

fn run_forge() -> (FakeForge, u64) {
    let forge = FakeForge::start().expect("fake forge");
    let id = forge.add_check_run(REPO, "sluice", HEAD, "in_progress", None, Some("land-1"));
    (forge, id)
}

fn complete(forge: &FakeForge, id: u64) -> sluice_policy::Outcome<sluice_forge::CheckRun> {
    complete_within(forge, id, four_seconds())
}

fn complete_within(
    forge: &FakeForge,
    id: u64,
    bounds: Bounds,
) -> sluice_policy::Outcome<sluice_forge::CheckRun> {
    client(forge, bounds)
        .update_check_run(
            &repo(),
            id,
            &CheckRunUpdate::new()
                .status("completed")
                .conclusion("success"),
            &CallOptions::new(),
        )
        .expect("valid input")
}

#[test]
fn a_check_run_update_applied_then_cut_is_landed_with_the_fields_sent() {
    let (forge, id) = run_forge();
    forge.push(Endpoint::UpdateCheckRun, Behaviour::ApplyThenCut);
    let out = complete(&forge, id);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        out.reconciled.as_ref().and_then(|r| r.verdict),
        Some(Verdict::Landed)
    );
    let run = out.value.expect("run");
    assert_eq!(run.conclusion.as_deref(), Some("success"));
    assert_eq!(forge.arrivals(Endpoint::UpdateCheckRun).len(), 1);
    assert_eq!(
        forge.arrivals(Endpoint::GetCheckRun).len(),
        2,
        "read first, then settled"
    );
    assert_eq!(forge.applied_count(&format!("check-run:{id}")), 1);
}

#[test]
fn a_check_run_update_not_applied_is_not_landed_with_the_fields_read_before() {
    let (forge, id) = run_forge();
    forge.push(
        Endpoint::UpdateCheckRun,
        Behaviour::Status {
            status: 500,
            retry_after: None,
        },
    );
    let out = complete_within(&forge, id, short());
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.may_have_applied, Some(true));
    let rec = out.reconciled.expect("settled");
    assert_eq!(rec.verdict, Some(Verdict::NotLanded));
    assert_eq!(
        rec.observed
            .get(&format!("check-run:{id}.status"))
            .map(String::as_str),
        Some("in_progress")
    );
    assert_eq!(forge.arrivals(Endpoint::UpdateCheckRun).len(), 1);
    assert_eq!(
        forge.check_run(REPO, id).expect("run")["status"],
        "in_progress"
    );
}

#[test]
fn a_check_run_update_the_forge_refuses_is_answered_and_may_not_have_applied() {
    let (forge, id) = run_forge();
    forge.push(Endpoint::UpdateCheckRun, Behaviour::Invalid);
    let out = complete(&forge, id);
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(forge.applied_count(&format!("check-run:{id}")), 0);
}

#[test]
fn a_read_the_forge_did_not_take_is_read_again() {
    for fault in [
        Behaviour::RateLimited { retry_after: 0 },
        Behaviour::PrimaryLimit {
            reset: std::time::SystemTime::now() + Duration::from_secs(1),
        },
    ] {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", HEAD);
        forge.push(Endpoint::GetPull, fault.clone());
        let out = client(&forge, bounds())
            .get_pull(&repo(), n, &CallOptions::new())
            .expect("valid input");
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{fault:?}: {out:?}\n{}",
            forge.log_text()
        );
        assert_eq!(out.attempts.len(), 2, "{fault:?}");
    }
}

#[test]
fn two_writes_to_one_host_record_the_second_ones_wait_at_the_write_gate() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    let spacing = Duration::from_millis(300);
    let client = ForgeClient::builder(&forge.url())
        .policy(common::policy(Duration::from_millis(100)))
        .write_spacing(spacing)
        .bounds(bounds())
        .build()
        .expect("client");
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let outs = metrics::with_local_recorder(&recorder, || {
        ["first", "second"].map(|body| {
            client
                .create_issue_comment(&repo(), n, body, &CallOptions::new())
                .expect("valid input")
        })
    });
    for out in &outs {
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    }
    let host = format!("127.0.0.1:{}", forge.addr().port());
    let waits: Vec<f64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == sluice_policy::metric::GATE_WAIT_SECONDS
                && key.labels().any(|l| l.key() == "host" && l.value() == host)
        })
        .flat_map(|(.., value)| match value {
            DebugValue::Histogram(v) => v.into_iter().map(|f| f.into_inner()).collect::<Vec<f64>>(),
            other => panic!("not a histogram: {other:?}"),
        })
        .collect();
    assert_eq!(waits.len(), 2, "one pass per write: {waits:?}");
    // The first passed at once; the second waited out most of the spacing
    // (the spacing runs from the first's end, which came just before).
    assert!(waits[0] < 0.2, "{waits:?}");
    assert!(waits[1] >= 0.2, "{waits:?}");
    // The attempt's record keeps the wait (the CLI's table shows it).
    assert!(
        outs[1].attempts[0].waited_ms.is_some_and(|w| w >= 200),
        "{:?}",
        outs[1].attempts
    );
}

#[test]
fn the_callers_traceparent_and_the_clients_header_go_on_every_request_settling_reads_included() {
    let forge = ref_forge();
    // A refused PATCH (tried again), then one applied and answered 502:
    // settled by reading.
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::Status {
            status: 503,
            retry_after: None,
        },
    );
    forge.push(Endpoint::UpdateRef, Behaviour::ApplyThenStatus(502));
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let opts = CallOptions::new()
        .header("traceparent", traceparent)
        .expect("a caller may give a traceparent");
    let out = ForgeClient::builder(&forge.url())
        .policy(common::policy(Duration::from_millis(100)))
        .write_spacing(Duration::from_millis(10))
        .bounds(four_seconds())
        .header("x-service-request-id", "job-42")
        .build()
        .expect("client")
        .update_ref(&repo(), "heads/main", NEXT, false, &opts)
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    assert!(out.reconciled.is_some(), "settled by reading: {out:?}");
    let arrivals = forge.all_arrivals();
    // Two baseline reads, two PATCHes, at least one settling read.
    assert!(arrivals.len() >= 5, "{}", forge.log_text());
    for a in &arrivals {
        assert_eq!(a.header("traceparent"), Some(traceparent), "{a}");
        assert_eq!(a.header("x-service-request-id"), Some("job-42"), "{a}");
    }
}

#[test]
fn headers_the_client_sets_itself_are_refused_as_input() {
    for name in [
        "Authorization",
        "Host",
        "Content-Length",
        "Transfer-Encoding",
        "X-GitHub-Api-Version",
    ] {
        assert!(
            matches!(
                CallOptions::new().header(name, "x"),
                Err(sluice_policy::HeaderRefused::Reserved { .. })
            ),
            "{name}"
        );
        let built = ForgeClient::builder("http://127.0.0.1:9/")
            .header(name, "x")
            .build();
        assert!(
            matches!(
                built,
                Err(sluice_forge::ForgeError::Header(
                    sluice_policy::HeaderRefused::Reserved { .. }
                ))
            ),
            "{name}"
        );
    }
    assert!(matches!(
        ForgeClient::builder("http://127.0.0.1:9/")
            .header("x-id", "a\nb")
            .build(),
        Err(sluice_forge::ForgeError::Header(
            sluice_policy::HeaderRefused::Value { .. }
        ))
    ));
}
