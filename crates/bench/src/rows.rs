//! The rows of the table: their fixtures, servers, runs and results.
//!
//! Each row runs every implementation once per round, in an order that
//! rotates from round to round (git, sluice, libgit2; then sluice, libgit2,
//! git; ...), after one untimed warm-up round. For pushes the warm-up round
//! goes through a pass-through [`FaultProxy`], which counts the bytes each
//! client sent; timed rounds go straight to the daemon.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_git::{CallOptions, GitClient};
use sluice_testkit::proxy::Service;
use sluice_testkit::repo::{git, init_bare, rev_parse};
use sluice_testkit::{FaultProxy, GitDaemon, HttpBackend};

use crate::history;
use crate::measure::{self, Measured};
use crate::ops::{self, Impl};
use crate::stats::{self, fmt_bytes, fmt_kib, fmt_range, fmt_ratio, fmt_secs};

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row {
    /// ls-refs over git:// (v2 where offered), per call, in a loop.
    LsRefsGit,
    /// ls-refs over http:// (lighttpd + git http-backend), per call.
    LsRefsHttp,
    /// A bare clone of the medium fixture over git://.
    FetchMedium,
    /// A bare clone of the large fixture over git://.
    FetchLarge,
    /// Push one new commit (loose) on top of the remote's tip.
    Push1,
    /// Push 1,000 new commits, loose, on top of the remote's tip.
    Push1000Loose,
    /// Push the same 1,000 commits after `git repack -ad`.
    Push1000Packed,
    /// Push the whole large history into an empty repository.
    PushLarge,
    /// Forge scale: push one commit into a repository with many refs.
    ForgePush1,
    /// Forge scale: push a new branch (one commit on top of a ref there).
    ForgePushBranch,
    /// Forge scale: push one commit with a lease (force-with-lease).
    ForgePushLease,
    /// Forge scale: ls-refs of one prefix over git://.
    ForgeLsRefsPrefix,
    /// Forge scale: fetch one branch with 10 new commits.
    ForgeFetch10,
}

impl Row {
    /// Every row, in table order.
    pub const ALL: [Row; 13] = [
        Row::LsRefsGit,
        Row::LsRefsHttp,
        Row::FetchMedium,
        Row::FetchLarge,
        Row::Push1,
        Row::Push1000Loose,
        Row::Push1000Packed,
        Row::PushLarge,
        Row::ForgePush1,
        Row::ForgePushBranch,
        Row::ForgePushLease,
        Row::ForgeLsRefsPrefix,
        Row::ForgeFetch10,
    ];

    /// Its name for `--rows`.
    pub fn name(self) -> &'static str {
        match self {
            Row::LsRefsGit => "ls-refs-git",
            Row::LsRefsHttp => "ls-refs-http",
            Row::FetchMedium => "fetch-medium",
            Row::FetchLarge => "fetch-large",
            Row::Push1 => "push-1",
            Row::Push1000Loose => "push-1000-loose",
            Row::Push1000Packed => "push-1000-packed",
            Row::PushLarge => "push-large",
            Row::ForgePush1 => "forge-push-1",
            Row::ForgePushBranch => "forge-push-branch",
            Row::ForgePushLease => "forge-push-lease",
            Row::ForgeLsRefsPrefix => "forge-ls-refs-prefix",
            Row::ForgeFetch10 => "forge-fetch-10",
        }
    }

    /// Parses [`Row::name`].
    pub fn parse(s: &str) -> Option<Row> {
        Row::ALL.into_iter().find(|r| r.name() == s)
    }

    /// Whether it needs the large fixture.
    pub fn large(self) -> bool {
        matches!(self, Row::FetchLarge | Row::PushLarge)
    }

    /// Whether it runs on the forge fixtures (once per ref count).
    pub fn forge(self) -> bool {
        matches!(
            self,
            Row::ForgePush1
                | Row::ForgePushBranch
                | Row::ForgePushLease
                | Row::ForgeLsRefsPrefix
                | Row::ForgeFetch10
        )
    }

    /// Whether its in-process calls run in this process (small calls in a
    /// loop) rather than one child per call (peak memory measured).
    fn in_loop(self) -> bool {
        matches!(self, Row::LsRefsGit | Row::LsRefsHttp | Row::Push1)
    }
}

