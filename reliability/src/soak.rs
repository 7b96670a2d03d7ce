//! The soak: N workers run a seeded mix of ls-refs, fetch and leased pushes
//! through fault proxies against a real `git daemon`, then every push is
//! checked against the server's reflogs and the proxies' connection logs.
//!
//! # Set-up
//!
//! One served bare repository (`core.logAllRefUpdates=true`) with `main`,
//! one branch per worker (`refs/heads/w<i>`) and `refs/heads/shared`. Each
//! worker has its own [`FaultProxy`] in front of the daemon (so each proxy's
//! log is one worker's sequential conversation), a local repository to push
//! from (borrowing the server's objects through `objects/info/alternates`,
//! so a commit can be made on any value read) and an empty repository to
//! fetch into. All workers share one [`GitClient`] (one policy, one retry
//! budget per proxy address).
//!
//! # One operation of the mix
//!
//! * ls-refs of every ref;
//! * fetch of `+refs/heads/*:refs/remotes/origin/*`;
//! * a leased push, to the worker's own branch or to the shared one: the
//!   destination is read (ls-refs with the ref as prefix — its own client
//!   call, counted as `lease-read`), a commit is made on the value read with
//!   a message naming the worker and the operation (so every pushed commit
//!   is unique), and pushed with `--force-with-lease=<dst>:<value read>`.
//!   Workers race on the shared branch; a lost race is a stale lease.
//!
//! Before every client call, with probability `fault_rate`, the worker's
//! proxy is set to inject a fault — chosen at random among those that apply
//! to the call — on its next connection (one time in four, the next two),
//! else to pass everything through.
//!
//! # What is checked
//!
//! * a push reported `succeeded` is on the server exactly once (its commit
//!   is the new value of exactly one reflog entry of its ref);
//! * a push reported `answered` or `rejected` is not on the server;
//! * an `unknown` push is counted as found on or off the server, and none
//!   found on it says `may_have_applied: false`;
//! * no update overwrote another: every reflog entry that installed a soak
//!   commit moved the ref from exactly the value that commit was leased on
//!   (its parent) — so the history of every branch is one chain;
//! * every push connection that delivered its whole pack and got no report
//!   (an unknown attempt, seen from the proxy) was followed by a read
//!   (upload-pack) connection, never by a second pack — or ended the
//!   operation `unknown` with `may_have_applied: true`; a second pack of
//!   one push only ever follows such a read (not landed: tried again,
//!   leased on the value read), and no commit is installed twice;
//! * every client call ended within its deadline + 1 s.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_git::{CallOptions, GitClient, PushOptions, RefUpdate};
use sluice_policy::{
    BackoffShape, Bounds, Class, Outcome, OutcomeKind, Policy, RetryBudget, Verdict,
};
use sluice_testkit::repo;
use sluice_testkit::{ConnectionRecord, Fault, FaultProxy, GitDaemon, Point, RepoBuilder, Service};

use crate::Rng;

/// The figures of one soak.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Concurrent workers.
    pub workers: usize,
    /// Operations of the mix per worker (a push counts once, although it
    /// makes two client calls: its lease read and the push).
    pub ops_per_worker: usize,
    /// The probability that a client call's first connection is faulted.
    pub fault_rate: f64,
    /// The seed of every worker's generator (worker `i` uses `seed ^ i`).
    pub seed: u64,
    /// The bounds of every client call.
    pub bounds: Bounds,
    /// The client's per-host retry budget.
    pub retry_budget: RetryBudget,
}

impl SoakConfig {
    /// The CI size: 4 workers × 60 operations, 20% of calls faulted,
    /// 8 s deadline, 1 s attempts, 4 attempts.
    pub fn ci() -> SoakConfig {
        SoakConfig {
            workers: 4,
            ops_per_worker: 60,
            fault_rate: 0.2,
            seed: 0x50a4,
            bounds: Bounds::new(Duration::from_secs(8), Duration::from_secs(1), 4)
                .with_backoff(BackoffShape {
                    min_delay: Duration::from_millis(20),
                    max_delay: Duration::from_millis(400),
                    factor: 2.0,
                    jitter: true,
                })
                .with_reconcile_reserve(Duration::from_secs(2)),
            retry_budget: RetryBudget {
                capacity: 40.0,
                refill_per_sec: 5.0,
                success_credit: 0.5,
            },
        }
    }
}

