//! OpenSSH's `sshd` on 127.0.0.1 with a free port, a throwaway host key and
//! a client key made for the test, killed on drop.
//!
//! [`Sshd::start`] runs `<sshd> -D -f <config> -e` as the test's own child
//! (sshd must be started by its absolute path, e.g. `/usr/sbin/sshd`, found
//! at run time by [`find_sshd`]). Everything it needs lives in a private
//! temporary directory: an ed25519 host key and client key made with
//! `ssh-keygen`, the `AuthorizedKeysFile` holding the client key, the
//! configuration and the pid file. Only the current user may log in, by
//! that key only (`PermitRootLogin prohibit-password` when that user is
//! root); `UsePAM no` and `StrictModes no` let it run from a temporary
//! directory; `AcceptEnv GIT_PROTOCOL` lets a client ask for protocol v2
//! (`ssh -o SendEnv=GIT_PROTOCOL`, which git and sluice send).
//!
//! The client side is [`Sshd::git_ssh_command`] (a `GIT_SSH_COMMAND`
//! value) and [`Sshd::url`]:
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let repo = sluice_testkit::repo::init_bare(&dir.path().join("r.git"))?;
//! let sshd = sluice_testkit::Sshd::start()?;
//! let out = std::process::Command::new("git")
//!     .args(["ls-remote", &sshd.url(&repo)])
//!     .env("GIT_SSH_COMMAND", sshd.git_ssh_command())
//!     .output()?;
//! assert!(out.status.success());
//! # Ok(()) }
//! ```
//!
//! sshd needs its privilege separation directory (`/run/sshd` on Debian);
//! [`Sshd::start`] creates it when it is missing.
//!
//! `GIT_SSH_COMMAND` is read from the process environment by clients that
//! spawn `ssh` (git's and sluice's); setting it with `std::env::set_var` in
//! a test binary whose other threads may be spawning processes is racy.
//! Pass it to each command (`Command::env`) where possible, or set it once
//! before any other thread starts.

use std::io::{self, Read, Seek};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::net::{free_port, wait_for_port};

/// How long [`Sshd::start`] waits for sshd to accept.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The privilege separation directory Debian's sshd is built with.
const PRIVSEP_DIR: &str = "/run/sshd";

/// How [`Sshd::start_with`] configures sshd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshdOptions {
    /// `AcceptEnv GIT_PROTOCOL` (default `true`). Without it sshd drops the
    /// client's `GIT_PROTOCOL`, so every conversation is protocol v0, as
    /// with a stock sshd configuration.
    pub accept_git_protocol: bool,
    /// `ForceCommand <command>`: sshd runs this (with the user's shell)
    /// instead of what the client asked for, which it finds in
    /// `SSH_ORIGINAL_COMMAND`, as forges' forced commands do.
    pub force_command: Option<String>,
}

impl Default for SshdOptions {
    fn default() -> Self {
        SshdOptions {
            accept_git_protocol: true,
            force_command: None,
        }
    }
}

/// A running `sshd` accepting the current user with a client key of its
/// own. The child is killed and reaped on drop (which also runs when a test
/// panics); the temporary directory with the keys is removed.
#[derive(Debug)]
pub struct Sshd {
    child: Child,
    addr: SocketAddr,
    user: String,
    dir: tempfile::TempDir,
    client_key: PathBuf,
    stderr: std::fs::File,
}

/// Where `sshd` is, as an absolute path (sshd refuses to run otherwise):
/// `PATH`, then the usual sbin directories, which a non-root `PATH` may
/// lack.
pub fn find_sshd() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .filter(|d| d.is_absolute())
        .map(|d| d.join("sshd"))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

/// The name of the user this process runs as (`id -un`, else `$USER`).
pub fn current_user() -> io::Result<String> {
    if let Ok(out) = Command::new("id").arg("-un").stdin(Stdio::null()).output() {
        let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !name.is_empty() {
            return Ok(name);
        }
    }
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .map_err(|_| io::Error::other("cannot tell the current user (id -un, $USER)"))
}

fn quote(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

fn keygen(path: &Path) -> io::Result<()> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "sluice-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run ssh-keygen (install openssh-client): {e}"),
            )
        })?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ssh-keygen failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Creates sshd's privilege separation directory when it is missing
/// (root-owned, 0755, as sshd requires).
fn ensure_privsep_dir() -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = Path::new(PRIVSEP_DIR);
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot create sshd's privilege separation directory {PRIVSEP_DIR}: {e}"),
        )
    })?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
}

