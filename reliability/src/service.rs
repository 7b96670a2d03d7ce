//! The service soak: one process, one [`Policy`], one [`GitClient`] and
//! repositories opened once, as a merge service runs all day — 8 threads
//! running a seeded mix of ls-refs, fetch and leased pushes over git://,
//! smart HTTP, https and ssh at once, with faults at every phase, a slow and
//! sometimes declining pre-receive hook, cancels raised mid-operation and
//! `git gc` on the client repositories — then every verdict checked against
//! the server.
//!
//! # Set-up
//!
//! One served bare repository (`core.logAllRefUpdates=true`,
//! `http.receivepack=true`) with `main`, one branch per thread
//! (`refs/heads/t<i>`) and `refs/heads/shared`, served three ways: a `git
//! daemon`, `git http-backend` behind lighttpd, and sshd. Each thread has a
//! [`FaultProxy`] in git mode before the daemon, one in http mode before
//! lighttpd and one in https mode before the same lighttpd (so each
//! proxy's log is one thread's sequential conversation), and an ssh fault
//! plan read by the `ssh-fault` relay that
//! `GIT_SSH_COMMAND` names ([`crate::sshfault`]; its path is
//! `ssh/t<i>/soak.git`, a symlink to the served repository, which tells the
//! relay the thread).
//!
//! https is the https-mode [`FaultProxy`] ([`FaultProxy::https`]): it
//! ends the client's TLS itself, presenting a server certificate from a
//! [`TestPki`] made for the run, and speaks plain HTTP to lighttpd; the
//! one client trusts that run's CA (`HttpsConfig::with_ca_file`). So the
//! http faults act on https requests at the same points (a cut is a TLS
//! connection closed without close_notify), and an https push's class
//! history is checked against that proxy's log exactly as an http push's.
//!
//! Each thread opens two repositories once and keeps
//! them for the whole run: one to push from (borrowing the server's objects
//! through `objects/info/alternates`, so a commit can be made on any value
//! read) and one to fetch into.
//!
//! The pre-receive hook logs every pack it is given (`recv <old> <new>
//! <ref>`: one line per pack that reached the server whole), sleeps when
//! the pushed commit's subject says `[slow:N]` (saying so first on
//! side-band 2), and declines when it says `[decline]`. It also leaves a
//! watcher holding a shared lock on `hooks.lock` until its receive-pack
//! exits, so the checks can wait, on that event, for every receive-pack
//! that got a pack to have finished.
//!
//! # One operation of the mix
//!
//! The transport turns round with the operation number; the operation is
//! ls-refs of every ref (20%), a fetch of `+refs/heads/*:refs/remotes/
//! origin/*` (25%), or a leased push (55%: own branch 30%, shared 25%): the
//! destination is read (ls-refs, `lease-read`), a unique commit made on the
//! value read, and pushed with that value as its lease. Before each client
//! call, with probability `fault_rate`, a fault that applies to the call
//! and the transport is planned for its next connection (or two). With
//! probability `cancel_rate` the call's cancel flag is raised mid-way: when
//! its pack has been sent (push), when the slow hook says it started (push,
//! after the pack), or at a random moment. Every `gc_every` operations the
//! thread runs `git gc` on its two repositories, handles open (with
//! `gc_only_thread_0`, thread 0 only: the other threads' repositories are
//! left to the library's maintenance after each fetch, and thread 0's show
//! `git gc` beside it).
//!
//! A time-driven run (`duration`) runs operations until the time is up and
//! samples the process every minute: the RSS slope after the first ten
//! minutes ([`rss_slope`]) and the packs left in each fetch repository are
//! printed with the rest. That slope is the whole process's: the soak keeps
//! a record of every connection, request and push for its checks, so it
//! grows with the operations by design. What the library holds is read at
//! the end with freed memory handed back ([`crate::mem::release_freed`]):
//! with its client dropped, and with the records dropped too; the memory
//! check judges those readings.
//!
//! Coverage by construction: whether a fault planned at random acts
//! depends on timing (a push whose lease read failed sends nothing; an
//! attempt cut by its timeout before the advertisement never reaches a
//! cut after the pack), so at high load a named fault could go unseen.
//! Each thread therefore owes one cut after a complete push (per
//! transport, every transport owed by some thread): it is planned on the
//! thread's pushes over that transport until it acted, and the thread's
//! last operations pay what the mix did not, under bounds no load
//! exhausts, a few tries at most.
//!
//! # What is checked
//!
//! * a push reported `succeeded` is on the server exactly once; one reported
//!   `answered` / `rejected`, or `unknown` with `may_have_applied: false`,
//!   is not on it; no update replaced a value other than its lease;
//! * never a second pack for one operation: the hook saw each pushed commit
//!   at most once;
//! * every fetch's reported refs are what is on disk after it;
//! * the class history of every push agrees with the proxy's (or the
//!   relay's) log: an attempt classed `unknown` delivered its whole pack, an
//!   attempt that delivered its whole pack and got no answer is `unknown`
//!   (never `unjudged`, which would send the pack again), and a fault that
//!   fired gives the design's phase and class;
//! * every call ended within its deadline + 1 s;
//! * steady state: open descriptors, threads and resident memory, sampled
//!   through the run, do not grow with the number of operations.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use sluice_git::{CallOptions, GitClient, HttpsConfig, PushOptions, RefUpdate};
use sluice_policy::{
    BackoffShape, Bounds, CancelFlag, Class, Outcome, OutcomeKind, Policy, RetryBudget,
};
use sluice_testkit::proxy::HttpExchange;
use sluice_testkit::repo;
use sluice_testkit::{
    ConnectionRecord, Fault, FaultProxy, GitDaemon, HttpBackend, Point, RepoBuilder, ServerCert,
    Service, Sshd, TestPki,
};

use crate::soak::{add_counts, borrowing_repo, fault_name, unique_commit};
use crate::sshfault::{self, SshConn, SshFault};
use crate::Rng;

/// The figures of one service soak.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Threads sharing the client.
    pub threads: usize,
    /// Operations per transport over the whole run (four transports).
    pub ops_per_transport: usize,
    /// The probability that a client call gets a fault on its next
    /// connection (or two): calls open more than one connection or request
    /// (settling reads, HTTP's GET and POST), so 0.35 of calls is about 20%
    /// of connections.
    pub fault_rate: f64,
    /// The probability that a call's cancel flag is raised mid-way.
    pub cancel_rate: f64,
    /// The probability that a pushed commit asks the hook to be slow.
    pub slow_rate: f64,
    /// The probability that a pushed commit asks the hook to decline.
    pub decline_rate: f64,
    /// Operations of a thread between two `git gc` of its repositories.
    pub gc_every: usize,
    /// Time-driven: every thread runs operations until this long has
    /// passed since the start (`ops_per_transport` is then not read), and
    /// the process is sampled every minute.
    pub duration: Option<Duration>,
    /// Only thread 0 runs `git gc` (every `gc_every` operations) on its
    /// repositories; the others are left to the library's maintenance
    /// (consolidation after a fetch), so both are seen side by side.
    pub gc_only_thread_0: bool,
    /// The seed (thread `i` uses a generator from `seed` and `i`).
    pub seed: u64,
    /// The bounds of every client call.
    pub bounds: Bounds,
    /// The client's per-host retry budget.
    pub retry_budget: RetryBudget,
    /// The `ssh-fault` relay binary.
    pub ssh_fault: PathBuf,
    /// Slack allowed between the quiescent start and end samples, and
    /// between the two halves of the run: descriptors, threads, KiB.
    pub slack: (u64, u64, u64),
}

impl ServiceConfig {
    /// The CI size: 8 threads, 45 operations per transport (180 in all, as
    /// when there were three transports of 60), 35% of calls
    /// faulted (about 20% of connections), 5% cancelled, 10% slow hooks, 4% declined, gc every 10
    /// operations; 12 s deadline, 2 s attempts, 4 attempts.
    pub fn ci(ssh_fault: PathBuf) -> ServiceConfig {
        ServiceConfig {
            threads: 8,
            ops_per_transport: 45,
            fault_rate: 0.35,
            cancel_rate: 0.05,
            slow_rate: 0.1,
            decline_rate: 0.04,
            gc_every: 10,
            duration: None,
            gc_only_thread_0: false,
            seed: 0x5e41_2026,
            bounds: Bounds::new(Duration::from_secs(12), Duration::from_secs(2), 4)
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
            ssh_fault,
            slack: (32, 16, 64 * 1024),
        }
    }
}

