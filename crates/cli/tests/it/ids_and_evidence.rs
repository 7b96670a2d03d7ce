//! One id names one logical operation, and the evidence agrees with itself,
//! against a real `git daemon`: a read under a generated id leaves no row in
//! the SQLite ledger while one under a caller's id does; a push that reuses
//! a fetch's id is rejected, ran nothing, and says the earlier run was a
//! fetch; a lease the client refuses ends answered with the error and its
//! attempt agreeing on class and phase.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::Value;
use sluice_git::{CallOptions, GitClient, Lease, PushOptions, PushSpec, RefUpdate};
use sluice_ledger::SqliteLedger;
use sluice_policy::{Class, OutcomeKind, Policy};

fn listed_ids(ledger: &std::path::Path) -> Vec<String> {
    let list = sluice(&["ledger", "list", "--ledger", &p(ledger), "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    list.json()["entries"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["id"].as_str().expect("an id").to_string())
        .collect()
}

#[test]
fn a_read_under_a_generated_id_leaves_no_row_and_one_under_a_callers_id_does() {
    let w = World::new();
    let ledger = w.path("ops.db");
    let generated = sluice(&["ls-refs", &w.url(), "--ledger", &p(&ledger), "--json"]);
    assert_eq!(generated.code, 0, "{generated:?}");
    let doc = generated.json();
    assert_eq!(doc["recorded"], Value::Null, "nothing to record: {doc}");
    let generated_id = doc["operation"]["id"].as_str().expect("an id").to_string();

    let named = sluice(&[
        "ls-refs",
        &w.url(),
        "--operation-id",
        "job-1-ls",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(named.code, 0, "{named:?}");
    assert_eq!(named.json()["recorded"], true);

    let ids = listed_ids(&ledger);
    assert_eq!(
        ids,
        ["job-1-ls"],
        "the generated read {generated_id} left a row"
    );
}

#[test]
fn the_library_writes_no_row_for_a_generated_read_into_a_sqlite_ledger() {
    let w = World::new();
    let path = w.path("lib.db");
    let store = Arc::new(SqliteLedger::open(&path).expect("the ledger opens"));
    let policy = Policy::builder().ledger(store.clone()).build();
    let client = GitClient::new(Arc::new(policy));
    let prefixes = ["refs/heads/".to_string()];

    let generated = client
        .ls_refs(&w.url(), &prefixes, &CallOptions::default())
        .expect("a valid URL");
    assert_eq!(generated.kind, OutcomeKind::Succeeded, "{generated:?}");
    assert_eq!(generated.recorded, None);
    let named = client
        .ls_refs(&w.url(), &prefixes, &CallOptions::new().id("job-2-ls"))
        .expect("a valid URL");
    assert_eq!(named.recorded, Some(true));

    assert_eq!(
        store.show(&generated.operation.id).expect("readable"),
        None,
        "a read under a generated id reached the ledger"
    );
    let row = store
        .show("job-2-ls")
        .expect("readable")
        .expect("kept: the caller can ask it again");
    assert_eq!(row.kind.as_deref(), Some("ls-refs"));
}

#[test]
fn a_push_reusing_a_fetchs_id_is_rejected_ran_nothing_and_says_the_earlier_run_was_a_fetch() {
    let w = World::new();
    let ledger = w.path("ops.db");
    let local = w.empty("local.git");
    let work = w.clone_bare("work.git");
    let fetch = sluice(&[
        "fetch",
        &w.proxied(),
        "+refs/heads/*:refs/remotes/origin/*",
        "--repo",
        &p(&local),
        "--operation-id",
        "job-7",
        "--ledger",
        &p(&ledger),
    ]);
    assert_eq!(fetch.code, 0, "{fetch:?}");
    let push = sluice(&[
        "push",
        &w.proxied(),
        "main:refs/heads/job-7",
        "--repo",
        &p(&work),
        "--operation-id",
        "job-7",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(push.code, 4, "{push:?}");
    let doc = push.json();
    check_document(&doc, "push", "write");
    assert_eq!(doc["result"], "rejected");
    assert_eq!(doc["attempts"], serde_json::json!([]));
    assert_eq!(doc["previous"]["kind"], "fetch", "{doc}");
    assert_eq!(doc["previous"]["result"], "succeeded", "{doc}");
    assert_eq!(
        doc["may_have_applied"], false,
        "nothing under job-7 ever wrote: {doc}"
    );
    assert_eq!(w.receive_packs(), 0, "the push never connected");
}

#[test]
fn a_lease_refused_by_the_client_is_answered_with_its_error_and_attempt_agreeing() {
    let w = World::new();
    let work = w.clone_bare("work.git");
    let repo = gix::open(&work).expect("the clone opens");
    let client = GitClient::new(Arc::new(Policy::default()));
    let spec = PushSpec::parse("main:refs/heads/main").expect("a spec");
    // The remote's main is not this value: the lease is stale.
    let stale =
        gix::ObjectId::from_hex(b"1111111111111111111111111111111111111111").expect("an oid");
    let update = RefUpdate::resolve(&spec, Some(Lease::Oid(stale)), &repo).expect("resolves");
    let out = client
        .push(
            &w.proxied(),
            &[update],
            &PushOptions::default(),
            &repo,
            &CallOptions::default(),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Answered, "{out:?}");
    assert_eq!(out.may_have_applied, Some(false));
    let error = out.error.as_ref().expect("the refusal");
    let last = out.attempts.last().expect("one attempt");
    assert_eq!(error.class, Class::Answered);
    assert_eq!(last.class, Some(Class::Answered));
    assert_eq!(
        error.phase, last.phase,
        "the error and its attempt disagree on how far the push got"
    );
    assert_eq!(
        last.phase, "advertised",
        "nothing was sent after the advertisement"
    );
}
