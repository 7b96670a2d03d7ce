//! The git daemon, the repository builders and the git-mode fault proxy,
//! driven by the real git CLI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{git_status, scene, Scene, WAIT};
use sluice_testkit::pktline;
use sluice_testkit::repo::{self, commit_on, git, rev_parse};
use sluice_testkit::{Fault, FaultProxy, GitDaemon, Point, Service};

/// The scene's server behind a `git daemon` with a git-mode fault proxy
/// in front (the daemon is returned to keep it running).
fn proxied_scene() -> (Scene, GitDaemon, FaultProxy) {
    let s = scene();
    let daemon = GitDaemon::start(&s.base).unwrap();
    let proxy = FaultProxy::git(daemon.addr()).unwrap();
    (s, daemon, proxy)
}

fn ls_remote_v(
    dir: &Path,
    url: &str,
    version: u8,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let v = format!("protocol.version={version}");
    let out = repo::git_output(dir, &["-c", &v, "ls-remote", url]);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(o, r)| (r.to_owned(), o.to_owned()))
        .collect())
}

#[test]
fn ls_remote_through_the_daemon_lists_every_ref_of_the_served_repository() {
    let s = scene();
    let daemon = GitDaemon::start(&s.base).unwrap();
    let listed = repo::ls_remote(&s.work, &daemon.url("r.git")).unwrap();
    assert_eq!(
        listed.get("refs/heads/main"),
        rev_parse(&s.server, "refs/heads/main").as_ref()
    );
    assert_eq!(
        listed.get("refs/heads/feature"),
        rev_parse(&s.server, "refs/heads/feature").as_ref()
    );
    assert_eq!(
        listed.get("refs/tags/v1"),
        rev_parse(&s.server, "refs/tags/v1").as_ref()
    );
    assert_eq!(listed.get("HEAD"), listed.get("refs/heads/main"));
}

#[test]
fn the_daemon_can_be_started_from_an_explicit_git_program() {
    let s = scene();
    let git_path = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    let daemon = GitDaemon::start_with(&git_path, &s.base).unwrap();
    assert!(repo::ls_remote(&s.work, &daemon.url("/r.git"))
        .unwrap()
        .contains_key("refs/heads/main"));
}

