//! Issue comments: a new one on an issue or pull request, and the list of
//! an issue's comments (`since`, in pages), as GitHub keeps them.

use std::time::{Instant, SystemTime};

use serde_json::{json, Value};

use super::github;
use super::{body_json, json_reply, message, missing, str_field, Endpoint, Reply, Request, State};

/// A comment object as the fake keeps it.
fn comment(id: u64, repo: &str, n: &str, text: &str, created_at: &str) -> Value {
    json!({
        "id": id,
        "body": text,
        "issue_number": n.parse::<u64>().unwrap_or(0),
        "created_at": created_at,
        "updated_at": created_at,
        "html_url": format!("https://forge.invalid/{repo}/issues/{n}#issuecomment-{id}"),
    })
}

/// Seed a comment (not logged as an applied write); returns its id.
pub(super) fn seed(st: &mut State, repo: &str, n: u64, text: &str, created_at: &str) -> u64 {
    st.next_id += 1;
    let id = st.next_id;
    let c = comment(id, repo, &n.to_string(), text, created_at);
    st.comments.entry(repo.to_string()).or_default().push(c);
    id
}

/// `POST /repos/{o}/{r}/issues/{n}/comments` with `body`; `n` as the path
/// gave it.
pub(super) fn create_issue_comment(
    st: &mut State,
    req: &Request,
    repo: &str,
    n: &str,
    started: Instant,
) -> Reply {
    let Some(b) = body_json(req) else {
        return message(400, "Problems parsing JSON");
    };
    let Some(text) = str_field(&b, "body") else {
        return missing("body");
    };
    st.next_id += 1;
    let id = st.next_id;
    let now = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let c = comment(id, repo, n, text, &now);
    let key = format!("comment:{repo}#{n}");
    st.comments
        .entry(repo.to_string())
        .or_default()
        .push(c.clone());
    github::record(st, Endpoint::CreateIssueComment, key, started);
    json_reply(201, c)
}

/// `GET /repos/{o}/{r}/issues/{n}/comments?since=`: the issue's comments
/// updated at or after `since` (RFC 3339; all without it), oldest first,
/// one page of them.
pub(super) fn list_issue_comments(st: &State, req: &Request, repo: &str, n: &str) -> Reply {
    let since = req
        .query("since")
        .and_then(|s| humantime::parse_rfc3339_weak(&s).ok());
    let number = n.parse::<u64>().unwrap_or(0);
    let list: Vec<Value> = st
        .comments
        .get(repo)
        .map(|cs| {
            cs.iter()
                .filter(|c| c["issue_number"] == number)
                .filter(|c| match (since, c["updated_at"].as_str()) {
                    (Some(s), Some(at)) => humantime::parse_rfc3339_weak(at).is_ok_and(|t| t >= s),
                    _ => true,
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    github::page(req, list, Value::Array)
}
