//! The SQLite ledger against real files and threads. The tests that run
//! other processes on one ledger file, and kill them, are
//! `sluice-testbins`' (`crates/testbins/tests/it/sqlite_children.rs`),
//! where their child program lives.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_ledger::{SqliteLedger, SyncMode};
use sluice_policy::{
    AttemptError, Claim, ClaimRequest, Effect, FileLedger, Ledger, Operation, Policy,
    PreviousResult, PreviousRun,
};

/// A run summary as the policy makes one (built through the policy, so a
/// change of `PreviousRun`'s fields needs no change here).
fn a_run() -> PreviousRun {
    Policy::default()
        .run(
            Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9418/repo.git"),
            |ctx| {
                ctx.reached("done");
                Ok::<_, AttemptError>(())
            },
        )
        .summary()
        .expect("a run that ran")
}

/// The earlier run a claim answers for an id still running (no attempts:
/// they are recorded when it ends).
fn running(claim: Claim) -> PreviousRun {
    match claim {
        Claim::Taken(Some(run)) if run.result == PreviousResult::Running => {
            assert!(run.attempts.is_empty(), "{run:?}");
            run
        }
        other => panic!("not a running earlier run: {other:?}"),
    }
}

#[test]
fn pruning_beside_ten_thousand_claims_fails_none_of_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let window = Duration::from_secs(3600);
    let open = || {
        SqliteLedger::options()
            .retention(window)
            .sync(SyncMode::Normal)
            .open(&path)
            .expect("opens")
    };
    drop(open());
    let add_expired = |conn: &mut rusqlite::Connection, from: u64, n: u64| {
        let tx = conn.transaction().expect("begin");
        for i in from..from + n {
            tx.execute(
                "INSERT INTO claims (id, claimed_at) VALUES (?1, 1000)",
                [format!("old-{i}")],
            )
            .expect("insert");
        }
        tx.commit().expect("commit");
    };
    let mut raw = rusqlite::Connection::open(&path).expect("raw connection");
    raw.busy_timeout(Duration::from_secs(30)).expect("timeout");
    add_expired(&mut raw, 0, 20_000);

    // The pruner prunes the first 20,000 expired rows at once, then adds
    // 2,000 more and prunes again each time the claimer has made another
    // 1,000 claims; the claimer waits once, halfway, for the first prune to
    // have ended, so the two surely overlap.
    let (progress, claims_made) = mpsc::channel::<()>();
    let (first_prune_done, first_prune) = mpsc::channel::<()>();
    let pruner = {
        let ledger = open();
        std::thread::spawn(move || {
            let mut pruned = ledger.prune(SystemTime::now()).expect("prune");
            first_prune_done.send(()).expect("the claimer waits");
            let mut next = 20_000;
            while claims_made.recv().is_ok() {
                add_expired(&mut raw, next, 2_000);
                next += 2_000;
                pruned += ledger.prune(SystemTime::now()).expect("prune");
            }
            (pruned, ledger)
        })
    };
    let claimer = open();
    for i in 0..10_000 {
        let id = format!("new-{i}");
        assert_eq!(
            claimer.claim(&req(&id)).expect("no claim fails"),
            Claim::Claimed
        );
        if i % 1_000 == 999 {
            progress.send(()).expect("the pruner listens");
        }
        if i == 5_000 {
            first_prune.recv().expect("the first prune ends");
        }
    }
    drop(progress);
    let (pruned, ledger) = pruner.join().expect("the pruner ends");
    // The claimer's first claim pruned one slice by itself.
    let by_claimer = u64::from(sluice_ledger::SQLITE_PRUNE_SLICE);
    assert!(pruned >= 40_000 - by_claimer, "pruned {pruned} of 40,000");
    ledger.prune(SystemTime::now()).expect("a last prune");
    let left = ledger.list(UNIX_EPOCH).expect("list");
    assert_eq!(left.len(), 10_000);
    assert!(left.iter().all(|e| e.id.starts_with("new-")));
}