/// A transport of the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    /// git:// through the git-mode proxy to `git daemon`.
    Git,
    /// Smart HTTP through the http-mode proxy to http-backend.
    Http,
    /// ssh through the `ssh-fault` relay to sshd.
    Ssh,
    /// Smart HTTP over TLS: the https-mode proxy (which ends TLS) to the
    /// same http-backend.
    Https,
}

impl Transport {
    const ALL: [Transport; 4] = [
        Transport::Git,
        Transport::Http,
        Transport::Ssh,
        Transport::Https,
    ];

    /// The name printed.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Git => "git",
            Transport::Http => "http",
            Transport::Ssh => "ssh",
            Transport::Https => "https",
        }
    }
}

/// What kind of client call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    LsRefs,
    Fetch,
    LeaseRead,
    Push,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Call::LsRefs => "ls-refs",
            Call::Fetch => "fetch",
            Call::LeaseRead => "lease-read",
            Call::Push => "push",
        }
    }

    fn is_push(self) -> bool {
        self == Call::Push
    }
}

/// When a call's cancel flag is raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CancelAt {
    /// When the push's pack has been sent (its progress says `sent`).
    PackSent,
    /// When the slow hook says it started (after the pack).
    HookWords,
    /// After a random delay.
    After(Duration),
}

/// One sample of the process's resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Operations finished when taken.
    pub ops: usize,
    /// Open file descriptors.
    pub fds: u64,
    /// Threads.
    pub threads: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
}

impl Sample {
    /// The process now.
    pub fn take(ops: usize) -> Sample {
        let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        let threads = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Threads:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0);
        Sample {
            ops,
            fds,
            threads,
            rss_kib: crate::mem::rss_kib(),
        }
    }
}

impl fmt::Display for Sample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} fds, {} threads, {:.1} MiB RSS",
            self.fds,
            self.threads,
            self.rss_kib as f64 / 1024.0
        )
    }
}

/// One push as the client reported it.
#[derive(Debug, Clone)]
struct PushRecord {
    transport: Transport,
    thread: usize,
    op: usize,
    dst: String,
    commit: String,
    lease: String,
    declined: bool,
    kind: OutcomeKind,
    may_have_applied: Option<bool>,
    attempts: Vec<(String, Option<Class>)>,
    cancelled: bool,
    /// git: connection range in the thread's git proxy log; ssh: in the
    /// relay's log.
    conns: std::ops::Range<usize>,
    /// http: the requests of this push (connection id, request index).
    requests: Vec<(u64, usize)>,
    error: Option<String>,
}

/// The result of a service soak.
#[derive(Debug, Clone, Default)]
pub struct ServiceReport {
    /// Threads.
    pub threads: usize,
    /// Operations of the mix, by transport.
    pub ops: BTreeMap<&'static str, usize>,
    /// Client calls, by transport and kind.
    pub calls: BTreeMap<(&'static str, &'static str), usize>,
    /// Outcomes by kind of call and result.
    pub outcomes: BTreeMap<(&'static str, &'static str), usize>,
    /// Faults that acted, by name.
    pub faults: BTreeMap<&'static str, usize>,
    /// Connections (git, ssh) and HTTP requests seen.
    pub connections: usize,
    /// Why calls that did not succeed stopped, by reason.
    pub stopped: BTreeMap<&'static str, usize>,
    /// Cancels raised, by when.
    pub cancels: BTreeMap<&'static str, usize>,
    /// Writes with an unknown attempt, by how they were settled.
    pub settled: BTreeMap<&'static str, usize>,
    /// Attempts beyond the first.
    pub retries: usize,
    /// Pushes reported landed and found once on the server.
    pub landed: usize,
    /// Pushes answered or rejected.
    pub answered: usize,
    /// Unknown pushes found on / off the server.
    pub unknown_on: usize,
    /// See `unknown_on`.
    pub unknown_off: usize,
    /// Packs the hook saw (one per push that delivered a whole pack).
    pub packs_received: usize,
    /// Commits the hook saw more than once (each a violation).
    pub second_packs: usize,
    /// Fetches checked against the disk.
    pub fetches_checked: usize,
    /// `git gc` runs on client repositories.
    pub gcs: usize,
    /// Distinct packs seen in the fetch repository that saw the most,
    /// over its one open handle.
    pub packs_longest_lived: usize,
    /// The longest call.
    pub longest_call: Duration,
    /// Quiescent samples after warm-up and at the end.
    pub start: Sample,
    /// See `start`.
    pub end: Sample,
    /// Samples through the run.
    pub samples: Vec<Sample>,
    /// Resident KiB with freed memory handed back to the kernel
    /// ([`crate::mem::release_freed`]) right after the start sample, and
    /// right after the end sample (everything still held); 0 when not taken.
    pub rss_released_kib: (u64, u64),
    /// Resident KiB once the library's client is dropped and freed memory
    /// is handed back to the kernel ([`crate::mem::release_freed`]), the
    /// harness's own records still held; 0 when not taken.
    pub rss_without_library_kib: u64,
    /// Resident KiB once the harness's records (every connection, request
    /// and push it logged, for the checks) are dropped as well; 0 when not
    /// taken.
    pub rss_without_records_kib: u64,
    /// A time-driven run: the process sampled every minute (time since the
    /// start, the sample).
    pub minutes: Vec<(Duration, Sample)>,
    /// Packs in each thread's fetch repository at the end (`.pack` files).
    pub packs_at_end: Vec<usize>,
    /// Wall time.
    pub elapsed: Duration,
    /// Every broken promise, in words.
    pub violations: Vec<String>,
}

/// The RSS slope (MiB per hour, least squares) of the minute samples after
/// the first ten minutes (warm-up: caches filling), or, in a run shorter
/// than that, after the first minute: the minute it starts from and the
/// slope. `None` with fewer than three samples there.
pub fn rss_slope(minutes: &[(Duration, Sample)]) -> Option<(u64, f64)> {
    let after = |m: u64| -> Vec<(f64, f64)> {
        minutes
            .iter()
            .filter(|(at, _)| at.as_secs() >= m * 60)
            .map(|(at, x)| (at.as_secs_f64() / 3600.0, x.rss_kib as f64 / 1024.0))
            .collect()
    };
    let (from, pts) = [10, 1]
        .into_iter()
        .map(|m| (m, after(m)))
        .find(|(_, p)| p.len() >= 3)?;
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| (from, sxy / sxx))
}

fn line<K: fmt::Display>(m: &BTreeMap<K, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for ServiceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "service soak: {} threads, {} operations ({}), {} client calls, {:.1} s",
            self.threads,
            self.ops.values().sum::<usize>(),
            line(&self.ops),
            self.calls.values().sum::<usize>(),
            self.elapsed.as_secs_f64()
        )?;
        let faulted: usize = self.faults.values().sum();
        writeln!(
            f,
            "  faults: {faulted} of {} connections/requests ({:.1}%): {}",
            self.connections,
            100.0 * faulted as f64 / self.connections.max(1) as f64,
            line(&self.faults)
        )?;
        let mut by_kind: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
        for ((k, o), n) in &self.outcomes {
            by_kind.entry(k).or_default().insert(o, *n);
        }
        for (k, v) in by_kind {
            writeln!(f, "  outcomes {k}: {}", line(&v))?;
        }
        writeln!(f, "  stopped: {}", line(&self.stopped))?;
        writeln!(f, "  cancels: {}", line(&self.cancels))?;
        writeln!(f, "  unknown writes settled: {}", line(&self.settled))?;
        writeln!(f, "  retries: {}", self.retries)?;
        writeln!(
            f,
            "  pushes: landed {}, answered {}, unknown {} (on the server {}, off {})",
            self.landed,
            self.answered,
            self.unknown_on + self.unknown_off,
            self.unknown_on,
            self.unknown_off
        )?;
        writeln!(
            f,
            "  packs received by the hook {}, second packs {}; fetches checked against the disk {}",
            self.packs_received, self.second_packs, self.fetches_checked
        )?;
        writeln!(
            f,
            "  git gc runs {}; packs in the longest-lived repository {}",
            self.gcs, self.packs_longest_lived
        )?;
        writeln!(f, "  start: {}", self.start)?;
        writeln!(f, "  end:   {}", self.end)?;
        if self.rss_without_library_kib > 0 {
            let mib = |k: u64| k as f64 / 1024.0;
            writeln!(
                f,
                "  RSS with freed memory returned: {:.1} MiB at the start, {:.1} MiB at the end, {:.1} MiB with the library's client dropped, {:.1} MiB with the harness's records dropped too",
                mib(self.rss_released_kib.0),
                mib(self.rss_released_kib.1),
                mib(self.rss_without_library_kib),
                mib(self.rss_without_records_kib)
            )?;
        }
        let max = |g: fn(&Sample) -> u64| self.samples.iter().map(g).max().unwrap_or(0);
        writeln!(
            f,
            "  through the run ({} samples): at most {} fds, {} threads, {:.1} MiB RSS",
            self.samples.len(),
            max(|s| s.fds),
            max(|s| s.threads),
            max(|s| s.rss_kib) as f64 / 1024.0
        )?;
        if !self.minutes.is_empty() {
            writeln!(f, "  every minute (time: fds, threads, RSS):")?;
            for (at, x) in &self.minutes {
                writeln!(f, "    {:>6.1} min: {x}", at.as_secs_f64() / 60.0)?;
            }
            match rss_slope(&self.minutes) {
                Some((from, slope)) => writeln!(
                    f,
                    "  RSS slope from minute {from} on: {slope:+.2} MiB/hour (least squares)"
                )?,
                None => writeln!(f, "  RSS slope: too few minute samples")?,
            }
        }
        if !self.packs_at_end.is_empty() {
            writeln!(
                f,
                "  packs in each fetch repository at the end: {:?}",
                self.packs_at_end
            )?;
        }
        writeln!(f, "  longest call: {} ms", self.longest_call.as_millis())?;
        writeln!(f, "  violations = {}", self.violations.len())?;
        for v in self.violations.iter().take(30) {
            writeln!(f, "  VIOLATION: {v}")?;
        }
        Ok(())
    }
}

