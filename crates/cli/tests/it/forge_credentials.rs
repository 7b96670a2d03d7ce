//! The forge's credentials on the command line: a GitHub App's flags
//! against the fake GitHub (tokens that live 2 s, replaced before they
//! expire), `GH_TOKEN` and `GITHUB_TOKEN`, the App flags' usage errors,
//! `--token-ttl`, and why a refusal of the same credential stands.

use std::path::Path;
use std::time::Duration;

use crate::common;

use common::{sluice, sluice_env};
use sluice_testkit::fake_forge::{fingerprint, Behaviour, Endpoint, Event, FakeForge};

const REPO: &str = "octo/repo";
const HEAD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// The forge crate's test-only key (never used anywhere real).
const APP_KEY: &str = include_str!("../../../forge/tests/data/test-only-app-key.pem");

fn key_file(dir: &Path) -> String {
    let path = dir.join("app.pem");
    std::fs::write(&path, APP_KEY).expect("key file");
    path.display().to_string()
}

fn forge_env(f: &FakeForge, args: &[&str], env: &[(&str, &str)]) -> common::Run {
    let api = f.url();
    let mut all = vec!["forge"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--api", &api, "--deadline", "20s", "--settle", "200ms"]);
    sluice_env(&all, env)
}

#[test]
fn an_app_reads_three_pages_one_late_with_tokens_that_live_two_seconds_and_none_is_refused() {
    let f = FakeForge::start().expect("fake forge");
    f.set_app_token_lifetime(Duration::from_secs(2));
    f.refuse_expired_app_tokens();
    for i in 0..250 {
        f.add_check_run(
            REPO,
            &format!("ci-{i}"),
            HEAD,
            "completed",
            Some("success"),
            None,
        );
    }
    let runs = format!("/repos/{REPO}/commits/{HEAD}/check-runs");
    f.push_path("GET", &runs, Behaviour::Ok);
    f.push_path("GET", &runs, Behaviour::Delay(Duration::from_millis(2_500)));
    let dir = tempfile::tempdir().expect("tempdir");
    let key = key_file(dir.path());
    let run = forge_env(
        &f,
        &[
            "ci-status",
            REPO,
            HEAD,
            "--app-id",
            "4242",
            "--app-key",
            &key,
            "--installation-id",
            "99",
            "--attempt-timeout",
            "15s",
            "--json",
        ],
        &[],
    );
    let log = f.log_text();
    assert_eq!(run.code, 0, "{run:?}\n{log}");
    let doc = run.json();
    assert_eq!(doc["attempts"].as_array().map(Vec::len), Some(1), "{doc}");
    assert_eq!(doc["refused_credentials"], serde_json::json!([]));
    assert_eq!(
        doc["value"]["check_runs"].as_array().map(Vec::len),
        Some(250)
    );
    assert!(
        f.log().iter().all(|e| e.event != Event::Answered(401)),
        "no request refused:\n{log}"
    );
    let pages = f.arrivals(Endpoint::ListCheckRuns);
    assert_eq!(pages.len(), 3, "{log}");
    assert!(pages.iter().all(|p| p.token.is_some()), "{log}");
    assert_eq!(pages[0].token, pages[1].token, "{log}");
    assert_ne!(
        pages[1].token, pages[2].token,
        "a new token for page 3:\n{log}"
    );
    assert_eq!(f.minted_fingerprints().len(), 2, "{log}");
    assert!(!run.stdout.contains("ghs_") && !run.stderr.contains("ghs_"));
}

#[test]
fn a_forge_call_sends_gh_token_else_github_token() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD).to_string();
    let get = ["get-pull", REPO, n.as_str(), "--json"];
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Env, Option<&str>); 4] = [
        (&[("GH_TOKEN", "gh-tok")], Some("gh-tok")),
        (&[("GITHUB_TOKEN", "github-tok")], Some("github-tok")),
        (
            &[("GH_TOKEN", "gh-tok"), ("GITHUB_TOKEN", "github-tok")],
            Some("gh-tok"),
        ),
        (&[], None),
    ];
    for (env, sent) in cases {
        let before = f.all_arrivals().len();
        let run = forge_env(&f, &get, env);
        assert_eq!(run.code, 0, "{env:?}: {run:?}");
        let arrivals = f.all_arrivals();
        assert_eq!(arrivals.len(), before + 1, "{env:?}");
        assert_eq!(
            arrivals[before].token,
            sent.map(fingerprint),
            "{env:?}: the server saw another token"
        );
        for (_, v) in env {
            assert!(!run.stdout.contains(v) && !run.stderr.contains(v));
        }
    }
    // The call's own source comes first.
    let before = f.all_arrivals().len();
    let run = forge_env(
        &f,
        &["get-pull", REPO, &n, "--token-command", "echo cmd-tok"],
        &[("GH_TOKEN", "gh-tok")],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(f.all_arrivals()[before].token, Some(fingerprint("cmd-tok")));
}