#[test]
fn builders_are_deterministic_across_bare_and_work_repositories() {
    let s = scene();
    assert_eq!(rev_parse(&s.server, "main"), rev_parse(&s.work, "main"));
    assert_eq!(rev_parse(&s.server, "v1"), rev_parse(&s.work, "v1"));
    assert_eq!(git(&s.server, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(git(&s.work, &["status", "--porcelain"]), "");
    assert!(repo::fsck(&s.server).is_ok());
    assert_eq!(git(&s.server, &["cat-file", "-t", "v1"]), "tag");
}

#[test]
fn a_thousand_commits_build_in_one_fast_import_pack() {
    // What makes the builder fast — one `git fast-import`, one pack, no
    // loose object — is checked, not a wall-clock figure (a busy machine
    // took 2.1 s; timing belongs in benchmarks).
    let dir = tempfile::tempdir().unwrap();
    let r = sluice_testkit::RepoBuilder::new()
        .branch("main", 1000)
        .lightweight_tag("light", "main")
        .build(&dir.path().join("big.git"))
        .unwrap();
    assert_eq!(git(&r, &["rev-list", "--count", "main"]), "1000");
    assert_eq!(rev_parse(&r, "light"), rev_parse(&r, "main"));
    let counts = git(&r, &["count-objects", "-v"]);
    assert!(counts.lines().any(|l| l == "count: 0"), "{counts}");
    assert!(counts.lines().any(|l| l == "packs: 1"), "{counts}");
}

#[test]
fn commit_on_adds_one_commit_and_server_reflogs_record_it() {
    let s = scene();
    let before = rev_parse(&s.server, "main").unwrap();
    let oid = commit_on(&s.server, "main", "server side");
    assert_eq!(rev_parse(&s.server, "main^"), Some(before));
    assert_eq!(rev_parse(&s.server, "main"), Some(oid.clone()));
    let log = repo::reflog_entries(&s.server, "refs/heads/main");
    assert_eq!(log.last().unwrap().new, oid);
    let fresh = commit_on(&s.server, "topic", "on a new branch");
    assert_eq!(rev_parse(&s.server, "topic^"), Some(oid));
    assert_eq!(rev_parse(&s.server, "topic"), Some(fresh));
}

#[test]
fn ls_remote_through_a_pass_through_proxy_matches_the_daemon_in_v2_and_v0() {
    let (s, daemon, proxy) = proxied_scene();
    let direct = ls_remote_v(&s.work, &daemon.url("r.git"), 2).unwrap();
    assert_eq!(
        ls_remote_v(&s.work, &proxy.url("r.git"), 2).unwrap(),
        direct
    );
    assert_eq!(
        ls_remote_v(&s.work, &proxy.url("r.git"), 0).unwrap(),
        direct
    );
    assert!(proxy.wait_idle(WAIT));
    let recs = proxy.connections();
    assert_eq!(recs.len(), 2);
    let v2 = &recs[0];
    assert_eq!(v2.service, Some(Service::UploadPack));
    assert_eq!(v2.path.as_deref(), Some("/r.git"));
    assert_eq!(
        (v2.requested_version, v2.protocol_version),
        (Some(2), Some(2))
    );
    assert!(
        v2.passed(Point::Advertised)
            && v2.passed(Point::CommandsSent)
            && v2.passed(Point::Responded)
    );
    assert_eq!(v2.fault, None);
    assert!(v2.closed.is_some());
    assert!(v2.bytes_server_to_client > 0 && v2.bytes_client_to_server > 0);
    let v0 = &recs[1];
    assert_eq!(v0.protocol_version, Some(0));
    assert!(v0.passed(Point::Advertised));
}

#[test]
fn a_refused_connection_makes_ls_remote_fail_and_is_recorded() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault_always(Fault::Refuse);
    assert!(ls_remote_v(&s.work, &proxy.url("r.git"), 2).is_err());
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert_eq!(rec.fault, Some(Fault::Refuse));
    assert!(rec.fault_fired);
    assert_eq!(rec.reached, Point::Accepted);
    assert_eq!(rec.service, None);
    assert_eq!(rec.bytes_server_to_client, 0);
}

#[test]
fn a_fault_for_the_first_connection_only_then_passes_through() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::ResetBeforeAdvert, 1);
    assert!(ls_remote_v(&s.work, &proxy.url("r.git"), 2).is_err());
    assert!(ls_remote_v(&s.work, &proxy.url("r.git"), 2).is_ok());
    assert!(proxy.wait_idle(WAIT));
    let recs = proxy.connections();
    assert_eq!(recs[0].fault, Some(Fault::ResetBeforeAdvert));
    assert_eq!(recs[0].reached, Point::RequestLine);
    assert_eq!(recs[0].service, Some(Service::UploadPack));
    assert_eq!(recs[1].fault, None);
    assert!(recs[1].passed(Point::Responded));
    assert_eq!(proxy.fault_remaining(), 0);
}

#[test]
fn a_cut_after_the_advertisement_fails_ls_remote_after_the_advertised_point() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::CutAfterAdvert, 1);
    // v2: the advertisement is the capability list; ls-refs then fails.
    assert!(ls_remote_v(&s.work, &proxy.url("r.git"), 2).is_err());
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert!(rec.fault_fired);
    assert_eq!(rec.reached, Point::Advertised);
    assert!(!rec.passed(Point::Responded));
}

#[test]
fn a_trickled_advertisement_still_arrives_whole() {
    let (s, daemon, proxy) = proxied_scene();
    proxy.set_fault(
        Fault::TrickleAdvert {
            every: Duration::from_millis(1),
        },
        1,
    );
    let direct = ls_remote_v(&s.work, &daemon.url("r.git"), 0).unwrap();
    assert_eq!(
        ls_remote_v(&s.work, &proxy.url("r.git"), 0).unwrap(),
        direct
    );
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert!(rec.fault_fired);
    let advertised = rec
        .milestones
        .iter()
        .find(|(p, _)| *p == Point::Advertised)
        .unwrap()
        .1;
    // One pause per byte: a v0 advertisement of a few hundred bytes.
    assert!(advertised - rec.accepted >= Duration::from_millis(100));
}

