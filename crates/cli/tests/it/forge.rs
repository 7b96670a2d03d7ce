//! `sluice-remote forge …` against the testkit's stateful fake GitHub: each
//! of the six commands, its JSON document and exit code, a lost answer
//! settled by reading, `--api` with a path anywhere on the line, and the
//! token sent only when a command gives one.

use crate::common;

use common::{check_document, sluice};
use sluice_testkit::fake_forge::{
    fingerprint, merge_commit_sha, request_id, Behaviour, Endpoint, FakeForge,
};

const REPO: &str = "octo/repo";
const HEAD: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const NEXT: &str = "cccccccccccccccccccccccccccccccccccccccc";

fn forge(f: &FakeForge, args: &[&str]) -> common::Run {
    let api = f.url();
    let mut all = vec!["forge"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--api",
        &api,
        "--deadline",
        "10s",
        "--attempt-timeout",
        "3s",
    ]);
    sluice(&all)
}

#[test]
fn get_pull_prints_the_pull_request_as_the_forge_sent_it_without_a_token_when_none_is_given() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD);
    let run = forge(&f, &["get-pull", REPO, &n.to_string(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "get-pull", "read");
    assert_eq!(doc["value"]["number"], n);
    assert_eq!(doc["value"]["head"]["sha"], HEAD);
    assert_eq!(
        doc["value"]["mergeable"], true,
        "fields passed through: {doc}"
    );
    assert!(doc["operation"]["remote"]
        .as_str()
        .is_some_and(|r| r.ends_with(&format!("/repos/{REPO}/pulls/{n}"))));
    assert!(f.all_arrivals().iter().all(|a| a.token.is_none()));
    let human = forge(&f, &["get-pull", REPO, &n.to_string()]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human
            .stdout
            .starts_with(&format!("#{n} open feature {HEAD} -> main")),
        "{human:?}"
    );
}

#[test]
fn api_with_a_path_is_kept_anywhere_on_the_line_and_the_token_command_gives_the_bearer() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD);
    let api = format!("{}/api/v3", f.url());
    let run = sluice(&[
        "--api",
        &api,
        "forge",
        "--token-command",
        "echo t0ken",
        "get-pull",
        REPO,
        &n.to_string(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(
        doc["operation"]["remote"],
        format!("{api}/repos/{REPO}/pulls/{n}")
    );
    let arrivals = f.all_arrivals();
    assert!(
        arrivals[0].path.starts_with("/api/v3/repos/"),
        "{arrivals:?}"
    );
    assert_eq!(
        arrivals[0].token.as_deref(),
        Some(fingerprint("t0ken").as_str())
    );
    assert!(!run.stdout.contains("t0ken") && !run.stderr.contains("t0ken"));
}

#[test]
fn merge_pull_whose_answer_was_lost_is_settled_landed_by_reading_and_exits_0() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD);
    f.push(Endpoint::MergePull, Behaviour::ApplyThenStatus(502));
    let run = forge(
        &f,
        &[
            "merge-pull",
            REPO,
            &n.to_string(),
            "--sha",
            HEAD,
            "--method",
            "squash",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "merge-pull", "write");
    let sha = merge_commit_sha(REPO, n, HEAD);
    assert_eq!(doc["value"]["merged"], true);
    assert_eq!(doc["value"]["sha"], sha.as_str());
    assert_eq!(doc["reconciled"]["verdict"], "landed");
    assert_eq!(doc["reconciled"]["observed"]["sha"], sha.as_str());
    assert_eq!(doc["may_have_applied"], true);
    assert_eq!(f.arrivals(Endpoint::MergePull).len(), 1);
}

#[test]
fn merge_pull_at_a_moved_head_is_answered_exit_1_and_did_not_apply() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", NEXT);
    let run = forge(
        &f,
        &["merge-pull", REPO, &n.to_string(), "--sha", HEAD, "--json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    check_document(&doc, "merge-pull", "write");
    assert_eq!(doc["result"], "answered");
    assert_eq!(doc["may_have_applied"], false);
    let human = forge(&f, &["merge-pull", REPO, &n.to_string(), "--sha", HEAD]);
    assert_eq!(human.code, 1);
    assert!(
        human.stderr.contains("Head branch was modified"),
        "{human:?}"
    );
}

#[test]
fn update_ref_moves_the_ref_and_prints_it() {
    let f = FakeForge::start().expect("fake forge");
    f.add_commit(NEXT, &[HEAD]);
    f.set_ref(REPO, "heads/main", HEAD);
    let run = forge(
        &f,
        &["update-ref", REPO, "heads/main", "--sha", NEXT, "--json"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "update-ref", "write");
    assert_eq!(doc["value"]["ref"], "refs/heads/main");
    assert_eq!(doc["value"]["object"]["sha"], NEXT);
    assert_eq!(f.git_ref(REPO, "heads/main").as_deref(), Some(NEXT));
    let again = forge(&f, &["update-ref", REPO, "refs/heads/main", "--sha", HEAD]);
    assert_eq!(again.code, 1, "not a fast-forward: {again:?}");
    let forced = forge(
        &f,
        &["update-ref", REPO, "heads/main", "--sha", HEAD, "--force"],
    );
    assert_eq!(forced.code, 0, "{forced:?}");
    assert_eq!(forced.stdout, format!("refs/heads/main -> {HEAD}\n"));
}

#[test]
fn ci_status_gives_the_combined_status_and_every_check_run() {
    let f = FakeForge::start().expect("fake forge");
    f.set_commit_statuses(REPO, HEAD, &[("lint", "success")]);
    for i in 0..3 {
        f.add_check_run(
            REPO,
            &format!("ci-{i}"),
            HEAD,
            "completed",
            Some("success"),
            None,
        );
    }
    let run = forge(&f, &["ci-status", REPO, HEAD, "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ci-status", "read");
    assert_eq!(doc["value"]["combined"]["state"], "success");
    assert_eq!(doc["value"]["check_runs"].as_array().map(Vec::len), Some(3));
    let human = forge(&f, &["ci-status", REPO, HEAD]);
    assert!(
        human
            .stdout
            .starts_with("success (1 statuses, 3 check runs)"),
        "{human:?}"
    );
}

#[test]
fn create_check_run_then_update_it_by_id() {
    let f = FakeForge::start().expect("fake forge");
    let run = forge(
        &f,
        &[
            "create-check-run",
            REPO,
            "--name",
            "sluice",
            "--head-sha",
            HEAD,
            "--external-id",
            "land-1",
            "--status",
            "in_progress",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "create-check-run", "write");
    assert_eq!(doc["value"]["external_id"], "land-1");
    let id = doc["value"]["id"].as_u64().expect("id");
    f.push(Endpoint::UpdateCheckRun, Behaviour::ApplyThenCut);
    let run = forge(
        &f,
        &[
            "update-check-run",
            REPO,
            &id.to_string(),
            "--conclusion",
            "success",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "update-check-run", "write");
    assert_eq!(doc["value"]["conclusion"], "success");
    assert_eq!(doc["value"]["status"], "completed");
    assert_eq!(doc["reconciled"]["verdict"], "landed");
    assert_eq!(f.arrivals(Endpoint::UpdateCheckRun).len(), 1);
}

#[test]
fn bad_forge_arguments_exit_2_naming_the_argument() {
    for (args, named) in [
        (vec!["forge", "get-pull", "octo", "1"], "<OWNER/REPO>"),
        (vec!["forge", "get-pull", REPO, "x"], "<N>"),
        (
            vec!["forge", "merge-pull", REPO, "1", "--sha", "abc"],
            "--sha",
        ),
        (
            vec![
                "forge",
                "merge-pull",
                REPO,
                "1",
                "--sha",
                HEAD,
                "--method",
                "fast",
            ],
            "--method",
        ),
        (
            vec!["forge", "update-ref", REPO, "main", "--sha", HEAD],
            "<REF>",
        ),
        (vec!["forge", "update-check-run", REPO, "7"], "--status"),
        (
            vec!["forge", "get-pull", REPO, "1", "--api", "ftp://h/x"],
            "--api",
        ),
        (
            vec!["ls-refs", "git://127.0.0.1/x", "--api", "http://h/"],
            "--api",
        ),
    ] {
        let run = sluice(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stdout.is_empty());
        assert!(run.first_err_line().contains(named), "{args:?}: {run:?}");
    }
}

#[test]
fn ci_status_requires_the_names_given_and_the_base_branchs_and_leaves_the_callers_run_out() {
    let f = FakeForge::start().expect("fake forge");
    f.set_commit_statuses(REPO, HEAD, &[("lint", "success")]);
    f.add_check_run(REPO, "sluice", HEAD, "in_progress", None, Some("land-1"));
    f.set_required_status_checks(REPO, "main", &[], &["build"]);
    let args = [
        "ci-status",
        REPO,
        HEAD,
        "--base",
        "main",
        "--require",
        "lint",
        "--exclude",
        "sluice",
    ];
    let mut json = args.to_vec();
    json.push("--json");
    let run = forge(&f, &json);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "ci-status", "read");
    assert_eq!(doc["value"]["state"], "pending", "{doc}");
    assert_eq!(
        doc["value"]["required"],
        serde_json::json!(["build", "lint"])
    );
    assert_eq!(doc["value"]["missing"], serde_json::json!(["build"]));
    assert_eq!(
        doc["value"]["check_runs"],
        serde_json::json!([]),
        "the caller's own run is left out"
    );
    let human = forge(&f, &args);
    assert_eq!(human.code, 0, "{human:?}");
    assert_eq!(
        human.stdout,
        "pending, missing: build (1 statuses, 0 check runs)\n  status lint: success\n",
        "{human:?}"
    );
    // The required build reports green: the head passes.
    let id = f.add_check_run(REPO, "build", HEAD, "completed", Some("success"), None);
    let human = forge(&f, &args);
    assert_eq!(human.code, 0, "{human:?}");
    assert_eq!(
        human.stdout,
        format!(
            "success (1 statuses, 1 check runs)\n  status lint: success\n  check run {id} build: completed success\n"
        ),
        "{human:?}"
    );
    // Bad input: exit 2, nothing on stdout, the argument named, nothing sent.
    let before = f.all_arrivals().len();
    for (bad, arg) in [
        (vec!["--base", "refs/heads/main"], "--base"),
        (
            vec!["--require", "sluice", "--exclude", "sluice"],
            "--exclude",
        ),
    ] {
        let mut line = vec!["ci-status", REPO, HEAD];
        line.extend(bad);
        let run = forge(&f, &line);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stdout.is_empty(), "{run:?}");
        assert!(
            run.stderr.lines().next().is_some_and(|l| l.contains(arg)),
            "{run:?}"
        );
    }
    assert_eq!(f.all_arrivals().len(), before, "nothing sent on bad input");
}

#[test]
fn each_attempt_keeps_the_request_id_the_forge_sent_in_the_json_and_the_human_table() {
    let f = FakeForge::start().expect("fake forge");
    let n = f.add_pull(REPO, "feature", "main", HEAD);
    let two_503s = |f: &FakeForge| {
        for _ in 0..2 {
            f.push(
                Endpoint::GetPull,
                Behaviour::Status {
                    status: 503,
                    retry_after: None,
                },
            );
        }
    };
    two_503s(&f);
    let run = forge(&f, &["get-pull", REPO, &n.to_string(), "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    check_document(&doc, "get-pull", "read");
    let sent: Vec<String> = f
        .arrivals(Endpoint::GetPull)
        .iter()
        .map(|a| request_id(a.request))
        .collect();
    assert_eq!(sent.len(), 3, "{}", f.log_text());
    let kept: Vec<&str> = doc["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["request_id"].as_str().expect("a request id"))
        .collect();
    assert_eq!(kept, sent, "{doc}");

    // The human table shows them too, one per attempt's row.
    two_503s(&f);
    let human = forge(&f, &["get-pull", REPO, &n.to_string()]);
    assert_eq!(human.code, 0, "{human:?}");
    let sent: Vec<String> = f
        .arrivals(Endpoint::GetPull)
        .iter()
        .skip(3)
        .map(|a| request_id(a.request))
        .collect();
    assert_eq!(sent.len(), 3, "{}", f.log_text());
    assert!(human.stderr.contains("request id"), "{human:?}");
    for (i, id) in sent.iter().enumerate() {
        let row = human
            .stderr
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("#{} ", i + 1)))
            .unwrap_or_else(|| panic!("no row for attempt {}: {human:?}", i + 1));
        assert!(row.contains(id.as_str()), "{row:?} lacks {id}: {human:?}");
    }
}
