//! Concurrency rows (issue 23): 1, 8, 32 and 64 operations at once from
//! one process — one `Policy`, one `GitClient`, a thread per operation —
//! against the same number of `git` processes at once, and against a raw
//! client (`crate::floor`) on as many threads.
//!
//! Each of the `n` workers does `per` operations one after another; a row
//! reports the throughput (operations over the wall time of the whole
//! level), the p50 and p99 latency of single operations, and peak memory:
//! the one sluice process's (`/usr/bin/time`, the process runs as
//! `sluice-bench child sluice conc …`) against the sum over the `n` git
//! workers of each one's largest process.
//!
//! Operations: ls-refs of one prefix on the forge-20k copy; a one-commit
//! push, each worker to a branch of its own (its own chain of loose
//! commits) on a copy of the medium fixture; a fetch of a 10-commit branch
//! into a fresh copy of the medium fixture per operation. Over git:// the
//! daemon is started per connection (`git daemon --inetd`) behind a
//! listener of this process (see [`Daemon`]: `git daemon --listen` has a
//! backlog of 5); over http:// through lighttpd
//! and `git http-backend`, a CGI process per request.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sluice_git::{GitClient, PushOptions, RefUpdate};
use sluice_policy::OutcomeKind;

use crate::measure;
use crate::ops::{self, Impl};
use crate::rows::{Env, Settings};
use crate::stats::{self, fmt_kib, fmt_ratio, fmt_secs};

/// The concurrency rows' operations (kept with the other rows' names in
/// [`crate::rows`]).
pub use crate::rows::Kind;

/// The concurrency levels measured.
pub const LEVELS: [usize; 4] = [1, 8, 32, 64];

/// `git daemon` on 127.0.0.1, one `git daemon --inetd` per connection,
/// accepted by a listener of this process; every process it started is
/// killed on drop.
///
/// Not `git daemon --listen`: its listening socket has a backlog of 5
/// (`ss -ltn` shows `Send-Q 5`), so when more than a handful of clients
/// connect at once the kernel drops their SYNs and each retries after 1,
/// 3, 7, 15 s. The first concurrency runs measured that queue, for every
/// client alike (the raw floor had the worst tails). Here the socket is
/// Rust's (backlog 128) and the same `git daemon` code serves each
/// connection, as inetd or a systemd socket would start it; it costs one
/// process start per connection, the same for git, sluice and the floor.
/// No connection limit applies.
pub struct Daemon {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Daemon {
    /// Serves `base` (receive-pack enabled, every repository exported).
    pub fn start(base: &Path) -> Result<Daemon> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let exec = sluice_testkit::repo::git(base, &["--exec-path"]);
        let program = Path::new(exec.trim()).join("git-daemon");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding")?;
        let addr = listener.local_addr()?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let base = base.to_path_buf();
        let acceptor = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut children: Vec<Child> = Vec::new();
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let Ok(out) = conn.try_clone() else { continue };
                    let spawned = Command::new(&program)
                        .args([
                            "--inetd",
                            "--log-destination=none",
                            "--export-all",
                            "--enable=receive-pack",
                        ])
                        .arg(format!("--base-path={}", base.display()))
                        .arg(&base)
                        .env("GIT_CONFIG_NOSYSTEM", "1")
                        .env("GIT_CONFIG_GLOBAL", "/dev/null")
                        .stdin(Stdio::from(std::os::fd::OwnedFd::from(conn)))
                        .stdout(Stdio::from(std::os::fd::OwnedFd::from(out)))
                        .stderr(Stdio::null())
                        .spawn();
                    if let Ok(child) = spawned {
                        children.push(child);
                    }
                    // Reap the ones that ended.
                    children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
                }
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        });
        Ok(Daemon {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// Its address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `git://<addr>/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!("git://{}/{repo}", self.addr)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// One side of a level: single operations' latencies, the level's wall
/// time and peak memory.
#[derive(Clone, Debug, Default)]
pub struct Side {
    /// Seconds per operation.
    pub lat: Vec<f64>,
    /// Wall seconds of the whole level.
    pub wall: f64,
    /// Peak memory, KiB (sluice: its one process; git: the workers' peaks
    /// summed).
    pub peak_kib: Option<u64>,
    /// Operations that failed (not in `lat`, not in the throughput).
    pub failed: usize,
}

impl Side {
    /// Operations per second.
    pub fn throughput(&self) -> f64 {
        self.lat.len() as f64 / self.wall
    }

    /// The `q` quantile of the latencies (nearest rank).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.lat.is_empty() {
            return None;
        }
        let mut v = self.lat.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Some(v[rank - 1])
    }

    fn cell(&self) -> String {
        format!(
            "{:.0}/s, p50 {}, p99 {}{}{}",
            self.throughput(),
            self.quantile(0.5).map(fmt_secs).unwrap_or_default(),
            self.quantile(0.99).map(fmt_secs).unwrap_or_default(),
            self.peak_kib
                .map(|k| format!(", {}", fmt_kib(k as f64)))
                .unwrap_or_default(),
            if self.failed > 0 {
                format!(", **{} failed**", self.failed)
            } else {
                String::new()
            }
        )
    }
}

