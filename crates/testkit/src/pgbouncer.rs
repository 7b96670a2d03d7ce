//! A real PgBouncer (Debian's `pgbouncer`) on 127.0.0.1 with a free port, in
//! front of a [`Postgres`] of the test, in **transaction pooling** mode: a
//! client's statements run on whichever server connection is free at each
//! transaction, so nothing may outlive a transaction (a prepared statement,
//! a session `SET`, a session-level lock).
//!
//! It logs clients in with SCRAM against a `userlist.txt` holding the
//! server's superuser and password, and logs into the server with the same.
//! PgBouncer refuses to run as root: as root it is started as the
//! `postgres` user (as the testkit starts PostgreSQL), in the foreground, as
//! the test's own child; dropping the value kills it and removes its
//! directory.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::net::free_port;
use crate::postgres::{
    as_server_user, find_postgres_bin, server_user, Postgres, PG_DATABASE, PG_USER,
};

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running PgBouncer.
#[derive(Debug)]
pub struct PgBouncer {
    child: Option<Child>,
    addr: SocketAddr,
    password: String,
    run_dir: tempfile::TempDir,
}

/// The `pgbouncer` program: on `PATH`, else `/usr/sbin/pgbouncer`.
fn find_pgbouncer() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("pgbouncer"))
        .find(|p| p.is_file())
}

impl PgBouncer {
    /// PgBouncer in transaction pooling mode in front of `pg` (at most
    /// `pool_size` server connections).
    pub fn start(pg: &Postgres, pool_size: u32) -> io::Result<PgBouncer> {
        let program = find_pgbouncer().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "PgBouncer is not installed: install it (apt-get install -y pgbouncer) \
                 to run the PgBouncer tests",
            )
        })?;
        let mut run_dir = tempfile::Builder::new()
            .prefix("sluice-pgbouncer-")
            .tempdir()?;
        let owner = server_user()?;
        let userlist = run_dir.path().join("userlist.txt");
        std::fs::write(&userlist, format!("\"{PG_USER}\" \"{}\"\n", pg.password()))?;
        let ini = run_dir.path().join("pgbouncer.ini");
        let log = run_dir.path().join("pgbouncer.log");
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(run_dir.path(), Some(uid), Some(gid))?;
            std::os::unix::fs::chown(&userlist, Some(uid), Some(gid))?;
        }
        let mut tries = 0;
        loop {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            std::fs::write(
                &ini,
                format!(
                    "[databases]\n\
                     {PG_DATABASE} = host=127.0.0.1 port={server_port} dbname={PG_DATABASE}\n\
                     [pgbouncer]\n\
                     listen_addr = 127.0.0.1\n\
                     listen_port = {port}\n\
                     unix_socket_dir =\n\
                     auth_type = scram-sha-256\n\
                     auth_file = {userlist}\n\
                     pool_mode = transaction\n\
                     default_pool_size = {pool_size}\n\
                     max_client_conn = 200\n\
                     server_reset_query =\n\
                     logfile = {log}\n",
                    server_port = pg.addr().port(),
                    port = addr.port(),
                    userlist = userlist.display(),
                    log = log.display(),
                ),
            )?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&ini, Some(uid), Some(gid))?;
            }
            let child = as_server_user(&program)?
                .arg(&ini)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let mut bouncer = PgBouncer {
                child: Some(child),
                addr,
                password: pg.password().to_string(),
                run_dir,
            };
            match bouncer.wait_ready() {
                Ok(()) => return Ok(bouncer),
                Err(_) if tries < 4 && bouncer.log().contains("bind") => {
                    tries += 1;
                    bouncer.stop();
                    run_dir = std::mem::replace(
                        &mut bouncer.run_dir,
                        tempfile::Builder::new()
                            .prefix("sluice-pgbouncer-")
                            .tempdir()?,
                    );
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until it accepts a login (`pg_isready`), or it exits.
    fn wait_ready(&mut self) -> io::Result<()> {
        let bin = find_postgres_bin()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no pg_isready"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(status) = self.child.as_mut().expect("started").try_wait()? {
                self.child = None;
                return Err(io::Error::other(format!(
                    "pgbouncer exited with {status} before accepting: {}",
                    self.log()
                )));
            }
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p"])
                .arg(self.addr.port().to_string())
                .args(["-U", PG_USER, "-d", PG_DATABASE])
                .status()?;
            if ready.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "pgbouncer not ready within {START_TIMEOUT:?}: {}",
                        self.log()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `postgres://sluice:PASSWORD@127.0.0.1:PORT/postgres`, through it.
    pub fn url_with_password(&self) -> String {
        format!(
            "postgres://{PG_USER}:{}@{}/{PG_DATABASE}",
            self.password, self.addr
        )
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.stop();
    }
}
