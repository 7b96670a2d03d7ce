//! `--ledger 'postgres://…?sslmode=verify-full&sslrootcert=ca.pem'` end to
//! end: a real ls-refs and push with their ids claimed and recorded in a
//! PostgreSQL that takes TLS only; a certificate the client does not trust,
//! another host name under `verify-full`, a server without TLS under
//! `require`, and a database that accepts and then says nothing are each
//! `local-error` (exit 5) naming the database, with nothing sent to the
//! remote and no password in any output.

use crate::common;

use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use sluice_testkit::{repo, Postgres, PostgresOptions, PostgresTls, ServerCert, TestPki, TlsAuth};

/// A PostgreSQL presenting `cert` from `pki`, TLS only (`hostssl`).
fn tls_server(pki: &TestPki, cert: ServerCert) -> Postgres {
    Postgres::start_with(PostgresOptions {
        tls: Some(PostgresTls {
            cert: pki.server(cert),
            client_ca: Some(pki.ca_file()),
            auth: TlsAuth::PasswordTlsOnly,
        }),
        ..PostgresOptions::default()
    })
    .expect("PostgreSQL starts with TLS")
}

/// `pg`'s URL (with its password) and `query`.
fn ledger_url(pg: &Postgres, query: &str) -> String {
    format!("{}?{query}", pg.url_with_password())
}

/// No password and no user info of the database's URL in anything `run`
/// printed.
fn assert_no_secret(run: &Run, pg: &Postgres) {
    for said in [&run.stdout, &run.stderr] {
        assert!(!said.contains(pg.password()), "{run:?}");
        assert!(!said.contains("sluice@"), "{run:?}");
    }
}

#[test]
fn an_ls_refs_and_a_push_run_with_their_ids_in_a_postgres_ledger_over_verify_full_tls() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::Good);
    let ca = p(&pki.ca_file());
    let url = ledger_url(&pg, &format!("sslmode=verify-full&sslrootcert={ca}"));

    let listed = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "tls-list",
        "--ledger",
        &url,
        "--json",
    ]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(listed.json()["recorded"], true);

    let local = w.clone_bare("local.git");
    let new = repo::commit_on(&local, "main", "over a TLS ledger");
    let push = |id: &str| {
        sluice(&[
            "push",
            &w.proxied(),
            "main:refs/heads/main",
            "--repo",
            &p(&local),
            "--operation-id",
            id,
            "--ledger",
            &url,
            "--json",
        ])
    };
    let pushed = push("tls-push");
    assert_eq!(pushed.code, 0, "{pushed:?}");
    assert_eq!(pushed.json()["recorded"], true);
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/main").as_deref(),
        Some(new.as_str())
    );
    assert!(w.proxy.wait_idle(Duration::from_secs(5)));
    let packs = w.receive_packs();
    assert_eq!(packs, 1);

    // Asked again: rejected from the ledger, nothing sent.
    let again = push("tls-push");
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.json()["previous"]["result"], "succeeded");
    assert!(w.proxy.wait_idle(Duration::from_secs(5)));
    assert_eq!(w.receive_packs(), packs, "no second receive-pack");

    // The server holds both runs (read over its own socket).
    let rows = pg
        .psql(
            "SELECT id || '=' || (run::json->>'result') FROM sluice_ledger
             WHERE id LIKE 'tls-%' ORDER BY id",
        )
        .expect("psql");
    assert_eq!(
        rows.split_whitespace().collect::<Vec<_>>(),
        ["tls-list=succeeded", "tls-push=succeeded"],
        "{rows}"
    );
    for run in [&listed, &pushed, &again] {
        assert_no_secret(run, &pg);
    }
}

/// Run a push against `w` with `--ledger url`, expecting it refused at the
/// claim: exit 5, `local-error`, the database named, nothing sent.
fn refused_at_the_claim(w: &World, pg: &Postgres, url: &str, why: &str) {
    let local = w.clone_bare(&format!("local-{}.git", w.proxy.connections().len()));
    repo::commit_on(&local, "main", "never sent");
    let before = repo::rev_parse(&w.server(), "refs/heads/main");
    let run = sluice(&[
        "push",
        &w.proxied(),
        "main:refs/heads/main",
        "--repo",
        &p(&local),
        "--operation-id",
        "refused",
        "--ledger",
        url,
        "--json",
    ]);
    assert_eq!(run.code, 5, "{why}: {run:?}");
    let doc = run.json();
    assert_eq!(doc["result"], "local-error", "{why}: {run:?}");
    assert_eq!(doc["stopped"], "local-error", "{why}");
    assert_eq!(doc["may_have_applied"], false, "{why}");
    assert_eq!(doc["attempts"].as_array().map(Vec::len), Some(0), "{why}");
    let said = format!("{}{}", run.stdout, run.stderr);
    let host = format!("127.0.0.1:{}", pg.addr().port());
    assert!(
        said.contains(&host),
        "{why}: the database is named: {run:?}"
    );
    assert!(said.contains(why), "{why}: what failed is said: {run:?}");
    assert_no_secret(&run, pg);
    assert_eq!(
        w.proxy.connections().len(),
        0,
        "{why}: nothing reached the remote"
    );
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), before);
}

#[test]
fn an_untrusted_certificate_under_verify_full_is_exit_5_naming_the_database_and_sending_nothing() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::OtherCa);
    let ca = p(&pki.ca_file());
    let url = ledger_url(&pg, &format!("sslmode=verify-full&sslrootcert={ca}"));
    refused_at_the_claim(&w, &pg, &url, "UnknownIssuer");
}

#[test]
fn another_host_name_under_verify_full_is_exit_5_naming_the_database_and_sending_nothing() {
    let w = World::new();
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::OtherName);
    let ca = p(&pki.ca_file());
    let url = ledger_url(&pg, &format!("sslmode=verify-full&sslrootcert={ca}"));
    refused_at_the_claim(&w, &pg, &url, "not valid for name");
}

#[test]
fn a_server_without_tls_under_require_is_exit_5_naming_the_database_and_sending_nothing() {
    let w = World::new();
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = ledger_url(&pg, "sslmode=require");
    refused_at_the_claim(&w, &pg, &url, "does not support TLS");
}

/// A listener that accepts every connection and never says a word (a
/// database host gone silent); the connections are held open for the
/// rest of the test binary's life.
struct Silent {
    port: u16,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let keep = held.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                keep.lock().expect("lock").push(conn);
            }
        });
        Silent { port, held }
    }

    fn accepted(&self) -> usize {
        self.held.lock().expect("lock").len()
    }
}

#[test]
fn a_database_that_accepts_and_says_nothing_ends_a_2s_operation_as_exit_5_within_3s() {
    let w = World::new();
    let silent = Silent::start();
    let url = format!(
        "postgres://sluice:hunter2-not-shown@127.0.0.1:{}/postgres",
        silent.port
    );
    let started = Instant::now();
    let run = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "silent",
        "--ledger",
        &url,
        "--deadline",
        "2s",
        "--json",
    ]);
    let took = started.elapsed();
    assert_eq!(run.code, 5, "{run:?}");
    assert_eq!(run.json()["result"], "local-error");
    assert!(took < Duration::from_secs(3), "took {took:?}: {run:?}");
    assert!(silent.accepted() > 0, "the database was reached");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains(&format!("127.0.0.1:{}", silent.port)),
        "{run:?}"
    );
    assert!(said.contains("no answer within"), "{run:?}");
    assert!(!said.contains("hunter2"), "{run:?}");
    assert!(!said.contains("sluice@"), "{run:?}");
    assert_eq!(w.proxy.connections().len(), 0, "nothing reached the remote");
}