/// One level of one concurrency row.
#[derive(Clone, Debug)]
pub struct Level {
    /// What was measured.
    pub title: String,
    /// Operations at once.
    pub n: usize,
    /// sluice, one process.
    pub sluice: Side,
    /// `n` git processes at once.
    pub git: Side,
    /// The raw client on `n` threads (git:// only).
    pub floor: Option<Side>,
}

impl Level {
    /// Prints the level.
    pub fn print(&self) {
        println!("\n== {} [{} at once]", self.title, self.n);
        println!("  git      {}", self.git.cell());
        println!("  sluice   {}", self.sluice.cell());
        if let Some(f) = &self.floor {
            println!("  floor    {}", f.cell());
        }
        println!("  {}", self.ratios());
    }

    /// sluice against git (and the floor).
    pub fn ratios(&self) -> String {
        let mut r = format!(
            "throughput sluice/git {}, p99 sluice/git {}, mem sluice/git {}",
            fmt_ratio(Some(self.sluice.throughput()), Some(self.git.throughput())),
            fmt_ratio(self.sluice.quantile(0.99), self.git.quantile(0.99)),
            fmt_ratio(
                self.sluice.peak_kib.map(|k| k as f64),
                self.git.peak_kib.map(|k| k as f64)
            ),
        );
        if let Some(f) = &self.floor {
            r.push_str(&format!(
                ", throughput sluice/floor {}",
                fmt_ratio(Some(self.sluice.throughput()), Some(f.throughput()))
            ));
        }
        r
    }
}

/// Prints levels as a markdown table.
pub fn print_markdown(levels: &[Level]) {
    println!("\n| operation | at once | git processes | sluice (one process) | floor (raw client) | sluice vs git |");
    println!("|---|---|---|---|---|---|");
    for l in levels {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            l.title,
            l.n,
            l.git.cell(),
            l.sluice.cell(),
            l.floor
                .as_ref()
                .map(Side::cell)
                .unwrap_or_else(|| "—".into()),
            l.ratios()
        );
    }
}

/// What a worker of the one sluice process does, `per` times.
#[derive(Clone, Debug)]
pub enum Op {
    /// ls-refs of `prefix` at `url`.
    LsRefs {
        /// The remote.
        url: String,
        /// The one prefix.
        prefix: String,
    },
    /// Push worker `i`'s commits (`local`'s branch `<branch>-<i>`, oldest
    /// first along first parents) one per operation to the remote's
    /// `refs/heads/<branch>-<i>`.
    Push {
        /// The remote.
        url: String,
        /// The local repository.
        local: PathBuf,
        /// The branch prefix.
        branch: String,
    },
    /// Fetch `refspec` into `<dests>-<i>-<k>.git` (copies made beforehand).
    Fetch {
        /// The remote.
        url: String,
        /// The destinations' common prefix.
        dests: PathBuf,
        /// The refspec.
        refspec: String,
    },
}

impl Op {
    /// The child's arguments after `conc <n> <per>`.
    pub fn args(&self) -> Vec<OsString> {
        match self {
            Op::LsRefs { url, prefix } => vec!["ls-refs".into(), url.into(), prefix.into()],
            Op::Push { url, local, branch } => {
                vec!["push".into(), url.into(), local.into(), branch.into()]
            }
            Op::Fetch {
                url,
                dests,
                refspec,
            } => vec!["fetch".into(), url.into(), dests.into(), refspec.into()],
        }
    }

    fn parse(args: &[String]) -> Result<Op> {
        Ok(match args {
            [op, url, prefix] if op == "ls-refs" => Op::LsRefs {
                url: url.clone(),
                prefix: prefix.clone(),
            },
            [op, url, local, branch] if op == "push" => Op::Push {
                url: url.clone(),
                local: local.into(),
                branch: branch.clone(),
            },
            [op, url, dests, refspec] if op == "fetch" => Op::Fetch {
                url: url.clone(),
                dests: dests.into(),
                refspec: refspec.clone(),
            },
            _ => bail!("unknown concurrent operation {args:?}"),
        })
    }
}

