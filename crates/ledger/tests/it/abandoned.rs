//! A claim without a finish, in the stores that outlive a process: its
//! deadline, host and pid recorded at the claim, the phase its run recorded
//! before its risky step, and `abandoned` once the deadline plus the
//! finish's floor has passed — SQLite by the reader's clock, PostgreSQL by
//! the database's. Older rows (no deadline recorded) stay `running`.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use sluice_ledger::{EntryState, PostgresLedger, SqliteLedger, Store};
use sluice_policy::{
    Claim, ClaimRequest, Effect, FinishRequest, Ledger, PreviousResult, PreviousRun,
    ProgressRequest,
};
use sluice_testkit::Postgres;

const LEFT: Duration = Duration::from_secs(10);

/// The earlier run a claim of a taken id answers.
fn taken(ledger: &dyn Ledger, id: &str) -> PreviousRun {
    match ledger
        .claim(&ClaimRequest::new(id, Effect::Write, LEFT))
        .expect("the ledger answers")
    {
        Claim::Taken(Some(run)) => run,
        other => panic!("{id} is taken, got {other:?}"),
    }
}

/// A push claimed on `builder-1` by pid 4242 with a 60 s deadline, which
/// recorded that it was about to send its pack; and a read beside it.
fn claim_push_and_read(ledger: &dyn Ledger) {
    let refs = vec!["0123:refs/heads/main".to_string()];
    let push = ClaimRequest::new("push-1", Effect::Write, Duration::from_secs(60))
        .operation("push", "git://127.0.0.1/r.git")
        .refs(&refs)
        .origin(Some("builder-1"), 4242);
    assert_eq!(ledger.claim(&push).unwrap(), Claim::Claimed);
    ledger
        .progress(&ProgressRequest::new("push-1", "pack-sent", LEFT))
        .unwrap();
    let read = ClaimRequest::new("read-1", Effect::Read, Duration::from_secs(60))
        .operation("fetch", "git://127.0.0.1/r.git")
        .origin(Some("builder-1"), 4242);
    assert_eq!(ledger.claim(&read).unwrap(), Claim::Claimed);
    // Within its deadline: running, with what it recorded.
    let run = taken(ledger, "push-1");
    assert_eq!(run.result, PreviousResult::Running);
    assert_eq!(run.phase.as_deref(), Some("pack-sent"));
    assert_eq!(
        (run.host.as_deref(), run.pid),
        (Some("builder-1"), Some(4242))
    );
}

/// What both stores answer once the claims are two minutes old (past the
/// 60 s deadline plus the floor).
fn check_abandoned(ledger: &dyn Ledger, show: impl Fn(&str) -> sluice_ledger::LedgerEntry) {
    let run = taken(ledger, "push-1");
    assert_eq!(run.result, PreviousResult::Abandoned, "{run:?}");
    assert_eq!(run.may_have_applied, Some(true));
    assert_eq!(run.phase.as_deref(), Some("pack-sent"));
    assert_eq!(
        (run.host.as_deref(), run.pid),
        (Some("builder-1"), Some(4242))
    );
    assert!(run.elapsed_ms >= 120_000, "{run:?}");
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(json["result"], "abandoned");
    assert_eq!(json["phase"], "pack-sent");
    assert_eq!(json["host"], "builder-1");
    assert_eq!(json["pid"], 4242);

    let read = taken(ledger, "read-1");
    assert_eq!(read.result, PreviousResult::Abandoned);
    assert_eq!(read.may_have_applied, None, "a read applies nothing");
    assert_eq!(read.phase, None);

    let entry = show("push-1");
    assert_eq!(entry.state, EntryState::Abandoned);
    assert_eq!(entry.run, None);
    assert_eq!(entry.deadline_ms, Some(60_000));
    assert_eq!(entry.phase.as_deref(), Some("pack-sent"));
    assert_eq!(entry.host.as_deref(), Some("builder-1"));
    assert_eq!(entry.pid, Some(4242));
    let json = serde_json::to_value(&entry).unwrap();
    assert_eq!(json["state"], "abandoned");
    assert_eq!(json["phase"], "pack-sent");
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "id",
        "claimed_at",
        "finished_at",
        "state",
        "kind",
        "remote",
        "refs",
        "deadline_ms",
        "phase",
        "host",
        "pid",
        "run",
    ] {
        assert!(keys.contains(&key), "{key} in {json}");
    }

    // A finish written late still ends it: finished, the claim's host and
    // pid kept with the run; a late progress changes nothing.
    let mut done = PreviousRun::running(Some("push".into()), Some(Effect::Write), Duration::ZERO);
    done.result = PreviousResult::Unknown;
    ledger
        .finish(&FinishRequest::new("push-1", Effect::Write, &done, LEFT))
        .unwrap();
    ledger
        .progress(&ProgressRequest::new("push-1", "reported", LEFT))
        .unwrap();
    let run = taken(ledger, "push-1");
    assert_eq!(run.result, PreviousResult::Unknown);
    assert_eq!(
        (run.host.as_deref(), run.pid),
        (Some("builder-1"), Some(4242))
    );
    let entry = show("push-1");
    assert_eq!(entry.state, EntryState::Finished);
    assert_eq!(entry.phase.as_deref(), Some("pack-sent"));
}