/// What kind of client call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallKind {
    /// ls-refs of every ref.
    LsRefs,
    /// fetch of every branch.
    Fetch,
    /// The read of a push's destination that its lease is taken from.
    LeaseRead,
    /// A leased push.
    Push,
}

impl CallKind {
    /// The name printed.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::LsRefs => "ls-refs",
            CallKind::Fetch => "fetch",
            CallKind::LeaseRead => "lease-read",
            CallKind::Push => "push",
        }
    }
}

/// One push as the client reported it.
#[derive(Debug, Clone)]
pub struct PushRecord {
    /// The worker.
    pub worker: usize,
    /// The operation number within the worker.
    pub op: usize,
    /// The destination ref.
    pub dst: String,
    /// The unique commit pushed.
    pub commit: String,
    /// The value it was leased on (its parent).
    pub lease: String,
    /// How it ended.
    pub kind: OutcomeKind,
    /// The outcome's `may_have_applied`.
    pub may_have_applied: Option<bool>,
    /// The settling read's verdict, if one settled it.
    pub verdict: Option<Verdict>,
    /// Per attempt: phase and class.
    pub attempts: Vec<(String, Option<Class>)>,
    /// Its connections in the worker's proxy log.
    pub conns: Range<usize>,
    /// The error's words, if any.
    pub error: Option<String>,
}

/// The result of a soak: its figures and every violation found.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Workers.
    pub workers: usize,
    /// Operations of the mix run.
    pub ops: usize,
    /// Client calls, by kind.
    pub calls: BTreeMap<&'static str, usize>,
    /// Outcomes by call kind and result.
    pub outcomes: BTreeMap<(&'static str, &'static str), usize>,
    /// Connections the proxies accepted.
    pub connections: usize,
    /// Connections on which a fault acted, by fault.
    pub faults: BTreeMap<&'static str, usize>,
    /// Attempts beyond the first, over every call.
    pub retries: usize,
    /// Settling reads' verdicts, by verdict.
    pub verdicts: BTreeMap<&'static str, usize>,
    /// `stopped` reasons of calls that did not succeed.
    pub stopped: BTreeMap<&'static str, usize>,
    /// Pushes reported succeeded and found once on the server.
    pub landed: usize,
    /// Pushes answered or rejected (stale lease and other rejections).
    pub answered: usize,
    /// ... of which found on the server (each a violation).
    pub answered_on: usize,
    /// Unknown pushes found on the server.
    pub unknown_on: usize,
    /// Unknown pushes not on the server.
    pub unknown_off: usize,
    /// Push connections that delivered a whole pack and got no report.
    pub unknown_push_attempts: usize,
    /// ... of which the next connection of the push was a read.
    pub followed_by_read: usize,
    /// ... of which none followed (the push ended unknown, may have applied).
    pub ended_unread: usize,
    /// Updates lost: reported landed but not on the server, or an update
    /// that replaced a value other than its lease.
    pub lost_updates: usize,
    /// Updates doubled: a commit installed twice, or a second pack sent by
    /// one push with no read since its last delivered pack.
    pub doubled_updates: usize,
    /// Second packs sent after a read found the ref not landed (leased on
    /// the value read, as the design allows).
    pub second_packs_after_read: usize,
    /// The longest call.
    pub longest_call: Duration,
    /// The deadline of every call.
    pub deadline: Duration,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Every broken promise, in words.
    pub violations: Vec<String>,
    /// How each unknown push went: attempts and its connections' faults.
    pub unknown_details: Vec<String>,
}

