//! `sluice-bench maintenance [--fetches N] [--window N] [--dates new|old]`:
//! a repository fetched into again and again, beside git in one run
//! (issue 43).
//!
//! Both start as bare clones of the medium fixture served by `git daemon`.
//! Each round commits one new commit on the server's `main` (untimed; dated
//! a minute after the one before, after the fixture's tip, as a service's
//! commits would be — or, with `--dates old`, all at the testkit's fixed
//! date, before the fixture's history: the negotiation must cope), then
//! fetches it into each repository — sluice through one `GitClient` and one
//! repository handle kept open (its maintenance as configured by default:
//! `gc.autoPackLimit` 50), git by `git fetch` (its own `gc --auto` after
//! it) — each timed whole. Then: the packs left, the mean of the first
//! and the last `window` fetches, a fetch that brings nothing (median of
//! 11), and a one-commit push (median of 11, each a new commit).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use sluice_git::{CallOptions, GitClient};

use crate::ops;

/// Parsed arguments.
struct Args {
    fetches: usize,
    window: usize,
    /// Commits dated after the fixture's tip (else at the testkit's fixed
    /// date, older than the fixture's history).
    new_dates: bool,
}

fn parse(args: &[String]) -> Result<Args> {
    let mut a = Args {
        fetches: 1000,
        window: 100,
        new_dates: true,
    };
    let mut it = args.iter();
    while let Some(x) = it.next() {
        let mut value = |name: &str| -> Result<usize> {
            it.next()
                .with_context(|| format!("{name} needs a value"))?
                .parse()
                .with_context(|| name.to_string())
        };
        match x.as_str() {
            "--fetches" => a.fetches = value("--fetches")?,
            "--window" => a.window = value("--window")?,
            "--dates" => {
                a.new_dates = match it.next().map(String::as_str) {
                    Some("new") => true,
                    Some("old") => false,
                    other => bail!("--dates needs new or old, not {other:?}"),
                }
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    if a.window == 0 || a.fetches < a.window {
        bail!("--window must be at least 1 and at most --fetches");
    }
    Ok(a)
}

fn packs(repo: &Path) -> usize {
    std::fs::read_dir(repo.join("objects/pack"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
        .unwrap_or(0)
}

fn loose(repo: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(repo.join("objects")) else {
        return 0;
    };
    dirs.filter_map(|e| e.ok())
        .filter(|e| e.file_name().len() == 2)
        .map(|e| std::fs::read_dir(e.path()).map(|d| d.count()).unwrap_or(0))
        .sum()
}

fn mean_ms(xs: &[Duration]) -> f64 {
    xs.iter().map(|d| d.as_secs_f64() * 1000.0).sum::<f64>() / xs.len() as f64
}

fn median_ms(xs: &[Duration]) -> f64 {
    let v: Vec<f64> = xs.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    crate::stats::median(&v).unwrap_or(0.0)
}

/// One new commit on the bare `repo`'s `main` adding `commits/<n>.txt` (as
/// `sluice_testkit::repo::commit_on` does), dated `when` (seconds), through
/// the index file `index`.
fn commit_at(repo: &Path, index: &Path, n: usize, when: u64) -> Result<()> {
    use std::io::Write as _;
    use std::process::Stdio;
    let date = format!("{when} +0000");
    let git = |args: &[&str], input: Option<&str>| -> Result<String> {
        let mut cmd = sluice_testkit::repo::git_command(repo);
        cmd.env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .env("GIT_INDEX_FILE", index)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let mut stdin = child.stdin.take().context("git's stdin")?;
        if let Some(input) = input {
            stdin.write_all(input.as_bytes())?;
        }
        drop(stdin);
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let parent = git(&["rev-parse", "--verify", "refs/heads/main"], None)?;
    git(&["read-tree", &parent], None)?;
    let blob = git(
        &["hash-object", "-w", "--stdin"],
        Some(&format!("fetch {n}\n")),
    )?;
    let entry = format!("100644,{blob},commits/{n}.txt");
    git(&["update-index", "--add", "--cacheinfo", &entry], None)?;
    let tree = git(&["write-tree"], None)?;
    let message = format!("fetch {n}");
    let commit = git(&["commit-tree", &tree, "-p", &parent, "-m", &message], None)?;
    git(&["update-ref", "refs/heads/main", &commit, &parent], None)?;
    std::fs::remove_file(index).ok();
    Ok(())
}

/// CPU time (user + system) used so far, in ms: this process's own, and
/// that of its children it waited for (`/proc/self/stat`, clock ticks of
/// `tick_ms`).
fn cpu_ms(tick_ms: f64) -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis, from `state`.
    let f: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0) as f64;
    // utime, stime, cutime, cstime: fields 14–17, here 11–14.
    ((at(11) + at(12)) * tick_ms, (at(13) + at(14)) * tick_ms)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when unknown).
fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(100)
}

/// The object count of the server's `Total N …` line, if it sent one.
fn server_total(messages: &[String]) -> Option<u64> {
    messages
        .iter()
        .filter_map(|m| m.trim().strip_prefix("Total "))
        .find_map(|m| m.split(' ').next()?.parse().ok())
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let t0 = Instant::now();
    f()?;
    Ok(t0.elapsed())
}

/// The served repository (the medium fixture behind `git daemon`) and its
/// twin bare clones, one for each tool.
/// Fields drop in order: the daemon stops and the handle closes before the
/// directory goes.
struct Setup {
    /// Serves `served` until the setup is dropped.
    _daemon: sluice_testkit::GitDaemon,
    served: PathBuf,
    url: String,
    /// sluice's clone, and its one handle kept open throughout.
    ours: PathBuf,
    repo: gix::Repository,
    /// git's clone.
    theirs: PathBuf,
    /// Holds everything above; removed when dropped.
    dir: tempfile::TempDir,
}

/// The refspec every fetch of both tools uses.
const SPEC: &str = "+refs/heads/main:refs/remotes/origin/main";

/// Serves the medium fixture and clones it twice with git.
fn set_up() -> Result<Setup> {
    let dir = tempfile::tempdir()?;
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(&srv)?;
    let medium = sluice_testkit::fixtures::cached("medium").context("medium fixture")?;
    let served = srv.join("s.git");
    crate::history::link_copy(&medium, &served)?;
    let daemon = sluice_testkit::GitDaemon::start(&srv)?;
    let url = daemon.url("s.git");
    let ours = dir.path().join("sluice.git");
    let theirs = dir.path().join("git.git");
    for dest in [&ours, &theirs] {
        ops::run(&mut ops::git_clone_bare(dir.path(), &url, dest))?;
    }
    let repo = gix::open(&ours).context("gix::open")?;
    Ok(Setup {
        _daemon: daemon,
        served,
        url,
        ours,
        repo,
        theirs,
        dir,
    })
}

/// One sluice fetch into the kept-open handle; the objects the server
/// said it sent (0 when it said nothing).
fn fetch_ours(client: &GitClient, opts: &CallOptions, s: &Setup) -> Result<u64> {
    let o = client.fetch(&s.url, &[SPEC.to_string()], &s.repo, opts)?;
    if o.kind != sluice_policy::OutcomeKind::Succeeded {
        bail!("sluice fetch: {:?} {:?}", o.kind, o.error);
    }
    Ok(server_total(&o.remote_messages).unwrap_or(0))
}

/// One `git fetch` into git's clone.
fn fetch_theirs(s: &Setup) -> Result<()> {
    ops::run(&mut ops::git_fetch_into(&s.theirs, &s.url, SPEC))
}

/// What the fetch series measured, fetch by fetch.
#[derive(Default)]
struct Series {
    /// Wall time of each fetch: sluice's, git's.
    t_ours: Vec<Duration>,
    t_theirs: Vec<Duration>,
    /// Client CPU of each fetch (load moves wall time more): sluice's in
    /// this process, git's in its `git fetch` children.
    c_ours: Vec<f64>,
    c_theirs: Vec<f64>,
    /// Objects the server sent each sluice fetch.
    sent: Vec<u64>,
}

/// The fetches of one new commit each, the tools alternating which goes
/// first, with a line of figures every 100.
fn fetch_series(a: &Args, s: &Setup, client: &GitClient, opts: &CallOptions) -> Result<Series> {
    let tip_date: u64 =
        sluice_testkit::repo::git(&s.served, &["log", "-1", "--format=%ct", "main"])
            .parse()
            .context("the fixture tip's date")?;
    let index = s.dir.path().join("bench-index");
    let tick_ms = 1000.0 / clock_ticks() as f64;
    let mut x = Series::default();
    for n in 0..a.fetches {
        if a.new_dates {
            commit_at(&s.served, &index, n, tip_date + 60 * (n as u64 + 1))?;
        } else {
            sluice_testkit::repo::commit_on(&s.served, "main", &format!("fetch {n}"));
        }
        let run_ours = |x: &mut Series| -> Result<()> {
            let c0 = cpu_ms(tick_ms).0;
            let t0 = Instant::now();
            let sent = fetch_ours(client, opts, s)?;
            x.t_ours.push(t0.elapsed());
            x.sent.push(sent);
            x.c_ours.push(cpu_ms(tick_ms).0 - c0);
            Ok(())
        };
        let run_theirs = |x: &mut Series| -> Result<()> {
            let c0 = cpu_ms(tick_ms).1;
            x.t_theirs.push(timed(|| fetch_theirs(s))?);
            x.c_theirs.push(cpu_ms(tick_ms).1 - c0);
            Ok(())
        };
        // Alternating which goes first.
        if n % 2 == 0 {
            run_ours(&mut x)?;
            run_theirs(&mut x)?;
        } else {
            run_theirs(&mut x)?;
            run_ours(&mut x)?;
        }
        if (n + 1) % 100 == 0 {
            let objects = x.sent[n + 1 - 100..].iter().sum::<u64>() as f64 / 100.0;
            let cpu = |c: &[f64]| c[n + 1 - 100..].iter().sum::<f64>() / 100.0;
            println!(
                "  {:>5} fetches: sluice {} packs, last 100 {:.1} ms ({:.1} ms CPU), {objects:.1} objects sent each; git {} packs {} loose, last 100 {:.1} ms ({:.1} ms CPU)",
                n + 1,
                packs(&s.ours),
                mean_ms(&x.t_ours[n + 1 - 100..]),
                cpu(&x.c_ours),
                packs(&s.theirs),
                loose(&s.theirs),
                mean_ms(&x.t_theirs[n + 1 - 100..]),
                cpu(&x.c_theirs),
            );
        }
    }
    Ok(x)
}

/// The end of the run: a fetch that brings nothing and a one-commit push,
/// 11 times each per tool (wall times: sluice's, git's).
struct Finals {
    n_ours: Vec<Duration>,
    n_theirs: Vec<Duration>,
    p_ours: Vec<Duration>,
    p_theirs: Vec<Duration>,
}

/// Measures the final empty fetches, then the one-commit pushes (each a
/// new commit on a branch of its own per side).
fn final_fetch_and_push(s: &Setup, client: &GitClient, opts: &CallOptions) -> Result<Finals> {
    let (mut n_ours, mut n_theirs) = (Vec::new(), Vec::new());
    for _ in 0..11 {
        n_ours.push(timed(|| fetch_ours(client, opts, s).map(|_| ()))?);
        n_theirs.push(timed(|| fetch_theirs(s))?);
    }
    let (mut p_ours, mut p_theirs) = (Vec::new(), Vec::new());
    for (local, branch) in [(&s.ours, "work-sluice"), (&s.theirs, "work-git")] {
        sluice_testkit::repo::git(
            local,
            &[
                "update-ref",
                &format!("refs/heads/{branch}"),
                "refs/remotes/origin/main",
            ],
        );
    }
    for n in 0..11 {
        sluice_testkit::repo::commit_on(&s.ours, "work-sluice", &format!("push {n}"));
        sluice_testkit::repo::commit_on(&s.theirs, "work-git", &format!("push {n}"));
        p_ours.push(timed(|| {
            ops::sluice_push_in(
                client,
                &s.url,
                &s.repo,
                "work-sluice",
                "refs/heads/work-sluice",
                opts,
            )
            .map(|_| ())
        })?);
        p_theirs.push(timed(|| {
            ops::run(&mut ops::git_push(
                &s.theirs,
                &s.url,
                "work-git",
                "refs/heads/work-git",
            ))
        })?);
    }
    Ok(Finals {
        n_ours,
        n_theirs,
        p_ours,
        p_theirs,
    })
}

/// The table of figures, both tools side by side.
fn print_figures(a: &Args, s: &Setup, x: &Series, f: &Finals) {
    let w = a.window;
    let sent_mean = |xs: &[u64]| xs.iter().sum::<u64>() as f64 / xs.len() as f64;
    let (sent_first, sent_last) = (sent_mean(&x.sent[..w]), sent_mean(&x.sent[a.fetches - w..]));
    let cpu_mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let cpu_first = |c: &[f64]| cpu_mean(&c[..w]);
    let cpu_last = |c: &[f64]| cpu_mean(&c[c.len() - w..]);
    let first = |t: &[Duration]| mean_ms(&t[..w]);
    let last = |t: &[Duration]| mean_ms(&t[t.len() - w..]);
    let (t_ours, t_theirs, c_ours, c_theirs) = (&x.t_ours, &x.t_theirs, &x.c_ours, &x.c_theirs);
    let fsck = |p: &Path| {
        sluice_testkit::repo::fsck(p)
            .map(|()| "clean".to_string())
            .unwrap_or_else(|e| format!("NOT CLEAN: {e}"))
    };
    println!();
    println!(
        "| after {} fetches of one commit | git | **sluice** | sluice / git |",
        a.fetches
    );
    println!("|---|---|---|---|");
    println!(
        "| packs left (git: and loose objects) | {} packs, {} loose | **{} packs** | — |",
        packs(&s.theirs),
        loose(&s.theirs),
        packs(&s.ours)
    );
    println!(
        "| mean of the first {w} fetches | {:.1} ms | **{:.1} ms** | {:.2}× |",
        first(t_theirs),
        first(t_ours),
        first(t_ours) / first(t_theirs)
    );
    println!(
        "| mean of the last {w} fetches | {:.1} ms | **{:.1} ms** | {:.2}× |",
        last(t_theirs),
        last(t_ours),
        last(t_ours) / last(t_theirs)
    );
    println!(
        "| last {w} against first {w} | {:.2}× | **{:.2}×** | — |",
        last(t_theirs) / first(t_theirs),
        last(t_ours) / first(t_ours)
    );
    println!(
        "| client CPU per fetch (user + system), mean of the first {w} | {:.1} ms | **{:.1} ms** | {:.2}× |",
        cpu_first(c_theirs),
        cpu_first(c_ours),
        cpu_first(c_ours) / cpu_first(c_theirs)
    );
    println!(
        "| client CPU per fetch, mean of the last {w} | {:.1} ms | **{:.1} ms** | {:.2}× |",
        cpu_last(c_theirs),
        cpu_last(c_ours),
        cpu_last(c_ours) / cpu_last(c_theirs)
    );
    println!(
        "| client CPU, last {w} against first {w} | {:.2}× | **{:.2}×** | — |",
        cpu_last(c_theirs) / cpu_first(c_theirs),
        cpu_last(c_ours) / cpu_first(c_ours)
    );
    println!(
        "| objects the server sent per sluice fetch, first {w} / last {w} (mean) | — | **{sent_first:.1} / {sent_last:.1}** | — |"
    );
    println!(
        "| slowest fetch (a consolidation's, for sluice) | {:.1} ms | **{:.1} ms** | — |",
        t_theirs
            .iter()
            .max()
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        t_ours
            .iter()
            .max()
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    );
    println!(
        "| a fetch that brings nothing, at the end (median of 11) | {:.1} ms | **{:.1} ms** | {:.2}× |",
        median_ms(&f.n_theirs),
        median_ms(&f.n_ours),
        median_ms(&f.n_ours) / median_ms(&f.n_theirs)
    );
    println!(
        "| a one-commit push, at the end (median of 11) | {:.1} ms | **{:.1} ms** | {:.2}× |",
        median_ms(&f.p_theirs),
        median_ms(&f.p_ours),
        median_ms(&f.p_ours) / median_ms(&f.p_theirs)
    );
    println!(
        "| `git fsck --full --strict` | {} | {} | — |",
        fsck(&s.theirs),
        fsck(&s.ours)
    );
}

/// The `maintenance` mode: set up, the fetch series, the final empty fetch
/// and push, the figures.
pub fn main(args: &[String]) -> Result<()> {
    let a = parse(args)?;
    let s = set_up()?;
    let client = ops::client();
    let opts = ops::call_options();
    println!(
        "sluice-bench maintenance: {} fetches of one commit each ({}), git:// on loopback; {} cores",
        a.fetches,
        if a.new_dates {
            "dated after the fixture's tip"
        } else {
            "dated before the fixture's history"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let series = fetch_series(&a, &s, &client, &opts)?;
    let finals = final_fetch_and_push(&s, &client, &opts)?;
    print_figures(&a, &s, &series, &finals);
    drop(s);
    Ok(())
}
