//! What an attempt timeout covers, over http(s): a transfer that keeps
//! moving (a fetch's response body, a push's request body) runs on past the
//! attempt timeout in one attempt; one that stalls mid-body is cut about an
//! attempt timeout after its last byte. The fault proxy (plain, or ending
//! TLS with a certificate of the run's CA) sits in front of git
//! http-backend behind lighttpd and throttles or stalls either direction.
//!
//! And a push's pack streams into its request body: a 48 MiB push's peak
//! memory is checked against `git push`'s through the same server, each
//! measured in a process of its own by `/usr/bin/time` (the peak RSS its
//! `wait4` reports, never a wall clock).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use sluice_git::{GitClient, HttpsConfig};
use sluice_policy::{Class, OutcomeKind, Policy};
use sluice_testkit::{repo, Fault, FaultProxy, HttpBackend, ServerCert, TestPki};

/// The attempt timeout of these tests.
const ATTEMPT_MS: u64 = 2_000;

/// 1.5 MiB of incompressible data at this rate takes about six seconds:
/// three attempt timeouts.
const RATE: u64 = 256 << 10;
const BIG: usize = 1536 << 10;

/// A pack that does not fit in the socket buffers of a loopback
/// connection (a few MiB each way).
const STALLED_PACK: usize = 24 << 20;

/// lighttpd serving the world's repositories (pushes allowed), the fault
/// proxy in front of it (ending TLS when `tls`), and a client for it.
struct Setup {
    _pki: Option<TestPki>,
    _http: HttpBackend,
    proxy: FaultProxy,
    client: GitClient,
}

fn setup(w: &World, tls: bool) -> Setup {
    let http = HttpBackend::start(&w.dir.path().join("srv")).expect("lighttpd starts");
    if !tls {
        let proxy = FaultProxy::http(http.addr()).expect("proxy");
        return Setup {
            _pki: None,
            _http: http,
            proxy,
            client: client(),
        };
    }
    let pki = TestPki::new().expect("pki");
    let proxy = FaultProxy::https(http.addr(), &pki.server(ServerCert::Good)).expect("proxy");
    let client = GitClient::new(Arc::new(Policy::default())).with_https(
        HttpsConfig::new()
            .with_ca_file(pki.ca_file())
            .expect("the CA file reads"),
    );
    Setup {
        _pki: Some(pki),
        _http: http,
        proxy,
        client,
    }
}

/// A served repository `s.git` whose main carries `size` incompressible
/// bytes, pushable anonymously; its tip.
fn big_served(w: &World, size: usize) -> String {
    let srv = w.small("s.git");
    HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
    big_commit(&srv, "main", size, 7)
}

