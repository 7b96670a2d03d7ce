//! `--json`: exactly one document on stdout with every field of the
//! contract, the right types, for ls-refs, fetch, push, http get and
//! failures.

use crate::common;

use common::*;
use sluice_testkit::{repo, Fault};

#[test]
fn ls_refs_json_has_every_contract_field_and_the_peeled_tag() {
    let w = World::new();
    let run = sluice(&["--json", "ls-refs", &w.url()]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ls-refs", "read");
    assert_eq!(doc["result"], "succeeded");
    assert_eq!(doc["operation"]["remote"], w.url());
    let refs = doc["value"].as_array().expect("refs");
    let tag = refs
        .iter()
        .find(|r| r["name"] == "refs/tags/v1.0")
        .expect("the annotated tag");
    assert!(tag["peeled"].is_string(), "{doc}");
    let main = refs
        .iter()
        .find(|r| r["name"] == "refs/heads/main")
        .expect("main");
    assert_eq!(
        main["oid"].as_str(),
        repo::rev_parse(&w.server(), "refs/heads/main").as_deref()
    );
}

#[test]
fn fetch_json_lists_the_refs_stored() {
    let w = World::new();
    let local = w.empty("local.git");
    let run = sluice(&[
        "fetch",
        &w.url(),
        "+refs/heads/*:refs/remotes/origin/*",
        "--repo",
        &p(&local),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "fetch", "read");
    let refs = doc["value"].as_array().expect("refs");
    assert!(
        refs.iter().any(|r| r["remote_ref"] == "refs/heads/main"
            && r["local_ref"] == "refs/remotes/origin/main"),
        "{doc}"
    );
}

#[test]
fn push_json_reports_each_ref_and_a_rejection_keeps_its_reason() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "next");
    let run = sluice(&[
        "push",
        &w.url(),
        "main:refs/heads/main",
        "main~1:refs/heads/release",
        "--repo",
        &p(&local),
        "--json",
        "--operation-id",
        "push-1",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    check_document(&doc, "push", "write");
    assert_eq!(doc["result"], "answered");
    assert_eq!(doc["operation"]["id"], "push-1");
    let refs = doc["value"].as_array().expect("refs");
    assert_eq!(refs[0]["ref"], "refs/heads/main");
    assert_eq!(refs[0]["status"], "ok");
    assert_eq!(refs[1]["status"], "rejected");
    assert_eq!(refs[1]["reason"], "non-fast-forward");
    assert_eq!(doc["may_have_applied"], true, "main landed: {doc}");
    assert_eq!(repo::rev_parse(&w.server(), "refs/heads/main"), Some(tip));
}

#[test]
fn a_push_whose_report_is_cut_is_settled_by_reading_and_says_so_in_json() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let tip = repo::commit_on(&local, "main", "next");
    w.proxy.set_fault(Fault::CutBeforeReport, 1);
    let run = sluice(&[
        "push",
        &w.proxied(),
        "main:refs/heads/main",
        "--repo",
        &p(&local),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "push", "write");
    assert_eq!(doc["attempts"].as_array().map(Vec::len), Some(1), "{doc}");
    assert_eq!(doc["attempts"][0]["class"], "unknown");
    assert_eq!(doc["attempts"][0]["phase"], "pack-sent");
    assert_eq!(doc["reconciled"]["verdict"], "landed", "{doc}");
    assert_eq!(
        doc["reconciled"]["observed"]["refs/heads/main"],
        tip.as_str()
    );
    assert_eq!(w.receive_packs(), 1, "not pushed again");
}

#[test]
fn a_failure_json_is_unknown_with_every_attempt_classed() {
    let url = format!("git://127.0.0.1:{}/small.git", dead_port());
    let run = sluice(&[
        "ls-refs",
        &url,
        "--json",
        "--deadline",
        "800ms",
        "--attempt-timeout",
        "300ms",
    ]);
    assert_eq!(run.code, 3, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ls-refs", "read");
    assert_eq!(doc["result"], "unknown");
    assert_eq!(doc["stopped"], "deadline");
    assert_eq!(doc["deadline_ms"], 800);
    assert!(doc["value"].is_null());
    let attempts = doc["attempts"].as_array().expect("attempts");
    assert!(attempts.len() >= 2, "{doc}");
    assert!(
        attempts
            .iter()
            .all(|a| a["class"] == "unjudged" && a["phase"] == "connect"),
        "{doc}"
    );
}

#[test]
fn a_rejected_id_json_carries_the_earlier_run() {
    let w = World::new();
    let ledger = w.path("ledger.db");
    let args = [
        "ls-refs",
        &w.url(),
        "--operation-id",
        "again",
        "--ledger",
        &p(&ledger),
        "--json",
    ];
    assert_eq!(sluice(&args).code, 0);
    let run = sluice(&args);
    assert_eq!(run.code, 4, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ls-refs", "read");
    assert_eq!(doc["result"], "rejected");
    assert_eq!(doc["previous"]["result"], "succeeded");
    assert!(doc["attempts"].as_array().is_some_and(Vec::is_empty));
}

#[test]
fn http_get_json_has_status_and_body() {
    let server = TinyHttp::start(200, "hello from the forge");
    let run = sluice(&["http", "get", &server.url("/hello"), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "http-get", "read");
    assert_eq!(doc["value"]["status"], 200);
    assert_eq!(doc["value"]["body"], "hello from the forge");
}

#[test]
fn http_get_of_a_missing_page_is_answered_with_exit_1() {
    let server = TinyHttp::start(404, "no such thing");
    let run = sluice(&["http", "get", &server.url("/missing"), "--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    check_document(&doc, "http-get", "read");
    assert_eq!(doc["result"], "answered");
    assert_eq!(doc["value"]["status"], 404);
}