#[test]
fn a_json_ledger_is_imported_once_and_kept_beside_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger");
    let run = a_run();
    let json = FileLedger::new(&path);
    assert_eq!(json.claim(&req("running")).expect("claim"), Claim::Claimed);
    assert_eq!(json.claim(&req("done")).expect("claim"), Claim::Claimed);
    json.finish(&done("done", &run)).expect("finish");
    let original = fs::read(&path).expect("the JSON ledger");
    assert_eq!(original.first(), Some(&b'{'));

    let ledger = SqliteLedger::open(&path).expect("imports");
    assert!(fs::read(&path)
        .expect("db")
        .starts_with(b"SQLite format 3\0"));
    let mut kept = path.clone().into_os_string();
    kept.push(".json-imported");
    assert_eq!(fs::read(&kept).expect("the JSON is kept"), original);
    let earlier = running(ledger.claim(&req("running")).expect("claim"));
    assert_eq!(earlier.may_have_applied, Some(true), "a write");
    assert_eq!(
        ledger.claim(&req("done")).expect("claim"),
        Claim::Taken(Some(run.clone()))
    );
    assert_eq!(ledger.claim(&req("new")).expect("claim"), Claim::Claimed);
    let done = ledger.show("done").expect("show").expect("imported");
    assert_eq!(done.run, Some(run));
    assert!(done.finished_at.is_some());
    drop(ledger);

    // Opened again: the database, not a second import.
    let again = SqliteLedger::open(&path).expect("reopens");
    running(again.claim(&req("new")).expect("claim"));
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".import."))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn a_corrupt_json_ledger_is_refused_naming_its_path_and_left_untouched() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger");
    let corrupt = b"{\"operations\": {\"a\": nul";
    fs::write(&path, corrupt).expect("write");
    let err = SqliteLedger::open(&path).expect_err("refused");
    assert_eq!(err.path, path.display().to_string());
    assert!(err.to_string().contains(&path.display().to_string()));
    assert!(err.to_string().contains("JSON"), "{err}");
    assert_eq!(fs::read(&path).expect("still there"), corrupt);
    let mut kept = path.clone().into_os_string();
    kept.push(".json-imported");
    assert!(!Path::new(&kept).exists());
}

#[test]
fn a_file_neither_sqlite_nor_json_is_refused_naming_its_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("notes.txt");
    fs::write(&path, "not a ledger\n").expect("write");
    let err = SqliteLedger::open(&path).expect_err("refused");
    assert_eq!(err.path, path.display().to_string());
    assert_eq!(fs::read(&path).expect("untouched"), b"not a ledger\n");
}

#[test]
fn a_sqlite_database_of_something_else_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&path).expect("create");
    conn.execute_batch("CREATE TABLE t (x)").expect("table");
    drop(conn);
    let err = SqliteLedger::open(&path).expect_err("refused");
    assert!(err.to_string().contains("not a sluice ledger"), "{err}");
}

#[test]
fn a_claimed_id_is_taken_while_running_and_carries_its_run_once_finished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = SqliteLedger::open(dir.path().join("l.db")).expect("opens");
    let run = a_run();
    assert_eq!(ledger.claim(&req("x")).expect("claim"), Claim::Claimed);
    running(ledger.claim(&req("x")).expect("claim"));
    ledger.finish(&done("x", &run)).expect("finish");
    assert_eq!(
        ledger.claim(&req("x")).expect("claim"),
        Claim::Taken(Some(run.clone()))
    );
    // A finish without a claim (or after a prune) keeps its row too.
    ledger.finish(&done("y", &run)).expect("finish");
    assert_eq!(
        ledger.claim(&req("y")).expect("claim"),
        Claim::Taken(Some(run))
    );
    assert!(ledger.keeps_generated_ids());
}

#[test]
fn show_and_list_read_the_rows_back_and_serialize_times_as_rfc3339() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = SqliteLedger::open(dir.path().join("l.db")).expect("opens");
    let before = SystemTime::now() - Duration::from_secs(1);
    assert_eq!(ledger.show("a").expect("show"), None);
    assert_eq!(ledger.claim(&req("a")).expect("claim"), Claim::Claimed);
    assert_eq!(ledger.claim(&req("b")).expect("claim"), Claim::Claimed);
    ledger.finish(&done("b", &a_run())).expect("finish");
    let a = ledger.show("a").expect("show").expect("kept");
    assert!(a.claimed_at >= before && a.finished_at.is_none() && a.run.is_none());
    let all = ledger.list(before).expect("list");
    assert_eq!(
        all.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().len(),
        2
    );
    let later = SystemTime::now() + Duration::from_secs(60);
    assert!(ledger.list(later).expect("list").is_empty());
    let json = serde_json::to_value(&all[0]).expect("serializes");
    let at = json["claimed_at"].as_str().expect("a string");
    assert!(at.ends_with('Z') && at.contains('T'), "{at}");
}