/// The concurrency rows' operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// ls-refs of one prefix (forge-20k).
    LsRefs,
    /// One-commit pushes, each worker to its own branch (medium).
    Push,
    /// A 10-commit branch fetched into a copy of medium.
    Fetch,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 3] = [Kind::LsRefs, Kind::Push, Kind::Fetch];

    /// Its name for `--conc`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::LsRefs => "ls-refs",
            Kind::Push => "push",
            Kind::Fetch => "fetch",
        }
    }

    /// Parses [`Kind::name`].
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// What the forge rows of one size share, made once per run (by
/// [`crate::forge`]; kept by [`Env`]).
#[derive(Clone, Debug)]
pub struct ForgeSetup {
    /// Extra refs of the fixture.
    pub refs: usize,
    /// The cached fixture.
    pub fixture: PathBuf,
    /// `main` of the fixture.
    pub main: String,
    /// The push rows' local repository: a copy of the fixture with a
    /// chain of loose commits on `chain`, one pushed per call.
    pub local: PathBuf,
    /// The chain, oldest first (the first one's parent is `main`).
    pub chain: Vec<String>,
    /// The served copy the ls-refs row lists.
    pub ls_name: String,
    /// The served copy the fetch row fetches from: the fixture and a
    /// branch `topic` of 10 commits on top of `main`.
    pub fetch_name: String,
    /// `topic`'s tip there.
    pub topic: String,
}

/// Settings of one benchmark run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Timed rounds per row.
    pub runs: usize,
    /// Calls per implementation per round in the ls-refs rows.
    pub calls: usize,
    /// Commits of the large fixture.
    pub large_commits: usize,
    /// The rows to run.
    pub rows: Vec<Row>,
    /// The ref counts of the forge fixtures the forge rows run on.
    pub forge_refs: Vec<usize>,
    /// The concurrency rows to run.
    pub conc: Vec<Kind>,
    /// Their levels (operations at once).
    pub conc_levels: Vec<usize>,
    /// Leave libgit2 out of the forge rows (its fetch into 100,000 refs
    /// takes minutes).
    pub no_libgit2: bool,
}

/// The figures of one implementation in one row.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Wall seconds per timed call.
    pub secs: Vec<f64>,
    /// Peak RSS per timed call, KiB.
    pub rss_kib: Vec<f64>,
    /// Bytes the client sent (the proxied warm-up run).
    pub sent: Option<u64>,
    /// Of which pack bytes.
    pub pack_sent: Option<u64>,
}

impl Series {
    pub(crate) fn add(&mut self, m: &Measured) {
        self.secs.push(stats::secs(m.wall));
        if let Some(k) = m.max_rss_kib {
            self.rss_kib.push(k as f64);
        }
    }

    /// Median wall seconds.
    pub fn median(&self) -> Option<f64> {
        stats::median(&self.secs)
    }

    /// Median peak RSS, KiB.
    pub fn rss(&self) -> Option<f64> {
        stats::median(&self.rss_kib)
    }
}

/// One row's results.
#[derive(Clone, Debug)]
pub struct RowResult {
    /// The row.
    pub row: Row,
    /// What it measured (fixture, transport).
    pub title: String,
    /// Per implementation, in [`Impl::ALL`] order.
    pub series: Vec<(Impl, Series)>,
    /// A raw client replaying the request — the server's own time, which
    /// no client can go below (push-1 and the forge rows).
    pub floor: Option<Series>,
    /// What the floor's raw client does.
    pub floor_note: &'static str,
}

impl RowResult {
    pub(crate) fn get(&self, i: Impl) -> &Series {
        &self
            .series
            .iter()
            .find(|(k, _)| *k == i)
            .expect("every impl")
            .1
    }

    /// A cell: `median (min–max)[, peak][, sent]`.
    pub fn cell(&self, i: Impl) -> String {
        let s = self.get(i);
        let Some(m) = s.median() else {
            return "—".into();
        };
        let (lo, hi) = stats::min_max(&s.secs).expect("samples");
        let mut c = format!("{} ({})", fmt_secs(m), fmt_range(lo, hi));
        if !self.row.in_loop() {
            if let Some(r) = s.rss() {
                c.push_str(&format!(", {}", fmt_kib(r)));
            }
        }
        if let Some(b) = s.sent {
            c.push_str(&format!(", {} sent", fmt_bytes(b)));
        }
        c
    }

