//! The forge writes' settling reads against the stateful fake GitHub:
//! baselines taken under the host's write slot (a ref update whose
//! baseline moved while it waited at the gate; a retried PATCH); a merge's
//! truth without `merge_commit_sha` (its `merged` event) and with the git
//! side merged while the pull request reads open (compare).

use std::time::Duration;

use crate::common::{self, repo, REPO};
use sluice_forge::{CallOptions, ForgeClient, MergeMethod};
use sluice_policy::{Bounds, Class, OutcomeKind, Verdict};
use sluice_testkit::fake_forge::{merge_commit_sha, Behaviour, Endpoint, FakeForge};

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

/// A client of `forge` whose writes are paced 10 ms apart, under `bounds`.
fn client(forge: &FakeForge, bounds: Bounds) -> ForgeClient {
    ForgeClient::builder(&forge.url())
        .policy(common::policy(Duration::from_millis(100)))
        .write_spacing(Duration::from_millis(10))
        .bounds(bounds)
        .build()
        .expect("client")
}

/// `heads/main` at A, with A ← B ← C.
fn three_commits(forge: &FakeForge) {
    forge.add_commit(B, &[A]);
    forge.add_commit(C, &[B]);
    forge.set_ref(REPO, "heads/main", A);
}

#[test]
fn a_ref_update_whose_baseline_moved_while_it_waited_at_the_gate_settles_landed() {
    let forge = FakeForge::start().expect("fake forge");
    three_commits(&forge);
    let c = client(
        &forge,
        Bounds::new(Duration::from_secs(10), Duration::from_secs(3), 3),
    );
    // The first update (to B) holds the host's write slot while the forge
    // takes its time; the second (to C) is applied, its reads lag it a
    // second, and its answer is a 502.
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::Delay(Duration::from_millis(800)),
    );
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::ApplyLaggingThenStatus {
            lag: Duration::from_secs(1),
            status: 502,
        },
    );
    let (first, second) = std::thread::scope(|s| {
        let c1 = c.clone();
        let first = s.spawn(move || {
            c1.update_ref(&repo(), "heads/main", B, false, &CallOptions::new())
                .expect("valid input")
        });
        // The first update's PATCH is at the forge: it holds the slot.
        assert!(forge.wait_for_arrivals(Endpoint::UpdateRef, 1, Duration::from_secs(30)));
        let second = c
            .update_ref(&repo(), "heads/main", C, false, &CallOptions::new())
            .expect("valid input");
        (first.join().expect("first"), second)
    });
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    assert_eq!(
        second.kind,
        OutcomeKind::Succeeded,
        "{:?}",
        second.reconciled
    );
    assert_eq!(second.attempts.len(), 1);
    assert_eq!(second.attempts[0].class, Some(Class::Unknown));
    let r = second.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    // Its baseline was B, read under the slot: the lagging read (B) is
    // not-landed, read again until it landed — never `moved`.
    assert!(
        r.reads.iter().all(|x| x.verdict != Some(Verdict::Moved)),
        "{:?}",
        r.reads
    );
    assert_eq!(forge.git_ref(REPO, "heads/main").as_deref(), Some(C));
    // Each update read its baseline after the previous write had ended:
    // the second's GET of the ref came after the first's PATCH answered.
    let log = forge.log();
    let first_patch_done = log
        .iter()
        .position(|e| e.endpoint == Endpoint::UpdateRef && e.is_completion())
        .expect("the first PATCH answered");
    let gets: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.endpoint == Endpoint::GetRef && !e.is_completion())
        .map(|(i, _)| i)
        .collect();
    assert!(
        gets[1] > first_patch_done,
        "the second baseline was read before the first write ended:\n{}",
        forge.log_text()
    );
}

#[test]
fn a_retried_patch_takes_a_fresh_baseline() {
    let forge = FakeForge::start().expect("fake forge");
    three_commits(&forge);
    let c = client(
        &forge,
        Bounds::new(Duration::from_secs(12), Duration::from_secs(3), 3),
    );
    // The first PATCH is refused unjudged (503, wait 2 s: nothing applied,
    // tried again); the second is applied, read lagging, answered 502.
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::Status {
            status: 503,
            retry_after: Some(2),
        },
    );
    forge.push(
        Endpoint::UpdateRef,
        Behaviour::ApplyLaggingThenStatus {
            lag: Duration::from_secs(1),
            status: 502,
        },
    );
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| {
            c.update_ref(&repo(), "heads/main", C, false, &CallOptions::new())
                .expect("valid input")
        });
        // Between the attempts somebody moves the ref to B.
        assert!(forge.wait_for_completions(Endpoint::UpdateRef, 1, Duration::from_secs(30)));
        forge.set_ref(REPO, "heads/main", B);
        h.join().expect("update")
    });
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert_eq!(out.attempts[1].class, Some(Class::Unknown));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(
        r.reads.first().and_then(|x| x.verdict),
        Some(Verdict::NotLanded),
        "the lagging read shows B, the second attempt's baseline: {:?}",
        r.reads
    );
    assert_eq!(
        forge.arrivals(Endpoint::GetRef).len() - r.reads.len(),
        2,
        "one baseline per attempt:\n{}",
        forge.log_text()
    );
}

