//! The PostgreSQL ledger and shared retry budget against a real PostgreSQL
//! (the testkit's, a throwaway data directory), restarted under claims in
//! flight. The tests whose replicas are other processes, killed or not,
//! are `sluice-testbins`' (`crates/testbins/tests/it/pg_replicas.rs`),
//! where the replica program lives.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use sluice_ledger::{PostgresLedger, Store};
use sluice_policy::{
    AttemptError, BackoffShape, Bounds, BudgetStore, Claim, Effect, Ledger, Operation, OutcomeKind,
    Policy, PreviousResult, RetryBudget, Stopped,
};
use sluice_testkit::{Capture, Postgres};

/// An address nothing listens on: connections to it are refused.
fn refusing_remote() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("address");
    drop(l);
    addr
}

#[test]
fn postgres_restarted_with_claims_in_flight_runs_each_claim_once_or_fails_local_error() {
    let mut pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let ledger = Arc::new(PostgresLedger::open(&url).expect("the ledger opens"));
    let ran: Arc<Vec<AtomicU32>> = Arc::new((0..4 * 5000).map(|_| AtomicU32::new(0)).collect());
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicU32::new(0));
    // Set once the server is back: a worker whose claim failed waits for
    // it, so the ids are not all spent on the refusals while it is down.
    let restarted = Arc::new((Mutex::new(false), Condvar::new()));
    let (tick_tx, tick_rx) = mpsc::channel::<()>();
    let workers: Vec<_> = (0..4usize)
        .map(|w| {
            let (ledger, ran, done, stop, tick, restarted) = (
                ledger.clone(),
                ran.clone(),
                done.clone(),
                stop.clone(),
                tick_tx.clone(),
                restarted.clone(),
            );
            std::thread::spawn(move || {
                let policy = Policy::builder()
                    .budget_store(ledger.budget_store())
                    .ledger(ledger)
                    .build();
                let mut outcomes = Vec::new();
                for i in w * 5000..(w + 1) * 5000 {
                    if stop.load(Ordering::SeqCst) == 1 {
                        break;
                    }
                    let out = policy.run(
                        Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/r")
                            .id(format!("op-{i}"))
                            .bounds(Bounds::new(
                                Duration::from_secs(5),
                                Duration::from_secs(1),
                                5,
                            )),
                        |ctx| {
                            ran[i].fetch_add(1, Ordering::SeqCst);
                            ctx.reached("done");
                            Ok::<_, AttemptError>(())
                        },
                    );
                    let failed = out.kind == OutcomeKind::LocalError;
                    outcomes.push((i, out.kind, out.recorded));
                    done.fetch_add(1, Ordering::SeqCst);
                    let _ = tick.send(());
                    if failed {
                        let (lock, cv) = &*restarted;
                        let mut back = lock.lock().expect("lock");
                        while !*back {
                            back = cv.wait(back).expect("lock");
                        }
                    }
                }
                outcomes
            })
        })
        .collect();
    drop(tick_tx);
    let wait_for = |n: usize| {
        while done.load(Ordering::SeqCst) < n {
            tick_rx
                .recv_timeout(Duration::from_secs(120))
                .expect("the workers go on");
        }
    };
    wait_for(200);
    pg.restart().expect("PostgreSQL restarts");
    {
        let (lock, cv) = &*restarted;
        *lock.lock().expect("lock") = true;
        cv.notify_all();
    }
    let after_restart = done.load(Ordering::SeqCst);
    // Operations go on against the restarted server.
    wait_for(after_restart + 400);
    stop.store(1, Ordering::SeqCst);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut unrecorded = 0;
    for w in workers {
        for (i, kind, recorded) in w.join().expect("a worker ends") {
            let runs = ran[i].load(Ordering::SeqCst);
            match kind {
                OutcomeKind::Succeeded => {
                    assert_eq!(runs, 1, "op-{i} succeeded and ran {runs} times");
                    let row = ledger.show(&format!("op-{i}")).expect("show");
                    let row = row.unwrap_or_else(|| panic!("op-{i} ran and is not kept"));
                    if recorded == Some(true) {
                        assert!(row.run.is_some(), "op-{i} recorded but reads as running");
                    } else {
                        unrecorded += 1;
                    }
                }
                OutcomeKind::LocalError => {
                    assert_eq!(runs, 0, "op-{i} failed local-error after it ran")
                }
                other => panic!("op-{i} ended {other:?}"),
            }
            *kinds.entry(format!("{kind:?}")).or_default() += 1;
        }
    }
    assert!(
        kinds.get("Succeeded").copied().unwrap_or(0) >= 600,
        "operations went on around the restart: {kinds:?} ({unrecorded} unrecorded)"
    );
    let twice = ran.iter().filter(|n| n.load(Ordering::SeqCst) > 1).count();
    assert_eq!(twice, 0);
}