#[test]
fn prune_deletes_only_the_rows_claimed_before_the_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let window = Duration::from_secs(3600);
    let ledger = SqliteLedger::options()
        .retention(window)
        .open(dir.path().join("l.db"))
        .expect("opens");
    for i in 0..1234 {
        assert_eq!(
            ledger.claim(&req(&format!("id-{i}"))).expect("claim"),
            Claim::Claimed
        );
    }
    let now = SystemTime::now();
    assert_eq!(
        ledger.prune(now).expect("prune"),
        0,
        "all within the window"
    );
    let later = now + window + Duration::from_secs(1);
    assert_eq!(ledger.prune(later).expect("prune"), 1234, "several batches");
    assert_eq!(ledger.claim(&req("id-0")).expect("claim"), Claim::Claimed);
}

#[test]
fn prune_walks_every_slice_and_keeps_the_rows_inside_the_window() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("l.db");
    let window = Duration::from_secs(3600);
    drop(SqliteLedger::open(&path).expect("creates"));
    let mut raw = rusqlite::Connection::open(&path).expect("raw connection");
    let now = SystemTime::now();
    let recent = now
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let tx = raw.transaction().expect("begin");
    // Three slices and a bit; every seventh row is recent.
    let rows = 3 * u64::from(sluice_ledger::SQLITE_PRUNE_SLICE) + 345;
    let mut kept = 0;
    for i in 0..rows {
        let at = if i % 7 == 0 { recent } else { 1000 };
        kept += u64::from(i % 7 == 0);
        tx.execute(
            "INSERT INTO claims (id, claimed_at) VALUES (?1, ?2)",
            rusqlite::params![format!("id-{i:06}"), at],
        )
        .expect("insert");
    }
    tx.commit().expect("commit");
    let ledger = SqliteLedger::options()
        .retention(window)
        .open(&path)
        .expect("opens");
    assert_eq!(ledger.prune(now).expect("prune"), rows - kept);
    let left = ledger.list(UNIX_EPOCH).expect("list");
    assert_eq!(left.len() as u64, kept);
    assert!(left
        .iter()
        .all(|e| e.claimed_at >= now - Duration::from_secs(1)));
}

#[test]
fn a_schema_1_ledger_is_brought_to_the_current_schema_keeping_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("l.db");
    {
        let raw = rusqlite::Connection::open(&path).expect("raw connection");
        raw.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE claims (id TEXT PRIMARY KEY NOT NULL, claimed_at INTEGER NOT NULL,
                                  finished_at INTEGER, run TEXT) WITHOUT ROWID;
             CREATE INDEX claims_claimed_at ON claims (claimed_at);
             INSERT INTO claims (id, claimed_at) VALUES ('old', 4102444800000);
             PRAGMA application_id = 1936485479; PRAGMA user_version = 1;",
        )
        .expect("a schema-1 ledger");
    }
    let ledger = SqliteLedger::open(&path).expect("opens");
    assert!(matches!(
        ledger.claim(&req("old")).expect("claim"),
        Claim::Taken(_)
    ));
    assert_eq!(ledger.claim(&req("new")).expect("claim"), Claim::Claimed);
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    let version: i32 = raw
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, 5);
    let indexes: i64 = raw
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'claims_claimed_at'",
            [],
            |r| r.get(0),
        )
        .expect("schema");
    assert_eq!(indexes, 0, "the claim-time index is gone");
}

#[test]
fn a_claim_prunes_one_batch_by_itself_at_most_once_a_minute() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("l.db");
    drop(SqliteLedger::open(&path).expect("creates"));
    let raw = rusqlite::Connection::open(&path).expect("raw connection");
    let expire = |id: &str| {
        raw.execute(
            "INSERT INTO claims (id, claimed_at) VALUES (?1, 1000)",
            [id],
        )
        .expect("an expired row");
    };
    expire("old-1");
    let ledger = SqliteLedger::open(&path).expect("opens");
    assert!(ledger.show("old-1").expect("show").is_some());
    assert_eq!(ledger.claim(&req("a")).expect("claim"), Claim::Claimed);
    assert!(ledger.show("old-1").expect("show").is_none(), "pruned");
    expire("old-2");
    assert_eq!(ledger.claim(&req("b")).expect("claim"), Claim::Claimed);
    assert!(
        ledger.show("old-2").expect("show").is_some(),
        "not pruned again within the minute"
    );
    assert_eq!(ledger.prune(SystemTime::now()).expect("prune"), 1);
}

