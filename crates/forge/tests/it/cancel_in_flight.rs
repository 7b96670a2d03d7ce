//! A cancel honoured by a forge write in flight: the caller stops waiting
//! for the write's answer at once, settles it by reading, and the host's
//! write slot is free at once for the next write.

use std::time::{Duration, Instant};

use crate::common::*;
use sluice_forge::{CallOptions, ForgeClient, MergeMethod};
use sluice_policy::{Bounds, CancelFlag, OutcomeKind, Verdict};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[test]
fn a_merge_stalled_after_it_applied_and_cancelled_returns_at_once_settled_landed_and_frees_the_write_slot(
) {
    let forge = FakeForge::start().expect("fake forge");
    let n = forge.add_pull(REPO, "feature", "main", A);
    // The merge is applied, then the forge says nothing for far longer
    // than the test: only the cancel can end the wait.
    forge.set(
        Endpoint::MergePull,
        Behaviour::ApplyThenStall(Duration::from_secs(120)),
    );
    let spacing = Duration::from_millis(50);
    let client = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(100)))
        .write_spacing(spacing)
        .bounds(Bounds::new(
            Duration::from_secs(90),
            Duration::from_secs(60),
            3,
        ))
        .build()
        .expect("client");
    let cancel = CancelFlag::new();
    let (out, cancelled_at, returned_at, comment_out) = std::thread::scope(|s| {
        let merging = s.spawn(|| {
            let out = client
                .merge_pull(
                    &repo(),
                    n,
                    A,
                    MergeMethod::Merge,
                    &CallOptions::new().cancel(&cancel),
                )
                .expect("valid input");
            (out, Instant::now())
        });
        assert!(
            forge.wait_for_arrivals(Endpoint::MergePull, 1, Duration::from_secs(30)),
            "the PUT never arrived"
        );
        // The issue's figure: the flag raised 0.3 s after the PUT arrived.
        std::thread::sleep(Duration::from_millis(300));
        cancel.cancel();
        let cancelled_at = Instant::now();
        // Another write to the same host, at once.
        let comment = client
            .create_issue_comment(&repo(), n, "after the cancel", &CallOptions::new())
            .expect("valid input");
        let (out, returned_at) = merging.join().expect("merge thread");
        (out, cancelled_at, returned_at, comment)
    });
    let took = returned_at.duration_since(cancelled_at);
    eprintln!("merge returned {took:?} after the cancel");
    assert!(
        took < Duration::from_secs(1),
        "returned {took:?} after the cancel"
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(out.attempts.len(), 1, "{out:?}");
    let cause = out.attempts[0].cause.as_deref().unwrap_or_default();
    assert!(cause.contains("cancelled"), "{cause}");
    let r = out.reconciled.as_ref().expect("settled by reading");
    assert_eq!(r.verdict, Some(Verdict::Landed), "{r:?}");
    assert_eq!(forge.arrivals(Endpoint::MergePull).len(), 1, "one PUT");
    // The PUT is still unanswered at the forge: the caller stopped waiting.
    assert!(forge.completions(Endpoint::MergePull).is_empty());
    // The other write went out at once: not after the stalled PUT's
    // thread, within the pacing of one write after the cancel.
    assert_eq!(comment_out.kind, OutcomeKind::Succeeded, "{comment_out:?}");
    let comment_arrived = forge.arrivals(Endpoint::CreateIssueComment)[0].at;
    let waited = comment_arrived.duration_since(cancelled_at);
    eprintln!("the next write arrived {waited:?} after the cancel");
    assert!(
        waited < Duration::from_secs(1),
        "the next write went out {waited:?} after the cancel"
    );
}
