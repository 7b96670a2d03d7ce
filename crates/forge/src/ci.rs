//! A head's CI verdict, in the value ("Required checks" in the design):
//! what a CI read asks ([`CiQuery`]: names required, the base branch whose
//! protection and rulesets require more, the caller's own runs left out),
//! the verdict ([`CiState`]) and the value that carries it ([`CiStatus`]).
//! Pure: the reads are the client's (`ForgeClient::ci_status_with`).
//!
//! The verdict: `failure` when any status or check run failed (error,
//! failure, cancelled, timed out, action required, stale, or a conclusion
//! this client does not know); else `pending` when anything is unfinished,
//! when nothing reported at all, or when a required name — a status's
//! `context` or a check run's `name` — was reported by neither (`missing`);
//! else `success`. Among check runs of one name the latest decides (the
//! latest `started_at`, then the highest id), so a run re-run green passes;
//! `neutral` and `skipped` pass. Statuses are taken as the combined status
//! gives them (the latest per context).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{CheckRun, CombinedStatus};

/// What a CI read asks besides the ref: the names required (a status's
/// `context` or a check run's `name`), the base branch whose protection and
/// rulesets require more, and the caller's own check runs (by name) to
/// leave out before judging. [`CiQuery::new`] asks nothing more: the
/// verdict is over what reported.
///
/// ```
/// use sluice_forge::CiQuery;
/// let q = CiQuery::new().require("build").base("main").exclude("sluice");
/// assert_eq!(q.required_names(), ["build"]);
/// assert_eq!(q.base_branch(), Some("main"));
/// assert_eq!(q.excluded_names(), ["sluice"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CiQuery {
    required: Vec<String>,
    base: Option<String>,
    excluded: Vec<String>,
}

impl CiQuery {
    /// Nothing required, no base branch, nothing left out.
    pub fn new() -> Self {
        Self::default()
    }

    /// Require `name`: a status's `context` or a check run's `name`. Until
    /// one reports it, the verdict is `pending` with it in `missing`.
    pub fn require(mut self, name: impl Into<String>) -> Self {
        self.required.push(name.into());
        self
    }

    /// Also require what the base branch `branch` requires (`main`, not
    /// `refs/heads/main`): its classic protection's required status checks
    /// and its rulesets' `required_status_checks` rules.
    pub fn base(mut self, branch: impl Into<String>) -> Self {
        self.base = Some(branch.into());
        self
    }

    /// Leave the check runs named `name` out before judging (the caller's
    /// own run, say, in progress on the head it tests). A name both
    /// required and excluded is bad input.
    pub fn exclude(mut self, name: impl Into<String>) -> Self {
        self.excluded.push(name.into());
        self
    }

    /// The names required by the caller, as given.
    pub fn required_names(&self) -> &[String] {
        &self.required
    }

    /// The base branch whose requirements are read, when named.
    pub fn base_branch(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The check run names left out, as given.
    pub fn excluded_names(&self) -> &[String] {
        &self.excluded
    }

    /// Whether a check run is left out.
    pub(crate) fn excludes(&self, run: &CheckRun) -> bool {
        self.excluded.iter().any(|n| *n == run.name)
    }
}

/// The verdict of a ref's CI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CiState {
    /// Every status and latest check run passed (neutral and skipped runs
    /// pass), and every required name reported.
    Success,
    /// Something is still running, nothing reported yet, or a required
    /// name has not reported.
    Pending,
    /// A status or latest check run failed (error, failure, cancelled,
    /// timed out, action required, stale, ...).
    Failure,
}

impl CiState {
    /// `success`, `pending` or `failure`.
    pub fn as_str(self) -> &'static str {
        match self {
            CiState::Success => "success",
            CiState::Pending => "pending",
            CiState::Failure => "failure",
        }
    }
}