#[test]
fn a_stall_before_the_advertisement_holds_the_socket_until_the_proxy_is_dropped() {
    let (_s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::StallBeforeAdvert, 1);
    let mut c = TcpStream::connect(proxy.addr()).unwrap();
    c.write_all(&pktline::encode(b"git-upload-pack /r.git\0host=x\0"))
        .unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut b = [0u8; 16];
    // A read interrupted by a signal (another test's child exiting) is no
    // answer: read again; anything else the proxy sent would be.
    let e = loop {
        match c.read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break e,
            Ok(n) => panic!("the proxy passed {n} bytes through a stall"),
        }
    };
    assert!(
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{e:?}"
    );
    assert!(!proxy.wait_idle(Duration::from_millis(10)));
    let rec = proxy.connections()[0].clone();
    assert_eq!(rec.reached, Point::RequestLine);
    assert!(rec.closed.is_none());
    drop(proxy);
    c.set_read_timeout(Some(WAIT)).unwrap();
    assert_eq!(c.read(&mut b).unwrap_or(0), 0);
}

fn push(work: &Path, url: &str, refspec: &str) -> (bool, String) {
    git_status(work, &["push", "--porcelain", url, refspec])
}

#[test]
fn a_pass_through_push_is_recorded_through_every_point() {
    let (s, _daemon, proxy) = proxied_scene();
    let new = commit_on(&s.work, "main", "pushed");
    let (ok, err) = push(&s.work, &proxy.url("r.git"), "main:main");
    assert!(ok, "{err}");
    assert_eq!(rev_parse(&s.server, "main"), Some(new));
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert_eq!(rec.service, Some(Service::ReceivePack));
    let points: Vec<Point> = rec.milestones.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        points,
        [
            Point::Accepted,
            Point::RequestLine,
            Point::Advertised,
            Point::CommandsSent,
            Point::PackStarted,
            Point::Responded
        ]
    );
    assert!(rec.pack_bytes_client_to_server >= 32);
}

#[test]
fn a_push_cut_before_the_report_fails_on_the_client_but_lands_on_the_server() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let before = repo::reflog(&s.server, "refs/heads/main").len();
    let new = commit_on(&s.work, "main", "lands unseen");
    let (ok, _) = push(&s.work, &proxy.url("r.git"), "main:main");
    assert!(!ok);
    assert_eq!(rev_parse(&s.server, "main"), Some(new.clone()));
    let log = repo::reflog_entries(&s.server, "refs/heads/main");
    assert_eq!(log.len(), before + 1);
    assert_eq!(log.last().unwrap().new, new);
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert!(rec.fault_fired);
    assert_eq!(rec.reached, Point::PackStarted);
    assert!(
        rec.discarded_server_bytes > 0,
        "the report was read and dropped"
    );
    assert!(repo::fsck(&s.server).is_ok());
}

#[test]
fn a_deletion_only_push_cut_before_the_report_still_deletes() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::CutBeforeReport, 1);
    let (ok, _) = push(&s.work, &proxy.url("r.git"), ":refs/heads/feature");
    assert!(!ok);
    assert_eq!(rev_parse(&s.server, "refs/heads/feature"), None);
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert_eq!(rec.reached, Point::CommandsSent);
    assert_eq!(rec.pack_bytes_client_to_server, 0);
}

#[test]
fn a_push_cut_in_its_pack_leaves_the_server_ref_unchanged() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::CutInPushPack, 1);
    let before = rev_parse(&s.server, "main");
    commit_on(&s.work, "main", "never lands");
    let (ok, _) = push(&s.work, &proxy.url("r.git"), "main:main");
    assert!(!ok);
    assert_eq!(rev_parse(&s.server, "main"), before);
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert!(rec.fault_fired);
    assert_eq!(rec.reached, Point::PackStarted);
    assert_eq!(rec.pack_bytes_client_to_server, 20);
    assert!(repo::fsck(&s.server).is_ok());
}

