//! The smart-HTTP transport against git http-backend behind lighttpd, with
//! basic auth required for push, and through the proxy in http mode.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use secrecy::SecretString;
use sluice_git::{GitClient, PushOptions};
use sluice_policy::{
    Class, Credential, CredentialError, CredentialSource, OutcomeKind, Policy, StaticSource,
    Verdict,
};
use sluice_testkit::{repo, Fault, FaultProxy, HttpBackend};

const USER: &str = "x-access-token";
const PASSWORD: &str = "good-token-123";

struct Tokens {
    list: Vec<&'static str>,
    calls: AtomicUsize,
}

impl CredentialSource for Tokens {
    fn credential(&self) -> Result<Credential, CredentialError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let t = self.list[n.min(self.list.len() - 1)];
        Ok(Credential::new(SecretString::from(t.to_string())))
    }
}

fn backend(w: &World) -> HttpBackend {
    HttpBackend::start_with_auth(&w.dir.path().join("srv"), USER, PASSWORD)
        .expect("lighttpd starts")
}

fn with_token(
    o: sluice_git::CallOptions,
    source: Arc<dyn CredentialSource>,
) -> sluice_git::CallOptions {
    o.credentials(source)
}

#[test]
fn ls_refs_and_fetch_work_over_http() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let url = http.url("s.git");
    let out = client()
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    // The attempt keeps the request id of its last answered request.
    assert_eq!(
        out.attempts[0].request_id.as_deref(),
        Some(sluice_testkit::http_backend::REQUEST_ID),
        "{:?}",
        out.attempts
    );
    let theirs = repo::ls_remote(w.dir.path(), &url).expect("git ls-remote");
    let ours: std::collections::BTreeMap<_, _> = out
        .value
        .expect("refs")
        .into_iter()
        .flat_map(|r| {
            let mut v = vec![(r.name.clone(), r.oid.expect("born").to_string())];
            if let Some(p) = r.peeled {
                v.push((format!("{}^{{}}", r.name), p.to_string()));
            }
            v
        })
        .collect();
    assert_eq!(ours, theirs);
    let dst = w.path("dst.git");
    let r = empty_repo(&dst);
    let out = client()
        .fetch(
            &url,
            &["+refs/heads/*:refs/heads/*".into()],
            &r,
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(
        out.attempts[0].request_id.as_deref(),
        Some(sluice_testkit::http_backend::REQUEST_ID),
        "{:?}",
        out.attempts
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        repo::rev_parse(&dst, "refs/heads/main"),
        repo::rev_parse(&srv, "refs/heads/main")
    );
    repo::fsck(&dst).expect("fsck clean");
}

#[test]
fn a_503_once_is_retried_and_a_404_is_answered() {
    let w = World::new();
    w.small("s.git");
    let http = backend(&w);
    let proxy = FaultProxy::http(http.addr()).expect("proxy");
    proxy.set_fault(Fault::http_status(503, "info/refs"), 1);
    let out = client()
        .ls_refs(&proxy.http_url("/git/s.git"), &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0]
        .cause
        .as_deref()
        .unwrap_or_default()
        .contains("503"));
    let out = client()
        .ls_refs(&http.url("absent.git"), &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
}

#[test]
fn a_push_with_basic_auth_lands() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "over http");
    let source = Arc::new(StaticSource::new(SecretString::from(PASSWORD.to_string())));
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &with_token(quick(20_000, 10_000, 3), source),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_refused_token_is_bought_afresh_after_the_settle_pause_and_never_sent_again() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let tokens = Arc::new(Tokens {
        list: vec!["refused-token-1", PASSWORD],
        calls: AtomicUsize::new(0),
    });
    let settle = Duration::from_millis(400);
    let c = GitClient::new(Arc::new(Policy::builder().settle(settle).build()));
    let out = push_by(
        &c,
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &with_token(quick(20_000, 10_000, 3), tokens.clone()),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 2);
    assert_eq!(out.attempts.len(), 2);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0].delay_ms.expect("a delay") >= settle.as_millis() as u64);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("refused-token-1")]
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_refusal_that_stands_names_the_fingerprint_and_is_answered() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let source = Arc::new(StaticSource::new(SecretString::from(
        "always-wrong".to_string(),
    )));
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &with_token(quick(20_000, 10_000, 3), source),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("always-wrong")]
    );
    assert_eq!(out.attempts.len(), 1);
}