impl fmt::Display for SoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "soak: {} workers, {} operations, {} client calls, {} connections, {:.1} s",
            self.workers,
            self.ops,
            self.calls.values().sum::<usize>(),
            self.connections,
            self.elapsed.as_secs_f64()
        )?;
        let calls: Vec<String> = self.calls.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(f, "  calls: {}", calls.join(", "))?;
        let faulted: usize = self.faults.values().sum();
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(
            f,
            "  faults: {faulted} of {} connections ({:.1}%): {}",
            self.connections,
            100.0 * faulted as f64 / self.connections.max(1) as f64,
            faults.join(", ")
        )?;
        let mut by_kind: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for ((k, o), n) in &self.outcomes {
            by_kind.entry(k).or_default().push(format!("{o} {n}"));
        }
        for (k, v) in by_kind {
            writeln!(f, "  outcomes {k}: {}", v.join(", "))?;
        }
        let stopped: Vec<String> = self
            .stopped
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "  stopped: {}", stopped.join(", "))?;
        writeln!(f, "  retries: {}", self.retries)?;
        let verdicts: Vec<String> = self
            .verdicts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(f, "  settled by reading: {}", verdicts.join(", "))?;
        writeln!(
            f,
            "  pushes: landed {} (each on the server exactly once), answered {} (on the server {}), unknown {} (on the server {}, off {})",
            self.landed,
            self.answered,
            self.answered_on,
            self.unknown_on + self.unknown_off,
            self.unknown_on,
            self.unknown_off
        )?;
        writeln!(
            f,
            "  unknown push attempts on the wire: {} (followed by a read {}, ended the push unread {}); second packs after a read {}, without one 0 expected",
            self.unknown_push_attempts,
            self.followed_by_read,
            self.ended_unread,
            self.second_packs_after_read
        )?;
        writeln!(
            f,
            "  longest call: {} ms (deadline {} ms)",
            self.longest_call.as_millis(),
            self.deadline.as_millis()
        )?;
        writeln!(
            f,
            "  lost updates = {}, doubled updates = {}, violations = {}",
            self.lost_updates,
            self.doubled_updates,
            self.violations.len()
        )?;
        for u in &self.unknown_details {
            writeln!(f, "  unknown: {u}")?;
        }
        for v in self.violations.iter().take(20) {
            writeln!(f, "  VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// The name of a fault, for the figures.
pub fn fault_name(f: &Fault) -> &'static str {
    match f {
        Fault::PassThrough => "pass-through",
        Fault::Refuse => "refuse",
        Fault::ResetBeforeAdvert => "reset-before-advert",
        Fault::StallBeforeAdvert => "stall-before-advert",
        Fault::TrickleAdvert { .. } => "trickle-advert",
        Fault::CutAfterAdvert => "cut-after-advert",
        Fault::CutInFetchPack => "cut-in-fetch-pack",
        Fault::CutInPushPack => "cut-in-push-pack",
        Fault::CutBeforeReport => "cut-before-report",
        Fault::StallBeforeReport => "stall-before-report",
        Fault::HttpStatus { .. } => "http-status",
        Fault::HttpCutResponse { .. } => "http-cut-response",
        Fault::HttpStallResponseBody { .. } => "http-stall-response-body",
        Fault::HttpStallRequestBody { .. } => "http-stall-request-body",
    }
}

fn faults_for(kind: CallKind, rng: &mut Rng) -> Fault {
    let trickle = Fault::TrickleAdvert {
        every: Duration::from_millis(if rng.chance(0.5) { 1 } else { 3 }),
    };
    let common = [
        Fault::Refuse,
        Fault::ResetBeforeAdvert,
        Fault::StallBeforeAdvert,
        trickle,
        Fault::CutAfterAdvert,
    ];
    let extra: &[Fault] = match kind {
        CallKind::LsRefs | CallKind::LeaseRead => &[Fault::CutBeforeReport],
        CallKind::Fetch => &[Fault::CutInFetchPack, Fault::CutInFetchPack],
        CallKind::Push => &[
            Fault::CutInPushPack,
            Fault::CutBeforeReport,
            Fault::CutBeforeReport,
            Fault::StallBeforeReport,
        ],
    };
    let n = common.len() + extra.len();
    let i = rng.below(n);
    if i < common.len() {
        common[i].clone()
    } else {
        extra[i - common.len()].clone()
    }
}

struct Served {
    _dir: tempfile::TempDir,
    srv: PathBuf,
    daemon: GitDaemon,
    root: PathBuf,
}

fn serve(workers: usize) -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let srv = RepoBuilder::new()
        .branch("main", 3)
        .build(&root.join("srv").join("soak.git"))
        .expect("served repository builds");
    repo::set_config(&srv, "core.logAllRefUpdates", "true");
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    let mut branches: Vec<String> = (0..workers).map(|w| format!("refs/heads/w{w}")).collect();
    branches.push("refs/heads/shared".into());
    for b in &branches {
        repo::git(&srv, &["update-ref", "-m", "soak-init", b, &main]);
    }
    let daemon = GitDaemon::start(&root.join("srv")).expect("git daemon starts");
    Served {
        _dir: dir,
        srv,
        daemon,
        root,
    }
}

