//! Measuring one operation in a process of its own, for its peak memory.
//!
//! Peak memory is the maximum RSS of the client's whole process tree, read
//! the same way for every implementation: `/usr/bin/time -f %M` around the
//! process (for `git`, the `git` command with the helpers it spawns; for the
//! in-process implementations, this binary re-executed as `sluice-bench
//! child <impl> <op> ...`, which does the one call and exits). The wall time
//! of `git` is measured around its process (spawning is part of its cost);
//! the wall time of an in-process call is measured inside the child around
//! the call, as a linking program would see it (client construction
//! excluded, opening or creating the local repository included).
//!
//! This is the measuring side; the child's side, which parses these
//! command lines and does the call, is [`crate::child`].

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::ops::Impl;

/// What one measured run gave.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Wall time of the operation.
    pub wall: Duration,
    /// Peak RSS of the process tree, KiB.
    pub max_rss_kib: Option<u64>,
}

const TIME: &str = "/usr/bin/time";

/// Whether `/usr/bin/time` is there (else memory is not measured).
pub fn have_time() -> bool {
    Path::new(TIME).is_file()
}

/// `cmd` wrapped in `/usr/bin/time -f %M -o <out>` (same program,
/// arguments, environment and directory).
fn wrap(cmd: &Command, out: &Path) -> Command {
    let mut w = Command::new(TIME);
    w.arg("-f").arg("%M").arg("-o").arg(out);
    w.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => {
                w.env(k, v);
            }
            None => {
                w.env_remove(k);
            }
        }
    }
    if let Some(d) = cmd.get_current_dir() {
        w.current_dir(d);
    }
    w
}

fn read_rss(path: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(path).ok()?;
    s.lines().rev().find_map(|l| l.trim().parse().ok())
}

/// Runs `cmd` (a `git` command) under `/usr/bin/time`; the wall time is
/// the whole process's.
pub fn measure_command(cmd: &Command) -> Result<Measured> {
    let rss = tempfile::NamedTempFile::new()?;
    let mut c = if have_time() {
        wrap(cmd, rss.path())
    } else {
        clone_command(cmd)
    };
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = c.output().with_context(|| format!("running {cmd:?}"))?;
    let wall = t.elapsed();
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(Measured {
        wall,
        max_rss_kib: read_rss(rss.path()),
    })
}

fn clone_command(cmd: &Command) -> Command {
    let mut c = Command::new(cmd.get_program());
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

/// Runs one in-process operation in a child (`sluice-bench child <impl>
/// <args>`) under `/usr/bin/time`; the wall time is what the child measured
/// around the call.
pub fn measure_child(imp: Impl, args: &[OsString]) -> Result<Measured> {
    let (stdout, max_rss_kib) = run_child(imp, args)?;
    let us: u64 = stdout
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("elapsed_us="))
        .context("the child printed no elapsed_us")?
        .parse()?;
    Ok(Measured {
        wall: Duration::from_micros(us),
        max_rss_kib,
    })
}

/// Runs `sluice-bench child <impl> <args>` under `/usr/bin/time`; returns
/// what it printed and its peak RSS (KiB).
pub fn run_child(imp: Impl, args: &[OsString]) -> Result<(String, Option<u64>)> {
    let exe = std::env::current_exe().context("this executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("child").arg(imp.name()).args(args);
    let rss = tempfile::NamedTempFile::new()?;
    let mut c = if have_time() {
        wrap(&cmd, rss.path())
    } else {
        cmd
    };
    let out = c
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()?;
    if !out.status.success() {
        bail!(
            "child {} {:?} failed ({}): {}",
            imp.name(),
            args,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        read_rss(rss.path()),
    ))
}

/// `fetch <url> <dest>` arguments for [`measure_child`].
pub fn fetch_args(url: &str, dest: &Path) -> Vec<OsString> {
    vec!["fetch".into(), url.into(), dest.into()]
}

/// `push <url> <local> <branch> <dst>` arguments for [`measure_child`].
pub fn push_args(url: &str, local: &Path, branch: &str, dst: &str) -> Vec<OsString> {
    vec![
        "push".into(),
        url.into(),
        local.into(),
        branch.into(),
        dst.into(),
    ]
}

/// `push-lease <url> <local> <branch> <dst> <expected oid>` arguments for
/// [`measure_child`].
pub fn push_lease_args(
    url: &str,
    local: &Path,
    branch: &str,
    dst: &str,
    expect: &str,
) -> Vec<OsString> {
    let mut v = push_args(url, local, branch, dst);
    v[0] = "push-lease".into();
    v.push(expect.into());
    v
}

/// `ls-refs <url> <prefix>` arguments for [`measure_child`].
pub fn ls_prefix_args(url: &str, prefix: &str) -> Vec<OsString> {
    vec!["ls-refs".into(), url.into(), prefix.into()]
}

/// `fetch-into <url> <dest> <refspec>` arguments for [`measure_child`].
pub fn fetch_into_args(url: &str, dest: &Path, refspec: &str) -> Vec<OsString> {
    vec!["fetch-into".into(), url.into(), dest.into(), refspec.into()]
}
