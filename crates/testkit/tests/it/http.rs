//! git http-backend behind lighttpd, and the http-mode fault proxy, driven
//! by the real git CLI.

use crate::common::{git_status, scene, WAIT};
use sluice_testkit::repo::{self, commit_on, rev_parse};
use sluice_testkit::{Fault, FaultProxy, HttpBackend, Point, Service};

#[test]
fn git_clone_over_the_http_backend_gets_every_branch_and_tag() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    let into = s.dir.path().join("clone");
    let (ok, err) = git_status(
        s.dir.path(),
        &[
            "clone",
            "-q",
            "--mirror",
            &http.url("r.git"),
            into.to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}\n{}", http.error_log());
    assert_eq!(repo::refs(&into), repo::refs(&s.server));
}

#[test]
fn an_anonymous_push_is_refused_until_the_repository_allows_it() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    let new = commit_on(&s.work, "main", "anonymous");
    let (ok, _) = git_status(&s.work, &["push", &http.url("r.git"), "main:main"]);
    assert!(!ok);
    HttpBackend::enable_anonymous_push(&s.server).unwrap();
    let (ok, err) = git_status(&s.work, &["push", &http.url("r.git"), "main:main"]);
    assert!(ok, "{err}");
    assert_eq!(rev_parse(&s.server, "main"), Some(new));
}

#[test]
fn a_push_with_basic_auth_works_and_one_without_is_refused() {
    let s = scene();
    let http = HttpBackend::start_with_auth(&s.base, "pusher", "s3cret").unwrap();
    // Reading stays anonymous.
    assert!(repo::ls_remote(&s.work, &http.url("r.git")).is_ok());
    let new = commit_on(&s.work, "main", "authenticated");
    let (ok, _) = git_status(&s.work, &["push", &http.url("r.git"), "main:main"]);
    assert!(!ok);
    let (ok, err) = git_status(
        &s.work,
        &["push", &http.url_with_credentials("r.git"), "main:main"],
    );
    assert!(ok, "{err}\n{}", http.error_log());
    assert_eq!(rev_parse(&s.server, "main"), Some(new));
    assert_eq!(repo::reflog_entries(&s.server, "refs/heads/main").len(), 2);
}

#[test]
fn ls_remote_through_the_http_proxy_records_each_request() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    let proxy = FaultProxy::http(http.addr()).unwrap();
    let direct = repo::ls_remote(&s.work, &http.url("r.git")).unwrap();
    let proxied = repo::ls_remote(&s.work, &proxy.http_url("git/r.git")).unwrap();
    assert_eq!(proxied, direct);
    assert!(proxy.wait_idle(WAIT));
    let requests: Vec<_> = proxy
        .connections()
        .into_iter()
        .flat_map(|c| c.http_requests)
        .collect();
    assert!(requests.iter().any(|r| r.method == "GET"
        && r.path.contains("info/refs?service=git-upload-pack")
        && r.status == Some(200)));
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.had_body && r.status == Some(200)),
        "{requests:?}"
    );
    assert!(proxy
        .connections()
        .iter()
        .all(|c| c.service == Some(Service::Http)));
}

#[test]
fn an_injected_503_answers_the_first_advertisement_request_only() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    let proxy = FaultProxy::http(http.addr()).unwrap();
    proxy.set_fault(
        Fault::HttpStatus {
            status: 503,
            retry_after: Some(1),
            path_contains: "info/refs".to_owned(),
        },
        1,
    );
    let url = proxy.http_url("git/r.git");
    // git may or may not retry by itself; either way the first request got
    // the 503 and a later listing works.
    let _ = repo::ls_remote(&s.work, &url);
    let listed = repo::ls_remote(&s.work, &url).unwrap();
    assert_eq!(
        listed.get("refs/heads/main"),
        rev_parse(&s.server, "main").as_ref()
    );
    assert!(proxy.wait_idle(WAIT));
    let requests: Vec<_> = proxy
        .connections()
        .into_iter()
        .flat_map(|c| c.http_requests)
        .collect();
    assert_eq!(requests[0].status, Some(503));
    assert!(matches!(
        requests[0].fault,
        Some(Fault::HttpStatus { status: 503, .. })
    ));
    assert_eq!(requests.iter().filter(|r| r.status == Some(503)).count(), 1);
    assert!(requests[1..].iter().all(|r| r.fault.is_none()));
}

#[test]
fn a_push_whose_response_is_cut_lands_on_the_server_without_an_answer() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    HttpBackend::enable_anonymous_push(&s.server).unwrap();
    let proxy = FaultProxy::http(http.addr()).unwrap();
    proxy.set_fault(Fault::http_cut_response("/git-receive-pack"), 1);
    let new = commit_on(&s.work, "main", "cut response");
    // git's HTTP stack resends the POST on a new connection (which the
    // server refuses: the ref already moved); however git reports it, the
    // push landed exactly once.
    let _ = git_status(
        &s.work,
        &["push", &proxy.http_url("git/r.git"), "main:main"],
    );
    assert_eq!(rev_parse(&s.server, "main"), Some(new));
    assert_eq!(repo::reflog_entries(&s.server, "refs/heads/main").len(), 2);
    assert!(proxy.wait_idle(WAIT));
    let recs = proxy.connections();
    let cut: Vec<_> = recs
        .iter()
        .flat_map(|c| c.http_requests.iter().map(move |r| (c, r)))
        .filter(|(_, r)| r.fault.is_some())
        .collect();
    assert_eq!(cut.len(), 1);
    let (conn, req) = cut[0];
    assert_eq!(req.method, "POST");
    assert!(req.had_body && req.body_bytes > 0);
    assert_eq!(req.status, Some(200), "the upstream answered");
    assert!(!req.response_forwarded);
    assert!(conn.fault_fired);
    assert!(conn.passed(Point::CommandsSent));
}

#[test]
fn a_large_push_with_a_chunked_body_passes_through_the_http_proxy() {
    let s = scene();
    let http = HttpBackend::start(&s.base).unwrap();
    HttpBackend::enable_anonymous_push(&s.server).unwrap();
    let proxy = FaultProxy::http(http.addr()).unwrap();
    // 2 MiB that do not compress: above git's 1 MiB http.postBuffer, so the
    // POST body goes chunked.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..2 * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(s.work.join("blob.bin"), data).unwrap();
    repo::git(&s.work, &["add", "blob.bin"]);
    repo::git(&s.work, &["commit", "-q", "-m", "large"]);
    let (ok, err) = git_status(
        &s.work,
        &["push", &proxy.http_url("git/r.git"), "main:main"],
    );
    assert!(ok, "{err}");
    assert_eq!(rev_parse(&s.server, "main"), rev_parse(&s.work, "main"));
    assert!(proxy.wait_idle(WAIT));
    // git first probes with a 4-byte POST, then sends the pack.
    let post = proxy
        .connections()
        .into_iter()
        .flat_map(|c| c.http_requests)
        .filter(|r| r.method == "POST")
        .max_by_key(|r| r.body_bytes)
        .unwrap();
    assert!(post.body_bytes > 2 * 1024 * 1024, "{post:?}");
    assert_eq!(post.status, Some(200));
}