#[test]
fn a_budget_the_database_cannot_answer_falls_back_to_the_process_bucket_and_warns() {
    let mut pg = Postgres::start().expect("PostgreSQL starts");
    let ledger = PostgresLedger::open(&pg.url_with_password()).expect("opens");
    let budgets = ledger.budget_store();
    let capture = Capture::new();
    let policy = Policy::builder()
        .budget_store(budgets.clone())
        .retry_budget(RetryBudget {
            capacity: 2.0,
            refill_per_sec: 0.0,
            success_credit: 0.0,
        })
        .build();
    pg.stop().expect("PostgreSQL stops");
    let remote = refusing_remote();
    let outcome = tracing::subscriber::with_default(capture.subscriber(), || {
        policy.run(
            Operation::new("ls-refs", Effect::Read, format!("git://{remote}/r")).bounds(
                Bounds::new(Duration::from_secs(10), Duration::from_secs(2), 100)
                    .with_backoff(BackoffShape::constant(Duration::from_millis(1))),
            ),
            |_| match TcpStream::connect(remote) {
                Ok(_) => Ok(()),
                Err(e) => Err(AttemptError::unjudged("connect", e.to_string())),
            },
        )
    });
    assert_eq!(outcome.stopped, Some(Stopped::RetryBudgetEmpty));
    assert_eq!(
        outcome.attempts.len(),
        3,
        "1 + the process bucket's 2 tokens"
    );
    assert!(budgets.is_degraded());
    let warns: Vec<_> = capture
        .events()
        .into_iter()
        .filter(|e| e.level == tracing::Level::WARN && e.message.contains("shared retry budget"))
        .collect();
    assert_eq!(warns.len(), 1, "one warn for the outage, not one per take");
    assert!(!warns[0].fields.values().any(|v| v.contains(pg.password())));
}

#[test]
fn a_claim_the_database_cannot_answer_is_local_error_and_nothing_runs() {
    let mut pg = Postgres::start().expect("PostgreSQL starts");
    let ledger = Arc::new(PostgresLedger::open(&pg.url_with_password()).expect("opens"));
    let policy = Policy::builder().ledger(ledger).build();
    pg.stop().expect("PostgreSQL stops");
    crate::assert_a_read_ends_local_error_and_nothing_runs(&policy, "deploy-1");
}

#[test]
fn the_schema_is_created_once_and_a_newer_one_is_refused() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let a = PostgresLedger::open(&url).expect("creates the schema");
    assert_eq!(a.claim(&req("x")).expect("claim"), Claim::Claimed);
    drop(a);
    let b = PostgresLedger::open(&url).expect("opens the existing schema");
    assert_running(b.claim(&req("x")).expect("claim"));
    assert_eq!(
        pg.psql("SELECT version FROM sluice_schema WHERE component = 'ledger'")
            .expect("psql")
            .trim(),
        "4"
    );
    pg.psql("UPDATE sluice_schema SET version = 99 WHERE component = 'ledger'")
        .expect("psql");
    let e = PostgresLedger::open(&url).expect_err("a newer schema is refused");
    assert!(format!("{e}").contains("newer"), "{e}");
}

