//! Progress and messages, beside git 2.47 on the same servers: only git's
//! own progress lines are progress (a server's other words are `remote:`
//! lines), throughput is measured over a real interval, and every message
//! says what happened in words — an exit code, a refused ssh connection,
//! a bad port, a 401 without its HTML page — in an attempt table whose
//! columns fit the longest class.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use sluice_testkit::{repo, HttpBackend};

/// Runs `program args...` with `env` added (no stdin, no RUST_LOG).
fn run_env(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the program runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn sluice_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    run_env(Path::new(env!("CARGO_BIN_EXE_sluice-remote")), args, env)
}

fn git_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    run_env(Path::new("git"), args, env)
}

/// A server's words on side-band 2 during a fetch — here a pack-objects
/// hook's, as a hosting service's wrapper prints them — are the remote's
/// text: `remote:` lines, as git shows them, never a progress stage
/// (`fetch: remote: pre-receive: checking your push...: 0 objects`).
#[test]
fn a_servers_words_during_a_fetch_are_remote_lines_never_progress_stages() {
    let w = World::new();
    let hook = w.path("pack-objects-hook");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'pre-receive: checking your push...' >&2\nexec \"$@\"\n",
    )
    .expect("hook");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Protected configuration (global), which upload-pack reads for its
    // hook, for git and sluice alike.
    let global = w.path("global-config");
    std::fs::write(
        &global,
        format!("[uploadpack]\n\tpackObjectsHook = {}\n", hook.display()),
    )
    .expect("config");
    let global = p(&global);
    let env = [("GIT_CONFIG_GLOBAL", global.as_str())];
    let url = format!("file://{}", p(&w.server()));
    let spec = "refs/heads/*:refs/remotes/origin/*";

    let ours = w.empty("ours.git");
    let run = sluice_env(
        &["fetch", &url, spec, "--repo", &p(&ours), "--progress"],
        &env,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let theirs = w.empty("theirs.git");
    let git = git_env(
        &["-C", &p(&theirs), "fetch", "--progress", &url, spec],
        &env,
    );
    assert_eq!(git.code, 0, "{git:?}");
    let said = "remote: pre-receive: checking your push...";
    assert!(
        git.stderr.lines().any(|l| l.trim_end() == said),
        "git shows it as the remote's line: {}",
        git.stderr
    );
    assert!(run.stderr.lines().any(|l| l == said), "{}", run.stderr);
    for line in run.stderr.lines().filter(|l| l.starts_with("fetch: ")) {
        assert!(
            !line.contains("pre-receive"),
            "a progress stage made of the remote's words: {line}\n{}",
            run.stderr
        );
    }
    // git's own progress lines remain progress.
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("fetch: remote: Enumerating objects")),
        "{}",
        run.stderr
    );
    let json = sluice_env(
        &[
            "fetch",
            &url,
            spec,
            "--repo",
            &p(&w.empty("json.git")),
            "--json",
        ],
        &env,
    );
    let doc = json.json();
    assert!(
        doc["remote_messages"]
            .as_array()
            .expect("array")
            .iter()
            .any(|m| m == "pre-receive: checking your push..."),
        "{doc}"
    );
}

/// `N objects, SIZE, RATE/s` figures in `text` (a terminal's frames),
/// as (bytes, bytes per second).
fn rates(text: &str) -> Vec<(f64, f64, String)> {
    fn bytes(figure: &str) -> Option<f64> {
        let (n, unit) = figure.trim().split_once(' ')?;
        let n: f64 = n.parse().ok()?;
        let k = match unit {
            "B" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        Some(n * k)
    }
    let mut out = Vec::new();
    for piece in text.split(" objects, ").skip(1) {
        let mut parts = piece.splitn(3, ", ");
        let (Some(size), Some(rate)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(rate) = rate.split("/s").next().filter(|_| rate.contains("/s")) else {
            continue;
        };
        if let (Some(b), Some(r)) = (bytes(size), bytes(rate)) {
            out.push((b, r, format!("{size}, {rate}/s")));
        }
    }
    out
}

/// On a terminal (a pseudo-terminal made by `script`), every throughput
/// shown is measured over at least half a second of the clock: never more
/// than the bytes shown over that half second (today's main divides by the
/// microseconds since a stage began: `69.98 TiB/s`).
#[test]
fn throughput_on_a_terminal_is_measured_over_a_real_interval() {
    let w = World::new();
    let src = w.clone_bare("big.git");
    // Incompressible bytes, so the pack takes a while to move and index.
    let mut noise = Vec::with_capacity(24 << 20);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while noise.len() < 24 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    repo::commit_file(&src, "main", "noise.bin", &noise);
    let into = w.empty("into.git");
    let url = format!("file://{}", p(&src));
    let cmd = format!(
        "'{}' fetch '{url}' 'refs/heads/*:refs/remotes/origin/*' --repo '{}'",
        env!("CARGO_BIN_EXE_sluice-remote"),
        p(&into)
    );
    let typescript = w.path("typescript");
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &cmd])
        .arg(&typescript)
        .env("TERM", "xterm")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    assert!(out.status.success(), "{out:?}");
    let shown =
        String::from_utf8_lossy(&std::fs::read(&typescript).expect("typescript")).into_owned();
    assert!(shown.contains("origin/main"), "{shown}");
    for (bytes, rate, figure) in rates(&shown) {
        assert!(
            rate <= bytes / 0.5 * 1.01 + 1024.0,
            "a throughput not measured over half a second: {figure}"
        );
    }
}