impl Sshd {
    /// Starts sshd with [`SshdOptions::default`].
    pub fn start() -> io::Result<Sshd> {
        Self::start_with(&SshdOptions::default())
    }

    /// Starts sshd configured by `opts`.
    pub fn start_with(opts: &SshdOptions) -> io::Result<Sshd> {
        let sshd = find_sshd().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "sshd is not installed: install it (apt-get install -y openssh-server) to run ssh tests",
            )
        })?;
        ensure_privsep_dir()?;
        let user = current_user()?;
        let dir = tempfile::Builder::new().prefix("sluice-sshd-").tempdir()?;
        let host_key = dir.path().join("host_ed25519");
        let client_key = dir.path().join("client_ed25519");
        keygen(&host_key)?;
        keygen(&client_key)?;
        let public = std::fs::read_to_string(client_key.with_extension("pub"))?;
        std::fs::write(dir.path().join("authorized_keys"), public)?;
        let mut last_err = None;
        for _ in 0..5 {
            match Self::try_start(&sshd, opts, &user, dir.path()) {
                Ok((child, addr, stderr)) => {
                    return Ok(Sshd {
                        child,
                        addr,
                        user,
                        dir,
                        client_key,
                        stderr,
                    })
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("sshd did not start")))
    }

    fn try_start(
        sshd: &Path,
        opts: &SshdOptions,
        user: &str,
        dir: &Path,
    ) -> io::Result<(Child, SocketAddr, std::fs::File)> {
        let port = free_port()?;
        let mut conf = format!(
            "ListenAddress 127.0.0.1\n\
             Port {port}\n\
             HostKey {host_key}\n\
             PidFile {pid}\n\
             AuthorizedKeysFile {keys}\n\
             AuthenticationMethods publickey\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             PermitRootLogin prohibit-password\n\
             AllowUsers {user}\n\
             UseDNS no\n\
             PrintMotd no\n\
             PermitTTY no\n\
             X11Forwarding no\n\
             AllowTcpForwarding no\n\
             MaxStartups 64:30:128\n\
             LogLevel INFO\n",
            host_key = quote(&dir.join("host_ed25519")),
            pid = quote(&dir.join("sshd.pid")),
            keys = quote(&dir.join("authorized_keys")),
        );
        if opts.accept_git_protocol {
            conf.push_str("AcceptEnv GIT_PROTOCOL\n");
        }
        if let Some(cmd) = &opts.force_command {
            conf.push_str(&format!("ForceCommand {cmd}\n"));
        }
        let conf_path = dir.join("sshd_config");
        std::fs::write(&conf_path, conf)?;
        let stderr = tempfile::tempfile()?;
        let mut child = Command::new(sshd)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.try_clone()?)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot run {}: {e}", sshd.display())))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let waited = wait_for_port(addr, START_TIMEOUT, || match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(io::Error::other(format!(
                "sshd exited with {status} before accepting: {}",
                read_all(&stderr)
            ))),
        });
        match waited {
            Ok(()) => Ok((child, addr, stderr)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
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

    /// The user that may log in (the current user).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The private key that may log in (its public half is
    /// `<key>.pub`).
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The private directory holding the keys and the configuration.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A `GIT_SSH_COMMAND` value that logs in with the client key, trusts
    /// any host key, records none, and connects to this sshd's port:
    /// `ssh -i <key> -o StrictHostKeyChecking=no -o
    /// UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o LogLevel=ERROR
    /// -p <port>`. (ssh keeps the first `-p` it is given, so this port wins
    /// over a URL's.)
    pub fn git_ssh_command(&self) -> String {
        format!(
            "ssh -i '{}' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o LogLevel=ERROR -p {}",
            self.client_key.display().to_string().replace('\'', "'\\''"),
            self.port()
        )
    }

    /// `ssh://<user>@127.0.0.1:<port>/<absolute path of repo>`.
    pub fn url(&self, repo: &Path) -> String {
        let abs = repo
            .canonicalize()
            .unwrap_or_else(|_| std::path::absolute(repo).unwrap_or_else(|_| repo.to_owned()));
        format!(
            "ssh://{}@{}/{}",
            self.user,
            self.addr,
            abs.display().to_string().trim_start_matches('/')
        )
    }

    /// What sshd logged so far (`-e`: its log goes to stderr).
    pub fn log(&self) -> String {
        read_all(&self.stderr)
    }
}

fn read_all(f: &std::fs::File) -> String {
    let Ok(mut f) = f.try_clone() else {
        return String::new();
    };
    let mut s = String::new();
    let _ = f.rewind();
    let _ = f.read_to_string(&mut s);
    s
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
