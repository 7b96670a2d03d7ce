//! The stateful part of the fake GitHub: merging pull requests, refs with a
//! commit graph (fast-forward or force), check runs read and updated by id,
//! pages (`per_page`, `page`, `Link`), ETags (`If-None-Match` → 304), the
//! primary rate limit's points, reads that lag writes, and the log of
//! applied writes.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{fingerprint, json_reply, message, Endpoint, Reply, Request, State};

/// One write the fake forge applied (changed its state with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedWrite {
    /// The endpoint written to.
    pub endpoint: Endpoint,
    /// What was written: `pull:{repo}#{n}` (a merge), `ref:{repo}:{ref}`,
    /// `check-run:{id}` (an update), `check-run:{repo}:{external_id}` (a
    /// creation), `pull:{repo}:{head}->{base}` (a creation), or
    /// `comment:{repo}#{n}`.
    pub key: String,
    /// When (time since the server started).
    pub since_start: Duration,
}

/// The stateful fake's own part of [`State`].
#[derive(Default)]
pub(super) struct Github {
    /// Refs by (`owner/name`, `heads/main`): the sha.
    pub(super) refs: HashMap<(String, String), String>,
    /// The commit graph: sha → parents.
    pub(super) commits: HashMap<String, Vec<String>>,
    /// How long a write stays invisible to reads.
    pub(super) read_lag: Duration,
    /// The lag of the write being applied now, when its behaviour sets one.
    pub(super) lag_once: Option<Duration>,
    /// Objects as reads see them until the instant: key → (until, value).
    pub(super) stale: HashMap<String, (Instant, Value)>,
    /// Every applied write, in order.
    pub(super) applied: Vec<AppliedWrite>,
    /// Rate-limit points spent (every answered request but a 304).
    pub(super) points: u64,
    /// The primary limit: (points per window, when the window resets).
    pub(super) limit: Option<(u64, SystemTime)>,
    /// How many 304s were answered.
    pub(super) not_modified: u64,
}

impl Github {
    /// Remember `prior` as what reads of `key` see for the read lag (the
    /// oldest prior value is kept while an earlier lag lasts).
    pub(super) fn lag(&mut self, key: &str, prior: Value) {
        let lag = self.lag_once.unwrap_or(self.read_lag);
        if lag.is_zero() {
            return;
        }
        let now = Instant::now();
        let keep = self.stale.get(key).is_some_and(|(until, _)| *until > now);
        if !keep {
            self.stale.insert(key.to_string(), (now + lag, prior));
        }
    }

    /// What a read of `key` sees: the stale value while the lag lasts,
    /// else `current`.
    pub(super) fn seen(&self, key: &str, current: &Value) -> Value {
        match self.stale.get(key) {
            Some((until, v)) if *until > Instant::now() => v.clone(),
            _ => current.clone(),
        }
    }

    /// Whether `old` is `new` or an ancestor of it.
    fn fast_forward(&self, old: &str, new: &str) -> bool {
        let mut todo = vec![new.to_string()];
        let mut seen = HashSet::new();
        while let Some(c) = todo.pop() {
            if c == old {
                return true;
            }
            if seen.insert(c.clone()) {
                if let Some(ps) = self.commits.get(&c) {
                    todo.extend(ps.iter().cloned());
                }
            }
        }
        false
    }
}

pub(super) fn pull_key(repo: &str, n: u64) -> String {
    format!("pull:{repo}#{n}")
}

pub(super) fn ref_key(repo: &str, r: &str) -> String {
    format!("ref:{repo}:{r}")
}

pub(super) fn run_key(id: u64) -> String {
    format!("check-run:{id}")
}

/// The merge commit the fake makes for pull `n` of `repo` at `head`.
pub fn merge_commit_sha(repo: &str, n: u64, head: &str) -> String {
    let a = fingerprint(&format!("merge/{repo}/{n}/{head}"));
    let b = fingerprint(&format!("{a}/2"));
    let c = fingerprint(&format!("{b}/3"));
    let d = fingerprint(&format!("{c}/4"));
    format!("{a}{b}{c}{}", &d[..4])
}

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

pub(super) fn record(st: &mut State, endpoint: Endpoint, key: String, started: Instant) {
    st.github.applied.push(AppliedWrite {
        endpoint,
        key,
        since_start: started.elapsed(),
    });
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
    record(st, Endpoint::MergePull, key, started);
    json_reply(
        200,
        json!({ "sha": sha, "merged": true, "message": "Pull Request successfully merged" }),
    )
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
    if !force && !st.github.fast_forward(&old, &new) {
        return message(422, "Update is not a fast forward");
    }
    st.github.refs.insert(k, new.clone());
    let key = ref_key(repo, r);
    st.github.lag(&key, ref_object(base_url, repo, r, &old));
    record(st, Endpoint::UpdateRef, key, started);
    json_reply(200, ref_object(base_url, repo, r, &new))
}

/// `GET /repos/{o}/{r}/check-runs/{id}`.
pub(super) fn get_check_run(st: &State, repo: &str, id: u64) -> Reply {
    match st
        .check_runs
        .get(repo)
        .and_then(|rs| rs.iter().find(|r| r["id"] == id))
    {
        Some(r) => json_reply(200, st.github.seen(&run_key(id), r)),
        None => message(404, "Not Found"),
    }
}

