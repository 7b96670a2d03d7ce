//! The PostgreSQL store as a fleet meets a managed database: TLS as each
//! `sslmode` reads it (a real PostgreSQL with `ssl = on` and a per-run CA),
//! client certificates, a database that hangs, a restart between two
//! claims, and PgBouncer in transaction pooling mode in front of it.
//!
//! What the server saw is read on the server (`pg_stat_ssl`), each store
//! telling its connections apart by its `application_name`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use sluice_ledger::{PostgresLedger, DEFAULT_RETENTION};
use sluice_policy::{
    AttemptError, Bounds, BudgetStore, Claim, Effect, Ledger, Operation, OutcomeKind, Policy,
    RetryBudget,
};
use sluice_testkit::proxy::{TcpFaultProxy, TcpMode};
use sluice_testkit::{
    PgBouncer, Postgres, PostgresOptions, PostgresTls, ServerCert, TestPki, TlsAuth,
};

/// A server presenting `cert` from `pki`, logging clients in as `auth`.
fn tls_server(pki: &TestPki, cert: ServerCert, auth: TlsAuth) -> Postgres {
    Postgres::start_with(PostgresOptions {
        tls: Some(PostgresTls {
            cert: pki.server(cert),
            client_ca: Some(pki.ca_file()),
            auth,
        }),
        ..PostgresOptions::default()
    })
    .expect("PostgreSQL starts with TLS")
}

/// `base` (no query) with `query` appended and an application name of its
/// own.
fn with_query(base: &str, app: &str, query: &str) -> String {
    let sep = if query.is_empty() { "" } else { "&" };
    format!("{base}?application_name={app}{sep}{query}")
}

/// Whether the server's connections of `app` are over TLS: `true`,
/// `false`, or `none` when it has none.
fn ssl_of(pg: &Postgres, app: &str) -> String {
    pg.psql(&format!(
        "SELECT coalesce(string_agg(DISTINCT s.ssl::text, ','), 'none')
         FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
         WHERE a.application_name = '{app}'"
    ))
    .expect("psql")
    .trim()
    .to_string()
}

/// Open a store, claim an id and say over what the server saw it.
fn claim_over(pg: &Postgres, app: &str, query: &str) -> Result<String, String> {
    let url = with_query(&pg.url_with_password(), app, query);
    let ledger = PostgresLedger::open(&url).map_err(|e| e.to_string())?;
    assert_eq!(
        ledger.claim(&req(&format!("{app}-1"))).expect("claim"),
        Claim::Claimed
    );
    // The connection stays in the pool, open: the server still shows it.
    Ok(ssl_of(pg, app))
}

fn file(p: &std::path::Path) -> String {
    p.to_str().expect("a UTF-8 temporary path").to_string()
}

#[test]
fn each_sslmode_reaches_a_tls_server_as_libpq_reads_it() {
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::Good, TlsAuth::PasswordAnyTransport);
    let ca = file(&pki.ca_file());
    assert_eq!(
        claim_over(&pg, "m_disable", "sslmode=disable").as_deref(),
        Ok("false")
    );
    assert_eq!(claim_over(&pg, "m_default", "").as_deref(), Ok("true"));
    assert_eq!(
        claim_over(&pg, "m_prefer", "sslmode=prefer").as_deref(),
        Ok("true")
    );
    assert_eq!(
        claim_over(&pg, "m_require", "sslmode=require").as_deref(),
        Ok("true")
    );
    assert_eq!(
        claim_over(&pg, "m_vca", &format!("sslmode=verify-ca&sslrootcert={ca}")).as_deref(),
        Ok("true")
    );
    assert_eq!(
        claim_over(
            &pg,
            "m_vfull",
            &format!("sslmode=verify-full&sslrootcert={ca}")
        )
        .as_deref(),
        Ok("true")
    );
    // The login is bound to the TLS connection (SCRAM-SHA-256-PLUS): the
    // server checks the binding, the driver refuses to log in without it.
    assert_eq!(
        claim_over(
            &pg,
            "m_bound",
            &format!("sslmode=verify-full&sslrootcert={ca}&channel_binding=require")
        )
        .as_deref(),
        Ok("true")
    );
    // The key=value form reads the same keys.
    let kv = format!(
        "host=127.0.0.1 port={} user=sluice password={} dbname=postgres \
         application_name=m_kv sslmode=verify-full sslrootcert='{ca}'",
        pg.addr().port(),
        pg.password()
    );
    let ledger = PostgresLedger::open(&kv).expect("the key=value form opens");
    assert_eq!(ledger.claim(&req("kv")).expect("claim"), Claim::Claimed);
    assert_eq!(ssl_of(&pg, "m_kv"), "true");
}

