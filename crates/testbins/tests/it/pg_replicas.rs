//! The PostgreSQL ledger and shared retry budget with replicas that are
//! processes of their own, against a real PostgreSQL (the testkit's, a
//! throwaway data directory), killed or not. The replicas are this
//! package's `pg-test-replica` (`src/bin/pg_test_replica.rs`), and the
//! parents talk to them through pipes (a line on stdin to start, lines on
//! stdout), so no test sleeps on a guessed delay.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::UNIX_EPOCH;

use sluice_ledger::PostgresLedger;
use sluice_policy::{RetryBudget, Stopped};
use sluice_testbins::shuffle::mix;
use sluice_testkit::Postgres;

const URL: &str = "SLUICE_PG_TEST_URL";
const LOG: &str = "SLUICE_PG_TEST_LOG";
const REMOTE: &str = "SLUICE_PG_TEST_REMOTE";

/// The shared budget of the storm test, as the replicas use it (see
/// `src/bin/pg_test_replica.rs`): 6 tokens, no refill, no credit, so the
/// bound on connections is exact.
const STORM_BUDGET: RetryBudget = RetryBudget {
    capacity: 6.0,
    refill_per_sec: 0.0,
    success_credit: 0.0,
};

/// Operations each replica of the storm test runs.
const STORM_OPS: u32 = 3;

/// The replicas: `src/bin/pg_test_replica.rs`.
const REPLICA: &str = env!("CARGO_BIN_EXE_pg-test-replica");

/// Start a replica in `role`.
fn spawn(role: &str, url: &str, seed: u64, extra: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(REPLICA);
    cmd.arg(role)
        .arg(seed.to_string())
        .env(URL, url)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.spawn().expect("the replica binary starts")
}

#[test]
fn two_replicas_claiming_the_same_thousand_ids_run_each_exactly_once() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    // A fresh database: the replicas also race to create the schema.
    let mut replicas: Vec<Child> = (0..2).map(|i| spawn("run-all", &url, i, &[])).collect();
    for r in &mut replicas {
        let mut stdin = r.stdin.take().expect("piped stdin");
        writeln!(stdin, "go").expect("a replica takes its go");
    }
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_replica = Vec::new();
    for (n, r) in replicas.into_iter().enumerate() {
        let out = r.wait_with_output().expect("the replica ends");
        assert!(out.status.success(), "replica {n} failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            text.lines().any(|l| l == "DONE"),
            "replica {n} did not finish"
        );
        let mine: Vec<_> = text
            .lines()
            .filter_map(|l| l.strip_prefix("RAN "))
            .collect();
        per_replica.push(mine.len());
        for id in mine {
            *ran.entry(id.to_owned()).or_default() += 1;
        }
    }
    let twice: Vec<_> = ran.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "ids run more than once: {twice:?}");
    assert_eq!(
        ran.len(),
        1000,
        "every id ran once ({per_replica:?} per replica)"
    );
    let ledger = PostgresLedger::open(&url).expect("opens");
    let rows = ledger.list(UNIX_EPOCH).expect("list");
    assert_eq!(rows.len(), 1000);
    assert!(rows.iter().all(|r| r.run.is_some()), "every run recorded");
}

