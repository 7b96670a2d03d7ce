//! An issue's events (`merged`, with the merge commit as `commit_id`, as
//! GitHub records it) in pages, and the comparison of two commits over the
//! seeded commit graph (`ahead`, `behind`, `identical`, `diverged`).

use serde_json::{json, Value};

use super::github;
use super::refs::fast_forward;
use super::{json_reply, message, Reply, Request, State};

/// Record an event of `kind` on issue `n` of `repo` (`commit_id` when
/// given).
pub(super) fn record(st: &mut State, repo: &str, n: u64, kind: &str, commit_id: Option<&str>) {
    st.next_id += 1;
    let id = st.next_id;
    st.events
        .entry((repo.to_string(), n))
        .or_default()
        .push(json!({
            "id": id,
            "event": kind,
            "commit_id": commit_id,
            "actor": { "login": "fake" },
        }));
}

/// `GET /repos/{o}/{r}/issues/{n}/events`, one page of it (oldest first).
pub(super) fn list_events(st: &State, req: &Request, repo: &str, n: u64) -> Reply {
    let all = st
        .events
        .get(&(repo.to_string(), n))
        .cloned()
        .unwrap_or_default();
    github::page(req, all, Value::Array)
}

/// A branch name or a sha of `repo`, as a sha.
fn resolve(st: &State, repo: &str, name: &str) -> Option<String> {
    if let Some(sha) = st
        .github
        .refs
        .get(&(repo.to_string(), format!("heads/{name}")))
    {
        return Some(sha.clone());
    }
    let hex = name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| name.to_string())
}

/// `GET /repos/{o}/{r}/compare/{base}...{head}`: how `head` stands to
/// `base` (`identical`, `behind`: head already in base, `ahead`,
/// `diverged`).
pub(super) fn compare(st: &State, repo: &str, basehead: &str) -> Reply {
    let Some((base, head)) = basehead.split_once("...") else {
        return message(404, "Not Found");
    };
    let (Some(b), Some(h)) = (resolve(st, repo, base), resolve(st, repo, head)) else {
        return message(404, "Not Found");
    };
    let commits = &st.github.commits;
    let status = if b == h {
        "identical"
    } else if fast_forward(commits, &h, &b) {
        "behind"
    } else if fast_forward(commits, &b, &h) {
        "ahead"
    } else {
        "diverged"
    };
    json_reply(
        200,
        json!({
            "status": status,
            "base_commit": { "sha": b },
            "head_commit": { "sha": h },
        }),
    )
}
