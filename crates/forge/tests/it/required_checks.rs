//! A head's CI verdict a landing can trust (issue 46), against the fake
//! GitHub over loopback: required checks (given, from the base branch's
//! protection, from its rulesets), the latest run per name, the caller's
//! own runs left out, and nothing undecodable fatal.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use serde_json::json;
use sluice_forge::{
    CallOptions, CiQuery, CiState, CiStatus, ForgeClient, ForgeFailure, ForgeInputError,
};
use sluice_policy::{CredentialSource, Outcome, OutcomeKind};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, FakeForge};

fn opts() -> CallOptions {
    CallOptions::new().bounds(exercise())
}

fn read(forge: &FakeForge, query: &CiQuery) -> Outcome<CiStatus> {
    read_with(&client(forge), query)
}

fn read_with(client: &ForgeClient, query: &CiQuery) -> Outcome<CiStatus> {
    client
        .ci_status_with(&repo(), SHA, query, &opts())
        .expect("valid input")
}

/// The value of a read that succeeded.
fn value(forge: &FakeForge, out: Outcome<CiStatus>) -> CiStatus {
    assert_eq!(
        out.kind,
        OutcomeKind::Succeeded,
        "{:?}\n{}",
        out.error,
        forge.log_text()
    );
    out.value.expect("a value")
}

fn green(forge: &FakeForge, name: &str) -> u64 {
    forge.add_check_run(REPO, name, SHA, "completed", Some("success"), None)
}

fn names(runs: &CiStatus) -> Vec<&str> {
    runs.check_runs.iter().map(|r| r.name.as_str()).collect()
}

#[test]
fn a_required_check_not_yet_created_is_pending_with_it_missing_when_given_by_name() {
    let forge = FakeForge::start().expect("fake forge");
    // The fast check finished green; the required build has not started.
    green(&forge, "lint");
    let ci = value(&forge, read(&forge, &CiQuery::new().require("build")));
    assert_eq!(ci.state, CiState::Pending);
    assert_eq!(ci.required, ["build"]);
    assert_eq!(ci.missing, ["build"]);
    // Without the requirement the same head reads as passing.
    let ci = value(&forge, read(&forge, &CiQuery::new()));
    assert_eq!(ci.state, CiState::Success);
    assert!(ci.missing.is_empty());
}

#[test]
fn a_required_check_not_yet_created_is_pending_with_it_missing_from_the_base_protection() {
    let forge = FakeForge::start().expect("fake forge");
    green(&forge, "lint");
    forge.set_required_status_checks(REPO, "main", &["ci/legacy"], &["build"]);
    let ci = value(&forge, read(&forge, &CiQuery::new().base("main")));
    assert_eq!(ci.state, CiState::Pending);
    assert_eq!(ci.required, ["build", "ci/legacy"]);
    assert_eq!(ci.missing, ["build", "ci/legacy"]);
    assert_eq!(forge.arrivals(Endpoint::RequiredStatusChecks).len(), 1);
    assert!(forge.arrivals(Endpoint::RequiredStatusChecks)[0]
        .path
        .ends_with("/repos/octo/repo/branches/main/protection/required_status_checks"));
}

#[test]
fn a_required_check_not_yet_created_is_pending_with_it_missing_from_a_ruleset_of_many_pages() {
    let forge = FakeForge::start().expect("fake forge");
    green(&forge, "lint");
    // 120 rules of another type first: the required checks are on page 2.
    for i in 0..120 {
        forge.add_branch_rule(
            REPO,
            "main",
            json!({ "type": "pull_request", "ruleset_id": i, "parameters": {} }),
        );
    }
    forge.add_required_checks_rule(REPO, "main", &["build", "lint"]);
    let ci = value(&forge, read(&forge, &CiQuery::new().base("main")));
    assert_eq!(ci.state, CiState::Pending);
    assert_eq!(ci.required, ["build", "lint"]);
    assert_eq!(ci.missing, ["build"]);
    assert_eq!(
        forge.arrivals(Endpoint::BranchRules).len(),
        2,
        "every page of the rules: {}",
        forge.log_text()
    );
}

#[test]
fn present_and_green_is_success_with_nothing_missing() {
    let forge = FakeForge::start().expect("fake forge");
    forge.set_commit_statuses(REPO, SHA, &[("ci/legacy", "success")]);
    green(&forge, "build");
    green(&forge, "test");
    forge.set_required_status_checks(REPO, "main", &["ci/legacy"], &[]);
    forge.add_required_checks_rule(REPO, "main", &["build"]);
    let query = CiQuery::new().base("main").require("test").require("build");
    let ci = value(&forge, read(&forge, &query));
    assert_eq!(ci.state, CiState::Success);
    assert_eq!(ci.required, ["build", "ci/legacy", "test"]);
    assert!(ci.missing.is_empty(), "{:?}", ci.missing);
}

#[test]
fn a_run_that_failed_and_was_re_run_green_is_success() {
    let forge = FakeForge::start().expect("fake forge");
    forge.add_check_run(REPO, "build", SHA, "completed", Some("failure"), None);
    let rerun = green(&forge, "build");
    let out = read(&forge, &CiQuery::new().require("build"));
    let ci = value(&forge, out);
    assert_eq!(ci.state, CiState::Success);
    assert_eq!(names(&ci), ["build"], "the latest run of the name");
    assert_eq!(ci.check_runs[0].id, Some(rerun));
    let asked = &forge.arrivals(Endpoint::ListCheckRuns)[0].path;
    assert!(asked.contains("filter=latest"), "{asked}");
}