/// The CI status of a ref with its verdict: the combined commit status,
/// every check run of every page (the latest per name and app, as the
/// forge's `filter=latest` gives them; less the runs the query excluded),
/// the names required and those missing, and the verdict over all of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiStatus {
    /// The verdict.
    pub state: CiState,
    /// The names required: those given and the base branch's, sorted,
    /// each once.
    pub required: Vec<String>,
    /// The required names no status and no check run reported, sorted.
    pub missing: Vec<String>,
    /// The combined commit status.
    pub combined: CombinedStatus,
    /// Every check run of every page, less the excluded.
    pub check_runs: Vec<CheckRun>,
}

impl CiStatus {
    /// The value and its verdict for what was read: `required` is sorted
    /// and deduplicated here; the check runs are kept as given.
    pub fn judged(
        combined: CombinedStatus,
        check_runs: Vec<CheckRun>,
        required: impl IntoIterator<Item = String>,
    ) -> Self {
        let required: Vec<String> = required
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let missing: Vec<String> = required
            .iter()
            .filter(|n| {
                !combined.statuses.iter().any(|s| s.context == **n)
                    && !check_runs.iter().any(|r| r.name == **n)
            })
            .cloned()
            .collect();
        let state = verdict(&combined, &check_runs, !missing.is_empty());
        CiStatus {
            state,
            required,
            missing,
            combined,
            check_runs,
        }
    }
}

/// What one status or latest check run says.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Says {
    Passed,
    Unfinished,
    Failed,
}

fn status_says(state: &str) -> Says {
    match state {
        "success" => Says::Passed,
        "error" | "failure" => Says::Failed,
        // `pending`, or a state that could not be read.
        _ => Says::Unfinished,
    }
}

fn run_says(run: &CheckRun) -> Says {
    if run.status != "completed" {
        return Says::Unfinished;
    }
    match run.conclusion.as_deref() {
        Some("success" | "neutral" | "skipped") => Says::Passed,
        None => Says::Unfinished,
        // failure, cancelled, timed_out, action_required, stale, and any
        // conclusion this client does not know.
        Some(_) => Says::Failed,
    }
}

/// The latest run of each name: the latest `started_at`, then the highest
/// id (GitHub's ids grow; a re-run is a new run).
fn latest_per_name(runs: &[CheckRun]) -> Vec<&CheckRun> {
    let mut latest: BTreeMap<&str, &CheckRun> = BTreeMap::new();
    for r in runs {
        let key = |r: &CheckRun| (r.started_at.clone(), r.id);
        match latest.get(r.name.as_str()) {
            Some(kept) if key(kept) >= key(r) => {}
            _ => {
                latest.insert(r.name.as_str(), r);
            }
        }
    }
    latest.into_values().collect()
}

/// The verdict over the statuses and the latest check run of each name;
/// `missing` says a required name has not reported.
fn verdict(combined: &CombinedStatus, runs: &[CheckRun], missing: bool) -> CiState {
    let said = combined
        .statuses
        .iter()
        .map(|s| status_says(&s.state))
        .chain(latest_per_name(runs).into_iter().map(run_says))
        .max();
    match said {
        Some(Says::Failed) => CiState::Failure,
        None | Some(Says::Unfinished) => CiState::Pending,
        Some(Says::Passed) if missing => CiState::Pending,
        Some(Says::Passed) => CiState::Success,
    }
}