/// A bare repository that reads the served repository's objects through
/// `objects/info/alternates`.
pub(crate) fn borrowing_repo(path: &Path, srv: &Path) -> PathBuf {
    repo::init_bare(path).expect("init");
    let objects = srv.join("objects").canonicalize().expect("objects dir");
    std::fs::write(
        path.join("objects").join("info").join("alternates"),
        format!("{}\n", objects.display()),
    )
    .expect("alternates");
    path.to_path_buf()
}

/// A commit on `parent` (its tree, a unique message), made in `local`.
pub(crate) fn unique_commit(local: &Path, parent: &str, message: &str) -> String {
    repo::git(
        local,
        &[
            "commit-tree",
            &format!("{parent}^{{tree}}"),
            "-p",
            parent,
            "-m",
            message,
        ],
    )
}

/// Add each count of `from` to `into`.
pub(crate) fn add_counts<K: Ord + Copy>(into: &mut BTreeMap<K, usize>, from: &BTreeMap<K, usize>) {
    for (k, v) in from {
        *into.entry(*k).or_default() += v;
    }
}

#[derive(Default)]
struct WorkerLog {
    calls: BTreeMap<&'static str, usize>,
    outcomes: BTreeMap<(&'static str, &'static str), usize>,
    stopped: BTreeMap<&'static str, usize>,
    verdicts: BTreeMap<&'static str, usize>,
    retries: usize,
    longest: Duration,
    pushes: Vec<PushRecord>,
    late: Vec<String>,
}

impl WorkerLog {
    fn note<T>(&mut self, kind: CallKind, out: &Outcome<T>, took: Duration, deadline: Duration) {
        *self.calls.entry(kind.name()).or_default() += 1;
        *self
            .outcomes
            .entry((kind.name(), out.kind.as_str()))
            .or_default() += 1;
        if let Some(s) = out.stopped {
            *self.stopped.entry(s.as_str()).or_default() += 1;
        }
        if let Some(r) = &out.reconciled {
            *self
                .verdicts
                .entry(r.verdict.map_or("unsettled", |v| v.as_str()))
                .or_default() += 1;
        }
        self.retries += out.attempts.len().saturating_sub(1);
        self.longest = self.longest.max(took);
        if took > deadline + Duration::from_secs(1) {
            self.late.push(format!(
                "{} took {} ms, deadline {} ms",
                kind.name(),
                took.as_millis(),
                deadline.as_millis()
            ));
        }
    }
}

fn plan(proxy: &FaultProxy, rng: &mut Rng, rate: f64, kind: CallKind) {
    if rng.chance(rate) {
        let fault = faults_for(kind, rng);
        let times = if rng.chance(0.25) { 2 } else { 1 };
        proxy.set_fault(fault, times);
    } else {
        proxy.clear_fault();
    }
}

