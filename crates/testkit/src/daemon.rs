//! `git daemon` on 127.0.0.1 with a free port, killed on drop.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! let base = tempfile::tempdir()?;
//! sluice_testkit::repo::init_bare(&base.path().join("r.git"))?;
//! let daemon = sluice_testkit::GitDaemon::start(base.path())?;
//! let url = daemon.url("r.git"); // git://127.0.0.1:PORT/r.git
//! # let _ = url; Ok(()) }
//! ```

use std::ffi::OsString;
use std::io::{self, Read, Seek};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::net::{free_port, wait_for_port};

/// How long [`GitDaemon::start`] waits for the daemon to accept.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `git daemon` serving every repository under a base directory,
/// with receive-pack enabled. The child is killed and reaped on drop (which
/// also runs when a test panics).
#[derive(Debug)]
pub struct GitDaemon {
    child: Child,
    addr: SocketAddr,
    base: PathBuf,
    stderr: std::fs::File,
}

impl GitDaemon {
    /// Starts the `git` on PATH as a daemon serving `base`:
    /// `git daemon --reuseaddr --listen=127.0.0.1 --port=P --export-all
    /// --enable=receive-pack --base-path=<base> <base>`.
    pub fn start(base: &Path) -> io::Result<GitDaemon> {
        Self::start_with(Path::new("git"), base)
    }

    /// Like [`GitDaemon::start`] with another git: `git_program` is either a
    /// `git` executable (its `git-daemon` is found with `--exec-path`) or a
    /// `git-daemon` executable in an exec dir (e.g. another installation's
    /// `.../git-core/git-daemon`). The daemon runs with `GIT_EXEC_PATH` set
    /// to that exec dir, which also leads its PATH, so the upload-pack and
    /// receive-pack it spawns belong to the same installation.
    pub fn start_with(git_program: &Path, base: &Path) -> io::Result<GitDaemon> {
        let base = base.canonicalize()?;
        let mut last_err = None;
        for _ in 0..5 {
            match Self::try_start(git_program, &base) {
                Ok(d) => return Ok(d),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("git daemon did not start")))
    }

    fn try_start(git_program: &Path, base: &Path) -> io::Result<GitDaemon> {
        let port = free_port()?;
        let (daemon_program, exec_dir) = daemon_binary(git_program)?;
        // Run `git-daemon` itself, not `git daemon`: the `git` wrapper would
        // run it as a grandchild that outlives a kill of the child.
        let mut cmd = Command::new(&daemon_program);
        cmd.arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg(format!("--base-path={}", base.display()))
            .arg(base);
        // The upload-pack / receive-pack the daemon spawns must come from the
        // same installation.
        let mut path = OsString::from(&exec_dir);
        if let Some(dir) = git_program.parent().filter(|d| !d.as_os_str().is_empty()) {
            path.push(":");
            path.push(dir.canonicalize()?);
        }
        if let Some(old) = std::env::var_os("PATH") {
            path.push(":");
            path.push(old);
        }
        cmd.env("PATH", path).env("GIT_EXEC_PATH", &exec_dir);
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env_remove("GIT_DIR");
        let stderr = tempfile::tempfile()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.try_clone()?);
        let child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run {}: {e}", daemon_program.display()),
            )
        })?;
        let mut daemon = GitDaemon {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            base: base.to_owned(),
            stderr,
        };
        let addr = daemon.addr;
        let child = &mut daemon.child;
        let log = &daemon.stderr;
        let waited = wait_for_port(addr, START_TIMEOUT, || match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(io::Error::other(format!(
                "git daemon exited with {status} before accepting: {}",
                read_all(log)
            ))),
        });
        match waited {
            Ok(()) => Ok(daemon),
            Err(e) => Err(e), // drop kills the child
        }
    }

    /// The address it listens on (127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The directory it serves.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// `git://127.0.0.1:PORT/<repo>` (a leading `/` in `repo` is ignored).
    pub fn url(&self, repo: &str) -> String {
        format!("git://{}/{}", self.addr, repo.trim_start_matches('/'))
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        read_all(&self.stderr)
    }
}

/// The `git-daemon` executable and its exec dir for `git_program` (a `git`
/// or a `git-daemon`).
fn daemon_binary(git_program: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let is_daemon = git_program
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("git-daemon"));
    if is_daemon {
        let program = git_program.canonicalize()?;
        let dir = program.parent().map(Path::to_owned).unwrap_or_default();
        return Ok((program, dir));
    }
    let out = Command::new(git_program)
        .arg("--exec-path")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run {}: {e}", git_program.display()),
            )
        })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} --exec-path failed",
            git_program.display()
        )));
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let program = dir.join("git-daemon");
    if !program.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no git-daemon in {}", dir.display()),
        ));
    }
    Ok((program, dir))
}

fn read_all(f: &std::fs::File) -> String {
    let mut f = match f.try_clone() {
        Ok(f) => f,
        Err(_) => return String::new(),
    };
    let mut s = String::new();
    let _ = f.rewind();
    let _ = f.read_to_string(&mut s);
    s
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
