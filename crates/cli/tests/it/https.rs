//! The CLI over https: `--ca-file` adds a root to the platform's,
//! `SSL_CERT_FILE` replaces the platform's, and a certificate error is
//! answered (exit 1) in one attempt, saying which.

use std::process::{Command, Stdio};

use sluice_testkit::{HttpBackend, RepoBuilder, ServerCert, TestPki, Tinyproxy};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

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

/// `sluice-remote args...` with `SSL_CERT_FILE` set to `cert_file` (or
/// removed) and no proxy variable.
fn sluice(args: &[&str], cert_file: Option<&std::path::Path>) -> Run {
    sluice_env(args, cert_file, &[])
}

/// [`sluice`] with these variables set (every other proxy variable removed).
fn sluice_env(args: &[&str], cert_file: Option<&std::path::Path>, vars: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice-remote"));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("SSL_CERT_FILE")
        .env_remove("GIT_SSL_CAINFO")
        .stdin(Stdio::null());
    for v in PROXY_VARS.iter().chain(&crate::common::FORGE_TOKEN_VARS) {
        cmd.env_remove(v);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    if let Some(f) = cert_file {
        cmd.env("SSL_CERT_FILE", f);
    }
    let out = cmd.output().expect("the binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn serve(dir: &std::path::Path, pki: &TestPki, cert: ServerCert) -> HttpBackend {
    let srv = dir.join("srv");
    std::fs::create_dir_all(&srv).expect("srv dir");
    if !srv.join("r.git").exists() {
        RepoBuilder::new()
            .branch("main", 3)
            .head("main")
            .build(&srv.join("r.git"))
            .expect("fixture builds");
    }
    HttpBackend::start_https(&srv, &pki.server(cert)).expect("lighttpd with mod_openssl starts")
}

const QUICK: [&str; 4] = ["--deadline", "10s", "--attempt-timeout", "5s"];

#[test]
fn the_ca_file_adds_a_root_and_ssl_cert_file_replaces_the_platforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new().expect("pki");
    let server = serve(dir.path(), &pki, ServerCert::Good);
    let url = server.url("r.git");
    let ca_path = pki.ca_file();
    let ca = ca_path.to_str().expect("utf-8 path");
    let ls = |extra: &[&str], cert_file| {
        let mut args = vec!["ls-refs", url.as_str()];
        args.extend(QUICK);
        args.extend(extra);
        sluice(&args, cert_file)
    };

    let r = ls(&[], None);
    assert_eq!(
        r.code, 1,
        "the platform does not trust the test CA: {}",
        r.stderr
    );
    assert!(r.stderr.contains("not trusted"), "{}", r.stderr);

    let r = ls(&["--ca-file", ca], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("refs/heads/main"), "{}", r.stdout);

    let r = ls(&[], Some(&ca_path));
    assert_eq!(r.code, 0, "SSL_CERT_FILE names the test CA: {}", r.stderr);

    // SSL_CERT_FILE replaces the platform's roots; --ca-file adds to it.
    let other = pki.other_ca_file();
    let r = ls(&[], Some(&other));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let r = ls(&["--ca-file", ca], Some(&other));
    assert_eq!(r.code, 0, "{}", r.stderr);

    // An unreadable SSL_CERT_FILE is local trouble, never the remote's.
    let r = ls(&["--json"], Some(&dir.path().join("absent.pem")));
    assert_eq!(r.code, 5, "{} {}", r.stdout, r.stderr);
}

#[test]
fn an_expired_certificate_is_answered_in_one_attempt_in_the_json_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new().expect("pki");
    let server = serve(dir.path(), &pki, ServerCert::Expired);
    let url = server.url("r.git");
    let ca = pki.ca_file();
    let mut args = vec![
        "ls-refs",
        url.as_str(),
        "--json",
        "--max-attempts",
        "3",
        "--ca-file",
        ca.to_str().expect("utf-8 path"),
    ];
    args.extend(QUICK);
    let r = sluice(&args, None);
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    assert_eq!(doc["result"], "answered");
    let attempts = doc["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{doc}");
    assert_eq!(attempts[0]["class"], "answered");
    assert_eq!(attempts[0]["phase"], "connect");
    let cause = attempts[0]["cause"].as_str().unwrap_or_default();
    assert!(cause.contains("expired"), "{cause}");
}

