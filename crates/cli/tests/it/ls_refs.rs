//! `ls-refs` beside `git ls-remote` on the same remote: a configured
//! remote's name, patterns matched as git matches them, `--heads` and
//! `--tags` asked of the remote as prefixes, `--exit-code`, and the https
//! settings git's configuration gives (as fetch and push read them).

use std::path::Path;

use crate::common;

use common::*;
use sluice_testkit::{repo, HttpBackend, ServerCert, TestPki};

/// A clone of the served repository (`origin` is the daemon's URL).
fn clone(w: &World, name: &str) -> std::path::PathBuf {
    clone_of(&w.url(), &w.path(name))
}

#[test]
fn ls_refs_of_a_remote_by_name_with_patterns_heads_and_tags_prints_what_git_ls_remote_prints() {
    let w = World::new();
    // Refs a tail pattern finds more than once, and one it must not.
    let srv = w.server();
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    repo::git(&srv, &["update-ref", "refs/remotes/mirror/main", &main]);
    repo::git(&srv, &["update-ref", "refs/heads/notmain", &main]);
    let b = clone(&w, "b");
    let cases: &[&[&str]] = &[
        &["origin"],
        &["origin", "main"],
        &["origin", "HEAD"],
        &["origin", "v1.0"],
        &["origin", "v1*"],
        &["origin", "heads/*"],
        &["origin", "main", "light"],
        &["origin", "ma?n"],
        &["--heads", "origin"],
        &["--tags", "origin"],
        &["--heads", "--tags", "origin"],
        &["--heads", "origin", "main"],
        &["--tags", "origin", "main"],
        &["--exit-code", "origin", "main"],
        &["--exit-code", "origin", "no-such-ref"],
        &["--exit-code", "--heads", "origin", "v1.0"],
    ];
    for args in cases {
        let git = run_in("git", &b, &[&["ls-remote"], *args].concat(), &[]);
        let ours = sl_in(&b, &[&["ls-refs"], *args].concat());
        assert_eq!(
            ours.stdout, git.stdout,
            "{args:?}\ngit: {git:?}\nours: {ours:?}"
        );
        assert_eq!(
            ours.code, git.code,
            "{args:?}\ngit: {git:?}\nours: {ours:?}"
        );
        if ours.code == 2 {
            // Nothing matched: nothing but the exit code says so.
            assert_eq!(ours.stderr, "", "{args:?}");
        }
    }
    // The patterns looked for something: the lists are not all empty.
    let some = sl_in(&b, &["ls-refs", "origin", "main"]);
    assert_eq!(some.stdout.lines().count(), 2, "{some:?}");

    // With --json: the document, its value empty, exit 2, stderr empty.
    let none = sl_in(
        &b,
        &["ls-refs", "origin", "nothing", "--exit-code", "--json"],
    );
    assert_eq!(none.code, 2, "{none:?}");
    assert_eq!(none.stderr, "", "{none:?}");
    let doc = none.json();
    check_document(&doc, "ls-refs", "read");
    assert_eq!(doc["result"], "succeeded");
    assert_eq!(doc["value"], serde_json::json!([]), "{doc}");
    // The same name read as fetch reads it: the remote's URL is called.
    let found = sl_in(&b, &["ls-refs", "origin", "main", "--json"]).json();
    assert_eq!(found["operation"]["remote"], w.url(), "{found}");
    let names: Vec<&str> = found["value"]
        .as_array()
        .expect("refs")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["refs/heads/main", "refs/remotes/mirror/main"]);
}

#[test]
fn heads_and_tags_are_asked_of_the_remote_as_prefixes() {
    let w = World::new();
    let url = w.proxied();
    let bytes = |args: &[&str]| {
        let before = w.proxy.connections().len();
        let run = sluice(&[&["ls-refs", url.as_str()], args].concat());
        assert_eq!(run.code, 0, "{run:?}");
        let conns = w.proxy.connections();
        assert_eq!(conns.len(), before + 1, "one connection");
        let last = conns.last().expect("a connection").clone();
        assert_eq!(last.protocol_version, Some(2), "the daemon speaks v2");
        (last.bytes_server_to_client, run.stdout)
    };
    let (all, all_text) = bytes(&[]);
    let (heads, heads_text) = bytes(&["--heads"]);
    let (tags, tags_text) = bytes(&["--tags"]);
    // Filtered by the server: fewer bytes came back than for everything.
    assert!(
        heads < all && tags < all,
        "all {all}, heads {heads}, tags {tags}"
    );
    assert!(heads_text.lines().all(|l| l
        .split('\t')
        .nth(1)
        .is_some_and(|n| n.starts_with("refs/heads/"))));
    assert!(tags_text.lines().all(|l| l
        .split('\t')
        .nth(1)
        .is_some_and(|n| n.starts_with("refs/tags/"))));
    assert!(all_text.lines().count() > heads_text.lines().count() + tags_text.lines().count());
}

#[test]
fn ls_refs_reads_http_ssl_ca_info_and_git_ssl_cainfo_as_fetch_does() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    let server = HttpBackend::start_https(&w.path("srv"), &pki.server(ServerCert::Good))
        .expect("lighttpd with mod_openssl starts");
    let url = server.url("small.git");
    let b = clone(&w, "b");
    repo::git(&b, &["remote", "add", "tls", &url]);
    let quick = ["--deadline", "10s", "--attempt-timeout", "5s"];
    let ls = |dir: &Path, target: &str, env: &[(&str, &str)]| {
        run_in(
            env!("CARGO_BIN_EXE_sluice-remote"),
            dir,
            &[&["ls-refs", target, "main"], &quick[..]].concat(),
            env,
        )
    };
    // Untrusted without configuration: answered, as the remote's name
    // leads to its https URL.
    let r = ls(&b, "tls", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    // The repository's http.sslCAInfo: trusted, by name and by URL.
    repo::set_config(&b, "http.sslCAInfo", &p(&pki.ca_file()));
    for target in ["tls", url.as_str()] {
        let r = ls(&b, target, &[]);
        assert_eq!(r.code, 0, "{target}: {r:?}\n{}", server.error_log());
        assert!(r.stdout.ends_with("\trefs/heads/main\n"), "{r:?}");
    }
    // GIT_SSL_CAINFO wins over it, as in git.
    let other = pki.other_ca_file();
    let r = ls(&b, "tls", &[("GIT_SSL_CAINFO", &p(&other))]);
    assert_eq!(r.code, 1, "{r:?}");
    // Outside any repository: GIT_SSL_CAINFO still applies.
    let outside = w.path("outside");
    std::fs::create_dir_all(&outside).expect("dir");
    let r = ls(&outside, &url, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let r = ls(&outside, &url, &[("GIT_SSL_CAINFO", &p(&pki.ca_file()))]);
    assert_eq!(r.code, 0, "{r:?}");
}
