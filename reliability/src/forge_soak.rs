//! The forge soak: worker threads sharing one [`ForgeClient`] run a seeded
//! mix of merges, ref updates, check-run updates and pull-request reads
//! against the testkit's stateful fake GitHub, about a fifth of them
//! faulted (every fault the fake plays), then every outcome is checked
//! against the fake's own record:
//!
//! * **no write applied twice**: the fake's count of applied writes per
//!   operation's object is at most one, and no write request of an
//!   operation arrived after its write was applied;
//! * **every verdict equals the fake's final state**: `succeeded` and
//!   `landed` hold the write; `answered` (405/409/422) and `not-landed` do
//!   not, and an answered write says `may_have_applied: false`; `moved` is
//!   right only for a merge asked at a head that had moved (and the pull
//!   request is then not merged): nothing else moves here;
//! * reads succeed whatever their faults, unless the forge answered (422)
//!   or the host's retry budget refused their retry: the client runs with
//!   the budget as shipped (20 tokens, 1 a second, 0.1 per success),
//!   shared by the eight threads, and at this fault rate the retries
//!   (about 0.12 an operation) nearly match what it earns back, so it runs
//!   dry now and then and a retry is refused — storm protection doing its
//!   job. Such a read ends `unknown` with `stopped: retry-budget-empty`,
//!   which claims nothing false; the soak counts those operations and
//!   checks they are exactly the retries the budget refused.
//!
//! Each operation has an object of its own (its pull request, its ref, its
//! check run), and its fault is queued for its own path, so eight threads
//! never take each other's faults.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use sluice_forge::{CallOptions, CheckRunUpdate, ForgeClient, MergeMethod, RepoRef};
use sluice_policy::{
    Bounds, BudgetStore, LocalBudgets, Outcome, OutcomeKind, Policy, RetryBudget, Verdict,
};
use sluice_testkit::fake_forge::{Behaviour, Event, FakeForge};

use crate::Rng;

/// The repository every operation works in.
const REPO: &str = "soak/forge";

/// `stopped` when the host's retry budget refused a retry.
const BUDGET_EMPTY: &str = "retry-budget-empty";

/// How a forge soak runs.
#[derive(Clone, Debug)]
pub struct ForgeSoakConfig {
    /// Threads sharing the one client.
    pub workers: usize,
    /// Operations in all.
    pub ops: usize,
    /// The share of operations whose request is faulted.
    pub fault_rate: f64,
    /// The generator's seed.
    pub seed: u64,
    /// The client's write pacing (GitHub asks for a second; the soak sets
    /// it small so 2,000 writes fit a run).
    pub write_spacing: Duration,
    /// Each operation's bounds.
    pub bounds: Bounds,
    /// The client's per-host retry budget (storm protection).
    pub retry_budget: RetryBudget,
}

impl ForgeSoakConfig {
    /// The CI-sized run: [`ForgeSoakConfig::standard`] with 1,000
    /// operations (about 30 s in a debug build on two busy cores).
    pub fn ci() -> Self {
        ForgeSoakConfig {
            ops: 1_000,
            ..Self::standard()
        }
    }

    /// 2,000 operations on 8 threads, 20% faulted, writes paced 1 ms
    /// apart, the retry budget as shipped ([`RetryBudget::DEFAULT`]), each
    /// operation 4 s / 1 s per attempt / 4 attempts with a 1 s reconcile
    /// reserve.
    pub fn standard() -> Self {
        ForgeSoakConfig {
            workers: 8,
            ops: 2_000,
            fault_rate: 0.2,
            seed: 0x5eed_f0e9,
            write_spacing: Duration::from_millis(1),
            bounds: Bounds::new(Duration::from_secs(4), Duration::from_secs(1), 4)
                .with_reconcile_reserve(Duration::from_secs(1)),
            retry_budget: RetryBudget::DEFAULT,
        }
    }
}

