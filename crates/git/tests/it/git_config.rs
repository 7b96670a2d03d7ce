//! git's `http.*` / `http.<url>.*` settings read for the URL called
//! ([`sluice_git::HttpSettings`]) and applied to a client, against a real
//! https server: a CA scoped to the server's URL trusts it, one scoped to
//! another does not; `sslVerify=false` takes any certificate.

use crate::common;

use std::sync::Arc;

use common::*;
use sluice_git::{GitClient, HttpSettings, HttpsConfig};
use sluice_policy::{Class, OutcomeKind, Policy};
use sluice_testkit::{HttpBackend, ServerCert, TestPki};

/// ls-refs of `url` by a client whose https settings are what `config`
/// (a git config file's text) gives `url`.
fn ls_refs_with(config: &str, url: &str) -> sluice_policy::Outcome<Vec<sluice_git::RemoteRef>> {
    let file = gix::config::File::try_from(config).expect("config parses");
    let https = HttpSettings::read(&file, url)
        .apply(HttpsConfig::new())
        .expect("usable settings");
    GitClient::new(Arc::new(Policy::default()))
        .with_https(https)
        .ls_refs(url, &[], &quick(10_000, 5_000, 3))
        .expect("valid input")
}

#[test]
fn a_ca_scoped_to_the_urls_server_trusts_it_and_ssl_verify_false_takes_any_certificate() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    w.small("s.git");
    let ca = pki.ca_file().display().to_string();
    let good = HttpBackend::start_https(&w.dir.path().join("srv"), &pki.server(ServerCert::Good))
        .expect("lighttpd with mod_openssl starts");
    let url = good.url("s.git");
    let base = format!("https://{}", good.addr());
    for (config, trusted) in [
        (String::new(), false),
        (format!("[http]\n\tsslCAInfo = {ca}\n"), true),
        (format!("[http \"{base}\"]\n\tsslCAInfo = {ca}\n"), true),
        (
            format!("[http \"{base}/git/\"]\n\tsslCAInfo = {ca}\n"),
            true,
        ),
        (format!("[http \"{base}/gi\"]\n\tsslCAInfo = {ca}\n"), false),
        (
            format!("[http \"https://127.0.0.1:1\"]\n\tsslCAInfo = {ca}\n"),
            false,
        ),
    ] {
        let out = ls_refs_with(&config, &url);
        if trusted {
            assert_eq!(
                out.kind,
                OutcomeKind::Succeeded,
                "{config}: {:?}",
                out.attempts
            );
        } else {
            assert_eq!(
                out.kind,
                OutcomeKind::Answered,
                "{config}: {:?}",
                out.attempts
            );
            assert_eq!(out.attempts.len(), 1);
            assert_eq!(out.attempts[0].class, Some(Class::Answered));
        }
    }
    for cert in [
        ServerCert::OtherCa,
        ServerCert::Expired,
        ServerCert::OtherName,
    ] {
        let dir = w.path(&format!("srv-{cert:?}"));
        std::fs::create_dir_all(&dir).expect("dir");
        sluice_testkit::repo::git(
            w.dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &w.dir.path().join("srv/s.git").display().to_string(),
                &dir.join("s.git").display().to_string(),
            ],
        );
        let server = HttpBackend::start_https(&dir, &pki.server(cert))
            .expect("lighttpd with mod_openssl starts");
        let url = server.url("s.git");
        let base = format!("https://{}", server.addr());
        let refused = ls_refs_with(&format!("[http]\n\tsslCAInfo = {ca}\n"), &url);
        assert_eq!(refused.kind, OutcomeKind::Answered, "{cert:?}");
        let config = format!("[http \"{base}\"]\n\tsslVerify = false\n");
        let out = ls_refs_with(&config, &url);
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{cert:?}: {:?}",
            out.attempts
        );
        // Scoped to another server, it changes nothing here.
        let config = "[http \"https://127.0.0.1:1\"]\n\tsslVerify = false\n";
        let out = ls_refs_with(config, &url);
        assert_eq!(out.kind, OutcomeKind::Answered, "{cert:?}");
    }
}