const HOOK: &str = r#"#!/bin/sh
# The service soak's pre-receive hook: log each pack, be slow or decline
# when the pushed commit asks, and hold hooks.lock until receive-pack exits.
dir="$SOAK_DIR"
exec 9>>"$dir/hooks.lock"
flock -s 9
tail --pid="$PPID" -f /dev/null </dev/null >/dev/null 2>&1 &
exec 9>&-
status=0
while read old new ref; do
  echo "recv $old $new $ref" >>"$dir/hook.log"
  subject=$(git log -1 --format=%s "$new" 2>/dev/null)
  case "$subject" in
    *"[slow:"*)
      secs=${subject#*\[slow:}; secs=${secs%%\]*}
      echo "soak-hook: slow for ${secs}s" >&2
      sleep "$secs" ;;
  esac
  case "$subject" in
    *"[decline]"*) echo "soak-hook: declined" >&2; status=1 ;;
  esac
done
exit $status
"#;

struct Servers {
    dir: tempfile::TempDir,
    srv: PathBuf,
    daemon: GitDaemon,
    http: HttpBackend,
    sshd: Sshd,
    ctl: PathBuf,
    /// The run's CA and the https proxies' server certificate.
    pki: TestPki,
}

fn serve(threads: usize) -> Servers {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("tempdir path");
    let srv = RepoBuilder::new()
        .branch("main", 3)
        .build(&root.join("srv").join("soak.git"))
        .expect("served repository builds");
    repo::set_config(&srv, "core.logAllRefUpdates", "true");
    repo::set_config(&srv, "http.receivepack", "true");
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    for b in branches(threads) {
        repo::git(&srv, &["update-ref", "-m", "soak-init", &b, &main]);
    }
    // The hook finds the soak's directory in its script (receive-pack
    // runs it with a cleared environment under http-backend and sshd).
    let hook = HOOK.replace(
        "dir=\"$SOAK_DIR\"",
        &format!("dir='{}'", root.display().to_string().replace('\'', "")),
    );
    repo::install_hook(&srv, "pre-receive", &hook).expect("hook");
    std::fs::write(root.join("hook.log"), "").expect("hook log");
    for t in 0..threads {
        let d = root.join("ssh").join(format!("t{t}"));
        std::fs::create_dir_all(&d).expect("ssh dir");
        std::os::unix::fs::symlink(&srv, d.join("soak.git")).expect("symlink");
    }
    let ctl = root.join("ssh-ctl");
    std::fs::create_dir_all(&ctl).expect("ctl dir");
    let daemon = GitDaemon::start(&root.join("srv")).expect("git daemon starts");
    let http = HttpBackend::start(&root.join("srv")).expect("lighttpd starts");
    let sshd = Sshd::start().expect("sshd starts");
    let pki = TestPki::new().expect("the run's CA and certificates");
    Servers {
        dir,
        srv,
        daemon,
        http,
        sshd,
        ctl,
        pki,
    }
}

fn branches(threads: usize) -> Vec<String> {
    let mut b: Vec<String> = (0..threads).map(|t| format!("refs/heads/t{t}")).collect();
    b.push("refs/heads/shared".into());
    b
}

/// A thread's faults: its three proxies and its ssh plan.
struct Faults<'a> {
    thread: usize,
    git: &'a FaultProxy,
    http: &'a FaultProxy,
    https: &'a FaultProxy,
    ctl: &'a Path,
}

impl Faults<'_> {
    /// The proxy an HTTP transport's requests go through (http or https).
    fn web(&self, t: Transport) -> &FaultProxy {
        if t == Transport::Https {
            self.https
        } else {
            self.http
        }
    }

    fn plan(&self, t: Transport, call: Call, rng: &mut Rng, rate: f64) {
        self.clear();
        if !rng.chance(rate) {
            return;
        }
        let times = if rng.chance(0.25) { 2 } else { 1 };
        match t {
            Transport::Git => {
                let mut all = vec![
                    Fault::Refuse,
                    Fault::ResetBeforeAdvert,
                    Fault::StallBeforeAdvert,
                    Fault::TrickleAdvert {
                        every: Duration::from_millis(1),
                    },
                    Fault::CutAfterAdvert,
                ];
                match call {
                    Call::Fetch => all.extend([Fault::CutInFetchPack, Fault::CutInFetchPack]),
                    Call::Push => all.extend([
                        Fault::CutInPushPack,
                        Fault::CutBeforeReport,
                        Fault::CutBeforeReport,
                        Fault::StallBeforeReport,
                    ]),
                    _ => all.push(Fault::CutBeforeReport),
                }
                self.git.set_fault(all[rng.below(all.len())].clone(), times);
            }
            Transport::Http | Transport::Https => {
                let all = if call.is_push() {
                    vec![
                        Fault::http_status(503, "service=git-receive-pack"),
                        Fault::http_cut_response("service=git-receive-pack"),
                        Fault::http_status(503, "/git-receive-pack"),
                        Fault::http_status(500, "/git-receive-pack"),
                        Fault::http_cut_response("/git-receive-pack"),
                        Fault::http_cut_response("/git-receive-pack"),
                    ]
                } else {
                    vec![
                        Fault::http_status(503, "service=git-upload-pack"),
                        Fault::http_cut_response("service=git-upload-pack"),
                        Fault::http_status(502, "/git-upload-pack"),
                        Fault::http_cut_response("/git-upload-pack"),
                    ]
                };
                self.web(t)
                    .set_fault(all[rng.below(all.len())].clone(), times);
            }
            Transport::Ssh => {
                let mut all = vec![
                    SshFault::Refuse,
                    SshFault::StallBeforeAdvert,
                    SshFault::CutAfterAdvert,
                    SshFault::CutBeforeReport,
                ];
                if call.is_push() {
                    all.extend([SshFault::CutInPushPack, SshFault::CutBeforeReport]);
                }
                let f = all[rng.below(all.len())];
                sshfault::set_plan(self.ctl, self.thread, Some((f, times))).expect("ssh plan");
            }
        }
    }

    /// Plans the coverage check's fault for `t` ([`owed_by`]) on the next
    /// connection (or request) alone.
    fn plan_owed(&self, t: Transport) {
        self.clear();
        match t {
            Transport::Git => self.git.set_fault(Fault::CutBeforeReport, 1),
            Transport::Http | Transport::Https => self
                .web(t)
                .set_fault(Fault::http_cut_response("/git-receive-pack"), 1),
            Transport::Ssh => {
                sshfault::set_plan(self.ctl, self.thread, Some((SshFault::CutBeforeReport, 1)))
                    .expect("ssh plan")
            }
        }
    }

    fn clear(&self) {
        self.git.clear_fault();
        self.http.clear_fault();
        self.https.clear_fault();
        sshfault::set_plan(self.ctl, self.thread, None).expect("ssh plan");
    }
}

/// Where a thread's next connections will be logged: the positions it
/// compares before and after a push.
fn http_counts(p: &FaultProxy) -> HashMap<u64, usize> {
    p.connections()
        .iter()
        .map(|c| (c.id, c.http_requests.len()))
        .collect()
}

