//! The https rows: this client beside `git` on the same lighttpd +
//! `git http-backend` over TLS (a CA made for the run), in one run.
//!
//! `sluice-bench https [--runs N] [--rows ROW,...]`, rows:
//!
//! * `fetch-200` — a fresh bare repository fetches a served pack of
//!   208 MiB (four incompressible 52 MiB files, repacked on the server);
//! * `push-48`, `push-200` — one commit adding a loose, incompressible
//!   48 MiB (200 MiB) file, pushed into a fresh served repository;
//! * `push-1` — the same with 1 MiB (git's `http.postBuffer`: the body is
//!   sent whole, with its length, by both);
//! * `fetch-48-throttled`, `push-48-throttled` — 48 MiB through the
//!   testkit's fault proxy (ending TLS) throttled to 2 MiB/s each way, this
//!   client with a 5 s attempt timeout: a transfer of 24 s that moves is
//!   never cut.
//!
//! Each measurement is one process under `/usr/bin/time -f %M` (peak RSS
//! from `wait4`): `git` itself, or this binary as `sluice-bench
//! https-child …`, whose wall time is measured inside around the call, as
//! the other rows measure theirs. Implementations alternate within each
//! round; the machine's load average is printed beside each row.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_git::{CallOptions, GitClient, HttpsConfig, PushOptions};
use sluice_policy::{Bounds, OutcomeKind, Policy};
use sluice_testkit::{repo, FaultProxy, HttpBackend, ServerCert, TestPki};

use crate::stats::{fmt_kib, fmt_range, fmt_secs, median, min_max, secs};

/// The rows, in the order they run.
pub const ROWS: [&str; 6] = [
    "push-1",
    "push-48",
    "push-48-throttled",
    "fetch-48-throttled",
    "push-200",
    "fetch-200",
];

/// The throttled rows' rate: 2 MiB/s.
const THROTTLE: u64 = 2 << 20;

/// The attempt timeout of this client in the throttled rows.
const THROTTLED_ATTEMPT: Duration = Duration::from_secs(5);

/// One measured run.
struct Run {
    wall: Duration,
    kib: Option<u64>,
}