    /// `a / b` of the medians (time), and of memory and bytes where measured.
    pub fn ratios(&self, a: Impl, b: Impl) -> String {
        let (sa, sb) = (self.get(a), self.get(b));
        let mut r = format!("time {}", fmt_ratio(sa.median(), sb.median()));
        if !self.row.in_loop() && sa.rss().is_some() {
            r.push_str(&format!(", mem {}", fmt_ratio(sa.rss(), sb.rss())));
        }
        if sa.sent.is_some() {
            r.push_str(&format!(
                ", bytes {}",
                fmt_ratio(sa.sent.map(|x| x as f64), sb.sent.map(|x| x as f64))
            ));
        }
        r
    }

    /// Prints the row's figures.
    pub fn print(&self) {
        println!("\n== {} [{}]", self.title, self.row.name());
        for (i, s) in &self.series {
            let mut line = format!("  {:8} {}", i.name(), self.cell(*i));
            if let Some(p) = s.pack_sent {
                line.push_str(&format!(" (pack {})", fmt_bytes(p)));
            }
            line.push_str(&format!("  [n={}]", s.secs.len()));
            println!("{line}");
        }
        if let Some(f) = &self.floor {
            let git = self.get(Impl::Git).median();
            println!(
                "  floor    {} ({}), {} of git's time, sluice {} of it: {} (the server's own time)  [n={}]",
                f.median().map(fmt_secs).unwrap_or_default(),
                stats::min_max(&f.secs)
                    .map(|(lo, hi)| fmt_range(lo, hi))
                    .unwrap_or_default(),
                fmt_ratio(f.median(), git),
                fmt_ratio(self.get(Impl::Sluice).median(), f.median()),
                self.floor_note,
                f.secs.len()
            );
        }
        println!(
            "  sluice/git: {}; sluice/libgit2: {}; libgit2/git: {}",
            self.ratios(Impl::Sluice, Impl::Git),
            self.ratios(Impl::Sluice, Impl::Libgit2),
            self.ratios(Impl::Libgit2, Impl::Git)
        );
    }
}