#[derive(Default)]
struct ThreadLog {
    ops: BTreeMap<&'static str, usize>,
    calls: BTreeMap<(&'static str, &'static str), usize>,
    outcomes: BTreeMap<(&'static str, &'static str), usize>,
    cancels: BTreeMap<&'static str, usize>,
    settled: BTreeMap<&'static str, usize>,
    stopped: BTreeMap<&'static str, usize>,
    retries: usize,
    longest: Duration,
    pushes: Vec<PushRecord>,
    violations: Vec<String>,
    fetches_checked: usize,
    gcs: usize,
    packs_seen: usize,
}

impl ThreadLog {
    fn note<T>(
        &mut self,
        t: Transport,
        call: Call,
        out: &Outcome<T>,
        took: Duration,
        dl: Duration,
    ) {
        *self.calls.entry((t.name(), call.name())).or_default() += 1;
        *self
            .outcomes
            .entry((call.name(), out.kind.as_str()))
            .or_default() += 1;
        if out.attempts.iter().any(|a| a.class == Some(Class::Unknown)) && call.is_push() {
            let how = match (&out.reconciled, out.kind) {
                (Some(r), _) => r.verdict.map_or("unsettled", |v| v.as_str()),
                (None, OutcomeKind::Unknown) => "unsettled",
                (None, _) => "not-read",
            };
            *self.settled.entry(how).or_default() += 1;
        }
        if let Some(st) = out.stopped {
            *self.stopped.entry(st.as_str()).or_default() += 1;
        }
        self.retries += out.attempts.len().saturating_sub(1);
        self.longest = self.longest.max(took);
        if took > dl + Duration::from_secs(1) {
            self.violations.push(format!(
                "{} {} took {} ms, deadline {} ms",
                t.name(),
                call.name(),
                took.as_millis(),
                dl.as_millis()
            ));
        }
    }
}

/// Everything a thread works with.
struct Ctx<'a> {
    cfg: &'a ServiceConfig,
    client: &'a GitClient,
    faults: Faults<'a>,
    urls: [String; 4],
    local: &'a Path,
    fetch_into: &'a Path,
    done: &'a AtomicUsize,
    samples: &'a Mutex<Vec<Sample>>,
    sample_every: usize,
    /// A time-driven run's end.
    until: Option<Instant>,
}

/// Runs `f` with a fresh cancel flag, raised as `at` says; returns what `f`
/// returned and whether the flag was raised.
fn with_cancel<R>(
    opts: &CallOptions,
    at: Option<CancelAt>,
    f: impl FnOnce(&CallOptions) -> R,
) -> (R, bool) {
    let flag = CancelFlag::new();
    let mut opts = opts.clone().cancel(&flag);
    match at {
        None => (f(&opts), false),
        Some(CancelAt::PackSent) | Some(CancelAt::HookWords) => {
            let hook = at == Some(CancelAt::HookWords);
            let raise = flag.clone();
            opts = opts.progress(Arc::new(move |p: &sluice_git::Progress| {
                if (hook && p.stage.starts_with("soak-hook")) || (!hook && p.stage == "sent") {
                    raise.cancel();
                }
            }));
            let r = f(&opts);
            (r, flag.is_cancelled())
        }
        Some(CancelAt::After(delay)) => {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            std::thread::scope(|s| {
                let raise = flag.clone();
                // The call's end (the sender dropped) stops the timer.
                s.spawn(move || {
                    if rx.recv_timeout(delay) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                        raise.cancel();
                    }
                });
                let r = f(&opts);
                drop(tx);
                (r, flag.is_cancelled())
            })
        }
    }
}

fn cancel_name(at: CancelAt) -> &'static str {
    match at {
        CancelAt::PackSent => "after-pack-sent",
        CancelAt::HookWords => "while-hook-runs",
        CancelAt::After(_) => "at-random",
    }
}

fn run_thread(t: usize, cx: &Ctx<'_>, warm: &Barrier, ops: usize, warmup: usize) -> ThreadLog {
    let cfg = cx.cfg;
    let mut rng = Rng::new(cfg.seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let base = CallOptions::new().bounds(cfg.bounds);
    let dl = cfg.bounds.deadline;
    // Opened once, kept for the whole run.
    let local_repo = gix::open(cx.local).expect("open the push repository");
    let fetch_repo = gix::open(cx.fetch_into).expect("open the fetch repository");
    let mut log = ThreadLog::default();
    let mut packs: HashSet<std::ffi::OsString> = HashSet::new();
    let own = format!("refs/heads/t{t}");
    let mut owed = owed_by(t, cfg.threads);
    for op in 0..ops {
        if op == warmup {
            warm.wait(); // the main thread samples the quiescent start
            warm.wait();
        }
        if op > warmup && cx.until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
        let tr = Transport::ALL[(op + t) % Transport::ALL.len()];
        let url = &cx.urls[tr as usize];
        *log.ops.entry(tr.name()).or_default() += 1;
        let pick = rng.unit();
        let cancel = if rng.chance(cfg.cancel_rate) {
            Some(CancelAt::After(
                Duration::from_millis(rng.below(300) as u64),
            ))
        } else {
            None
        };
        if pick < 0.45 {
            let call = if pick < 0.2 {
                Call::LsRefs
            } else {
                Call::Fetch
            };
            cx.faults.plan(tr, call, &mut rng, cfg.fault_rate);
            let start = Instant::now();
            if call == Call::LsRefs {
                let (out, raised) = with_cancel(&base, cancel, |o| cx.client.ls_refs(url, &[], o));
                let out = out.expect("valid input");
                if raised {
                    *log.cancels.entry("at-random").or_default() += 1;
                }
                log.note(tr, call, &out, start.elapsed(), dl);
            } else {
                let spec = ["+refs/heads/*:refs/remotes/origin/*".to_string()];
                let (out, raised) = with_cancel(&base, cancel, |o| {
                    cx.client.fetch(url, &spec, &fetch_repo, o)
                });
                let out = out.expect("valid input");
                if raised {
                    *log.cancels.entry("at-random").or_default() += 1;
                }
                log.note(tr, call, &out, start.elapsed(), dl);
                check_fetch(t, op, tr, &out, cx.fetch_into, &mut log);
                if let Ok(d) = std::fs::read_dir(cx.fetch_into.join("objects/pack")) {
                    packs.extend(
                        d.filter_map(Result::ok)
                            .map(|e| e.file_name())
                            .filter(|n| n.to_string_lossy().ends_with(".pack")),
                    );
                }
            }
        } else {
            let dst = if pick < 0.75 {
                own.clone()
            } else {
                "refs/heads/shared".to_string()
            };
            let owes = owed.contains(&tr);
            let acted = push_op(
                cx,
                &mut log,
                &mut rng,
                PushPlan {
                    t,
                    op,
                    tr,
                    dst,
                    cancel,
                    owed: owes,
                    base: &base,
                },
                &local_repo,
            );
            if acted {
                owed.retain(|x| *x != tr);
            }
        }
        cx.faults.clear();
        let gc_here = !cfg.gc_only_thread_0 || t == 0;
        if gc_here && cfg.gc_every > 0 && op % cfg.gc_every == cfg.gc_every - 1 {
            let args: &[&str] = if (op / cfg.gc_every).is_multiple_of(2) {
                &["gc", "--quiet"]
            } else {
                &["gc", "--quiet", "--prune=now"]
            };
            repo::git(cx.local, args);
            repo::git(cx.fetch_into, args);
            log.gcs += 2;
        }
        let n = cx.done.fetch_add(1, Ordering::SeqCst) + 1;
        if n.is_multiple_of(cx.sample_every) {
            cx.samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Sample::take(n));
        }
    }
    // What this thread owes the coverage check and the mix did not pay:
    // pushes with the fault planned, under bounds no load can exhaust
    // before the fault's point, until it acted (a few tries; more would
    // mean the fault cannot act, which the check then reports).
    let generous = CallOptions::new().bounds(
        Bounds::new(Duration::from_secs(120), Duration::from_secs(60), 4)
            .with_backoff(cfg.bounds.backoff)
            .with_reconcile_reserve(Duration::from_secs(5)),
    );
    for (k, tr) in std::mem::take(&mut owed).into_iter().enumerate() {
        for try_n in 0..COVER_TRIES {
            cx.faults.clear();
            let acted = push_op(
                cx,
                &mut log,
                &mut rng,
                PushPlan {
                    t,
                    op: ops + k * COVER_TRIES + try_n,
                    tr,
                    dst: own.clone(),
                    cancel: None,
                    owed: true,
                    base: &generous,
                },
                &local_repo,
            );
            *log.ops.entry(tr.name()).or_default() += 1;
            if acted {
                break;
            }
        }
    }
    cx.faults.clear();
    log.packs_seen = packs.len();
    log
}

