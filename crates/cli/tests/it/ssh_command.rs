//! Which ssh runs, side by side with git against a real sshd: the
//! environment's `GIT_SSH_COMMAND`, then the repository's
//! `core.sshCommand`, then `GIT_SSH` (a program, no shell), in git's order.
//! Each case is run by `git fetch` and by `sluice-remote fetch` with the
//! same environment and configuration, and both must agree.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use sluice_testkit::{repo, Sshd};

/// An executable script at `path` running `body`.
fn script(path: &Path, body: &str) -> String {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    let mut perm = std::fs::metadata(path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).expect("chmod");
    path.display().to_string()
}

/// Whether `git fetch` and `sluice-remote fetch` of `url` into fresh
/// repositories succeed, with `env` set and `config` (core.sshCommand) in
/// the repositories.
fn both(
    w: &World,
    name: &str,
    url: &str,
    env: &[(&str, &str)],
    config: Option<&str>,
) -> (bool, bool) {
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let run = |who: &str| {
        let dir = w.empty(&format!("{name}-{who}.git"));
        if let Some(c) = config {
            repo::set_config(&dir, "core.sshCommand", c);
        }
        let mut cmd = if who == "git" {
            let mut c = Command::new("git");
            c.arg("-C").arg(&dir).args(["fetch", url, spec]);
            c
        } else {
            let mut c = Command::new(env!("CARGO_BIN_EXE_sluice-remote"));
            c.args(["fetch", url, spec, "--repo"])
                .arg(&dir)
                .args(["--max-attempts", "1"]);
            c
        };
        cmd.env_remove("GIT_SSH_COMMAND")
            .env_remove("GIT_SSH")
            .env_remove("GIT_SSH_VARIANT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let ok = cmd.status().expect("runs").success();
        if ok {
            assert!(repo::rev_parse(&dir, "refs/remotes/origin/main").is_some());
        }
        ok
    };
    (run("git"), run("sluice"))
}

#[test]
fn the_ssh_command_is_chosen_as_git_chooses_it() {
    let sshd = Sshd::start().expect("sshd starts (scripts/test.sh installs openssh-server)");
    let w = World::new();
    let url = sshd.url(&w.server());
    let good = sshd.git_ssh_command();
    let bin = w.path("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    // GIT_SSH takes a program: a wrapper that adds the test's options.
    let good_program = script(&bin.join("good-ssh"), &format!("exec {good} \"$@\""));
    let bad_program = script(&bin.join("bad-ssh"), "exit 255");

    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Option<&'a str>, bool);
    let cases: [Case; 6] = [
        (
            "command",
            vec![("GIT_SSH_COMMAND", good.as_str())],
            None,
            true,
        ),
        ("config", vec![], Some(good.as_str()), true),
        (
            "program",
            vec![("GIT_SSH", good_program.as_str())],
            None,
            true,
        ),
        // GIT_SSH_COMMAND wins over core.sshCommand...
        (
            "command-over-config",
            vec![("GIT_SSH_COMMAND", good.as_str())],
            Some("false"),
            true,
        ),
        // ... core.sshCommand over GIT_SSH ...
        (
            "config-over-program",
            vec![("GIT_SSH", bad_program.as_str())],
            Some(good.as_str()),
            true,
        ),
        // ... and a bad GIT_SSH_COMMAND is used, not skipped.
        (
            "bad-command",
            vec![
                ("GIT_SSH_COMMAND", "false"),
                ("GIT_SSH", good_program.as_str()),
            ],
            None,
            false,
        ),
    ];
    for (name, env, config, works) in cases {
        let (git, ours) = both(&w, name, &url, &env, config);
        assert_eq!(git, works, "{name}: git");
        assert_eq!(ours, works, "{name}: sluice-remote");
    }
}

/// `sluice-remote ls-refs <url> --json` with `GIT_SSH_COMMAND` set to
/// `ssh_command` and at most `attempts` attempts.
fn ls_refs_through(url: &str, ssh_command: &str, attempts: &str) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
        .args(["ls-refs", url, "--json", "--max-attempts", attempts])
        .env("GIT_SSH_COMMAND", ssh_command)
        .env_remove("GIT_SSH")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), doc)
}

#[test]
fn ssh_refusing_the_key_or_the_host_is_answered_in_one_attempt_and_exit_1() {
    let sshd = Sshd::start().expect("sshd starts (scripts/test.sh installs openssh-server)");
    let w = World::new();
    let url = sshd.url(&w.server());
    // A key sshd does not know.
    let wrong = w.path("wrong-key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&wrong)
        .status()
        .expect("ssh-keygen runs");
    assert!(made.success());
    let opts = |key: &Path, host_check: &str| {
        format!(
            "ssh -i '{}' -o StrictHostKeyChecking={host_check} -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o LogLevel=ERROR -p {}",
            key.display(),
            sshd.port()
        )
    };
    let cases = [
        ("a wrong key", opts(&wrong, "no"), "Permission denied ("),
        (
            "an unknown host key",
            opts(sshd.client_key(), "yes"),
            "Host key verification failed",
        ),
    ];
    for (what, command, words) in cases {
        // git says the same and fails.
        let git = Command::new("git")
            .args(["ls-remote", &url])
            .env("GIT_SSH_COMMAND", &command)
            .env_remove("GIT_SSH")
            .stdin(Stdio::null())
            .output()
            .expect("git runs");
        assert!(!git.status.success(), "{what}: git");
        assert!(
            String::from_utf8_lossy(&git.stderr).contains(words),
            "{what}: git says {git:?}"
        );
        let (code, doc) = ls_refs_through(&url, &command, "4");
        check_document(&doc, "ls-refs", "read");
        assert_eq!(code, 1, "{what}: {doc}");
        assert_eq!(doc["result"], "answered", "{what}: {doc}");
        let attempts = doc["attempts"].as_array().expect("attempts");
        assert_eq!(attempts.len(), 1, "{what}: one attempt: {doc}");
        assert_eq!(attempts[0]["class"], "answered", "{what}: {doc}");
        assert_eq!(attempts[0]["phase"], "connect", "{what}: {doc}");
        assert!(
            attempts[0]["cause"]
                .as_str()
                .is_some_and(|c| c.contains(words)),
            "{what}: ssh's words kept: {doc}"
        );
    }
    // ssh's other exit 255 (nobody listening) is still unjudged: tried again.
    let closed = format!(
        "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p {}",
        dead_port()
    );
    let (code, doc) = ls_refs_through(&url, &closed, "2");
    assert_ne!(code, 1, "{doc}");
    let attempts = doc["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{doc}");
    assert!(attempts.iter().all(|a| a["class"] == "unjudged"), "{doc}");
}
