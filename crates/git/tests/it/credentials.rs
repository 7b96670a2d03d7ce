//! Credentials as git finds them, against git http-backend behind lighttpd
//! requiring basic auth for push: git's credential helpers (asked `fill`
//! after the first 401, `approve`d after success, `reject`ed after a
//! refusal), askpass, `http.extraHeader`, and a user name in the URL.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use common::*;
use secrecy::SecretString;
use sluice_git::GitClient;
use sluice_policy::{Class, OutcomeKind, Policy, StaticSource};
use sluice_testkit::{repo, HttpBackend};

const USER: &str = "alice";
const PASSWORD: &str = "helper-pass-77";

fn backend(w: &World) -> HttpBackend {
    HttpBackend::start_with_auth(&w.dir.path().join("srv"), USER, PASSWORD)
        .expect("lighttpd starts")
}

/// `http://127.0.0.1:PORT` of `url`: what git's store keys an entry by.
fn origin(url: &str) -> String {
    let rest = url.strip_prefix("http://").expect("http");
    format!("http://{}", rest.split('/').next().expect("host"))
}

/// A credential helper (a script) that logs each action it is asked, with
/// the password it was given, and answers `get` with the passwords of
/// `answers` in turn (the last one again when they run out).
fn logging_helper(dir: &Path, answers: &[&str]) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let log = dir.join("helper.log");
    let script = dir.join("helper.sh");
    let count = dir.join("helper.count");
    let list = answers.join(" ");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             pass=$(sed -n 's/^password=//p')\n\
             echo \"$1 $pass\" >> '{log}'\n\
             [ \"$1\" = get ] || exit 0\n\
             n=$(cat '{count}' 2>/dev/null || echo 0); echo $((n+1)) > '{count}'\n\
             set -- {list}; shift $(( n < $# ? n : $# - 1 ))\n\
             printf 'username={USER}\\npassword=%s\\n' \"$1\"\n",
            log = log.display(),
            count = count.display(),
        ),
    )
    .expect("helper written");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (script.display().to_string(), log)
}

fn read_log(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_push_goes_through_a_store_helper_asked_after_the_first_401() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let url = http.url("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "through the store");
    let store = w.path("store");
    let entry = format!(
        "{}\n",
        origin(&url).replace("http://", &format!("http://{USER}:{PASSWORD}@"))
    );
    std::fs::write(&store, &entry).expect("store written");
    repo::set_config(
        &local,
        "credential.helper",
        &format!("store --file {}", store.display()),
    );
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    // The anonymous request and its 401 belong to the one attempt.
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert!(out.refused_credentials.is_empty());
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
    // Approved: the store keeps its entry (as git writes it: the port's
    // `:` escaped).
    let kept = std::fs::read_to_string(&store).expect("store");
    assert_eq!(kept.lines().count(), 1, "{kept}");
    assert!(
        kept.contains(&format!("{USER}:{PASSWORD}@127.0.0.1")),
        "{kept}"
    );
}

#[test]
fn a_refused_store_entry_is_erased_and_the_refusal_stands_when_nothing_else_gives_one() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let url = http.url("s.git");
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "stale store");
    let store = w.path("store");
    std::fs::write(
        &store,
        format!(
            "{}\n",
            origin(&url).replace("http://", &format!("http://{USER}:stale-stored@"))
        ),
    )
    .expect("store written");
    repo::set_config(
        &local,
        "credential.helper",
        &format!("store --file {}", store.display()),
    );
    let c = GitClient::new(Arc::new(
        Policy::builder().settle(Duration::from_millis(50)).build(),
    ));
    let out = push_by(
        &c,
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("stale-stored")]
    );
    // `reject` erased it, as git's does.
    assert_eq!(std::fs::read_to_string(&store).expect("store"), "");
}

#[test]
fn a_refused_helper_credential_is_rejected_and_filled_again_after_the_settle_pause() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "second fill");
    let (helper, log) = logging_helper(w.dir.path(), &["stale-pass", PASSWORD]);
    repo::set_config(&local, "credential.helper", &helper);
    let settle = Duration::from_millis(300);
    let c = GitClient::new(Arc::new(Policy::builder().settle(settle).build()));
    let out = push_by(
        &c,
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 2, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Unjudged));
    assert!(out.attempts[0].delay_ms.expect("a delay") >= settle.as_millis() as u64);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("stale-pass")]
    );
    assert_eq!(
        read_log(&log),
        vec![
            "get ".to_string(),
            "erase stale-pass".into(),
            "get ".into(),
            format!("store {PASSWORD}"),
        ]
    );
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_helper_that_gives_the_refused_credential_again_is_not_sent_again() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "stands");
    let (helper, log) = logging_helper(w.dir.path(), &["always-stale"]);
    repo::set_config(&local, "credential.helper", &helper);
    let c = GitClient::new(Arc::new(
        Policy::builder().settle(Duration::from_millis(50)).build(),
    ));
    let out = push_by(
        &c,
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 4),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(
        out.refused_credentials,
        vec![sluice_policy::fingerprint("always-stale")]
    );
    assert_eq!(
        read_log(&log),
        vec!["get ", "erase always-stale", "get "],
        "filled again once, never sent again"
    );
}