#[test]
fn the_app_flags_incomplete_or_beside_a_token_command_are_exit_2_naming_the_flag() {
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--app-id", "1"], &["--app-key", "--installation-id"]),
        (
            &["--app-id", "1", "--app-key", "k.pem"],
            &["--installation-id"],
        ),
        (
            &["--installation-id", "7", "--app-key", "k.pem"],
            &["--app-id"],
        ),
        (&["--app-key", "k.pem"], &["--app-id", "--installation-id"]),
    ];
    for (flags, missing) in cases {
        let mut args = vec!["forge", "get-pull", REPO, "1"];
        args.extend_from_slice(flags);
        let run = sluice(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        let first = run.first_err_line();
        for m in missing {
            assert!(first.contains(m), "{args:?} names {m}: {first}");
        }
        assert!(run.stdout.is_empty(), "{run:?}");
    }
    let all = [
        "--app-id",
        "1",
        "--app-key",
        "k.pem",
        "--installation-id",
        "7",
    ];
    let mut args = vec!["forge", "get-pull", REPO, "1", "--token-command", "echo t"];
    args.extend_from_slice(&all);
    let run = sluice(&args);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("--token-command"), "{run:?}");
    // The key on the command line instead of its path.
    let mut args = vec!["forge", "get-pull", REPO, "1"];
    args.extend_from_slice(&["--app-id", "1", "--installation-id", "7", "--app-key"]);
    args.push("-----BEGIN RSA PRIVATE KEY-----\nMIIE");
    let run = sluice(&args);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("--app-key"), "{run:?}");
    assert!(!run.stderr.contains("MIIE"), "{run:?}");
    // --token-ttl keeps a token command's result: without one, exit 2.
    let run = sluice(&["forge", "get-pull", REPO, "1", "--token-ttl", "5m"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.first_err_line().contains("--token-ttl"), "{run:?}");
}

#[test]
fn an_app_key_that_cannot_be_read_is_a_local_error_and_nothing_is_sent() {
    let f = FakeForge::start().expect("fake forge");
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.pem").display().to_string();
    let run = forge_env(
        &f,
        &[
            "get-pull",
            REPO,
            "1",
            "--app-id",
            "4242",
            "--app-key",
            &missing,
            "--installation-id",
            "99",
            "--json",
        ],
        &[],
    );
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json()["result"], "local-error", "{run:?}");
    assert!(f.all_arrivals().is_empty(), "{}", f.log_text());
}

#[test]
fn token_ttl_keeps_the_token_commands_result_across_operations() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD).to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).expect("runtime dir");
    let count = dir.path().join("runs");
    let cmd = format!("echo run >> '{}'; echo ttl-tok", count.display());
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let env = [("XDG_RUNTIME_DIR", runtime.to_str().expect("utf-8"))];
    let call = |ttl: Option<&str>| {
        let mut args = vec!["get-pull", REPO, n.as_str(), "--token-command", &cmd];
        if let Some(t) = ttl {
            args.extend_from_slice(&["--token-ttl", t]);
        }
        let run = forge_env(&f, &args, &env);
        assert_eq!(run.code, 0, "{run:?}");
    };
    // Without a ttl: once per operation.
    call(None);
    call(None);
    assert_eq!(runs(), 2);
    // With one: once for both.
    call(Some("10m"));
    call(Some("10m"));
    assert_eq!(runs(), 3, "the kept token was used");
    let tokens: Vec<_> = f.all_arrivals().into_iter().map(|a| a.token).collect();
    assert!(tokens.iter().all(|t| *t == Some(fingerprint("ttl-tok"))));
    // Kept in a private file, never beside the command's text.
    let kept = std::fs::read_dir(runtime.join("sluice-remote"))
        .expect("the cache directory")
        .map(|e| e.expect("entry").path())
        .collect::<Vec<_>>();
    assert_eq!(kept.len(), 1, "{kept:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept[0])
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    // A kept token the remote refuses is dropped: the command runs again.
    f.set(
        Endpoint::GetPull,
        Behaviour::Token {
            valid: vec!["fresh-tok".into()],
        },
    );
    let run = forge_env(
        &f,
        &[
            "get-pull",
            REPO,
            &n,
            "--token-command",
            &cmd,
            "--token-ttl",
            "10m",
            "--json",
        ],
        &env,
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        runs(),
        4,
        "bought afresh after the refusal, not from the file"
    );
}

#[test]
fn a_refusal_of_the_same_credential_again_says_it_is_a_route_or_permission() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD).to_string();
    f.set(
        Endpoint::GetPull,
        Behaviour::Token {
            valid: vec!["another".into()],
        },
    );
    let run = forge_env(
        &f,
        &["get-pull", REPO, &n, "--json"],
        &[("GH_TOKEN", "same-tok")],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["stopped"], "credential-refused", "{doc}");
    assert_eq!(
        doc["refused_credentials"],
        serde_json::json!([fingerprint("same-tok")])
    );
    let cause = doc["attempts"][0]["cause"].as_str().unwrap_or_default();
    assert!(
        cause.contains(
            "the same credential was refused again: a missing route or permission, not an expired token"
        ),
        "{doc}"
    );
    assert_eq!(f.all_arrivals().len(), 1, "never sent again");
    let human = forge_env(&f, &["get-pull", REPO, &n], &[("GH_TOKEN", "same-tok")]);
    assert_eq!(human.code, 1, "{human:?}");
    assert!(
        human
            .stderr
            .contains("the same credential was refused again"),
        "{human:?}"
    );
}
