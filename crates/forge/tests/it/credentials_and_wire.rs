//! Credentials (the GitHub App source, user info in URLs), redirects and
//! the wire's other classes, against the fake forge over loopback.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::*;
use secrecy::SecretString;
use sluice_forge::{AppClaims, CallOptions, ForgeClient, GitHubAppSource, Method, NewPullRequest};
use sluice_policy::{
    fingerprint, Bounds, Class, CredentialSource, OutcomeKind, StaticSource, Stopped,
};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, Event, FakeForge};

const KEY: &str = include_str!("../data/test-only-app-key.pem");
const PUBLIC_KEY: &str = include_str!("../data/test-only-app-key.pub.pem");

fn app(forge: &FakeForge) -> GitHubAppSource {
    GitHubAppSource::new(
        &forge.url(),
        "4242",
        99,
        &SecretString::from(KEY.to_string()),
    )
    .expect("app source")
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

#[test]
fn a_github_app_buys_its_token_with_an_rs256_jwt_and_caches_it_until_shortly_before_it_expires() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set_app_token_lifetime(Duration::from_secs(3));
    let source = app(&forge).with_refresh_margin(Duration::from_secs(1));
    let first = source.credential().expect("token");
    let again = source.credential().expect("cached token");
    assert_eq!(first.fingerprint(), again.fingerprint());
    assert_eq!(source.mint_count(), 1);
    assert_eq!(forge.arrivals(Endpoint::AccessToken).len(), 1);
    assert!(forge.arrivals(Endpoint::AccessToken)[0]
        .path
        .ends_with("/app/installations/99/access_tokens"));
    assert_eq!(
        forge.minted_fingerprints(),
        vec![first.fingerprint().to_string()]
    );

    // The JWT: RS256, signed by the app's key, iat a minute ago, exp within
    // ten minutes.
    let jwt = forge.app_jwts().remove(0);
    let header = jsonwebtoken::decode_header(&jwt).expect("header");
    assert_eq!(header.alg, jsonwebtoken::Algorithm::RS256);
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_required_spec_claims(&["exp", "iat", "iss"]);
    v.set_issuer(&["4242"]);
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC_KEY.as_bytes()).expect("public key");
    let claims = jsonwebtoken::decode::<AppClaims>(&jwt, &key, &v)
        .expect("valid JWT")
        .claims;
    let now = now_secs();
    assert!(
        claims.iat + 60 >= now.saturating_sub(2) && claims.iat + 60 <= now,
        "{claims:?}"
    );
    assert!(claims.exp > now && claims.exp <= now + 600, "{claims:?}");

    // Shortly before it expires, a new one is bought.
    std::thread::sleep(Duration::from_millis(2_100));
    let later = source.credential().expect("new token");
    assert_ne!(later.fingerprint(), first.fingerprint());
    assert_eq!(source.mint_count(), 2);
    assert!(!format!("{source:?}").contains("BEGIN"));
}

#[test]
fn a_refused_app_token_is_replaced_by_a_freshly_minted_one_which_later_operations_reuse() {
    let forge = FakeForge::start().expect("fake forge");
    forge.script_app_tokens(["app-token-not-yet-live", "app-token-live"]);
    forge.set(
        Endpoint::Zen,
        Behaviour::Token {
            valid: vec!["app-token-live".into()],
        },
    );
    let source = Arc::new(app(&forge));
    let client = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(500)))
        .bounds(exercise())
        .github_app(Arc::clone(&source))
        .build()
        .expect("client");
    let (out, logs) = capture(|| {
        client
            .request(Method::GET, "/zen", None, &CallOptions::new())
            .expect("request")
    });
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(
        source.mint_count(),
        2,
        "a token bought afresh, not the cached one"
    );
    assert_eq!(
        out.refused_credentials,
        vec![fingerprint("app-token-not-yet-live")]
    );
    let a = forge.arrivals(Endpoint::Zen);
    assert_eq!(
        a[1].token.as_deref(),
        Some(fingerprint("app-token-live").as_str())
    );
    assert!(gap(a[0].at, a[1].at) >= Duration::from_millis(500));
    // A later operation takes the cached live token.
    let again = client
        .request(Method::GET, "/zen", None, &CallOptions::new())
        .expect("request");
    assert_eq!(again.kind, OutcomeKind::Succeeded);
    assert_eq!(source.mint_count(), 2);
    for t in ["app-token-not-yet-live", "app-token-live", "BEGIN RSA"] {
        assert!(!logs.contains(t), "{t} leaked:\n{logs}");
    }
}