#[test]
fn a_helper_scoped_to_another_host_is_not_asked() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "scoped");
    let (helper, log) = logging_helper(w.dir.path(), &[PASSWORD]);
    repo::set_config(
        &local,
        "credential.http://elsewhere.example.helper",
        &helper,
    );
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert!(read_log(&log).is_empty(), "{:?}", read_log(&log));
    // Scoped to this host, it is.
    repo::set_config(
        &local,
        &format!("credential.{}.helper", origin(&http.url("s.git"))),
        &helper,
    );
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(
        read_log(&log),
        vec!["get ".to_string(), format!("store {PASSWORD}")]
    );
}

#[test]
fn a_push_goes_through_core_askpass_when_no_helper_gives_one() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "askpass");
    let asked = w.path("asked.log");
    let askpass = w.path("askpass.sh");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\ncase \"$1\" in Username*) echo {USER};; *) echo {PASSWORD};; esac\n",
            asked.display()
        ),
    )
    .expect("askpass written");
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    repo::set_config(&local, "core.askPass", &askpass.display().to_string());
    let url = http.url("s.git");
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    let host = origin(&url);
    assert_eq!(
        read_log(&asked),
        vec![
            format!("Username for '{host}': "),
            format!(
                "Password for '{}': ",
                host.replace("http://", &format!("http://{USER}@"))
            ),
        ]
    );
}

#[test]
fn an_extra_authorization_header_is_sent_and_nothing_else_is_asked() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "extra header");
    let (helper, log) = logging_helper(w.dir.path(), &[PASSWORD]);
    repo::set_config(&local, "credential.helper", &helper);
    let basic = |p: &str| {
        format!(
            "Authorization: Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{p}"))
        )
    };
    let url = http.url("s.git");
    repo::set_config(
        &local,
        &format!("http.{}.extraHeader", origin(&url)),
        &basic("wrong"),
    );
    let token = Arc::new(StaticSource::new(SecretString::from(PASSWORD.to_string())));
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3).credentials(token),
    );
    // The header's 401 is the answer: no helper, no token, no retry.
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
    assert!(read_log(&log).is_empty(), "{:?}", read_log(&log));
    repo::set_config(
        &local,
        &format!("http.{}.extraHeader", origin(&url)),
        &basic(PASSWORD),
    );
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert!(read_log(&log).is_empty(), "{:?}", read_log(&log));
    assert_eq!(
        repo::rev_parse(&srv, "refs/heads/main").as_deref(),
        Some(tip.as_str())
    );
}

#[test]
fn a_user_name_in_the_url_is_kept_beside_the_calls_token() {
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "user kept");
    let url = http
        .url("s.git")
        .replace("http://", &format!("http://{USER}@"));
    let token = Arc::new(StaticSource::new(SecretString::from(PASSWORD.to_string())));
    let out = push(
        &url,
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(20_000, 10_000, 3).credentials(token),
    );
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1);
}

#[test]
fn a_helper_that_does_not_answer_is_given_up_within_the_budget() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let srv = w.small("s.git");
    let http = backend(&w);
    let local = local_clone(&srv, &w.path("local.git"));
    let tip = repo::commit_on(&local, "main", "hanging helper");
    // The helper waits on a FIFO the test opens at its end: it is let go
    // before the test's directory goes.
    let fifo = w.path("release.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let helper = w.path("hang.sh");
    std::fs::write(
        &helper,
        format!("#!/bin/sh\nread x < '{}'\n", fifo.display()),
    )
    .expect("helper written");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    repo::set_config(&local, "credential.helper", &helper.display().to_string());
    let started = std::time::Instant::now();
    let out = push(
        &http.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(3_000, 2_000, 2),
    );
    let took = started.elapsed();
    // Opening the FIFO for writing (the helper reads it) lets it end.
    drop(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .expect("fifo"),
    );
    assert_ne!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert!(took < Duration::from_secs(8), "{took:?}");
}
