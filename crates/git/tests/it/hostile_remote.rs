//! A remote that cannot harm, and verdicts that settle: an object format
//! this client does not read is answered at once; the remote's text is kept
//! as sent but bounded; an atomic refusal names its cause — each against a
//! real `git daemon` (and git's http-backend where it is simple).

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use sluice_git::GitError;
use sluice_policy::{Class, OutcomeKind};
use sluice_testkit::repo;

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

/// A sha256 remote over `transport`: ls-refs, fetch and push each
/// answered in one attempt, nothing written on either side.
fn a_sha256_remote_is_answered_in_one_attempt_over(transport: Transport) {
    let w = World::new();
    let srv = sha256_repo(&w, "s.git");
    let served = transport.serve(&w, "s.git");
    let before = refs_of(&srv);
    let opts = quick(20_000, 5_000, 4);

    let out = client()
        .ls_refs(&served.url, &[], &opts)
        .expect("valid input");
    assert_answered_for_the_format(&out);

    let local = empty_repo(&w.path("local.git"));
    let out = client()
        .fetch(
            &served.url,
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
    let out = push(
        &served.url,
        update(Some(&tip), "refs/heads/side"),
        &local,
        &opts,
    );
    assert_answered_for_the_format(&out);
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(refs_of(&srv), before, "nothing written");
}

#[test]
fn a_sha256_remote_is_answered_in_one_attempt_by_ls_refs_fetch_and_push() {
    a_sha256_remote_is_answered_in_one_attempt_over(Transport::Daemon);
}

#[test]
fn a_sha256_remote_over_http_is_answered_in_one_attempt_by_ls_refs_fetch_and_push() {
    a_sha256_remote_is_answered_in_one_attempt_over(Transport::Http);
}

/// The library's view of a remote's words carrying control sequences (the
/// testkit's scripted server: an `ERR` packet, an `ng` reason): kept byte
/// for byte as sent — showing them safely is the CLI's work — in a typed
/// error or a rejected ref's typed reason.
#[test]
fn err_and_ng_words_with_control_sequences_are_kept_as_sent_in_typed_results() {
    use sluice_testkit::scripted::{Script, ScriptedServer};
    let words = "no \x1b]0;title\x07\x1b[2J\x1b[31mred\x1b[0m\x08 entry";
    let w = World::new();
    let local = local_clone(&w.small("s.git"), &w.path("local.git"));
    let main = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let server = ScriptedServer::start(
        Script::Err {
            text: words.to_string(),
        },
        vec![("refs/heads/main".into(), main.clone())],
    )
    .expect("scripted server");
    let opts = quick(10_000, 5_000, 3);
    let out = client()
        .ls_refs(&server.url("r.git"), &[], &opts)
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered);
    assert_eq!(out.attempts.len(), 1);
    let e = out.error.as_ref().expect("an error");
    match e.source_as::<GitError>() {
        Some(GitError::Remote { words: said, .. }) => assert_eq!(said, words),
        other => panic!("not the remote's words: {other:?}"),
    }

    server.set_script(Script::Refuse {
        reason: words.to_string(),
    });
    let tip = repo::commit_on(&local, "main", "refused");
    let out = push(
        &server.url("r.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &opts,
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(false));
    let r = &out.value.as_ref().expect("per-ref results").refs[0];
    assert_eq!(r.status, sluice_git::RefStatus::Rejected);
    assert_eq!(r.reason, Some(sluice_git::RejectReason::Other));
    assert_eq!(r.message.as_deref(), Some(words));
}

/// A pre-receive hook that logs each run (one line per pack the server
/// got) and then holds the push `secs` seconds — or, with `None`, until
/// the test creates `release` (at most a minute, whatever becomes of the
/// test; dropping the guard releases it).
struct SlowHook {
    log: PathBuf,
    release: PathBuf,
}

impl SlowHook {
    fn install(srv: &Path, dir: &Path, secs: Option<u32>) -> SlowHook {
        let log = dir.join("hook-runs");
        let release = dir.join("hook-release");
        let wait = match secs {
            Some(s) => format!("sleep {s}"),
            None => format!(
                "i=0\nwhile [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
                release.display()
            ),
        };
        let script = format!(
            "#!/bin/sh\necho run >> '{}'\n{wait}\nexit 0\n",
            log.display()
        );
        repo::install_hook(srv, "pre-receive", &script).expect("hook");
        SlowHook { log, release }
    }

    /// Packs the server got (hook runs).
    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for SlowHook {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.release, b"");
    }
}

/// `--attempt-timeout 1s --deadline <deadline>` with the default 2 s
/// reconcile reserve.
fn slow_opts(deadline_ms: u64) -> sluice_git::CallOptions {
    sluice_git::CallOptions::new().bounds(
        sluice_policy::Bounds::new(
            std::time::Duration::from_millis(deadline_ms),
            std::time::Duration::from_millis(1_000),
            3,
        )
        .with_reconcile_reserve(std::time::Duration::from_secs(2)),
    )
}

#[test]
fn a_push_whose_hook_outlasts_the_attempt_timeout_settles_landed_with_one_pack() {
    let w = World::new();
    let srv = w.small("s.git");
    let hook = SlowHook::install(&srv, w.dir.path(), Some(4));
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "slow to land");
    let t0 = std::time::Instant::now();
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &slow_opts(12_000),
    );
    let took = t0.elapsed();
    let r = out.reconciled.as_ref().expect("settled by reading");
    println!(
        "slow hook: {} in {} ms, reads {:?}",
        out.kind.as_str(),
        took.as_millis(),
        r.reads
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].phase, "pack-sent");
    assert_eq!(out.attempts[0].class, Some(Class::Unknown));
    assert_eq!(r.verdict, Some(sluice_policy::Verdict::Landed));
    assert!(r.reads.len() >= 2, "read until it landed: {:?}", r.reads);
    assert_eq!(
        r.reads.last().and_then(|x| x.verdict),
        Some(sluice_policy::Verdict::Landed)
    );
    assert_eq!(hook.runs(), 1, "one pack");
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), Some(tip));
    assert!(took < std::time::Duration::from_secs(13), "{took:?}");
}

#[test]
fn a_push_whose_hook_outlasts_the_deadline_ends_unknown_within_it_having_read_throughout() {
    let w = World::new();
    let srv = w.small("s.git");
    let hook = SlowHook::install(&srv, w.dir.path(), None);
    let before = repo::rev_parse(&srv, "refs/heads/main");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "never lands in time");
    let t0 = std::time::Instant::now();
    let out = push(
        &w.daemon.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &slow_opts(6_000),
    );
    let took = t0.elapsed();
    assert_eq!(out.kind, OutcomeKind::Unknown, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(true));
    assert!(took <= std::time::Duration::from_secs(7), "{took:?}");
    let r = out.reconciled.as_ref().expect("settled by reading");
    assert_eq!(r.verdict, Some(sluice_policy::Verdict::NotLanded));
    assert!(
        r.reads.len() >= 3,
        "read while the deadline allowed: {:?}",
        r.reads
    );
    assert!(r
        .reads
        .iter()
        .all(|x| x.verdict == Some(sluice_policy::Verdict::NotLanded)));
    assert_eq!(hook.runs(), 1, "one pack");
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), before);
}