#[test]
fn a_certificate_from_an_untrusted_ca_is_refused_by_verify_ca_naming_the_host_and_the_failure() {
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::OtherCa, TlsAuth::PasswordAnyTransport);
    let ca = file(&pki.ca_file());
    // prefer and require do not check the certificate.
    assert_eq!(
        claim_over(&pg, "u_prefer", "sslmode=prefer").as_deref(),
        Ok("true")
    );
    assert_eq!(
        claim_over(&pg, "u_require", "sslmode=require").as_deref(),
        Ok("true")
    );
    for query in [
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=verify-full&sslrootcert={ca}"),
        // require with a root file checks as verify-ca, as libpq does.
        format!("sslmode=require&sslrootcert={ca}"),
    ] {
        let e = claim_over(&pg, "u_refused", &query).expect_err(&query);
        assert!(e.contains("127.0.0.1"), "{query}: the host is named: {e}");
        assert!(
            e.contains("invalid peer certificate") && e.contains("UnknownIssuer"),
            "{query}: what failed is said: {e}"
        );
        assert!(!e.contains(pg.password()), "{query}: {e}");
    }
    assert_eq!(
        ssl_of(&pg, "u_refused"),
        "none",
        "nothing logged in after a refused certificate"
    );
}

#[test]
fn a_certificate_for_another_name_is_refused_by_verify_full_and_taken_by_verify_ca() {
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::OtherName, TlsAuth::PasswordTlsOnly);
    let ca = file(&pki.ca_file());
    let e = claim_over(
        &pg,
        "n_full",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    )
    .expect_err("another name is refused under verify-full");
    assert!(e.contains("127.0.0.1"), "{e}");
    assert!(e.contains("not valid for name"), "{e}");
    assert!(e.contains("sslmode=verify-full"), "{e}");
    assert!(!e.contains(pg.password()), "{e}");
    assert_eq!(
        claim_over(&pg, "n_ca", &format!("sslmode=verify-ca&sslrootcert={ca}")).as_deref(),
        Ok("true")
    );
    // hostssl only: plain TCP is refused by the server.
    let e = claim_over(&pg, "n_plain", "sslmode=disable").expect_err("hostssl only");
    assert!(e.contains("pg_hba.conf"), "{e}");
}

#[test]
fn require_refuses_a_server_without_tls_and_prefer_falls_back_to_plain() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    assert_eq!(claim_over(&pg, "p_default", "").as_deref(), Ok("false"));
    assert_eq!(
        claim_over(&pg, "p_prefer", "sslmode=prefer").as_deref(),
        Ok("false")
    );
    assert_eq!(
        claim_over(&pg, "p_allow", "sslmode=allow").as_deref(),
        Ok("false")
    );
    for mode in ["require", "verify-ca", "verify-full"] {
        let e = claim_over(&pg, "p_refused", &format!("sslmode={mode}")).expect_err(mode);
        assert!(e.contains("127.0.0.1"), "{mode}: {e}");
        assert!(e.contains("does not support TLS"), "{mode}: {e}");
        assert!(!e.contains(pg.password()), "{mode}: {e}");
    }
}

