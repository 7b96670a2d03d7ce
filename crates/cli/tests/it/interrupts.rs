//! Interrupted or killed, nothing left running (issue 45), against a real
//! `git daemon`: one SIGINT mid-fetch and two after a push's pack print the
//! document, write the ledger's finish and die by SIGINT; a push SIGKILLed
//! after its claim reads as `abandoned` once its deadline has passed; the
//! `transfer` profile lets a slow 5 MiB fetch finish; a deadline that cuts
//! a moving transfer is named in the cause.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use rustix::process::{kill_process, Pid, Signal};
use serde_json::Value;
use sluice_testkit::{repo, Point};

/// Wait for `cond`, polling (the events are a file a hook writes, a proxy
/// milestone, a ledger row): at most two minutes.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `len` incompressible bytes (xorshift), so the pack is as big.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The served repository's main gets a 5 MiB incompressible file.
fn big_world() -> (World, String) {
    let w = World::new();
    let tip = repo::commit_file(&w.server(), "main", "big.bin", &noise(5 << 20, 45));
    (w, tip)
}

/// Releases a held hook when dropped, so a failing test still lets the
/// server's receive-pack end.
struct Release(PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, b"");
    }
}

/// A pre-receive hook that says it started (a file) and waits for a
/// release file (at most a minute).
fn hold_hook(srv: &Path, dir: &Path) -> (PathBuf, Release) {
    let started = dir.join("hook-started");
    let release = dir.join("hook-release");
    repo::install_hook(
        srv,
        "pre-receive",
        &format!(
            "#!/bin/sh\n: > '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done\nexit 0\n",
            started.display(),
            release.display()
        ),
    )
    .expect("hook");
    (started, Release(release))
}

/// The CLI started with `args`, stdout piped and stderr read line by line
/// on a thread (its lines come through the receiver, and are kept).
struct Cli {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
}

impl Cli {
    fn start(args: &[&str]) -> Cli {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let err = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Cli {
            child,
            lines,
            stderr: Vec::new(),
        }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32).expect("pid");
        kill_process(pid, signal).expect("signal");
    }

    /// Wait for a stderr line containing `text`.
    fn wait_line(&mut self, text: &str) {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.stderr.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!("no line with {text:?} on stderr: {:?}", self.stderr),
            }
        }
    }

    /// Wait for the end: its exit status, stdout and the rest of stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String, String) {
        let out = self.child.wait_with_output().expect("the CLI ends");
        self.stderr.extend(self.lines.iter());
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            self.stderr.join("\n"),
        )
    }
}

/// `ledger show --json`'s entry (under `entry`, or the document itself).
fn entry_of(v: Value) -> Value {
    if v["entry"].is_null() {
        v
    } else {
        v["entry"].clone()
    }
}

fn document(stdout: &str, stderr: &str) -> Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one document on stdout ({e}): {stdout:?}; stderr: {stderr}"))
}

#[test]
fn one_sigint_mid_fetch_prints_the_document_and_dies_by_sigint() {
    let (w, _tip) = big_world();
    w.proxy.throttle(Some(200 << 10));
    let local = w.empty("local.git");
    let mut cli = Cli::start(&[
        "fetch",
        &w.proxied(),
        "+refs/heads/main:refs/remotes/origin/main",
        "--repo",
        &p(&local),
        "--json",
    ]);
    wait_for("the pack to start moving", || {
        w.proxy
            .connections()
            .iter()
            .any(|c| c.passed(Point::PackStarted))
    });
    cli.signal(Signal::INT);
    cli.wait_line("interrupted: stopping; a write whose request was complete is settled by reading (Ctrl-C again stops that too)");
    let (status, stdout, stderr) = cli.finish();
    assert_eq!(
        status.signal(),
        Some(2),
        "died by SIGINT: {status:?} {stderr}"
    );
    let doc = document(&stdout, &stderr);
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["stopped"], "cancelled", "{doc}");
    assert_ne!(doc["result"], "succeeded", "{doc}");
    let cause = doc["attempts"][0]["cause"].as_str().unwrap_or_default();
    assert!(
        cause.contains("cancelled"),
        "a cancel stays a cancel: {doc}"
    );
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main"),
        None,
        "nothing reported as written that was not"
    );
}

