//! Merging a pull request: `sha` checked against the head (409), a closed
//! or unmergeable pull request refused (405), the merge commit the fake
//! makes, reads lagging the merge when told.

use std::time::{Instant, SystemTime};

use serde_json::{json, Value};

use super::github::{self, pull_key};
use super::{fingerprint, json_reply, message, Endpoint, Reply, Request, State};

/// The merge commit the fake makes for pull `n` of `repo` at `head`.
pub fn merge_commit_sha(repo: &str, n: u64, head: &str) -> String {
    let a = fingerprint(&format!("merge/{repo}/{n}/{head}"));
    let b = fingerprint(&format!("{a}/2"));
    let c = fingerprint(&format!("{b}/3"));
    let d = fingerprint(&format!("{c}/4"));
    format!("{a}{b}{c}{}", &d[..4])
}

/// Merge `p` (state to closed, merged, the merge commit) and return the
/// merge commit's sha.
pub(super) fn merge_in_place(p: &mut Value, repo: &str, n: u64) -> String {
    let head = p["head"]["sha"].as_str().unwrap_or("").to_string();
    let sha = merge_commit_sha(repo, n, &head);
    p["state"] = json!("closed");
    p["merged"] = json!(true);
    p["mergeable"] = Value::Null;
    p["merge_commit_sha"] = json!(sha);
    p["merged_at"] = json!(humantime::format_rfc3339_seconds(SystemTime::now()).to_string());
    sha
}

/// `PUT /repos/{o}/{r}/pulls/{n}/merge` with `sha` and `merge_method`.
pub(super) fn merge_pull(
    st: &mut State,
    req: &Request,
    repo: &str,
    n: u64,
    started: Instant,
) -> Reply {
    let b: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
    if let Some(m) = b.get("merge_method").and_then(Value::as_str) {
        if !matches!(m, "merge" | "squash" | "rebase") {
            return json_reply(
                422,
                json!({ "message": "Validation Failed", "errors": [{ "field": "merge_method", "code": "invalid" }] }),
            );
        }
    }
    let Some(p) = st
        .pulls
        .get_mut(repo)
        .and_then(|ps| ps.iter_mut().find(|p| p["number"] == n))
    else {
        return message(404, "Not Found");
    };
    if p["state"] != "open" || p["mergeable"] == false {
        return message(405, "Pull Request is not mergeable");
    }
    if let Some(sha) = b.get("sha").and_then(Value::as_str) {
        if p["head"]["sha"] != sha {
            return message(
                409,
                "Head branch was modified. Review and try the merge again.",
            );
        }
    }
    let prior = p.clone();
    let sha = merge_in_place(p, repo, n);
    let key = pull_key(repo, n);
    st.github.lag(&key, prior);
    github::record(st, Endpoint::MergePull, key, started);
    super::events::record(st, repo, n, "merged", Some(&sha));
    json_reply(
        200,
        json!({ "sha": sha, "merged": true, "message": "Pull Request successfully merged" }),
    )
}
