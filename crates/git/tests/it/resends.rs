//! No resend below the policy, git over http and https: the fault proxy
//! (plain, or ending TLS with a certificate of the run's CA) in front of
//! git http-backend counts every request and every connection. Each call's
//! requests are exactly what its attempts account for: reads on a pooled
//! connection, including one the server side closed while it idled; writes
//! on a fresh connection each, the pack POSTed once per attempt.

use crate::common;

use std::sync::Arc;

use common::*;
use secrecy::SecretString;
use sluice_git::{GitClient, HttpsConfig};
use sluice_policy::{OutcomeKind, Policy, StaticSource};
use sluice_testkit::{repo, FaultProxy, HttpBackend, HttpExchange, ServerCert, TestPki};

const USER: &str = "x-access-token";
const PASSWORD: &str = "good-token-123";

fn requests(proxy: &FaultProxy) -> Vec<HttpExchange> {
    // A request is on record when it arrives, before it is forwarded.
    proxy
        .connections()
        .iter()
        .flat_map(|c| c.http_requests.clone())
        .collect()
}

fn count(reqs: &[HttpExchange], method: &str, path_has: &str) -> usize {
    reqs.iter()
        .filter(|r| r.method == method && r.path.contains(path_has))
        .count()
}

fn with_token(o: sluice_git::CallOptions) -> sluice_git::CallOptions {
    o.credentials(Arc::new(StaticSource::new(SecretString::from(
        PASSWORD.to_string(),
    ))))
}

/// ls-refs three times (the server side closing the kept-alive connections
/// before the third), fetch once, push three times with the same closing
/// between them: the requests seen equal what the attempts account for.
fn exercise(w: &World, srv: &std::path::Path, proxy: &FaultProxy, client: &GitClient) {
    let url = proxy.http_url("/git/s.git");
    let mut read_attempts = 0;
    for round in 0..3 {
        if round == 2 {
            proxy.cut_clients();
        }
        let posts_before = count(&requests(proxy), "POST", "git-upload-pack");
        let out = client
            .ls_refs(&url, &[], &quick(20_000, 5_000, 3))
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
        read_attempts += out.attempts.len();
        let reqs = requests(proxy);
        // One attempt: one ls-refs command (POST); the advertisement (GET)
        // at most once per attempt (the client keeps a remote's
        // capabilities, so a later call may skip it). The server sees one
        // POST per call, the answered attempt's: before it, only after the
        // cut (round 2), an attempt may have written into the kept-alive
        // connection the server closed before the client noticed (a race
        // the load decides), a request that never arrives and is tried
        // again — never a second request of one attempt.
        assert_eq!(
            count(&reqs, "POST", "git-upload-pack") - posts_before,
            1,
            "round {round}: {:?} {reqs:#?}",
            out.attempts
        );
        let (answered, before) = out.attempts.split_last().expect("an attempt");
        assert_eq!(answered.class, None, "{:?}", out.attempts);
        if round < 2 {
            assert!(before.is_empty(), "round {round}: {:?}", out.attempts);
        }
        assert!(
            count(&reqs, "GET", "info/refs?service=git-upload-pack") <= read_attempts,
            "round {round}: {reqs:#?}"
        );
    }
    let reused = proxy.connections().len();
    assert!(
        reused < 2 * read_attempts,
        "reads keep their connection alive: {reused} connections for {read_attempts} attempts"
    );

    let posts_before = count(&requests(proxy), "POST", "git-upload-pack");
    let dst = w.path("dst.git");
    let r = empty_repo(&dst);
    let out = client
        .fetch(
            &url,
            &["+refs/heads/*:refs/heads/*".into()],
            &r,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    let reqs = requests(proxy);
    // A fetch attempt: the ls-refs command, then the fetch command.
    assert_eq!(
        count(&reqs, "POST", "git-upload-pack") - posts_before,
        2 * out.attempts.len(),
        "{reqs:#?}"
    );

    let local = local_clone(srv, &w.path("local.git"));
    let before = proxy.connections().len();
    for round in 0..3 {
        proxy.cut_clients();
        let tip = repo::commit_on(&local, "main", &format!("counted {round}"));
        let out = push_by(
            client,
            &url,
            update(Some(&tip), "refs/heads/main"),
            &local,
            &with_token(quick(20_000, 10_000, 3)),
        );
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
        assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
        assert_eq!(
            repo::rev_parse(srv, "refs/heads/main").as_deref(),
            Some(tip.as_str())
        );
        let reqs = requests(proxy);
        assert_eq!(
            count(&reqs, "POST", "git-receive-pack"),
            round + 1,
            "round {round}: the pack went once per push: {reqs:#?}"
        );
    }
    // Every request of a push (the advertisement with and without the
    // credential, the pack) went on a connection of its own: none of them
    // used a kept-alive one.
    let reqs_per_conn: Vec<usize> = proxy.connections()[before..]
        .iter()
        .map(|c| c.http_requests.len())
        .collect();
    assert!(
        reqs_per_conn.iter().all(|&n| n <= 1),
        "writes keep no connection alive: {reqs_per_conn:?}"
    );
}

#[test]
fn over_http_each_request_is_one_an_attempt_accounts_for() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = HttpBackend::start_with_auth(&w.dir.path().join("srv"), USER, PASSWORD)
        .expect("lighttpd starts");
    let proxy = FaultProxy::http(http.addr()).expect("proxy");
    exercise(&w, &srv, &proxy, &client());
}

#[test]
fn over_https_each_request_is_one_an_attempt_accounts_for() {
    let w = World::new();
    let srv = w.small("s.git");
    let pki = TestPki::new().expect("pki");
    let http = HttpBackend::start_with_auth(&w.dir.path().join("srv"), USER, PASSWORD)
        .expect("lighttpd starts");
    let proxy = FaultProxy::https(http.addr(), &pki.server(ServerCert::Good)).expect("proxy");
    let client = GitClient::new(Arc::new(Policy::default())).with_https(
        HttpsConfig::new()
            .with_ca_file(pki.ca_file())
            .expect("the CA file reads"),
    );
    exercise(&w, &srv, &proxy, &client);
}
