//! The async service example (`examples/async_service.rs`) run for real
//! inside its tokio runtime: a `git daemon` (a fault proxy in front for the
//! stalled case), the testkit's fake forge for the CI read.

use std::time::{Duration, Instant};

use sluice_forge::RepoRef;
use sluice_git::gix;
use sluice_testkit::fake_forge::FakeForge;
use sluice_testkit::{repo, Fault};

use crate::async_service_example::{clients, runtime, serve, Job, JobEnd};
use crate::common::World;

const REPO: &str = "octo/small";

fn job(url: String) -> Job {
    Job {
        name: "async-job-1".into(),
        url,
        repo: RepoRef::new("octo", "small"),
        candidate: "candidate".into(),
        target: "main".into(),
    }
}

/// A `candidate` branch one commit ahead of `main`, its CI at `state`.
fn scene(w: &World, forge: &FakeForge, state: &str) -> String {
    let srv = w.server();
    repo::git(&srv, &["branch", "candidate", "refs/heads/main"]);
    let tip = repo::commit_on(&srv, "candidate", "the change to land");
    forge.set_commit_statuses(REPO, "candidate", &[("build", state)]);
    tip
}

#[test]
fn a_green_candidate_lands_through_the_async_facade() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let tip = scene(&w, &forge, "success");
    let kept = gix::open(w.empty("kept.git")).expect("open").into_sync();
    let rt = runtime().expect("runtime");
    let end = rt
        .block_on(async {
            let (git, forge_client) = clients(&forge.url()).await.expect("clients");
            serve(
                &git,
                &forge_client,
                job(w.url()),
                kept,
                Duration::from_secs(60),
            )
            .await
        })
        .expect("runs");
    assert_eq!(end, JobEnd::Landed(tip.clone()));
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_red_candidate_is_not_pushed() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    let before = repo::rev_parse(&w.server(), "refs/heads/main");
    scene(&w, &forge, "failure");
    let kept = gix::open(w.empty("kept.git")).expect("open").into_sync();
    let rt = runtime().expect("runtime");
    let end = rt
        .block_on(async {
            let (git, forge_client) = clients(&forge.url()).await.expect("clients");
            serve(
                &git,
                &forge_client,
                job(w.proxied()),
                kept,
                Duration::from_secs(60),
            )
            .await
        })
        .expect("runs");
    assert_eq!(end, JobEnd::CiNotGreen("failure".into()));
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), before);
    assert_eq!(w.receive_packs(), 0);
}

#[test]
fn a_job_past_its_limit_is_dropped_and_its_stalled_call_cancelled() {
    let w = World::new();
    let forge = FakeForge::start().expect("fake forge");
    scene(&w, &forge, "success");
    // The git remote says nothing: only the job's limit ends the wait.
    w.proxy.set_fault_always(Fault::StallBeforeAdvert);
    let kept = gix::open(w.empty("kept.git")).expect("open").into_sync();
    let rt = runtime().expect("runtime");
    let (end, blocking_after) = rt.block_on(async {
        let (git, forge_client) = clients(&forge.url()).await.expect("clients");
        let end = serve(
            &git,
            &forge_client,
            job(w.proxied()),
            kept,
            Duration::from_millis(500),
        )
        .await
        .expect("runs");
        // The cancelled ls-refs ends on its blocking thread, soon: the
        // runtime's blocking threads go idle (an event, polled).
        let t0 = Instant::now();
        while w.proxy.connections().iter().any(|c| c.closed.is_none()) {
            assert!(t0.elapsed() < Duration::from_secs(10), "still connected");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (end, t0.elapsed())
    });
    assert_eq!(end, JobEnd::TimedOut);
    eprintln!("the stalled connection closed {blocking_after:?} after the job's drop");
    assert!(
        blocking_after < Duration::from_secs(1),
        "{blocking_after:?}"
    );
}
