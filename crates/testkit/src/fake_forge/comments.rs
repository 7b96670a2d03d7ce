//! Issue comments: a new one on an issue or pull request.

use std::time::Instant;

use serde_json::json;

use super::github;
use super::{body_json, json_reply, message, missing, str_field, Endpoint, Reply, Request, State};

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
    let c = json!({
        "id": id,
        "body": text,
        "issue_number": n.parse::<u64>().unwrap_or(0),
        "html_url": format!("https://forge.invalid/{repo}/issues/{n}#issuecomment-{id}"),
    });
    let key = format!("comment:{repo}#{n}");
    st.comments
        .entry(repo.to_string())
        .or_default()
        .push(c.clone());
    github::record(st, Endpoint::CreateIssueComment, key, started);
    json_reply(201, c)
}