/// How many pushes the tail of a thread tries to make an owed fault act.
const COVER_TRIES: usize = 5;

/// The faults the coverage check names, one per transport: a cut after a
/// push's request was complete (`cut-before-report`,
/// `ssh-cut-before-report`, `http-cut-response-after-body`,
/// `https-cut-response-after-body`). Whether a
/// randomly planned fault acts depends on timing (a push whose lease read
/// failed sends nothing; an attempt cut by its timeout before the
/// advertisement never reaches the fault's point), so each thread owes one
/// of them ([`owed_by`]): planned on its pushes over that transport until
/// it acted, and paid at the thread's end if the mix did not.
fn owed_by(t: usize, threads: usize) -> Vec<Transport> {
    Transport::ALL
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % threads.max(1) == t % threads.max(1) || *i == t % Transport::ALL.len())
        .map(|(_, tr)| tr)
        .collect()
}

/// One push of the mix: its lease read, then the push, recorded for the
/// checker.
struct PushPlan<'b> {
    t: usize,
    op: usize,
    tr: Transport,
    dst: String,
    cancel: Option<CancelAt>,
    /// Plan the thread's owed fault instead of a random one.
    owed: bool,
    base: &'b CallOptions,
}

/// Runs `plan`; true when it was given the owed fault and it acted.
fn push_op(
    cx: &Ctx<'_>,
    log: &mut ThreadLog,
    rng: &mut Rng,
    plan: PushPlan<'_>,
    local_repo: &gix::Repository,
) -> bool {
    let cfg = cx.cfg;
    let PushPlan {
        t,
        op,
        tr,
        dst,
        cancel,
        owed,
        base,
    } = plan;
    let dl = base.given_bounds().unwrap_or_default().deadline;
    let url = &cx.urls[tr as usize];
    cx.faults.plan(
        tr,
        Call::LeaseRead,
        rng,
        if owed { 0.0 } else { cfg.fault_rate },
    );
    let start = Instant::now();
    let read = cx
        .client
        .ls_refs(url, std::slice::from_ref(&dst), base)
        .expect("valid input");
    log.note(tr, Call::LeaseRead, &read, start.elapsed(), dl);
    let lease = read
        .value
        .as_ref()
        .and_then(|refs| refs.iter().find(|r| r.name == dst))
        .and_then(|r| r.oid);
    let Some(lease) = lease else { return false };
    let cancel = cancel.map(|c| match rng.below(3) {
        0 => CancelAt::PackSent,
        1 => CancelAt::HookWords,
        _ => c,
    });
    let slow = if cancel == Some(CancelAt::HookWords) || rng.chance(cfg.slow_rate) {
        1 + rng.below(3)
    } else {
        0
    };
    let declined = rng.chance(cfg.decline_rate);
    let mut subject = format!("soak t{t} op{op} {} {dst}", tr.name());
    if slow > 0 {
        subject.push_str(&format!(" [slow:{slow}]"));
    }
    if declined {
        subject.push_str(" [decline]");
    }
    let lease = lease.to_string();
    let commit = unique_commit(cx.local, &lease, &subject);
    let update = RefUpdate::leased(
        gix::ObjectId::from_hex(commit.as_bytes()).expect("hex"),
        dst.clone(),
        gix::ObjectId::from_hex(lease.as_bytes()).expect("hex"),
    );
    if owed {
        cx.faults.plan_owed(tr);
    } else {
        cx.faults.plan(tr, Call::Push, rng, cfg.fault_rate);
    }
    let git_before = cx.faults.git.connections().len();
    let ssh_before = sshfault::read_log(cx.faults.ctl, t).len();
    let http_before = http_counts(cx.faults.web(tr));
    let start = Instant::now();
    let (out, raised) = with_cancel(base, cancel, |o| {
        cx.client
            .push(url, &[update], &PushOptions::default(), local_repo, o)
    });
    let out = out.expect("valid input");
    let took = start.elapsed();
    if raised {
        *log.cancels
            .entry(cancel_name(cancel.expect("a cancel was planned")))
            .or_default() += 1;
    }
    log.note(tr, Call::Push, &out, took, dl);
    let conns = match tr {
        Transport::Git => git_before..cx.faults.git.connections().len(),
        Transport::Ssh => ssh_before..sshfault::read_log(cx.faults.ctl, t).len(),
        Transport::Http | Transport::Https => 0..0,
    };
    let requests = if matches!(tr, Transport::Http | Transport::Https) {
        let mut v: Vec<(u64, usize)> = Vec::new();
        for (id, n) in http_counts(cx.faults.web(tr)) {
            let from = http_before.get(&id).copied().unwrap_or(0);
            v.extend((from..n).map(|i| (id, i)));
        }
        v.sort();
        v
    } else {
        Vec::new()
    };
    log.pushes.push(PushRecord {
        transport: tr,
        thread: t,
        op,
        dst,
        commit,
        lease,
        declined,
        kind: out.kind,
        may_have_applied: out.may_have_applied,
        attempts: out
            .attempts
            .iter()
            .map(|a| (a.phase.to_string(), a.class))
            .collect(),
        cancelled: raised,
        conns,
        requests,
        error: out.error.as_ref().map(|e| e.cause.clone()),
    });

    acted(cx, t, tr, &log.pushes[log.pushes.len() - 1], owed)
}

/// Whether the owed fault planned on `push` acted on one of its
/// connections or requests.
fn acted(cx: &Ctx<'_>, t: usize, tr: Transport, push: &PushRecord, owed: bool) -> bool {
    if !owed {
        return false;
    }
    match tr {
        Transport::Git => cx.faults.git.connections()[push.conns.clone()]
            .iter()
            .any(|c| {
                c.fault_fired
                    && c.fault
                        .as_ref()
                        .is_some_and(|f| fault_name(f) == "cut-before-report")
            }),
        Transport::Ssh => sshfault::read_log(cx.faults.ctl, t)[push.conns.clone()]
            .iter()
            .any(|c| c.fired && c.fault == Some(SshFault::CutBeforeReport)),
        Transport::Http | Transport::Https => {
            let conns = cx.faults.web(tr).connections();
            push.requests.iter().any(|(id, i)| {
                conns
                    .iter()
                    .find(|c| c.id == *id)
                    .and_then(|c| c.http_requests.get(*i))
                    .and_then(|x| x.fault.as_ref())
                    .is_some_and(|f| http_fault_name(f) == "http-cut-response-after-body")
            })
        }
    }
}

/// A fetch's reported refs must be what is on disk after it.
fn check_fetch(
    t: usize,
    op: usize,
    tr: Transport,
    out: &Outcome<Vec<sluice_git::FetchedRef>>,
    repo_dir: &Path,
    log: &mut ThreadLog,
) {
    let Some(refs) = &out.value else { return };
    let on_disk = repo::refs(repo_dir);
    log.fetches_checked += 1;
    for r in refs {
        let Some(local) = &r.local_ref else { continue };
        if r.is_rejected() {
            continue;
        }
        let want = r.oid.to_string();
        if on_disk.get(local) != Some(&want) {
            log.violations.push(format!(
                "t{t} op{op} {} fetch reported {local} = {want} ({:?}), on disk {:?}",
                tr.name(),
                r.status,
                on_disk.get(local)
            ));
        }
    }
}