#[test]
fn a_client_certificate_logs_in_where_pg_hba_asks_for_one() {
    let pki = TestPki::new().expect("pki");
    let pg = tls_server(&pki, ServerCert::Good, TlsAuth::ClientCert);
    let client = pki.client();
    let ca = file(&pki.ca_file());
    // No password anywhere: the certificate is the login.
    let url = with_query(
        &pg.url(),
        "c_cert",
        &format!(
            "sslmode=verify-full&sslrootcert={ca}&sslcert={}&sslkey={}",
            file(&client.cert),
            file(&client.key)
        ),
    );
    let ledger = PostgresLedger::open(&url).expect("a client certificate logs in");
    assert_eq!(ledger.claim(&req("c-1")).expect("claim"), Claim::Claimed);
    assert_eq!(ssl_of(&pg, "c_cert"), "true");
    let without = with_query(
        &pg.url(),
        "c_none",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let e = PostgresLedger::open(&without).expect_err("no certificate, no login");
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
}

/// A plain TCP fault proxy in front of `pg`.
/// A TCP fault proxy before `pg`, and the database's URL through it.
fn proxy_to(pg: &Postgres) -> (TcpFaultProxy, String) {
    let proxy = TcpFaultProxy::start(pg.addr()).expect("the proxy starts");
    let url = format!(
        "postgres://sluice:{}@{}/postgres",
        pg.password(),
        proxy.addr()
    );
    (proxy, url)
}

/// Cut every connection now and answer none from now on (a database host
/// gone silent).
fn cut_and_go_silent(proxy: &TcpFaultProxy) {
    proxy.set_mode(TcpMode::StallNew);
    proxy.cut_all();
}

#[test]
fn a_database_that_accepts_and_says_nothing_fails_open_claim_and_budget_within_their_bounds() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    // Opening against a host that accepts and never answers.
    let (silent, url) = proxy_to(&pg);
    cut_and_go_silent(&silent);
    let bound = Duration::from_secs(2);
    let started = Instant::now();
    let e =
        PostgresLedger::open_within(&url, DEFAULT_RETENTION, bound).expect_err("nothing answers");
    let took = started.elapsed();
    assert!(took < bound + Duration::from_secs(1), "took {took:?}");
    assert!(took >= bound, "it waited its bound: {took:?}");
    assert!(e.to_string().contains("no answer within 2s"), "{e}");
    assert!(!e.to_string().contains(pg.password()), "{e}");
    assert!(silent.accepted() > 0, "it did connect");

    // A store that opened, whose database then goes silent: the pooled
    // connection is cut, the new one is never answered.
    let (proxy, url) = proxy_to(&pg);
    let ledger = PostgresLedger::open(&url).expect("opens through the proxy");
    assert_eq!(ledger.claim(&req("before")).expect("claim"), Claim::Claimed);
    let budgets = ledger.budget_store();
    cut_and_go_silent(&proxy);
    let started = Instant::now();
    let e = ledger
        .claim_within("after", bound)
        .expect_err("a silent database fails the claim");
    let took = started.elapsed();
    assert!(took < bound + Duration::from_secs(1), "took {took:?}");
    assert!(e.to_string().contains("no answer within 2s"), "{e}");
    // A budget take waits at most a second, then the process's bucket
    // answers.
    let budget = RetryBudget {
        capacity: 2.0,
        refill_per_sec: 0.0,
        success_credit: 0.0,
    };
    let started = Instant::now();
    assert_eq!(
        budgets.try_spend_within("h", &budget, Duration::ZERO, Duration::from_secs(10)),
        (true, 1.0)
    );
    let took = started.elapsed();
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert!(budgets.is_degraded());
    // Through the policy: local-error, nothing runs.
    let policy = Policy::builder().ledger(Arc::new(ledger)).build();
    crate::assert_a_read_ends_local_error_and_nothing_runs(&policy, "silent-1");
}

/// An operation with a 2 s deadline.
fn two_second_op(id: &str) -> Operation {
    Operation::new("push", Effect::Write, "git://127.0.0.1:9/r")
        .id(id)
        .bounds(Bounds::new(
            Duration::from_secs(2),
            Duration::from_secs(1),
            2,
        ))
}

#[test]
fn a_claim_on_a_database_gone_silent_ends_local_error_within_the_deadline_through_the_policy() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let (proxy, url) = proxy_to(&pg);
    let ledger = PostgresLedger::open(&url).expect("opens through the proxy");
    let policy = Policy::builder().ledger(Arc::new(ledger)).build();
    cut_and_go_silent(&proxy);
    let mut calls = 0;
    let started = Instant::now();
    let outcome = policy.run(two_second_op("silent-claim"), |_| {
        calls += 1;
        Ok::<_, AttemptError>(())
    });
    let took = started.elapsed();
    assert_eq!(outcome.kind, OutcomeKind::LocalError, "{outcome:?}");
    assert_eq!(calls, 0, "nothing ran");
    assert_eq!(outcome.may_have_applied, Some(false));
    // The claim had the whole deadline (it waited for it), and no more.
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    let cause = outcome.error.expect("the claim's failure").cause;
    assert!(cause.contains("no answer within"), "{cause}");
    assert!(!cause.contains(pg.password()), "{cause}");
}

#[test]
fn a_finish_on_a_database_gone_silent_ends_recorded_false_within_the_deadline() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let (proxy, url) = proxy_to(&pg);
    let ledger = PostgresLedger::open(&url).expect("opens through the proxy");
    let policy = Policy::builder().ledger(Arc::new(ledger)).build();
    let started = Instant::now();
    // The claim is made; the database goes silent while the operation
    // runs, so its finish hangs.
    let outcome = policy.run(two_second_op("silent-finish"), |_| {
        cut_and_go_silent(&proxy);
        Ok::<_, AttemptError>(())
    });
    let took = started.elapsed();
    assert_eq!(outcome.kind, OutcomeKind::Succeeded, "{outcome:?}");
    assert_eq!(outcome.recorded, Some(false));
    // What remained of the 2 s deadline, and at most the finish's floor
    // after it (with room for a busy machine).
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // The row reads as running: the claim was made, the finish never was.
    let direct = PostgresLedger::open(&pg.url_with_password()).expect("opens directly");
    let row = direct
        .show("silent-finish")
        .expect("show")
        .expect("claimed");
    assert!(row.run.is_none(), "{row:?}");
}