/// A transport command that exits before the remote says anything is
/// named with its exit code in words, not Rust's `Some(1)`; git says it
/// could not read from the remote.
#[test]
fn a_transport_that_exits_before_advertising_is_named_with_its_exit_code_in_words() {
    let env = [("GIT_SSH_COMMAND", "exit 1")];
    let run = sluice_env(&["ls-refs", "ssh://127.0.0.1/x.git"], &env);
    let git = git_env(&["ls-remote", "ssh://127.0.0.1/x.git"], &env);
    assert_ne!(git.code, 0);
    assert!(
        git.stderr.contains("Could not read from remote repository"),
        "{}",
        git.stderr
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(!run.stderr.contains("Some("), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the ssh command exited with code 1 before the remote advertised anything"),
        "{}",
        run.stderr
    );
}

/// A refused ssh connection is said as what happened (ssh ended before the
/// remote said anything, and ssh's words), not gitoxide's `failed to fill
/// whole buffer`.
#[test]
fn a_refused_ssh_connection_is_said_in_the_callers_terms() {
    let port = dead_port().to_string();
    let url = format!("ssh://127.0.0.1:{port}/x.git");
    let run = sluice(&["ls-refs", &url, "--max-attempts", "1"]);
    let git = git_env(
        &["ls-remote", &url],
        &[("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")],
    );
    assert!(git.stderr.contains("Connection refused"), "{}", git.stderr);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(!run.stderr.contains("fill whole buffer"), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "the ssh command exited with code 255 before the remote said anything; it said: ssh: connect to host 127.0.0.1 port"
        ) && run.stderr.contains("Connection refused"),
        "{}",
        run.stderr
    );
}

/// A port past 65535 is a bad port, not a URL that "can not be parsed"
/// (git hands `127.0.0.1:70000` to ssh as a host name it cannot resolve).
#[test]
fn an_out_of_range_port_is_reported_as_a_bad_port() {
    for url in ["git://127.0.0.1:70000/x", "ssh://127.0.0.1:70000/x"] {
        let run = sluice(&["ls-refs", url]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stdout.is_empty());
        assert!(
            run.first_err_line().contains("bad port 70000"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("can not be parsed"), "{}", run.stderr);
    }
    // git hands the whole `host:port` to ssh, which cannot resolve it.
    let git = git_env(
        &["ls-remote", "ssh://127.0.0.1:70000/x"],
        &[("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")],
    );
    assert_ne!(git.code, 0);
    assert!(git.stderr.contains("70000"), "{}", git.stderr);
}

/// A 401 whose body is the web server's HTML page (lighttpd's, in front of
/// git's http-backend): the cause names the status, never a line of HTML.
/// git shows a body only when it is `text/plain`.
#[test]
fn a_401_cause_carries_no_line_of_an_html_page() {
    let w = World::new();
    let http =
        HttpBackend::start_with_auth(&w.dir.path().join("srv"), "alice", "s3cret").expect("http");
    let url = http.url("small.git");
    let local = w.clone_bare("local.git");
    repo::commit_on(&local, "main", "refused");
    let git = git_env(
        &["-C", &p(&local), "push", &url, "main"],
        &[("GIT_TERMINAL_PROMPT", "0")],
    );
    assert_ne!(git.code, 0, "{git:?}");
    assert!(!git.stderr.contains('<'), "{}", git.stderr);
    let run = sluice(&["push", &url, "main", "--repo", &p(&local), "--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    let cause = doc["attempts"][0]["cause"].as_str().expect("cause");
    assert!(cause.contains("401"), "{cause}");
    assert!(!cause.contains('<'), "HTML in the cause: {cause}");
}

/// The human attempt table's columns fit their widest cell: the class
/// `local-error` (a token command that cannot start) no longer pushes the
/// columns after it out of line with the header.
#[test]
fn the_attempt_tables_columns_fit_the_longest_class() {
    let port = dead_port().to_string();
    let url = format!("http://127.0.0.1:{port}/x.git");
    let run = sluice(&[
        "ls-refs",
        &url,
        "--token-command",
        "/nonexistent/token-command",
    ]);
    assert_eq!(run.code, 5, "{run:?}");
    let lines: Vec<&str> = run.stderr.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.trim_start().starts_with("attempt "))
        .unwrap_or_else(|| panic!("no table: {}", run.stderr));
    let row = lines[head + 1];
    assert!(row.contains("local-error"), "{}", run.stderr);
    for col in ["took", "left", "then", "cause"] {
        let at = lines[head].find(col).expect("column");
        assert_eq!(
            row.as_bytes().get(at.saturating_sub(1)),
            Some(&b' '),
            "column {col} out of line:\n{}\n{row}",
            lines[head]
        );
        assert_ne!(
            row.as_bytes().get(at),
            Some(&b' '),
            "column {col} out of line:\n{}\n{row}",
            lines[head]
        );
    }
}
