//! Credentials as git finds them, through the binary and beside git:
//! `GIT_ASKPASS`, a URL's user name kept beside `--token-command`.

use crate::common;

use common::*;
use sluice_testkit::{http_backend, repo, HttpBackend};

const PASSWORD: &str = "pw-5d1c9e-askpass";

fn backend(w: &World, user: &str) -> HttpBackend {
    assert!(
        http_backend::find_lighttpd().is_some(),
        "lighttpd is not installed (apt-get install -y lighttpd; scripts/test.sh does)"
    );
    HttpBackend::start_with_auth(&w.path("srv"), user, PASSWORD).expect("lighttpd starts")
}

#[test]
fn a_push_goes_through_git_askpass_as_gits_does() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let http = backend(&w, "alice");
    let local = w.clone_bare("local.git");
    let askpass = w.path("askpass.sh");
    std::fs::write(
        &askpass,
        format!("#!/bin/sh\ncase \"$1\" in Username*) echo alice;; *) echo {PASSWORD};; esac\n"),
    )
    .expect("askpass written");
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let env = [("GIT_ASKPASS", askpass.to_str().expect("utf-8"))];
    let url = http.url("small.git");
    let tip = repo::commit_on(&local, "main", "through askpass");
    let run = run_in(
        env!("CARGO_BIN_EXE_sluice-remote"),
        &local,
        &["--json", "push", &url, "main:refs/heads/main"],
        &env,
    );
    assert_eq!(run.code, 0, "{run:?}\n{}", http.error_log());
    assert_eq!(run.json()["attempts"].as_array().map(Vec::len), Some(1));
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
    // git, given the same, pushes the same way.
    let tip = repo::commit_on(&local, "main", "git through askpass");
    let git = run_in(
        "git",
        &local,
        &["push", "-q", &url, "main:refs/heads/main"],
        &env,
    );
    assert_eq!(git.code, 0, "{git:?}");
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
    // Without it, neither has a credential, and neither prompts.
    let tip = repo::commit_on(&local, "main", "no askpass");
    let run = sl_in(&local, &["push", &url, "main:refs/heads/main"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("401"), "{run:?}");
    assert_ne!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
}

#[test]
fn a_user_name_in_the_url_is_kept_beside_the_token_command() {
    let w = World::new();
    let http = backend(&w, "oauth2");
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "as oauth2");
    let url = http.url("small.git").replace("http://", "http://oauth2@");
    let token = w.path("token.txt");
    std::fs::write(&token, format!("{PASSWORD}\n")).expect("token file");
    let cmd = format!("cat '{}'", p(&token));
    let run = sl_in(
        &local,
        &[
            "--json",
            "--token-command",
            &cmd,
            "push",
            &url,
            "main:refs/heads/main",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}\n{}", http.error_log());
    let doc = run.json();
    assert_eq!(doc["operation"]["remote"], http.url("small.git").as_str());
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
    // git, asked through a helper for the same password, goes as the same
    // user: the URL's.
    let tip = repo::commit_on(&local, "main", "git as oauth2");
    let helper = format!("!f() {{ echo password={PASSWORD}; }}; f");
    let git = git_in(
        &local,
        &[
            "-c",
            &format!("credential.helper={helper}"),
            "push",
            "-q",
            &url,
            "main:refs/heads/main",
        ],
    );
    assert_eq!(git.code, 0, "{git:?}");
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
}

#[test]
fn a_store_helper_and_an_extra_header_push_as_gits_do() {
    let w = World::new();
    let http = backend(&w, "alice");
    let local = w.clone_bare("local.git");
    let url = http.url("small.git");
    let host = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .expect("host");
    let store = w.path("store");
    std::fs::write(&store, format!("http://alice:{PASSWORD}@{host}\n")).expect("store");
    repo::set_config(
        &local,
        "credential.helper",
        &format!("store --file {}", p(&store)),
    );
    let push_both = |what: &str| {
        for program in [env!("CARGO_BIN_EXE_sluice-remote"), "git"] {
            let tip = repo::commit_on(&local, "main", &format!("{program} {what}"));
            let run = run_in(
                program,
                &local,
                &["push", &url, "main:refs/heads/main"],
                &[],
            );
            assert_eq!(run.code, 0, "{program} {what}: {run:?}");
            assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
        }
    };
    push_both("through the store");
    repo::git(&local, &["config", "--unset", "credential.helper"]);
    let encoded = std::process::Command::new("sh")
        .args(["-c", &format!("printf %s 'alice:{PASSWORD}' | base64")])
        .output()
        .expect("base64 runs");
    let encoded = String::from_utf8(encoded.stdout).expect("utf-8");
    repo::set_config(
        &local,
        "http.extraHeader",
        &format!("Authorization: Basic {}", encoded.trim()),
    );
    push_both("with an extra header");
}