#[test]
fn a_stalled_report_keeps_the_client_waiting_after_the_push_landed() {
    let (s, _daemon, proxy) = proxied_scene();
    proxy.set_fault(Fault::StallBeforeReport, 1);
    let new = commit_on(&s.work, "main", "stalled");
    let mut child = repo::git_command(&s.work)
        .args(["push", &proxy.url("r.git"), "main:main"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while rev_parse(&s.server, "main").as_ref() != Some(&new) {
        assert!(t.elapsed() < WAIT, "push never landed");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Give the server time to close; the client must still be waiting.
    let t = Instant::now();
    while proxy.connections()[0].discarded_server_bytes == 0 && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        child.try_wait().unwrap().is_none(),
        "client should still wait for its report"
    );
    drop(proxy);
    let status = child.wait().unwrap();
    assert!(!status.success());
}

#[test]
fn a_fetch_cut_in_its_pack_fails_after_the_pack_started_in_v2_and_v0() {
    for version in [2u8, 0] {
        let (s, _daemon, proxy) = proxied_scene();
        proxy.set_fault(Fault::CutInFetchPack, 1);
        let v = format!("protocol.version={version}");
        let into = s.dir.path().join("clone");
        let out = repo::git_output(
            s.dir.path(),
            &[
                "-c",
                &v,
                "clone",
                "-q",
                "--bare",
                &proxy.url("r.git"),
                into.to_str().unwrap(),
            ],
        );
        assert!(!out.status.success(), "v{version}");
        assert!(proxy.wait_idle(WAIT));
        let rec = &proxy.connections()[0];
        assert!(rec.fault_fired, "v{version}");
        assert_eq!(
            rec.reached,
            Point::PackStarted,
            "v{version}: {:?}",
            rec.milestones
        );
        assert!(!rec.passed(Point::PackComplete));
        // And a pass-through clone afterwards completes.
        let out = repo::git_output(
            s.dir.path(),
            &[
                "-c",
                &v,
                "clone",
                "-q",
                "--bare",
                &proxy.url("r.git"),
                into.to_str().unwrap(),
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(proxy.wait_idle(WAIT));
        let rec = &proxy.connections()[1];
        assert!(
            rec.passed(Point::PackComplete) && rec.passed(Point::Responded),
            "v{version}: {:?}",
            rec.milestones
        );
    }
}

#[test]
fn the_server_error_line_for_a_missing_repository_is_recorded() {
    let (s, _daemon, proxy) = proxied_scene();
    assert!(ls_remote_v(&s.work, &proxy.url("missing.git"), 2).is_err());
    assert!(proxy.wait_idle(WAIT));
    let rec = &proxy.connections()[0];
    assert!(rec.server_error.is_some(), "{rec:?}");
    assert!(!rec.passed(Point::Advertised));
}

#[test]
fn dropping_the_proxy_ends_every_connection_thread() {
    let (_s, _daemon, proxy) = proxied_scene();
    proxy.set_fault_always(Fault::StallBeforeAdvert);
    let clients: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut c = TcpStream::connect(proxy.addr()).unwrap();
            c.write_all(&pktline::encode(b"git-upload-pack /r.git\0host=x\0"))
                .unwrap();
            c
        })
        .collect();
    let t = Instant::now();
    while proxy.connections().len() < 3 {
        assert!(t.elapsed() < WAIT);
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    drop(proxy);
    assert!(t.elapsed() < Duration::from_secs(2));
    drop(clients);
}

#[test]
fn a_git_daemon_named_by_its_path_serves_through_the_proxy() {
    // `start_with` takes a `git-daemon` binary of any installation (the
    // vendor suite passes Debian's 2.39); here the PATH's own one.
    let exec_path = std::process::Command::new("git")
        .arg("--exec-path")
        .output()
        .expect("git --exec-path");
    let exec_path = String::from_utf8(exec_path.stdout).expect("utf-8");
    let program = Path::new(exec_path.trim()).join("git-daemon");
    assert!(program.exists(), "{} is missing", program.display());
    let s = scene();
    let daemon = GitDaemon::start_with(Path::new(&program), &s.base).unwrap();
    let proxy = FaultProxy::git(daemon.addr()).unwrap();
    let direct = ls_remote_v(&s.work, &daemon.url("r.git"), 2).unwrap();
    assert_eq!(
        ls_remote_v(&s.work, &proxy.url("r.git"), 0).unwrap(),
        direct
    );
    let new = commit_on(&s.work, "main", "to the other daemon");
    let (ok, err) = push(&s.work, &proxy.url("r.git"), "main:main");
    assert!(ok, "{err}");
    assert_eq!(rev_parse(&s.server, "main"), Some(new));
}