#[test]
fn the_callers_in_progress_run_is_left_out_before_judging() {
    let forge = FakeForge::start().expect("fake forge");
    green(&forge, "build");
    forge.add_check_run(REPO, "sluice", SHA, "in_progress", None, Some("land-1"));
    let held = value(&forge, read(&forge, &CiQuery::new()));
    assert_eq!(held.state, CiState::Pending, "its own run holds it");
    let ci = value(&forge, read(&forge, &CiQuery::new().exclude("sluice")));
    assert_eq!(ci.state, CiState::Success);
    assert_eq!(names(&ci), ["build"]);
}

#[test]
fn an_unprotected_base_is_not_a_credential_refusal_and_the_token_is_not_bought_again() {
    let forge = FakeForge::start().expect("fake forge");
    green(&forge, "build");
    forge.add_required_checks_rule(REPO, "main", &["build"]);
    let source = Scripted::new(&["t1", "t2"]);
    let client = client_with(
        &forge,
        policy(Duration::from_secs(1)),
        Some(source.clone() as Arc<dyn CredentialSource>),
    );
    // The protection read comes well inside the ten seconds after buying.
    let out = read_with(&client, &CiQuery::new().base("main"));
    assert!(out.refused_credentials.is_empty(), "{out:?}");
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    let ci = value(&forge, out);
    assert_eq!(ci.state, CiState::Success);
    assert_eq!(ci.required, ["build"]);
    assert_eq!(source.calls(), 1, "the token was bought once");
    assert_eq!(forge.arrivals(Endpoint::RequiredStatusChecks).len(), 1);
    // Beside it, a 404 on another read inside the window is still taken
    // for a refused credential (the rule the protection read is exempt
    // from).
    let pull = client.get_pull(&repo(), 99, &opts()).expect("valid input");
    assert_eq!(pull.refused_credentials.len(), 1, "{pull:?}");
    assert_eq!(source.calls(), 3, "bought again after the refusal");
}

#[test]
fn a_403_on_the_protection_or_the_rules_is_answered_in_githubs_words() {
    for endpoint in [Endpoint::RequiredStatusChecks, Endpoint::BranchRules] {
        let forge = FakeForge::start().expect("fake forge");
        green(&forge, "build");
        forge.set(
            endpoint,
            Behaviour::Status {
                status: 403,
                retry_after: None,
            },
        );
        let source = Scripted::new(&["t1", "t2"]);
        let client = client_with(
            &forge,
            policy(Duration::from_secs(1)),
            Some(source.clone() as Arc<dyn CredentialSource>),
        );
        let out = read_with(&client, &CiQuery::new().base("main"));
        assert_eq!(out.kind, OutcomeKind::Answered, "{endpoint:?}: {out:?}");
        assert!(out.value.is_none(), "no verdict without the required names");
        assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
        assert!(out.refused_credentials.is_empty(), "{out:?}");
        assert_eq!(source.calls(), 1);
        let e = out.error.as_ref().expect("an error");
        let f = e.source_as::<ForgeFailure>().expect("typed");
        assert_eq!(f.status(), Some(403));
        assert_eq!(f.message(), Some("Forbidden"), "GitHub's words: {f:?}");
        assert_eq!(e.cause, "HTTP 403: Forbidden");
    }
}

#[test]
fn a_check_run_or_a_status_that_cannot_be_fully_decoded_is_kept() {
    let forge = FakeForge::start().expect("fake forge");
    forge.add_raw_check_run(
        REPO,
        json!({ "name": "odd", "head_sha": SHA, "status": "completed", "conclusion": "success" }),
    );
    forge.add_raw_check_run(
        REPO,
        json!({ "id": "not a number", "name": "odder", "head_sha": SHA, "status": 7 }),
    );
    let ci = value(&forge, read(&forge, &CiQuery::new().require("odd")));
    assert_eq!(names(&ci), ["odd", "odder"]);
    assert_eq!(ci.check_runs[0].id, None);
    assert_eq!(ci.check_runs[0].conclusion.as_deref(), Some("success"));
    assert_eq!(ci.check_runs[1].id, None);
    assert_eq!(ci.check_runs[1].status, "", "an unreadable status");
    assert!(ci.missing.is_empty());
    assert_eq!(
        ci.state,
        CiState::Pending,
        "a run whose status cannot be read is not finished"
    );
}

#[test]
fn a_name_both_required_and_excluded_or_a_full_ref_as_base_is_refused_before_any_request() {
    let forge = FakeForge::start().expect("fake forge");
    let c = client(&forge);
    let both = c.ci_status_with(
        &repo(),
        SHA,
        &CiQuery::new().require("sluice").exclude("sluice"),
        &opts(),
    );
    assert!(
        matches!(&both, Err(ForgeInputError::RequiredAndExcluded { name }) if name == "sluice"),
        "{both:?}"
    );
    let full = c.ci_status_with(
        &repo(),
        SHA,
        &CiQuery::new().base("refs/heads/main"),
        &opts(),
    );
    assert!(
        matches!(&full, Err(ForgeInputError::RefName { .. })),
        "{full:?}"
    );
    let empty = c.ci_status_with(&repo(), SHA, &CiQuery::new().require(""), &opts());
    assert!(
        matches!(&empty, Err(ForgeInputError::CheckName(_))),
        "{empty:?}"
    );
    assert!(forge.all_arrivals().is_empty(), "{}", forge.log_text());
}