#[test]
fn a_push_whose_http_answer_is_cut_is_settled_by_reading_without_a_second_post() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let proxy = FaultProxy::http(http.addr()).expect("proxy");
    proxy.set_fault(Fault::http_cut_response("s.git/git-receive-pack"), 1);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "x");
    let source = Arc::new(StaticSource::new(SecretString::from(PASSWORD.to_string())));
    let out = push(
        &proxy.http_url("/git/s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &with_token(quick(20_000, 5_000, 3), source),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        out.attempts[0].class,
        Some(Class::Unknown),
        "{:?}",
        out.attempts
    );
    assert_eq!(
        out.reconciled.expect("settled").verdict,
        Some(Verdict::Landed)
    );
    proxy.wait_idle(Duration::from_secs(2));
    let posts = proxy
        .connections()
        .iter()
        .flat_map(|c| c.http_requests.clone())
        .filter(|r| r.method == "POST" && r.path.contains("git-receive-pack"))
        .count();
    assert_eq!(posts, 1, "the pack was POSTed again");
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

/// A remote seen speaking v2 is listed in one request (the POST) on the
/// next call of the same client, with the same refs; a failure of that one
/// request is classed from the wire like any other (a 503 is retried).
#[test]
fn a_second_ls_refs_of_one_client_is_one_request_with_the_same_refs() {
    let w = World::new();
    w.small("s.git");
    let http = backend(&w);
    let proxy = FaultProxy::http(http.addr()).expect("proxy");
    let url = proxy.http_url("/git/s.git");
    let c = client();
    let requests = || -> Vec<(String, String)> {
        proxy.wait_idle(Duration::from_secs(5));
        proxy
            .connections()
            .iter()
            .flat_map(|c| c.http_requests.clone())
            .map(|r| (r.method, r.path))
            .collect()
    };
    let first = c
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(first.kind, OutcomeKind::Succeeded, "{:?}", first.attempts);
    assert_eq!(requests().len(), 2, "{:?}", requests());
    // The next call is the POST alone. A loaded machine can make one such
    // call miss (a retried failure, or an answer that is not a listing,
    // both go the long way and are allowed); of three calls, one must be a
    // lone POST with the same refs.
    let mut lone_post = false;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let before = requests().len();
        let next = c
            .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
            .expect("valid input");
        assert_eq!(next.kind, OutcomeKind::Succeeded, "{:?}", next.attempts);
        assert_eq!(next.value, first.value);
        let after = requests();
        let new: Vec<_> = after[before..].to_vec();
        if new.len() == 1 && new[0].0 == "POST" && new[0].1.ends_with("/git-upload-pack") {
            lone_post = true;
            break;
        }
        seen.push((new, next.attempts));
    }
    assert!(lone_post, "never one request: {seen:?}");
    // With a prefix, the remote filters.
    let heads = c
        .ls_refs(&url, &["refs/heads/".into()], &quick(10_000, 5_000, 3))
        .expect("valid input");
    let names: Vec<_> = heads
        .value
        .expect("refs")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert!(!names.is_empty() && names.iter().all(|n| n.starts_with("refs/heads/")));
    // A 503 on the one request: unjudged, retried, and the retry asks the
    // long way (the remote is forgotten after a failure).
    proxy.set_fault(Fault::http_status(503, "git-upload-pack"), 1);
    let out = c
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert_eq!(out.value, first.value);
}

#[test]
fn a_clients_default_credential_source_is_used_unless_a_call_names_its_own() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let good = Arc::new(Tokens {
        list: vec![PASSWORD],
        calls: AtomicUsize::new(0),
    });
    let c = client().with_credentials(good.clone());
    let url = http.url("s.git");
    // No call source: the client's is bought.
    let tip = repo::commit_on(&local, "main", "with the client's source");
    let out = c
        .push(
            &url,
            &[update(Some(&tip), "refs/heads/main")],
            &PushOptions::default(),
            &open(&local),
            &quick(20_000, 10_000, 3),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(good.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    // A call's own source overrides the client's: its wrong token is
    // refused, the client's is never asked.
    let tip2 = repo::commit_on(&local, "main", "with the call's source");
    let wrong = Arc::new(StaticSource::new(SecretString::from(
        "call-token-wrong".to_string(),
    )));
    let out = c
        .push(
            &url,
            &[update(Some(&tip2), "refs/heads/main")],
            &PushOptions::default(),
            &open(&local),
            &with_token(quick(20_000, 10_000, 3), wrong),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("call-token-wrong")]
    );
    assert_eq!(good.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn the_clients_and_the_calls_headers_reach_the_server_and_its_request_id_is_kept() {
    use sluice_testkit::fake_forge::{request_id, FakeForge};
    // Any HTTP server that logs what it was sent serves: the fake forge
    // answers git's first request 404, with its request id.
    let forge = FakeForge::start().expect("fake forge");
    let url = format!("{}/octo/repo.git", forge.url());
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let opts = quick(5_000, 2_000, 2)
        .header("traceparent", traceparent)
        .expect("a caller may give a traceparent");
    let out = client()
        .with_header("x-service-request-id", "job-42")
        .expect("a client's own header")
        .ls_refs(&url, &[], &opts)
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    let arrivals = forge.all_arrivals();
    assert!(!arrivals.is_empty(), "{}", forge.log_text());
    for a in &arrivals {
        assert_eq!(a.header("traceparent"), Some(traceparent), "{a}");
        assert_eq!(a.header("x-service-request-id"), Some("job-42"), "{a}");
    }
    let last = arrivals.last().expect("a request");
    assert_eq!(
        out.attempts.last().and_then(|a| a.request_id.clone()),
        Some(request_id(last.request)),
        "{:?}",
        out.attempts
    );
    assert!(matches!(
        client().with_header("Authorization", "Bearer x"),
        Err(sluice_policy::HeaderRefused::Reserved { .. })
    ));
}