#[test]
fn an_app_token_mint_carries_the_callers_traceparent_and_the_clients_header() {
    let forge = FakeForge::start().expect("fake forge");
    // The first token is refused: a second mint, after the refusal.
    forge.script_app_tokens(["app-token-not-yet-live", "app-token-live"]);
    forge.set(
        Endpoint::Zen,
        Behaviour::Token {
            valid: vec!["app-token-live".into()],
        },
    );
    let source = Arc::new(app(&forge));
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let opts = CallOptions::new()
        .header("traceparent", traceparent)
        .expect("a caller may give a traceparent");
    let out = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(100)))
        .bounds(exercise())
        .header("x-service-request-id", "job-42")
        .github_app(Arc::clone(&source))
        .build()
        .expect("client")
        .request(Method::GET, "/zen", None, &opts)
        .expect("request");
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{out:?}\n{}",
        forge.log_text()
    );
    assert_eq!(source.mint_count(), 2);
    assert_eq!(forge.arrivals(Endpoint::AccessToken).len(), 2);
    let arrivals = forge.all_arrivals();
    // Two mints, two requests.
    assert_eq!(arrivals.len(), 4, "{}", forge.log_text());
    for a in &arrivals {
        assert_eq!(a.header("traceparent"), Some(traceparent), "{a}");
        assert_eq!(a.header("x-service-request-id"), Some("job-42"), "{a}");
    }
}

#[test]
fn an_app_minting_on_another_host_is_not_sent_the_callers_headers() {
    let forge = FakeForge::start().expect("fake forge");
    let minter = FakeForge::start().expect("the app's API, on another port");
    minter.script_app_tokens(["app-token-elsewhere"]);
    forge.set(
        Endpoint::Zen,
        Behaviour::Token {
            valid: vec!["app-token-elsewhere".into()],
        },
    );
    let source = Arc::new(app(&minter));
    let opts = CallOptions::new()
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .expect("a caller may give a traceparent");
    let out = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(100)))
        .bounds(exercise())
        .header("x-service-request-id", "job-42")
        .github_app(Arc::clone(&source))
        .build()
        .expect("client")
        .request(Method::GET, "/zen", None, &opts)
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let mints = minter.arrivals(Endpoint::AccessToken);
    assert_eq!(mints.len(), 1, "{}", minter.log_text());
    assert_eq!(mints[0].header("traceparent"), None, "{}", mints[0]);
    assert_eq!(
        mints[0].header("x-service-request-id"),
        None,
        "{}",
        mints[0]
    );
    let zen = forge.arrivals(Endpoint::Zen);
    assert!(zen[0].header("traceparent").is_some(), "{}", zen[0]);
}

#[test]
fn a_redirect_to_another_host_or_port_does_not_carry_the_credential_but_one_to_the_same_host_does()
{
    let a = FakeForge::start().expect("fake forge a");
    let b = FakeForge::start().expect("fake forge b");
    let port_b = b.addr().port();
    a.set(
        Endpoint::ListPulls,
        Behaviour::Redirect {
            status: 302,
            location: format!("http://localhost:{port_b}/zen"),
        },
    );
    a.set(
        Endpoint::CombinedStatus,
        Behaviour::Redirect {
            status: 301,
            location: format!("{}/zen", b.url()),
        },
    );
    a.set(
        Endpoint::GetPull,
        Behaviour::Redirect {
            status: 302,
            location: format!("{}/zen", a.url()),
        },
    );
    let client = client_with(
        &a,
        policy(Duration::from_secs(1)),
        Some(Arc::new(StaticSource::new(SecretString::from(
            "redirect-secret".to_string(),
        )))),
    );
    let fp = fingerprint("redirect-secret");
    for path in [
        "/repos/octo/repo/pulls",
        "/repos/octo/repo/commits/x/status",
    ] {
        let out = client
            .request(Method::GET, path, None, &CallOptions::new())
            .expect("request");
        assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    }
    assert_eq!(
        a.arrivals(Endpoint::ListPulls)[0].token.as_deref(),
        Some(fp.as_str())
    );
    let at_b = b.arrivals(Endpoint::Zen);
    assert_eq!(at_b.len(), 2, "{}", b.log_text());
    assert!(at_b.iter().all(|e| e.token.is_none()), "{}", b.log_text());
    let out = client
        .request(
            Method::GET,
            "/repos/octo/repo/pulls/1",
            None,
            &CallOptions::new(),
        )
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    assert_eq!(
        a.arrivals(Endpoint::Zen)[0].token.as_deref(),
        Some(fp.as_str())
    );
}