#[test]
fn sqlite_a_claim_without_a_finish_is_abandoned_past_its_deadline_with_its_phase() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(&path).unwrap();
    claim_push_and_read(&ledger);
    assert_eq!(
        ledger.show("push-1").unwrap().unwrap().state,
        EntryState::Running
    );
    // Two minutes earlier, as a process that died then left them.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE claims SET claimed_at = claimed_at - 120000", [])
        .unwrap();
    let reader = SqliteLedger::open_read_only(&path).unwrap();
    check_abandoned(&ledger, |id| reader.show(id).unwrap().expect("kept"));
    let listed = reader.list(UNIX_EPOCH).unwrap();
    let read = listed.iter().find(|e| e.id == "read-1").expect("listed");
    assert_eq!(read.state, EntryState::Abandoned);
}

#[test]
fn sqlite_a_schema_4_ledger_is_migrated_to_5_and_its_old_claims_stay_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("four.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE claims (id TEXT PRIMARY KEY NOT NULL, claimed_at INTEGER NOT NULL,
                 finished_at INTEGER, run TEXT, kind TEXT, remote TEXT, refs TEXT, effect TEXT)
                 WITHOUT ROWID;
             PRAGMA application_id = 1936485479;
             PRAGMA user_version = 4;
             INSERT INTO claims (id, claimed_at, kind, effect) VALUES ('old', 1000, 'push', 'write');",
        )
        .unwrap();
    }
    // A reader reads it as it is.
    let reader = SqliteLedger::open_read_only(&path).unwrap();
    let old = reader.show("old").unwrap().expect("kept");
    assert_eq!(old.state, EntryState::Running, "no deadline recorded");
    assert_eq!(
        (old.deadline_ms, old.phase, old.host, old.pid),
        (None, None, None, None)
    );
    drop(reader);
    let ledger = SqliteLedger::open(&path).unwrap();
    let version: i32 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5);
    let run = taken(&ledger, "old");
    assert_eq!(run.result, PreviousResult::Running);
    assert_eq!(run.may_have_applied, Some(true));
    claim_push_and_read(&ledger);
}

#[test]
fn postgres_a_claim_without_a_finish_is_abandoned_by_the_databases_clock() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let ledger = PostgresLedger::open(&url).unwrap();
    claim_push_and_read(&ledger);
    assert_eq!(
        ledger.show("push-1").unwrap().unwrap().state,
        EntryState::Running
    );
    // Two minutes earlier by the server's clock (this process's clock is
    // not asked).
    pg.psql("UPDATE sluice_ledger SET claimed_at = claimed_at - 120000")
        .expect("psql");
    let reader = Store::open_read(Path::new(&url), LEFT).unwrap();
    check_abandoned(&ledger, |id| reader.show(id).unwrap().expect("kept"));
    assert_eq!(
        pg.psql("SELECT version FROM sluice_schema WHERE component = 'ledger'")
            .expect("psql")
            .trim(),
        "4"
    );
}

#[test]
fn postgres_a_schema_3_database_is_migrated_to_4_and_its_old_claims_stay_running() {
    let pg = Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    pg.psql(
        "CREATE TABLE sluice_schema (component text PRIMARY KEY, version integer NOT NULL);
         INSERT INTO sluice_schema VALUES ('ledger', 3);
         CREATE TABLE sluice_ledger (id text PRIMARY KEY, claimed_at bigint NOT NULL,
             finished_at bigint, run text, token text, kind text, remote text, refs text,
             effect text);
         CREATE INDEX sluice_ledger_claimed_at ON sluice_ledger (claimed_at);
         CREATE TABLE sluice_retry_budget (host text PRIMARY KEY,
             tokens double precision NOT NULL, at timestamptz NOT NULL, spent boolean NOT NULL);
         INSERT INTO sluice_ledger (id, claimed_at, kind, effect)
             VALUES ('old', (extract(epoch from now()) * 1000)::bigint - 3600000, 'push', 'write');",
    )
    .expect("the schema of version 3");
    let reader = Store::open_read(Path::new(&url), LEFT).unwrap();
    let old = reader.show("old").unwrap().expect("kept");
    assert_eq!(old.state, EntryState::Running, "no deadline recorded");
    assert_eq!(
        (old.deadline_ms, old.phase, old.host, old.pid),
        (None, None, None, None)
    );
    let ledger = PostgresLedger::open(&url).unwrap();
    assert_eq!(
        pg.psql("SELECT version FROM sluice_schema WHERE component = 'ledger'")
            .expect("psql")
            .trim(),
        "4"
    );
    let run = taken(&ledger, "old");
    assert_eq!(run.result, PreviousResult::Running);
    claim_push_and_read(&ledger);
}
