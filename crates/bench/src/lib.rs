//! Side-by-side benchmarks of sluice-remote against `git` (a subprocess)
//! and libgit2 (in-process, through the `git2` crate), on loopback.
//!
//! The bench binary (`cargo run --release -p sluice-bench -- [--large]
//! [--runs N] [--rows a,b,...]`) builds its fixtures (the testkit's cached
//! `medium` fixture; with `--large` a synthetic 16,600-commit history made
//! by [`history`] through `git fast-import`), starts `git daemon` and
//! `git http-backend` behind lighttpd on 127.0.0.1, and runs each row of
//! [`rows::Row`] for the three implementations, alternating, printing
//! medians, min–max and ratios, then the whole table in markdown.
//!
//! * [`ops`] — the measured calls, one per implementation.
//! * [`child`] — one call in a child process, for peak memory
//!   (`/usr/bin/time -f %M`, the same for every implementation).
//! * [`history`] — the synthetic histories.
//! * [`forge`] — the forge-scale rows (20,000 and 100,000 refs).
//! * [`floor`] — a raw client replaying a request in one write.
//! * [`concurrent`] — many operations at once from one process against as
//!   many `git` processes.
//! * [`rows`] — the rows: fixtures, servers, rounds, results.
//! * [`stats`] — medians, ranges and formatting.
//! * [`maintenance`] — a repository fetched into a thousand times, beside
//!   git: packs left, fetch times first and last.
//! * [`experiment`] — the push's counting step with and without a
//!   delta-base cache and threads (sizing a change to `crates/git`).
//!
//! The criterion benchmarks (`cargo bench -p sluice-bench`) measure the
//! in-process micro figures: the policy's own cost per call and ls-refs per
//! call against a loopback daemon.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod child;
pub mod concurrent;
pub mod experiment;
pub mod floor;
pub mod forge;
pub mod history;
pub mod https;
pub mod maintenance;
pub mod measure;
pub mod ops;
pub mod polls;
pub mod rows;
pub mod stats;

use anyhow::{bail, Context, Result};

use rows::{Env, Row, Settings};

/// The usage text.
pub const USAGE: &str = "\
usage: sluice-bench [--large] [--forge] [--forge-refs N,...] [--commits N] [--runs N] [--calls N] [--rows ROW,...]
                    [--conc ls-refs,push,fetch] [--conc-levels 1,8,32,64] [--no-libgit2]
       sluice-bench serve [--large] [--commits N]
       sluice-bench build-large [--commits N]
       sluice-bench https [--runs N] [--rows push-1,push-48,push-48-throttled,fetch-48-throttled,push-200,fetch-200]
       sluice-bench count-experiment <repo> <rev> [<hidden rev>]
       sluice-bench maintenance [--fetches N] [--window N] [--dates new|old]
       sluice-bench child <sluice|libgit2> fetch <url> <dest>
       sluice-bench child <sluice|libgit2> push <url> <local> <branch> <dst>

rows: ls-refs-git ls-refs-http fetch-medium fetch-large push-1
      push-1000-loose push-1000-packed push-large
      forge-push-1 forge-push-branch forge-push-lease forge-ls-refs-prefix
      forge-fetch-10
      (default: all; the large rows only with --large, the forge rows only
      with --forge)
--forge-refs N,...  the forge fixtures' extra refs: 20000, 100000 (default both)
--conc OPS   the concurrency rows (alone unless --rows is given too)
--conc-levels N,...  operations at once (default 1,8,32,64)
--no-libgit2 leave libgit2 out of the forge rows
--runs N     timed rounds per row (default 5), after one warm-up round
--calls N    calls per implementation per round in the ls-refs rows (default 20)
--commits N  commits of the large history (default 16600)";

/// Parsed command line of the main mode.
#[derive(Debug)]
struct Args {
    large: bool,
    settings: Settings,
}