/// The destination of worker `i`'s `k`th fetch.
pub fn fetch_dest(dests: &Path, i: usize, k: usize) -> PathBuf {
    let mut s = dests.as_os_str().to_owned();
    s.push(format!("-{i}-{k}.git"));
    PathBuf::from(s)
}

/// `sluice-bench child sluice conc <n> <per> <op> …`: `n` threads of one
/// process sharing one client, `per` operations each; prints
/// `elapsed_us=<wall> lat_us=<a,b,…>`.
pub fn child_main(args: &[String]) -> Result<()> {
    let (n, per, op) = match args {
        [n, per, rest @ ..] => (n.parse::<usize>()?, per.parse::<usize>()?, Op::parse(rest)?),
        _ => bail!("usage: sluice-bench child sluice conc <n> <per> <op> ..."),
    };
    let client = ops::client();
    let opts = ops::call_options();
    // Each push worker's commits, read before the clock starts.
    let chains: Vec<Vec<gix::ObjectId>> = match &op {
        Op::Push { local, branch, .. } => {
            let repo = gix::open(local)?;
            (0..n)
                .map(|i| {
                    let mut id = repo
                        .rev_parse_single(format!("refs/heads/{branch}-{i}").as_str())?
                        .detach();
                    let mut chain = vec![id];
                    for _ in 1..per {
                        id = repo
                            .find_commit(id)?
                            .parent_ids()
                            .next()
                            .context("a parent")?
                            .detach();
                        chain.push(id);
                    }
                    chain.reverse();
                    Ok(chain)
                })
                .collect::<Result<_>>()?
        }
        _ => Vec::new(),
    };
    let local_repo = match &op {
        Op::Push { local, .. } => Some(gix::open(local)?.into_sync()),
        _ => None,
    };
    let start = Instant::now();
    let lats: Vec<Result<(Vec<f64>, usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (client, opts, op) = (&client, &opts, &op);
                let chain = chains.get(i);
                let local_repo = local_repo.as_ref();
                s.spawn(move || -> Result<(Vec<f64>, usize)> {
                    let repo = local_repo.map(|r| r.to_thread_local());
                    let mut lat = Vec::with_capacity(per);
                    let mut failed = 0;
                    for k in 0..per {
                        let t = Instant::now();
                        match run_one(client, opts, op, i, k, repo.as_ref(), chain) {
                            Ok(()) => lat.push(stats::secs(t.elapsed())),
                            Err(e) => {
                                eprintln!("worker {i}, operation {k}: {e:#}");
                                failed += 1;
                            }
                        }
                    }
                    Ok((lat, failed))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect()
    });
    let wall = start.elapsed();
    let mut all = Vec::new();
    let mut failed = 0;
    for l in lats {
        let (l, f) = l?;
        all.extend(l);
        failed += f;
    }
    let lat: Vec<String> = all.iter().map(|s| ((s * 1e6) as u64).to_string()).collect();
    println!(
        "elapsed_us={} failed={failed} lat_us={}",
        wall.as_micros(),
        lat.join(",")
    );
    Ok(())
}

fn run_one(
    client: &GitClient,
    opts: &sluice_git::CallOptions,
    op: &Op,
    i: usize,
    k: usize,
    repo: Option<&gix::Repository>,
    chain: Option<&Vec<gix::ObjectId>>,
) -> Result<()> {
    match op {
        Op::LsRefs { url, prefix } => {
            if ops::sluice_ls_prefix(client, url, prefix, opts)? == 0 {
                bail!("no ref under {prefix}");
            }
        }
        Op::Push { url, branch, .. } => {
            let repo = repo.context("the local repository")?;
            let src = *chain.and_then(|c| c.get(k)).context("a commit")?;
            let update = RefUpdate::fast_forward(src, format!("refs/heads/{branch}-{i}"));
            let o = client.push(url, &[update], &PushOptions::default(), repo, opts)?;
            if o.kind != OutcomeKind::Succeeded {
                bail!("sluice push: {:?}", o.kind);
            }
        }
        Op::Fetch {
            url,
            dests,
            refspec,
        } => ops::sluice_fetch_into(client, url, &fetch_dest(dests, i, k), refspec, opts)?,
    }
    Ok(())
}

/// Runs the one sluice process for a level.
pub fn measure_sluice(n: usize, per: usize, op: &Op) -> Result<Side> {
    let mut args: Vec<OsString> = vec!["conc".into(), n.to_string().into(), per.to_string().into()];
    args.extend(op.args());
    let (stdout, peak) = measure::run_child(Impl::Sluice, &args)?;
    let field = |name: &str| -> Result<&str> {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name))
            .with_context(|| format!("the child printed no {name}"))
    };
    let wall: u64 = field("elapsed_us=")?.parse()?;
    let failed: usize = field("failed=")?.parse()?;
    let lat = field("lat_us=")?
        .split(',')
        .filter(|v| !v.is_empty())
        .map(|v| v.parse::<u64>().map(|us| us as f64 / 1e6))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Side {
        lat,
        wall: wall as f64 / 1e6,
        peak_kib: peak,
        failed,
    })
}