#[test]
fn a_read_creates_no_ledger_and_a_schema_1_database_is_read_as_it_is_then_migrated() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let tables = || {
        pg.psql("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sluice%'")
            .expect("psql")
            .trim()
            .to_string()
    };
    let e = Store::open_read(Path::new(&url), LEFT).expect_err("no ledger there");
    assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("no sluice ledger"), "{e}");
    assert_eq!(tables(), "0", "a read created nothing");
    // The schema an earlier version created, with one finished row.
    pg.psql(
        "CREATE TABLE sluice_schema (component text PRIMARY KEY, version integer NOT NULL);
         INSERT INTO sluice_schema VALUES ('ledger', 1);
         CREATE TABLE sluice_ledger (id text PRIMARY KEY, claimed_at bigint NOT NULL,
             finished_at bigint, run text, token text);
         CREATE INDEX sluice_ledger_claimed_at ON sluice_ledger (claimed_at);
         CREATE TABLE sluice_retry_budget (host text PRIMARY KEY,
             tokens double precision NOT NULL, at timestamptz NOT NULL, spent boolean NOT NULL);
         INSERT INTO sluice_ledger VALUES ('old', (extract(epoch from now()) * 1000)::bigint, (extract(epoch from now()) * 1000)::bigint,
             '{\"result\":\"succeeded\",\"may_have_applied\":null,\"elapsed_ms\":3,\"attempts\":[]}', 't');
         INSERT INTO sluice_ledger VALUES ('old-running', (extract(epoch from now()) * 1000)::bigint - 60000,
             NULL, NULL, 't');",
    )
    .expect("the schema of version 1");
    let reader = Store::open_read(Path::new(&url), LEFT).expect("opens to read");
    let rows = reader.list(UNIX_EPOCH).expect("list");
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["old-running", "old"], "oldest first");
    assert_eq!(rows[1].run.as_ref().map(|r| r.elapsed_ms), Some(3));
    assert_eq!((&rows[1].kind, &rows[1].refs), (&None, &None));
    assert_eq!(
        pg.psql("SELECT version FROM sluice_schema WHERE component = 'ledger'")
            .expect("psql")
            .trim(),
        "1",
        "a read migrates nothing"
    );
    let writer = PostgresLedger::open(&url).expect("opens and migrates");
    assert_eq!(
        pg.psql("SELECT version FROM sluice_schema WHERE component = 'ledger'")
            .expect("psql")
            .trim(),
        "4"
    );
    // The old claim still running: of a kind and effect not known (a write
    // may have applied), claimed a minute ago.
    let Claim::Taken(Some(old)) = writer.claim(&read_req("old-running")).expect("claim") else {
        panic!("taken, with what is known of it");
    };
    assert_eq!(old.result, PreviousResult::Running);
    assert_eq!((old.kind, old.may_have_applied), (None, Some(true)));
    assert!(old.elapsed_ms >= 60_000, "{}", old.elapsed_ms);
    let refs = vec![
        "+0123:refs/heads/main".to_string(),
        ":refs/heads/gone".to_string(),
    ];
    assert_eq!(
        writer
            .claim(
                &req("new")
                    .operation("push", "https://user:pw@example.com/o/r.git")
                    .refs(&refs)
            )
            .expect("claim"),
        Claim::Claimed
    );
    let entry = writer.show("new").expect("show").expect("kept");
    assert_eq!(entry.kind.as_deref(), Some("push"));
    assert_eq!(entry.remote.as_deref(), Some("https://example.com/o/r.git"));
    assert_eq!(entry.refs, Some(refs));
    assert!(writer
        .show("old")
        .expect("show")
        .expect("kept")
        .kind
        .is_none());
}

#[test]
fn the_cli_store_opens_a_postgres_url_and_reads_rows_back() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let store = Store::open(Path::new(&pg.url_with_password())).expect("opens");
    assert!(matches!(store, Store::Postgres(_)));
    assert!(store.budget_store().is_some());
    assert_eq!(store.claim(&req("a")).expect("claim"), Claim::Claimed);
    let entry = store.show("a").expect("show").expect("kept");
    assert!(entry.run.is_none());
    assert_eq!(store.list(UNIX_EPOCH).expect("list").len(), 1);
}

#[test]
fn the_shared_budget_is_one_bucket_for_every_store_on_the_database() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let a = PostgresLedger::open(&url).expect("opens").budget_store();
    let b = PostgresLedger::open(&url).expect("opens").budget_store();
    let budget = RetryBudget {
        capacity: 3.0,
        refill_per_sec: 0.0,
        success_credit: 0.5,
    };
    let t = Duration::ZERO;
    assert_eq!(a.try_spend("h:1", &budget, t, LEFT), (true, 2.0));
    assert_eq!(b.try_spend("h:1", &budget, t, LEFT), (true, 1.0));
    assert_eq!(a.try_spend("h:1", &budget, t, LEFT), (true, 0.0));
    assert_eq!(b.try_spend("h:1", &budget, t, LEFT), (false, 0.0));
    // Another host has its own bucket.
    assert_eq!(b.try_spend("h:2", &budget, t, LEFT), (true, 2.0));
    assert_eq!(a.credit("h:1", &budget, t, LEFT), 0.5);
    assert_eq!(b.credit("h:1", &budget, t, LEFT), 1.0);
    assert_eq!(a.try_spend("h:1", &budget, t, LEFT), (true, 0.0));
    b.drain("h:2", &budget, t, LEFT);
    assert_eq!(a.try_spend("h:2", &budget, t, LEFT), (false, 0.0));
    assert!(!a.is_degraded() && !b.is_degraded());
}

#[test]
fn the_shared_budget_refills_by_the_servers_clock() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let a = PostgresLedger::open(&pg.url_with_password())
        .expect("opens")
        .budget_store();
    let budget = RetryBudget {
        capacity: 1.0,
        refill_per_sec: 1000.0,
        success_credit: 0.0,
    };
    assert_eq!(a.try_spend("h", &budget, Duration::ZERO, LEFT), (true, 0.0));
    // The policy's clock says no time passed; the server's clock decides.
    // Taken until one refills (a millisecond of the server's time).
    let mut refilled = false;
    for _ in 0..100_000 {
        if a.try_spend("h", &budget, Duration::ZERO, LEFT).0 {
            refilled = true;
            break;
        }
    }
    assert!(refilled, "the bucket refilled");
    assert!(!a.is_degraded());
}

