//! git over http(s) through a real forward proxy (tinyproxy): https by
//! CONNECT, http by absolute-form requests; a refused proxy is unjudged
//! and named without its user info; a 407 answering a plain-http request
//! is answered.

use crate::common;

use std::net::TcpListener;
use std::sync::Arc;

use common::*;
use secrecy::SecretString;
use sluice_git::{GitClient, HttpsConfig, ProxyChoice};
use sluice_policy::{Class, OutcomeKind, Policy, StaticSource};
use sluice_testkit::{repo, HttpBackend, ServerCert, TestPki, Tinyproxy};

const USER: &str = "x-access-token";
const PASSWORD: &str = "good-token-123";

fn through(proxy: &str, pki: Option<&TestPki>) -> GitClient {
    let mut https = HttpsConfig::new()
        .with_proxy(ProxyChoice::Url(proxy.to_string()))
        .expect("a valid proxy URL");
    if let Some(pki) = pki {
        https = https
            .with_ca_file(pki.ca_file())
            .expect("the CA file reads");
    }
    GitClient::new(Arc::new(Policy::default())).with_https(https)
}

fn token(o: sluice_git::CallOptions) -> sluice_git::CallOptions {
    o.credentials(Arc::new(StaticSource::new(SecretString::from(
        PASSWORD.to_string(),
    ))))
}

#[test]
fn ls_refs_and_push_over_https_go_through_the_proxy_by_connect() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    let srv = w.small("s.git");
    let server = HttpBackend::start_https_with_auth(
        &w.dir.path().join("srv"),
        &pki.server(ServerCert::Good),
        USER,
        PASSWORD,
    )
    .expect("lighttpd with mod_openssl starts");
    let proxy = Tinyproxy::start().expect("tinyproxy starts");
    let client = through(&proxy.url(), Some(&pki));
    let url = server.url("s.git");

    let out = client
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);

    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "through the proxy");
    let out = push_by(
        &client,
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &token(quick(20_000, 10_000, 3)),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    let connect = format!("CONNECT {} ", server.addr());
    let tunnels = proxy
        .requests()
        .iter()
        .filter(|r| r.starts_with(&connect))
        .count();
    assert!(tunnels >= 2, "{:?}", proxy.requests());
}

#[test]
fn plain_http_goes_through_the_proxy_and_a_407_is_answered_once_naming_it() {
    let w = World::new();
    w.small("s.git");
    let server = HttpBackend::start(&w.dir.path().join("srv")).expect("lighttpd starts");
    let url = server.url("s.git");

    let open_proxy = Tinyproxy::start().expect("tinyproxy starts");
    let out = through(&open_proxy.url(), None)
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    let forwarded = format!("GET http://{}/git/s.git/info/refs", server.addr());
    assert!(
        open_proxy
            .requests()
            .iter()
            .any(|r| r.starts_with(&forwarded)),
        "{:?}",
        open_proxy.requests()
    );

    let guarded = Tinyproxy::start_with_auth("proxyuser", "proxy-secret").expect("tinyproxy");
    let out = through(&guarded.url(), None)
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("407"), "{cause}");
    assert!(cause.contains(&guarded.url()), "{cause}");

    // With its credentials in the proxy URL, the same proxy lets it through,
    // and they appear nowhere in the outcome.
    let out = through(&guarded.url_with_credentials(), None)
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
}

#[test]
fn a_refused_proxy_is_unjudged_and_named_without_its_user_info() {
    let w = World::new();
    w.small("s.git");
    let server = HttpBackend::start(&w.dir.path().join("srv")).expect("lighttpd starts");
    // A port nobody listens on: bound, then released.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let proxy = format!("http://someone:proxy-secret@{dead}");
    for url in [
        server.url("s.git"),
        server.url("s.git").replacen("http:", "https:", 1),
    ] {
        let out = through(&proxy, None)
            .ls_refs(&url, &[], &quick(10_000, 2_000, 2))
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Unknown, "{url}: {:?}", out.attempts);
        assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
        for a in &out.attempts {
            assert_eq!(a.class, Some(Class::Unjudged), "{a:?}");
            assert_eq!(a.phase, "connect");
            let cause = a.cause.clone().unwrap_or_default();
            assert!(
                cause.contains(&format!("through proxy http://{dead}")),
                "{cause}"
            );
            assert!(!cause.contains("proxy-secret"), "{cause}");
            assert!(!cause.contains("someone"), "{cause}");
        }
    }
}

#[test]
fn a_407_answering_connect_is_answered_once_naming_the_proxy() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    w.small("s.git");
    let server = HttpBackend::start_https(&w.dir.path().join("srv"), &pki.server(ServerCert::Good))
        .expect("lighttpd with mod_openssl starts");
    let url = server.url("s.git");
    let guarded = Tinyproxy::start_with_auth("proxyuser", "proxy-secret").expect("tinyproxy");
    let out = through(&guarded.url(), Some(&pki))
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("407"), "{cause}");
    assert!(cause.contains(&guarded.url()), "{cause}");
    assert!(!cause.contains("proxy-secret"), "{cause}");
    // The proxy saw one CONNECT, refused.
    let connects = guarded
        .requests()
        .iter()
        .filter(|r| r.starts_with("CONNECT "))
        .count();
    assert_eq!(connects, 1, "{:?}", guarded.requests());
    // With its credentials, the tunnel opens.
    let out = through(&guarded.url_with_credentials(), Some(&pki))
        .ls_refs(&url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
}
