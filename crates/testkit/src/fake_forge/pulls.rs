//! Pull requests: one read by number (as reads see it while a merge
//! lags), the list by head, base and state (in pages), and a new one.

use std::time::Instant;

use serde_json::{json, Value};

use super::github::{self, pull_key};
use super::{body_json, json_reply, message, missing, str_field, Endpoint, Reply, Request, State};

/// A pull request object as the fake keeps it.
pub(super) fn new_pull(
    base_url: &str,
    repo: &str,
    id: u64,
    number: u64,
    head_ref: &str,
    base_ref: &str,
    head_sha: &str,
) -> Value {
    let owner = repo.split('/').next().unwrap_or("");
    json!({
        "id": id,
        "number": number,
        "state": "open",
        "title": format!("pull {number}"),
        "body": null,
        "draft": false,
        "merged": false,
        "mergeable": true,
        "merge_commit_sha": null,
        "merged_at": null,
        "head": { "ref": head_ref, "label": format!("{owner}:{head_ref}"), "sha": head_sha },
        "base": { "ref": base_ref, "label": format!("{owner}:{base_ref}"), "sha": "0".repeat(40) },
        "url": format!("{base_url}/repos/{repo}/pulls/{number}"),
        "html_url": format!("https://forge.invalid/{repo}/pull/{number}"),
    })
}

/// `GET /repos/{o}/{r}/pulls/{n}`, as reads see it.
pub(super) fn get_pull(st: &State, repo: &str, n: u64) -> Reply {
    match st
        .pulls
        .get(repo)
        .and_then(|ps| ps.iter().find(|p| p["number"] == n))
    {
        Some(p) => json_reply(200, st.github.seen(&pull_key(repo, n), p)),
        None => message(404, "Not Found"),
    }
}

/// `GET /repos/{o}/{r}/pulls?head=&base=&state=` (state `open` unless
/// asked), one page of it.
pub(super) fn list_pulls(st: &State, req: &Request, repo: &str) -> Reply {
    let head = req.query("head");
    let base_ref = req.query("base");
    let state = req.query("state").unwrap_or_else(|| "open".into());
    let list: Vec<Value> = st
        .pulls
        .get(repo)
        .map(|ps| {
            ps.iter()
                .filter(|p| {
                    head.as_ref()
                        .is_none_or(|h| p["head"]["label"] == h.as_str())
                })
                .filter(|p| {
                    base_ref
                        .as_ref()
                        .is_none_or(|b| p["base"]["ref"] == b.as_str())
                })
                .filter(|p| state == "all" || p["state"] == state.as_str())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    github::page(req, list, Value::Array)
}

/// `POST /repos/{o}/{r}/pulls` with `title`, `head` and `base`: 422 when an
/// open pull request from that head into that base exists.
pub(super) fn create_pull(
    st: &mut State,
    req: &Request,
    base_url: &str,
    repo: &str,
    started: Instant,
) -> Reply {
    let Some(b) = body_json(req) else {
        return message(400, "Problems parsing JSON");
    };
    let (Some(title), Some(head), Some(base_ref)) = (
        str_field(&b, "title"),
        str_field(&b, "head"),
        str_field(&b, "base"),
    ) else {
        return missing("title/head/base");
    };
    let owner = repo.split('/').next().unwrap_or("");
    let (label, head_ref) = match head.split_once(':') {
        Some((_, r)) => (head.to_string(), r.to_string()),
        None => (format!("{owner}:{head}"), head.to_string()),
    };
    let exists = st.pulls.get(repo).is_some_and(|ps| {
        ps.iter().any(|p| {
            p["state"] == "open"
                && p["head"]["label"] == label.as_str()
                && p["base"]["ref"] == base_ref
        })
    });
    if exists {
        return json_reply(
            422,
            json!({
                "message": "Validation Failed",
                "errors": [{ "resource": "PullRequest", "code": "custom", "message": format!("A pull request already exists for {label}.") }],
            }),
        );
    }
    st.next_number += 1;
    st.next_id += 1;
    let number = st.next_number;
    let pr = json!({
        "id": st.next_id,
        "number": number,
        "state": "open",
        "title": title,
        "body": b.get("body").cloned().unwrap_or(Value::Null),
        "draft": b.get("draft").and_then(Value::as_bool).unwrap_or(false),
        "merged": false,
        "head": { "ref": head_ref, "label": label, "sha": "0".repeat(40) },
        "base": { "ref": base_ref, "label": format!("{owner}:{base_ref}"), "sha": "0".repeat(40) },
        "url": format!("{base_url}/repos/{repo}/pulls/{number}"),
        "html_url": format!("https://forge.invalid/{repo}/pull/{number}"),
    });
    let key = format!("pull:{repo}:{label}->{base_ref}");
    st.pulls
        .entry(repo.to_string())
        .or_default()
        .push(pr.clone());
    github::record(st, Endpoint::CreatePull, key, started);
    json_reply(201, pr)
}