#[test]
fn a_write_is_never_redirected() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(
        Endpoint::CreatePull,
        Behaviour::Redirect {
            status: 307,
            location: format!("{}/zen", forge.url()),
        },
    );
    let out = client(&forge)
        .create_pull(
            &repo(),
            &NewPullRequest::new("t", "f", "main"),
            &CallOptions::new(),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert!(out.error.expect("error").cause.contains("307"));
    assert!(forge.arrivals(Endpoint::Zen).is_empty());
    assert_eq!(out.may_have_applied, Some(false));
}

#[test]
fn user_info_in_a_get_url_is_sent_as_the_bearer_token_and_kept_out_of_the_outcome() {
    let forge = FakeForge::start().expect("fake forge");
    let client = client(&forge);
    let url = format!("http://x-access-token:url-secret-99@{}/zen", forge.addr());
    let (out, logs) = capture(|| client.get_url(&url, &CallOptions::new()).expect("get"));
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let v = out.value.clone().expect("value");
    assert_eq!(v.status, 200);
    assert!(v.body.contains("logically awesome"));
    assert_eq!(out.operation.kind, "http-get");
    assert_eq!(out.operation.remote, format!("{}/zen", forge.url()));
    assert_eq!(
        forge.arrivals(Endpoint::Zen)[0].token.as_deref(),
        Some(fingerprint("url-secret-99").as_str())
    );
    let json = serde_json::to_string(&out).expect("json");
    for text in [json.as_str(), logs.as_str(), &format!("{out:?}")] {
        assert!(!text.contains("url-secret-99"), "leaked: {text}");
    }
    assert!(client.get_url("/zen", &CallOptions::new()).is_err());
    let err = client
        .get_url("ftp://u:ftp-secret@h/x", &CallOptions::new())
        .expect_err("bad input");
    assert!(!err.to_string().contains("ftp-secret"), "{err}");
}

#[test]
fn a_get_url_answered_404_keeps_the_status_and_body_as_the_value() {
    let forge = FakeForge::start().expect("fake forge");
    let out = client(&forge)
        .get_url(&format!("{}/nowhere", forge.url()), &CallOptions::new())
        .expect("get");
    assert_eq!(out.kind, OutcomeKind::Answered);
    let v = out.value.expect("the answer is kept");
    assert_eq!(v.status, 404);
    assert!(v.body.contains("Not Found"));
    assert_eq!(out.error.expect("error").cause, "HTTP 404: Not Found");
    assert_eq!(forge.all_arrivals().len(), 1);
}

#[test]
fn a_primary_rate_limit_is_retried_once_its_reset_time_has_come() {
    let forge = FakeForge::start().expect("fake forge");
    let client = client(&forge);
    // x-ratelimit-reset has whole seconds: the reset is 1 to 2 s ahead.
    let reset_secs = now_secs() + 2;
    let reset = UNIX_EPOCH + Duration::from_secs(reset_secs);
    let reset_at = Instant::now() + reset.duration_since(SystemTime::now()).unwrap_or_default();
    forge.push(Endpoint::Zen, Behaviour::PrimaryLimit { reset });
    let out = client
        .request(Method::GET, "/zen", None, &CallOptions::new())
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    let a = forge.arrivals(Endpoint::Zen);
    assert_eq!(a.len(), 2);
    assert!(
        a[1].at + Duration::from_millis(20) >= reset_at,
        "retried {:?} before the reset\n{}",
        reset_at.saturating_duration_since(a[1].at),
        forge.log_text()
    );
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0].delay_ms.expect("delay") <= 2_000);
}

