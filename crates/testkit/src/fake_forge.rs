//! A fake forge: a real HTTP/1.1 server on `127.0.0.1` (an ephemeral port,
//! one thread per connection, keep-alive) speaking enough of GitHub's REST
//! API for sluice's calls, with state and per-endpoint faults.
//!
//! * **State**: created pull requests, check runs and issue comments are
//!   kept and listed by later reads; commit statuses and check runs can be
//!   seeded.
//! * **Behaviours** per [`Endpoint`] ([`Behaviour`]): `ok`, `delay`,
//!   `fail5xx`, `fail5xx-then-ok(K)`, `status(S, retry-after)`,
//!   `rate-limited(retry-after)` (429), `primary-limit(reset)` (403 with
//!   `x-ratelimit-remaining: 0`), `secondary-limit` (403 naming GitHub's
//!   secondary rate limit, no header), `token(valid=...)` (401 for any other
//!   bearer token), `invalid` (422), `apply-then-cut` (the write is applied,
//!   then the connection is closed unanswered), `apply-then-status(S)` (the
//!   write is applied, then answered with `S`), and `redirect`.
//!   [`FakeForge::set`] sets an endpoint's standing behaviour;
//!   [`FakeForge::push`] queues one-shot behaviours used first.
//! * **Log**: every arrival (request head read) and every completion
//!   (answered, cut, client gone, or stopped) with the time, method, path
//!   and the bearer token's fingerprint (first 12 hex digits of its
//!   SHA-256; never the token).
//! * **GitHub App**: `POST /app/installations/{id}/access_tokens` takes a
//!   JWT-shaped bearer, records it, and mints a token with an `expires_at`.
//!
//! As a stateful GitHub (a module per resource — pulls, merges, refs,
//! check runs, statuses, comments, app tokens — beside [`github`], which
//! holds what they share): pull requests merge
//! (`sha` checked against the head: 409; closed or unmergeable: 405),
//! refs move over a seeded commit graph (a non-fast-forward without
//! `force` is 422), check runs are read and updated by id, lists of check
//! runs and pull requests come in pages (`per_page`, `page`, `Link`),
//! every GET's 200 carries an `ETag` and `If-None-Match` is answered 304,
//! every answer but a 304 spends a rate-limit point (with
//! [`FakeForge::set_rate_limit`], the primary limit answers 403 once they
//! are spent), [`FakeForge::set_read_lag`] makes reads see a merge, a ref
//! update or a check-run update only after a set time, and every applied
//! write is logged ([`FakeForge::applied_writes`]). A path under
//! `/api/v3` is served as GitHub Enterprise's.
//!
//! The server stops when the [`FakeForge`] is dropped: delayed answers are
//! abandoned (logged as stopped) and every thread is joined.
//!
//! Routes:
//!
//! | method | path | endpoint |
//! |---|---|---|
//! | GET | `/repos/{o}/{r}/pulls/{n}` | [`Endpoint::GetPull`] |
//! | GET | `/repos/{o}/{r}/pulls?head=&base=&state=` | [`Endpoint::ListPulls`] |
//! | POST | `/repos/{o}/{r}/pulls` | [`Endpoint::CreatePull`] |
//! | GET | `/repos/{o}/{r}/commits/{ref}/status` | [`Endpoint::CombinedStatus`] |
//! | GET | `/repos/{o}/{r}/commits/{ref}/check-runs?check_name=&filter=` | [`Endpoint::ListCheckRuns`] (`filter=all`: every run; else the latest per name, as GitHub's default `latest`) |
//! | GET | `/repos/{o}/{r}/branches/{b}/protection/required_status_checks` | [`Endpoint::RequiredStatusChecks`] (404 unless seeded) |
//! | GET | `/repos/{o}/{r}/rules/branches/{b}` | [`Endpoint::BranchRules`] (in pages; `[]` unless seeded) |
//! | POST | `/repos/{o}/{r}/check-runs` | [`Endpoint::CreateCheckRun`] |
//! | POST | `/repos/{o}/{r}/issues/{n}/comments` | [`Endpoint::CreateIssueComment`] |
//! | POST | `/app/installations/{id}/access_tokens` | [`Endpoint::AccessToken`] |
//! | PUT | `/repos/{o}/{r}/pulls/{n}/merge` | [`Endpoint::MergePull`] |
//! | GET | `/repos/{o}/{r}/git/ref/{ref}` | [`Endpoint::GetRef`] |
//! | PATCH | `/repos/{o}/{r}/git/refs/{ref}` | [`Endpoint::UpdateRef`] |
//! | GET | `/repos/{o}/{r}/check-runs/{id}` | [`Endpoint::GetCheckRun`] |
//! | PATCH | `/repos/{o}/{r}/check-runs/{id}` | [`Endpoint::UpdateCheckRun`] |
//! | GET | `/zen` | [`Endpoint::Zen`] |
//! | any | anything else | [`Endpoint::Other`] (404) |

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

mod app;
mod check_runs;
mod comments;
mod events;
pub mod github;
mod merges;
mod protection;
mod pulls;
mod refs;
mod statuses;
pub use github::AppliedWrite;
pub use merges::merge_commit_sha;

/// GitHub's words for a secondary rate limit, as the fake forge answers them.
pub const SECONDARY_LIMIT_MESSAGE: &str = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID 0000:0000:0000000:0000000:00000000.";

/// The fake forge's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /repos/{o}/{r}/pulls/{n}`.
    GetPull,
    /// `GET /repos/{o}/{r}/pulls`.
    ListPulls,
    /// `POST /repos/{o}/{r}/pulls`.
    CreatePull,
    /// `GET /repos/{o}/{r}/commits/{ref}/status`.
    CombinedStatus,
    /// `GET /repos/{o}/{r}/commits/{ref}/check-runs`.
    ListCheckRuns,
    /// `POST /repos/{o}/{r}/check-runs`.
    CreateCheckRun,
    /// `POST /repos/{o}/{r}/issues/{n}/comments`.
    CreateIssueComment,
    /// `GET /repos/{o}/{r}/issues/{n}/comments` (`since`, in pages).
    ListIssueComments,
    /// `GET /repos/{o}/{r}/issues/{n}/events` (in pages).
    IssueEvents,
    /// `GET /repos/{o}/{r}/compare/{base}...{head}`.
    Compare,
    /// `POST /app/installations/{id}/access_tokens`.
    AccessToken,
    /// `PUT /repos/{o}/{r}/pulls/{n}/merge`.
    MergePull,
    /// `GET /repos/{o}/{r}/git/ref/{ref}`.
    GetRef,
    /// `PATCH /repos/{o}/{r}/git/refs/{ref}`.
    UpdateRef,
    /// `GET /repos/{o}/{r}/check-runs/{id}`.
    GetCheckRun,
    /// `PATCH /repos/{o}/{r}/check-runs/{id}`.
    UpdateCheckRun,
    /// `GET /repos/{o}/{r}/branches/{b}/protection/required_status_checks`.
    RequiredStatusChecks,
    /// `GET /repos/{o}/{r}/rules/branches/{b}`.
    BranchRules,
    /// `GET /zen`: a line of text.
    Zen,
    /// Anything else: 404.
    Other,
}