#[test]
fn the_database_is_in_wal_mode_in_either_sync_mode() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (n, sync) in [SyncMode::Full, SyncMode::Normal].into_iter().enumerate() {
        let path = dir.path().join(format!("l{n}.db"));
        let ledger = SqliteLedger::options()
            .sync(sync)
            .open(&path)
            .expect("opens");
        assert_eq!(ledger.settings().sync_mode(), sync);
        assert_eq!(ledger.claim(&req("a")).expect("claim"), Claim::Claimed);
        let raw = rusqlite::Connection::open(&path).expect("raw connection");
        let mode: String = raw
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .expect("journal mode");
        assert_eq!(mode, "wal");
    }
}

/// The files in `dir`, by name.
fn names_in(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .expect("readable")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn a_claim_records_what_ran_and_a_finish_keeps_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = SqliteLedger::open(dir.path().join("ledger.db")).expect("opens");
    let refs = vec![
        "+refs/heads/*:refs/remotes/origin/*".to_string(),
        "refs/tags/v1:refs/tags/v1".to_string(),
    ];
    let claim = req("what-1")
        .operation("fetch", "https://x-access-token:s3cret@example.com/o/r.git")
        .refs(&refs);
    assert_eq!(ledger.claim(&claim).expect("claim"), Claim::Claimed);
    let running = ledger.show("what-1").expect("show").expect("kept");
    assert_eq!(running.kind.as_deref(), Some("fetch"));
    assert_eq!(
        running.remote.as_deref(),
        Some("https://example.com/o/r.git"),
        "no user info"
    );
    assert_eq!(running.refs.as_deref(), Some(refs.as_slice()));
    // The finish does not replace what the claim wrote.
    let run = a_run();
    let other = vec!["refs/heads/other".to_string()];
    ledger
        .finish(
            &done("what-1", &run)
                .operation("push", "git://elsewhere/r.git")
                .refs(&other),
        )
        .expect("finish");
    let finished = ledger.show("what-1").expect("show").expect("kept");
    assert_eq!(finished.kind.as_deref(), Some("fetch"));
    assert_eq!(finished.refs.as_deref(), Some(refs.as_slice()));
    assert_eq!(finished.run, Some(run.clone()));
    // An id never claimed (a generated one) gets what ran from its finish.
    ledger
        .finish(
            &done("what-2", &run)
                .operation("ls-refs", "git://h/r.git")
                .refs(&[]),
        )
        .expect("finish");
    let generated = ledger.show("what-2").expect("show").expect("kept");
    assert_eq!(generated.kind.as_deref(), Some("ls-refs"));
    assert_eq!(generated.remote.as_deref(), Some("git://h/r.git"));
    assert_eq!(generated.refs, Some(Vec::new()));
    // A claim that names nothing records nothing.
    assert_eq!(ledger.claim(&req("what-3")).expect("claim"), Claim::Claimed);
    let bare = ledger.show("what-3").expect("show").expect("kept");
    assert_eq!((bare.kind, bare.remote, bare.refs), (None, None, None));
}

/// A ledger file of schema 2 (before what ran was kept), as an earlier
/// version wrote it, with one finished row and one running.
fn schema_2_file(path: &Path, run: &PreviousRun) {
    let conn = rusqlite::Connection::open(path).expect("creates");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE claims (
             id TEXT PRIMARY KEY NOT NULL,
             claimed_at INTEGER NOT NULL,
             finished_at INTEGER,
             run TEXT
         ) WITHOUT ROWID;
         PRAGMA application_id = 1936485479;
         PRAGMA user_version = 2;",
    )
    .expect("schema 2");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    conn.execute(
        "INSERT INTO claims VALUES ('old-done', ?1, ?1, ?2), ('old-running', ?1, NULL, NULL)",
        rusqlite::params![now, serde_json::to_string(run).expect("json")],
    )
    .expect("rows");
}