/// A git worker's latencies, largest peak and failures.
type WorkerFigures = (Vec<f64>, Option<u64>, usize);

/// Runs `n` workers at once, each running `make(i, k)` for `k` in
/// `0..per` under `/usr/bin/time`; the peak is the sum of each worker's
/// largest.
pub fn measure_git(
    n: usize,
    per: usize,
    make: &(dyn Fn(usize, usize) -> Command + Sync),
) -> Result<Side> {
    let start = Instant::now();
    let results: Vec<Result<WorkerFigures>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                s.spawn(move || -> Result<WorkerFigures> {
                    let mut lat = Vec::new();
                    let mut peak: Option<u64> = None;
                    let mut failed = 0;
                    for k in 0..per {
                        match measure::measure_command(&make(i, k)) {
                            Ok(m) => {
                                lat.push(stats::secs(m.wall));
                                peak = peak.max(m.max_rss_kib);
                            }
                            Err(e) => {
                                let e = format!("{e:#}");
                                eprintln!(
                                    "git worker {i}, operation {k}: {}",
                                    e.rsplit(": ").next().unwrap_or(&e)
                                );
                                failed += 1;
                            }
                        }
                    }
                    Ok((lat, peak, failed))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let mut side = Side {
        wall,
        ..Side::default()
    };
    let mut sum = 0u64;
    let mut any = false;
    for r in results {
        let (lat, peak, failed) = r?;
        side.lat.extend(lat);
        side.failed += failed;
        if let Some(p) = peak {
            sum += p;
            any = true;
        }
    }
    side.peak_kib = any.then_some(sum);
    Ok(side)
}

/// `n` threads of the raw client, `per` requests each (`request(i, k)`,
/// made before the clock starts; `check` judges each answer).
pub fn measure_floor(
    addr: std::net::SocketAddr,
    n: usize,
    per: usize,
    request: &dyn Fn(usize, usize) -> Result<Vec<u8>>,
    check: &(dyn Fn(usize, usize, &[u8]) -> bool + Sync),
) -> Result<Side> {
    let mut reqs = Vec::new();
    for i in 0..n {
        let mut mine = Vec::new();
        for k in 0..per {
            mine.push(request(i, k)?);
        }
        reqs.push(mine);
    }
    let start = Instant::now();
    let results: Vec<Result<Vec<f64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = reqs
            .iter()
            .enumerate()
            .map(|(i, mine)| {
                s.spawn(move || -> Result<Vec<f64>> {
                    let mut lat = Vec::new();
                    for (k, req) in mine.iter().enumerate() {
                        let t = Instant::now();
                        let answer = crate::floor::replay(addr, req)?;
                        lat.push(stats::secs(t.elapsed()));
                        if !check(i, k, &answer) {
                            bail!("the raw client's request {i}/{k} was not answered as expected");
                        }
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker panicked")))
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let mut side = Side {
        wall,
        ..Side::default()
    };
    for r in results {
        side.lat.extend(r?);
    }
    Ok(side)
}

/// Operations per worker at level `n`: at least 2, and at least 16 in all.
pub fn per_worker(n: usize) -> usize {
    (16 / n).max(2)
}

const FETCH_SPEC: &str = "+refs/heads/topic:refs/heads/topic";

impl Env {
    /// Runs the concurrency rows of `kind` over git:// and (when the http
    /// server runs) http://, at every level of `levels`.
    pub fn run_concurrent(
        &mut self,
        kind: Kind,
        levels: &[usize],
        s: &Settings,
    ) -> Result<Vec<Level>> {
        let daemon = Daemon::start(&self.srv)?;
        let max = levels.iter().copied().max().unwrap_or(1);
        let max_per = levels.iter().map(|&n| per_worker(n)).max().unwrap_or(2);
        let medium = sluice_testkit::fixtures::cached("medium")?;
        let medium_main = self.medium_main.clone();
        let mut out = Vec::new();
        // Push: one local repository with a chain per worker and side.
        let push_local = self.work().join("conc-local.git");
        let mut chains: Vec<Vec<String>> = Vec::new();
        if kind == Kind::Push {
            if !push_local.exists() {
                crate::history::link_copy(&medium, &push_local)?;
            }
            let names: Vec<String> = ["s", "g", "f"]
                .iter()
                .flat_map(|side| (0..max).map(move |i| format!("{side}-{i}")))
                .collect();
            eprintln!(
                "  making {} chains of {max_per} loose commits ...",
                names.len()
            );
            chains = crate::history::add_branches(&push_local, "main", &names, max_per, 7)?;
        }
        let (ls_name, fetch_name, topic) = match kind {
            Kind::LsRefs => (self.forge_ls_name(20_000, s)?, String::new(), String::new()),
            Kind::Fetch => {
                let name = "conc-fetch.git".to_owned();
                let path = self.srv.join(&name);
                if !path.exists() {
                    crate::history::link_copy(&medium, &path)?;
                    sluice_testkit::repo::git(&path, &["branch", "topic", "main"]);
                    crate::history::add_commits(&path, "topic", 10, 29)?;
                }
                let topic = sluice_testkit::repo::git(&path, &["rev-parse", "refs/heads/topic"]);
                (String::new(), name, topic)
            }
            Kind::Push => (String::new(), String::new(), String::new()),
        };
        let transports: Vec<(&str, bool)> = if self.http.is_some() {
            vec![("git://", false), ("http://", true)]
        } else {
            vec![("git://", false)]
        };
        for &n in levels {
            let per = per_worker(n);
            for &(tname, http) in &transports {
                let url_of = |env: &Env, repo: &str| -> String {
                    match (&env.http, http) {
                        (Some(h), true) => h.url(repo),
                        _ => daemon.url(repo),
                    }
                };
                let title = format!(
                    "{}, {tname}",
                    match kind {
                        Kind::LsRefs => "ls-refs with a prefix (forge-20k)",
                        Kind::Push => "push 1 commit, a branch per worker (medium)",
                        Kind::Fetch => "fetch a 10-commit branch into a copy of medium",
                    }
                );
                eprintln!("running concurrent {} over {tname} at {n} ...", kind.name());
                let dir = self.work().to_owned();
                let level = match kind {
                    Kind::LsRefs => {
                        let url = url_of(self, &ls_name);
                        let git_side = measure_git(n, per, &|_, _| {
                            ops::git_ls_prefix(&dir, &url, crate::forge::LS_PREFIX)
                        })?;
                        let op = Op::LsRefs {
                            url: url.clone(),
                            prefix: crate::forge::LS_PREFIX.into(),
                        };
                        let sluice = measure_sluice(n, per, &op)?;
                        let floor = if http {
                            None
                        } else {
                            let want = format!("{medium_main} {}", crate::forge::LS_PREFIX);
                            Some(measure_floor(
                                daemon.addr(),
                                n,
                                per,
                                &|_, _| {
                                    Ok(crate::floor::ls_refs_request(
                                        &ls_name,
                                        crate::forge::LS_PREFIX,
                                    ))
                                },
                                &|_, _, a: &[u8]| {
                                    a.windows(want.len()).any(|w| w == want.as_bytes())
                                },
                            )?)
                        };
                        Level {
                            title,
                            n,
                            sluice,
                            git: git_side,
                            floor,
                        }
                    }
                    Kind::Push => {
                        let (name, remote) = self.new_remote(Some(&medium))?;
                        sluice_testkit::repo::git(&remote, &["config", "http.receivepack", "true"]);
                        let url = url_of(self, &name);
                        let chain = |side: usize, i: usize| &chains[side * max + i];
                        let git_side = measure_git(n, per, &|i, k| {
                            let mut c = ops::git_cmd(&push_local);
                            c.args([
                                "push",
                                "-q",
                                &url,
                                &format!("{}:refs/heads/g-{i}", chain(1, i)[k]),
                            ]);
                            c
                        })?;
                        // The child pushes each worker's chain from its start.
                        for i in 0..n {
                            sluice_testkit::repo::git(
                                &push_local,
                                &[
                                    "update-ref",
                                    &format!("refs/heads/s-{i}"),
                                    &chain(0, i)[per - 1],
                                ],
                            );
                        }
                        let op = Op::Push {
                            url: url.clone(),
                            local: push_local.clone(),
                            branch: "s".into(),
                        };
                        let sluice = measure_sluice(n, per, &op)?;
                        for i in 0..n {
                            sluice_testkit::repo::git(
                                &push_local,
                                &[
                                    "update-ref",
                                    &format!("refs/heads/s-{i}"),
                                    &chain(0, i)[max_per - 1],
                                ],
                            );
                        }
                        let floor = if http {
                            None
                        } else {
                            let zeros = "0".repeat(40);
                            let main = medium_main.clone();
                            Some(measure_floor(
                                daemon.addr(),
                                n,
                                per,
                                &|i, k| {
                                    let c = chain(2, i);
                                    let base = if k == 0 { &main } else { &c[k - 1] };
                                    let old = if k == 0 { &zeros } else { &c[k - 1] };
                                    let pack = ops::git_thin_pack(&push_local, base, &c[k])?;
                                    Ok(crate::floor::push_request(
                                        &name,
                                        old,
                                        &c[k],
                                        &format!("refs/heads/f-{i}"),
                                        &pack,
                                    ))
                                },
                                &|i, _, a: &[u8]| {
                                    crate::floor::push_accepted(a, &format!("refs/heads/f-{i}"))
                                },
                            )?)
                        };
                        for (side, prefix) in [(0, "s"), (1, "g"), (2, "f")] {
                            // A side with failed pushes is reported as such.
                            let failed = [sluice.failed, git_side.failed, 0][side];
                            if side == 2 && http || failed > 0 {
                                continue;
                            }
                            for i in 0..n {
                                let got = sluice_testkit::repo::rev_parse(
                                    &remote,
                                    &format!("refs/heads/{prefix}-{i}"),
                                );
                                if got.as_deref() != Some(chain(side, i)[per - 1].as_str()) {
                                    bail!("after the concurrent pushes {prefix}-{i} = {got:?}");
                                }
                            }
                        }
                        std::fs::remove_dir_all(&remote)?;
                        Level {
                            title,
                            n,
                            sluice,
                            git: git_side,
                            floor,
                        }
                    }
                    Kind::Fetch => {
                        let url = url_of(self, &fetch_name);
                        let prefix = |side: &str| {
                            self.work()
                                .join(format!("conc-{side}-{n}-{}", if http { "h" } else { "g" }))
                        };
                        let (gp, sp) = (prefix("g"), prefix("s"));
                        for i in 0..n {
                            for k in 0..per {
                                crate::history::link_copy(&medium, &fetch_dest(&gp, i, k))?;
                                crate::history::link_copy(&medium, &fetch_dest(&sp, i, k))?;
                            }
                        }
                        let git_side = measure_git(n, per, &|i, k| {
                            ops::git_fetch_into(&fetch_dest(&gp, i, k), &url, FETCH_SPEC)
                        })?;
                        let op = Op::Fetch {
                            url: url.clone(),
                            dests: sp.clone(),
                            refspec: FETCH_SPEC.into(),
                        };
                        let sluice = measure_sluice(n, per, &op)?;
                        for i in 0..n {
                            for k in 0..per {
                                for (p, failed) in [(&gp, git_side.failed), (&sp, sluice.failed)] {
                                    let d = fetch_dest(p, i, k);
                                    if failed == 0
                                        && sluice_testkit::repo::rev_parse(&d, "refs/heads/topic")
                                            .as_deref()
                                            != Some(topic.as_str())
                                    {
                                        bail!("{} did not get topic", d.display());
                                    }
                                    std::fs::remove_dir_all(&d)?;
                                }
                            }
                        }
                        let floor = if http {
                            None
                        } else {
                            Some(measure_floor(
                                daemon.addr(),
                                n,
                                per,
                                &|_, _| {
                                    Ok(crate::floor::fetch_request(
                                        &fetch_name,
                                        &topic,
                                        &medium_main,
                                    ))
                                },
                                &|_, _, a: &[u8]| a.windows(9).any(|w| w == b"packfile\n"),
                            )?)
                        };
                        Level {
                            title,
                            n,
                            sluice,
                            git: git_side,
                            floor,
                        }
                    }
                };
                level.print();
                out.push(level);
            }
        }
        Ok(out)
    }
}