/// The pull request `n`'s merge, with a client asking `version` (the
/// default when `None`).
fn merge(
    forge: &FakeForge,
    n: u64,
    version: Option<&str>,
) -> sluice_policy::Outcome<sluice_forge::MergeResult> {
    let mut b = ForgeClient::builder(&forge.url())
        .policy(common::policy(Duration::from_millis(100)))
        .write_spacing(Duration::from_millis(10))
        .bounds(Bounds::new(
            Duration::from_secs(6),
            Duration::from_secs(2),
            3,
        ));
    if let Some(v) = version {
        b = b.api_version(v);
    }
    b.build()
        .expect("client")
        .merge_pull(&repo(), n, A, MergeMethod::Squash, &CallOptions::new())
        .expect("valid input")
}

#[test]
fn a_merge_applied_then_502_with_trimmed_pull_requests_settles_landed_with_the_merge_commit() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", A);
    // More events than one page holds before the merge's own.
    for _ in 0..150 {
        forge.add_issue_event(REPO, n, "labeled", None);
    }
    forge.set_trimmed_pulls(true);
    forge.set(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    let out = merge(&forge, n, None);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    let want = merge_commit_sha(REPO, n, A);
    assert_eq!(
        out.value,
        Some(sluice_forge::MergeResult {
            merged: true,
            sha: Some(want.clone())
        })
    );
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(r.observed.get("sha"), Some(&want));
    assert_eq!(r.observed.get("merged").map(String::as_str), Some("true"));
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");
    assert_eq!(
        forge.arrivals(Endpoint::IssueEvents).len(),
        2,
        "every page of events:\n{}",
        forge.log_text()
    );
}

#[test]
fn the_api_version_asked_is_pinned_and_a_later_one_is_settled_without_merge_commit_sha() {
    for (version, trimmed) in [(None, false), (Some("2026-03-10"), true)] {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", A);
        forge.set(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
        let out = merge(&forge, n, version);
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{version:?}");
        assert_eq!(
            out.value.and_then(|v| v.sha),
            Some(merge_commit_sha(REPO, n, A)),
            "{version:?}"
        );
        let pull_read = forge
            .log()
            .into_iter()
            .filter(|e| e.endpoint == Endpoint::IssueEvents)
            .count();
        assert_eq!(
            pull_read > 0,
            trimmed,
            "the events are read only when the pull request lacks the sha ({version:?}):\n{}",
            forge.log_text()
        );
    }
}

#[test]
fn a_merge_whose_git_side_landed_while_the_pull_request_reads_open_is_moved_never_not_landed() {
    let forge = FakeForge::start().expect("fake forge");
    // main at C; the pull request's head A; the git side merged A into
    // main (B, whose parents are C and A) while the pull request still
    // reads open, and the PUT is answered 500.
    forge.set_ref(REPO, "heads/main", C);
    forge.add_commit(B, &[C, A]);
    let n = forge.add_pull(REPO, "feature", "main", A);
    forge.set_ref(REPO, "heads/main", B);
    forge.set(
        Endpoint::MergePull,
        Behaviour::Status {
            status: 500,
            retry_after: None,
        },
    );
    let out = merge(&forge, n, None);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Moved));
    assert_eq!(
        r.observed.get("compare").map(String::as_str),
        Some("behind")
    );
    assert!(
        r.reads
            .iter()
            .all(|x| x.verdict != Some(Verdict::NotLanded)),
        "{:?}",
        r.reads
    );
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");
    // The same pull request with its head not in the base is not landed.
    forge.set_ref(REPO, "heads/main", C);
    let out = merge(&forge, n, None);
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::NotLanded));
    assert_eq!(
        r.observed.get("compare").map(String::as_str),
        Some("diverged")
    );
}