/// The faults the soak plays, one per faulted operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SoakFault {
    /// Applied, then answered 502.
    AppliedThen502,
    /// Applied, then the connection cut.
    AppliedThenCut,
    /// Applied, then stalled past the attempt timeout.
    AppliedThenStalled,
    /// Applied with reads lagging it by 300 ms, then answered 502.
    AppliedLaggingThen502,
    /// Not applied, answered 502.
    NotApplied502,
    /// Not taken: 503.
    NotTaken503,
    /// Not taken: 429 with `Retry-After: 0`.
    NotTaken429,
    /// Not taken: the secondary limit with `Retry-After: 1`.
    SecondaryLimit,
    /// Not taken: the primary limit, reset a second away.
    PrimaryLimit,
    /// The forge's answer: 422.
    Invalid422,
}

const FAULTS: [SoakFault; 10] = [
    SoakFault::AppliedThen502,
    SoakFault::AppliedThenCut,
    SoakFault::AppliedThenStalled,
    SoakFault::AppliedLaggingThen502,
    SoakFault::NotApplied502,
    SoakFault::NotTaken503,
    SoakFault::NotTaken429,
    SoakFault::SecondaryLimit,
    SoakFault::PrimaryLimit,
    SoakFault::Invalid422,
];

impl SoakFault {
    fn behaviour(self) -> Behaviour {
        let status = |status| Behaviour::Status {
            status,
            retry_after: None,
        };
        match self {
            SoakFault::AppliedThen502 => Behaviour::ApplyThenStatus(502),
            SoakFault::AppliedThenCut => Behaviour::ApplyThenCut,
            SoakFault::AppliedThenStalled => Behaviour::ApplyThenStall(Duration::from_millis(1500)),
            SoakFault::AppliedLaggingThen502 => Behaviour::ApplyLaggingThenStatus {
                lag: Duration::from_millis(300),
                status: 502,
            },
            SoakFault::NotApplied502 => status(502),
            SoakFault::NotTaken503 => status(503),
            SoakFault::NotTaken429 => Behaviour::RateLimited { retry_after: 0 },
            SoakFault::SecondaryLimit => Behaviour::SecondaryLimitAfter { retry_after: 1 },
            SoakFault::PrimaryLimit => Behaviour::PrimaryLimit {
                reset: SystemTime::now() + Duration::from_secs(1),
            },
            SoakFault::Invalid422 => Behaviour::Invalid,
        }
    }
}

/// What an operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SoakOp {
    /// `merge_pull` at the head checked.
    Merge,
    /// `merge_pull` at a head that moved before it (the forge's 409).
    MergeMovedHead,
    /// `update_ref`, a fast-forward.
    UpdateRef,
    /// `update_check_run` to completed/success.
    UpdateCheckRun,
    /// `get_pull`.
    GetPull,
}

