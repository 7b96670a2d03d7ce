//! SIGINT and SIGTERM (what a service manager sends) stop the CLI the same
//! way: a push whose pack was sent is settled by reading, never pushed
//! again, the document is still printed, and the process dies by the
//! signal.

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use sluice_testkit::repo;

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{what} never happened"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Releases the held hook when dropped, so a failing test still lets the
/// server's receive-pack end.
struct Release(std::path::PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.0, b"");
    }
}

fn hold_hook(srv: &Path, dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let started = dir.join("hook-started");
    let release = dir.join("hook-release");
    repo::install_hook(
        srv,
        "pre-receive",
        &format!(
            // Held at most a minute, whatever becomes of the test.
            "#!/bin/sh\n: > '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done\nexit 0\n",
            started.display(),
            release.display()
        ),
    )
    .expect("hook");
    (started, release)
}

#[test]
fn sigint_and_sigterm_after_the_pack_settle_by_reading_and_print_the_document() {
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let w = World::new();
        let srv = w.server();
        let old = repo::rev_parse(&srv, "refs/heads/main").expect("main");
        let (started, release) = hold_hook(&srv, w.dir.path());
        let _release = Release(release.clone());
        let local = w.clone_bare("local.git");
        let tip = repo::commit_on(&local, "main", "x");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice-remote"))
            .args([
                "push",
                &w.url(),
                &format!("{tip}:refs/heads/main"),
                "--repo",
                &p(&local),
                "--deadline",
                "30s",
                "--json",
            ])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // The server has the whole pack and holds it in its hook.
        wait_for("the hook's start", || started.exists());
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, signal).expect("signal");
        let out = child.wait_with_output().expect("the CLI ends");
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        // Printed, recorded, then dead by the signal (a shell sees 130 or
        // 143), so that a loop around it stops.
        assert_eq!(
            out.status.signal(),
            Some(signal.as_raw()),
            "{signal:?}: {run:?}"
        );
        let doc = run.json();
        check_document(&doc, "push", "write");
        assert_eq!(doc["result"], "unknown", "{signal:?}: {doc}");
        assert_eq!(doc["stopped"], "cancelled", "{signal:?}: {doc}");
        assert_eq!(doc["may_have_applied"], true, "{signal:?}: {doc}");
        assert_eq!(doc["reconciled"]["verdict"], "not-landed", "{doc}");
        assert_eq!(
            doc["reconciled"]["observed"]["refs/heads/main"],
            old.as_str()
        );
        assert_eq!(doc["attempts"].as_array().unwrap().len(), 1, "{doc}");
        let r = &doc["value"][0];
        assert_eq!(r["status"], "unknown", "{doc}");
        assert_eq!(r["verdict"], "not-landed", "{doc}");
        assert_eq!(r["old"], old.as_str(), "{doc}");
        assert_eq!(r["new"], tip.as_str(), "{doc}");
        // What the server received lands once the hook ends; nothing more
        // was sent.
        std::fs::write(&release, b"").expect("release");
        wait_for("the push to land", || {
            repo::rev_parse(&srv, "refs/heads/main").as_deref() == Some(tip.as_str())
        });
        let leftovers: Vec<_> = std::fs::read_dir(local.join("objects/pack"))
            .expect("pack dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
