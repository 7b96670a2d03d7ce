//! Redirects as git's `http.followRedirects=initial` follows them, served
//! by lighttpd's own `mod_redirect` in front of git http-backend: a renamed
//! repository is listed, fetched and pushed through its old URL (every
//! later request, settling reads included, to the new place); https to
//! http is refused; a POST answered with a redirect is the server's
//! answer; a loop is answered with its chain.

use crate::common;

use std::sync::Arc;

use common::*;
use sluice_git::{GitClient, HttpsConfig};
use sluice_policy::{Class, OutcomeKind, Policy};
use sluice_testkit::{repo, HttpBackend, Redirect, ServerCert, TestPki};

/// `old.git` renamed to `s.git`: every request under the old name is
/// answered 301 to the same request under the new one.
fn renamed(w: &World) -> HttpBackend {
    let srv = w.small("s.git");
    HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
    HttpBackend::start_with_redirects(
        &w.dir.path().join("srv"),
        None,
        &[Redirect::repository("old.git", "/git/s.git", 301)],
    )
    .expect("lighttpd with mod_redirect starts")
}

#[test]
fn a_renamed_repository_is_listed_fetched_and_pushed_through_its_old_url() {
    let w = World::new();
    let http = renamed(&w);
    let old = http.url("old.git");
    let new = http.url("s.git");
    let c = client();

    let out = c
        .ls_refs(&old, &[], &quick(10_000, 5_000, 2))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.operation.redirected.as_deref(), Some(new.as_str()));
    let main = out
        .value
        .expect("refs")
        .into_iter()
        .find(|r| r.name == "refs/heads/main")
        .expect("main listed");
    assert_eq!(
        main.oid.map(|o| o.to_string()),
        repo::rev_parse(&w.srv("s.git"), "refs/heads/main")
    );
    // Again: the one-request listing goes to where the remote redirected,
    // never to the old URL.
    let again = c
        .ls_refs(&old, &[], &quick(10_000, 5_000, 2))
        .expect("valid input");
    assert_eq!(again.kind, OutcomeKind::Succeeded, "{:?}", again.attempts);
    assert_eq!(again.attempts.len(), 1, "{:?}", again.attempts);

    let local = empty_repo(&w.path("local.git"));
    let out = c
        .fetch(
            &old,
            &["+refs/heads/*:refs/remotes/origin/*".into()],
            &local,
            &quick(20_000, 10_000, 2),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.operation.redirected.as_deref(), Some(new.as_str()));
    assert_eq!(
        repo::rev_parse(&w.path("local.git"), "refs/remotes/origin/dev"),
        repo::rev_parse(&w.srv("s.git"), "refs/heads/dev")
    );

    let pusher = local_clone(&w.srv("s.git"), &w.path("pusher.git"));
    let tip = repo::commit_on(&pusher, "main", "through the old name");
    let out = push_by(
        &c,
        &old,
        update(Some(&tip), "refs/heads/main"),
        &pusher,
        &quick(20_000, 10_000, 2),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.operation.redirected.as_deref(), Some(new.as_str()));
    assert_eq!(
        repo::rev_parse(&w.srv("s.git"), "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_redirect_from_https_to_http_is_refused_in_one_attempt() {
    let w = World::new();
    let _srv = w.small("s.git");
    let plain = HttpBackend::start(&w.dir.path().join("srv")).expect("lighttpd starts");
    let pki = TestPki::new().expect("pki");
    let down = format!("{}/git/s.git", plain.url("").trim_end_matches("/git/"));
    let tls = HttpBackend::start_with_redirects(
        &w.dir.path().join("srv"),
        Some(&pki.server(ServerCert::Good)),
        &[Redirect::repository("s.git", &down, 302)],
    )
    .expect("lighttpd with mod_openssl and mod_redirect starts");
    let c = GitClient::new(Arc::new(Policy::default())).with_https(
        HttpsConfig::new()
            .with_ca_file(pki.ca_file())
            .expect("the CA file reads"),
    );
    let out = c
        .ls_refs(&tls.url("s.git"), &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("leaves https"), "{cause}");
    assert_eq!(out.operation.redirected, None);
}

#[test]
fn a_post_answered_with_a_redirect_is_answered() {
    let w = World::new();
    let srv = w.small("s.git");
    HttpBackend::enable_anonymous_push(&srv).expect("http.receivepack");
    // Only the pack's POST is redirected (307 keeps the method): git does
    // not follow a redirect after the first request, nor does this client.
    let http = HttpBackend::start_with_redirects(
        &w.dir.path().join("srv"),
        None,
        &[Redirect {
            pattern: "^/git/s[.]git/git-receive-pack$".into(),
            target: "/git/elsewhere.git/git-receive-pack".into(),
            code: 307,
        }],
    )
    .expect("lighttpd with mod_redirect starts");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "redirected post");
    let before = repo::rev_parse(&srv, "refs/heads/main");
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 5_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("307"), "{cause}");
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), before);
}

#[test]
fn a_redirect_loop_is_answered_with_its_chain() {
    let w = World::new();
    let _srv = w.small("s.git");
    let http = HttpBackend::start_with_redirects(
        &w.dir.path().join("srv"),
        None,
        &[
            Redirect::repository("a.git", "/git/b.git", 302),
            Redirect::repository("b.git", "/git/a.git", 302),
        ],
    )
    .expect("lighttpd with mod_redirect starts");
    let out = client()
        .ls_refs(&http.url("a.git"), &[], &quick(10_000, 5_000, 3))
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    let cause = out.attempts[0].cause.clone().unwrap_or_default();
    assert!(cause.contains("redirect loop"), "{cause}");
    assert!(
        cause.contains("/git/a.git/info/refs") && cause.contains("/git/b.git/info/refs"),
        "{cause}"
    );
}