fn worker(
    w: usize,
    cfg: &SoakConfig,
    client: &GitClient,
    proxy: &FaultProxy,
    local: &Path,
    fetch_into: &Path,
) -> WorkerLog {
    let mut rng = Rng::new(cfg.seed ^ (w as u64).wrapping_mul(0x9E37_79B9));
    let url = proxy.url("soak.git");
    let opts = CallOptions::new().bounds(cfg.bounds);
    let deadline = cfg.bounds.deadline;
    let local_repo = gix::open(local).expect("open local");
    let fetch_repo = gix::open(fetch_into).expect("open fetch repo");
    let mut log = WorkerLog::default();
    let own = format!("refs/heads/w{w}");
    for op in 0..cfg.ops_per_worker {
        let pick = rng.unit();
        if pick < 0.2 {
            plan(proxy, &mut rng, cfg.fault_rate, CallKind::LsRefs);
            let t = Instant::now();
            let out = client.ls_refs(&url, &[], &opts).expect("valid input");
            log.note(CallKind::LsRefs, &out, t.elapsed(), deadline);
            continue;
        }
        if pick < 0.4 {
            plan(proxy, &mut rng, cfg.fault_rate, CallKind::Fetch);
            let t = Instant::now();
            let out = client
                .fetch(
                    &url,
                    &["+refs/heads/*:refs/remotes/origin/*".into()],
                    &fetch_repo,
                    &opts,
                )
                .expect("valid input");
            log.note(CallKind::Fetch, &out, t.elapsed(), deadline);
            continue;
        }
        let dst = if pick < 0.7 {
            own.clone()
        } else {
            "refs/heads/shared".to_string()
        };
        plan(proxy, &mut rng, cfg.fault_rate, CallKind::LeaseRead);
        let t = Instant::now();
        let read = client
            .ls_refs(&url, std::slice::from_ref(&dst), &opts)
            .expect("valid input");
        log.note(CallKind::LeaseRead, &read, t.elapsed(), deadline);
        let Some(lease) = read
            .value
            .as_ref()
            .and_then(|refs| refs.iter().find(|r| r.name == dst))
            .and_then(|r| r.oid)
        else {
            continue;
        };
        let lease = lease.to_string();
        let commit = unique_commit(local, &lease, &format!("soak w{w} op{op} {dst}"));
        let update = RefUpdate::leased(
            gix::ObjectId::from_hex(commit.as_bytes()).expect("hex"),
            dst.clone(),
            gix::ObjectId::from_hex(lease.as_bytes()).expect("hex"),
        );
        plan(proxy, &mut rng, cfg.fault_rate, CallKind::Push);
        let before = proxy.connections().len();
        let t = Instant::now();
        let out = client
            .push(&url, &[update], &PushOptions::default(), &local_repo, &opts)
            .expect("valid input");
        let took = t.elapsed();
        let after = proxy.connections().len();
        log.note(CallKind::Push, &out, took, deadline);
        log.pushes.push(PushRecord {
            worker: w,
            op,
            dst,
            commit,
            lease,
            kind: out.kind,
            may_have_applied: out.may_have_applied,
            verdict: out.reconciled.as_ref().and_then(|r| r.verdict),
            attempts: out
                .attempts
                .iter()
                .map(|a| (a.phase.to_string(), a.class))
                .collect(),
            conns: before..after,
            error: out.error.as_ref().map(|e| e.cause.clone()),
        });
    }
    proxy.clear_fault();
    log
}

/// Whether a proxy connection delivered a whole pack to receive-pack.
fn delivered_pack(c: &ConnectionRecord) -> bool {
    c.service == Some(Service::ReceivePack)
        && c.pack_bytes_client_to_server > 0
        && !(c.fault == Some(Fault::CutInPushPack) && c.fault_fired)
}

