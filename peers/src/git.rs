//! The git scenarios, on a real `git daemon` or `git http-backend` (behind
//! lighttpd) behind the test kit's fault proxy: a push whose report is cut
//! after the server took the pack (git://, http), and a push whose lease is
//! stale (somebody else moved the branch). Peers: the `git` CLI, libgit2
//! (`git2`) and sluice's git client. octocrab does not push: n/a.
//!
//! A `post-receive` hook on the server appends every ref update it applied
//! to a log, so "writes applied" is the server's own count.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_git::{gix, CallOptions, GitClient, PushOptions, RefUpdate};
use sluice_policy::{Bounds, Policy};
use sluice_testkit::repo;
use sluice_testkit::{Fault, FaultProxy, GitDaemon, HttpBackend, Protocol, RepoBuilder, Service};

use crate::forge::sluice_report;
use crate::{capped, one_line, Report, Row, Said, CAP};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    /// git://: the report is cut after the pack (the server applies it).
    CutGit,
    /// http: the POST's answer is cut after the pack (applied).
    CutHttp,
    /// git://, no fault: the branch moved since the lease was taken.
    StaleLease,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::CutGit => "push (git://): report cut after the pack",
            Case::CutHttp => "push (http): answer cut after the pack",
            Case::StaleLease => "push (git://) with a stale lease",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    GitCli,
    Git2,
    Sluice,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::GitCli => "`git push` (CLI)",
            Peer::Git2 => "git2 (libgit2)",
            Peer::Sluice => "sluice",
        }
    }
}

/// A served repository behind the proxy, and a local clone holding the
/// commit to push.
struct World {
    _dir: tempfile::TempDir,
    srv: PathBuf,
    local: PathBuf,
    log: PathBuf,
    _daemon: Option<GitDaemon>,
    _http: Option<HttpBackend>,
    proxy: FaultProxy,
    url: String,
    /// `main` when the clone was made (the lease's expectation).
    old: String,
    /// The commit pushed (a child of `old`).
    new: String,
    /// `main` as somebody else moved it (stale lease only).
    other: Option<String>,
}

fn world(case: Case) -> World {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("srv");
    std::fs::create_dir_all(&root).expect("srv");
    let srv = RepoBuilder::new()
        .branch("main", 3)
        .head("main")
        .build(&root.join("r.git"))
        .expect("the served repository builds");
    let log = dir.path().join("applied.log");
    repo::install_hook(
        &srv,
        "post-receive",
        &format!("#!/bin/sh\ncat >> '{}'\n", log.display()),
    )
    .expect("the post-receive hook");
    let local = dir.path().join("local.git");
    repo::git(
        dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &srv.display().to_string(),
            &local.display().to_string(),
        ],
    );
    let old = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    let new = repo::commit_on(&local, "main", "landing");
    let other =
        (case == Case::StaleLease).then(|| repo::commit_on(&srv, "main", "somebody else's commit"));
    let (daemon, http, proxy, url) = match case {
        Case::CutGit | Case::StaleLease => {
            let daemon = GitDaemon::start(&root).expect("git daemon starts");
            let proxy = FaultProxy::git(daemon.addr()).expect("proxy");
            let url = proxy.url("r.git");
            (Some(daemon), None, proxy, url)
        }
        Case::CutHttp => {
            HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
            let http = HttpBackend::start(&root).expect("http-backend starts");
            let proxy = FaultProxy::http(http.addr()).expect("proxy");
            let url = proxy.http_url("git/r.git");
            (None, Some(http), proxy, url)
        }
    };
    match case {
        Case::CutGit => proxy.set_fault(Fault::CutBeforeReport, 1),
        Case::CutHttp => proxy.set_fault(Fault::http_cut_response("/git-receive-pack"), 1),
        Case::StaleLease => {}
    }
    World {
        _dir: dir,
        srv,
        local,
        log,
        _daemon: daemon,
        _http: http,
        proxy,
        url,
        old,
        new,
        other,
    }
}

/// Every git scenario for every git peer, plus one n/a row each.
pub fn run_all(keep: &dyn Fn(&str) -> bool) -> Vec<Row> {
    let mut rows = Vec::new();
    for case in [Case::CutGit, Case::CutHttp, Case::StaleLease] {
        if !keep(case.name()) {
            continue;
        }
        for peer in [Peer::GitCli, Peer::Git2, Peer::Sluice] {
            eprintln!("git: {} / {}", case.name(), peer.name());
            let w = world(case);
            let report = run(&w, case, peer);
            rows.push(row(&w, case, peer, report));
        }
        rows.push(Row {
            scenario: case.name().to_string(),
            peer: "octocrab (both)",
            sent: "n/a".into(),
            applied: "n/a".into(),
            report: Report {
                said: Said::NotApplicable,
                words: "does not push".into(),
                took: Duration::ZERO,
            },
            matches: "n/a".into(),
        });
    }
    rows
}

