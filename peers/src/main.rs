//! The peers beside sluice under the same faults (issue 48).
//!
//! Every scenario is a write whose answer is lost (or a push refused for a
//! stale lease), built on the test kit's fake GitHub or on a real
//! `git daemon` / `git http-backend` behind the fault proxy. Each peer —
//! octocrab as shipped, octocrab with `RetryConfig::None`, the `git` CLI,
//! libgit2 (`git2`) and sluice — runs it once, on a fresh server, under a
//! wall-clock cap; the program then counts what reached the server and
//! what the server applied, and prints one markdown table row per
//! (scenario, peer). Nothing in a row is written by hand: every cell is
//! read from the server, the proxy or the peer's own return value.
//!
//! Run: `cargo run --release --manifest-path peers/Cargo.toml`
//! (`-- --only <words>` keeps the scenarios whose name contains them).

mod forge;
mod git;

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The wall-clock cap on one peer's run of one scenario.
pub const CAP: Duration = Duration::from_secs(30);

/// What a peer reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// It returned success.
    Success,
    /// It returned an error.
    Error,
    /// sluice's `unknown`: no verdict, the write may have applied.
    Unknown,
    /// Nothing within the cap.
    Nothing,
    /// The peer does not do this.
    NotApplicable,
}

impl Said {
    fn as_str(&self) -> &'static str {
        match self {
            Said::Success => "success",
            Said::Error => "error",
            Said::Unknown => "unknown",
            Said::Nothing => "nothing (cap)",
            Said::NotApplicable => "n/a",
        }
    }
}

/// A peer's report: what it said, in its own words, and how long it took.
#[derive(Debug, Clone)]
pub struct Report {
    /// Success, error, unknown or nothing.
    pub said: Said,
    /// Its words (an error's chain, a status line), on one line.
    pub words: String,
    /// Wall-clock time of the run.
    pub took: Duration,
}

/// One row of the table.
pub struct Row {
    /// The scenario.
    pub scenario: String,
    /// The peer.
    pub peer: &'static str,
    /// What reached the server (its own counts).
    pub sent: String,
    /// What the server applied.
    pub applied: String,
    /// The peer's report.
    pub report: Report,
    /// Whether the report matches the server's state, and why not.
    pub matches: String,
}

/// Runs `f` on a thread of its own and waits for it at most `cap`; a run
/// past the cap is abandoned (its thread left to end when its server is
/// dropped) and reported as [`Said::Nothing`].
pub fn capped(cap: Duration, f: impl FnOnce() -> Report + Send + 'static) -> Report {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(cap) {
        Ok(mut r) => {
            r.took = start.elapsed();
            r
        }
        Err(_) => Report {
            said: Said::Nothing,
            words: format!("no return within the {} s cap", cap.as_secs()),
            took: start.elapsed(),
        },
    }
}

/// `s` on one line, `|` escaped, every 40-hex object id cut to 7
/// digits, at most `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .split_whitespace()
        .map(abbreviate)
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// `word` with every run of 40 hex digits cut to its first 7.
fn abbreviate(word: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() == 40 {
            out.push_str(&run[..7]);
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in word.chars() {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The version of `package` in this package's Cargo.lock.
fn locked(package: &str) -> String {
    let lock = include_str!("../Cargo.lock");
    let head = format!("name = \"{package}\"\nversion = \"");
    lock.find(&head)
        .map(|i| &lock[i + head.len()..])
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("?")
        .to_string()
}

/// The first line `program --version`-like `args` print.
fn tool_version(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "?".into())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let keep = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    let mut rows = Vec::new();
    rows.extend(forge::run_all(&keep));
    rows.extend(git::run_all(&keep));
    let (major, minor, patch) = git2::Version::get().libgit2_version();
    println!(
        "Peers: octocrab {} (default features but the JWT backend), git2 {} on libgit2 {major}.{minor}.{patch} (bundled), {}, {}; sluice at this commit. Cap: {} s a run.\n",
        locked("octocrab"),
        locked("git2"),
        tool_version("git", &["--version"]),
        tool_version("lighttpd", &["-v"]),
        CAP.as_secs()
    );
    print_table(&rows);
}

fn print_table(rows: &[Row]) {
    println!("| scenario | peer | requests sent | writes applied | reported | its words | report matches the server |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        let reported = match r.report.said {
            Said::NotApplicable => "n/a".to_string(),
            _ => format!(
                "{} ({:.1} s)",
                r.report.said.as_str(),
                r.report.took.as_secs_f64()
            ),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.scenario,
            r.peer,
            r.sent,
            r.applied,
            reported,
            one_line(&r.report.words, 260),
            r.matches
        );
    }
}