fn parse(args: &[String]) -> Result<Args> {
    let mut large = false;
    let mut forge = false;
    let mut forge_refs = forge::SIZES.to_vec();
    let mut conc: Vec<concurrent::Kind> = Vec::new();
    let mut conc_levels = concurrent::LEVELS.to_vec();
    let mut no_libgit2 = false;
    let mut runs = 5;
    let mut calls = 20;
    let mut commits = 16_600;
    let mut rows: Option<Vec<Row>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<String> {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--large" => large = true,
            "--forge" => forge = true,
            "--no-libgit2" => no_libgit2 = true,
            "--conc" => {
                for k in value("--conc")?.split(',').filter(|s| !s.is_empty()) {
                    conc.push(
                        concurrent::Kind::parse(k)
                            .with_context(|| format!("unknown concurrent operation {k:?}"))?,
                    );
                }
            }
            "--conc-levels" => {
                conc_levels = value("--conc-levels")?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|n| n.parse::<usize>().context("--conc-levels"))
                    .collect::<Result<_>>()?;
                if conc_levels.contains(&0) {
                    bail!("--conc-levels must be at least 1");
                }
            }
            "--forge-refs" => {
                forge_refs = Vec::new();
                for n in value("--forge-refs")?.split(',').filter(|s| !s.is_empty()) {
                    let n: usize = n.parse().context("--forge-refs")?;
                    forge::fixture_name(n)?;
                    forge_refs.push(n);
                }
            }
            "--runs" => runs = value("--runs")?.parse().context("--runs")?,
            "--calls" => calls = value("--calls")?.parse().context("--calls")?,
            "--commits" => commits = value("--commits")?.parse().context("--commits")?,
            "--rows" => {
                let mut v = Vec::new();
                for r in value("--rows")?.split(',').filter(|s| !s.is_empty()) {
                    v.push(Row::parse(r).with_context(|| format!("unknown row {r:?}"))?);
                }
                rows = Some(v);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if runs == 0 || calls == 0 || commits < 2 {
        bail!("--runs, --calls must be at least 1 and --commits at least 2");
    }
    let rows = match rows {
        Some(r) => {
            if r.iter().any(|r| r.large()) {
                large = true;
            }
            r
        }
        None if !conc.is_empty() => Vec::new(),
        None => Row::ALL
            .into_iter()
            .filter(|r| (large || !r.large()) && (forge || !r.forge()))
            .collect(),
    };
    Ok(Args {
        large,
        settings: Settings {
            runs,
            calls,
            large_commits: commits,
            rows,
            forge_refs,
            conc,
            conc_levels,
            no_libgit2,
        },
    })
}

/// The bench binary's entry point (`args` without the program name).
pub fn main_with_args(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("child") => return child::child_main(&args[1..]),
        Some("build-large") => {
            let a = parse(&args[1..])?;
            let p = history::build_large(a.settings.large_commits)?;
            println!("{}", p.display());
            return Ok(());
        }
        Some("serve") => return serve(&args[1..]),
        Some("count-experiment") => return experiment::main(&args[1..]),
        Some("poll-points") => return polls::main(&args[1..]),
        Some("https") => return https::main(&args[1..]),
        Some("https-child") => return https::child_main(&args[1..]),
        Some("maintenance") => return maintenance::main(&args[1..]),
        _ => {}
    }
    let a = parse(args)?;
    let s = a.settings;
    let http = s.rows.contains(&Row::LsRefsHttp) || !s.conc.is_empty();
    let env_large = if a.large { Some(s.large_commits) } else { None };
    let mut env = Env::start(env_large, http)?;
    print_context(&s);
    let mut results = Vec::new();
    for row in &s.rows {
        if row.forge() {
            for &n in &s.forge_refs {
                let r = env.run_forge(*row, n, &s)?;
                r.print();
                results.push(r);
            }
            continue;
        }
        let r = env.run_row(*row, &s)?;
        r.print();
        results.push(r);
    }
    let mut levels = Vec::new();
    for kind in &s.conc {
        levels.extend(env.run_concurrent(*kind, &s.conc_levels, &s)?);
    }
    if !results.is_empty() {
        rows::print_markdown(&results);
    }
    if !levels.is_empty() {
        concurrent::print_markdown(&levels);
    }
    Ok(())
}

fn print_context(s: &Settings) {
    let git_version = std::process::Command::new("git")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!(
        "sluice-bench: {} timed rounds per row (+1 warm-up), {} ls-refs calls per impl per round; {git_version}; libgit2 {}; {} cores",
        s.runs,
        s.calls,
        {
            let v = git2::Version::get();
            let (a, b, c) = v.libgit2_version();
            format!("{a}.{b}.{c}")
        },
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    );
}

/// `serve`: start the servers on the fixtures and wait for stdin to close
/// (for profiling one call by hand with `child`).
fn serve(args: &[String]) -> Result<()> {
    let a = parse(args)?;
    let env = Env::start(
        if a.large {
            Some(a.settings.large_commits)
        } else {
            None
        },
        true,
    )?;
    println!("served dir: {}", env.srv.display());
    println!("git://   {}", env.daemon.url("medium.git"));
    if let Some(h) = &env.http {
        println!("http://  {}", h.url("medium.git"));
    }
    if a.large {
        println!("git://   {}", env.daemon.url("large.git"));
    }
    println!("(close stdin to stop)");
    let mut sink = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut sink);
    Ok(())
}
