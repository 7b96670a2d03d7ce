//! The forge client over https: the fake forge behind the fault proxy in
//! https mode (rustls ends TLS with a certificate of a throwaway CA made per
//! run). A certificate error is answered at `connect` in one attempt, for a
//! read and a write alike, and nothing reaches the forge.

use std::time::Duration;

use crate::common::*;
use sluice_forge::{CallOptions, ForgeClient, HttpsConfig, Method};
use sluice_policy::{Bounds, Class, OutcomeKind};
use sluice_testkit::fake_forge::{Endpoint, FakeForge};
use sluice_testkit::{FaultProxy, ServerCert, TestPki};

fn over_https(forge: &FakeForge, pki: &TestPki, cert: ServerCert) -> FaultProxy {
    FaultProxy::https(forge.addr(), &pki.server(cert)).expect("https proxy")
}

fn client_of(base: &str, https: HttpsConfig) -> ForgeClient {
    ForgeClient::builder(base)
        .policy(policy(Duration::from_secs(1)))
        .bounds(Bounds::new(
            Duration::from_secs(12),
            Duration::from_secs(5),
            3,
        ))
        .https(https)
        .write_spacing(Duration::ZERO)
        .build()
        .expect("client")
}

fn trusting(pki: &TestPki) -> HttpsConfig {
    HttpsConfig::new()
        .with_ca_file(pki.ca_file())
        .expect("the CA file reads")
}

#[test]
fn the_api_answers_over_https_with_the_test_ca_added() {
    let forge = FakeForge::start().expect("fake forge");
    let pki = TestPki::new().expect("pki");
    let proxy = over_https(&forge, &pki, ServerCert::Good);
    let base = proxy.http_url("");
    assert!(base.starts_with("https://"), "{base}");
    let client = client_of(&base, trusting(&pki));
    let out = client
        .get_url(&proxy.http_url("/zen"), &CallOptions::new())
        .expect("valid url");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    let out = client
        .create_issue_comment(&repo(), 1, "over https", &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(forge.comments(REPO).len(), 1);
}

#[test]
fn each_bad_certificate_is_answered_at_connect_in_one_attempt_and_nothing_arrives() {
    let forge = FakeForge::start().expect("fake forge");
    let pki = TestPki::new().expect("pki");
    let cases = [
        (ServerCert::OtherCa, "not trusted"),
        (ServerCert::Expired, "expired"),
        (ServerCert::OtherName, "another name"),
    ];
    for (cert, words) in cases {
        let proxy = over_https(&forge, &pki, cert);
        let client = client_of(&proxy.http_url(""), trusting(&pki));
        let out = client
            .get_url(&proxy.http_url("/zen"), &CallOptions::new())
            .expect("valid url");
        assert_eq!(
            out.kind,
            OutcomeKind::Answered,
            "{cert:?}: {:?}",
            out.attempts
        );
        assert_eq!(out.attempts.len(), 1, "{cert:?}: {:?}", out.attempts);
        assert_eq!(out.attempts[0].class, Some(Class::Answered));
        assert_eq!(out.attempts[0].phase, "connect");
        let cause = out.attempts[0].cause.clone().unwrap_or_default();
        assert!(cause.contains(words), "{cert:?}: {cause}");

        let out = client
            .create_issue_comment(&repo(), 1, "never sent", &CallOptions::new())
            .expect("valid input");
        assert_eq!(
            out.kind,
            OutcomeKind::Answered,
            "{cert:?}: {:?}",
            out.attempts
        );
        assert_eq!(out.attempts.len(), 1);
        assert_eq!(out.may_have_applied, Some(false));
        let out = client
            .request(Method::GET, "/zen", None, &CallOptions::new())
            .expect("valid path");
        assert_eq!(out.kind, OutcomeKind::Answered);
    }
    assert!(forge.arrivals(Endpoint::CreateIssueComment).is_empty());
    assert!(forge.arrivals(Endpoint::Zen).is_empty());
}

#[test]
fn the_test_ca_is_untrusted_unless_added() {
    let forge = FakeForge::start().expect("fake forge");
    let pki = TestPki::new().expect("pki");
    let proxy = over_https(&forge, &pki, ServerCert::Good);
    let client = client_of(&proxy.http_url(""), HttpsConfig::new());
    let out = client
        .get_url(&proxy.http_url("/zen"), &CallOptions::new())
        .expect("valid url");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("not trusted"), "{cause}");
}

#[test]
fn through_a_proxy_by_connect_and_a_407_is_answered_in_one_attempt() {
    let forge = FakeForge::start().expect("fake forge");
    let pki = TestPki::new().expect("pki");
    let proxy_tls = over_https(&forge, &pki, ServerCert::Good);
    let base = proxy_tls.http_url("");
    let via = |proxy_url: String| {
        trusting(&pki)
            .with_proxy(sluice_forge::ProxyChoice::Url(proxy_url))
            .expect("a valid proxy URL")
    };
    let open = sluice_testkit::Tinyproxy::start().expect("tinyproxy starts");
    let client = client_of(&base, via(open.url()));
    let out = client
        .get_url(&proxy_tls.http_url("/zen"), &CallOptions::new())
        .expect("valid url");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert!(
        open.requests().iter().any(|r| r.starts_with("CONNECT ")),
        "{:?}",
        open.requests()
    );

    let guarded =
        sluice_testkit::Tinyproxy::start_with_auth("proxyuser", "proxy-secret").expect("tinyproxy");
    let client = client_of(&base, via(guarded.url()));
    let before = forge.all_arrivals().len();
    let out = client
        .create_issue_comment(&repo(), 1, "never sent", &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.may_have_applied, Some(false));
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("407"), "{cause}");
    assert!(cause.contains(&guarded.url()), "{cause}");
    assert_eq!(
        forge.all_arrivals().len(),
        before,
        "nothing reached the forge"
    );
}
