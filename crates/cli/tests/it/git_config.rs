//! git's configuration read as git reads it, beside git: `http.sslCAInfo`
//! for ls-refs too, `http.<url>.*` matched to the URL called,
//! `http.sslVerify=false` and `GIT_SSL_NO_VERIFY` with a warning, and
//! `url.<base>.insteadOf` / `pushInsteadOf` applied to a typed URL.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use sluice_testkit::{repo, HttpBackend, RepoBuilder, ServerCert, TestPki};

const PROXY_VARS: [&str; 8] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// `program args...` run in `dir`, with no CA, proxy or TLS variable but
/// `vars`.
fn run_in(program: &str, dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("SSL_CERT_FILE")
        .env_remove("GIT_SSL_CAINFO")
        .env_remove("GIT_SSL_NO_VERIFY")
        .env("GIT_CEILING_DIRECTORIES", dir.parent().expect("a parent"))
        .stdin(Stdio::null());
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ours(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Run {
    run_in(env!("CARGO_BIN_EXE_sluice-remote"), dir, args, vars)
}

fn git(dir: &Path, args: &[&str], vars: &[(&str, &str)]) -> Run {
    run_in("git", dir, args, vars)
}

/// `git config --unset-all key` in `dir` (absent: nothing to do).
fn unset(dir: &Path, key: &str) {
    let _ = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["config", "--unset-all", key])
        .status();
}

const QUICK: [&str; 5] = [
    "--deadline",
    "10s",
    "--attempt-timeout",
    "5s",
    "--max-attempts=1",
];

#[test]
fn ls_refs_fetch_and_push_read_http_and_http_url_settings_as_git_matches_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new().expect("pki");
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(&srv).expect("srv");
    RepoBuilder::new()
        .branch("main", 3)
        .head("main")
        .build(&srv.join("r.git"))
        .expect("fixture builds");
    HttpBackend::enable_anonymous_push(&srv.join("r.git")).expect("push allowed");
    let server = HttpBackend::start_https(&srv, &pki.server(ServerCert::Good))
        .expect("lighttpd with mod_openssl starts");
    let url = server.url("r.git");
    let base = format!("https://{}", server.addr());
    let ca = pki.ca_file().display().to_string();
    // A work tree the commands run in: its config is what they read.
    let work = dir.path().join("work");
    repo::init_work(&work).expect("init");
    let ls = |vars: &[(&str, &str)]| {
        let mut args = vec!["ls-refs", url.as_str()];
        args.extend(QUICK);
        ours(&work, &args, vars)
    };
    let git_ls = |vars: &[(&str, &str)]| git(&work, &["ls-remote", &url], vars);

    // Nothing configured: untrusted, for git and for ls-refs.
    assert_ne!(git_ls(&[]).code, 0);
    let r = ls(&[]);
    assert_eq!(r.code, 1, "{r:?}");

    // http.sslCAInfo: ls-refs reads it, as fetch and push do.
    repo::set_config(&work, "http.sslCAInfo", &ca);
    assert_eq!(git_ls(&[]).code, 0);
    let r = ls(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("\trefs/heads/main\n"), "{r:?}");
    unset(&work, "http.sslCAInfo");

    // http.<url>.sslCAInfo: for this server (its scheme, host and port, a
    // prefix of the path at a `/`), not for another port, path or scheme.
    for (scope, applies) in [
        (base.clone(), true),
        (format!("{base}/git"), true),
        (format!("{base}/git/r.git"), true),
        (format!("{base}/gi"), false),
        ("https://127.0.0.1:1".to_string(), false),
        (format!("http://{}", server.addr()), false),
        (format!("https://*.0.0.1:{}", server.addr().port()), true),
        (
            format!("https://*.127.0.0.1:{}", server.addr().port()),
            false,
        ),
    ] {
        let key = format!("http.{scope}.sslCAInfo");
        repo::set_config(&work, &key, &ca);
        let g = git_ls(&[]);
        assert_eq!(g.code == 0, applies, "{scope}: git {g:?}");
        let r = ls(&[]);
        assert_eq!(r.code == 0, applies, "{scope}: {r:?}");
        unset(&work, &key);
    }
    // The most specific wins: a wrong CA for the host, the right one for
    // the repository's path.
    let other = pki.other_ca_file().display().to_string();
    repo::set_config(&work, &format!("http.{base}.sslCAInfo"), &other);
    repo::set_config(&work, &format!("http.{base}/git/.sslCAInfo"), &ca);
    assert_eq!(git_ls(&[]).code, 0);
    assert_eq!(ls(&[]).code, 0);
    // ... and GIT_SSL_CAINFO wins over every one of them.
    assert_ne!(git_ls(&[("GIT_SSL_CAINFO", &other)]).code, 0);
    assert_eq!(ls(&[("GIT_SSL_CAINFO", &other)]).code, 1);

    // fetch and push read the same settings from --repo's configuration.
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let fetch = ours(
        &work,
        &[&["fetch", &url, spec][..], &QUICK[..]].concat(),
        &[],
    );
    assert_eq!(fetch.code, 0, "{fetch:?}");
    let pushed = ours(
        &work,
        &[
            &["push", &url, "refs/remotes/origin/main:refs/heads/copy"][..],
            &QUICK[..],
        ]
        .concat(),
        &[],
    );
    assert_eq!(pushed.code, 0, "{pushed:?}");
    assert_eq!(
        repo::rev_parse(&srv.join("r.git"), "refs/heads/copy"),
        repo::rev_parse(&work, "refs/remotes/origin/main")
    );
    unset(&work, &format!("http.{base}.sslCAInfo"));
    unset(&work, &format!("http.{base}/git/.sslCAInfo"));

    // http.<url>.proxy: a dead proxy scoped to this server is used (and
    // named); scoped to another server, it is not.
    repo::set_config(&work, "http.sslCAInfo", &ca);
    let dead = dead_port();
    let key = format!("http.{base}/git/r.git.proxy");
    repo::set_config(&work, &key, &format!("http://127.0.0.1:{dead}"));
    let r = ls(&[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{dead}")),
        "the proxy is named: {r:?}"
    );
    unset(&work, &key);
    let key = "http.https://127.0.0.1:1.proxy";
    repo::set_config(&work, key, &format!("http://127.0.0.1:{dead}"));
    assert_eq!(ls(&[]).code, 0);
    unset(&work, key);
    unset(&work, "http.sslCAInfo");

    // http.sslVerify=false (URL-scoped here) and GIT_SSL_NO_VERIFY: not
    // checked, and said on stderr.
    repo::set_config(&work, &format!("http.{base}/git.sslVerify"), "false");
    assert_eq!(git_ls(&[]).code, 0);
    let r = ls(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains("sslVerify"),
        "{r:?}"
    );
    unset(&work, &format!("http.{base}/git.sslVerify"));
    assert_eq!(ls(&[]).code, 1);
    let r = ls(&[("GIT_SSL_NO_VERIFY", "1")]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("GIT_SSL_NO_VERIFY"), "{r:?}");
}

#[test]
fn insteadof_and_pushinsteadof_rewrite_a_typed_url_as_git_does() {
    let w = World::new();
    let work = w.path("work");
    repo::init_work(&work).expect("init");
    // `gd:` stands for the daemon; a push to it goes to a local bare
    // repository instead.
    let daemon_base = w.daemon.url("");
    let push_dir = w.clone_bare("push-target.git");
    repo::set_config(&work, &format!("url.{daemon_base}.insteadOf"), "gd:");
    repo::set_config(
        &work,
        &format!("url.{}.pushInsteadOf", push_dir.display()),
        "gd:small.git",
    );
    let typed = "gd:small.git";

    // ls-refs: as git ls-remote.
    let g = git(&work, &["ls-remote", typed], &[]);
    assert_eq!(g.code, 0, "{g:?}");
    let r = ours(&work, &["ls-refs", typed], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, g.stdout);

    // fetch: the same refs as git's.
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let by_git = w.path("by-git");
    repo::init_work(&by_git).expect("init");
    let cfg = std::fs::read_to_string(work.join(".git/config")).expect("config");
    std::fs::write(by_git.join(".git/config"), &cfg).expect("same config");
    let g = git(&by_git, &["fetch", typed, spec], &[]);
    assert_eq!(g.code, 0, "{g:?}");
    let r = ours(&work, &["fetch", typed, spec], &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        repo::rev_parse(&work, "refs/remotes/origin/main"),
        repo::rev_parse(&by_git, "refs/remotes/origin/main")
    );
    assert!(repo::rev_parse(&work, "refs/remotes/origin/main").is_some());

    // push: pushInsteadOf first, so the push lands in the local repository
    // and the daemon's is untouched.
    let r = ours(
        &work,
        &["push", typed, "refs/remotes/origin/main:refs/heads/copied"],
        &[],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        repo::rev_parse(&push_dir, "refs/heads/copied"),
        repo::rev_parse(&work, "refs/remotes/origin/main")
    );
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/copied"), None);
}

#[test]
fn http_settings_and_tls_variables_are_not_read_for_a_git_url_as_git_reads_none() {
    // A CA file nobody can read, in the repository's configuration and in
    // the environment: git fetches over git:// without looking at either,
    // and so does this client; over https the same file is bad input.
    let w = World::new();
    let work = w.path("work");
    repo::init_work(&work).expect("init");
    let missing = w.path("no-such-ca.pem").display().to_string();
    repo::set_config(&work, "http.sslCAInfo", &missing);
    let vars = [("GIT_SSL_CAINFO", missing.as_str())];
    let url = w.url();
    let spec = "+refs/heads/*:refs/remotes/origin/*";

    let g = git(&work, &["fetch", &url, spec], &vars);
    assert_eq!(g.code, 0, "{g:?}");
    let r = ours(&work, &["ls-refs", &url], &vars);
    assert_eq!(r.code, 0, "{r:?}");
    let r = ours(&work, &["fetch", &url, spec], &vars);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(repo::rev_parse(&work, "refs/remotes/origin/main").is_some());
    let r = ours(
        &work,
        &["push", &url, "refs/remotes/origin/main:refs/heads/main"],
        &vars,
    );
    assert_eq!(r.code, 0, "{r:?}");

    let https = format!("https://127.0.0.1:{}/r.git", dead_port());
    let r = ours(&work, &["ls-refs", &https], &vars);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("GIT_SSL_CAINFO"), "{r:?}");
}