fn fetch_moving(tls: bool) {
    let w = World::new();
    let tip = big_served(&w, BIG);
    let s = setup(&w, tls);
    s.proxy.throttle(Some(RATE));
    let local = empty_repo(&w.path("local.git"));
    let t0 = Instant::now();
    let out = s
        .client
        .fetch(
            &s.proxy.http_url("/git/s.git"),
            &["+refs/heads/main:refs/remotes/origin/main".to_string()],
            &local,
            &quick(60_000, ATTEMPT_MS, 3),
        )
        .expect("valid input");
    let took = t0.elapsed();
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert!(
        took > Duration::from_millis(2 * ATTEMPT_MS),
        "the transfer was meant to outlast the attempt timeout several times: {took:?}"
    );
    assert_eq!(
        repo::rev_parse(&w.path("local.git"), "refs/remotes/origin/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_throttled_fetch_several_attempt_timeouts_long_is_done_in_one_attempt_over_http() {
    fetch_moving(false);
}

#[test]
fn a_throttled_fetch_several_attempt_timeouts_long_is_done_in_one_attempt_over_https() {
    fetch_moving(true);
}

/// The end of the attempt cut by a stall, against a bound of two attempt
/// timeouts from its start (the stall comes after the request's few round
/// trips; without a per-read clock it would run to the deadline).
fn within_two_timeouts(out_attempt: &sluice_policy::AttemptRecord) {
    let bound = 2 * ATTEMPT_MS;
    let took = out_attempt.elapsed_ms;
    assert!(
        took <= bound + 500,
        "the stalled attempt took {took} ms, past two attempt timeouts ({bound} ms)"
    );
}

fn fetch_stalled(tls: bool) {
    let w = World::new();
    let tip = big_served(&w, BIG);
    let s = setup(&w, tls);
    // The listing's POST passes (its answer is short), the fetch's stalls
    // 64 KiB into its pack; the second attempt passes.
    s.proxy.set_fault(
        Fault::HttpStallResponseBody {
            path_contains: "/git-upload-pack".into(),
            after: 64 << 10,
        },
        2,
    );
    let local = empty_repo(&w.path("local.git"));
    let out = s
        .client
        .fetch(
            &s.proxy.http_url("/git/s.git"),
            &["+refs/heads/main:refs/remotes/origin/main".to_string()],
            &local,
            &quick(60_000, ATTEMPT_MS, 2),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    let first = &out.attempts[0];
    assert_eq!(first.phase, "negotiated", "{first:?}");
    assert_eq!(first.class, Some(Class::Unknown), "{first:?}");
    within_two_timeouts(first);
    assert!(s.proxy.connections().iter().any(|c| c.fault_fired));
    assert_eq!(
        repo::rev_parse(&w.path("local.git"), "refs/remotes/origin/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_fetch_stalled_mid_pack_over_http_is_cut_within_two_attempt_timeouts_and_read_again() {
    fetch_stalled(false);
}

#[test]
fn a_fetch_stalled_mid_pack_over_https_is_cut_within_two_attempt_timeouts_and_read_again() {
    fetch_stalled(true);
}

/// A local clone of `s.git` with one new commit carrying `size`
/// incompressible bytes (a loose object): its path and tip.
fn local_with_big(w: &World, size: usize, seed: u64) -> (std::path::PathBuf, String) {
    let local = local_clone(&w.srv("s.git"), &w.path("local.git"));
    let tip = big_commit(&local, "main", size, seed);
    (local, tip)
}

fn push_moving(tls: bool) {
    let w = World::new();
    let _ = big_served(&w, 1024);
    let s = setup(&w, tls);
    let (local, tip) = local_with_big(&w, BIG, 21);
    s.proxy.throttle_upload(Some(RATE));
    let t0 = Instant::now();
    let out = push_by(
        &s.client,
        &s.proxy.http_url("/git/s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(60_000, ATTEMPT_MS, 3),
    );
    let took = t0.elapsed();
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert!(
        took > Duration::from_millis(2 * ATTEMPT_MS),
        "the push was meant to outlast the attempt timeout several times: {took:?}"
    );
    assert_eq!(
        repo::rev_parse(&w.srv("s.git"), "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    // The pack went in one streamed body, once.
    let posts: Vec<_> = s
        .proxy
        .connections()
        .iter()
        .flat_map(|c| c.http_requests.clone())
        .filter(|r| r.method == "POST" && r.path.contains("/git-receive-pack"))
        .collect();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert!(posts[0].body_bytes > BIG as u64, "{posts:#?}");
}

#[test]
fn a_throttled_push_body_several_attempt_timeouts_long_lands_in_one_attempt_over_http() {
    push_moving(false);
}

#[test]
fn a_throttled_push_body_several_attempt_timeouts_long_lands_in_one_attempt_over_https() {
    push_moving(true);
}

fn push_stalled(tls: bool) {
    let w = World::new();
    let _ = big_served(&w, 1024);
    let s = setup(&w, tls);
    // Larger than what loopback's socket buffers hold between the client
    // and the proxy, so the stall reaches the client's writer.
    let (local, tip) = local_with_big(&w, STALLED_PACK, 22);
    // The pack's POST stalls 256 KiB into its body (past the 1 MiB the
    // client buffers, the body streams); the second attempt passes.
    s.proxy.set_fault(
        Fault::HttpStallRequestBody {
            path_contains: "/git-receive-pack".into(),
            after: 256 << 10,
        },
        1,
    );
    let out = push_by(
        &s.client,
        &s.proxy.http_url("/git/s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(60_000, ATTEMPT_MS, 2),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    let first = &out.attempts[0];
    // The request was never complete: tried again, not settled.
    assert_eq!(first.phase, "commands-sent", "{first:?}");
    assert_eq!(first.class, Some(Class::Unjudged), "{first:?}");
    within_two_timeouts(first);
    // The second attempt's pack is whole (index-pack of 24 MiB may outlast
    // its wait for the report on a busy machine: then it is settled by
    // reading, never sent a third time).
    let posts = s
        .proxy
        .connections()
        .iter()
        .flat_map(|c| c.http_requests.clone())
        .filter(|r| r.method == "POST" && r.path.contains("/git-receive-pack"))
        .count();
    assert_eq!(posts, 2);
    assert!(s.proxy.connections().iter().any(|c| c.fault_fired));
    assert_eq!(
        repo::rev_parse(&w.srv("s.git"), "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_push_body_stalled_mid_pack_over_http_is_cut_within_two_attempt_timeouts_and_sent_again() {
    push_stalled(false);
}

#[test]
fn a_push_body_stalled_mid_pack_over_https_is_cut_within_two_attempt_timeouts_and_sent_again() {
    push_stalled(true);
}

/// The environment the memory test hands its child.
const CHILD_URL: &str = "SLUICE_TEST_PUSH_URL";
const CHILD_REPO: &str = "SLUICE_TEST_PUSH_REPO";
const CHILD_TIP: &str = "SLUICE_TEST_PUSH_TIP";

/// The child of [`a_48_mib_push_peaks_no_higher_than_git_push`]: one push,
/// in a process of its own. Run only by that test (it is ignored).
#[test]
#[ignore = "run by a_48_mib_push_peaks_no_higher_than_git_push in a child process"]
fn push_in_a_child() {
    let url = std::env::var(CHILD_URL).expect("run by the memory test");
    let local = std::env::var(CHILD_REPO).expect("run by the memory test");
    let tip = std::env::var(CHILD_TIP).expect("run by the memory test");
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        std::path::Path::new(&local),
        &quick(120_000, 30_000, 1),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
}

/// Peak RSS (KiB) of `cmd` as `/usr/bin/time` reads it from `wait4`.
fn peak_kib(mut cmd: std::process::Command) -> u64 {
    let out_file = tempfile::NamedTempFile::new().expect("temp file");
    let mut timed = std::process::Command::new("/usr/bin/time");
    timed
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(out_file.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            timed.env(k, v);
        }
    }
    if let Some(d) = cmd.get_current_dir() {
        timed.current_dir(d);
    }
    let _ = &mut cmd;
    let out = timed.output().expect("/usr/bin/time runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(out_file.path()).expect("time's output");
    text.lines()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {text:?}"))
}

/// A loose, incompressible 48 MiB file pushed over smart HTTP: this
/// client's peak is no higher than `git push`'s of the same commit to the
/// same server (the pack streams into the request body; the object is
/// never held three times over, as it was at 1.55 times git's peak).
#[test]
fn a_48_mib_push_peaks_no_higher_than_git_push() {
    if !std::path::Path::new("/usr/bin/time").is_file() {
        panic!("/usr/bin/time is needed to measure peak memory (apt-get install -y time)");
    }
    let w = World::new();
    let srv = w.small("s.git");
    HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
    repo::git(&srv, &["branch", "theirs", "main"]);
    let http = HttpBackend::start(&w.dir.path().join("srv")).expect("lighttpd starts");
    let url = http.url("s.git");
    let (local, tip) = local_with_big(&w, 48 << 20, 48);

    // git first, to a branch of its own (the same objects, the same server).
    let mut git = std::process::Command::new("git");
    git.current_dir(&local)
        .args(["push", "-q", &url, &format!("{tip}:refs/heads/theirs")]);
    let git_kib = peak_kib(git);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/theirs").as_deref(),
        Some(tip.as_str())
    );
    // The same objects must be sent again: a fresh server repository.
    std::fs::remove_dir_all(&srv).expect("reset the served repository");
    let srv = w.small("s.git");
    HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
    let (local2, tip2) = {
        let l = local_clone(&srv, &w.path("local2.git"));
        let t = big_commit(&l, "main", 48 << 20, 48);
        (l, t)
    };

    let mut ours = std::process::Command::new(std::env::current_exe().expect("this test binary"));
    ours.args([
        "--exact",
        "http_transfers::push_in_a_child",
        "--ignored",
        "--test-threads",
        "1",
        "--quiet",
    ])
    .env(CHILD_URL, &url)
    .env(CHILD_REPO, &local2)
    .env(CHILD_TIP, &tip2);
    let our_kib = peak_kib(ours);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip2.as_str())
    );
    eprintln!("48 MiB push peak RSS: sluice {our_kib} KiB, git push {git_kib} KiB");
    assert!(
        our_kib <= git_kib,
        "this client peaked at {our_kib} KiB, git push at {git_kib} KiB"
    );
    drop(local);
}