/// Runs a service soak and checks it. It sets the process's
/// `GIT_SSH_COMMAND`: one soak per process at a time.
pub fn run(cfg: &ServiceConfig) -> ServiceReport {
    let started = Instant::now();
    let servers = serve(cfg.threads);
    let root = servers.dir.path().canonicalize().expect("root");
    // Set once, before any thread of the soak starts.
    std::env::set_var(
        "GIT_SSH_COMMAND",
        format!(
            "exec '{}' '{}' {}",
            cfg.ssh_fault.display(),
            servers.ctl.display(),
            servers.sshd.git_ssh_command()
        ),
    );
    let policy = Policy::builder()
        .retry_budget(cfg.retry_budget)
        .jitter_seed(cfg.seed)
        .build();
    // The https proxies present a certificate from the run's CA, which
    // the one client trusts besides the system's roots.
    let client = GitClient::new(Arc::new(policy)).with_https(
        HttpsConfig::new()
            .with_ca_file(servers.pki.ca_file())
            .expect("the run's CA file reads"),
    );
    let git_proxies: Vec<FaultProxy> = (0..cfg.threads)
        .map(|_| FaultProxy::git(servers.daemon.addr()).expect("git proxy"))
        .collect();
    let http_proxies: Vec<FaultProxy> = (0..cfg.threads)
        .map(|_| FaultProxy::http(servers.http.addr()).expect("http proxy"))
        .collect();
    let https_proxies: Vec<FaultProxy> = (0..cfg.threads)
        .map(|_| {
            FaultProxy::https(servers.http.addr(), &servers.pki.server(ServerCert::Good))
                .expect("https proxy")
        })
        .collect();
    let repos: Vec<(PathBuf, PathBuf)> = (0..cfg.threads)
        .map(|t| {
            let local = borrowing_repo(&root.join(format!("local-t{t}.git")), &servers.srv);
            let fetch = root.join(format!("fetch-t{t}.git"));
            repo::init_bare(&fetch).expect("init fetch repo");
            (local, fetch)
        })
        .collect();
    let total = cfg.ops_per_transport * Transport::ALL.len();
    let (per_thread, sample_every) = match cfg.duration {
        // Until the time is up; a sample every 100 operations.
        Some(_) => (usize::MAX, 100),
        None => (total.div_ceil(cfg.threads).max(3), (total / 50).max(1)),
    };
    // Warm-up: one operation per transport in every thread (the transport
    // turns with the operation), so the quiescent start sample already
    // holds each thread's kept-alive HTTP connections to its http and https
    // proxies; with fewer, the end sample counts the ones opened later as
    // growth (about 3 descriptors each: the client's socket and the
    // proxy's two).
    let warmup = Transport::ALL.len().min(per_thread);
    let done = AtomicUsize::new(0);
    let samples = Mutex::new(Vec::new());
    let until = cfg.duration.map(|d| started + d);
    let minutes = Mutex::new(Vec::new());
    let (stop_minutes, minutes_stopped) = std::sync::mpsc::channel::<()>();
    let warm = Barrier::new(cfg.threads + 1);
    let mut report = ServiceReport {
        threads: cfg.threads,
        ..ServiceReport::default()
    };
    let logs: Vec<ThreadLog> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let cx = Ctx {
                    cfg,
                    client: &client,
                    faults: Faults {
                        thread: t,
                        git: &git_proxies[t],
                        http: &http_proxies[t],
                        https: &https_proxies[t],
                        ctl: &servers.ctl,
                    },
                    urls: [
                        git_proxies[t].url("soak.git"),
                        http_proxies[t].http_url("git/soak.git"),
                        format!(
                            "ssh://{}@{}/{}",
                            servers.sshd.user(),
                            servers.sshd.addr(),
                            root.join("ssh")
                                .join(format!("t{t}"))
                                .join("soak.git")
                                .display()
                                .to_string()
                                .trim_start_matches('/')
                        ),
                        https_proxies[t].http_url("git/soak.git"),
                    ],
                    local: &repos[t].0,
                    fetch_into: &repos[t].1,
                    done: &done,
                    samples: &samples,
                    sample_every,
                    until,
                };
                let warm = &warm;
                s.spawn(move || run_thread(t, &cx, warm, per_thread, warmup))
            })
            .collect();
        if cfg.duration.is_some() {
            let (minutes, done) = (&minutes, &done);
            s.spawn(move || {
                let mut next = Duration::from_secs(60);
                // Every minute until the operations' threads end (the
                // sender dropped).
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    minutes_stopped.recv_timeout(next.saturating_sub(started.elapsed()))
                {
                    let x = Sample::take(done.load(Ordering::SeqCst));
                    minutes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((started.elapsed(), x));
                    next += Duration::from_secs(60);
                }
            });
        }
        warm.wait();
        for p in &git_proxies {
            p.wait_idle(Duration::from_secs(30));
        }
        report.start = Sample::take(done.load(Ordering::SeqCst));
        report.rss_released_kib.0 = crate::mem::released_rss_kib();
        warm.wait();
        let logs = handles
            .into_iter()
            .map(|h| h.join().expect("thread panicked"))
            .collect();
        drop(stop_minutes);
        logs
    });
    report.minutes = minutes.into_inner().unwrap_or_else(|e| e.into_inner());
    report.packs_at_end = repos.iter().map(|(_, fetch)| pack_files(fetch)).collect();
    for p in &git_proxies {
        p.wait_idle(Duration::from_secs(30));
    }
    report.end = Sample::take(done.load(Ordering::SeqCst));
    report.samples = samples.into_inner().unwrap_or_else(|e| e.into_inner());
    report.rss_released_kib.1 = crate::mem::released_rss_kib();
    drop(client);
    report.rss_without_library_kib = crate::mem::released_rss_kib();
    // Every receive-pack that got a pack has exited (the hooks' watchers
    // hold the lock until then).
    let lock = root.join("hooks.lock");
    let waited = std::process::Command::new("flock")
        .args(["-w", "120", "-x"])
        .arg(&lock)
        .arg("true")
        .status();
    if !waited.is_ok_and(|s| s.success()) {
        report
            .violations
            .push("receive-packs still running 120 s after the last operation".into());
    }
    for p in http_proxies
        .iter()
        .chain(&https_proxies)
        .chain(&git_proxies)
    {
        p.wait_idle(Duration::from_secs(30));
    }
    for log in &logs {
        add_counts(&mut report.ops, &log.ops);
        add_counts(&mut report.calls, &log.calls);
        add_counts(&mut report.outcomes, &log.outcomes);
        add_counts(&mut report.cancels, &log.cancels);
        add_counts(&mut report.settled, &log.settled);
        add_counts(&mut report.stopped, &log.stopped);
        report.retries += log.retries;
        report.longest_call = report.longest_call.max(log.longest);
        report.fetches_checked += log.fetches_checked;
        report.gcs += log.gcs;
        report.packs_longest_lived = report.packs_longest_lived.max(log.packs_seen);
        report.violations.extend(log.violations.iter().cloned());
    }
    let git_conns: Vec<Vec<ConnectionRecord>> =
        git_proxies.iter().map(FaultProxy::connections).collect();
    let http_conns: Vec<Vec<ConnectionRecord>> =
        http_proxies.iter().map(FaultProxy::connections).collect();
    let https_conns: Vec<Vec<ConnectionRecord>> =
        https_proxies.iter().map(FaultProxy::connections).collect();
    let ssh_conns: Vec<Vec<SshConn>> = (0..cfg.threads)
        .map(|t| sshfault::read_log(&servers.ctl, t))
        .collect();
    for c in git_conns.iter().flatten() {
        report.connections += 1;
        if let (Some(f), true) = (&c.fault, c.fault_fired) {
            *report.faults.entry(fault_name(f)).or_default() += 1;
        }
    }
    for x in http_conns.iter().flatten().flat_map(|c| &c.http_requests) {
        report.connections += 1;
        if let Some(f) = &x.fault {
            *report.faults.entry(http_fault_name(f)).or_default() += 1;
        }
    }
    for x in https_conns.iter().flatten().flat_map(|c| &c.http_requests) {
        report.connections += 1;
        if let Some(f) = &x.fault {
            *report
                .faults
                .entry(https_fault_name(http_fault_name(f)))
                .or_default() += 1;
        }
    }
    for c in ssh_conns.iter().flatten() {
        report.connections += 1;
        if let (Some(f), true) = (c.fault, c.fired) {
            *report.faults.entry(f.name()).or_default() += 1;
        }
    }
    let cx = Checked {
        srv: &servers.srv,
        threads: cfg.threads,
        hook_log: &root.join("hook.log"),
        git: &git_conns,
        http: &http_conns,
        https: &https_conns,
        ssh: &ssh_conns,
    };
    cx.check(&logs, &mut report);
    drop(git_proxies);
    drop(http_proxies);
    drop(https_proxies);
    drop((logs, git_conns, http_conns, https_conns, ssh_conns));
    report.rss_without_records_kib = crate::mem::released_rss_kib();
    steady_state(cfg, &mut report);
    report.elapsed = started.elapsed();
    report
}

/// `.pack` files in `repo`'s pack directory.
fn pack_files(repo: &Path) -> usize {
    std::fs::read_dir(repo.join("objects/pack")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
            .count()
    })
}

fn http_fault_name(f: &Fault) -> &'static str {
    match f {
        Fault::HttpStatus {
            status: 503,
            path_contains,
            ..
        } if path_contains.contains('=') => "http-503-advertisement",
        Fault::HttpStatus { status: 503, .. } => "http-503-request",
        Fault::HttpStatus { status: 500, .. } => "http-500-after-body",
        Fault::HttpStatus { .. } => "http-502-after-body",
        Fault::HttpCutResponse { path_contains } if path_contains.contains('=') => {
            "http-cut-advertisement"
        }
        Fault::HttpCutResponse { .. } => "http-cut-response-after-body",
        other => fault_name(other),
    }
}