#[test]
fn a_merge_whose_settling_reads_fail_for_a_while_settles_landed_with_every_read_listed() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", A);
    forge.set(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    // The forge fails its reads for a while after the merge: three 500s.
    forge.set(Endpoint::GetPull, Behaviour::Fail5xxThenOk(3));
    let out = merge(&forge, n, None);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    assert_eq!(
        out.value.and_then(|v| v.sha),
        Some(merge_commit_sha(REPO, n, A))
    );
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert_eq!(r.reads.len(), 4, "every read listed: {:?}", r.reads);
    let (last, failed) = r.reads.split_last().expect("reads");
    assert_eq!(last.verdict, Some(Verdict::Landed));
    for f in failed {
        assert_eq!(f.verdict, None);
        assert!(
            f.cause.as_deref().is_some_and(|c| c.contains("500")),
            "{f:?}"
        );
    }
    assert_eq!(forge.arrivals(Endpoint::GetPull).len(), 4);
}

#[test]
fn a_merge_whose_settling_reads_never_answer_ends_unknown_at_the_deadline_and_says_so() {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", A);
    forge.set(
        Endpoint::MergePull,
        Behaviour::Status {
            status: 502,
            retry_after: None,
        },
    );
    forge.set(Endpoint::GetPull, Behaviour::Fail5xx);
    let out = merge(&forge, n, None);
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    assert_eq!(out.stopped, Some(sluice_policy::Stopped::Deadline));
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");
    let r = out
        .reconciled
        .expect("reconciled after every unknown write with a settling read");
    assert_eq!(r.verdict, None, "no read answered");
    assert!(r.reads.len() > 3, "read until the deadline: {:?}", r.reads);
    assert_eq!(r.reads.len(), forge.arrivals(Endpoint::GetPull).len());
    assert!(r
        .reads
        .iter()
        .all(|x| x.verdict.is_none() && x.cause.is_some()));
    // The reads ran into the deadline's last second (6 s, less the
    // finish's moment; pauses of at most 1 s), not a count of them.
    let last = r.reads.last().expect("a read").elapsed_ms;
    assert!(last > 4_500 && last <= 6_000, "{last} ms");
}

#[test]
fn a_merge_merged_at_its_head_without_a_merge_commit_yet_is_read_again_then_landed() {
    // The merge applied and its answer was lost (502); the pull request
    // reads merged at the head, without `merge_commit_sha` (trimmed), and
    // its `merged` event is not written yet.
    let setup = || {
        let forge = FakeForge::start().expect("fake forge");
        let n = forge.add_pull(REPO, "feature", "main", A);
        forge.set_trimmed_pulls(true);
        forge.merge_pull_directly(REPO, n).expect("merged");
        forge.clear_issue_events(REPO, n);
        forge.set(
            Endpoint::MergePull,
            Behaviour::Status {
                status: 502,
                retry_after: None,
            },
        );
        (forge, n)
    };

    // The event never shows: read again until the deadline, then landed
    // with no sha — never not-landed.
    let (forge, n) = setup();
    let out = merge(&forge, n, None);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    assert_eq!(
        out.value,
        Some(sluice_forge::MergeResult {
            merged: true,
            sha: None
        })
    );
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    assert!(r.reads.len() > 2, "read again: {:?}", r.reads);
    assert!(r.reads.iter().all(|x| x.verdict == Some(Verdict::Landed)));
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");

    // The event is written while the reads go on: its commit is the sha.
    let (forge, n) = setup();
    let want = merge_commit_sha(REPO, n, A);
    let out = std::thread::scope(|s| {
        let h = s.spawn(|| merge(&forge, n, None));
        // After the first read of the events (which found none): the
        // reads that follow, well inside the deadline on a loaded machine,
        // find it.
        assert!(forge.wait_for_arrivals(Endpoint::IssueEvents, 1, Duration::from_secs(30)));
        forge.add_issue_event(REPO, n, "merged", Some(&want));
        h.join().expect("merge")
    });
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(out.value.and_then(|v| v.sha), Some(want));
}

fn comment(
    forge: &FakeForge,
    body: &str,
    opts: &CallOptions,
) -> sluice_policy::Outcome<sluice_forge::IssueComment> {
    client(
        forge,
        Bounds::new(Duration::from_secs(4), Duration::from_secs(1), 3),
    )
    .create_issue_comment(&repo(), 7, body, opts)
    .expect("valid input")
}