/// The names a classic branch protection requires, from `GET
/// …/branches/{b}/protection/required_status_checks`: `contexts` and
/// `checks[].context` (what cannot be read is skipped).
pub(crate) fn protection_names(v: &Value) -> Vec<String> {
    let contexts = v["contexts"].as_array().into_iter().flatten();
    let checks = v["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["context"]);
    contexts
        .chain(checks)
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The names a page of a branch's rules requires, from `GET
/// …/rules/branches/{b}`: rules of type `required_status_checks`, their
/// `parameters.required_status_checks[].context`.
pub(crate) fn ruleset_names(page: &Value) -> Vec<String> {
    page.as_array()
        .into_iter()
        .flatten()
        .filter(|rule| rule["type"] == "required_status_checks")
        .flat_map(|rule| {
            rule["parameters"]["required_status_checks"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|c| c["context"].as_str())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::StatusContext;
    use serde_json::json;

    fn run(id: u64, name: &str, status: &str, conclusion: Option<&str>) -> CheckRun {
        CheckRun::from(json!({
            "id": id, "name": name, "status": status, "conclusion": conclusion,
        }))
    }

    fn combined(statuses: &[(&str, &str)]) -> CombinedStatus {
        CombinedStatus {
            state: "pending".into(),
            sha: "a".repeat(40),
            statuses: statuses
                .iter()
                .map(|(c, s)| StatusContext {
                    context: (*c).into(),
                    state: (*s).into(),
                    description: None,
                    target_url: None,
                })
                .collect(),
        }
    }

    fn state(statuses: &[(&str, &str)], runs: Vec<CheckRun>, required: &[&str]) -> CiStatus {
        CiStatus::judged(
            combined(statuses),
            runs,
            required.iter().map(|s| s.to_string()),
        )
    }

    #[test]
    fn the_verdict_fails_on_a_failure_waits_on_the_unfinished_and_the_missing() {
        assert_eq!(state(&[], vec![], &[]).state, CiState::Pending);
        let ok = state(
            &[("lint", "success")],
            vec![run(1, "build", "completed", Some("success"))],
            &["build", "lint", "build"],
        );
        assert_eq!(ok.state, CiState::Success);
        assert_eq!(ok.required, ["build", "lint"]);
        assert!(ok.missing.is_empty());
        let missing = state(&[("lint", "success")], vec![], &["zeta", "build"]);
        assert_eq!(missing.state, CiState::Pending);
        assert_eq!(missing.missing, ["build", "zeta"]);
        assert_eq!(
            state(&[], vec![run(1, "b", "in_progress", None)], &[]).state,
            CiState::Pending
        );
        assert_eq!(
            state(&[("x", "error")], vec![], &["y"]).state,
            CiState::Failure
        );
        for passes in ["neutral", "skipped"] {
            let s = state(&[], vec![run(1, "b", "completed", Some(passes))], &[]);
            assert_eq!(s.state, CiState::Success, "{passes}");
        }
        for fails in ["stale", "cancelled", "timed_out", "action_required", "new"] {
            let s = state(&[], vec![run(1, "b", "completed", Some(fails))], &[]);
            assert_eq!(s.state, CiState::Failure, "{fails}");
        }
        // A status whose state could not be read is not a pass.
        assert_eq!(state(&[("x", "")], vec![], &[]).state, CiState::Pending);
    }

    #[test]
    fn among_runs_of_one_name_the_latest_decides() {
        let rerun = vec![
            run(7, "build", "completed", Some("success")),
            run(3, "build", "completed", Some("failure")),
        ];
        assert_eq!(state(&[], rerun, &[]).state, CiState::Success);
        let failed_again = vec![
            run(3, "build", "completed", Some("success")),
            run(7, "build", "completed", Some("failure")),
        ];
        assert_eq!(state(&[], failed_again, &[]).state, CiState::Failure);
    }

    #[test]
    fn protection_and_rulesets_name_their_required_checks() {
        let p = json!({
            "strict": true,
            "contexts": ["ci/legacy", 7],
            "checks": [{ "context": "build", "app_id": 15368 }, { "app_id": 1 }],
        });
        assert_eq!(protection_names(&p), ["ci/legacy", "build"]);
        let rules = json!([
            { "type": "pull_request", "parameters": {} },
            { "type": "required_status_checks", "ruleset_id": 9, "parameters": {
                "strict_required_status_checks_policy": false,
                "required_status_checks": [{ "context": "test", "integration_id": 1 }],
            }},
        ]);
        assert_eq!(ruleset_names(&rules), ["test"]);
        assert!(ruleset_names(&json!({ "message": "x" })).is_empty());
    }
}
