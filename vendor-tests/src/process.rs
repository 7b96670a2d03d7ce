//! A server process started by the suite: listening on `127.0.0.1:<free
//! port>`, its stderr kept in a temporary file, killed and reaped on drop.

use std::io::{self, Read, Seek};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A child process serving on `addr`.
#[derive(Debug)]
pub struct Spawned {
    name: String,
    child: Child,
    addr: SocketAddr,
    stderr: std::fs::File,
}

impl Spawned {
    /// Runs `make(port)` on free ports (up to 5 tries, for a port taken
    /// meanwhile) until the child accepts connections on
    /// `127.0.0.1:<port>` within `timeout`. The child's stdin is null, its
    /// stdout and stderr go to a temporary file ([`Spawned::log`]).
    pub fn start(
        name: &str,
        timeout: Duration,
        mut make: impl FnMut(u16) -> Command,
    ) -> io::Result<Spawned> {
        let mut last = None;
        for _ in 0..5 {
            let port = free_port()?;
            let mut cmd = make(port);
            let log = tempfile::tempfile()?;
            cmd.stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log.try_clone()?);
            let child = cmd.spawn().map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{name}: cannot run {:?}: {e}", cmd.get_program()),
                )
            })?;
            let mut me = Spawned {
                name: name.to_owned(),
                child,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                stderr: log,
            };
            match me.wait_ready(timeout) {
                Ok(()) => return Ok(me),
                Err(e) => last = Some(e), // drop kills it
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other(format!("{name} did not start"))))
    }

    fn wait_ready(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "{} exited with {status} before accepting connections: {}",
                    self.name,
                    self.log().trim()
                )));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} did not accept connections on {} within {timeout:?}: {}",
                        self.name,
                        self.addr,
                        self.log().trim()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        let Ok(mut f) = self.stderr.try_clone() else {
            return String::new();
        };
        let mut s = String::new();
        let _ = f.rewind();
        let _ = f.read_to_string(&mut s);
        s
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first of `candidates` that is a file.
pub fn first_file(candidates: impl IntoIterator<Item = PathBuf>) -> Option<PathBuf> {
    candidates.into_iter().find(|p| p.is_file())
}

/// `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    first_file(std::env::split_paths(&path).map(|d| d.join(name)))
}

/// Runs `program args...` and returns its stdout and stderr, trimmed and
/// joined, or why it failed.
pub fn output_of(program: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{} {} failed ({}): {text}",
            program.display(),
            args.join(" "),
            out.status
        ))
    }
}