#[test]
fn a_ca_file_that_cannot_be_read_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let absent = dir.path().join("absent.pem");
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").expect("write");
    for f in [&absent, &not_pem] {
        let r = sluice(
            &[
                "ls-refs",
                "https://127.0.0.1:9/r.git",
                "--ca-file",
                f.to_str().expect("utf-8 path"),
            ],
            None,
        );
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stdout.is_empty());
        let first = r.stderr.lines().next().unwrap_or("");
        assert!(first.contains("--ca-file"), "{first}");
    }
    let r = sluice(
        &[
            "ls-refs",
            "https://127.0.0.1:9/r.git",
            "--proxy",
            "http://127.0.0.1:9",
            "--no-proxy",
        ],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn https_proxy_from_the_environment_is_used_named_and_bypassed_as_curl_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new().expect("pki");
    let server = serve(dir.path(), &pki, ServerCert::Good);
    let url = server.url("r.git");
    let ca_path = pki.ca_file();
    let ca = ca_path.to_str().expect("utf-8 path");
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let dead_proxy = format!("http://user:proxy-secret@{dead}");
    let ls = |extra: &[&str], vars: &[(&str, &str)]| {
        let mut args = vec![
            "ls-refs",
            url.as_str(),
            "--ca-file",
            ca,
            "--max-attempts",
            "2",
        ];
        args.extend(QUICK);
        args.extend(extra);
        sluice_env(&args, None, vars)
    };

    // HTTPS_PROXY is read: a dead proxy is unjudged (exit 3), named
    // without its user info.
    let r = ls(&[], &[("HTTPS_PROXY", &dead_proxy)]);
    assert_eq!(r.code, 3, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!("through proxy http://{dead}")),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("proxy-secret"), "{}", r.stderr);
    assert!(!r.stdout.contains("proxy-secret"), "{}", r.stdout);

    // NO_PROXY naming the host, and --no-proxy, go direct.
    let r = ls(
        &[],
        &[("HTTPS_PROXY", &dead_proxy), ("NO_PROXY", "127.0.0.1")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ls(&["--no-proxy"], &[("HTTPS_PROXY", &dead_proxy)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // HTTP_PROXY never applies to https.
    let r = ls(&[], &[("HTTP_PROXY", &dead_proxy)]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // --proxy overrides the environment; the tunnel goes through it.
    let proxy = Tinyproxy::start().expect("tinyproxy starts");
    let r = ls(&["--proxy", &proxy.url()], &[("HTTPS_PROXY", &dead_proxy)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let connect = format!("CONNECT {} ", server.addr());
    assert!(
        proxy.requests().iter().any(|r| r.starts_with(&connect)),
        "{:?}",
        proxy.requests()
    );
}

#[test]
fn the_repository_config_gives_http_ssl_ca_info_and_http_proxy_as_git_reads_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = TestPki::new().expect("pki");
    let server = serve(dir.path(), &pki, ServerCert::Good);
    let url = server.url("r.git");
    let local = dir.path().join("local.git");
    sluice_testkit::repo::init_bare(&local).expect("init");
    let set = |k: &str, v: &str| sluice_testkit::repo::set_config(&local, k, v);
    let unset = |k: &str| {
        let _ = Command::new("git")
            .arg("-C")
            .arg(&local)
            .args(["config", "--unset", k])
            .status();
    };
    let spec = "+refs/heads/*:refs/remotes/origin/*";
    let fetch = |extra: &[&str], vars: &[(&str, &str)]| {
        let mut args = vec!["fetch", url.as_str(), spec, "--repo"];
        let repo = local.to_str().expect("utf-8 path").to_string();
        let mut owned = args.drain(..).map(str::to_string).collect::<Vec<_>>();
        owned.push(repo);
        owned.extend(QUICK.iter().map(|s| s.to_string()));
        owned.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        sluice_env(&refs, None, vars)
    };

    // Untrusted without configuration; http.sslCAInfo naming the test CA
    // replaces the platform's roots, and it is trusted.
    let r = fetch(&[], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    set("http.sslCAInfo", pki.ca_file().to_str().expect("utf-8"));
    let r = fetch(&[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // ... and it replaces SSL_CERT_FILE too, as in git; GIT_SSL_CAINFO
    // wins over it.
    let other = pki.other_ca_file();
    let other = other.to_str().expect("utf-8");
    let r = fetch(&[], &[("SSL_CERT_FILE", other)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = fetch(&[], &[("GIT_SSL_CAINFO", other)]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // A roots file that cannot be read is bad input naming the key.
    set(
        "http.sslCAInfo",
        dir.path().join("absent.pem").to_str().expect("utf-8"),
    );
    let r = fetch(&[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .lines()
            .next()
            .unwrap_or("")
            .contains("http.sslCAInfo"),
        "{}",
        r.stderr
    );
    set("http.sslCAInfo", pki.ca_file().to_str().expect("utf-8"));

    // http.proxy: used, even over a working HTTPS_PROXY (it wins over the
    // environment, as in git); a dead one is named; --no-proxy skips it.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let proxy = Tinyproxy::start().expect("tinyproxy starts");
    set("http.proxy", &format!("http://{dead}"));
    let r = fetch(&["--max-attempts", "1"], &[("HTTPS_PROXY", &proxy.url())]);
    assert_eq!(r.code, 3, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!("through proxy http://{dead}")),
        "{}",
        r.stderr
    );
    let r = fetch(&["--no-proxy"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    set("http.proxy", &proxy.url());
    let r = fetch(&[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let connect = format!("CONNECT {} ", server.addr());
    assert!(
        proxy.requests().iter().any(|r| r.starts_with(&connect)),
        "{:?}",
        proxy.requests()
    );
    unset("http.proxy");
}
