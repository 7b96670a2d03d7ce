//! A repository handle a service opens once and keeps: every fetch and push
//! through it works, however many packs land in it and whatever `git gc`
//! does beside it.

use crate::common;

use common::*;
use sluice_git::PushOptions;
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

fn count_packs(repo: &std::path::Path) -> usize {
    std::fs::read_dir(repo.join("objects/pack"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
                .count()
        })
        .unwrap_or(0)
}

/// 100 rounds of (another writer pushes; fetch; commit; push) through one
/// handle opened before the first round. The first 40 rounds leave a pack
/// per fetch (more than the 32 pack slots a handle is opened with); from
/// then on `git gc --prune=now` runs every 20 rounds, repacking away the
/// packs the handle had seen.
#[test]
fn one_handle_kept_open_fetches_and_pushes_through_a_hundred_rounds_and_gc() {
    let w = World::new();
    let srv = w.small("s.git");
    let srv_path = srv.display().to_string();
    let other = local_clone(&srv, &w.path("other.git"));
    let local = local_clone(&srv, &w.path("local.git"));
    let handle = open(&local);
    let client = client();
    let url = w.daemon.url("s.git");
    let opts = quick(30_000, 10_000, 3);
    let mut most_packs = 0;
    for round in 1..=100 {
        // Another writer moves main on the server.
        repo::git(&other, &["fetch", "-q", &srv_path, "+main:refs/heads/main"]);
        repo::commit_on(&other, "main", &format!("theirs {round}"));
        repo::git(&other, &["push", "-q", &srv_path, "main:main"]);

        let fetched = client
            .fetch(
                &url,
                &["+refs/heads/main:refs/remotes/origin/main".to_string()],
                &handle,
                &opts,
            )
            .expect("valid input");
        assert_eq!(
            fetched.kind,
            OutcomeKind::Succeeded,
            "round {round}: fetch {:?}",
            fetched.attempts
        );
        most_packs = most_packs.max(count_packs(&local));

        repo::git(
            &local,
            &["update-ref", "refs/heads/main", "refs/remotes/origin/main"],
        );
        let tip = repo::commit_on(&local, "main", &format!("ours {round}"));
        let pushed = client
            .push(
                &url,
                &[update(Some(&tip), "refs/heads/main")],
                &PushOptions::default(),
                &handle,
                &opts,
            )
            .expect("valid input");
        assert_eq!(
            pushed.kind,
            OutcomeKind::Succeeded,
            "round {round}: push {:?} {:?}",
            pushed.attempts,
            pushed.value
        );
        assert_eq!(
            repo::rev_parse(&srv, "refs/heads/main").as_deref(),
            Some(tip.as_str()),
            "round {round}"
        );
        if round >= 40 && round % 20 == 0 {
            repo::git(&local, &["gc", "-q", "--prune=now"]);
        }
    }
    assert!(
        most_packs > 32,
        "the handle saw more packs than its slots: {most_packs}"
    );
    repo::fsck(&srv).expect("the server is fsck-clean");
}