#[test]
fn a_comment_cut_after_it_was_created_is_settled_landed_by_its_marker_with_one_post() {
    let forge = FakeForge::start().expect("fake forge");
    // An older comment with another operation's marker is not this one.
    forge.add_comment(
        REPO,
        7,
        "landed\n\n<!-- sluice-operation: job-0 -->",
        "2026-01-01T00:00:00Z",
    );
    forge.push(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let out = comment(
        &forge,
        "landed main at 1234567",
        &CallOptions::new().id("job-1"),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    assert_eq!(out.operation.kind, "comment");
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed));
    let v = out.value.expect("the comment");
    assert!(
        v.body.ends_with("\n\n<!-- sluice-operation: job-1 -->"),
        "{}",
        v.body
    );
    assert_eq!(r.observed.get("comment"), Some(&v.id.to_string()));
    assert_eq!(
        forge.arrivals(Endpoint::CreateIssueComment).len(),
        1,
        "one POST"
    );
    assert_eq!(forge.comments(REPO).len(), 2, "one comment made");
    // The settling read asked only for the comments since the POST less a
    // minute.
    let lists = forge.arrivals(Endpoint::ListIssueComments);
    assert!(
        lists.last().is_some_and(|e| e.path.contains("since=")),
        "{}",
        forge.log_text()
    );
}

#[test]
fn a_comment_answered_502_and_not_created_ends_unknown_not_landed_with_no_comment() {
    let forge = FakeForge::start().expect("fake forge");
    forge.push(
        Endpoint::CreateIssueComment,
        Behaviour::Status {
            status: 502,
            retry_after: None,
        },
    );
    let out = comment(&forge, "landed", &CallOptions::new());
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.may_have_applied, Some(true));
    // Read until the deadline, still not there: it says so.
    assert_eq!(out.stopped, Some(sluice_policy::Stopped::Deadline));
    let r = out.reconciled.expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::NotLanded));
    assert!(r.reads.len() > 1, "read again: {:?}", r.reads);
    assert_eq!(
        forge.arrivals(Endpoint::CreateIssueComment).len(),
        1,
        "one POST"
    );
    assert!(forge.comments(REPO).is_empty());
}

#[test]
fn a_comment_id_asked_again_with_no_ledger_posts_nothing() {
    let forge = FakeForge::start().expect("fake forge");
    let first = comment(&forge, "landed", &CallOptions::new().id("job-9"));
    assert_eq!(first.kind, OutcomeKind::Succeeded);
    assert_eq!(first.may_have_applied, Some(true), "this one posted");
    // Another client, another policy: no ledger remembers the id.
    let c = client(
        &forge,
        Bounds::new(Duration::from_secs(4), Duration::from_secs(1), 3),
    );
    let again = c
        .create_issue_comment(&repo(), 7, "landed", &CallOptions::new().id("job-9"))
        .expect("valid input");
    assert_eq!(again.kind, OutcomeKind::Succeeded, "{:?}", again.error);
    assert_eq!(again.may_have_applied, Some(false));
    assert_eq!(again.value.map(|c| c.id), first.value.map(|c| c.id));
    assert_eq!(
        forge.arrivals(Endpoint::CreateIssueComment).len(),
        1,
        "nothing posted again"
    );
    assert_eq!(forge.comments(REPO).len(), 1);
    // That policy's ledger recorded the run that found it as one that
    // applied nothing: asked a third time, the earlier run says so.
    let third = c
        .create_issue_comment(&repo(), 7, "landed", &CallOptions::new().id("job-9"))
        .expect("valid input");
    assert_eq!(third.kind, OutcomeKind::Rejected);
    assert_eq!(
        third.previous.expect("the earlier run").may_have_applied,
        Some(false),
        "the ledger's record"
    );
    assert_eq!(forge.arrivals(Endpoint::CreateIssueComment).len(), 1);
}

#[test]
fn a_comment_without_an_id_is_marked_with_the_operation_id_the_outcome_names() {
    let forge = FakeForge::start().expect("fake forge");
    forge.push(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let out = comment(&forge, "landed", &CallOptions::new());
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.reconciled);
    let id = out.operation.id.clone();
    assert!(!id.is_empty());
    let v = out.value.expect("the comment, settled by its marker");
    assert!(
        v.body
            .ends_with(&format!("\n\n<!-- sluice-operation: {id} -->")),
        "{} (operation {id})",
        v.body
    );
    assert_eq!(forge.arrivals(Endpoint::CreateIssueComment).len(), 1);
}

