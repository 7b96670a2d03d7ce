//! No resend below the policy: the fake forge counts every request that
//! reaches it, and each call's requests equal the attempts its outcome
//! records — reads on a pooled connection (including one the server closed
//! while it idled) and writes, which never use a kept-alive connection.
//! A write whose answer is lost arrives once.

use std::time::Duration;

use crate::common::*;
use sluice_forge::{CallOptions, ForgeClient, HttpsConfig};
use sluice_policy::{Bounds, OutcomeKind};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};
use sluice_testkit::{FaultProxy, ServerCert, TestPki};

fn client_of(base: &str, https: HttpsConfig) -> ForgeClient {
    ForgeClient::builder(base)
        .policy(policy(Duration::from_secs(1)))
        .bounds(Bounds::new(
            Duration::from_secs(20),
            Duration::from_secs(5),
            3,
        ))
        .https(https)
        .write_spacing(Duration::ZERO)
        .build()
        .expect("client")
}

/// Requests that reached the forge.
fn arrivals(forge: &FakeForge) -> usize {
    forge.all_arrivals().len()
}

/// Reads, then writes, then a write whose answer is cut; after every call
/// the requests that reached the forge grew by exactly the call's attempts.
/// `close_idle` closes the kept-alive connections on the server's side.
fn exercise_counts(forge: &FakeForge, client: &ForgeClient, zen: &str, close_idle: &dyn Fn()) {
    let mut expected = 0;
    // Reads: two on one pooled connection, then one after the server closed
    // it while it idled.
    for round in 0..3 {
        if round == 2 {
            close_idle();
        }
        let out = client.get_url(zen, &CallOptions::new()).expect("valid url");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
        expected += out.attempts.len();
        assert_eq!(
            arrivals(forge),
            expected,
            "read {round}: {}",
            forge.log_text()
        );
    }
    // Writes: each arrives once per attempt, with the server closing idle
    // connections between them.
    for round in 0..3 {
        close_idle();
        let out = client
            .create_issue_comment(&repo(), 1, "counted", &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
        assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
        expected += 1;
        assert_eq!(
            arrivals(forge),
            expected,
            "write {round}: {}",
            forge.log_text()
        );
    }
    assert_eq!(forge.comments(REPO).len(), 3);
    // A write applied whose answer never came: unknown, and it reached the
    // forge once — the stack did not send it again on a new connection.
    forge.push(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let out = client
        .create_issue_comment(&repo(), 1, "cut", &CallOptions::new())
        .expect("valid input");
    // Settled by its marker: landed, never sent again.
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    expected += 1;
    assert_eq!(
        forge.arrivals(Endpoint::CreateIssueComment).len(),
        4,
        "{}",
        forge.log_text()
    );
    assert_eq!(forge.comments(REPO).len(), 4);
    // Whatever the settling read of the unknown write asked is counted too:
    // every request is one the policy's attempts account for.
    assert!(arrivals(forge) >= expected, "{}", forge.log_text());
}

#[test]
fn over_http_every_request_is_an_attempt_pooled_reads_and_unpooled_writes() {
    let forge = FakeForge::start().expect("fake forge");
    let client = client_of(&forge.url(), HttpsConfig::new());
    let zen = format!("{}/zen", forge.url());

    // Reads share one kept-alive connection.
    for _ in 0..3 {
        let out = client
            .get_url(&zen, &CallOptions::new())
            .expect("valid url");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    }
    assert_eq!(forge.connections_accepted(), 1, "reads are pooled");
    // Writes keep none: one connection each.
    for _ in 0..2 {
        let out = client
            .create_issue_comment(&repo(), 1, "fresh", &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    }
    assert_eq!(forge.connections_accepted(), 3, "writes are not pooled");

    let fresh = FakeForge::start().expect("fake forge");
    let client = client_of(&fresh.url(), HttpsConfig::new());
    let zen = format!("{}/zen", fresh.url());
    exercise_counts(&fresh, &client, &zen, &|| {
        fresh.close_idle_connections();
    });
}

#[test]
fn over_https_every_request_is_an_attempt_with_idle_connections_closed_by_the_server() {
    let forge = FakeForge::start().expect("fake forge");
    let pki = TestPki::new().expect("pki");
    let proxy = FaultProxy::https(forge.addr(), &pki.server(ServerCert::Good)).expect("proxy");
    let client = client_of(
        &proxy.http_url(""),
        HttpsConfig::new()
            .with_ca_file(pki.ca_file())
            .expect("the CA file reads"),
    );
    let zen = proxy.http_url("/zen");
    exercise_counts(&forge, &client, &zen, &|| {
        // The TLS end closes the client's kept-alive connections.
        proxy.cut_clients();
    });
}
