//! The interop suite: every scenario against every server × transport.
//!
//! One test, so the process environment is set once before any thread of
//! the suite starts: sluice (like git) reads `GIT_SSH_COMMAND` from it when
//! it spawns `ssh`, and the ssh row needs the sshd fixture's key and port
//! there. The rows then run on a few worker threads, each against its own
//! server.
//!
//! The table goes to stderr (always shown, even without `--nocapture`) and
//! to `<target>/vendor-tests/interop-table.md`; with
//! `SLUICE_VENDOR_README=1` it also replaces the table in
//! `vendor-tests/README.md`. Any failed cell, or any server that cannot be
//! found or started, fails the test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sluice_testkit::RepoBuilder;
use sluice_vendor_tests::scenarios::{self, Cell, RowResult, Shared, COLUMNS};
use sluice_vendor_tests::servers::{self, Row, Transport};
use sluice_vendor_tests::table;

/// A row that could not be started: its name, transport and why.
type Dead = (String, Transport, String);

fn dead(name: &str, transport: Transport, why: String) -> Dead {
    (name.to_owned(), transport, why)
}

fn start_rows() -> Vec<Result<Row, Dead>> {
    let mut rows = Vec::new();
    // ssh first: its GIT_SSH_COMMAND goes into the environment before any
    // other server (or thread) starts.
    let ssh = match servers::ssh() {
        Ok((row, command)) => {
            std::env::set_var("GIT_SSH_COMMAND", command);
            Ok(row)
        }
        Err(e) => Err(dead("git over OpenSSH `sshd`", Transport::Ssh, e)),
    };
    // The https row's CA, which the git CLI's probes trust through the
    // environment (set here, with GIT_SSH_COMMAND, before other threads).
    let pki = sluice_testkit::TestPki::new().map(std::sync::Arc::new);
    if let Ok(pki) = &pki {
        std::env::set_var("GIT_SSL_CAINFO", pki.ca_file());
    }
    rows.push(
        servers::git_daemon("", Path::new("git"), Path::new("git"))
            .map_err(|e| dead("git 2.47 `git daemon`", Transport::Git, e)),
    );
    rows.push(
        servers::debian_git_exec_dir()
            .and_then(|dir| {
                servers::git_daemon(" (Debian)", &dir.join("git-daemon"), &dir.join("git"))
            })
            .map_err(|e| dead("Debian's git 2.39 `git daemon`", Transport::Git, e)),
    );
    rows.push(
        servers::http_backend()
            .map_err(|e| dead("git `http-backend` behind lighttpd", Transport::Http, e)),
    );
    rows.push(
        pki.map_err(|e| format!("the test CA: {e}"))
            .and_then(servers::https_backend)
            .map_err(|e| {
                dead(
                    "git `http-backend` behind lighttpd with TLS",
                    Transport::Https,
                    e,
                )
            }),
    );
    rows.push(ssh);
    rows.push(servers::file().map_err(|e| dead("git spawned", Transport::File, e)));
    rows.push(servers::dulwich().map_err(|e| dead("dulwich", Transport::Git, e)));
    rows.push(servers::jgit().map_err(|e| dead("JGit `jgit daemon`", Transport::Git, e)));
    rows
}

fn workers() -> usize {
    std::env::var("SLUICE_VENDOR_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(3)
}

#[test]
fn every_scenario_against_every_server_and_transport() {
    let started = Instant::now();
    let rows = start_rows();
    let shared_dir = tempfile::tempdir().expect("a temporary directory");
    let thousand = RepoBuilder::new()
        .branch("main", 1000)
        .build(&shared_dir.path().join("thousand.git"))
        .expect("the 1,000-commit repository builds");
    let shared = Shared { thousand };
    let started_in = started.elapsed();

    let results: Vec<Mutex<Option<RowResult>>> = rows.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..workers().min(rows.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(row) = rows.get(i) else { break };
                let t = Instant::now();
                let result = match row {
                    Ok(row) => scenarios::run(row, &shared),
                    Err((name, transport, why)) => RowResult {
                        server: name.clone(),
                        transport: transport.as_str().to_owned(),
                        v0_route: "—".into(),
                        cells: COLUMNS
                            .iter()
                            .map(|_| Cell::Fail(format!("the server did not start: {why}")))
                            .collect(),
                        notes: vec![],
                        timings: vec![],
                        server_log: None,
                    },
                };
                let _ = writeln!(
                    std::io::stderr(),
                    "vendor-tests: {} ({}) done in {:.1} s: {}",
                    result.server,
                    result.transport,
                    t.elapsed().as_secs_f64(),
                    result
                        .timings
                        .iter()
                        .map(|(n, d)| format!("{n} {} ms", d.as_millis()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            });
        }
    });
    let results: Vec<RowResult> = results
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every row ran")
        })
        .collect();
    drop(rows); // stops every server
    let wall = started.elapsed();

    let header = format!(
        "Produced by `cargo test -p sluice-vendor-tests` (the test prints it and writes \
         `target/vendor-tests/interop-table.md`; `SLUICE_VENDOR_README=1` rewrites this \
         section). Wall time of the suite: {:.1} s ({:.1} s starting the servers and \
         building the inputs), {} rows on {} worker threads.",
        wall.as_secs_f64(),
        started_in.as_secs_f64(),
        results.len(),
        workers().min(results.len()),
    );
    let rendered = table::render(&results, &header);
    let mut err = std::io::stderr();
    let _ = writeln!(err, "\n{rendered}");
    match table::write_target(&rendered) {
        Ok(p) => {
            let _ = writeln!(err, "vendor-tests: table written to {}", p.display());
        }
        Err(e) => panic!("writing the table: {e}"),
    }
    if std::env::var_os("SLUICE_VENDOR_README").is_some_and(|v| v == "1") {
        let readme: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        table::update_readme(&readme, &rendered).expect("updating vendor-tests/README.md");
        let _ = writeln!(err, "vendor-tests: {} updated", readme.display());
    }

    let mut failures = Vec::new();
    for r in &results {
        for (i, c) in r.cells.iter().enumerate() {
            if let Cell::Fail(why) = c {
                failures.push(format!("{} × {}: {why}", r.server, COLUMNS[i].title));
            }
        }
        if let Some(log) = &r.server_log {
            let tail: String = log
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            if !tail.trim().is_empty() {
                failures.push(format!("{} server log (last lines):\n{tail}", r.server));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