#[test]
fn a_primary_rate_limit_whose_reset_does_not_fit_the_budget_stops_at_once() {
    let forge = FakeForge::start().expect("fake forge");
    let (policy, sleeper) = recorded_policy();
    let client = client_with(&forge, policy, None);
    let reset = UNIX_EPOCH + Duration::from_secs(now_secs() + 120);
    forge.push(Endpoint::Zen, Behaviour::PrimaryLimit { reset });
    let out = client
        .request(
            Method::GET,
            "/zen",
            None,
            &CallOptions::new().bounds(Bounds::new(
                Duration::from_secs(10),
                Duration::from_secs(5),
                3,
            )),
        )
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::RetryHintExceedsBudget));
    assert_eq!(forge.arrivals(Endpoint::Zen).len(), 1, "no second request");
    assert!(sleeper.pauses().is_empty(), "{:?}", sleeper.pauses());
    let err = out.error.expect("error");
    assert_eq!(err.class, Class::Unjudged);
    assert!(err.retry_after.expect("the reset") > Duration::from_secs(100));
    let f = err
        .source_as::<sluice_forge::ForgeFailure>()
        .expect("typed failure");
    assert_eq!(f.status(), Some(403));
}

#[test]
fn a_comment_whose_answer_is_cut_is_settled_by_its_marker_and_not_sent_again() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let out = client(&forge)
        .create_issue_comment(
            &repo(),
            7,
            "landed by sluice",
            &CallOptions::new().bounds(exercise()),
        )
        .expect("valid input");
    // Settled by reading the comments for its marker: landed.
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}");
    assert_eq!(
        out.reconciled.and_then(|r| r.verdict),
        Some(sluice_policy::Verdict::Landed)
    );
    assert_eq!(
        forge.arrivals(Endpoint::CreateIssueComment).len(),
        1,
        "not sent again"
    );
    assert_eq!(forge.comments(REPO).len(), 1);
}

#[test]
fn a_refused_connection_is_unjudged_at_connect_and_retried_for_reads_and_writes() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let deadline = Duration::from_secs(5);
    let client = ForgeClient::builder(&format!("http://127.0.0.1:{port}"))
        .bounds(Bounds::new(deadline, Duration::from_secs(1), 2))
        .build()
        .expect("client");
    let read = client
        .ci_status(&repo(), SHA, &CallOptions::new())
        .expect("valid input");
    let write = client
        .create_pull(
            &repo(),
            &NewPullRequest::new("t", "f", "main"),
            &CallOptions::new(),
        )
        .expect("valid input");
    for (attempts, kind, stopped, elapsed) in [
        (&read.attempts, read.kind, read.stopped, read.elapsed_ms),
        (&write.attempts, write.kind, write.stopped, write.elapsed_ms),
    ] {
        assert_eq!(kind, OutcomeKind::Unknown);
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        // Each attempt ended on the refusal itself, not on its timeout:
        // the cause is the refusal, and the operation stopped because its
        // attempts ran out, well inside the deadline.
        assert!(
            attempts.iter().all(|a| a.phase == "connect"
                && a.class == Some(Class::Unjudged)
                && a.cause
                    .as_deref()
                    .is_some_and(|c| c.to_lowercase().contains("refused"))),
            "{attempts:?}"
        );
        assert_eq!(stopped, Some(Stopped::MaxAttempts), "{attempts:?}");
        assert!(elapsed < deadline.as_millis() as u64, "{elapsed} ms");
    }
    assert_eq!(write.may_have_applied, Some(false));
    assert_eq!(write.stopped, Some(Stopped::MaxAttempts));
}

#[test]
fn the_fake_forges_log_records_the_token_fingerprint_and_completion_of_every_request() {
    let forge = FakeForge::start().expect("fake forge");
    let client = client_with(
        &forge,
        policy(Duration::from_secs(1)),
        Some(Arc::new(StaticSource::new(SecretString::from(
            "log-secret".to_string(),
        )))),
    );
    let out = client
        .request(Method::GET, "/zen", None, &CallOptions::new())
        .expect("request");
    assert_eq!(out.kind, OutcomeKind::Succeeded);
    // The forge logs its answer after writing it, so the client can read
    // the answer first: wait on the log entry, not on luck.
    assert!(forge.wait_for_completions(Endpoint::Zen, 1, Duration::from_secs(30)));
    let log = forge.log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].event, Event::Arrival);
    assert_eq!(log[1].event, Event::Answered(200));
    assert_eq!(log[0].request, log[1].request);
    assert!(log
        .iter()
        .all(|e| e.token.as_deref() == Some(fingerprint("log-secret").as_str())));
    assert!(!forge.log_text().contains("log-secret"));
}

