//! Commit statuses: a ref's combined status (`failure` when any status is
//! an error or a failure, `pending` when any is pending or there are none,
//! else `success`), from the statuses the tests seed.

use serde_json::json;

use super::{json_reply, Reply, State};

/// `GET /repos/{o}/{r}/commits/{ref}/status`.
pub(super) fn combined_status(st: &State, repo: &str, git_ref: &str) -> Reply {
    let statuses = st
        .statuses
        .get(&(repo.to_string(), git_ref.to_string()))
        .cloned()
        .unwrap_or_default();
    let states: Vec<&str> = statuses
        .iter()
        .filter_map(|s| s["state"].as_str())
        .collect();
    let state = if states.iter().any(|s| *s == "error" || *s == "failure") {
        "failure"
    } else if states.is_empty() || states.contains(&"pending") {
        "pending"
    } else {
        "success"
    };
    json_reply(
        200,
        json!({
            "state": state,
            "sha": git_ref,
            "total_count": statuses.len(),
            "statuses": statuses,
        }),
    )
}
