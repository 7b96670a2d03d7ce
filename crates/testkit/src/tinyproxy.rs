//! A real forward proxy: Debian's `tinyproxy` on 127.0.0.1 with a free
//! port, in the foreground as the test's own child, killed on drop.
//!
//! It forwards plain HTTP requests (absolute-form) and tunnels https with
//! `CONNECT` to any port; only 127.0.0.1 may use it. With
//! [`Tinyproxy::start_with_auth`] it asks for basic auth (`407` without
//! it). Every request line it handled is in its log ([`Tinyproxy::requests`]),
//! written before it connects upstream, so a test that got its answer can
//! count them.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::net::{free_port, wait_for_port};

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running tinyproxy.
#[derive(Debug)]
pub struct Tinyproxy {
    child: Child,
    addr: SocketAddr,
    run_dir: tempfile::TempDir,
    credentials: Option<(String, String)>,
}

/// Where `tinyproxy` is: on PATH, or in the usual bin directories.
pub fn find_tinyproxy() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("tinyproxy"))
        .find(|p| p.is_file())
}

impl Tinyproxy {
    /// A proxy anyone on 127.0.0.1 may use.
    pub fn start() -> io::Result<Tinyproxy> {
        Self::launch(None)
    }

    /// A proxy that answers `407` unless the request carries basic auth
    /// as `user`/`password`.
    pub fn start_with_auth(user: &str, password: &str) -> io::Result<Tinyproxy> {
        Self::launch(Some((user.to_owned(), password.to_owned())))
    }

    fn launch(credentials: Option<(String, String)>) -> io::Result<Tinyproxy> {
        let program = find_tinyproxy().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "tinyproxy is not installed: install it (apt-get install -y tinyproxy) to run proxy tests",
            )
        })?;
        let mut last = None;
        // A free port can be taken between choosing and binding: try again.
        for _ in 0..5 {
            match Self::try_launch(&program, credentials.clone()) {
                Ok(p) => return Ok(p),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("tinyproxy did not start")))
    }

    fn try_launch(
        program: &std::path::Path,
        credentials: Option<(String, String)>,
    ) -> io::Result<Tinyproxy> {
        let run_dir = tempfile::Builder::new()
            .prefix("sluice-tinyproxy-")
            .tempdir()?;
        let port = free_port()?;
        let log = run_dir.path().join("tinyproxy.log");
        let mut conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nMaxClients 64\n\
             LogLevel Info\nLogFile \"{}\"\nDisableViaHeader Yes\n",
            log.display()
        );
        if let Some((u, p)) = &credentials {
            conf.push_str(&format!("BasicAuth {u} {p}\n"));
        }
        let conf_path = run_dir.path().join("tinyproxy.conf");
        std::fs::write(&conf_path, conf)?;
        let child = Command::new(program)
            .arg("-d")
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut me = Tinyproxy {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            run_dir,
            credentials,
        };
        let addr = me.addr;
        let child = &mut me.child;
        wait_for_port(addr, START_TIMEOUT, || match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(io::Error::other(format!(
                "tinyproxy exited with {status} before accepting: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            ))),
        })?;
        Ok(me)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://user:password@127.0.0.1:PORT` when started with credentials,
    /// else [`Tinyproxy::url`].
    pub fn url_with_credentials(&self) -> String {
        match &self.credentials {
            Some((u, p)) => format!("http://{u}:{p}@{}", self.addr),
            None => self.url(),
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir.path().join("tinyproxy.log")).unwrap_or_default()
    }

    /// Every request line it handled so far, in order (`CONNECT
    /// 127.0.0.1:PORT HTTP/1.1`, `GET http://127.0.0.1:PORT/... HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter_map(|l| l.split_once("): ").filter(|_| l.contains("Request (")))
            .map(|(_, r)| r.trim().to_string())
            .collect()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
