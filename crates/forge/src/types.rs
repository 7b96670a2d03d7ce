//! The API's objects sluice uses, as far as it reads them (unknown fields
//! are ignored, missing optional ones are `None`).

use serde::{Deserialize, Serialize};

/// A repository on the forge: `owner/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RepoRef {
    /// The owner (user or organisation).
    pub owner: String,
    /// The repository's name.
    pub name: String,
}

impl RepoRef {
    /// `owner/name`.
    pub fn new(owner: impl Into<String>, name: impl Into<String>) -> Self {
        RepoRef {
            owner: owner.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for RepoRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

impl std::str::FromStr for RepoRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((o, n)) if !o.is_empty() && !n.is_empty() && !n.contains('/') => {
                Ok(RepoRef::new(o, n))
            }
            _ => Err(format!("{s:?} is not owner/name")),
        }
    }
}

/// One end of a pull request (`head` or `base`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullEnd {
    /// The branch name.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// `owner:branch`.
    #[serde(default)]
    pub label: Option<String>,
    /// The commit the end points at.
    #[serde(default)]
    pub sha: Option<String>,
}

/// A pull request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// The pull request's number in its repository.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// The title.
    #[serde(default)]
    pub title: String,
    /// The description.
    #[serde(default)]
    pub body: Option<String>,
    /// The branch to merge.
    pub head: PullEnd,
    /// The branch to merge into.
    pub base: PullEnd,
    /// The page a person opens.
    #[serde(default)]
    pub html_url: Option<String>,
    /// Whether it was merged.
    #[serde(default)]
    pub merged: Option<bool>,
    /// Whether it is a draft.
    #[serde(default)]
    pub draft: Option<bool>,
}

/// What creating a pull request asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPullRequest {
    /// The title.
    pub title: String,
    /// The branch to merge: `branch`, or `owner:branch` from a fork.
    pub head: String,
    /// The branch to merge into.
    pub base: String,
    /// The description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Open it as a draft.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<bool>,
}

impl NewPullRequest {
    /// A pull request from `head` into `base` titled `title`.
    pub fn new(title: impl Into<String>, head: impl Into<String>, base: impl Into<String>) -> Self {
        NewPullRequest {
            title: title.into(),
            head: head.into(),
            base: base.into(),
            body: None,
            draft: None,
        }
    }

    /// Set the description.
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = Some(body.into());
        self
    }
}

/// One commit status of the combined status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusContext {
    /// The status's name.
    pub context: String,
    /// `error`, `failure`, `pending` or `success`.
    pub state: String,
    /// What the status says.
    #[serde(default)]
    pub description: Option<String>,
    /// Where its details are.
    #[serde(default)]
    pub target_url: Option<String>,
}

/// The combined commit status of a ref.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CombinedStatus {
    /// `failure`, `pending` or `success` (GitHub's combination).
    pub state: String,
    /// The commit.
    #[serde(default)]
    pub sha: String,
    /// The statuses, latest per context.
    #[serde(default)]
    pub statuses: Vec<StatusContext>,
}

/// A check run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    /// The check run's id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The commit it checks (empty when the forge left it out: some
    /// GitHub Enterprise versions do, and it is still a check run).
    #[serde(default)]
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`, ...
    pub status: String,
    /// Once completed: `success`, `failure`, `neutral`, `cancelled`,
    /// `skipped`, `timed_out`, `action_required`, ...
    #[serde(default)]
    pub conclusion: Option<String>,
    /// The caller's own id for it.
    #[serde(default)]
    pub external_id: Option<String>,
    /// Where its details are.
    #[serde(default)]
    pub details_url: Option<String>,
    /// The page a person opens.
    #[serde(default)]
    pub html_url: Option<String>,
}

/// What creating a check run asks for. `external_id` is required: it is how
/// a check run whose creation's answer was lost is found again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewCheckRun {
    /// Its name.
    pub name: String,
    /// The commit it checks.
    pub head_sha: String,
    /// The caller's own id: unique per check run.
    pub external_id: String,
    /// `queued`, `in_progress` or `completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Required with `completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Where its details are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_url: Option<String>,
    /// `title`, `summary`, `text`: passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

impl NewCheckRun {
    /// A check run `name` on `head_sha` with the caller's `external_id`.
    pub fn new(
        name: impl Into<String>,
        head_sha: impl Into<String>,
        external_id: impl Into<String>,
    ) -> Self {
        NewCheckRun {
            name: name.into(),
            head_sha: head_sha.into(),
            external_id: external_id.into(),
            status: None,
            conclusion: None,
            details_url: None,
            output: None,
        }
    }

    /// Set the status (and, for `completed`, the conclusion).
    pub fn status(mut self, status: impl Into<String>, conclusion: Option<&str>) -> Self {
        self.status = Some(status.into());
        self.conclusion = conclusion.map(str::to_string);
        self
    }
}

/// A page of check runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRunList {
    /// How many there are in all (may exceed the page).
    pub total_count: u64,
    /// This page's check runs.
    pub check_runs: Vec<CheckRun>,
}

/// An issue (or pull request) comment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueComment {
    /// The comment's id.
    pub id: u64,
    /// Its text.
    #[serde(default)]
    pub body: String,
    /// The page a person opens.
    #[serde(default)]
    pub html_url: Option<String>,
}

/// The CI status of a ref: the combined commit status and the check runs
/// (one read of both, the "CI status" read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiStatus {
    /// The combined commit status.
    pub combined: CombinedStatus,
    /// The check runs (the first page, up to 100).
    pub check_runs: Vec<CheckRun>,
}

/// The verdict of a ref's CI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CiState {
    /// Every status and check run passed (neutral and skipped runs pass).
    Success,
    /// Something is still running, or nothing reported yet.
    Pending,
    /// A status or check run failed (error, failure, cancelled, timed out,
    /// action required, ...).
    Failure,
}

impl CiStatus {
    /// The verdict over both: any failure fails; else anything unfinished,
    /// or nothing at all, is pending; else success.
    pub fn state(&self) -> CiState {
        let mut pending = self.combined.statuses.is_empty() && self.check_runs.is_empty();
        for s in &self.combined.statuses {
            match s.state.as_str() {
                "success" => {}
                "pending" => pending = true,
                _ => return CiState::Failure,
            }
        }
        for c in &self.check_runs {
            if c.status != "completed" {
                pending = true;
                continue;
            }
            match c.conclusion.as_deref() {
                Some("success" | "neutral" | "skipped") => {}
                None => pending = true,
                Some(_) => return CiState::Failure,
            }
        }
        if pending {
            CiState::Pending
        } else {
            CiState::Success
        }
    }
}

/// How a pull request is merged (`merge_method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MergeMethod {
    /// A merge commit (GitHub's default).
    #[default]
    Merge,
    /// One squashed commit.
    Squash,
    /// The commits rebased onto the base.
    Rebase,
}

