//! `--ledger FILE` is the SQLite ledger and `--ledger postgres://…` the
//! PostgreSQL one: `ledger show` and `ledger list` say what ran under an id,
//! a JSON ledger of earlier versions is imported once, and a ledger that
//! cannot be read is exit 5 naming it.

use crate::common;

use common::*;

#[test]
fn a_ledger_that_cannot_be_read_is_exit_5_naming_its_path() {
    let w = World::new();
    let ledger = w.path("ledger.json");
    std::fs::write(&ledger, b"{ this is not a ledger").expect("write");
    let run = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "op-1",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(run.code, 5, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ls-refs", "read");
    assert_eq!(doc["result"], "local-error");
    assert_eq!(doc["stopped"], "local-error");
    assert!(doc["attempts"].as_array().unwrap().is_empty());
    assert_eq!(w.proxy.connections().len(), 0, "nothing ran");
    let human = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "op-1",
        "--ledger",
        &p(&ledger),
    ]);
    assert_eq!(human.code, 5);
    assert!(
        human.stderr.contains(&p(&ledger)),
        "the path is named: {human:?}"
    );
}

#[test]
fn ledger_show_and_list_say_what_ran_under_an_id() {
    let w = World::new();
    let ledger = w.path("ledger.db");
    let first = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-17",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.json()["recorded"], true);
    let show = sluice(&[
        "ledger",
        "show",
        "land-17",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(show.code, 0, "{show:?}");
    let doc = show.json();
    assert_eq!(doc["schema"], 1, "{doc}");
    assert_eq!(doc.as_object().map(|o| o.len()), Some(2), "{doc}");
    let entry = &doc["entry"];
    assert_eq!(entry["id"], "land-17");
    assert_eq!(entry["run"]["result"], "succeeded");
    assert_eq!(entry["run"]["attempts"].as_array().unwrap().len(), 1);
    let human = sluice(&["ledger", "show", "land-17", "--ledger", &p(&ledger)]);
    assert_eq!(human.code, 0);
    assert!(human.stdout.starts_with("land-17\t"), "{human:?}");
    assert!(human.stdout.contains("\tsucceeded\t"), "{human:?}");
    let missing = sluice(&["ledger", "show", "land-18", "--ledger", &p(&ledger)]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stdout.is_empty());
    let missing = sluice(&[
        "ledger",
        "show",
        "land-18",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert_eq!(
        missing.json(),
        serde_json::json!({ "schema": 1, "entry": null })
    );
    let list = sluice(&[
        "ledger",
        "list",
        "--since",
        "1h",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(list.code, 0, "{list:?}");
    let doc = list.json();
    assert_eq!(doc["schema"], 1, "{doc}");
    assert_eq!(doc.as_object().map(|o| o.len()), Some(2), "{doc}");
    let ids: Vec<String> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, vec!["land-17".to_string()]);
    let usage = sluice(&["ledger", "show", "land-17"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    assert!(usage.first_err_line().contains("--ledger"), "{usage:?}");
}

#[test]
fn a_json_ledger_of_an_earlier_version_is_imported_and_its_ids_stay_taken() {
    let w = World::new();
    let ledger = w.path("ledger.json");
    std::fs::write(
        &ledger,
        br#"{"operations": {"old-1": {"result": "succeeded", "elapsed_ms": 7, "attempts": []}, "old-2": null}}"#,
    )
    .expect("write");
    let again = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "old-1",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.json()["previous"]["result"], "succeeded");
    let running = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "old-2",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(running.code, 4, "{running:?}");
    assert_eq!(running.json()["previous"]["result"], "running");
    assert_eq!(w.proxy.connections().len(), 0, "nothing ran");
    let mut kept = ledger.as_os_str().to_owned();
    kept.push(".json-imported");
    assert!(std::path::Path::new(&kept).exists());
}

#[test]
fn a_postgres_ledger_rejects_an_id_asked_twice_and_a_database_that_cannot_answer_is_exit_5() {
    let w = World::new();
    let mut pg = sluice_testkit::Postgres::start().expect("PostgreSQL starts");
    let url = pg.url_with_password();
    let first = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-pg",
        "--ledger",
        &url,
        "--json",
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.json()["recorded"], true);
    let calls = w.proxy.connections().len();
    let again = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-pg",
        "--ledger",
        &url,
        "--json",
    ]);
    assert_eq!(again.code, 4, "{again:?}");
    assert_eq!(again.json()["previous"]["result"], "succeeded");
    assert_eq!(w.proxy.connections().len(), calls, "nothing ran");
    let show = sluice(&["ledger", "show", "land-pg", "--ledger", &url, "--json"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert_eq!(show.json()["entry"]["run"]["result"], "succeeded");
    pg.stop().expect("PostgreSQL stops");
    let down = sluice(&[
        "ls-refs",
        &w.proxied(),
        "--operation-id",
        "land-pg-2",
        "--ledger",
        &url,
    ]);
    assert_eq!(down.code, 5, "{down:?}");
    assert_eq!(w.proxy.connections().len(), calls, "nothing ran");
    let named = format!("postgres://{}/postgres", pg.addr());
    assert!(
        down.stderr.contains(&named),
        "the database is named: {down:?}"
    );
    for out in [&first, &again, &show, &down] {
        assert!(!out.stdout.contains(pg.password()), "{out:?}");
        assert!(!out.stderr.contains(pg.password()), "{out:?}");
    }
}