/// The name of an http fault that acted on an https request.
fn https_fault_name(http: &'static str) -> &'static str {
    match http {
        "http-503-advertisement" => "https-503-advertisement",
        "http-503-request" => "https-503-request",
        "http-500-after-body" => "https-500-after-body",
        "http-502-after-body" => "https-502-after-body",
        "http-cut-advertisement" => "https-cut-advertisement",
        "http-cut-response-after-body" => "https-cut-response-after-body",
        other => other,
    }
}

/// Descriptors, threads and the library's memory must not grow with the
/// operations: the quiescent end against the quiescent start (memory read
/// with freed pages handed back, the soak's own records left out), and the
/// second half of the samples against the first.
fn steady_state(cfg: &ServiceConfig, report: &mut ServiceReport) {
    let (fds, threads, kib) = cfg.slack;
    let (s, e) = (report.start, report.end);
    if e.fds > s.fds + fds || e.threads > s.threads + threads {
        report.violations.push(format!(
            "resources grew from the start ({s}) to the end ({e}) beyond the slack ({fds} fds, {threads} threads)"
        ));
    }
    // The soak keeps a record of every connection, request and push to
    // check them at the end: its resident size grows with the operations by
    // design (a few kilobytes per operation). What the library holds is
    // read with freed memory handed back: the client's share at the end
    // (what dropping it gave back), and what stayed once the client and
    // the records were both gone, against the start.
    let (start, end) = report.rss_released_kib;
    let (without_library, without_records) = (
        report.rss_without_library_kib,
        report.rss_without_records_kib,
    );
    if without_library > 0 {
        let held = end.saturating_sub(without_library);
        let stayed = without_records.saturating_sub(start);
        if held > kib || stayed > kib {
            report.violations.push(format!(
                "the library's memory grew beyond the slack ({kib} KiB): its client held {held} KiB at the end; {stayed} KiB more than at the start stayed allocated with the client and the soak's records dropped"
            ));
        }
    } else if e.rss_kib > s.rss_kib + kib {
        report.violations.push(format!(
            "resident memory grew from the start ({s}) to the end ({e}) beyond the slack ({kib} KiB)"
        ));
    }
    let n = report.samples.len();
    if n >= 8 {
        // The first tenth is warm-up (caches filling).
        let from = n / 10;
        let mid = from + (n - from) / 2;
        let (a, b) = (&report.samples[from..mid], &report.samples[mid..]);
        let max = |v: &[Sample], g: fn(&Sample) -> u64| v.iter().map(g).max().unwrap_or(0);
        for (name, g, slack) in [
            ("fds", (|x: &Sample| x.fds) as fn(&Sample) -> u64, fds),
            ("threads", |x: &Sample| x.threads, threads),
            ("RSS KiB", |x: &Sample| x.rss_kib, kib),
        ] {
            if max(b, g) > max(a, g) + slack {
                report.violations.push(format!(
                    "{name} grew through the run: at most {} in the first half, {} in the second",
                    max(a, g),
                    max(b, g)
                ));
            }
        }
    }
}

struct Checked<'a> {
    srv: &'a Path,
    threads: usize,
    hook_log: &'a Path,
    git: &'a [Vec<ConnectionRecord>],
    http: &'a [Vec<ConnectionRecord>],
    https: &'a [Vec<ConnectionRecord>],
    ssh: &'a [Vec<SshConn>],
}

/// (phase, class) pairs an attempt may end with.
type Allowed = &'static [(&'static str, Class)];

/// A cut the client may not have seen before it wrote the rest of its
/// request into a socket or pipe buffer: it may be seen at any later phase,
/// and a client that wrote its last byte rightly calls that `unknown`. A
/// whole advertisement also lets the client refuse a stale lease itself
/// (`answered` at `advertised`, no pack).
const CUT_AT_ADVERT: Allowed = &[
    ("advertised", Class::Answered),
    ("advertised", Class::Unjudged),
    ("commands-sent", Class::Unjudged),
    ("pack-sent", Class::Unknown),
];
const CUT_IN_PACK: Allowed = &[
    ("commands-sent", Class::Unjudged),
    ("pack-sent", Class::Unknown),
];
const NO_ADVERT: Allowed = &[("connect", Class::Unjudged)];
const NO_REPORT: Allowed = &[("pack-sent", Class::Unknown)];

/// What a fault that fired allows a push attempt to end with.
fn expected_git(f: &Fault, delivered: bool) -> Option<Allowed> {
    Some(match f {
        Fault::Refuse | Fault::ResetBeforeAdvert | Fault::StallBeforeAdvert => NO_ADVERT,
        Fault::CutAfterAdvert => CUT_AT_ADVERT,
        Fault::CutInPushPack => CUT_IN_PACK,
        Fault::CutBeforeReport | Fault::StallBeforeReport if delivered => NO_REPORT,
        _ => return None,
    })
}

fn expected_ssh(f: SshFault, delivered: bool) -> Option<Allowed> {
    Some(match f {
        SshFault::Refuse | SshFault::StallBeforeAdvert => NO_ADVERT,
        SshFault::CutAfterAdvert => CUT_AT_ADVERT,
        SshFault::CutInPushPack => CUT_IN_PACK,
        SshFault::CutBeforeReport if delivered => NO_REPORT,
        SshFault::CutBeforeReport => return None,
    })
}

/// One push attempt's connection, as the proxy or relay saw it.
struct Seen {
    /// The server got the whole pack.
    delivered: bool,
    /// The client's request was complete and it got no judged answer.
    unread: bool,
    fired: Option<Allowed>,
    what: String,
}