#[test]
fn a_stop_cuts_a_stalled_settling_read_at_once_and_a_cancel_does_not() {
    // A comment answered 502 and not created: its settling read (the
    // comments) stalls at the forge.
    let settle_stalled = |behaviour: Behaviour, raise: fn(&sluice_policy::CancelFlag)| {
        let forge = FakeForge::start().expect("fake forge");
        forge.push(
            Endpoint::CreateIssueComment,
            Behaviour::Status {
                status: 502,
                retry_after: None,
            },
        );
        forge.push(Endpoint::ListIssueComments, behaviour);
        let c = client(
            &forge,
            Bounds::new(Duration::from_secs(60), Duration::from_secs(30), 1),
        );
        let flag = sluice_policy::CancelFlag::new();
        let (out, raised) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                c.create_issue_comment(&repo(), 7, "landed", &CallOptions::new().cancel(&flag))
                    .expect("valid input")
            });
            // The settling read is at the forge, which says nothing.
            assert!(forge.wait_for_arrivals(
                Endpoint::ListIssueComments,
                1,
                Duration::from_secs(30)
            ));
            let raised = std::time::Instant::now();
            raise(&flag);
            (h.join().expect("comment"), raised)
        });
        (out, raised.elapsed(), forge)
    };

    let (out, took, forge) = settle_stalled(
        Behaviour::Delay(Duration::from_secs(60)),
        sluice_policy::CancelFlag::stop,
    );
    println!("returned {took:?} after the stop");
    // The read's own limit is 30 s: it was cut by the stop, not by that.
    assert!(
        took < Duration::from_secs(5),
        "the stop cut the read in flight: returned {took:?} after it"
    );
    assert_eq!(out.kind, OutcomeKind::Unknown);
    assert_eq!(out.stopped, Some(sluice_policy::Stopped::Cancelled));
    assert_eq!(out.may_have_applied, Some(true));
    let r = out
        .reconciled
        .expect("reconciled: the write had a settling read");
    assert_eq!(r.verdict, None, "no read answered");
    assert_eq!(r.reads.len(), 1, "no read after the stop: {:?}", r.reads);
    assert!(r.reads[0].cause.is_some(), "{:?}", r.reads);
    assert_eq!(forge.arrivals(Endpoint::CreateIssueComment).len(), 1);
    assert_eq!(forge.arrivals(Endpoint::ListIssueComments).len(), 1);

    // A cancel (the first level) leaves the read to its answer: the write
    // is settled by it.
    let (out, _took, _forge) = settle_stalled(
        Behaviour::Delay(Duration::from_millis(1500)),
        sluice_policy::CancelFlag::cancel,
    );
    assert_eq!(out.stopped, Some(sluice_policy::Stopped::Cancelled));
    let r = out.reconciled.expect("reconciled");
    assert_eq!(r.verdict, Some(Verdict::NotLanded), "{:?}", r.reads);
    assert_eq!(r.reads.len(), 1, "the first answered read settles it");
}

#[test]
fn a_comment_id_that_would_end_its_marker_is_refused_before_any_request() {
    let forge = FakeForge::start().expect("fake forge");
    for id in ["a--b", "x>y"] {
        let err = client(&forge, Bounds::default())
            .create_issue_comment(&repo(), 7, "hi", &CallOptions::new().id(id))
            .expect_err("refused");
        assert_eq!(err, sluice_forge::ForgeInputError::MarkerId(id.into()));
    }
    assert!(forge.log().is_empty());
}

#[test]
fn the_same_external_id_given_twice_makes_one_check_run() {
    let forge = FakeForge::start().expect("fake forge");
    // More runs of that name than one page holds, none with the id.
    for i in 0..120 {
        forge.add_check_run(
            REPO,
            "land",
            A,
            "completed",
            Some("success"),
            Some(&format!("other-{i}")),
        );
    }
    let new = sluice_forge::NewCheckRun::new("land", A, "job-42");
    let c = client(
        &forge,
        Bounds::new(Duration::from_secs(4), Duration::from_secs(2), 3),
    );
    let first = c
        .create_check_run(&repo(), &new, &CallOptions::new())
        .expect("valid input");
    let second = c
        .create_check_run(&repo(), &new, &CallOptions::new())
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.error);
    assert_eq!(second.kind, OutcomeKind::Succeeded, "{:?}", second.error);
    assert_eq!(
        first.value.map(|r| r.id),
        second.value.map(|r| r.id),
        "answered as it is"
    );
    assert_eq!(first.may_have_applied, Some(true));
    assert_eq!(second.may_have_applied, Some(false), "nothing sent");
    assert_eq!(
        forge.arrivals(Endpoint::CreateCheckRun).len(),
        1,
        "one POST"
    );
    let lists = forge.arrivals(Endpoint::ListCheckRuns);
    assert!(
        lists
            .iter()
            .all(|e| e.path.contains("check_name=land") && e.path.contains("filter=all")),
        "{}",
        forge.log_text()
    );
    assert!(
        lists.iter().any(|e| e.path.contains("page=2")),
        "every page"
    );
}
