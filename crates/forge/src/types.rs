//! The API's objects sluice uses, as far as it reads them (unknown fields
//! are ignored, missing optional ones are `None`). A commit status, a
//! combined status and a check run are read leniently: what cannot be
//! read of one (a field missing or of another type) is left empty or
//! `None`, and the rest is kept — one odd item never fails a CI read.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A string field of `v`, when it is one.
fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

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

/// One commit status of the combined status, read leniently (a field that
/// cannot be read is empty or `None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Value")]
pub struct StatusContext {
    /// The status's name (empty when it could not be read).
    pub context: String,
    /// `error`, `failure`, `pending` or `success` (empty when it could not
    /// be read: not a pass).
    pub state: String,
    /// What the status says.
    pub description: Option<String>,
    /// Where its details are.
    pub target_url: Option<String>,
}

impl From<Value> for StatusContext {
    fn from(v: Value) -> Self {
        StatusContext {
            context: text(&v, "context").unwrap_or_default(),
            state: text(&v, "state").unwrap_or_default(),
            description: text(&v, "description"),
            target_url: text(&v, "target_url"),
        }
    }
}

/// The combined commit status of a ref, read leniently: its statuses are
/// kept as far as each decodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Value")]
pub struct CombinedStatus {
    /// `failure`, `pending` or `success` (GitHub's combination).
    pub state: String,
    /// The commit.
    pub sha: String,
    /// The statuses, latest per context.
    pub statuses: Vec<StatusContext>,
}

impl From<Value> for CombinedStatus {
    fn from(v: Value) -> Self {
        CombinedStatus {
            state: text(&v, "state").unwrap_or_default(),
            sha: text(&v, "sha").unwrap_or_default(),
            statuses: v["statuses"]
                .as_array()
                .map(|a| a.iter().cloned().map(StatusContext::from).collect())
                .unwrap_or_default(),
        }
    }
}

/// A check run, read leniently: a field missing or of another type is
/// empty or `None` and the rest is kept (one odd run never fails a read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Value")]
pub struct CheckRun {
    /// The check run's id (`None` when the forge gave none that reads as
    /// one).
    pub id: Option<u64>,
    /// Its name.
    pub name: String,
    /// The commit it checks (empty when the forge left it out: some
    /// GitHub Enterprise versions do, and it is still a check run).
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`, ... (empty when unreadable:
    /// not finished).
    pub status: String,
    /// Once completed: `success`, `failure`, `neutral`, `cancelled`,
    /// `skipped`, `timed_out`, `action_required`, `stale`, ...
    pub conclusion: Option<String>,
    /// When it started (ISO 8601, as the forge gives it).
    pub started_at: Option<String>,
    /// The caller's own id for it.
    pub external_id: Option<String>,
    /// Where its details are.
    pub details_url: Option<String>,
    /// The page a person opens.
    pub html_url: Option<String>,
}

impl From<Value> for CheckRun {
    fn from(v: Value) -> Self {
        CheckRun {
            id: v.get("id").and_then(Value::as_u64),
            name: text(&v, "name").unwrap_or_default(),
            head_sha: text(&v, "head_sha").unwrap_or_default(),
            status: text(&v, "status").unwrap_or_default(),
            conclusion: text(&v, "conclusion"),
            started_at: text(&v, "started_at"),
            external_id: text(&v, "external_id"),
            details_url: text(&v, "details_url"),
            html_url: text(&v, "html_url"),
        }
    }
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
    #[serde(default)]
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
/// after a settled landing, `merged: true` and the read's
/// `merge_commit_sha`.
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

    #[test]
    fn a_check_run_or_a_status_is_kept_as_far_as_it_decodes() {
        let run: CheckRun = serde_json::from_value(serde_json::json!({
            "name": "build", "status": "completed", "conclusion": 7, "head_sha": null,
        }))
        .expect("never fails");
        assert_eq!(run.id, None);
        assert_eq!(run.name, "build");
        assert_eq!(run.status, "completed");
        assert_eq!(run.conclusion, None);
        let list: CheckRunList = serde_json::from_str(
            r#"{"check_runs":[{"id":"x","name":"a"},{"id":3,"name":"b","status":"queued"}]}"#,
        )
        .expect("a list");
        assert_eq!(list.check_runs.len(), 2);
        assert_eq!(list.check_runs[1].id, Some(3));
        let combined: CombinedStatus = serde_json::from_str(
            r#"{"state":"success","statuses":[{"context":"lint"},{"state":"success","context":["x"]}]}"#,
        )
        .expect("a status");
        assert_eq!(combined.statuses.len(), 2);
        assert_eq!(combined.statuses[0].context, "lint");
        assert_eq!(combined.statuses[0].state, "");
    }

    #[test]
    fn repo_refs_parse_owner_slash_name() {
        assert_eq!("o/r".parse::<RepoRef>(), Ok(RepoRef::new("o", "r")));
        assert!("o".parse::<RepoRef>().is_err());
        assert!("o/r/x".parse::<RepoRef>().is_err());
    }
}
