//! What the fake GitHub's resources share (each resource is a module
//! beside this one: pulls, merges, refs, check runs, statuses, comments,
//! app tokens): the state refs and the commit graph live in, reads that
//! lag writes, the log of applied writes, pages (`per_page`, `page`,
//! `Link`), ETags (`If-None-Match` → 304) and the primary rate limit's
//! points.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{fingerprint, Endpoint, Reply, Request, State};

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

pub(super) fn record(st: &mut State, endpoint: Endpoint, key: String, started: Instant) {
    st.github.applied.push(AppliedWrite {
        endpoint,
        key,
        since_start: started.elapsed(),
    });
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