/// How an endpoint behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answer as the API does.
    Ok,
    /// Wait, then answer as `Ok` (a write is applied after the wait).
    Delay(Duration),
    /// 500, every time, nothing applied.
    Fail5xx,
    /// 500 for the first `K` requests after this is set, then `Ok`.
    Fail5xxThenOk(u32),
    /// This status (nothing applied), with `Retry-After: S` when given.
    Status {
        /// The status code.
        status: u16,
        /// `Retry-After` in seconds.
        retry_after: Option<u64>,
    },
    /// 429 with `Retry-After: S`, nothing applied.
    RateLimited {
        /// `Retry-After` in seconds.
        retry_after: u64,
    },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset: T`
    /// (epoch seconds), nothing applied.
    PrimaryLimit {
        /// When the limit resets.
        reset: SystemTime,
    },
    /// 403 naming GitHub's secondary rate limit, no header, nothing applied.
    SecondaryLimit,
    /// 403 naming GitHub's secondary rate limit with `Retry-After: S`,
    /// nothing applied.
    SecondaryLimitAfter {
        /// `Retry-After` in seconds.
        retry_after: u64,
    },
    /// Apply the request, then say nothing for this long (or until the
    /// server stops), then close the connection unanswered.
    ApplyThenStall(Duration),
    /// Apply the request with reads lagging it by `lag` (whatever
    /// [`FakeForge::set_read_lag`] says), then answer `status`.
    ApplyLaggingThenStatus {
        /// How long reads still see the object as it was.
        lag: Duration,
        /// The answer.
        status: u16,
    },
    /// `Ok` for a bearer token in `valid`; 401 for any other (or none).
    Token {
        /// The accepted tokens.
        valid: Vec<String>,
    },
    /// 422 Validation Failed, nothing applied.
    Invalid,
    /// Apply the request, then close the connection without answering.
    ApplyThenCut,
    /// Apply the request, then answer this status instead.
    ApplyThenStatus(u16),
    /// Answer `status` with `Location: location`, nothing applied.
    Redirect {
        /// 301, 302, 307, ...
        status: u16,
        /// Where to.
        location: String,
    },
}

/// What a log entry records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The request's head was read.
    Arrival,
    /// An answer with this status was written.
    Answered(u16),
    /// The connection was closed without an answer (`apply-then-cut`).
    Cut,
    /// An answer with this status could not be written: the client had gone.
    ClientGone(u16),
    /// The server stopped before answering.
    Stopped,
}

/// One line of the fake forge's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// The request's number (arrival and completion share it).
    pub request: u64,
    /// What happened.
    pub event: Event,
    /// When (monotonic, comparable with the test's own `Instant`s).
    pub at: Instant,
    /// Time since the server started.
    pub since_start: Duration,
    /// The method.
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The endpoint it was routed to.
    pub endpoint: Endpoint,
    /// The bearer token's fingerprint (SHA-256, first 12 hex digits).
    pub token: Option<String>,
    /// The request's headers, names in lower case, in order, less
    /// `authorization` (its fingerprint is `token`).
    pub headers: Vec<(String, String)>,
}

impl LogEntry {
    /// Whether this entry is a completion (anything but an arrival).
    pub fn is_completion(&self) -> bool {
        self.event != Event::Arrival
    }

    /// The request's header `name` (lower case), if it carried one.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl std::fmt::Display for LogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>8.3}s #{} {:?} {} {} token={}",
            self.since_start.as_secs_f64(),
            self.request,
            self.event,
            self.method,
            self.path,
            self.token.as_deref().unwrap_or("-")
        )
    }
}

/// The first 12 hex digits of the SHA-256 of `secret`.
pub fn fingerprint(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Default)]
struct Script {
    once: VecDeque<Behaviour>,
    standing: Option<Behaviour>,
    seen: u32,
}

#[derive(Default)]
struct State {
    scripts: HashMap<Endpoint, Script>,
    /// One-shot behaviours by (method, path): used before the endpoint's.
    by_path: HashMap<(String, String), VecDeque<Behaviour>>,
    next_number: u64,
    next_id: u64,
    pulls: HashMap<String, Vec<Value>>,
    check_runs: HashMap<String, Vec<Value>>,
    comments: HashMap<String, Vec<Value>>,
    /// Issue events by (repository, number), oldest first.
    events: HashMap<(String, u64), Vec<Value>>,
    /// Pull requests are sent without `merge_commit_sha` whatever the API
    /// version asked (a roll-out's trimmed payloads).
    trim_pulls: bool,
    statuses: HashMap<(String, String), Vec<Value>>,
    /// A branch's classic protection: (contexts, checks' contexts).
    protection: HashMap<(String, String), (Vec<String>, Vec<String>)>,
    /// The rules that apply to a branch.
    rules: HashMap<(String, String), Vec<Value>>,
    app_tokens: VecDeque<String>,
    app_token_lifetime: Option<Duration>,
    app_jwts: Vec<String>,
    minted: Vec<String>,
    /// When each minted installation token expires (by the token).
    minted_expiry: HashMap<String, SystemTime>,
    /// An installation token past its `expires_at` is answered 401.
    refuse_expired: bool,
    github: github::Github,
}

struct Shared {
    state: Mutex<State>,
    log: Mutex<Vec<LogEntry>>,
    logged: Condvar,
    stop: AtomicBool,
    started: Instant,
    requests: AtomicU64,
    port: u16,
    /// Connections accepted so far.
    accepted: AtomicU64,
    /// Live connections by number: a handle to shut it down, and whether it
    /// is idle (waiting for its next request, nothing of one read yet).
    live: Mutex<HashMap<u64, (TcpStream, bool)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The fake forge server; stops on drop.
pub struct FakeForge {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    conns: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl std::fmt::Debug for FakeForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeForge")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FakeForge {
    /// Start a server on `127.0.0.1` with a free port; every endpoint `Ok`.
    pub fn start() -> io::Result<FakeForge> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            log: Mutex::new(Vec::new()),
            logged: Condvar::new(),
            stop: AtomicBool::new(false),
            started: Instant::now(),
            requests: AtomicU64::new(0),
            port: addr.port(),
            accepted: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
        });
        let conns: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let shared = Arc::clone(&shared);
            let conns = Arc::clone(&conns);
            std::thread::Builder::new()
                .name("fake-forge-accept".into())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if shared.stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(stream) = stream else { continue };
                        let id = shared.accepted.fetch_add(1, Ordering::SeqCst);
                        if let Ok(handle) = stream.try_clone() {
                            lock(&shared.live).insert(id, (handle, true));
                        }
                        let shared = Arc::clone(&shared);
                        let h = std::thread::Builder::new()
                            .name("fake-forge-conn".into())
                            .spawn(move || {
                                serve_connection(stream, id, &shared);
                                lock(&shared.live).remove(&id);
                            });
                        if let Ok(h) = h {
                            let mut c = lock(&conns);
                            c.retain(|h| !h.is_finished());
                            c.push(h);
                        }
                    }
                })?
        };
        Ok(FakeForge {
            addr,
            shared,
            accept: Some(accept),
            conns,
        })
    }

    /// How many connections the server has accepted so far (a pooled
    /// client reuses one; a client that keeps none opens one per request).
    pub fn connections_accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Closes every kept-alive connection that is waiting for its next
    /// request, as a server does when its keep-alive timeout runs out,
    /// without telling the client first. Returns how many were closed;
    /// they are shut down when this returns.
    pub fn close_idle_connections(&self) -> usize {
        let live = lock(&self.shared.live);
        let mut n = 0;
        for (stream, idle) in live.values() {
            if *idle {
                let _ = stream.shutdown(Shutdown::Both);
                n += 1;
            }
        }
        n
    }

    /// `http://127.0.0.1:PORT`: the API's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Set `endpoint`'s standing behaviour (and restart its request count
    /// for [`Behaviour::Fail5xxThenOk`]).
    pub fn set(&self, endpoint: Endpoint, behaviour: Behaviour) {
        let mut st = lock(&self.shared.state);
        let s = st.scripts.entry(endpoint).or_default();
        s.standing = Some(behaviour);
        s.seen = 0;
    }

    /// Queue a one-shot behaviour for `endpoint`'s next request (queued ones
    /// are used, in order, before the standing one).
    pub fn push(&self, endpoint: Endpoint, behaviour: Behaviour) {
        lock(&self.shared.state)
            .scripts
            .entry(endpoint)
            .or_default()
            .once
            .push_back(behaviour);
    }

    /// Queue a one-shot behaviour for the next `method` request to exactly
    /// `path` (without query); used before the endpoint's behaviours, so
    /// threads sharing the server can each fault their own object.
    pub fn push_path(&self, method: &str, path: &str, behaviour: Behaviour) {
        lock(&self.shared.state)
            .by_path
            .entry((method.to_string(), path.to_string()))
            .or_default()
            .push_back(behaviour);
    }

    /// Seed the commit statuses of `git_ref` in `repo` (`owner/name`): pairs
    /// of (context, state).
    pub fn set_commit_statuses(&self, repo: &str, git_ref: &str, statuses: &[(&str, &str)]) {
        let list = statuses
            .iter()
            .map(|(c, s)| {
                json!({
                    "context": c,
                    "state": s,
                    "description": format!("{c} is {s}"),
                    "target_url": format!("https://ci.invalid/{c}"),
                })
            })
            .collect();
        lock(&self.shared.state)
            .statuses
            .insert((repo.to_string(), git_ref.to_string()), list);
    }

    /// Protect `branch` of `repo` (`owner/name`) the classic way, requiring
    /// the status checks `contexts` (the old list) and `checks` (each a
    /// `{ context, app_id }`); its required-status-checks read answers
    /// them (an unprotected branch's answers 404).
    pub fn set_required_status_checks(
        &self,
        repo: &str,
        branch: &str,
        contexts: &[&str],
        checks: &[&str],
    ) {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        lock(&self.shared.state).protection.insert(
            (repo.to_string(), branch.to_string()),
            (own(contexts), own(checks)),
        );
    }

    /// Add a rule that applies to `branch` of `repo`, as `GET
    /// …/rules/branches/{b}` lists it (any JSON: a rule of another type, or
    /// one this client cannot read).
    pub fn add_branch_rule(&self, repo: &str, branch: &str, rule: Value) {
        lock(&self.shared.state)
            .rules
            .entry((repo.to_string(), branch.to_string()))
            .or_default()
            .push(rule);
    }

    /// Add a ruleset's `required_status_checks` rule requiring `contexts`
    /// on `branch` of `repo`.
    pub fn add_required_checks_rule(&self, repo: &str, branch: &str, contexts: &[&str]) {
        let checks: Vec<Value> = contexts
            .iter()
            .map(|c| json!({ "context": c, "integration_id": 15368 }))
            .collect();
        self.add_branch_rule(
            repo,
            branch,
            json!({
                "type": "required_status_checks",
                "ruleset_source_type": "Repository",
                "ruleset_source": repo,
                "ruleset_id": 42,
                "parameters": {
                    "strict_required_status_checks_policy": false,
                    "do_not_enforce_on_create": false,
                    "required_status_checks": checks,
                },
            }),
        );
    }

    /// Seed a check run in `repo` exactly as given (one without an `id`,
    /// or with fields of odd types); it is listed with the head's runs
    /// when its `head_sha` is the ref read.
    pub fn add_raw_check_run(&self, repo: &str, run: Value) {
        lock(&self.shared.state)
            .check_runs
            .entry(repo.to_string())
            .or_default()
            .push(run);
    }

    /// Seed a check run in `repo` (`owner/name`); returns its id.
    pub fn add_check_run(
        &self,
        repo: &str,
        name: &str,
        head_sha: &str,
        status: &str,
        conclusion: Option<&str>,
        external_id: Option<&str>,
    ) -> u64 {
        let mut st = lock(&self.shared.state);
        st.next_id += 1;
        let id = st.next_id;
        let run = json!({
            "id": id,
            "name": name,
            "head_sha": head_sha,
            "status": status,
            "conclusion": conclusion,
            "external_id": external_id,
            "details_url": null,
            "html_url": format!("https://forge.invalid/{repo}/runs/{id}"),
        });
        st.check_runs.entry(repo.to_string()).or_default().push(run);
        id
    }

    /// The pull requests of `repo` (`owner/name`), oldest first.
    pub fn pulls(&self, repo: &str) -> Vec<Value> {
        lock(&self.shared.state)
            .pulls
            .get(repo)
            .cloned()
            .unwrap_or_default()
    }

    /// The check runs of `repo`, oldest first.
    pub fn check_runs(&self, repo: &str) -> Vec<Value> {
        lock(&self.shared.state)
            .check_runs
            .get(repo)
            .cloned()
            .unwrap_or_default()
    }

    /// The issue comments of `repo`, oldest first.
    pub fn comments(&self, repo: &str) -> Vec<Value> {
        lock(&self.shared.state)
            .comments
            .get(repo)
            .cloned()
            .unwrap_or_default()
    }

    /// The installation tokens the next purchases return, in order (after
    /// them: generated ones).
    pub fn script_app_tokens<S: Into<String>>(&self, tokens: impl IntoIterator<Item = S>) {
        lock(&self.shared.state)
            .app_tokens
            .extend(tokens.into_iter().map(Into::into));
    }

    /// How long minted installation tokens live (`expires_at`); 1 hour by
    /// default.
    pub fn set_app_token_lifetime(&self, lifetime: Duration) {
        lock(&self.shared.state).app_token_lifetime = Some(lifetime);
    }

    /// Answer 401 `Bad credentials` to a request bearing an installation
    /// token this fake minted once its `expires_at` has passed, as GitHub
    /// does (off by default: every minted token stays good).
    pub fn refuse_expired_app_tokens(&self) {
        lock(&self.shared.state).refuse_expired = true;
    }

    /// The JWTs presented to the access-token endpoint, in order.
    pub fn app_jwts(&self) -> Vec<String> {
        lock(&self.shared.state).app_jwts.clone()
    }

    /// The fingerprints of the installation tokens minted, in order.
    pub fn minted_fingerprints(&self) -> Vec<String> {
        lock(&self.shared.state)
            .minted
            .iter()
            .map(|t| fingerprint(t))
            .collect()
    }

    /// Seed an open pull request from `head_ref` (at `head_sha`) into
    /// `base_ref` in `repo` (`owner/name`), mergeable; returns its number.
    pub fn add_pull(&self, repo: &str, head_ref: &str, base_ref: &str, head_sha: &str) -> u64 {
        let base = self.url();
        let mut st = lock(&self.shared.state);
        st.next_number += 1;
        st.next_id += 1;
        let (id, number) = (st.next_id, st.next_number);
        let pr = pulls::new_pull(&base, repo, id, number, head_ref, base_ref, head_sha);
        st.pulls.entry(repo.to_string()).or_default().push(pr);
        number
    }

    /// Pull request `n` of `repo` as the forge holds it (no read lag).
    pub fn pull(&self, repo: &str, n: u64) -> Option<Value> {
        lock(&self.shared.state)
            .pulls
            .get(repo)
            .and_then(|ps| ps.iter().find(|p| p["number"] == n).cloned())
    }

    fn with_pull(&self, repo: &str, n: u64, f: impl FnOnce(&mut Value)) {
        let mut st = lock(&self.shared.state);
        if let Some(p) = st
            .pulls
            .get_mut(repo)
            .and_then(|ps| ps.iter_mut().find(|p| p["number"] == n))
        {
            f(p);
        }
    }

    /// Move pull request `n`'s head to `sha` (somebody pushed to it).
    pub fn set_pull_head(&self, repo: &str, n: u64, sha: &str) {
        self.with_pull(repo, n, |p| p["head"]["sha"] = json!(sha));
    }

    /// Whether pull request `n` can be merged (not: a merge is 405).
    pub fn set_pull_mergeable(&self, repo: &str, n: u64, mergeable: bool) {
        self.with_pull(repo, n, |p| p["mergeable"] = json!(mergeable));
    }

    /// Close pull request `n` unmerged.
    pub fn close_pull(&self, repo: &str, n: u64) {
        self.with_pull(repo, n, |p| p["state"] = json!("closed"));
    }

    /// Merge pull request `n` at its current head, as somebody else would
    /// (not logged as an applied write; its `merged` event recorded);
    /// returns the merge commit.
    pub fn merge_pull_directly(&self, repo: &str, n: u64) -> Option<String> {
        let mut sha = None;
        self.with_pull(repo, n, |p| sha = Some(merges::merge_in_place(p, repo, n)));
        if let Some(s) = &sha {
            events::record(&mut lock(&self.shared.state), repo, n, "merged", Some(s));
        }
        sha
    }

    /// Send every pull request without `merge_commit_sha`, whatever API
    /// version the request asked for (`false`: only for
    /// [`TRIMMED_API_VERSION`] and later, the default).
    pub fn set_trimmed_pulls(&self, trim: bool) {
        lock(&self.shared.state).trim_pulls = trim;
    }

    /// Record an event of `kind` (`labeled`, `merged`, …) on issue or pull
    /// request `n`, with `commit_id` when given.
    pub fn add_issue_event(&self, repo: &str, n: u64, kind: &str, commit_id: Option<&str>) {
        events::record(&mut lock(&self.shared.state), repo, n, kind, commit_id);
    }

    /// Forget every event of issue or pull request `n` (a forge whose
    /// event is not written yet).
    pub fn clear_issue_events(&self, repo: &str, n: u64) {
        lock(&self.shared.state)
            .events
            .remove(&(repo.to_string(), n));
    }

    /// Seed a comment on issue or pull request `n` with `body`, created at
    /// `created_at` (RFC 3339); returns its id.
    pub fn add_comment(&self, repo: &str, n: u64, body: &str, created_at: &str) -> u64 {
        comments::seed(&mut lock(&self.shared.state), repo, n, body, created_at)
    }

    /// Set ref `git_ref` (`heads/main`) of `repo` to `sha`.
    pub fn set_ref(&self, repo: &str, git_ref: &str, sha: &str) {
        lock(&self.shared.state)
            .github
            .refs
            .insert((repo.to_string(), git_ref.to_string()), sha.to_string());
    }

    /// Ref `git_ref` of `repo` as the forge holds it.
    pub fn git_ref(&self, repo: &str, git_ref: &str) -> Option<String> {
        lock(&self.shared.state)
            .github
            .refs
            .get(&(repo.to_string(), git_ref.to_string()))
            .cloned()
    }

    /// Add commit `sha` with `parents` to the commit graph a ref update's
    /// fast-forward check walks.
    pub fn add_commit(&self, sha: &str, parents: &[&str]) {
        lock(&self.shared.state).github.commits.insert(
            sha.to_string(),
            parents.iter().map(|p| p.to_string()).collect(),
        );
    }

    /// Check run `id` of `repo` as the forge holds it.
    pub fn check_run(&self, repo: &str, id: u64) -> Option<Value> {
        lock(&self.shared.state)
            .check_runs
            .get(repo)
            .and_then(|rs| rs.iter().find(|r| r["id"] == id).cloned())
    }

    /// Make reads see a merge, a ref update or a check-run update only
    /// `lag` after it was applied (zero: at once, the default).
    pub fn set_read_lag(&self, lag: Duration) {
        lock(&self.shared.state).github.read_lag = lag;
    }

    /// The primary rate limit: `limit` points until `reset`; every answer
    /// but a 304 spends one, and once they are spent every request is
    /// answered 403 with `x-ratelimit-remaining: 0` until `reset`. Answers
    /// carry the `x-ratelimit-*` headers from now on.
    pub fn set_rate_limit(&self, limit: u64, reset: SystemTime) {
        let mut st = lock(&self.shared.state);
        st.github.limit = Some((limit, reset));
        st.github.points = 0;
    }

    /// Rate-limit points spent so far (every answer but a 304 costs one).
    pub fn rate_limit_points(&self) -> u64 {
        lock(&self.shared.state).github.points
    }

    /// How many 304s were answered.
    pub fn not_modified(&self) -> u64 {
        lock(&self.shared.state).github.not_modified
    }

    /// Every write the forge applied, in order.
    pub fn applied_writes(&self) -> Vec<AppliedWrite> {
        lock(&self.shared.state).github.applied.clone()
    }

    /// How many writes with `key` the forge applied (see [`AppliedWrite`]).
    pub fn applied_count(&self, key: &str) -> usize {
        lock(&self.shared.state)
            .github
            .applied
            .iter()
            .filter(|w| w.key == key)
            .count()
    }

    /// The whole log, in order.
    pub fn log(&self) -> Vec<LogEntry> {
        lock(&self.shared.log).clone()
    }

    /// The log, one line per entry.
    pub fn log_text(&self) -> String {
        self.log().iter().map(|e| format!("{e}\n")).collect()
    }

    /// The arrivals at `endpoint`, in order.
    pub fn arrivals(&self, endpoint: Endpoint) -> Vec<LogEntry> {
        self.log()
            .into_iter()
            .filter(|e| e.endpoint == endpoint && e.event == Event::Arrival)
            .collect()
    }

    /// Every arrival, at any endpoint, in order.
    pub fn all_arrivals(&self) -> Vec<LogEntry> {
        self.log()
            .into_iter()
            .filter(|e| e.event == Event::Arrival)
            .collect()
    }

    /// The completions at `endpoint`, in order.
    pub fn completions(&self, endpoint: Endpoint) -> Vec<LogEntry> {
        self.log()
            .into_iter()
            .filter(|e| e.endpoint == endpoint && e.is_completion())
            .collect()
    }

    /// Wait until `endpoint` has at least `n` completions, or `timeout`
    /// passes; whether it got there.
    pub fn wait_for_completions(&self, endpoint: Endpoint, n: usize, timeout: Duration) -> bool {
        self.wait_for(n, timeout, |e| e.endpoint == endpoint && e.is_completion())
    }

    /// Wait until `endpoint` has at least `n` arrivals (request heads
    /// read), or `timeout` passes; whether it got there.
    pub fn wait_for_arrivals(&self, endpoint: Endpoint, n: usize, timeout: Duration) -> bool {
        self.wait_for(n, timeout, |e| {
            e.endpoint == endpoint && e.event == Event::Arrival
        })
    }

    /// Wait on the log until `n` entries match, or `timeout` passes.
    fn wait_for(&self, n: usize, timeout: Duration, matches: impl Fn(&LogEntry) -> bool) -> bool {
        let end = Instant::now() + timeout;
        let mut log = lock(&self.shared.log);
        loop {
            if log.iter().filter(|e| matches(e)).count() >= n {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            log = self
                .shared
                .logged
                .wait_timeout(log, end - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let conns = std::mem::take(&mut *lock(&self.conns));
        for h in conns {
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------- the wire

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn bearer(&self) -> Option<&str> {
        let v = self.header("authorization")?.trim();
        let (scheme, token) = v.split_once(' ')?;
        (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
            .then(|| token.trim())
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn query(&self, key: &str) -> Option<String> {
        let q = self.target.split_once('?')?.1;
        q.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k) == key).then(|| decode(v))
        })
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

enum ReadOutcome {
    Request(Request),
    Closed,
}

/// Read one request, polling the stop flag while idle.
fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    stop: &AtomicBool,
) -> io::Result<ReadOutcome> {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(ReadOutcome::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return Ok(ReadOutcome::Closed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let target = first.next().unwrap_or("/").to_string();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    buf.drain(..head_end);
    while buf.len() < len {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(ReadOutcome::Closed),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stop.load(Ordering::SeqCst) {
                    return Ok(ReadOutcome::Closed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let body: Vec<u8> = buf.drain(..len).collect();
    Ok(ReadOutcome::Request(Request {
        method,
        target,
        headers,
        body,
    }))
}

/// What the handler decided to do with the connection.
enum Reply {
    Answer {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    Cut,
    Stopped,
}

/// The `X-GitHub-Request-Id` of the `n`th request the forge took.
pub fn request_id(n: u64) -> String {
    format!("FAKE:{n:08X}")
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn serve_connection(mut stream: TcpStream, id: u64, shared: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let set_idle = |idle: bool| {
        if let Some(entry) = lock(&shared.live).get_mut(&id) {
            entry.1 = idle;
        }
    };
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        set_idle(buf.is_empty());
        let req = match read_request(&mut stream, &mut buf, &shared.stop) {
            Ok(ReadOutcome::Request(r)) => r,
            Ok(ReadOutcome::Closed) | Err(_) => return,
        };
        set_idle(false);
        let n = shared.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let endpoint = route(&req.method, req.path()).0;
        let token = req.bearer().map(fingerprint);
        let shown_headers: Vec<(String, String)> = req
            .headers
            .iter()
            .filter(|(k, _)| k != "authorization")
            .cloned()
            .collect();
        let entry = |event: Event| LogEntry {
            request: n,
            event,
            at: Instant::now(),
            since_start: shared.started.elapsed(),
            method: req.method.clone(),
            path: req.target.clone(),
            endpoint,
            token: token.clone(),
            headers: shown_headers.clone(),
        };
        push_log(shared, entry(Event::Arrival));
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        match handle(shared, &req) {
            Reply::Answer {
                status,
                headers,
                body,
            } => {
                let mut out = format!(
                    "HTTP/1.1 {status} {}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
                    reason(status),
                    body.len()
                );
                for (k, v) in &headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                // As GitHub does: every answer names its request.
                out.push_str(&format!("X-GitHub-Request-Id: {}\r\n", request_id(n)));
                if close {
                    out.push_str("Connection: close\r\n");
                }
                out.push_str("\r\n");
                out.push_str(&body);
                let written = stream
                    .write_all(out.as_bytes())
                    .and_then(|_| stream.flush());
                push_log(
                    shared,
                    entry(match written {
                        Ok(()) => Event::Answered(status),
                        Err(_) => Event::ClientGone(status),
                    }),
                );
                if written.is_err() || close {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
            Reply::Cut => {
                let _ = stream.shutdown(Shutdown::Both);
                push_log(shared, entry(Event::Cut));
                return;
            }
            Reply::Stopped => {
                push_log(shared, entry(Event::Stopped));
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn push_log(shared: &Shared, e: LogEntry) {
    lock(&shared.log).push(e);
    shared.logged.notify_all();
}

/// The endpoint, and the path's parts: repository (`owner/name`) and the
/// rest of the segments after it.
fn route(method: &str, path: &str) -> (Endpoint, String, Vec<String>) {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let mut s: Vec<&str> = segs.iter().map(String::as_str).collect();
    if s.starts_with(&["api", "v3"]) {
        s.drain(..2);
    }
    let get = method == "GET";
    let post = method == "POST";
    let put = method == "PUT";
    let patch = method == "PATCH";
    let (endpoint, repo, rest) = match s.as_slice() {
        ["repos", o, r, rest @ ..] => {
            let repo = format!("{o}/{r}");
            let rest: Vec<String> = rest.iter().map(|x| x.to_string()).collect();
            let e = match rest
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
            {
                ["pulls"] if get => Endpoint::ListPulls,
                ["pulls"] if post => Endpoint::CreatePull,
                ["pulls", _] if get => Endpoint::GetPull,
                ["pulls", _, "merge"] if put => Endpoint::MergePull,
                ["git", "ref", ..] if get && rest.len() >= 3 => Endpoint::GetRef,
                ["git", "refs", ..] if patch && rest.len() >= 3 => Endpoint::UpdateRef,
                ["check-runs", _] if get => Endpoint::GetCheckRun,
                ["check-runs", _] if patch => Endpoint::UpdateCheckRun,
                ["commits", .., "status"] if get && rest.len() >= 3 => Endpoint::CombinedStatus,
                ["commits", .., "check-runs"] if get && rest.len() >= 3 => Endpoint::ListCheckRuns,
                ["check-runs"] if post => Endpoint::CreateCheckRun,
                ["branches", .., "protection", "required_status_checks"]
                    if get && rest.len() >= 4 =>
                {
                    Endpoint::RequiredStatusChecks
                }
                ["rules", "branches", ..] if get && rest.len() >= 3 => Endpoint::BranchRules,
                ["issues", _, "comments"] if post => Endpoint::CreateIssueComment,
                ["issues", _, "comments"] if get => Endpoint::ListIssueComments,
                ["issues", _, "events"] if get => Endpoint::IssueEvents,
                ["compare", ..] if get && rest.len() >= 2 => Endpoint::Compare,
                _ => Endpoint::Other,
            };
            (e, repo, rest)
        }
        ["app", "installations", _, "access_tokens"] if post => {
            (Endpoint::AccessToken, String::new(), Vec::new())
        }
        ["zen"] if get => (Endpoint::Zen, String::new(), Vec::new()),
        _ => (Endpoint::Other, String::new(), Vec::new()),
    };
    (endpoint, repo, rest)
}

fn json_reply(status: u16, v: Value) -> Reply {
    Reply::Answer {
        status,
        headers: Vec::new(),
        body: v.to_string(),
    }
}

fn message(status: u16, m: &str) -> Reply {
    json_reply(
        status,
        json!({ "message": m, "documentation_url": "https://docs.github.com/rest" }),
    )
}

/// The primary limit first (when its points are spent), then the
/// endpoint's behaviour; a GET's 200 gets its ETag (or becomes a 304) and
/// every answer spends a point but a 304.
fn handle(shared: &Shared, req: &Request) -> Reply {
    if let Some(r) = github::over_limit(&lock(&shared.state)) {
        return r;
    }
    if let Some(r) = app::expired(&lock(&shared.state), req) {
        return r;
    }
    let reply = behave(shared, req);
    let mut st = lock(&shared.state);
    let reply = trim_pulls(&st, req, reply);
    github::finish(&mut st, req, reply)
}

/// The first REST API version whose pull requests have no
/// `merge_commit_sha`.
pub const TRIMMED_API_VERSION: &str = "2026-03-10";

/// A pull request's answer without `merge_commit_sha` when the request
/// asked for [`TRIMMED_API_VERSION`] or later (or the fake was told to trim
/// every one: [`FakeForge::set_trimmed_pulls`]).
fn trim_pulls(st: &State, req: &Request, reply: Reply) -> Reply {
    let asked = req
        .header("x-github-api-version")
        .is_some_and(|v| v.trim() >= TRIMMED_API_VERSION);
    let pulls = matches!(
        route(&req.method, req.path()).0,
        Endpoint::GetPull | Endpoint::ListPulls | Endpoint::CreatePull
    );
    match reply {
        Reply::Answer {
            status,
            headers,
            body,
        } if pulls && (asked || st.trim_pulls) => {
            let body = match serde_json::from_str::<Value>(&body) {
                Ok(mut v) => {
                    let strip = |p: &mut Value| {
                        if let Some(o) = p.as_object_mut() {
                            o.remove("merge_commit_sha");
                        }
                    };
                    match &mut v {
                        Value::Array(items) => items.iter_mut().for_each(strip),
                        one => strip(one),
                    }
                    v.to_string()
                }
                Err(_) => body,
            };
            Reply::Answer {
                status,
                headers,
                body,
            }
        }
        other => other,
    }
}

fn behave(shared: &Shared, req: &Request) -> Reply {
    let (endpoint, _, _) = route(&req.method, req.path());
    let behaviour = {
        let mut st = lock(&shared.state);
        let key = (req.method.clone(), req.path().to_string());
        if let Some(b) = st.by_path.get_mut(&key).and_then(VecDeque::pop_front) {
            drop(st);
            return play(shared, req, b);
        }
        let script = st.scripts.entry(endpoint).or_default();
        let b = script
            .once
            .pop_front()
            .or_else(|| script.standing.clone())
            .unwrap_or(Behaviour::Ok);
        script.seen += 1;
        match b {
            Behaviour::Fail5xxThenOk(k) if script.seen > k => Behaviour::Ok,
            b => b,
        }
    };
    play(shared, req, behaviour)
}

fn play(shared: &Shared, req: &Request, behaviour: Behaviour) -> Reply {
    match behaviour {
        Behaviour::Ok => apply(shared, req),
        Behaviour::Delay(d) => {
            let end = Instant::now() + d;
            while Instant::now() < end {
                if shared.stop.load(Ordering::SeqCst) {
                    return Reply::Stopped;
                }
                std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
            }
            apply(shared, req)
        }
        Behaviour::Fail5xx | Behaviour::Fail5xxThenOk(_) => message(500, "Server Error"),
        Behaviour::Status {
            status,
            retry_after,
        } => Reply::Answer {
            status,
            headers: retry_after
                .map(|s| vec![("Retry-After".to_string(), s.to_string())])
                .unwrap_or_default(),
            body: json!({ "message": reason(status) }).to_string(),
        },
        Behaviour::RateLimited { retry_after } => Reply::Answer {
            status: 429,
            headers: vec![("Retry-After".into(), retry_after.to_string())],
            body: json!({ "message": "Too Many Requests" }).to_string(),
        },
        Behaviour::PrimaryLimit { reset } => {
            let t = reset
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            Reply::Answer {
                status: 403,
                headers: vec![
                    ("x-ratelimit-limit".into(), "5000".into()),
                    ("x-ratelimit-remaining".into(), "0".into()),
                    ("x-ratelimit-used".into(), "5000".into()),
                    ("x-ratelimit-reset".into(), t.to_string()),
                ],
                body: json!({ "message": "API rate limit exceeded for installation ID 1." })
                    .to_string(),
            }
        }
        Behaviour::SecondaryLimit => message(403, SECONDARY_LIMIT_MESSAGE),
        Behaviour::SecondaryLimitAfter { retry_after } => Reply::Answer {
            status: 403,
            headers: vec![("Retry-After".into(), retry_after.to_string())],
            body: json!({ "message": SECONDARY_LIMIT_MESSAGE, "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits" }).to_string(),
        },
        Behaviour::ApplyLaggingThenStatus { lag, status } => {
            let _ = apply_lagging(shared, req, Some(lag));
            message(status, reason(status))
        }
        Behaviour::ApplyThenStall(d) => {
            let _ = apply(shared, req);
            let end = Instant::now() + d;
            while Instant::now() < end && !shared.stop.load(Ordering::SeqCst) {
                std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
            }
            Reply::Cut
        }
        Behaviour::Token { valid } => match req.bearer() {
            Some(t) if valid.iter().any(|v| v == t) => apply(shared, req),
            _ => message(401, "Bad credentials"),
        },
        Behaviour::Invalid => json_reply(
            422,
            json!({
                "message": "Validation Failed",
                "errors": [{ "resource": "Issue", "code": "custom", "message": "the fake forge was told to refuse this" }],
                "documentation_url": "https://docs.github.com/rest",
            }),
        ),
        Behaviour::ApplyThenCut => {
            let _ = apply(shared, req);
            Reply::Cut
        }
        Behaviour::ApplyThenStatus(s) => {
            let _ = apply(shared, req);
            message(s, reason(s))
        }
        Behaviour::Redirect { status, location } => Reply::Answer {
            status,
            headers: vec![("Location".into(), location)],
            body: String::new(),
        },
    }
}

fn body_json(req: &Request) -> Option<Value> {
    serde_json::from_slice(&req.body).ok()
}

fn str_field<'v>(v: &'v Value, k: &str) -> Option<&'v str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn missing(field: &str) -> Reply {
    json_reply(
        422,
        json!({
            "message": "Validation Failed",
            "errors": [{ "field": field, "code": "missing_field" }],
        }),
    )
}

/// Do what the API does.
fn apply(shared: &Shared, req: &Request) -> Reply {
    apply_lagging(shared, req, None)
}

/// Do what the API does, reads lagging a write by `lag` when given.
fn apply_lagging(shared: &Shared, req: &Request, lag: Option<Duration>) -> Reply {
    let base = format!("http://127.0.0.1:{}", shared.port);
    let started = shared.started;
    let mut st = lock(&shared.state);
    // Held for the whole of this apply: no other request sees it.
    st.github.lag_once = lag;
    let reply = apply_locked(&mut st, req, &base, started);
    st.github.lag_once = None;
    reply
}

fn apply_locked(st: &mut State, req: &Request, base: &str, started: Instant) -> Reply {
    let (endpoint, repo, rest) = route(&req.method, req.path());
    // What `route` matched guarantees the segments indexed here.
    let number = || rest[1].parse().unwrap_or(0);
    let git_ref = |from: usize, tail: usize| rest[from..rest.len() - tail].join("/");
    match endpoint {
        Endpoint::Zen => Reply::Answer {
            status: 200,
            headers: Vec::new(),
            body: "\"Keep it logically awesome.\"".into(),
        },
        Endpoint::GetPull => pulls::get_pull(st, &repo, number()),
        Endpoint::ListPulls => pulls::list_pulls(st, req, &repo),
        Endpoint::CreatePull => pulls::create_pull(st, req, base, &repo, started),
        Endpoint::MergePull => merges::merge_pull(st, req, &repo, number(), started),
        Endpoint::GetRef => refs::get_ref(st, base, &repo, &git_ref(2, 0)),
        Endpoint::UpdateRef => refs::update_ref(st, req, base, &repo, &git_ref(2, 0), started),
        Endpoint::ListCheckRuns => check_runs::list_check_runs(st, req, &repo, &git_ref(1, 1)),
        Endpoint::CreateCheckRun => check_runs::create_check_run(st, req, &repo, started),
        Endpoint::GetCheckRun => check_runs::get_check_run(st, &repo, number()),
        Endpoint::UpdateCheckRun => check_runs::update_check_run(st, req, &repo, number(), started),
        Endpoint::CombinedStatus => statuses::combined_status(st, &repo, &git_ref(1, 1)),
        Endpoint::RequiredStatusChecks => {
            protection::required_status_checks(st, &repo, &git_ref(1, 2))
        }
        Endpoint::BranchRules => protection::branch_rules(st, req, &repo, &git_ref(2, 0)),
        Endpoint::CreateIssueComment => {
            comments::create_issue_comment(st, req, &repo, &rest[1], started)
        }
        Endpoint::ListIssueComments => comments::list_issue_comments(st, req, &repo, &rest[1]),
        Endpoint::IssueEvents => events::list_events(st, req, &repo, number()),
        Endpoint::Compare => events::compare(st, &repo, &rest[1..].join("/")),
        Endpoint::AccessToken => app::access_token(st, req),
        Endpoint::Other => message(404, "Not Found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(addr: SocketAddr, raw: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(raw.as_bytes()).expect("write");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn the_fake_forge_keeps_created_pull_requests_and_lists_them_by_head() {
        let f = FakeForge::start().expect("start");
        let body = r#"{"title":"t","head":"feature","base":"main"}"#;
        let out = roundtrip(
            f.addr(),
            &format!(
                "POST /repos/o/r/pulls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        );
        assert!(out.starts_with("HTTP/1.1 201"), "{out}");
        let out = roundtrip(
            f.addr(),
            "GET /repos/o/r/pulls?head=o%3Afeature&base=main&state=open HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        assert!(out.contains("\"number\":1"), "{out}");
        assert_eq!(f.pulls("o/r").len(), 1);
        let log = f.log();
        assert_eq!(log.len(), 4, "{}", f.log_text());
        assert_eq!(log[0].token.as_deref(), Some(fingerprint("tok").as_str()));
        assert!(!f.log_text().contains("tok "));
    }

    #[test]
    fn apply_then_cut_applies_the_write_and_closes_unanswered() {
        let f = FakeForge::start().expect("start");
        f.set(Endpoint::CreateCheckRun, Behaviour::ApplyThenCut);
        let body = r#"{"name":"ci","head_sha":"abc","external_id":"x1"}"#;
        let out = roundtrip(
            f.addr(),
            &format!(
                "POST /repos/o/r/check-runs HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        );
        assert_eq!(out, "");
        // The client sees the cut before the server's thread logs it.
        assert!(f.wait_for_completions(Endpoint::CreateCheckRun, 1, Duration::from_secs(5)));
        assert_eq!(f.check_runs("o/r").len(), 1);
        assert_eq!(f.completions(Endpoint::CreateCheckRun)[0].event, Event::Cut);
    }

    #[test]
    fn fail5xx_then_ok_fails_k_times() {
        let f = FakeForge::start().expect("start");
        f.set(Endpoint::Zen, Behaviour::Fail5xxThenOk(2));
        let req = "GET /zen HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        assert!(roundtrip(f.addr(), req).starts_with("HTTP/1.1 500"));
        assert!(roundtrip(f.addr(), req).starts_with("HTTP/1.1 500"));
        assert!(roundtrip(f.addr(), req).starts_with("HTTP/1.1 200"));
    }

    fn send(addr: SocketAddr, method: &str, path: &str, extra: &str, body: &str) -> String {
        roundtrip(
            addr,
            &format!(
                "{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    }

    #[test]
    fn a_merge_checks_the_head_merges_once_and_reads_lag_it_when_told() {
        let f = FakeForge::start().expect("start");
        let head = "a".repeat(40);
        let n = f.add_pull("o/r", "feature", "main", &head);
        let out = send(
            f.addr(),
            "PUT",
            &format!("/repos/o/r/pulls/{n}/merge"),
            "",
            &format!(r#"{{"sha":"{}"}}"#, "b".repeat(40)),
        );
        assert!(out.starts_with("HTTP/1.1 409"), "{out}");
        f.set_read_lag(Duration::from_secs(60));
        let out = send(
            f.addr(),
            "PUT",
            &format!("/repos/o/r/pulls/{n}/merge"),
            "",
            &format!(r#"{{"sha":"{head}","merge_method":"squash"}}"#),
        );
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let out = send(f.addr(), "GET", &format!("/repos/o/r/pulls/{n}"), "", "");
        assert!(out.contains("\"merged\":false"), "the read lags: {out}");
        assert_eq!(f.pull("o/r", n).expect("pull")["merged"], true);
        let out = send(
            f.addr(),
            "PUT",
            &format!("/api/v3/repos/o/r/pulls/{n}/merge"),
            "",
            "{}",
        );
        assert!(out.starts_with("HTTP/1.1 405"), "{out}");
        assert_eq!(f.applied_count(&format!("pull:o/r#{n}")), 1);
    }

    #[test]
    fn a_ref_moves_only_forward_unless_forced() {
        let f = FakeForge::start().expect("start");
        let (a, b, c) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        f.add_commit(&b, &[&a]);
        f.set_ref("o/r", "heads/main", &a);
        let out = send(
            f.addr(),
            "PATCH",
            "/repos/o/r/git/refs/heads/main",
            "",
            &format!(r#"{{"sha":"{b}"}}"#),
        );
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let out = send(
            f.addr(),
            "PATCH",
            "/repos/o/r/git/refs/heads/main",
            "",
            &format!(r#"{{"sha":"{c}"}}"#),
        );
        assert!(
            out.starts_with("HTTP/1.1 422") && out.contains("not a fast forward"),
            "{out}"
        );
        let out = send(
            f.addr(),
            "PATCH",
            "/repos/o/r/git/refs/heads/main",
            "",
            &format!(r#"{{"sha":"{c}","force":true}}"#),
        );
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let out = send(f.addr(), "GET", "/repos/o/r/git/ref/heads/main", "", "");
        assert!(out.contains(&c), "{out}");
        assert_eq!(f.git_ref("o/r", "heads/main"), Some(c));
    }

    #[test]
    fn check_runs_come_in_pages_with_links_and_an_unchanged_read_is_a_free_304() {
        let f = FakeForge::start().expect("start");
        let sha = "d".repeat(40);
        for i in 0..250 {
            f.add_check_run(
                "o/r",
                &format!("ci-{i}"),
                &sha,
                "completed",
                Some("success"),
                None,
            );
        }
        f.set_rate_limit(5000, SystemTime::now() + Duration::from_secs(3600));
        let path = format!("/repos/o/r/commits/{sha}/check-runs?per_page=100&page=3");
        let out = send(f.addr(), "GET", &path, "", "");
        assert!(out.contains("rel=\"first\""), "{out}");
        assert!(!out.contains("rel=\"next\""), "{out}");
        assert_eq!(out.matches("\"name\":").count(), 50, "{out}");
        let path = format!("/repos/o/r/commits/{sha}/check-runs?per_page=100");
        let out = send(f.addr(), "GET", &path, "", "");
        assert!(out.contains("page=2>; rel=\"next\""), "{out}");
        let etag = out
            .lines()
            .find_map(|l| l.strip_prefix("ETag: "))
            .expect("an ETag")
            .to_string();
        assert_eq!(f.rate_limit_points(), 2);
        let out = send(
            f.addr(),
            "GET",
            &path,
            &format!("If-None-Match: {etag}\r\n"),
            "",
        );
        assert!(out.starts_with("HTTP/1.1 304"), "{out}");
        assert!(out.contains("x-ratelimit-remaining: 4998"), "{out}");
        assert_eq!(f.rate_limit_points(), 2);
        assert_eq!(f.not_modified(), 1);
    }

    #[test]
    fn a_spent_primary_limit_is_answered_403_until_its_reset() {
        let f = FakeForge::start().expect("start");
        f.set_rate_limit(1, SystemTime::now() + Duration::from_secs(3600));
        assert!(send(f.addr(), "GET", "/zen", "", "").starts_with("HTTP/1.1 200"));
        let out = send(f.addr(), "GET", "/zen", "", "");
        assert!(
            out.starts_with("HTTP/1.1 403") && out.contains("x-ratelimit-remaining: 0"),
            "{out}"
        );
    }

    #[test]
    fn a_check_run_is_read_and_updated_by_id() {
        let f = FakeForge::start().expect("start");
        let id = f.add_check_run("o/r", "ci", &"e".repeat(40), "in_progress", None, Some("x"));
        let out = send(
            f.addr(),
            "PATCH",
            &format!("/repos/o/r/check-runs/{id}"),
            "",
            r#"{"conclusion":"success"}"#,
        );
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let run = f.check_run("o/r", id).expect("run");
        assert_eq!(
            (run["status"].as_str(), run["conclusion"].as_str()),
            (Some("completed"), Some("success"))
        );
        let out = send(
            f.addr(),
            "GET",
            &format!("/repos/o/r/check-runs/{id}"),
            "",
            "",
        );
        assert!(out.contains("\"conclusion\":\"success\""), "{out}");
        assert_eq!(f.applied_count(&format!("check-run:{id}")), 1);
    }
}