impl Checked<'_> {
    fn check(&self, logs: &[ThreadLog], report: &mut ServiceReport) {
        // Every reflog entry: commit -> [(branch, old)].
        let mut installed: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for b in branches(self.threads) {
            for e in repo::reflog_entries(self.srv, &b) {
                if e.message == "soak-init" {
                    continue;
                }
                installed
                    .entry(e.new.clone())
                    .or_default()
                    .push((b.clone(), e.old.clone()));
            }
        }
        // Packs the hook saw, per pushed commit.
        let mut packs: HashMap<String, usize> = HashMap::new();
        for l in std::fs::read_to_string(self.hook_log)
            .unwrap_or_default()
            .lines()
        {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let ["recv", _old, new, _ref] = w.as_slice() {
                *packs.entry((*new).to_owned()).or_default() += 1;
                report.packs_received += 1;
            }
        }
        let pushes: Vec<&PushRecord> = logs.iter().flat_map(|l| &l.pushes).collect();
        let by_commit: HashMap<&str, &PushRecord> =
            pushes.iter().map(|p| (p.commit.as_str(), *p)).collect();
        for (commit, n) in &packs {
            if *n > 1 {
                report.second_packs += n - 1;
                let who = by_commit
                    .get(commit.as_str())
                    .map_or("nobody".to_string(), |p| {
                        format!("t{} op{} {}", p.thread, p.op, p.transport.name())
                    });
                report.violations.push(format!(
                    "{who}: the server received {n} packs for {commit} (one operation)"
                ));
            }
        }
        for (commit, entries) in &installed {
            let Some(p) = by_commit.get(commit.as_str()) else {
                report
                    .violations
                    .push(format!("{commit} on the server was pushed by nobody"));
                continue;
            };
            if entries.len() > 1 {
                report.violations.push(format!(
                    "t{} op{}: {commit} installed {} times",
                    p.thread,
                    p.op,
                    entries.len()
                ));
            }
            for (branch, old) in entries {
                if *branch != p.dst || *old != p.lease {
                    report.violations.push(format!(
                        "t{} op{}: {commit} replaced {old} on {branch}, pushed to {} leased on {}",
                        p.thread, p.op, p.dst, p.lease
                    ));
                }
            }
        }
        for p in &pushes {
            let on = installed.get(&p.commit).map_or(0, Vec::len);
            let who = format!(
                "t{} op{} {} {} {}",
                p.thread,
                p.op,
                p.transport.name(),
                p.dst,
                p.commit
            );
            match p.kind {
                OutcomeKind::Succeeded if on == 1 => report.landed += 1,
                OutcomeKind::Succeeded => report.violations.push(format!(
                    "{who}: reported landed, on the server {on} times ({:?})",
                    p.attempts
                )),
                OutcomeKind::Answered | OutcomeKind::Rejected => {
                    report.answered += 1;
                    if on > 0 {
                        report.violations.push(format!(
                            "{who}: reported {}, but on the server ({:?}, {:?})",
                            p.kind.as_str(),
                            p.attempts,
                            p.error
                        ));
                    }
                }
                OutcomeKind::Unknown => {
                    if on > 0 {
                        report.unknown_on += 1;
                        if p.may_have_applied != Some(true) {
                            report.violations.push(format!(
                                "{who}: unknown with may_have_applied {:?}, but on the server ({:?})",
                                p.may_have_applied, p.attempts
                            ));
                        }
                    } else {
                        report.unknown_off += 1;
                    }
                }
                OutcomeKind::LocalError => {
                    report.violations.push(format!(
                        "{who}: {} in a soak with no local trouble ({:?}, {:?}, cancelled {})",
                        p.kind.as_str(),
                        p.attempts,
                        p.error,
                        p.cancelled
                    ));
                }
            }
            if p.declined && on > 0 {
                report.violations.push(format!(
                    "{who}: the hook declined it, but it is on the server"
                ));
            }
            self.check_attempts(p, &who, report);
        }
    }

    /// The push's class history against the wire's log.
    fn check_attempts(&self, p: &PushRecord, who: &str, report: &mut ServiceReport) {
        let seen: Vec<Seen> = match p.transport {
            Transport::Git => self.git[p.thread][p.conns.clone()]
                .iter()
                .filter(|c| c.service != Some(Service::UploadPack))
                .map(|c| {
                    let delivered = c.service == Some(Service::ReceivePack)
                        && c.pack_bytes_client_to_server > 0
                        && !(c.fault == Some(Fault::CutInPushPack) && c.fault_fired);
                    Seen {
                        delivered,
                        unread: delivered && !c.passed(Point::Responded),
                        fired: c
                            .fault
                            .as_ref()
                            .filter(|_| c.fault_fired)
                            .and_then(|f| expected_git(f, delivered)),
                        what: format!(
                            "conn {} {:?} fault {:?} fired {} reached {:?} pack {}",
                            c.id,
                            c.service,
                            c.fault.as_ref().map(fault_name),
                            c.fault_fired,
                            c.furthest(),
                            c.pack_bytes_client_to_server
                        ),
                    }
                })
                .collect(),
            Transport::Ssh => self.ssh[p.thread][p.conns.clone()]
                .iter()
                .filter(|c| c.service == "git-receive-pack")
                .map(|c| Seen {
                    delivered: c.delivered_pack(),
                    unread: c.delivered_pack() && !c.passed("responded"),
                    fired: c
                        .fault
                        .filter(|_| c.fired)
                        .and_then(|f| expected_ssh(f, c.delivered_pack())),
                    what: format!(
                        "relay {} fault {:?} fired {} {:?}",
                        c.id, c.fault, c.fired, c.milestones
                    ),
                })
                .collect(),
            Transport::Http | Transport::Https => {
                let conns = if p.transport == Transport::Https {
                    &self.https[p.thread]
                } else {
                    &self.http[p.thread]
                };
                p.requests
                    .iter()
                    .filter_map(|(id, i)| {
                        conns
                            .iter()
                            .find(|c| c.id == *id)
                            .and_then(|c| c.http_requests.get(*i))
                    })
                    .filter(|x: &&HttpExchange| {
                        x.method == "POST" && x.path.ends_with("/git-receive-pack")
                    })
                    .map(|x| {
                        let status_after_body =
                            matches!(x.status, Some(500) | Some(502) | Some(504));
                        Seen {
                            delivered: x.had_body
                                && !matches!(x.fault, Some(Fault::HttpStatus { .. })),
                            unread: x.had_body
                                && x.status != Some(503)
                                && (!x.response_forwarded || status_after_body),
                            fired: None,
                            what: format!(
                                "{} {} status {:?} fault {:?} forwarded {}",
                                x.method, x.path, x.status, x.fault, x.response_forwarded
                            ),
                        }
                    })
                    .collect()
            }
        };
        let unknown = p
            .attempts
            .iter()
            .filter(|a| a.1 == Some(Class::Unknown))
            .count();
        let unread = seen.iter().filter(|s| s.unread).count();
        let delivered = seen.iter().filter(|s| s.delivered).count();
        let mut bad = Vec::new();
        if delivered > 1 {
            bad.push(format!("{delivered} packs delivered"));
        }
        // A request complete on the wire and never answered is unknown to
        // the client: never unjudged, which would send the pack again.
        if unread > unknown {
            bad.push(format!(
                "{unread} requests complete on the wire without an answer, {unknown} attempts classed unknown"
            ));
        }
        // Over git and ssh each attempt is one connection; a fault that
        // fired gives the design's phase and class.
        if !matches!(p.transport, Transport::Http | Transport::Https) && !p.cancelled {
            if seen.len() != p.attempts.len() {
                bad.push(format!(
                    "{} attempts, {} connections",
                    p.attempts.len(),
                    seen.len()
                ));
            } else {
                for (s, (phase, class)) in seen.iter().zip(&p.attempts) {
                    if let Some(allowed) = s.fired {
                        if !allowed
                            .iter()
                            .any(|(ph, c)| ph == phase && *class == Some(*c))
                        {
                            bad.push(format!(
                                "attempt {phase} {class:?}, the fault allows {allowed:?}"
                            ));
                        }
                    }
                    // The one rule's side: a pack the server got is never
                    // classed unjudged (that would send it again).
                    if s.delivered && *class == Some(Class::Unjudged) {
                        bad.push(format!(
                            "attempt {phase} unjudged after its pack reached the server"
                        ));
                    }
                }
            }
        }
        if !bad.is_empty() {
            let wire: Vec<&str> = seen.iter().map(|s| s.what.as_str()).collect();
            report.violations.push(format!(
                "{who}: class history against the wire: {} (attempts {:?}, cancelled {}, wire {wire:?})",
                bad.join("; "),
                p.attempts,
                p.cancelled
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(min: u64, rss_mib: u64) -> (Duration, Sample) {
        (
            Duration::from_secs(min * 60),
            Sample {
                rss_kib: rss_mib * 1024,
                ..Sample::default()
            },
        )
    }

    /// The violations `steady_state` finds in a report whose memory
    /// readings are these (the raw end far above the start, as the soak's
    /// records make it).
    fn memory_violations(
        released: (u64, u64),
        without_library: u64,
        without_records: u64,
    ) -> Vec<String> {
        let mut r = ServiceReport {
            start: Sample {
                rss_kib: released.0,
                ..Sample::default()
            },
            end: Sample {
                rss_kib: released.1 + 100_000,
                ..Sample::default()
            },
            rss_released_kib: released,
            rss_without_library_kib: without_library,
            rss_without_records_kib: without_records,
            ..ServiceReport::default()
        };
        steady_state(&ServiceConfig::ci(PathBuf::new()), &mut r);
        r.violations
    }

    /// Exactly one violation, saying `words`.
    fn one_saying(violations: &[String], words: &str) {
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains(words), "{violations:?}");
    }

    #[test]
    fn the_library_is_judged_by_its_memory_not_the_soaks_records() {
        let kib = ServiceConfig::ci(PathBuf::new()).slack.2;
        let (start, end) = (20_000, 20_000 + 3 * kib);
        // The records grew by far more than the slack; the library's client
        // held 2 MiB at the end; dropping both left less than at the start.
        let v = memory_violations((start, end), 18_000 + 3 * kib, 19_000);
        assert_eq!(v, Vec::<String>::new());
        // The client held more than the slack at the end.
        one_saying(
            &memory_violations((start, end), 20_000 + kib, 19_000),
            "its client held",
        );
        // Memory that stayed allocated with the client and records gone.
        one_saying(
            &memory_violations((start, end), 19_000 + 3 * kib, 21_000 + kib),
            &format!("{} KiB more", 1_000 + kib),
        );
        // Without the readings (not taken), the raw end against the start.
        one_saying(
            &memory_violations((start, start), 0, 0),
            "resident memory grew",
        );
    }

    #[test]
    fn the_rss_slope_leaves_out_the_first_ten_minutes() {
        // 100 MiB growing fast while warming up, then 1 MiB every 6
        // minutes: 10 MiB/hour.
        let mut m: Vec<_> = (1..10).map(|i| at(i, 10 * i)).collect();
        m.extend((10..=40).map(|i| at(i, 100 + (i - 10) / 6)));
        let (from, slope) = rss_slope(&m).expect("a slope");
        assert_eq!(from, 10);
        assert!((slope - 10.0).abs() < 1.5, "{slope}");
        // A short run: from the first minute, said so.
        let short: Vec<_> = (1..=4).map(|i| at(i, 50 + i)).collect();
        let (from, slope) = rss_slope(&short).expect("a slope");
        assert_eq!(from, 1);
        assert!((slope - 60.0).abs() < 1e-6, "{slope}");
        assert_eq!(rss_slope(&short[..2]), None);
    }
}