/// One operation's record.
#[derive(Clone, Debug)]
struct Done {
    op: SoakOp,
    fault: Option<SoakFault>,
    kind: OutcomeKind,
    may_have_applied: Option<bool>,
    verdict: Option<Verdict>,
    /// The fake's applied-write key of its object (writes).
    key: Option<String>,
    /// The write's method and path (writes).
    path: Option<(&'static str, String)>,
    /// Whether the fake's final state holds the write (writes).
    holds: Option<bool>,
    /// Why it stopped trying, when it did (`retry-budget-empty`, ...).
    stopped: Option<&'static str>,
    /// Attempts made (settling reads are not attempts).
    attempts: usize,
    /// What each failed attempt that asked for a retry was (phase, class
    /// and the start of its cause).
    retried_after: Vec<String>,
    /// Why it stopped and each attempt's class and cause, for the report.
    story: String,
    elapsed: Duration,
}

/// What a forge soak found.
#[derive(Clone, Debug, Default)]
pub struct ForgeSoakReport {
    /// Operations run.
    pub ops: usize,
    /// Outcomes by operation and result.
    pub results: BTreeMap<(String, String), usize>,
    /// Faults played, by kind.
    pub faults: BTreeMap<String, usize>,
    /// Settling verdicts, by name.
    pub verdicts: BTreeMap<String, usize>,
    /// Why operations stopped trying (`stopped`), by operation and reason,
    /// for those that did.
    pub stopped: BTreeMap<(String, String), usize>,
    /// Attempts after an operation's first (each one a retry the host's
    /// retry budget paid for).
    pub retries: usize,
    /// What the host's retry budget did over the run.
    pub budget: BudgetFigures,
    /// The failed attempts that asked the budget for a retry, by phase,
    /// class and the start of the cause.
    pub retried_after: BTreeMap<String, usize>,
    /// Operations that stopped because the retry budget refused a retry
    /// (`stopped: retry-budget-empty`); as many as it refused.
    pub stopped_by_budget: usize,
    /// Writes the fake applied more than once for one operation.
    pub applied_twice: usize,
    /// Write requests that arrived after the operation's write was applied.
    pub resent_after_applied: usize,
    /// Writes the fake applied in all.
    pub applied: usize,
    /// Operations whose verdict differs from the fake's final state.
    pub verdict_mismatches: usize,
    /// Every broken promise, in words.
    pub violations: Vec<String>,
    /// The run's wall time.
    pub elapsed: Duration,
    /// The slowest operation.
    pub slowest: Duration,
}

impl fmt::Display for ForgeSoakReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "forge soak: {} operations in {:.1} s (slowest {} ms); {} writes applied, {} applied twice, {} resent after applying, {} verdicts unlike the forge's state",
            self.ops,
            self.elapsed.as_secs_f64(),
            self.slowest.as_millis(),
            self.applied,
            self.applied_twice,
            self.resent_after_applied,
            self.verdict_mismatches
        )?;
        writeln!(f, "faults: {:?}", self.faults)?;
        writeln!(f, "verdicts: {:?}", self.verdicts)?;
        writeln!(
            f,
            "retries: {}; retry budget: {} paid, {} refused, lowest {:.1} tokens; {} operations stopped by it; stopped: {:?}",
            self.retries,
            self.budget.paid,
            self.budget.refused,
            self.budget.lowest,
            self.stopped_by_budget,
            self.stopped
        )?;
        for ((op, result), n) in &self.results {
            writeln!(f, "  {op:<16} {result:<10} {n}")?;
        }
        writeln!(f, "retries asked after:")?;
        for (what, n) in &self.retried_after {
            writeln!(f, "  {n:>5}  {what}")?;
        }
        for v in self.violations.iter().take(20) {
            writeln!(f, "VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// What the host's retry budget did over a run, as the policy's buckets, counted, saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetFigures {
    /// Retries the budget paid for.
    pub paid: u64,
    /// Retries it refused (the bucket held less than a token).
    pub refused: u64,
    /// The fewest tokens it held after a retry asked (infinite without a
    /// limit).
    pub lowest: f64,
}

/// The policy's own buckets, counted: every retry asked for, paid or
/// refused, and the lowest the bucket went.
#[derive(Debug)]
struct Counted {
    inner: LocalBudgets,
    figures: Mutex<BudgetFigures>,
}

impl BudgetStore for Counted {
    fn try_spend(
        &self,
        host: &str,
        budget: &RetryBudget,
        now: Duration,
        left: Duration,
    ) -> (bool, f64) {
        let (paid, tokens) = self.inner.try_spend(host, budget, now, left);
        let mut f = self.figures.lock().expect("no panic while counting");
        if paid {
            f.paid += 1;
        } else {
            f.refused += 1;
        }
        f.lowest = f.lowest.min(tokens);
        (paid, tokens)
    }

    fn credit(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) -> f64 {
        self.inner.credit(host, budget, now, left)
    }

    fn drain(&self, host: &str, budget: &RetryBudget, now: Duration, left: Duration) {
        self.inner.drain(host, budget, now, left)
    }
}

/// Run the soak; the report says what held.
pub fn run(cfg: &ForgeSoakConfig) -> ForgeSoakReport {
    let forge = FakeForge::start().expect("the fake forge starts on loopback");
    let budgets = Arc::new(Counted {
        inner: LocalBudgets::new(),
        figures: Mutex::new(BudgetFigures {
            lowest: f64::INFINITY,
            ..Default::default()
        }),
    });
    let client = ForgeClient::builder(&forge.url())
        .policy(Arc::new(
            Policy::builder()
                .settle(Duration::from_millis(50))
                .retry_budget(cfg.retry_budget)
                .budget_store(budgets.clone())
                .build(),
        ))
        .write_spacing(cfg.write_spacing)
        .max_concurrent_per_host(cfg.workers)
        .bounds(cfg.bounds)
        .build()
        .expect("a client of the fake forge");
    let done: Mutex<Vec<Done>> = Mutex::new(Vec::with_capacity(cfg.ops));
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..cfg.workers {
            let (forge, client, done) = (&forge, &client, &done);
            s.spawn(move || {
                let mut rng = Rng::new(cfg.seed ^ (w as u64).wrapping_mul(0x9E37_79B9));
                let mut i = w;
                while i < cfg.ops {
                    let d = one(forge, client, cfg, &mut rng, i);
                    done.lock().expect("no worker panicked holding it").push(d);
                    i += cfg.workers;
                }
            });
        }
    });
    let elapsed = started.elapsed();
    let done = done.into_inner().expect("no worker panicked holding it");
    let mut report = check(&forge, done);
    report.elapsed = elapsed;
    report.budget = *budgets.figures.lock().expect("no panic while counting");
    // Each refusal stops its operation: the two counts are one.
    if report.stopped_by_budget as u64 != report.budget.refused {
        report.violations.push(format!(
            "{} operations say the retry budget stopped them, and it refused {} retries",
            report.stopped_by_budget, report.budget.refused
        ));
    }
    report
}