#[test]
fn two_sigints_after_a_pushs_pack_print_an_outcome_write_the_finish_and_die_by_sigint() {
    let w = World::new();
    let srv = w.server();
    let (started, _release) = hold_hook(&srv, w.dir.path());
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "x");
    let ledger = w.path("ledger.db");
    let mut cli = Cli::start(&[
        "push",
        &w.url(),
        &format!("{tip}:refs/heads/main"),
        "--repo",
        &p(&local),
        "--ledger",
        &p(&ledger),
        "--operation-id",
        "push-twice",
        "--json",
    ]);
    // The server has the whole pack and holds it in its hook.
    wait_for("the hook's start", || started.exists());
    cli.signal(Signal::INT);
    cli.wait_line("interrupted: stopping");
    cli.signal(Signal::INT);
    let (status, stdout, stderr) = cli.finish();
    assert_eq!(
        status.signal(),
        Some(2),
        "died by SIGINT: {status:?} {stderr}"
    );
    let doc = document(&stdout, &stderr);
    check_document(&doc, "push", "write");
    assert_eq!(doc["recorded"], true, "{doc}");
    match doc["result"].as_str() {
        Some("succeeded") => {}
        Some("unknown") => assert_eq!(doc["may_have_applied"], true, "{doc}"),
        other => panic!("{other:?}: {doc}"),
    }
    let show = sluice(&[
        "ledger",
        "show",
        "push-twice",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(show.code, 0, "{show:?}");
    let entry = entry_of(show.json());
    assert_eq!(entry["state"], "finished", "{entry}");
    assert_eq!(entry["run"]["result"], doc["result"], "{entry}");
}

#[test]
fn a_push_sigkilled_after_its_claim_is_abandoned_past_its_deadline_with_its_phase() {
    let w = World::new();
    let srv = w.server();
    let (started, _release) = hold_hook(&srv, w.dir.path());
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "x");
    let ledger = w.path("ledger.db");
    let spec = format!("{tip}:refs/heads/main");
    let args = [
        "push",
        &w.url(),
        &spec,
        "--repo",
        &p(&local),
        "--ledger",
        &p(&ledger),
        "--operation-id",
        "killed",
        "--deadline",
        "3s",
        "--json",
    ];
    let cli = Cli::start(&args);
    let pid = cli.child.id();
    wait_for("the hook's start", || started.exists());
    cli.signal(Signal::KILL);
    let (status, _, _) = cli.finish();
    assert_eq!(status.signal(), Some(9));
    // Its deadline (3 s) plus the finish's floor passes: abandoned.
    let show = || {
        sluice(&[
            "ledger",
            "show",
            "killed",
            "--ledger",
            &p(&ledger),
            "--json",
        ])
    };
    let state = |r: &Run| entry_of(r.json());
    wait_for("the claim to read as abandoned", || {
        state(&show())["state"] == "abandoned"
    });
    let entry = state(&show());
    assert_eq!(entry["phase"], "pack-sent", "{entry}");
    assert_eq!(entry["pid"], pid, "{entry}");
    assert!(entry["host"].is_string(), "{entry}");
    assert_eq!(entry["run"], Value::Null, "{entry}");
    // What remained of the 3 s deadline at the claim.
    let deadline = entry["deadline_ms"].as_u64().expect("a deadline");
    assert!((2000..=3000).contains(&deadline), "{entry}");
    let listed = sluice(&["ledger", "list", "--ledger", &p(&ledger)]);
    assert!(listed.stdout.contains("abandoned"), "{listed:?}");

    // Asked again: rejected, its previous abandoned with what it reached.
    let again = sluice(&args);
    assert_eq!(again.code, 4, "{again:?}");
    let doc = again.json();
    check_document(&doc, "push", "write");
    assert_eq!(doc["result"], "rejected");
    assert_eq!(doc["previous"]["result"], "abandoned", "{doc}");
    assert_eq!(doc["previous"]["phase"], "pack-sent", "{doc}");
    assert_eq!(doc["previous"]["pid"], pid, "{doc}");
    assert_eq!(doc["previous"]["may_have_applied"], true, "{doc}");
    assert_eq!(doc["may_have_applied"], true, "{doc}");
}

#[test]
fn a_5_mib_fetch_at_200_kib_a_second_succeeds_in_one_attempt_with_no_bounds_given() {
    let (w, tip) = big_world();
    w.proxy.throttle(Some(200 << 10));
    let local = w.empty("local.git");
    let t0 = Instant::now();
    let run = sluice(&[
        "fetch",
        &w.proxied(),
        "+refs/heads/main:refs/remotes/origin/main",
        "--repo",
        &p(&local),
        "--json",
    ]);
    let took = t0.elapsed();
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["result"], "succeeded", "{doc}");
    assert_eq!(doc["attempts"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["deadline_ms"], 900_000, "the transfer profile: {doc}");
    assert!(
        took > Duration::from_secs(20),
        "longer than the old 20 s default: {took:?}"
    );
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_deadline_that_cuts_a_moving_transfer_is_named_in_the_cause() {
    let (w, _tip) = big_world();
    w.proxy.throttle(Some(200 << 10));
    let local = w.empty("local.git");
    let run = sluice(&[
        "fetch",
        &w.proxied(),
        "+refs/heads/main:refs/remotes/origin/main",
        "--repo",
        &p(&local),
        "--deadline",
        "6s",
        "--json",
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["result"], "unknown", "{doc}");
    assert_eq!(doc["attempts"].as_array().unwrap().len(), 1, "{doc}");
    let cause = doc["attempts"][0]["cause"].as_str().expect("a cause");
    assert!(
        cause.contains("the operation's deadline ended the attempt"),
        "{cause}"
    );
    assert!(!cause.contains("attempt timed out"), "{cause}");
    let moved: u64 = cause
        .split(" bytes moved")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the bytes moved in {cause}"));
    assert!(moved > 100 << 10, "{cause}");
}
