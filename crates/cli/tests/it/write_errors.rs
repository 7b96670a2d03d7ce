//! stdout that cannot be written never changes the exit code: a reader
//! that went away early (`| head -c 10`) ends the output quietly, and any
//! other write error (a full device) is said in one line on stderr; either
//! way the command exits with its outcome's code.

use crate::common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use common::*;
use sluice_testkit::repo;

/// Refs enough that `ls-refs`'s output is far larger than a pipe's buffer
/// (64 KiB on Linux), so the writer is still writing when the reader goes.
const MANY: usize = 4000;

/// A world whose served repository holds [`MANY`] more branches.
fn world_with_many_refs() -> World {
    let w = World::new();
    let main = repo::rev_parse(&w.server(), "refs/heads/main").expect("the fixture has main");
    let mut git = Command::new("git")
        .args(["update-ref", "--stdin"])
        .current_dir(w.server())
        .stdin(Stdio::piped())
        .spawn()
        .expect("git update-ref runs");
    let mut input = String::new();
    for i in 0..MANY {
        input.push_str(&format!("create refs/heads/many/branch-{i:05} {main}\n"));
    }
    git.stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("refs written");
    assert!(git.wait().expect("git ends").success());
    w
}

/// Run the binary with stdout on a pipe that is closed after its first 10
/// bytes were read; the exit code and the whole of stderr.
fn run_closing_stdout_after_10_bytes(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).expect("10 bytes of output");
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr read");
    let status = child.wait().expect("the binary ends");
    (status.code().unwrap_or(-1), stderr)
}

#[test]
fn stdout_closed_early_ends_with_the_outcomes_code_and_nothing_on_stderr() {
    let w = world_with_many_refs();
    let full = sluice(&["ls-refs", &w.url()]);
    assert_eq!(full.code, 0, "{full:?}");
    assert!(
        full.stdout.len() > 4 * 64 * 1024 && full.stdout.lines().count() > MANY,
        "the output outgrows a pipe's buffer: {} bytes",
        full.stdout.len()
    );
    for json in [false, true] {
        let mut args = vec!["ls-refs".to_string(), w.url()];
        if json {
            args.push("--json".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = run_closing_stdout_after_10_bytes(&args);
        assert_eq!(
            code, 0,
            "json {json}: the outcome's code (succeeded); {stderr}"
        );
        assert_eq!(stderr, "", "json {json}: nothing on stderr");
    }
}

#[test]
fn stdout_on_a_full_device_is_said_in_one_stderr_line_and_the_outcomes_code_kept() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("the full device opens")
    };
    // A read that succeeds: exit 0 whatever the output.
    let w = World::new();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
        .args(["ls-refs", &w.url(), "--json"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(full())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.starts_with("error: the output could not be written to stdout: "),
        "{stderr:?}"
    );
    // A read whose answer never came: exit 3, not the write error's.
    let url = format!("git://127.0.0.1:{}/small.git", dead_port());
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
        .args(["ls-refs", &url, "--json", "--max-attempts", "1"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(full())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(
        stderr.starts_with("error: the output could not be written to stdout: "),
        "{stderr:?}"
    );
}