fn sha(prefix: char, i: usize) -> String {
    format!("{prefix}{i:039x}")
}

/// Seed operation `i`'s object, queue its fault, run it, read its object's
/// final state.
fn one(
    forge: &FakeForge,
    client: &ForgeClient,
    cfg: &ForgeSoakConfig,
    rng: &mut Rng,
    i: usize,
) -> Done {
    let repo: RepoRef = REPO.parse().expect("owner/name");
    let op = match rng.below(10) {
        0..=2 => SoakOp::Merge,
        3 => SoakOp::MergeMovedHead,
        4..=6 => SoakOp::UpdateRef,
        7..=8 => SoakOp::UpdateCheckRun,
        _ => SoakOp::GetPull,
    };
    let fault = rng
        .chance(cfg.fault_rate)
        .then(|| FAULTS[rng.below(FAULTS.len())]);
    let (head, next) = (sha('a', i), sha('b', i));
    let opts = CallOptions::new;
    let t = Instant::now();
    let mut d = Done {
        op,
        fault,
        kind: OutcomeKind::Succeeded,
        may_have_applied: None,
        verdict: None,
        key: None,
        path: None,
        holds: None,
        stopped: None,
        attempts: 0,
        retried_after: Vec::new(),
        story: String::new(),
        elapsed: Duration::ZERO,
    };
    let queue = |method: &str, path: &str| {
        if let Some(f) = fault {
            forge.push_path(method, path, f.behaviour());
        }
    };
    match op {
        SoakOp::Merge | SoakOp::MergeMovedHead => {
            let n = forge.add_pull(REPO, &format!("soak-{i}"), "main", &head);
            if op == SoakOp::MergeMovedHead {
                forge.set_pull_head(REPO, n, &sha('e', i));
            }
            let path = format!("/repos/{REPO}/pulls/{n}/merge");
            queue("PUT", &path);
            let out = client
                .merge_pull(&repo, n, &head, MergeMethod::Squash, &opts())
                .expect("valid input");
            record(&mut d, &out);
            d.key = Some(format!("pull:{REPO}#{n}"));
            d.path = Some(("PUT", path));
            d.holds = Some(forge.pull(REPO, n).is_some_and(|p| p["merged"] == true));
        }
        SoakOp::UpdateRef => {
            let name = format!("heads/soak-{i}");
            forge.add_commit(&next, &[&head]);
            forge.set_ref(REPO, &name, &head);
            let path = format!("/repos/{REPO}/git/refs/{name}");
            queue("PATCH", &path);
            let out = client
                .update_ref(&repo, &name, &next, false, &opts())
                .expect("valid input");
            record(&mut d, &out);
            d.key = Some(format!("ref:{REPO}:{name}"));
            d.path = Some(("PATCH", path));
            d.holds = Some(forge.git_ref(REPO, &name).as_deref() == Some(next.as_str()));
        }
        SoakOp::UpdateCheckRun => {
            let id = forge.add_check_run(
                REPO,
                "sluice",
                &head,
                "in_progress",
                None,
                Some(&format!("soak-{i}")),
            );
            let path = format!("/repos/{REPO}/check-runs/{id}");
            queue("PATCH", &path);
            let update = CheckRunUpdate::new()
                .status("completed")
                .conclusion("success");
            let out = client
                .update_check_run(&repo, id, &update, &opts())
                .expect("valid input");
            record(&mut d, &out);
            d.key = Some(format!("check-run:{id}"));
            d.path = Some(("PATCH", path));
            d.holds = Some(
                forge
                    .check_run(REPO, id)
                    .is_some_and(|r| r["conclusion"] == "success"),
            );
        }
        SoakOp::GetPull => {
            let n = forge.add_pull(REPO, &format!("soak-{i}"), "main", &head);
            let path = format!("/repos/{REPO}/pulls/{n}");
            queue("GET", &path);
            let out = client.get_pull(&repo, n, &opts()).expect("valid input");
            record(&mut d, &out);
            if out.value.as_ref().is_some_and(|v: &Value| v["number"] != n) {
                d.kind = OutcomeKind::LocalError;
            }
        }
    }
    d.elapsed = t.elapsed();
    d
}