#[test]
fn a_replica_killed_25_times_mid_claim_runs_no_id_twice() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut logs = Vec::new();
    for round in 0..25u64 {
        let log = dir.path().join(format!("runs-{round}.log"));
        let log_text = log.to_str().expect("a UTF-8 temp path").to_owned();
        let mut child = spawn("run-and-log", &url, round, &[(LOG, &log_text)]);
        drop(child.stdin.take());
        // Kill after a number of operations chosen by the round: at
        // whatever the replica is doing by then (claiming, running,
        // recording).
        let ticks = 1 + mix(round) % 120;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while seen < ticks {
            match lines.next() {
                Some(Ok(l)) if l == "TICK" => seen += 1,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("reading the replica: {e}"),
                None => break,
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("the killed replica is reaped");
        logs.push(log);
    }
    let ledger = PostgresLedger::open(&url).expect("the ledger opens");
    let mut ran = BTreeSet::new();
    for log in &logs {
        for id in fs::read_to_string(log).unwrap_or_default().lines() {
            assert!(ran.insert(id.to_owned()), "{id} ran twice");
        }
    }
    assert!(ran.len() >= 25, "the replicas ran something: {}", ran.len());
    for id in &ran {
        assert!(ledger.show(id).expect("show").is_some(), "{id} was lost");
    }
}

#[test]
fn two_replicas_against_a_refusing_remote_share_one_retry_budget() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let remote = refusing_remote().to_string();
    let mut replicas: Vec<Child> = (0..2)
        .map(|i| spawn("storm", &url, i, &[(REMOTE, &remote)]))
        .collect();
    for r in &mut replicas {
        let mut stdin = r.stdin.take().expect("piped stdin");
        writeln!(stdin, "go").expect("a replica takes its go");
    }
    let mut connections = 0u64;
    let mut stopped = BTreeSet::new();
    for (n, r) in replicas.into_iter().enumerate() {
        let out = r.wait_with_output().expect("the replica ends");
        assert!(out.status.success(), "replica {n} failed: {:?}", out.status);
        let text = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            text.lines().any(|l| l == "DONE"),
            "replica {n} did not finish"
        );
        for l in text.lines().filter_map(|l| l.strip_prefix("ATTEMPTS ")) {
            let (n, why) = l.split_once(' ').expect("two fields");
            connections += n.parse::<u64>().expect("a count");
            stopped.insert(why.to_owned());
        }
    }
    let ops = 2 * u64::from(STORM_OPS);
    let one_budget = ops + STORM_BUDGET.capacity as u64;
    // Each operation's first attempt is free; every retry spends a token of
    // the one bucket both replicas share. Two buckets would allow 2 × 6.
    assert_eq!(
        stopped,
        BTreeSet::from([format!("{:?}", Some(Stopped::RetryBudgetEmpty))]),
        "every operation stopped on the empty budget"
    );
    assert_eq!(
        connections,
        one_budget,
        "connections: {connections}, one budget allows {one_budget}, two would allow {}",
        ops + 2 * STORM_BUDGET.capacity as u64
    );
}

#[test]
fn the_password_comes_from_the_url_pgpassword_or_pgpass_and_is_never_printed() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let open = |url: &str, env: &[(&str, &str)]| -> String {
        let out = spawn("open", url, 0, env)
            .wait_with_output()
            .expect("the child ends");
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).expect("utf-8");
        text.lines()
            .find(|l| l.starts_with("OPENED") || l.starts_with("ERROR "))
            .unwrap_or_else(|| panic!("the child said neither: {text}"))
            .to_owned()
    };
    // No password anywhere: refused by the server.
    let text = open(&pg.url(), &[]);
    assert!(text.starts_with("ERROR "), "{text}");
    // Named without user info.
    let named = format!("postgres://{}/postgres", pg.addr());
    assert!(text.contains(&named), "the database is named: {text}");
    assert!(!text.contains("sluice@"), "{text}");
    // PGPASSWORD.
    assert_eq!(
        open(&pg.url(), &[("PGPASSWORD", pg.password())]).trim(),
        "OPENED"
    );
    // A .pgpass file (owner-only), with a line for another port first.
    let pgpass = dir.path().join("pgpass");
    fs::write(
        &pgpass,
        format!(
            "# comment\n127.0.0.1:1:*:sluice:wrong\n127.0.0.1:{}:postgres:sluice:{}\n",
            pg.addr().port(),
            pg.password()
        ),
    )
    .expect("write pgpass");
    let pgpass_text = pgpass.to_str().expect("a UTF-8 temp path").to_owned();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&pgpass, fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    assert_eq!(
        open(&pg.url(), &[("PGPASSFILE", &pgpass_text)]).trim(),
        "OPENED"
    );
    // The same file readable by others is ignored, as libpq does.
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&pgpass, fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    assert!(open(&pg.url(), &[("PGPASSFILE", &pgpass_text)]).starts_with("ERROR "));
    // A wrong password in the URL is refused and never printed.
    let wrong = format!("postgres://sluice:hunter2-wrong@{}/postgres", pg.addr());
    let text = open(&wrong, &[]);
    assert!(text.starts_with("ERROR "), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains(pg.password()), "{text}");
}

/// An address nothing listens on: connections to it are refused.
fn refusing_remote() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("address");
    drop(l);
    addr
}