#[test]
fn open_connections_that_stall_fail_a_claim_in_time_and_a_cut_pool_is_replaced() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let (proxy, url) = proxy_to(&pg);
    let ledger = PostgresLedger::open(&url).expect("opens through the proxy");
    assert_eq!(ledger.claim(&req("s-1")).expect("claim"), Claim::Claimed);
    // Every connection stops moving bytes: the pooled one and new ones.
    proxy.set_mode(TcpMode::StallAll);
    let bound = Duration::from_secs(1);
    let started = Instant::now();
    let e = ledger
        .claim_within("s-2", bound)
        .expect_err("a stalled database fails the claim");
    let took = started.elapsed();
    assert!(took >= bound && took < bound * 2, "took {took:?}");
    assert!(e.to_string().contains("no answer within"), "{e}");
    // Bytes move again: the next claim works (the stalled connection was
    // let go; a new one is made).
    proxy.set_mode(TcpMode::PassThrough);
    assert_eq!(ledger.claim(&req("s-3")).expect("claim"), Claim::Claimed);
    // Every connection cut at once: the pool replaces them.
    assert!(proxy.cut_all() > 0, "there were connections to cut");
    assert_eq!(
        ledger
            .claim(&req("s-4"))
            .expect("the claim after a cut works"),
        Claim::Claimed
    );
    assert_running(ledger.claim(&req("s-1")).expect("claim"));
    assert_eq!(proxy.cuts(), 1);
    assert!(proxy.accepted() >= 3, "{}", proxy.accepted());
}

