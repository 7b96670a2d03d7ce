//! A remote that cannot harm, and verdicts that settle: an object format
//! this client does not read is answered at once; the remote's text is kept
//! as sent but bounded; an atomic refusal names its cause — each against a
//! real `git daemon` (and git's http-backend where it is simple).

mod common;

use std::path::{Path, PathBuf};

use common::*;
use sluice_git::{GitError, PushOptions};
use sluice_policy::{Class, OutcomeKind};
use sluice_testkit::repo;
use sluice_testkit::HttpBackend;

/// A bare repository in the sha256 object format with one commit on
/// `main`, made by git itself.
fn sha256_repo(w: &World, name: &str) -> PathBuf {
    let srv = w.srv(name);
    repo::git(
        w.dir.path(),
        &[
            "init",
            "-q",
            "--bare",
            "--object-format=sha256",
            &srv.display().to_string(),
        ],
    );
    let work = w.path("sha256-work");
    repo::git(
        w.dir.path(),
        &[
            "init",
            "-q",
            "--object-format=sha256",
            &work.display().to_string(),
        ],
    );
    repo::git(&work, &["commit", "-q", "--allow-empty", "-m", "one"]);
    repo::git(
        &work,
        &[
            "push",
            "-q",
            &srv.display().to_string(),
            "HEAD:refs/heads/main",
        ],
    );
    srv
}

fn assert_answered_for_the_format<T: std::fmt::Debug>(out: &sluice_policy::Outcome<T>) {
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    let e = out.error.as_ref().expect("an error");
    assert!(e.cause.contains("sha256"), "{}", e.cause);
    assert!(
        matches!(
            e.source_as::<GitError>(),
            Some(GitError::Unsupported { .. })
        ),
        "{e:?}"
    );
}

fn refs_of(srv: &Path) -> std::collections::BTreeMap<String, String> {
    repo::refs(srv)
}

#[test]
fn a_sha256_remote_is_answered_in_one_attempt_by_ls_refs_fetch_and_push() {
    let w = World::new();
    let srv = sha256_repo(&w, "s.git");
    let before = refs_of(&srv);
    let url = w.daemon.url("s.git");
    let opts = quick(20_000, 5_000, 4);

    let out = client().ls_refs(&url, &[], &opts).expect("valid input");
    assert_answered_for_the_format(&out);

    let local = empty_repo(&w.path("local.git"));
    let out = client()
        .fetch(
            &url,
            &["refs/heads/*:refs/remotes/origin/*".to_string()],
            &local,
            &opts,
        )
        .expect("valid input");
    assert_answered_for_the_format(&out);
    assert!(repo::refs(&w.path("local.git")).is_empty());

    let from = w.small("sha1.git");
    let local = local_clone(&from, &w.path("pusher.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let out = client()
        .push(
            &url,
            &[update(Some(&tip), "refs/heads/side")],
            &PushOptions::default(),
            &open(&local),
            &opts,
        )
        .expect("valid input");
    assert_answered_for_the_format(&out);
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(refs_of(&srv), before, "nothing written");
}

#[test]
fn a_sha256_remote_over_http_is_answered_in_one_attempt() {
    let w = World::new();
    sha256_repo(&w, "s.git");
    let http = HttpBackend::start(&w.dir.path().join("srv")).expect("http-backend");
    let out = client()
        .ls_refs(&http.url("s.git"), &[], &quick(20_000, 5_000, 4))
        .expect("valid input");
    assert_answered_for_the_format(&out);
}
