//! The token given by `--token-command` (and user info in a URL) is used
//! but never appears in stdout, stderr or the ledger — not even with `--trace`.
//! The token is kept in a file the command `cat`s, so it is on no command
//! line: anything that shows it leaked it.

use crate::common;

use common::*;
use sluice_policy::fingerprint;
use sluice_testkit::{http_backend, repo, HttpBackend};

const TOKEN: &str = "tok-3f9a7c1e5b-SECRET";

/// The token file and the command that prints it.
fn token_command(w: &World, token: &str) -> String {
    let file = w.path("token.txt");
    std::fs::write(&file, format!("{token}\n")).expect("token file");
    format!("cat '{}'", p(&file))
}

fn assert_hidden(token: &str, run: &Run, ledger: Option<&std::path::Path>) {
    assert!(
        !run.stdout.contains(token),
        "token on stdout: {}",
        run.stdout
    );
    assert!(
        !run.stderr.contains(token),
        "token on stderr: {}",
        run.stderr
    );
    if let Some(l) = ledger {
        // The SQLite file and its write-ahead log (where the last commits
        // live until a checkpoint), searched as bytes.
        let mut bytes = std::fs::read(l).expect("the ledger was written");
        let mut wal = l.as_os_str().to_owned();
        wal.push("-wal");
        if let Ok(w) = std::fs::read(&wal) {
            bytes.extend_from_slice(&w);
        }
        let t = token.as_bytes();
        assert!(
            !bytes.windows(t.len()).any(|w| w == t),
            "token in the ledger"
        );
    }
}

/// lighttpd + git http-backend requiring `x-access-token:<TOKEN>` to push,
/// serving a copy of the small fixture. A missing lighttpd fails the test
/// (`scripts/test.sh` installs it): nothing is skipped.
fn backend(w: &World) -> HttpBackend {
    assert!(
        http_backend::find_lighttpd().is_some(),
        "lighttpd is not installed (apt-get install -y lighttpd; scripts/test.sh does)"
    );
    HttpBackend::start_with_auth(&w.path("srv"), "x-access-token", TOKEN).expect("lighttpd starts")
}

#[test]
fn a_token_bought_by_the_command_pushes_over_http_and_never_shows_even_with_v() {
    let w = World::new();
    let http = backend(&w);
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "pushed with a token");
    let ledger = w.path("ledger.db");
    let cmd = token_command(&w, TOKEN);
    let url = http.url("small.git");
    let run = sluice(&[
        "--trace",
        "--trace",
        "--metrics",
        "--json",
        "--ledger",
        &p(&ledger),
        "--token-command",
        &cmd,
        "push",
        &url,
        "main:refs/heads/main",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 0, "{run:?}\n{}", http.error_log());
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
    assert!(!run.stderr.is_empty(), "--trace traces to stderr");
    assert_hidden(TOKEN, &run, Some(&ledger));

    // The human form, a read, with tracing.
    let run = sluice(&[
        "--trace",
        "--metrics",
        "--token-command",
        &cmd,
        "ls-refs",
        &url,
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_hidden(TOKEN, &run, None);
    // `--metrics` sums up the run's metrics at exit.
    let summary = run.stderr.split("metrics:\n").nth(1).unwrap_or_default();
    assert!(
        summary
            .lines()
            .any(|l| l == r#"sluice_remote_operations_total{kind="ls-refs",result="succeeded"} 1"#),
        "{}",
        run.stderr
    );
}

#[test]
fn a_refused_token_stands_and_only_its_fingerprint_is_shown() {
    let w = World::new();
    let http = backend(&w);
    let wrong = "tok-wrong-0000-SECRET";
    let local = w.clone_bare("local.git");
    repo::commit_on(&local, "main", "refused");
    let ledger = w.path("ledger.db");
    let cmd = token_command(&w, wrong);
    let run = sluice(&[
        "--trace",
        "--metrics",
        "--json",
        "--settle",
        "0s",
        "--ledger",
        &p(&ledger),
        "--token-command",
        &cmd,
        "push",
        &http.url("small.git"),
        "main:refs/heads/main",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    check_document(&doc, "push", "write");
    assert_eq!(doc["stopped"], "credential-refused", "{doc}");
    assert_eq!(doc["refused_credentials"][0], fingerprint(wrong).as_str());
    assert_hidden(wrong, &run, Some(&ledger));
    // Logged once as it stands, and counted in `--metrics`' summary by host.
    assert_eq!(
        run.stderr.matches("credential refusal stands").count(),
        1,
        "{}",
        run.stderr
    );
    let summary = run.stderr.split("metrics:\n").nth(1).unwrap_or_default();
    let host = http
        .url("")
        .split('/')
        .nth(2)
        .unwrap_or_default()
        .to_string();
    for line in [
        r#"sluice_remote_operations_total{kind="push",result="answered"} 1"#.to_string(),
        format!(r#"sluice_remote_credential_refusals_total{{host="{host}"}} 1"#),
    ] {
        assert!(summary.lines().any(|l| l == line), "{line}\n{}", run.stderr);
    }
}

#[test]
fn user_info_in_an_http_url_is_a_credential_and_appears_in_no_output() {
    let w = World::new();
    let http = backend(&w);
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "pushed with user info");
    let url = http.url_with_credentials("small.git");
    assert!(url.contains(TOKEN));
    let run = sluice(&[
        "--trace",
        "--metrics",
        "--json",
        "push",
        &url,
        "main:refs/heads/main",
        "--repo",
        &p(&local),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["operation"]["remote"], http.url("small.git"));
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
    assert_hidden(TOKEN, &run, None);
}

#[test]
fn the_forge_gets_the_token_as_a_bearer_and_no_output_shows_it() {
    let w = World::new();
    let server = TinyHttp::start(200, "{}");
    let ledger = w.path("ledger.db");
    let cmd = token_command(&w, TOKEN);
    let run = sluice(&[
        "--trace",
        "--trace",
        "--metrics",
        "--json",
        "--ledger",
        &p(&ledger),
        "--token-command",
        &cmd,
        "http",
        "get",
        &server.url("/api"),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let heads = server.heads.lock().expect("heads").clone();
    assert!(
        heads.iter().any(|h| h
            .lines()
            .any(|l| l.eq_ignore_ascii_case(&format!("authorization: Bearer {TOKEN}")))),
        "the token was not sent: {heads:?}"
    );
    assert_hidden(TOKEN, &run, Some(&ledger));
}

#[test]
fn a_token_bought_for_a_dead_http_remote_never_shows() {
    let w = World::new();
    let marker = w.path("bought");
    let file = w.path("token.txt");
    std::fs::write(&file, TOKEN).expect("token file");
    let cmd = format!("touch '{}'; cat '{}'", p(&marker), p(&file));
    let ledger = w.path("ledger.db");
    let url = format!("http://127.0.0.1:{}/git/small.git", dead_port());
    let run = sluice(&[
        "--trace",
        "--trace",
        "--metrics",
        "--json",
        "--deadline",
        "1s",
        "--ledger",
        &p(&ledger),
        "--token-command",
        &cmd,
        "ls-refs",
        &url,
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(marker.exists(), "the token command ran");
    assert_hidden(TOKEN, &run, Some(&ledger));
}