/// The file's schema version, read through a connection that removes its
/// WAL files when it closes (a read-only one would leave them).
fn user_version(path: &Path) -> i32 {
    rusqlite::Connection::open(path)
        .expect("opens")
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("reads")
}

#[test]
fn a_schema_2_ledger_is_read_as_it_is_and_migrated_when_opened_for_writing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    let run = a_run();
    schema_2_file(&path, &run);
    let before = names_in(dir.path());
    let bytes = fs::read(&path).expect("read");

    // A reader reads it as it is, and writes nothing.
    let reader = SqliteLedger::open_read_only(&path).expect("opens to read");
    let rows = reader.list(UNIX_EPOCH).expect("list");
    let ids: Vec<&str> = rows.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["old-done", "old-running"]);
    assert_eq!(rows[0].run, Some(run.clone()));
    assert!(rows.iter().all(|e| e.kind.is_none() && e.refs.is_none()));
    let e = reader
        .claim(&req("new"))
        .expect_err("a reader claims nothing");
    assert_eq!(e.source.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    drop(reader);
    assert_eq!(names_in(dir.path()), before, "nothing left beside it");
    assert_eq!(fs::read(&path).expect("read"), bytes, "not written");
    assert_eq!(user_version(&path), 2, "not migrated by a read");

    // A writer brings it to schema 5: the old rows stay, new ones say what
    // ran. The old claim still running is answered so, of a kind and
    // effect not known (a write may have applied).
    let writer = SqliteLedger::open(&path).expect("opens and migrates");
    assert_eq!(user_version(&path), 5);
    let old = running(writer.claim(&req("old-running")).expect("claim"));
    assert_eq!(
        (old.kind, old.may_have_applied),
        (None, Some(true)),
        "nothing says it did not write"
    );
    assert_eq!(
        writer.claim(&req("old-done")).expect("claim"),
        Claim::Taken(Some(run))
    );
    let refs = vec!["refs/heads/".to_string()];
    let claim = writer
        .claim(&req("new").operation("ls-refs", "git://h/r.git").refs(&refs))
        .expect("claim");
    assert_eq!(claim, Claim::Claimed);
    let new = writer.show("new").expect("show").expect("kept");
    assert_eq!(new.kind.as_deref(), Some("ls-refs"));
    assert_eq!(new.refs, Some(refs));
    assert!(writer
        .show("old-running")
        .expect("show")
        .expect("kept")
        .kind
        .is_none());
}

#[test]
fn a_schema_3_ledgers_claim_still_running_keeps_its_kind_once_migrated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("three.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("creates");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE claims (id TEXT PRIMARY KEY NOT NULL, claimed_at INTEGER NOT NULL,
                 finished_at INTEGER, run TEXT, kind TEXT, remote TEXT, refs TEXT) WITHOUT ROWID;
             PRAGMA application_id = 1936485479;
             PRAGMA user_version = 3;",
        )
        .expect("schema 3");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        conn.execute(
            "INSERT INTO claims (id, claimed_at, kind, remote) VALUES ('job', ?1, 'fetch', 'git://h/r.git')",
            rusqlite::params![now],
        )
        .expect("a claim still running");
    }
    let ledger = SqliteLedger::open(&path).expect("opens and migrates");
    assert_eq!(user_version(&path), 5);
    let earlier = running(
        ledger
            .claim(&req("job").operation("push", "git://h/r.git"))
            .expect("claim"),
    );
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "its effect was not recorded: nothing says it did not write"
    );
}

#[test]
fn a_read_never_creates_a_ledger_and_names_the_path_it_did_not_find() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("typo.db");
    let e = SqliteLedger::open_read_only(&path).expect_err("nothing there");
    assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let e = sluice_ledger::Store::open_read(&path, LEFT).expect_err("nothing there");
    assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound, "{e}");
    assert!(names_in(dir.path()).is_empty(), "nothing created");
    // A JSON ledger not imported yet is read by no one and left as it is.
    let json = dir.path().join("ledger.json");
    fs::write(&json, br#"{"operations": {"a": null}}"#).expect("write");
    let e = SqliteLedger::open_read_only(&json).expect_err("not imported");
    assert!(e.to_string().contains("JSON ledger"), "{e}");
    assert_eq!(
        names_in(dir.path()),
        BTreeSet::from(["ledger.json".to_string()])
    );
}