#[test]
fn a_cancelled_read_stops_waiting_during_its_attempt() {
    let forge = FakeForge::start().expect("fake forge");
    // An answer far beyond the operation's deadline: only the cancel can
    // end the attempt before the forge answers.
    forge.set(Endpoint::Zen, Behaviour::Delay(Duration::from_secs(120)));
    let client = client(&forge);
    let cancel = sluice_policy::CancelFlag::new();
    let raise = cancel.clone();
    let out = std::thread::scope(|s| {
        // Raised once the request is at the forge: the attempt is waiting.
        s.spawn(|| {
            assert!(forge.wait_for_arrivals(Endpoint::Zen, 1, Duration::from_secs(60)));
            raise.cancel();
        });
        client
            .request(
                Method::GET,
                "/zen",
                None,
                &CallOptions::new().cancel(&cancel),
            )
            .expect("request")
    });
    assert_eq!(out.kind, OutcomeKind::Unknown, "{out:?}");
    assert_eq!(out.stopped, Some(Stopped::Cancelled));
    assert_eq!(out.attempts.len(), 1, "{out:?}");
    // It stopped waiting: it returned before the forge answered, and well
    // before the attempt's own timeout would have cut it.
    assert!(
        forge.completions(Endpoint::Zen).is_empty(),
        "{}",
        forge.log_text()
    );
    let a = &out.attempts[0];
    assert!(a.elapsed_ms < a.timeout_ms, "{a:?}");
    assert_eq!(forge.arrivals(Endpoint::Zen).len(), 1);
}

/// A GitHub App whose installation tokens live 2 s (so the refresh margin
/// is 1 s): a ci-status of three pages of check runs whose second page is
/// answered 2.5 s late. The token is checked before every request, so the
/// third page goes out with a new one, not with the expired one to be
/// refused first.
#[test]
fn an_app_token_that_would_expire_between_two_pages_is_replaced_before_the_next_page() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set_app_token_lifetime(Duration::from_secs(2));
    forge.refuse_expired_app_tokens();
    let sha = "d".repeat(40);
    for i in 0..250 {
        forge.add_check_run(
            "octo/repo",
            &format!("ci-{i}"),
            &sha,
            "completed",
            Some("success"),
            None,
        );
    }
    let runs = format!("/repos/octo/repo/commits/{sha}/check-runs");
    forge.push_path("GET", &runs, Behaviour::Ok);
    forge.push_path("GET", &runs, Behaviour::Delay(Duration::from_millis(2_500)));
    let source = Arc::new(app(&forge));
    let client = ForgeClient::builder(&forge.url())
        .policy(policy(Duration::from_millis(200)))
        .bounds(Bounds::new(
            Duration::from_secs(30),
            Duration::from_secs(20),
            3,
        ))
        .github_app(Arc::clone(&source))
        .build()
        .expect("client");
    let out = client
        .ci_status(&repo(), &sha, &CallOptions::new())
        .expect("valid input");
    let log = forge.log_text();
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{out:?}\n{log}");
    assert_eq!(out.attempts.len(), 1, "{log}");
    assert!(out.refused_credentials.is_empty(), "{log}");
    assert_eq!(out.value.as_ref().expect("value").check_runs.len(), 250);
    let refused: Vec<_> = forge
        .log()
        .into_iter()
        .filter(|e| e.event == Event::Answered(401))
        .collect();
    assert!(refused.is_empty(), "no request refused:\n{log}");
    let pages = forge.arrivals(Endpoint::ListCheckRuns);
    assert_eq!(pages.len(), 3, "{log}");
    assert_eq!(pages[0].token, pages[1].token, "{log}");
    assert_ne!(
        pages[1].token, pages[2].token,
        "a new token for page 3:\n{log}"
    );
    assert_eq!(source.mint_count(), 2, "{log}");
}