#[test]
fn a_finish_the_database_cannot_take_is_tried_within_the_budget_then_recorded_false() {
    let mut pg = Postgres::start().expect("PostgreSQL starts");
    let ledger = Arc::new(PostgresLedger::open(&pg.url_with_password()).expect("opens"));
    let policy = Policy::builder().ledger(ledger.clone()).build();
    let outcome = policy.run(
        Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/r")
            .id("land-1")
            .bounds(Bounds::new(
                Duration::from_secs(2),
                Duration::from_secs(1),
                3,
            )),
        |ctx| {
            // The claim was made; the database goes away before the finish.
            pg.stop().expect("PostgreSQL stops");
            ctx.reached("done");
            Ok::<_, AttemptError>(())
        },
    );
    assert_eq!(outcome.kind, OutcomeKind::Succeeded);
    assert_eq!(outcome.recorded, Some(false));
    pg.start_again().expect("PostgreSQL starts again");
    let row = ledger
        .show("land-1")
        .expect("show")
        .expect("the claim is kept");
    assert!(
        row.run.is_none(),
        "the run was never recorded: it reads as running"
    );
}

#[test]
fn prune_deletes_the_rows_past_the_window_in_batches_and_frees_their_ids() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let ledger =
        PostgresLedger::open_with_retention(&url, Duration::from_secs(3600)).expect("opens");
    for i in 0..1200 {
        assert_eq!(
            ledger.claim(&req(&format!("old-{i}"))).expect("claim"),
            Claim::Claimed
        );
    }
    assert_eq!(ledger.claim(&req("new")).expect("claim"), Claim::Claimed);
    // Two hours ago by the server's clock.
    pg.psql("UPDATE sluice_ledger SET claimed_at = claimed_at - 7200000 WHERE id LIKE 'old-%'")
        .expect("psql");
    assert_eq!(
        ledger.prune().expect("prune"),
        1200,
        "three batches of at most 500"
    );
    assert!(ledger.show("old-7").expect("show").is_none());
    assert!(ledger.show("new").expect("show").is_some());
    assert_eq!(ledger.claim(&req("old-7")).expect("claim"), Claim::Claimed);
    assert_running(ledger.claim(&req("new")).expect("claim"));
}

#[test]
fn a_claim_still_running_is_answered_with_its_kind_effect_and_age() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let a = PostgresLedger::open(&url).expect("opens");
    let b = PostgresLedger::open(&url).expect("opens");
    let fetch = read_req("job").operation("fetch", "git://h/r.git");
    let push = req("job").operation("push", "git://h/r.git");
    assert_eq!(a.claim(&fetch).expect("claim"), Claim::Claimed);
    // Another replica asks with a push.
    let Claim::Taken(Some(earlier)) = b.claim(&push).expect("claim") else {
        panic!("taken, with what is known of it");
    };
    assert_eq!(earlier.result, PreviousResult::Running);
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(earlier.may_have_applied, None, "the earlier run is a read");
    assert!(earlier.attempts.is_empty());

    let mut write = push;
    write.id = "w";
    assert_eq!(a.claim(&write).expect("claim"), Claim::Claimed);
    let mut read = fetch;
    read.id = "w";
    let Claim::Taken(Some(earlier)) = b.claim(&read).expect("claim") else {
        panic!("taken, with what is known of it");
    };
    assert_eq!(earlier.kind.as_deref(), Some("push"));
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "a write still running"
    );

    // Claimed an hour ago by the server's clock: the answer says so.
    pg.psql("UPDATE sluice_ledger SET claimed_at = claimed_at - 3600000 WHERE id = 'job'")
        .expect("psql");
    let Claim::Taken(Some(earlier)) = b.claim(&push).expect("claim") else {
        panic!("taken");
    };
    assert!(earlier.elapsed_ms >= 3_600_000, "{earlier:?}");
}

/// A claim of `id` (a read) with [`LEFT`] left.
fn read_req(id: &str) -> sluice_policy::ClaimRequest<'_> {
    sluice_policy::ClaimRequest::new(id, sluice_policy::Effect::Read, LEFT)
}

/// What remains of a deadline, in the calls these tests make outside any
/// operation: 10 s.
const LEFT: std::time::Duration = std::time::Duration::from_secs(10);

/// A claim of `id` (a write) with [`LEFT`] left.
fn req(id: &str) -> sluice_policy::ClaimRequest<'_> {
    sluice_policy::ClaimRequest::new(id, sluice_policy::Effect::Write, LEFT)
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
