//! `sluice-remote forge comment` against the fake GitHub: a comment whose
//! answer was cut is settled by its marker (one POST, landed, its id in
//! the value), an id asked again posts nothing, and an id that would end
//! the marker is bad input.

use crate::common;

use common::{check_document, sluice};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

const REPO: &str = "octo/repo";

fn comment(f: &FakeForge, extra: &[&str]) -> common::Run {
    let api = f.url();
    let mut all = vec![
        "forge",
        "comment",
        REPO,
        "42",
        "--body",
        "landed as 0123456",
    ];
    all.extend_from_slice(extra);
    all.extend_from_slice(&["--api", &api, "--deadline", "6s", "--attempt-timeout", "2s"]);
    sluice(&all)
}

#[test]
fn a_comment_cut_after_it_was_created_is_landed_with_its_id_and_asked_again_posts_nothing() {
    let f = FakeForge::start().expect("fake forge");
    f.push(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let run = comment(&f, &["--json", "--operation-id", "land-42"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "comment", "write");
    assert_eq!(doc["operation"]["kind"], "comment");
    assert_eq!(doc["reconciled"]["verdict"], "landed", "{doc}");
    let made = f.comments(REPO);
    assert_eq!(made.len(), 1);
    assert_eq!(doc["value"]["id"], made[0]["id"]);
    assert_eq!(doc["value"]["html_url"], made[0]["html_url"]);
    assert!(made[0]["body"]
        .as_str()
        .is_some_and(|b| b.ends_with("<!-- sluice-operation: land-42 -->")));
    // The same id again, from another process without a ledger: found.
    let again = comment(&f, &["--json", "--operation-id", "land-42"]);
    assert_eq!(again.code, 0, "{again:?}");
    let doc = again.json();
    assert_eq!(doc["may_have_applied"], false, "{doc}");
    assert_eq!(doc["value"]["id"], made[0]["id"]);
    assert_eq!(
        f.arrivals(Endpoint::CreateIssueComment).len(),
        1,
        "one POST"
    );
    let human = comment(&f, &["--operation-id", "land-42"]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human
            .stdout
            .starts_with(&format!("comment {} on #42", made[0]["id"])),
        "{human:?}"
    );
}

#[test]
fn an_operation_id_that_would_end_the_marker_is_bad_input() {
    let f = FakeForge::start().expect("fake forge");
    let run = comment(&f, &["--operation-id", "a--b"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(f.log().is_empty());
}

#[test]
fn a_comment_found_by_its_marker_is_recorded_in_the_ledger_as_applying_nothing() {
    let f = FakeForge::start().expect("fake forge");
    let dir = tempfile::tempdir().expect("temp dir");
    let first = comment(&f, &["--json", "--operation-id", "land-7"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.json()["may_have_applied"], true);
    // Asked again under a ledger that never saw the id: found, nothing
    // sent, and the ledger's row says so.
    let ledger = dir.path().join("ledger.db").display().to_string();
    let again = comment(
        &f,
        &["--json", "--operation-id", "land-7", "--ledger", &ledger],
    );
    assert_eq!(again.code, 0, "{again:?}");
    let doc = again.json();
    assert_eq!(doc["may_have_applied"], false, "{doc}");
    assert_eq!(doc["recorded"], true, "{doc}");
    let show = sluice(&["ledger", "show", "land-7", "--ledger", &ledger, "--json"]);
    assert_eq!(show.code, 0, "{show:?}");
    let entry = show.json();
    assert_eq!(entry["run"]["result"], "succeeded", "{entry}");
    assert_eq!(entry["run"]["may_have_applied"], false, "{entry}");
    assert_eq!(f.arrivals(Endpoint::CreateIssueComment).len(), 1);
}

#[test]
fn a_comment_without_an_operation_id_is_marked_with_the_id_its_document_names() {
    let f = FakeForge::start().expect("fake forge");
    f.push(Endpoint::CreateIssueComment, Behaviour::ApplyThenCut);
    let run = comment(&f, &["--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["reconciled"]["verdict"], "landed", "{doc}");
    let id = doc["operation"]["id"].as_str().expect("an id").to_string();
    let made = f.comments(REPO);
    assert_eq!(made.len(), 1);
    assert!(
        made[0]["body"]
            .as_str()
            .is_some_and(|b| b.ends_with(&format!("<!-- sluice-operation: {id} -->"))),
        "{} (operation {id})",
        made[0]["body"]
    );
}
