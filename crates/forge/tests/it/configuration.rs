//! Configuration errors answered once: a GitHub App whose token endpoint
//! refuses it (a wrong key, app or installation) and a key that cannot
//! sign. Trying again cannot mend either: one attempt, no retries.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use secrecy::SecretString;
use sluice_forge::{
    CallOptions, CredentialError, ForgeClient, ForgeFailure, GitHubAppSource, Method,
};
use sluice_policy::{Bounds, Class, OutcomeKind, Stopped};
use sluice_testkit::fake_forge::{request_id, Behaviour, Endpoint, FakeForge};

const KEY: &str = include_str!("../data/test-only-app-key.pem");

/// The `wait` profile's shape, shortened: many attempts, so that one
/// attempt is the policy's choice, not the budget's.
fn many_attempts() -> Bounds {
    Bounds::new(Duration::from_secs(60), Duration::from_secs(5), 5)
}

fn app_client(forge: &FakeForge, pem: &str) -> (ForgeClient, Arc<GitHubAppSource>) {
    let source = Arc::new(
        GitHubAppSource::new(
            &forge.url(),
            "4242",
            99,
            &SecretString::from(pem.to_string()),
        )
        .expect("app source"),
    );
    let client = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(200)))
        .bounds(many_attempts())
        .github_app(Arc::clone(&source))
        .build()
        .expect("client");
    (client, source)
}

#[test]
fn a_token_endpoint_answering_401_403_or_404_is_answered_once_with_its_status_message_and_request_id(
) {
    for status in [401, 403, 404] {
        let forge = FakeForge::start().expect("fake forge");
        forge.set(
            Endpoint::AccessToken,
            Behaviour::Status {
                status,
                retry_after: None,
            },
        );
        let (client, source) = app_client(&forge, KEY);
        let out = client
            .request(Method::GET, "/zen", None, &CallOptions::new())
            .expect("valid input");
        assert_eq!(out.kind, OutcomeKind::Answered, "{status}: {out:?}");
        assert_eq!(out.attempts.len(), 1, "{status}: {out:?}");
        assert_eq!(out.attempts[0].phase, "credential");
        assert_eq!(out.attempts[0].class, Some(Class::Answered));
        assert_ne!(out.stopped, Some(Stopped::MaxAttempts), "{out:?}");
        // One request to the token endpoint, none to the API.
        let asked = forge.arrivals(Endpoint::AccessToken);
        assert_eq!(asked.len(), 1, "{}", forge.log_text());
        assert!(forge.arrivals(Endpoint::Zen).is_empty());
        assert_eq!(source.mint_count(), 0);
        let e = out.error.as_ref().expect("error");
        assert_eq!(e.class, Class::Answered);
        let f = e.source_as::<ForgeFailure>().expect("typed");
        let ForgeFailure::Credential {
            error:
                CredentialError::TokenEndpoint {
                    status: s,
                    message,
                    request_id: id,
                },
        } = f
        else {
            panic!("{status}: not the token endpoint's answer: {f:?}")
        };
        assert_eq!(*s, status);
        assert!(!message.is_empty(), "GitHub's message: {f:?}");
        assert!(e.cause.contains(message.as_str()), "{e:?}");
        assert_eq!(
            id.as_deref(),
            Some(request_id(asked[0].request).as_str()),
            "{f:?}"
        );
        assert_eq!(f.status(), Some(status));
        assert_eq!(f.message(), Some(message.as_str()));
    }
}

#[test]
fn a_token_endpoint_failing_otherwise_is_still_tried_again() {
    let forge = FakeForge::start().expect("fake forge");
    forge.push(Endpoint::AccessToken, Behaviour::Fail5xx);
    let (client, source) = app_client(&forge, KEY);
    let out = client
        .request(Method::GET, "/zen", None, &CallOptions::new())
        .expect("valid input");
    assert_eq!(out.attempts[0].phase, "credential", "{out:?}");
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged), "{out:?}");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        forge.arrivals(Endpoint::AccessToken).len(),
        2,
        "{}",
        forge.log_text()
    );
    assert_eq!(source.mint_count(), 1);
    assert_eq!(forge.arrivals(Endpoint::Zen).len(), 1, "{out:?}");
}

/// A key that cannot be read or parsed is refused where the source is
/// built, before any operation: nothing is sent. (A key that parses but
/// cannot sign would be a `local-error` at the credential phase; the RSA
/// backend checks the key when it parses it, so none reaches a call.)
#[test]
fn a_key_that_cannot_be_parsed_is_refused_when_the_source_is_built() {
    let e = GitHubAppSource::new(
        "https://api.github.com",
        "4242",
        99,
        &SecretString::from("not a key".to_string()),
    )
    .expect_err("not a PEM");
    assert!(matches!(e, sluice_forge::ForgeError::Key(_)), "{e:?}");
}

#[test]
fn an_app_source_told_its_token_was_refused_mints_afresh() {
    let forge = FakeForge::start().expect("fake forge");
    let (_client, source) = app_client(&forge, KEY);
    use sluice_policy::CredentialSource;
    let first = source.credential().expect("token");
    assert_eq!(
        source.credential().expect("cached").fingerprint(),
        first.fingerprint()
    );
    source.refused("not-this-one");
    assert_eq!(source.mint_count(), 1, "another token's refusal keeps it");
    source.refused(first.fingerprint());
    let next = source.credential().expect("fresh token");
    assert_ne!(next.fingerprint(), first.fingerprint());
    assert_eq!(source.mint_count(), 2);
}