/// `sluice-bench https …`.
pub fn main(args: &[String]) -> Result<()> {
    let mut runs = 3usize;
    let mut rows: Vec<String> = ROWS.iter().map(|s| s.to_string()).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = it.next().context("--runs N")?.parse()?,
            "--rows" => {
                rows = it
                    .next()
                    .context("--rows ROW,...")?
                    .split(',')
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = rows.iter().find(|r| !ROWS.contains(&r.as_str())) {
                    bail!("unknown https row {bad}; rows: {}", ROWS.join(" "));
                }
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let w = World::start()?;
    let mut table = Vec::new();
    for row in &rows {
        let line = w.row(row, runs)?;
        println!("{line}");
        table.push(line);
    }
    println!("\n| row | git wall | sluice wall | git peak RSS | sluice peak RSS | load avg |");
    println!("|---|---|---|---|---|---|");
    for line in table {
        println!("{line}");
    }
    Ok(())
}

/// The servers and fixtures of one run.
struct World {
    dir: tempfile::TempDir,
    pki: TestPki,
    tls: HttpBackend,
    proxy: FaultProxy,
    _plain: HttpBackend,
    ca: PathBuf,
}

impl World {
    fn start() -> Result<World> {
        let dir = tempfile::Builder::new()
            .prefix("sluice-https-bench-")
            .tempdir()?;
        let srv = dir.path().join("srv");
        std::fs::create_dir_all(&srv)?;
        let pki = TestPki::new().context("a test CA")?;
        let tls = HttpBackend::start_https(&srv, &pki.server(ServerCert::Good))?;
        let plain = HttpBackend::start(&srv)?;
        let proxy = FaultProxy::https(plain.addr(), &pki.server(ServerCert::Good))?;
        let ca = pki.ca_file().to_path_buf();
        Ok(World {
            dir,
            pki,
            tls,
            proxy,
            _plain: plain,
            ca,
        })
    }

    fn srv(&self, name: &str) -> PathBuf {
        self.dir.path().join("srv").join(name)
    }

    /// A fresh bare repository served at `name`, accepting pushes.
    fn fresh_served(&self, name: &str) -> Result<PathBuf> {
        let p = self.srv(name);
        if p.exists() {
            std::fs::remove_dir_all(&p)?;
        }
        repo::init_bare(&p)?;
        HttpBackend::enable_anonymous_push(&p)?;
        Ok(p)
    }

    fn row(&self, row: &str, runs: usize) -> Result<String> {
        self.proxy.throttle(None);
        self.proxy.throttle_upload(None);
        let throttled = row.ends_with("-throttled");
        let mib: usize = row
            .split('-')
            .nth(1)
            .and_then(|n| n.parse().ok())
            .context("a size")?;
        let base = |name: &str| {
            if throttled {
                self.proxy.http_url(&format!("/git/{name}"))
            } else {
                self.tls.url(name)
            }
        };
        if throttled {
            self.proxy.throttle(Some(THROTTLE));
            self.proxy.throttle_upload(Some(THROTTLE));
        }
        let attempt = if throttled {
            THROTTLED_ATTEMPT
        } else {
            Duration::from_secs(600)
        };
        let mut git = Vec::new();
        let mut ours = Vec::new();
        if row.starts_with("fetch") {
            let name = format!("f{mib}.git");
            self.served_pack(&name, mib)?;
            let url = base(&name);
            for round in 0..=runs {
                let dest = self.dir.path().join(format!("dest-{row}-{round}"));
                let g = self.git_fetch(&url, &dest)?;
                let dest = self.dir.path().join(format!("dest-{row}-{round}-s"));
                let s = self.child(&["fetch", &url, &dest.display().to_string()], attempt)?;
                if round > 0 {
                    git.push(g);
                    ours.push(s);
                }
            }
        } else {
            let local = self.local_with(mib)?;
            let tip = repo::git(&local, &["rev-parse", "refs/heads/main"]);
            for round in 0..=runs {
                let name = format!("p{mib}.git");
                self.fresh_served(&name)?;
                let g = self.git_push(&base(&name), &local, &tip)?;
                self.fresh_served(&name)?;
                let s = self.child(
                    &[
                        "push",
                        &base(&name),
                        &local.display().to_string(),
                        tip.trim(),
                    ],
                    attempt,
                )?;
                if round > 0 {
                    git.push(g);
                    ours.push(s);
                }
            }
        }
        Ok(format!(
            "| {row} | {} | {} | {} | {} | {} |",
            wall(&git),
            wall(&ours),
            peak(&git),
            peak(&ours),
            load()
        ))
    }

    /// A served repository `name` holding one commit with `mib` MiB in
    /// four incompressible files, repacked (the server sends a stored
    /// pack).
    fn served_pack(&self, name: &str, mib: usize) -> Result<()> {
        let p = self.srv(name);
        if p.exists() {
            return Ok(());
        }
        repo::init_bare(&p)?;
        let quarter = (mib << 20) / 4;
        commit_files(&p, &[quarter, quarter, quarter, quarter], 1)?;
        repo::try_git(&p, &["repack", "-adq"])?;
        Ok(())
    }

    /// A local bare repository whose main is one commit adding a loose
    /// incompressible file of `mib` MiB.
    fn local_with(&self, mib: usize) -> Result<PathBuf> {
        let p = self.dir.path().join(format!("local-{mib}.git"));
        if p.exists() {
            std::fs::remove_dir_all(&p)?;
        }
        repo::init_bare(&p)?;
        commit_files(&p, &[mib << 20], 2)?;
        Ok(p)
    }

    fn git_fetch(&self, url: &str, dest: &Path) -> Result<Run> {
        repo::init_bare(dest)?;
        let mut c = Command::new("git");
        c.current_dir(dest)
            .env("GIT_SSL_CAINFO", &self.ca)
            // HTTP/1.1, as this client speaks it (lighttpd 1.4.69's HTTP/2
            // broke git's pushes with a framing error).
            .args(["-c", "http.version=HTTP/1.1"])
            .args(["fetch", "-q", url, "+refs/heads/*:refs/remotes/o/*"]);
        timed(c, false)
    }

    fn git_push(&self, url: &str, local: &Path, tip: &str) -> Result<Run> {
        let mut c = Command::new("git");
        c.current_dir(local)
            .env("GIT_SSL_CAINFO", &self.ca)
            // HTTP/1.1, as this client speaks it (lighttpd 1.4.69's HTTP/2
            // broke git's pushes with a framing error).
            .args(["-c", "http.version=HTTP/1.1"])
            .args([
                "push",
                "-q",
                url,
                &format!("{}:refs/heads/main", tip.trim()),
            ]);
        timed(c, false)
    }

    fn child(&self, args: &[&str], attempt: Duration) -> Result<Run> {
        let exe = std::env::current_exe()?;
        let mut c = Command::new(exe);
        c.arg("https-child")
            .arg(&self.ca)
            .arg(attempt.as_millis().to_string())
            .args(args);
        let _ = &self.pki;
        timed(c, true)
    }
}

/// One commit on `main` of bare `repo` adding incompressible files of
/// `sizes` bytes (written to disk and hashed by `git hash-object -w`, so
/// they are loose objects).
fn commit_files(repo_path: &Path, sizes: &[usize], seed: u64) -> Result<()> {
    let mut entries = String::new();
    for (i, &size) in sizes.iter().enumerate() {
        let file = repo_path.join(format!("blob-{i}.tmp"));
        write_noise(&file, size, seed * 100 + i as u64)?;
        let id = repo::try_git(
            repo_path,
            &["hash-object", "-w", &file.display().to_string()],
        )?;
        std::fs::remove_file(&file)?;
        entries.push_str(&format!("100644 blob {}\tbig-{i}.bin\n", id.trim()));
    }
    let tree = repo::try_git_with_input(repo_path, &["mktree"], entries.as_bytes())?;
    let commit = repo::try_git(repo_path, &["commit-tree", tree.trim(), "-m", "big"])?;
    repo::try_git(repo_path, &["update-ref", "refs/heads/main", commit.trim()])?;
    Ok(())
}

fn write_noise(path: &Path, size: usize, seed: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    // Distinct seeds give distinct streams (an odd multiplier keeps them
    // apart; `seed | 1` alone made 100 and 101 the same).
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut left = size;
    while left > 0 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let n = left.min(8);
        f.write_all(&b[..n])?;
        left -= n;
    }
    f.flush()?;
    Ok(())
}

