//! A push to a configured remote goes to every `pushurl` (else every
//! `url`), in order, whatever the ones before did, as git pushes: one
//! operation per URL (`<id>`, `<id>#2`, …), one document.

use crate::common;

use common::*;
use sluice_testkit::repo;

/// A second bare copy of the served repository, served by the same daemon.
fn mirror(w: &World) -> std::path::PathBuf {
    let to = w.path("srv/mirror.git");
    repo::git(
        w.dir.path(),
        &["clone", "-q", "--bare", &p(&w.server()), &p(&to)],
    );
    to
}

#[test]
fn every_pushurl_is_pushed_and_the_document_carries_each() {
    let w = World::new();
    let second = mirror(&w);
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "to both");
    let dead = format!("git://127.0.0.1:{}/nothing.git", dead_port());
    repo::git(&local, &["remote", "add", "dest", &dead]);
    repo::git(
        &local,
        &["config", "--add", "remote.dest.pushurl", &w.url()],
    );
    let second_url = w.daemon.url("mirror.git");
    repo::git(
        &local,
        &["config", "--add", "remote.dest.pushurl", &second_url],
    );
    let ledger = w.path("ledger.db");
    let run = sl_in(
        &local,
        &[
            "--json",
            "--operation-id",
            "land-7",
            "--ledger",
            &p(&ledger),
            "push",
            "dest",
            "main:refs/heads/main",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main"),
        Some(tip.clone())
    );
    assert_eq!(repo::rev_parse(&second, "refs/heads/main"), Some(tip));
    let doc = run.json();
    assert_eq!(doc["result"], "succeeded");
    assert_eq!(doc["operation"]["id"], "land-7");
    let urls: Vec<&str> = doc["value"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["url"].as_str().expect("url"))
        .collect();
    assert_eq!(urls, vec![w.url().as_str(), second_url.as_str()]);
    assert_eq!(doc["attempts"].as_array().map(Vec::len), Some(2));
    // Each URL's operation is claimed under its own id.
    for id in ["land-7", "land-7#2"] {
        let shown = sl_in(&local, &["--ledger", &p(&ledger), "ledger", "show", id]);
        assert_eq!(shown.code, 0, "{id}: {shown:?}");
    }
    // git pushes to both too.
    let tip = repo::commit_on(&local, "main", "git to both");
    let git = git_in(&local, &["push", "-q", "dest", "main:refs/heads/main"]);
    assert_eq!(git.code, 0, "{git:?}");
    assert_eq!(repo::rev_parse(&second, "refs/heads/main"), Some(tip));
}

#[test]
fn every_url_is_pushed_when_there_is_no_pushurl_whatever_the_first_did() {
    let w = World::new();
    let second = mirror(&w);
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "to every url");
    repo::git(&local, &["remote", "add", "both", &w.url()]);
    let second_url = w.daemon.url("mirror.git");
    repo::git(&local, &["config", "--add", "remote.both.url", &second_url]);
    let run = sl_in(&local, &["--json", "push", "both", "main:refs/heads/main"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main"),
        Some(tip.clone())
    );
    assert_eq!(repo::rev_parse(&second, "refs/heads/main"), Some(tip));
    let doc = run.json();
    let id = doc["operation"]["id"].as_str().expect("an id");
    assert!(!id.is_empty());
    assert_eq!(doc["value"][1]["url"], second_url.as_str());

    // The first refused (nothing listens there): the second is pushed all
    // the same, and the document's result is the worse of the two.
    let dead = format!("git://127.0.0.1:{}/nothing.git", dead_port());
    repo::git(&local, &["remote", "add", "first-dead", &dead]);
    repo::git(
        &local,
        &["config", "--add", "remote.first-dead.url", &second_url],
    );
    let tip = repo::commit_on(&local, "main", "past a dead first");
    let run = sl_in(
        &local,
        &[
            "--json",
            "--max-attempts",
            "1",
            "push",
            "first-dead",
            "main:refs/heads/main",
        ],
    );
    assert_eq!(repo::rev_parse(&second, "refs/heads/main"), Some(tip));
    let doc = run.json();
    assert_ne!(doc["result"], "succeeded", "{run:?}");
    assert_ne!(run.code, 0, "{run:?}");
    let urls: Vec<&str> = doc["value"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["url"].as_str().expect("url"))
        .collect();
    assert!(urls.contains(&second_url.as_str()), "{urls:?}");
}