#[test]
fn a_statement_held_past_its_bound_fails_the_claim_in_time_and_is_cancelled_on_the_server() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = with_query(&pg.url_with_password(), "held", "");
    let ledger = PostgresLedger::open(&url).expect("opens");
    // Another session inserts the id and keeps its transaction open: the
    // claim's insert waits on it.
    let mut holder =
        postgres::Client::connect(&pg.url_with_password(), postgres::NoTls).expect("a session");
    let mut tx = holder.transaction().expect("begin");
    tx.execute(
        "INSERT INTO sluice_ledger (id, claimed_at) VALUES ('held-1', 0)",
        &[],
    )
    .expect("insert");
    let bound = Duration::from_secs(2);
    let started = Instant::now();
    let e = ledger
        .claim_within("held-1", bound)
        .expect_err("the claim waits on the held row");
    let took = started.elapsed();
    assert!(
        took >= bound && took < bound + Duration::from_secs(1),
        "took {took:?}"
    );
    assert!(e.to_string().contains("no answer within 2s"), "{e}");
    // The cancel reaches the server: no statement of the store is left
    // waiting on the lock (polled until the server says so, at most 10 s).
    let waiting = |pg: &Postgres| {
        pg.psql(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = 'held' AND wait_event_type = 'Lock'",
        )
        .expect("psql")
        .trim()
        .to_string()
    };
    let until = Instant::now() + Duration::from_secs(10);
    while waiting(&pg) != "0" {
        assert!(
            Instant::now() < until,
            "the held statement was not cancelled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    tx.rollback().expect("rollback");
    // The cancelled claim left nothing; the id is free and the store works.
    assert!(ledger.show("held-1").expect("show").is_none());
    assert_eq!(ledger.claim(&req("held-1")).expect("claim"), Claim::Claimed);
}

#[test]
fn a_restart_between_two_claims_leaves_the_second_working_over_tls() {
    let pki = TestPki::new().expect("pki");
    let mut pg = tls_server(&pki, ServerCert::Good, TlsAuth::PasswordTlsOnly);
    let url = with_query(
        &pg.url_with_password(),
        "r_restart",
        &format!("sslmode=verify-full&sslrootcert={}", file(&pki.ca_file())),
    );
    let ledger = PostgresLedger::open(&url).expect("opens");
    assert_eq!(ledger.claim(&req("r-1")).expect("claim"), Claim::Claimed);
    pg.restart().expect("PostgreSQL restarts");
    assert_eq!(
        ledger
            .claim(&req("r-2"))
            .expect("the claim after a restart works"),
        Claim::Claimed
    );
    assert_running(ledger.claim(&req("r-1")).expect("claim"));
    assert_eq!(ssl_of(&pg, "r_restart"), "true");
}

#[test]
fn claims_and_finishes_through_pgbouncer_in_transaction_mode_from_eight_threads() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    // Two server connections for the store's eight: every transaction may
    // land on another server connection than the last.
    let bouncer = PgBouncer::start(&pg, 2).expect("PgBouncer starts");
    let url = bouncer.url_with_password();
    let ledger = Arc::new(PostgresLedger::open(&url).expect("opens through PgBouncer"));
    let budgets = ledger.budget_store();
    let won: Vec<Vec<String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let ledger = ledger.clone();
                s.spawn(move || {
                    let policy = Policy::default();
                    let mut mine = Vec::new();
                    // Every thread asks for the same 100 ids, in its own order.
                    for k in 0..100u64 {
                        let id = format!("b-{}", (k * 7 + t * 13) % 100);
                        match ledger.claim(&req(&id)).expect("claim through PgBouncer") {
                            Claim::Claimed => {
                                let run = policy
                                    .run(
                                        Operation::new("ls-refs", Effect::Read, "git://h/r"),
                                        |ctx| {
                                            ctx.reached("done");
                                            Ok::<_, AttemptError>(())
                                        },
                                    )
                                    .summary()
                                    .expect("a run that ran");
                                ledger
                                    .finish(&done(&id, &run))
                                    .expect("finish through PgBouncer");
                                mine.push(id);
                            }
                            Claim::Taken(_) => {}
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread ends"))
            .collect()
    });
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for id in won.iter().flatten() {
        *count.entry(id.clone()).or_default() += 1;
    }
    assert_eq!(count.len(), 100, "every id claimed");
    assert!(count.values().all(|n| *n == 1), "none twice: {count:?}");
    let rows = ledger.list(UNIX_EPOCH).expect("list");
    assert_eq!(rows.len(), 100);
    assert!(
        rows.iter().all(|r| r.run.is_some()),
        "every finish recorded"
    );
    // The shared budget's statements too.
    let budget = RetryBudget {
        capacity: 2.0,
        refill_per_sec: 0.0,
        success_credit: 0.0,
    };
    assert_eq!(
        budgets.try_spend("h", &budget, Duration::ZERO, LEFT),
        (true, 1.0)
    );
    assert_eq!(
        budgets.try_spend("h", &budget, Duration::ZERO, LEFT),
        (true, 0.0)
    );
    assert_eq!(
        budgets.try_spend("h", &budget, Duration::ZERO, LEFT),
        (false, 0.0)
    );
    assert!(!budgets.is_degraded());
}

#[test]
fn a_unix_socket_url_connects_under_the_default_sslmode() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    // The host is the socket's directory, percent-encoded; `local` lines
    // of pg_hba trust it, and PostgreSQL has no TLS there.
    let dir = pg
        .socket_dir()
        .to_str()
        .expect("a UTF-8 temporary path")
        .replace('/', "%2F");
    let url = format!("postgres://sluice@{dir}:{}/postgres", pg.addr().port());
    let ledger = PostgresLedger::open(&url).expect("opens over the Unix socket");
    assert_eq!(ledger.claim(&req("u-1")).expect("claim"), Claim::Claimed);
    assert_running(ledger.claim(&req("u-1")).expect("claim"));
}

/// What remains of a deadline, in the calls these tests make outside any
/// operation: 10 s.
const LEFT: std::time::Duration = std::time::Duration::from_secs(10);

/// A claim of `id` (a write) with [`LEFT`] left.
fn req(id: &str) -> sluice_policy::ClaimRequest<'_> {
    sluice_policy::ClaimRequest::new(id, sluice_policy::Effect::Write, LEFT)
}

/// A finish of `id` with `run`, with [`LEFT`] left.
fn done<'a>(id: &'a str, run: &'a sluice_policy::PreviousRun) -> sluice_policy::FinishRequest<'a> {
    sluice_policy::FinishRequest::new(id, sluice_policy::Effect::Write, run, LEFT)
}

/// Assert that `claim` answers a claim still running (the tests' claims
/// are writes: it may have applied).
fn assert_running(claim: Claim) {
    match claim {
        Claim::Taken(Some(run)) if run.result == sluice_policy::PreviousResult::Running => {
            assert_eq!(run.may_have_applied, Some(true), "{run:?}");
            assert!(run.attempts.is_empty(), "{run:?}");
        }
        other => panic!("not a running earlier run: {other:?}"),
    }
}