/// `PATCH /repos/{o}/{r}/check-runs/{id}`: the fields given are set; a
/// conclusion without a status completes the run, as GitHub does.
pub(super) fn update_check_run(
    st: &mut State,
    req: &Request,
    repo: &str,
    id: u64,
    started: Instant,
) -> Reply {
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&req.body) else {
        return message(400, "Problems parsing JSON");
    };
    let Some(run) = st
        .check_runs
        .get_mut(repo)
        .and_then(|rs| rs.iter_mut().find(|r| r["id"] == id))
    else {
        return message(404, "Not Found");
    };
    if let Some(s) = b.get("status").and_then(Value::as_str) {
        if !matches!(s, "queued" | "in_progress" | "completed") {
            return json_reply(
                422,
                json!({ "message": "Validation Failed", "errors": [{ "field": "status", "code": "invalid" }] }),
            );
        }
    }
    let prior = run.clone();
    for field in [
        "name",
        "status",
        "conclusion",
        "details_url",
        "external_id",
        "output",
        "completed_at",
    ] {
        if let Some(v) = b.get(field) {
            run[field] = v.clone();
        }
    }
    if b.contains_key("conclusion") && !b.contains_key("status") {
        run["status"] = json!("completed");
    }
    let now = run.clone();
    let key = run_key(id);
    st.github.lag(&key, prior);
    record(st, Endpoint::UpdateCheckRun, key, started);
    json_reply(200, now)
}

/// One page of `items` as `per_page` and `page` ask (GitHub's default 30,
/// at most 100), with `Link` to the next and last pages; `wrap` makes the
/// body of a page.
pub(super) fn page(req: &Request, items: Vec<Value>, wrap: impl Fn(Vec<Value>) -> Value) -> Reply {
    let per_page = req
        .query("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = req
        .query("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let last = items.len().div_ceil(per_page).max(1);
    let chunk: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let link_to = |p: usize| {
        let host = req.header("host").unwrap_or("127.0.0.1");
        let mut query: Vec<String> = req
            .target
            .split_once('?')
            .map(|(_, q)| q.split('&').map(str::to_string).collect())
            .unwrap_or_default();
        query.retain(|kv| !kv.starts_with("page=") && !kv.is_empty());
        query.push(format!("page={p}"));
        format!("<http://{host}{}?{}>", req.path(), query.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", link_to(page + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", link_to(1)));
        links.push(format!("{}; rel=\"prev\"", link_to(page - 1)));
    }
    let headers = if links.is_empty() {
        Vec::new()
    } else {
        vec![("Link".to_string(), links.join(", "))]
    };
    Reply::Answer {
        status: 200,
        headers,
        body: wrap(chunk).to_string(),
    }
}

/// The ETag of a body.
fn etag_of(body: &str) -> String {
    format!("W/\"{}\"", fingerprint(body))
}

/// Whether `If-None-Match` names `etag` (weak or strong, in a list, or `*`).
fn matches(if_none_match: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    if_none_match
        .split(',')
        .any(|t| t.trim() == "*" || bare(t) == bare(etag))
}

/// Dress a GET's 200 with its `ETag`, or answer 304 when the client holds
/// it; count the rate-limit point (a 304 costs none) and add the limit's
/// headers when one is set.
pub(super) fn finish(st: &mut State, req: &Request, reply: Reply) -> Reply {
    let reply = match reply {
        Reply::Answer {
            status: 200,
            mut headers,
            body,
        } if req.method == "GET" => {
            let etag = etag_of(&body);
            headers.push(("ETag".into(), etag.clone()));
            if req
                .header("if-none-match")
                .is_some_and(|v| matches(v, &etag))
            {
                st.github.not_modified += 1;
                headers.retain(|(k, _)| !k.eq_ignore_ascii_case("link"));
                return with_limit_headers(
                    st,
                    Reply::Answer {
                        status: 304,
                        headers,
                        body: String::new(),
                    },
                );
            }
            Reply::Answer {
                status: 200,
                headers,
                body,
            }
        }
        other => other,
    };
    if let Reply::Answer { .. } = reply {
        st.github.points += 1;
    }
    with_limit_headers(st, reply)
}

fn with_limit_headers(st: &State, reply: Reply) -> Reply {
    match (reply, st.github.limit) {
        (
            Reply::Answer {
                status,
                mut headers,
                body,
            },
            Some((limit, reset)),
        ) => {
            if !headers.iter().any(|(k, _)| k == "x-ratelimit-remaining") {
                let used = st.github.points.min(limit);
                headers.push(("x-ratelimit-limit".into(), limit.to_string()));
                headers.push(("x-ratelimit-remaining".into(), (limit - used).to_string()));
                headers.push(("x-ratelimit-used".into(), used.to_string()));
                headers.push(("x-ratelimit-reset".into(), epoch(reset).to_string()));
            }
            Reply::Answer {
                status,
                headers,
                body,
            }
        }
        (reply, _) => reply,
    }
}

/// Epoch seconds.
pub(super) fn epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The primary limit's answer when the window's points are spent: 403
/// with `x-ratelimit-remaining: 0` and the reset.
pub(super) fn over_limit(st: &State) -> Option<Reply> {
    let (limit, reset) = st.github.limit?;
    if st.github.points < limit || SystemTime::now() >= reset {
        return None;
    }
    Some(Reply::Answer {
        status: 403,
        headers: vec![
            ("x-ratelimit-limit".into(), limit.to_string()),
            ("x-ratelimit-remaining".into(), "0".into()),
            ("x-ratelimit-used".into(), limit.to_string()),
            ("x-ratelimit-reset".into(), epoch(reset).to_string()),
        ],
        body: json!({ "message": "API rate limit exceeded for installation ID 1.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api" }).to_string(),
    })
}