impl MergeMethod {
    /// `merge`, `squash` or `rebase`.
    pub fn as_str(self) -> &'static str {
        match self {
            MergeMethod::Merge => "merge",
            MergeMethod::Squash => "squash",
            MergeMethod::Rebase => "rebase",
        }
    }
}

impl std::str::FromStr for MergeMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "merge" => Ok(MergeMethod::Merge),
            "squash" => Ok(MergeMethod::Squash),
            "rebase" => Ok(MergeMethod::Rebase),
            _ => Err(format!("{s:?} is not merge, squash or rebase")),
        }
    }
}

/// What merging a pull request ended with: the answer to the `PUT`, or,
/// after a settled landing, `merged: true` and the merge commit as the
/// reads gave it (the pull request's `merge_commit_sha` when present, else
/// the last `merged` event's `commit_id`; `None` when nothing gave it
/// before the deadline).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeResult {
    /// Whether the pull request is merged.
    pub merged: bool,
    /// The merge commit's sha.
    #[serde(default)]
    pub sha: Option<String>,
}

/// The object a ref points at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefTarget {
    /// Its sha.
    pub sha: String,
    /// `commit`, `tag`, ...
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// The rest of the object as the forge sent it.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// A git ref as the API gives it (`GET …/git/ref/{ref}`); fields the
/// client does not use are kept as the forge sent them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitRef {
    /// The full name: `refs/heads/main`.
    #[serde(rename = "ref")]
    pub name: String,
    /// What it points at.
    pub object: RefTarget,
    /// The rest of the ref as the forge sent it.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// What updating a check run sends: only the fields set (`PATCH
/// …/check-runs/{id}`). A conclusion without a status completes the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRunUpdate {
    /// A new name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `queued`, `in_progress` or `completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `success`, `failure`, `neutral`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Where its details are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_url: Option<String>,
    /// `title`, `summary`, `text`: passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

impl CheckRunUpdate {
    /// Nothing set yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the status.
    pub fn status(mut self, status: impl Into<String>) -> Self {
        self.status = Some(status.into());
        self
    }

    /// Set the conclusion.
    pub fn conclusion(mut self, conclusion: impl Into<String>) -> Self {
        self.conclusion = Some(conclusion.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: &str, conclusion: Option<&str>) -> CheckRun {
        CheckRun {
            id: 1,
            name: "ci".into(),
            head_sha: "a".repeat(40),
            status: status.into(),
            conclusion: conclusion.map(str::to_string),
            external_id: None,
            details_url: None,
            html_url: None,
        }
    }

    fn ci(statuses: &[&str], runs: Vec<CheckRun>) -> CiStatus {
        CiStatus {
            combined: CombinedStatus {
                state: "pending".into(),
                sha: "a".repeat(40),
                statuses: statuses
                    .iter()
                    .map(|s| StatusContext {
                        context: "ctx".into(),
                        state: (*s).into(),
                        description: None,
                        target_url: None,
                    })
                    .collect(),
            },
            check_runs: runs,
        }
    }

    #[test]
    fn ci_state_fails_on_any_failure_waits_on_anything_unfinished_and_passes_otherwise() {
        assert_eq!(ci(&[], vec![]).state(), CiState::Pending);
        assert_eq!(
            ci(&["success"], vec![run("completed", Some("success"))]).state(),
            CiState::Success
        );
        assert_eq!(
            ci(&["success"], vec![run("in_progress", None)]).state(),
            CiState::Pending
        );
        assert_eq!(
            ci(&["pending"], vec![run("completed", Some("failure"))]).state(),
            CiState::Failure
        );
        assert_eq!(ci(&["error"], vec![]).state(), CiState::Failure);
        assert_eq!(
            ci(&[], vec![run("completed", Some("skipped"))]).state(),
            CiState::Success
        );
    }

    #[test]
    fn repo_refs_parse_owner_slash_name() {
        assert_eq!("o/r".parse::<RepoRef>(), Ok(RepoRef::new("o", "r")));
        assert!("o".parse::<RepoRef>().is_err());
        assert!("o/r/x".parse::<RepoRef>().is_err());
    }
}
