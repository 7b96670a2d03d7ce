//! The sshd fixture, driven by the real git CLI over `ssh://`.
//!
//! `GIT_SSH_COMMAND` is passed to each git command (never set process-wide),
//! so these tests may run in parallel.

use std::net::TcpStream;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use sluice_testkit::repo::{self, git_command, RepoBuilder};
use sluice_testkit::{Sshd, SshdOptions};

fn served(dir: &Path) -> std::path::PathBuf {
    RepoBuilder::new()
        .branch("main", 3)
        .branch_from("feature", "main", 1)
        .annotated_tag("v1", "main", "version 1")
        .build(&dir.join("srv").join("r.git"))
        .expect("fixture repository")
}

/// `git <args>` in `dir` through `sshd`, with `GIT_TRACE_PACKET` on so the
/// protocol spoken shows on stderr.
fn git_ssh(sshd: &Sshd, dir: &Path, args: &[&str]) -> Output {
    git_command(dir)
        .args(args)
        .env("GIT_SSH_COMMAND", sshd.git_ssh_command())
        .env("GIT_TRACE_PACKET", "1")
        .output()
        .expect("git runs")
}

fn ls_remote(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(o, r)| (r.to_owned(), o.to_owned()))
        .collect()
}

#[test]
fn git_ls_remote_over_ssh_lists_the_repository_over_protocol_v2() {
    let dir = tempfile::tempdir().unwrap();
    let srv = served(dir.path());
    let sshd = Sshd::start().expect("sshd starts");
    let url = sshd.url(&srv);
    assert!(
        url.starts_with(&format!("ssh://{}@127.0.0.1:{}/", sshd.user(), sshd.port())),
        "{url}"
    );
    let out = git_ssh(&sshd, dir.path(), &["ls-remote", "--symref", &url]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nsshd: {}", sshd.log());
    let listed = ls_remote(&out);
    for (name, oid) in repo::refs(&srv) {
        assert!(
            listed.contains(&(name.clone(), oid.clone())),
            "{name} {oid} missing from {listed:?}"
        );
    }
    let tag = repo::rev_parse(&srv, "refs/tags/v1^{}").unwrap();
    assert!(listed.contains(&("refs/tags/v1^{}".to_owned(), tag)));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ref: refs/heads/main\tHEAD"));
    assert!(
        stderr.contains("< version 2"),
        "sshd should pass GIT_PROTOCOL on: {stderr}"
    );
}

#[test]
fn without_accept_env_the_server_speaks_protocol_v0() {
    let dir = tempfile::tempdir().unwrap();
    let srv = served(dir.path());
    let sshd = Sshd::start_with(&SshdOptions {
        accept_git_protocol: false,
        ..SshdOptions::default()
    })
    .expect("sshd starts");
    let out = git_ssh(&sshd, dir.path(), &["ls-remote", &sshd.url(&srv)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\nsshd: {}", sshd.log());
    assert!(!stderr.contains("< version 2"), "{stderr}");
    assert_eq!(
        ls_remote(&out)
            .iter()
            .find(|(r, _)| r == "refs/heads/main")
            .map(|(_, o)| o.clone()),
        repo::rev_parse(&srv, "refs/heads/main")
    );
}

#[test]
fn git_push_over_ssh_updates_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let srv = served(dir.path());
    let local = dir.path().join("local.git");
    repo::git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            srv.to_str().unwrap(),
            local.to_str().unwrap(),
        ],
    );
    let tip = repo::commit_on(&local, "main", "over ssh");
    let sshd = Sshd::start().expect("sshd starts");
    let out = git_ssh(
        &sshd,
        &local,
        &["push", "-q", &sshd.url(&srv), "main:refs/heads/main"],
    );
    assert!(
        out.status.success(),
        "{}\nsshd: {}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log()
    );
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), Some(tip));
}

#[test]
fn a_forced_command_runs_instead_of_the_clients() {
    let dir = tempfile::tempdir().unwrap();
    let srv = served(dir.path());
    let marker = dir.path().join("ran");
    let sshd = Sshd::start_with(&SshdOptions {
        force_command: Some(format!(
            "touch '{}'; exec sh -c \"$SSH_ORIGINAL_COMMAND\"",
            marker.display()
        )),
        ..SshdOptions::default()
    })
    .expect("sshd starts");
    let out = git_ssh(&sshd, dir.path(), &["ls-remote", &sshd.url(&srv)]);
    assert!(
        out.status.success(),
        "{}\nsshd: {}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log()
    );
    assert!(marker.exists());
    assert!(!ls_remote(&out).is_empty());
}

#[test]
fn another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = served(dir.path());
    let sshd = Sshd::start().expect("sshd starts");
    let other = dir.path().join("other_key");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success());
    let command = sshd.git_ssh_command().replace(
        &sshd.client_key().display().to_string(),
        &other.display().to_string(),
    );
    let out = git_command(dir.path())
        .args(["ls-remote", &sshd.url(&srv)])
        .env("GIT_SSH_COMMAND", command)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Permission denied"), "{stderr}");
}

#[test]
fn dropping_it_stops_the_server() {
    let sshd = Sshd::start().expect("sshd starts");
    let addr = sshd.addr();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok());
    drop(sshd);
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err());
}