/// Runs `c` under `/usr/bin/time -f %M`: the peak RSS from its `wait4`;
/// the wall time around the process, or (`inside`) what it printed as
/// `elapsed_us=`.
fn timed(c: Command, inside: bool) -> Result<Run> {
    let rss = tempfile::NamedTempFile::new()?;
    let mut t = Command::new("/usr/bin/time");
    t.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(rss.path())
        .arg(c.get_program())
        .args(c.get_args());
    if let Some(d) = c.get_current_dir() {
        t.current_dir(d);
    }
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            t.env(k, v);
        }
    }
    t.stdin(Stdio::null());
    let start = Instant::now();
    let out = t.output().with_context(|| format!("running {c:?}"))?;
    let outside = start.elapsed();
    if !out.status.success() {
        bail!(
            "{c:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout).trim_end(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    let kib = std::fs::read_to_string(rss.path())
        .ok()
        .and_then(|s| s.lines().rev().find_map(|l| l.trim().parse().ok()));
    let wall = if inside {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let us: u64 = stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("elapsed_us="))
            .context("the child printed no elapsed_us")?
            .parse()?;
        Duration::from_micros(us)
    } else {
        outside
    };
    Ok(Run { wall, kib })
}

fn wall(runs: &[Run]) -> String {
    let xs: Vec<f64> = runs.iter().map(|r| secs(r.wall)).collect();
    match (median(&xs), min_max(&xs)) {
        (Some(m), Some((lo, hi))) => format!("{} ({})", fmt_secs(m), fmt_range(lo, hi)),
        _ => "-".into(),
    }
}

fn peak(runs: &[Run]) -> String {
    let xs: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.kib.map(|k| k as f64))
        .collect();
    median(&xs).map(fmt_kib).unwrap_or_else(|| "-".into())
}

/// The one-minute load average now.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// `sluice-bench https-child <ca> <attempt_ms> fetch <url> <dest> | push
/// <url> <local> <tip>`: one call, printing `elapsed_us=`.
pub fn child_main(args: &[String]) -> Result<()> {
    let usage = "usage: sluice-bench https-child <ca> <attempt_ms> fetch <url> <dest> | push <url> <local> <tip>";
    let [ca, attempt, op, rest @ ..] = args else {
        bail!(usage);
    };
    let attempt = Duration::from_millis(attempt.parse().context(usage)?);
    let client = GitClient::new(Arc::new(Policy::default()))
        .with_https(HttpsConfig::new().with_ca_file(ca)?);
    let opts = CallOptions::new().bounds(Bounds::new(Duration::from_secs(600), attempt, 1));
    if let ("fetch", [_, dest]) = (op.as_str(), rest) {
        repo::init_bare(Path::new(dest))?;
    }
    let t = Instant::now();
    match (op.as_str(), rest) {
        ("fetch", [url, dest]) => {
            let r = gix::open(dest)?;
            let out = client.fetch(url, &["+refs/heads/*:refs/remotes/o/*".into()], &r, &opts)?;
            if out.kind != OutcomeKind::Succeeded {
                bail!("fetch: {:?} {:?}", out.kind, out.attempts);
            }
        }
        ("push", [url, local, tip]) => {
            let r = gix::open(local)?;
            let id = gix::ObjectId::from_hex(tip.as_bytes())?;
            let update = sluice_git::RefUpdate::fast_forward(id, "refs/heads/main");
            let out = client.push(url, &[update], &PushOptions::default(), &r, &opts)?;
            if out.kind != OutcomeKind::Succeeded {
                bail!("push: {:?} {:?}", out.kind, out.attempts);
            }
        }
        _ => bail!(usage),
    }
    println!("elapsed_us={}", t.elapsed().as_micros());
    Ok(())
}