fn record<T>(d: &mut Done, out: &Outcome<T>) {
    d.kind = out.kind;
    d.may_have_applied = out.may_have_applied;
    d.verdict = out.reconciled.as_ref().and_then(|r| r.verdict);
    d.stopped = out.stopped.map(|s| s.as_str());
    d.attempts = out.attempts.len();
    // Every attempt but the last asked for a retry and got one; the last
    // asked too when the budget refused it.
    let asked = if d.stopped == Some(BUDGET_EMPTY) {
        out.attempts.len()
    } else {
        out.attempts.len().saturating_sub(1)
    };
    d.retried_after = out.attempts[..asked]
        .iter()
        .map(|a| {
            let cause: String = a.cause.as_deref().unwrap_or("").chars().take(48).collect();
            format!("{} {:?}: {cause}", a.phase, a.class)
        })
        .collect();
    let attempts: Vec<String> = out
        .attempts
        .iter()
        .map(|a| {
            format!(
                "#{} {} {:?}: {}",
                a.n,
                a.phase,
                a.class,
                a.cause.as_deref().unwrap_or("ok")
            )
        })
        .collect();
    d.story = format!(
        "stopped {:?} after {} ms; {}",
        out.stopped,
        out.elapsed_ms,
        attempts.join("; ")
    );
}

/// Check every operation against the fake's log and final state.
fn check(forge: &FakeForge, done: Vec<Done>) -> ForgeSoakReport {
    let mut r = ForgeSoakReport {
        ops: done.len(),
        ..Default::default()
    };
    let applied = forge.applied_writes();
    r.applied = applied.len();
    let mut applied_at: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for w in &applied {
        applied_at
            .entry(w.key.as_str())
            .or_default()
            .push(w.since_start);
    }
    let mut arrivals: BTreeMap<(String, String), Vec<Duration>> = BTreeMap::new();
    for e in forge
        .log()
        .into_iter()
        .filter(|e| e.event == Event::Arrival)
    {
        arrivals
            .entry((e.method, e.path))
            .or_default()
            .push(e.since_start);
    }
    for d in &done {
        *r.results
            .entry((format!("{:?}", d.op), d.kind.as_str().to_string()))
            .or_default() += 1;
        if let Some(f) = d.fault {
            *r.faults.entry(format!("{f:?}")).or_default() += 1;
        }
        if let Some(v) = d.verdict {
            *r.verdicts.entry(v.as_str().to_string()).or_default() += 1;
        }
        if let Some(s) = d.stopped {
            *r.stopped
                .entry((format!("{:?}", d.op), s.to_string()))
                .or_default() += 1;
        }
        r.retries += d.attempts.saturating_sub(1);
        if d.stopped == Some(BUDGET_EMPTY) {
            r.stopped_by_budget += 1;
        }
        for a in &d.retried_after {
            *r.retried_after.entry(a.clone()).or_default() += 1;
        }
        r.slowest = r.slowest.max(d.elapsed);
        check_one(d, &applied_at, &arrivals, &mut r);
    }
    r
}