#[test]
fn importing_a_json_ledger_leaves_no_lock_file_beside_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.json");
    fs::write(&path, br#"{"operations": {"a": null}}"#).expect("write");
    let ledger = SqliteLedger::open(&path).expect("imports");
    let a = running(ledger.claim(&req("a")).expect("claim"));
    assert_eq!((a.kind, a.may_have_applied), (None, Some(true)));
    drop(ledger);
    assert_eq!(
        names_in(dir.path()),
        BTreeSet::from([
            "ledger.json".to_string(),
            "ledger.json.json-imported".to_string()
        ])
    );
}

#[test]
fn a_claim_still_running_is_answered_with_its_kind_effect_and_age() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    let ledger = SqliteLedger::open(&path).expect("opens");
    let fetch = read_req("job").operation("fetch", "git://h/r.git");
    let push = req("job").operation("push", "git://h/r.git");
    assert_eq!(ledger.claim(&fetch).expect("claim"), Claim::Claimed);
    // Another value over the file (another process) asks with a push.
    let other = SqliteLedger::open(&path).expect("opens");
    let earlier = running(other.claim(&push).expect("claim"));
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(earlier.may_have_applied, None, "the earlier run is a read");
    assert!(earlier.elapsed_ms < 60_000, "{earlier:?}");

    assert_eq!(
        ledger.claim(&with_id(push, "w")).expect("claim"),
        Claim::Claimed
    );
    let earlier = running(other.claim(&with_id(fetch, "w")).expect("claim"));
    assert_eq!(earlier.kind.as_deref(), Some("push"));
    assert_eq!(
        earlier.may_have_applied,
        Some(true),
        "a write still running"
    );

    // Claimed an hour ago: the answer says how long it has not ended.
    rusqlite::Connection::open(&path)
        .expect("raw connection")
        .execute(
            "UPDATE claims SET claimed_at = claimed_at - 3600000 WHERE id = 'job'",
            [],
        )
        .expect("an hour earlier");
    // Its deadline (plus the finish's floor) long past: abandoned.
    let Claim::Taken(Some(earlier)) = other.claim(&push).expect("claim") else {
        panic!("taken");
    };
    assert_eq!(earlier.result, PreviousResult::Abandoned, "{earlier:?}");
    assert!(earlier.elapsed_ms >= 3_600_000, "{earlier:?}");
    // Once it ends, its run is the answer.
    let run = a_run();
    ledger.finish(&done("job", &run)).expect("finish");
    assert_eq!(other.claim(&push).expect("claim"), Claim::Taken(Some(run)));
}

#[test]
fn a_json_ledgers_claim_still_running_is_imported_with_its_kind_and_effect() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger");
    let fetch = read_req("fetching").operation("fetch", "git://h/r.git");
    let push = req("pushing").operation("push", "git://h/r.git");
    let json = FileLedger::new(&path);
    assert_eq!(json.claim(&fetch).expect("claim"), Claim::Claimed);
    assert_eq!(json.claim(&push).expect("claim"), Claim::Claimed);

    let ledger = SqliteLedger::open(&path).expect("imports");
    let earlier = running(ledger.claim(&with_id(push, "fetching")).expect("claim"));
    assert_eq!(earlier.kind.as_deref(), Some("fetch"));
    assert_eq!(earlier.may_have_applied, None, "a read");
    let earlier = running(ledger.claim(&with_id(fetch, "pushing")).expect("claim"));
    assert_eq!(earlier.kind.as_deref(), Some("push"));
    assert_eq!(earlier.may_have_applied, Some(true), "a write");
    let row = ledger.show("pushing").expect("show").expect("kept");
    assert_eq!((row.run, row.finished_at), (None, None), "still running");
}

/// A claim of `id` (a read) with [`LEFT`] left.
fn read_req(id: &str) -> ClaimRequest<'_> {
    ClaimRequest::new(id, Effect::Read, LEFT)
}

/// `r` for another id.
fn with_id<'a>(mut r: ClaimRequest<'a>, id: &'a str) -> ClaimRequest<'a> {
    r.id = id;
    r
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