/// Runs a soak and checks it.
pub fn run(cfg: &SoakConfig) -> SoakReport {
    let started = Instant::now();
    let served = serve(cfg.workers);
    let policy = Policy::builder()
        .retry_budget(cfg.retry_budget)
        .jitter_seed(cfg.seed)
        .build();
    let client = GitClient::new(Arc::new(policy));
    let proxies: Vec<FaultProxy> = (0..cfg.workers)
        .map(|_| FaultProxy::git(served.daemon.addr()).expect("proxy"))
        .collect();
    let locals: Vec<(PathBuf, PathBuf)> = (0..cfg.workers)
        .map(|w| {
            let local = borrowing_repo(&served.root.join(format!("local-{w}.git")), &served.srv);
            let fetch = served.root.join(format!("fetch-{w}.git"));
            repo::init_bare(&fetch).expect("init fetch repo");
            (local, fetch)
        })
        .collect();
    let logs: Vec<WorkerLog> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.workers)
            .map(|w| {
                let (client, proxy, (local, fetch)) = (&client, &proxies[w], &locals[w]);
                s.spawn(move || worker(w, cfg, client, proxy, local, fetch))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    for p in &proxies {
        p.wait_idle(Duration::from_secs(10));
    }
    let mut report = SoakReport {
        workers: cfg.workers,
        ops: cfg.workers * cfg.ops_per_worker,
        deadline: cfg.bounds.deadline,
        ..SoakReport::default()
    };
    let conns: Vec<Vec<ConnectionRecord>> = proxies.iter().map(|p| p.connections()).collect();
    for log in &logs {
        add_counts(&mut report.calls, &log.calls);
        add_counts(&mut report.outcomes, &log.outcomes);
        add_counts(&mut report.stopped, &log.stopped);
        add_counts(&mut report.verdicts, &log.verdicts);
        report.retries += log.retries;
        report.longest_call = report.longest_call.max(log.longest);
        report.violations.extend(log.late.iter().cloned());
    }
    for c in conns.iter().flatten() {
        report.connections += 1;
        if let (Some(f), true) = (&c.fault, c.fault_fired) {
            *report.faults.entry(fault_name(f)).or_default() += 1;
        }
    }
    check(&served.srv, cfg.workers, &logs, &conns, &mut report);
    report.elapsed = started.elapsed();
    drop(proxies);
    report
}

fn check(
    srv: &Path,
    workers: usize,
    logs: &[WorkerLog],
    conns: &[Vec<ConnectionRecord>],
    report: &mut SoakReport,
) {
    let mut branches: Vec<String> = (0..workers).map(|w| format!("refs/heads/w{w}")).collect();
    branches.push("refs/heads/shared".into());
    // Every reflog entry of every branch: commit -> [(branch, old)].
    let mut installed: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for b in &branches {
        for e in repo::reflog_entries(srv, b) {
            if e.message == "soak-init" {
                continue;
            }
            installed
                .entry(e.new.clone())
                .or_default()
                .push((b.clone(), e.old.clone()));
        }
    }
    let pushes: Vec<&PushRecord> = logs.iter().flat_map(|l| l.pushes.iter()).collect();
    let by_commit: HashMap<&str, &PushRecord> =
        pushes.iter().map(|p| (p.commit.as_str(), *p)).collect();
    for (commit, entries) in &installed {
        let Some(p) = by_commit.get(commit.as_str()) else {
            report
                .violations
                .push(format!("{commit} on the server was pushed by nobody"));
            continue;
        };
        if entries.len() > 1 {
            report.doubled_updates += entries.len() - 1;
            report.violations.push(format!(
                "w{} op{}: {commit} installed {} times",
                p.worker,
                p.op,
                entries.len()
            ));
        }
        for (branch, old) in entries {
            if *branch != p.dst {
                report.violations.push(format!(
                    "w{} op{}: {commit} landed on {branch}, pushed to {}",
                    p.worker, p.op, p.dst
                ));
            }
            if *old != p.lease {
                report.lost_updates += 1;
                report.violations.push(format!(
                    "w{} op{}: {commit} replaced {old} on {branch}, leased on {}: an update was overwritten",
                    p.worker, p.op, p.lease
                ));
            }
        }
    }
    for p in &pushes {
        let on = installed.get(&p.commit).map_or(0, Vec::len);
        let who = format!("w{} op{} {} {}", p.worker, p.op, p.dst, p.commit);
        match p.kind {
            OutcomeKind::Succeeded => {
                if on == 1 {
                    report.landed += 1;
                } else if on == 0 {
                    report.lost_updates += 1;
                    report.violations.push(format!(
                        "{who}: reported landed, not on the server ({:?})",
                        p.attempts
                    ));
                }
            }
            OutcomeKind::Answered | OutcomeKind::Rejected => {
                report.answered += 1;
                if on > 0 {
                    report.answered_on += 1;
                    report.violations.push(format!(
                        "{who}: reported {}, but on the server ({:?}, {:?})",
                        p.kind.as_str(),
                        p.attempts,
                        p.error
                    ));
                }
            }
            OutcomeKind::LocalError => {
                report.violations.push(format!(
                    "{who}: {} in a soak with no local trouble ({:?}, {:?})",
                    p.kind.as_str(),
                    p.attempts,
                    p.error
                ));
            }
            OutcomeKind::Unknown => {
                let faults: Vec<String> = conns[p.worker][p.conns.clone()]
                    .iter()
                    .map(|c| {
                        format!(
                            "{}:{}",
                            match c.service {
                                Some(Service::ReceivePack) => "rp",
                                Some(Service::UploadPack) => "up",
                                _ => "?",
                            },
                            c.fault
                                .as_ref()
                                .filter(|_| c.fault_fired)
                                .map_or("-", fault_name)
                        )
                    })
                    .collect();
                report.unknown_details.push(format!(
                    "{who}: on the server {on}, may_have_applied {:?}, attempts {:?}, connections {faults:?}",
                    p.may_have_applied, p.attempts
                ));
                if on > 0 {
                    report.unknown_on += 1;
                    if p.may_have_applied == Some(false) {
                        report.violations.push(format!(
                            "{who}: unknown with may_have_applied false, but on the server ({:?})",
                            p.attempts
                        ));
                    }
                } else {
                    report.unknown_off += 1;
                }
            }
        }
        // The proxy's view of this push's connections.
        let recs = &conns[p.worker][p.conns.clone()];
        let delivered: Vec<usize> = (0..recs.len())
            .filter(|&i| delivered_pack(&recs[i]))
            .collect();
        // One operation, one delivered pack: an unknown push is settled by
        // reading and never pushed again (the one rule), so a second
        // delivered pack is a violation, with or without a read before it.
        for w in delivered.windows(2) {
            let read_between = recs[w[0] + 1..w[1]]
                .iter()
                .any(|c| c.service == Some(Service::UploadPack));
            if read_between {
                report.second_packs_after_read += 1;
            } else {
                report.doubled_updates += 1;
            }
            report
                .violations
                .push(format!("{who}: a second delivered pack ({:?})", p.attempts));
        }
        for &i in &delivered {
            if recs[i].passed(Point::Responded) {
                continue;
            }
            report.unknown_push_attempts += 1;
            match recs.get(i + 1) {
                Some(next) if next.service == Some(Service::UploadPack) => {
                    report.followed_by_read += 1
                }
                Some(next) => report.violations.push(format!(
                    "{who}: an unknown push attempt was followed by {:?}, not a read",
                    next.service
                )),
                None if p.kind == OutcomeKind::Unknown && p.may_have_applied == Some(true) => {
                    report.ended_unread += 1
                }
                None => report.violations.push(format!(
                    "{who}: an unknown push attempt was never read ({:?}, may_have_applied {:?})",
                    p.attempts, p.may_have_applied
                )),
            }
        }
    }
}