fn check_one(
    d: &Done,
    applied_at: &BTreeMap<&str, Vec<Duration>>,
    arrivals: &BTreeMap<(String, String), Vec<Duration>>,
    r: &mut ForgeSoakReport,
) {
    let mut violation = |why: String| {
        r.violations
            .push(format!("{:?} ({:?}): {why} [{}]", d.op, d.fault, d.story))
    };
    let (Some(key), Some((method, path)), Some(holds)) = (&d.key, &d.path, d.holds) else {
        // A read is tried again whatever happened, unless the forge
        // answered (the 422 fault) or the host's retry budget, shared by
        // every thread, had no token for the retry: storm protection doing
        // its job, not a broken promise (an `unknown` read claims nothing).
        // `run` checks that the budget refused exactly that many retries.
        let answer = d.kind == OutcomeKind::Answered && d.fault == Some(SoakFault::Invalid422);
        let storm = d.kind == OutcomeKind::Unknown && d.stopped == Some(BUDGET_EMPTY);
        if d.kind != OutcomeKind::Succeeded && !answer && !storm {
            violation(format!("a read ended {}", d.kind.as_str()));
        }
        return;
    };
    let times = applied_at.get(key.as_str()).cloned().unwrap_or_default();
    if times.len() > 1 {
        r.applied_twice += 1;
        violation(format!("{key} applied {} times", times.len()));
    }
    if let Some(first) = times.first() {
        let later = arrivals
            .get(&(method.to_string(), path.clone()))
            .map(|a| a.iter().filter(|t| *t > first).count())
            .unwrap_or(0);
        if later > 0 {
            r.resent_after_applied += later;
            violation(format!("{key}: {later} write(s) sent after it was applied"));
        }
    }
    let mut mismatch = |why: String| {
        r.verdict_mismatches += 1;
        r.violations
            .push(format!("{:?} ({:?}): {why} [{}]", d.op, d.fault, d.story));
    };
    match (d.kind, d.verdict) {
        (OutcomeKind::Succeeded, _) if !holds => {
            mismatch(format!("succeeded, but {key} does not hold it"))
        }
        (OutcomeKind::Answered, _) if holds || d.may_have_applied != Some(false) => {
            mismatch(format!(
                "answered, but {key} holds it ({holds}) or may_have_applied is {:?}",
                d.may_have_applied
            ))
        }
        (OutcomeKind::Unknown, Some(Verdict::NotLanded)) if holds => {
            mismatch(format!("not-landed, but {key} holds it"))
        }
        // A merge at a moved head whose 409 was lost (answered 502, cut,
        // stalled) is settled as moved: the head is not the one checked.
        (OutcomeKind::Unknown, Some(Verdict::Moved)) if d.op == SoakOp::MergeMovedHead && holds => {
            mismatch(format!("moved, and {key} was merged"))
        }
        (OutcomeKind::Unknown, Some(Verdict::Moved)) if d.op == SoakOp::MergeMovedHead => {}
        (OutcomeKind::Unknown, Some(Verdict::Moved)) => {
            mismatch(format!("{key} moved, and only a moved head moves it"))
        }
        (OutcomeKind::Unknown, _) if d.may_have_applied != Some(true) && holds => mismatch(
            format!("unknown without may_have_applied, but {key} holds it"),
        ),
        (OutcomeKind::Rejected | OutcomeKind::LocalError, _) => {
            mismatch(format!("ended {}", d.kind.as_str()))
        }
        _ => {}
    }
}