/// Prints the results as the markdown table of BENCHMARKS.md.
pub fn print_markdown(results: &[RowResult]) {
    println!("\n| call | git (subprocess) | sluice (in-process) | libgit2 (in-process) | floor (raw client) | sluice/git | sluice/libgit2 | sluice/floor |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in results {
        let (floor, vs_floor) = match &r.floor {
            Some(f) => (
                format!(
                    "{} ({})",
                    f.median().map(fmt_secs).unwrap_or_default(),
                    stats::min_max(&f.secs)
                        .map(|(lo, hi)| fmt_range(lo, hi))
                        .unwrap_or_default()
                ),
                fmt_ratio(r.get(Impl::Sluice).median(), f.median()),
            ),
            None => ("—".to_owned(), "—".to_owned()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.title,
            r.cell(Impl::Git),
            r.cell(Impl::Sluice),
            r.cell(Impl::Libgit2),
            floor,
            r.ratios(Impl::Sluice, Impl::Git),
            r.ratios(Impl::Sluice, Impl::Libgit2),
            vs_floor
        );
    }
}

/// The servers and fixtures every row uses; everything lives in one
/// temporary directory, and every server is stopped on drop.
pub struct Env {
    work: tempfile::TempDir,
    /// The directory the servers serve.
    pub srv: PathBuf,
    /// git daemon on 127.0.0.1.
    pub daemon: GitDaemon,
    /// lighttpd + git http-backend on 127.0.0.1.
    pub http: Option<HttpBackend>,
    /// A pass-through proxy in front of the daemon (bytes on the wire).
    pub proxy: FaultProxy,
    /// `main` of the medium fixture.
    pub medium_main: String,
    /// `main` of the large fixture, when built.
    pub large_main: Option<String>,
    /// The forge rows' setups, one per ref count, made on first use.
    pub(crate) forge: Vec<ForgeSetup>,
    client: GitClient,
    opts: CallOptions,
    counter: usize,
}

impl Env {
    /// Builds (or finds cached) the fixtures and starts the servers.
    pub fn start(large_commits: Option<usize>, http: bool) -> Result<Env> {
        let work = tempfile::Builder::new().prefix("sluice-bench-").tempdir()?;
        let srv = work.path().join("srv");
        std::fs::create_dir_all(&srv)?;
        let medium = sluice_testkit::fixtures::cached("medium").context("medium fixture")?;
        history::link_copy(&medium, &srv.join("medium.git"))?;
        let medium_main = git(&medium, &["rev-parse", "refs/heads/main"]);
        let large_main = match large_commits {
            Some(n) => {
                let large = history::build_large(n)?;
                history::link_copy(&large, &srv.join("large.git"))?;
                Some(git(&large, &["rev-parse", "refs/heads/main"]))
            }
            None => None,
        };
        let daemon = GitDaemon::start(&srv)?;
        let http = if http {
            Some(HttpBackend::start(&srv)?)
        } else {
            None
        };
        let proxy = FaultProxy::git(daemon.addr())?;
        Ok(Env {
            work,
            srv,
            daemon,
            http,
            proxy,
            medium_main,
            large_main,
            forge: Vec::new(),
            client: ops::client(),
            opts: ops::call_options(),
            counter: 0,
        })
    }

    /// The scratch directory.
    pub fn work(&self) -> &Path {
        self.work.path()
    }

    fn fresh(&mut self, prefix: &str) -> (String, PathBuf) {
        self.counter += 1;
        let name = format!("{prefix}-{}.git", self.counter);
        let path = self.srv.join(&name);
        (name, path)
    }

    /// A new path in the scratch directory (not served).
    pub(crate) fn fresh_local(&mut self, prefix: &str) -> (String, PathBuf) {
        self.counter += 1;
        let name = format!("{prefix}-{}.git", self.counter);
        let path = self.work().join(&name);
        (name, path)
    }

    /// A new remote for a push: a copy of `base`, or empty.
    pub(crate) fn new_remote(&mut self, base: Option<&Path>) -> Result<(String, PathBuf)> {
        let (name, path) = self.fresh("push");
        match base {
            Some(b) => history::link_copy(b, &path)?,
            None => {
                init_bare(&path)?;
            }
        }
        // No background gc after a push: it would land in the next run.
        git(&path, &["config", "receive.autogc", "false"]);
        git(&path, &["config", "gc.auto", "0"]);
        Ok((name, path))
    }

    /// Runs `row`.
    pub fn run_row(&mut self, row: Row, s: &Settings) -> Result<RowResult> {
        eprintln!("running {} ...", row.name());
        match row {
            Row::LsRefsGit => {
                let url = self.daemon.url("medium.git");
                self.ls_refs(
                    row,
                    "ls-refs, git:// (protocol v2 where offered), per call",
                    &url,
                    s,
                )
            }
            Row::LsRefsHttp => {
                let url = self
                    .http
                    .as_ref()
                    .context("the http server is not running")?
                    .url("medium.git");
                self.ls_refs(row, "ls-refs, http://, per call", &url, s)
            }
            Row::FetchMedium => {
                let main = self.medium_main.clone();
                self.fetch(
                    row,
                    "full fetch, 5,000-commit fixture",
                    "medium.git",
                    &main,
                    s,
                )
            }
            Row::FetchLarge => {
                let main = self.large_main.clone().context("no large fixture")?;
                let title = format!("full fetch, {}-commit synthetic history", s.large_commits);
                self.fetch(row, &title, "large.git", &main, s)
            }
            Row::Push1 => self.push1(row, s),
            Row::Push1000Loose | Row::Push1000Packed => self.push1000(row, s),
            Row::ForgePush1
            | Row::ForgePushBranch
            | Row::ForgePushLease
            | Row::ForgeLsRefsPrefix
            | Row::ForgeFetch10 => bail!("{} runs through Env::run_forge", row.name()),
            Row::PushLarge => {
                let large = history::build_large(s.large_commits)?;
                let title = format!(
                    "push a whole {}-commit history into an empty repo",
                    s.large_commits
                );
                self.push_rows(row, &title, &large, "main", None, s)
            }
        }
    }

    pub(crate) fn result(row: Row, title: &str) -> RowResult {
        RowResult {
            row,
            title: title.to_owned(),
            series: Impl::ALL.iter().map(|i| (*i, Series::default())).collect(),
            floor: None,
            floor_note: "",
        }
    }

    pub(crate) fn order(round: usize) -> [Impl; 3] {
        let mut o = Impl::ALL;
        o.rotate_left(round % 3);
        o
    }

    fn ls_refs(&mut self, row: Row, title: &str, url: &str, s: &Settings) -> Result<RowResult> {
        let mut res = Self::result(row, title);
        let dir = self.work().to_owned();
        let expected = ops::libgit2_ls_refs(url)?;
        for round in 0..=s.runs {
            for imp in Self::order(round) {
                // Round 0 is the warm-up: a few calls, untimed.
                let calls = if round == 0 { 3 } else { s.calls };
                for _ in 0..calls {
                    let t = Instant::now();
                    let n = match imp {
                        Impl::Git => {
                            ops::run(&mut ops::git_ls_remote(&dir, url))?;
                            expected
                        }
                        Impl::Sluice => ops::sluice_ls_refs(&self.client, url, &self.opts)?,
                        Impl::Libgit2 => ops::libgit2_ls_refs(url)?,
                    };
                    let wall = t.elapsed();
                    if n == 0 {
                        bail!("{} listed no refs", imp.name());
                    }
                    if round > 0 {
                        res.series[idx(imp)].1.add(&Measured {
                            wall,
                            max_rss_kib: None,
                        });
                    }
                }
            }
        }
        Ok(res)
    }

    fn fetch(
        &mut self,
        row: Row,
        title: &str,
        repo: &str,
        main: &str,
        s: &Settings,
    ) -> Result<RowResult> {
        let mut res = Self::result(row, title);
        let url = self.daemon.url(repo);
        for round in 0..=s.runs {
            for imp in Self::order(round) {
                self.counter += 1;
                let dest = self.work().join(format!("fetch-{}.git", self.counter));
                let m = match imp {
                    Impl::Git => {
                        measure::measure_command(&ops::git_clone_bare(self.work(), &url, &dest))?
                    }
                    _ => measure::measure_child(imp, &measure::fetch_args(&url, &dest))?,
                };
                let got = rev_parse(&dest, "refs/heads/main");
                if got.as_deref() != Some(main) {
                    bail!("{} fetched main = {got:?}, expected {main}", imp.name());
                }
                std::fs::remove_dir_all(&dest)?;
                if round > 0 {
                    res.series[idx(imp)].1.add(&m);
                }
            }
        }
        Ok(res)
    }

    /// The bytes the last connection through the proxy sent upstream.
    pub(crate) fn proxied_bytes(&self) -> Result<(u64, u64)> {
        if !self.proxy.wait_idle(Duration::from_secs(60)) {
            bail!("the proxy did not go idle");
        }
        let rec = self
            .proxy
            .connections()
            .into_iter()
            .rev()
            .find(|c| c.service == Some(Service::ReceivePack))
            .context("no receive-pack connection through the proxy")?;
        Ok((rec.bytes_client_to_server, rec.pack_bytes_client_to_server))
    }

    /// Rows that push `branch` of `local` into fresh remotes (copies of
    /// `base`, or empty), one child per in-process push.
    fn push_rows(
        &mut self,
        row: Row,
        title: &str,
        local: &Path,
        branch: &str,
        base: Option<&Path>,
        s: &Settings,
    ) -> Result<RowResult> {
        let mut res = Self::result(row, title);
        let tip = git(local, &["rev-parse", &format!("refs/heads/{branch}")]);
        for round in 0..=s.runs {
            for imp in Self::order(round) {
                let (name, remote) = self.new_remote(base)?;
                let url = if round == 0 {
                    self.proxy.url(&name)
                } else {
                    self.daemon.url(&name)
                };
                let m = match imp {
                    Impl::Git => measure::measure_command(&ops::git_push(
                        local,
                        &url,
                        branch,
                        "refs/heads/main",
                    ))?,
                    _ => measure::measure_child(
                        imp,
                        &measure::push_args(&url, local, branch, "refs/heads/main"),
                    )?,
                };
                let got = rev_parse(&remote, "refs/heads/main");
                if got.as_deref() != Some(tip.as_str()) {
                    bail!("{} pushed main = {got:?}, expected {tip}", imp.name());
                }
                if round == 0 {
                    let (sent, pack) = self.proxied_bytes()?;
                    let se = &mut res.series[idx(imp)].1;
                    se.sent = Some(sent);
                    se.pack_sent = Some(pack);
                } else {
                    res.series[idx(imp)].1.add(&m);
                }
                std::fs::remove_dir_all(&remote)?;
            }
        }
        Ok(res)
    }

    fn push1000(&mut self, row: Row, s: &Settings) -> Result<RowResult> {
        let medium = sluice_testkit::fixtures::cached("medium")?;
        let loose = self.work().join("local-1000-loose.git");
        if !loose.exists() {
            eprintln!("  making 1,000 loose commits on top of the medium fixture ...");
            sluice_testkit::fixtures::copy_of("medium", &loose)?;
            history::add_commits(&loose, "main", 1000, 1000)?;
        }
        let (local, title) = if row == Row::Push1000Packed {
            let packed = self.work().join("local-1000-packed.git");
            if !packed.exists() {
                history::link_copy(&loose, &packed)?;
                git(&packed, &["repack", "-adq"]);
            }
            (packed, "push 1,000 commits (packed: git repack -ad)")
        } else {
            (
                loose,
                "push 1,000 commits (loose, as git commit writes them)",
            )
        };
        self.push_rows(row, title, &local, "main", Some(&medium), s)
    }

    fn push1(&mut self, row: Row, s: &Settings) -> Result<RowResult> {
        let mut res = Self::result(
            row,
            "push 1 commit (loose, 1–4 files edited; in-process: repository kept open)",
        );
        res.floor_note = "a raw client connecting, reading the advertisement, writing one command and a pack made beforehand, reading the report";
        let local = self.work().join("local-push1.git");
        // Three implementations and the raw floor per round.
        let chain = 4 * (s.runs + 1);
        sluice_testkit::fixtures::copy_of("medium", &local)?;
        git(&local, &["branch", "chain", "main"]);
        let commits = history::add_commits(&local, "chain", chain, 1)?;
        let medium = sluice_testkit::fixtures::cached("medium")?;
        let (name, remote) = self.new_remote(Some(&medium))?;
        // In-process callers keep the repository open between calls.
        let gix_repo = gix::open(&local)?;
        let git2_repo = git2::Repository::open(&local)?;
        let mut next = commits.iter();
        for round in 0..=s.runs {
            for imp in Self::order(round) {
                let oid = next.next().expect("enough commits").clone();
                git(&local, &["update-ref", "refs/heads/bench", &oid]);
                let url = if round == 0 {
                    self.proxy.url(&name)
                } else {
                    self.daemon.url(&name)
                };
                let t = Instant::now();
                match imp {
                    Impl::Git => {
                        ops::run(&mut ops::git_push(&local, &url, "bench", "refs/heads/main"))?
                    }
                    Impl::Sluice => {
                        ops::sluice_push_in(
                            &self.client,
                            &url,
                            &gix_repo,
                            "bench",
                            "refs/heads/main",
                            &self.opts,
                        )?;
                    }
                    Impl::Libgit2 => {
                        ops::libgit2_push_in(&url, &git2_repo, "bench", "refs/heads/main")?
                    }
                }
                let wall = t.elapsed();
                let got = rev_parse(&remote, "refs/heads/main");
                if got.as_deref() != Some(oid.as_str()) {
                    bail!("{} pushed main = {got:?}, expected {oid}", imp.name());
                }
                if round == 0 {
                    let (sent, pack) = self.proxied_bytes()?;
                    let se = &mut res.series[idx(imp)].1;
                    se.sent = Some(sent);
                    se.pack_sent = Some(pack);
                } else {
                    res.series[idx(imp)].1.add(&Measured {
                        wall,
                        max_rss_kib: None,
                    });
                }
            }
            if round > 0 {
                let old = rev_parse(&remote, "refs/heads/main").context("the remote's main")?;
                let oid = next.next().expect("enough commits").clone();
                let pack = ops::git_thin_pack(&local, &old, &oid)?;
                let t = Instant::now();
                ops::raw_push(
                    self.daemon.addr(),
                    &name,
                    &old,
                    &oid,
                    "refs/heads/main",
                    &pack,
                )?;
                let wall = t.elapsed();
                if rev_parse(&remote, "refs/heads/main").as_deref() != Some(oid.as_str()) {
                    bail!("the raw push did not move main to {oid}");
                }
                res.floor
                    .get_or_insert_with(Series::default)
                    .add(&Measured {
                        wall,
                        max_rss_kib: None,
                    });
            }
        }
        Ok(res)
    }
}

pub(crate) fn idx(i: Impl) -> usize {
    Impl::ALL
        .iter()
        .position(|k| *k == i)
        .expect("a known impl")
}