fn run(w: &World, case: Case, peer: Peer) -> Report {
    let url = w.url.clone();
    let local = w.local.clone();
    let new = w.new.clone();
    let lease = (case == Case::StaleLease).then(|| w.old.clone());
    match peer {
        Peer::GitCli => git_cli(&local, &url, &new, lease.as_deref()),
        Peer::Git2 => capped(CAP, move || git2_push(&local, &url, &new, lease.as_deref())),
        Peer::Sluice => capped(CAP, move || {
            sluice_push(&local, &url, &new, lease.as_deref())
        }),
    }
}

/// `git push <url> <new>:refs/heads/main` (with
/// `--force-with-lease=refs/heads/main:<old>` for a lease), killed at the
/// cap.
fn git_cli(local: &Path, url: &str, new: &str, lease: Option<&str>) -> Report {
    let start = Instant::now();
    let mut cmd = repo::git_command(local);
    cmd.arg("push");
    if let Some(old) = lease {
        cmd.arg(format!("--force-with-lease=refs/heads/main:{old}"));
    }
    cmd.arg(url)
        .arg(format!("{new}:refs/heads/main"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("git starts");
    let pid = child.id();
    // The cap: a watcher kills the child if it is still running then.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watcher = std::thread::spawn(move || {
        if done_rx.recv_timeout(CAP).is_err() {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(pid.to_string())
                .status();
            return true;
        }
        false
    });
    let out = child.wait_with_output().expect("git's output");
    let _ = done_tx.send(());
    let killed = watcher.join().unwrap_or(false);
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(url, "<url>");
    let words = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("To <url>"))
        .collect::<Vec<_>>()
        .join(" / ");
    if killed {
        return Report {
            said: Said::Nothing,
            words: format!("killed at the {} s cap; {words}", CAP.as_secs()),
            took,
        };
    }
    let code = out
        .status
        .code()
        .map_or("a signal".to_string(), |c| c.to_string());
    Report {
        said: if out.status.success() {
            Said::Success
        } else {
            Said::Error
        },
        words: format!("exit {code}: {words}"),
        took,
    }
}

