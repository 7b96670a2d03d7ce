//! Refs over a seeded commit graph: read one, and move one forward (a
//! non-fast-forward without `force` is 422), reads lagging the move when
//! told.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use serde_json::{json, Value};

use super::github::{self, ref_key};
use super::{fingerprint, json_reply, message, Endpoint, Reply, Request, State};

/// Whether `old` is `new` or an ancestor of it in `commits` (sha →
/// parents).
pub(super) fn fast_forward(commits: &HashMap<String, Vec<String>>, old: &str, new: &str) -> bool {
    let mut todo = vec![new.to_string()];
    let mut seen = HashSet::new();
    while let Some(c) = todo.pop() {
        if c == old {
            return true;
        }
        if seen.insert(c.clone()) {
            if let Some(ps) = commits.get(&c) {
                todo.extend(ps.iter().cloned());
            }
        }
    }
    false
}

fn ref_object(base_url: &str, repo: &str, r: &str, sha: &str) -> Value {
    json!({
        "ref": format!("refs/{r}"),
        "node_id": format!("REF_{}", fingerprint(&format!("{repo}/{r}"))),
        "url": format!("{base_url}/repos/{repo}/git/refs/{r}"),
        "object": { "sha": sha, "type": "commit", "url": format!("{base_url}/repos/{repo}/git/commits/{sha}") },
    })
}

/// `GET /repos/{o}/{r}/git/ref/{ref}`.
pub(super) fn get_ref(st: &State, base_url: &str, repo: &str, r: &str) -> Reply {
    match st.github.refs.get(&(repo.to_string(), r.to_string())) {
        Some(sha) => {
            let current = ref_object(base_url, repo, r, sha);
            json_reply(200, st.github.seen(&ref_key(repo, r), &current))
        }
        None => message(404, "Not Found"),
    }
}

/// `PATCH /repos/{o}/{r}/git/refs/{ref}` with `sha` and `force`.
pub(super) fn update_ref(
    st: &mut State,
    req: &Request,
    base_url: &str,
    repo: &str,
    r: &str,
    started: Instant,
) -> Reply {
    let b: Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
    let Some(new) = b.get("sha").and_then(Value::as_str).map(str::to_string) else {
        return json_reply(
            422,
            json!({ "message": "Invalid request.\n\n\"sha\" wasn't supplied." }),
        );
    };
    let force = b.get("force").and_then(Value::as_bool).unwrap_or(false);
    let k = (repo.to_string(), r.to_string());
    let Some(old) = st.github.refs.get(&k).cloned() else {
        return message(422, "Reference does not exist");
    };
    if !force && !fast_forward(&st.github.commits, &old, &new) {
        return message(422, "Update is not a fast forward");
    }
    st.github.refs.insert(k, new.clone());
    let key = ref_key(repo, r);
    st.github.lag(&key, ref_object(base_url, repo, r, &old));
    github::record(st, Endpoint::UpdateRef, key, started);
    json_reply(200, ref_object(base_url, repo, r, &new))
}
