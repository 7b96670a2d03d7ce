//! The library's side of the user's remotes and repositories, beside git
//! 2.47 on twin repositories: a remote read by name ([`NamedRemote`]),
//! fetched by name with `FETCH_HEAD` as git writes it, and a repository
//! owned by another user refused before any call ([`check_trusted`]).

use std::path::Path;

use crate::common;

use common::*;
use gix::remote::Direction;
use sluice_git::{check_trusted, FetchOptions, NamedRemote, TagMode};
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

fn config(dir: &Path, args: &[&str]) {
    let mut all = vec!["config"];
    all.extend_from_slice(args);
    repo::git(dir, &all);
}

#[test]
fn a_remote_is_read_by_name_as_git_reads_it() {
    let w = World::new();
    let dir = w.path("local.git");
    repo::init_bare(&dir).expect("init");
    config(&dir, &["url.git://mirror.example/.insteadOf", "m:"]);
    config(
        &dir,
        &[
            "url.ssh://push.example/.pushInsteadOf",
            "git://mirror.example/",
        ],
    );
    config(&dir, &["remote.origin.url", "m:team/r.git"]);
    config(&dir, &["remote.origin.pushurl", "m:team/push.git"]);
    config(
        &dir,
        &["remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"],
    );
    config(
        &dir,
        &["--add", "remote.origin.fetch", "refs/tags/v1:refs/kept/v1"],
    );
    config(&dir, &["remote.origin.tagOpt", "--no-tags"]);
    config(&dir, &["remote.up.url", "m:team/up.git"]);
    config(&dir, &["remote.up.tagOpt", "--tags"]);
    config(&dir, &["remote.nourl.fetch", "refs/heads/*:refs/x/*"]);
    let r = open(&dir);
    for name in ["origin", "up"] {
        let remote = NamedRemote::find(&r, name)
            .expect("readable")
            .expect("configured");
        let git_url = |push: bool| {
            let mut args = vec!["remote", "get-url"];
            if push {
                args.push("--push");
            }
            args.push(name);
            repo::git(&dir, &args)
        };
        assert_eq!(remote.url(Direction::Fetch), git_url(false), "{name}");
        assert_eq!(remote.url(Direction::Push), git_url(true), "{name}");
        let lines = repo::try_git(
            &dir,
            &["config", "--get-all", &format!("remote.{name}.fetch")],
        )
        .unwrap_or_default();
        assert_eq!(
            remote.fetch_refspecs,
            lines.lines().map(str::to_string).collect::<Vec<_>>(),
            "{name}"
        );
    }
    let origin = NamedRemote::find(&r, "origin").expect("ok").expect("some");
    assert_eq!(origin.tags, TagMode::None);
    assert_eq!(
        NamedRemote::find(&r, "up").expect("ok").expect("some").tags,
        TagMode::All
    );
    assert_eq!(
        origin.tracking_ref("refs/heads/main").as_deref(),
        Some("refs/remotes/origin/main")
    );
    // Not a remote's name: a URL or a path, as git takes it.
    assert!(NamedRemote::find(&r, "elsewhere").expect("ok").is_none());
    assert!(NamedRemote::find(&r, "./origin").expect("ok").is_none());
    // Configured without a URL: refused, as git refuses it.
    let e = NamedRemote::find(&r, "nourl").expect_err("no url");
    assert!(e.to_string().contains("remote.nourl.url"), "{e}");
    // A URL stands for the remote configured with it, however spelled.
    let by_url = NamedRemote::for_url(&r, "git://MIRROR.example:9418/team/r/").expect("origin");
    assert_eq!(by_url.name, "origin");
    assert!(NamedRemote::for_url(&r, "git://mirror.example/team/other").is_none());
}

#[test]
fn a_remote_fetched_by_name_leaves_the_refs_and_fetch_head_git_leaves() {
    let w = World::new();
    w.small("small.git");
    let url = w.daemon.url("small.git");
    let twin = |name: &str| {
        let d = w.path(name);
        repo::git(
            w.dir.path(),
            &["clone", "-q", "--bare", &url, &d.display().to_string()],
        );
        for r in repo::refs(&d)
            .keys()
            .filter(|r| r.starts_with("refs/tags/"))
        {
            repo::git(&d, &["update-ref", "-d", r]);
        }
        config(
            &d,
            &[
                "remote.origin.fetch",
                "refs/heads/dev:refs/remotes/origin/dev",
            ],
        );
        config(
            &d,
            &[
                "--add",
                "remote.origin.fetch",
                "+refs/heads/main:refs/remotes/origin/main",
            ],
        );
        d
    };
    let (a, b) = (twin("a.git"), twin("b.git"));
    repo::git(&a, &["fetch", "-q", "origin"]);
    let r = open(&b);
    let origin = NamedRemote::find(&r, "origin").expect("ok").expect("some");
    let fetch = FetchOptions {
        tags: origin.tags,
        ..FetchOptions::default()
    };
    let out = client()
        .fetch_remote(&origin, &[], &r, &fetch, &quick(20_000, 10_000, 1))
        .expect("valid");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    assert_eq!(out.operation.remote, url);
    assert_eq!(repo::refs(&a), repo::refs(&b));
    assert!(
        repo::refs(&b).contains_key("refs/tags/v1.0"),
        "a followed tag"
    );
    let head = |d: &Path| std::fs::read_to_string(d.join("FETCH_HEAD")).expect("FETCH_HEAD");
    assert_eq!(head(&a), head(&b));
    assert!(head(&b).contains("\t\tbranch 'dev' of "), "{}", head(&b));
}

#[test]
fn a_repository_owned_by_another_user_is_refused_before_any_call() {
    let w = World::new();
    let dir = w.path("theirs.git");
    repo::init_bare(&dir).expect("init");
    let main = repo::commit_on(&dir, "main", "one");
    let marker = w.path("ssh-command-ran");
    config(
        &dir,
        &["core.sshCommand", &format!("touch {}", marker.display())],
    );
    let chown = std::process::Command::new("chown")
        .args(["-R", "nobody", &dir.display().to_string()])
        .status()
        .expect("chown runs");
    assert!(chown.success(), "chown needs root (as CI has)");

    let git = repo::try_git(&dir, &["push", "ssh://127.0.0.1:1/x.git", "main"])
        .expect_err("git refuses it");
    assert!(git.stderr.contains("dubious ownership"), "{git:?}");

    let r = open(&dir);
    let e = check_trusted(&r).expect_err("not ours");
    assert!(e.to_string().contains("safe.directory"), "{e}");
    assert_eq!(e.path, std::fs::canonicalize(&dir).expect("canonical"));
    let out = push(
        "ssh://127.0.0.1:1/x.git",
        update(Some(&main), "refs/heads/main"),
        &dir,
        &quick(10_000, 5_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::LocalError);
    assert_eq!(out.attempts.len(), 1, "never tried again");
    assert!(!marker.exists(), "its core.sshCommand ran");
    let fetched = client()
        .fetch(
            &w.daemon.url("x.git"),
            &["refs/heads/*:refs/x/*".into()],
            &r,
            &quick(10_000, 5_000, 3),
        )
        .expect("valid");
    assert_eq!(fetched.kind, OutcomeKind::LocalError);

    // Opened with full trust on purpose: the caller's decision.
    let trusted = gix::open_opts(
        &dir,
        gix::open::Options::default().with(gix::sec::Trust::Full),
    )
    .expect("open");
    assert!(check_trusted(&trusted).is_ok());
}