/// libgit2's push of `<new>:refs/heads/main`. libgit2 has no lease
/// option: with one, the push is forced (`+`) and the lease checked in the
/// `push_negotiation` callback against what the server advertised, as a
/// landing service on git2 would have to.
fn git2_push(local: &Path, url: &str, new: &str, lease: Option<&str>) -> Report {
    let start = Instant::now();
    let result = (|| -> Result<Vec<(String, Option<String>)>, git2::Error> {
        let repo = git2::Repository::open_bare(local)?;
        let mut remote = repo.remote_anonymous(url)?;
        let statuses: RefCell<Vec<(String, Option<String>)>> = RefCell::new(Vec::new());
        let expected = lease.map(git2::Oid::from_str).transpose()?;
        {
            let mut cbs = git2::RemoteCallbacks::new();
            cbs.push_update_reference(|name, status| {
                statuses
                    .borrow_mut()
                    .push((name.to_string(), status.map(str::to_string)));
                Ok(())
            });
            if let Some(expected) = expected {
                cbs.push_negotiation(move |updates| {
                    for u in updates {
                        if u.dst_refname().ok() == Some("refs/heads/main") && u.src() != expected {
                            return Err(git2::Error::from_str(&format!(
                                "stale lease: refs/heads/main is at {}, expected {expected}",
                                u.src()
                            )));
                        }
                    }
                    Ok(())
                });
            }
            let mut opts = git2::PushOptions::new();
            opts.remote_callbacks(cbs);
            let spec = match lease {
                Some(_) => format!("+{new}:refs/heads/main"),
                None => format!("{new}:refs/heads/main"),
            };
            remote.push(&[spec.as_str()], Some(&mut opts))?;
        }
        Ok(statuses.into_inner())
    })();
    let took = start.elapsed();
    match result {
        Ok(statuses) => {
            let rejected: Vec<String> = statuses
                .iter()
                .filter_map(|(n, s)| s.as_ref().map(|s| format!("{n}: {s}")))
                .collect();
            if rejected.is_empty() {
                Report {
                    said: Said::Success,
                    words: format!(
                        "Ok(()); updated: {}",
                        statuses
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    took,
                }
            } else {
                Report {
                    said: Said::Error,
                    words: format!("Ok(()), but rejected: {}", rejected.join("; ")),
                    took,
                }
            }
        }
        Err(e) => Report {
            said: Said::Error,
            words: format!(
                "Err(class {:?}, code {:?}): {}",
                e.class(),
                e.code(),
                e.message().replace(url, "<url>")
            ),
            took,
        },
    }
}

/// sluice's push: a fast-forward, or leased on `old`; three attempts of
/// 5 s inside 20 s.
fn sluice_push(local: &Path, url: &str, new: &str, lease: Option<&str>) -> Report {
    let oid = |h: &str| gix::ObjectId::from_hex(h.as_bytes()).expect("a sha");
    let update = match lease {
        Some(old) => RefUpdate::leased(oid(new), "refs/heads/main", oid(old)),
        None => RefUpdate::fast_forward(oid(new), "refs/heads/main"),
    };
    let client = GitClient::new(Arc::new(Policy::default()));
    let repo = gix::open(local).expect("the local repository opens");
    let opts = CallOptions::new().bounds(Bounds::new(
        Duration::from_secs(20),
        Duration::from_secs(5),
        3,
    ));
    let out = client
        .push(url, &[update], &PushOptions::default(), &repo, &opts)
        .expect("valid input");
    let refs = out
        .value
        .as_ref()
        .map(|r| {
            r.refs
                .iter()
                .map(|x| format!("{} {:?}", x.name, x.status))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut report = sluice_report(out);
    if !refs.is_empty() {
        report.words = format!("{}; refs: {refs}", report.words);
    }
    report.words = report.words.replace(url, "<url>");
    report
}

fn row(w: &World, case: Case, peer: Peer, report: Report) -> Row {
    // Every connection finished: a receive-pack the proxy cut has applied
    // (the proxy reads the server's side to its end).
    w.proxy.wait_idle(Duration::from_secs(10));
    let conns = w.proxy.connections();
    let sent = match w.proxy.protocol() {
        Protocol::Git => {
            let pushes: Vec<_> = conns
                .iter()
                .filter(|c| c.service == Some(Service::ReceivePack))
                .collect();
            let packs = pushes
                .iter()
                .filter(|c| c.pack_bytes_client_to_server > 0)
                .count();
            format!(
                "{} receive-pack connection{}, {packs} with a pack ({} connection{} in all)",
                pushes.len(),
                s(pushes.len()),
                conns.len(),
                s(conns.len())
            )
        }
        Protocol::Http => {
            let all: Vec<_> = conns.iter().flat_map(|c| c.http_requests.iter()).collect();
            let posts = all
                .iter()
                .filter(|r| r.method == "POST" && r.path.contains("/git-receive-pack"))
                .count();
            format!(
                "{posts} POST git-receive-pack ({} request{}, {} connection{} in all)",
                all.len(),
                s(all.len()),
                conns.len(),
                s(conns.len())
            )
        }
    };
    let applied_lines = std::fs::read_to_string(&w.log)
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0);
    let at = repo::rev_parse(&w.srv, "refs/heads/main").unwrap_or_default();
    let at_words = if at == w.new {
        "the pushed commit"
    } else if Some(&at) == w.other.as_ref() {
        "somebody else's commit"
    } else if at == w.old {
        "the old commit"
    } else {
        "another commit"
    };
    let applied = format!(
        "{applied_lines} ref update{}; main at {at_words}",
        s(applied_lines)
    );
    let landed = at == w.new;
    let matches = match (&report.said, case) {
        (Said::Success, _) if landed => "yes".to_string(),
        (Said::Success, _) => "**no**: success, not applied".into(),
        (Said::Error, Case::StaleLease) if !landed && applied_lines == 0 => {
            "yes (refused, nothing written)".into()
        }
        (Said::Error, _) if landed => "**no**: an error for a push that landed".into(),
        (Said::Error, _) => "yes".into(),
        (Said::Unknown, _) => format!(
            "no verdict (says it may have applied); it {}",
            if landed { "landed" } else { "did not land" }
        ),
        (Said::Nothing, _) => format!(
            "**no report**; it {}",
            if landed { "landed" } else { "did not land" }
        ),
        (Said::NotApplicable, _) => "n/a".into(),
    };
    let fired = match case {
        Case::CutGit => conns.iter().any(|c| c.fault_fired),
        Case::CutHttp => conns
            .iter()
            .flat_map(|c| c.http_requests.iter())
            .any(|r| r.fault.is_some() && !r.response_forwarded),
        Case::StaleLease => true,
    };
    Row {
        scenario: if fired {
            case.name().to_string()
        } else {
            format!("{} — **the fault did not fire**", case.name())
        },
        peer: peer.name(),
        sent,
        applied,
        report: Report {
            words: one_line(&report.words, 400),
            ..report
        },
        matches,
    }
}

fn s(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
