//! A real PostgreSQL server (Debian's `postgresql`) on 127.0.0.1 with a free
//! port and a throwaway data directory, as the test's own child.
//!
//! [`Postgres::start`] runs `initdb` into a temporary directory (superuser
//! `sluice`, password authentication with SCRAM over TCP, a password made
//! per run) and starts `postgres` in the foreground; dropping the value
//! stops it (a fast shutdown, SIGKILL if it lingers) and removes the
//! directory. [`Postgres::stop`] and [`Postgres::restart`] stop and start
//! the same server on the same port, for tests of a database restarted
//! under its clients. With [`PostgresOptions::tls`] it runs with `ssl = on`,
//! presenting a certificate the test made (see [`crate::TestPki`]), and
//! `pg_hba.conf` says how TCP clients log in ([`TlsAuth`]).
//!
//! # Running as root
//!
//! `initdb` and `postgres` refuse to run as root. When the tests run as
//! root, both are started as the `postgres` user (the Debian package makes
//! it) through `setpriv --reuid=postgres --regid=postgres --init-groups`,
//! which execs the program itself (so the child the test holds *is* the
//! server), and the data directory is handed to that user. As any other
//! user they run directly.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::net::free_port;
use crate::tls::CertFiles;

const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The superuser the server is made with.
pub const PG_USER: &str = "sluice";

/// The database the URLs name (the one `initdb` makes).
pub const PG_DATABASE: &str = "postgres";

/// How the server is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// `fsync` on (as in production) or off (faster tests).
    pub fsync: bool,
    /// TLS (`ssl = on`) and how TCP clients log in; `None`: no TLS,
    /// passwords (SCRAM) over plain TCP.
    pub tls: Option<PostgresTls>,
}

impl Default for PostgresOptions {
    /// `fsync` off: the tests here are about atomicity, not power loss; no
    /// TLS.
    fn default() -> Self {
        PostgresOptions {
            fsync: false,
            tls: None,
        }
    }
}

/// A server with `ssl = on`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresTls {
    /// The certificate chain and key it presents (e.g. from
    /// [`TestPki::server`](crate::TestPki::server)).
    pub cert: CertFiles,
    /// The CA its clients' certificates must come from (`ssl_ca_file`;
    /// e.g. [`TestPki::ca_file`](crate::TestPki::ca_file)).
    pub client_ca: Option<PathBuf>,
    /// How TCP clients log in.
    pub auth: TlsAuth,
}

/// How the clients of a [`PostgresTls`] server log in over TCP
/// (`pg_hba.conf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsAuth {
    /// A password (SCRAM) over TLS or plain TCP.
    PasswordAnyTransport,
    /// A password (SCRAM) over TLS only (`hostssl`); plain TCP refused.
    PasswordTlsOnly,
    /// A client certificate over TLS (`hostssl … cert`: its common name is
    /// the user), no password; plain TCP refused.
    ClientCert,
}

/// A running PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    child: Option<Child>,
    bin: PathBuf,
    addr: SocketAddr,
    password: String,
    options: PostgresOptions,
    run_dir: tempfile::TempDir,
}

/// The directory holding `initdb` and `postgres`: `pg_config --bindir`, else
/// the newest `/usr/lib/postgresql/<version>/bin`.
pub fn find_postgres_bin() -> Option<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("initdb").is_file() {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// The uid and gid of the `postgres` user, when this process is root.
pub(crate) fn server_user() -> io::Result<Option<(u32, u32)>> {
    let me = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return Ok(None);
    }
    let id = |flag: &str| -> io::Result<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| {
                io::Error::other(
                    "running as root, and there is no `postgres` user to run PostgreSQL as \
                     (install Debian's postgresql package, which makes it)",
                )
            })
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

/// `program` run as the server's user.
pub(crate) fn as_server_user(program: &Path) -> io::Result<Command> {
    Ok(match server_user()? {
        Some(_) => {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg(program);
            c
        }
        None => Command::new(program),
    })
}

impl Postgres {
    /// A fresh server with the default options (`fsync` off).
    pub fn start() -> io::Result<Postgres> {
        Self::start_with(PostgresOptions::default())
    }

    /// A fresh server.
    pub fn start_with(options: PostgresOptions) -> io::Result<Postgres> {
        let bin = find_postgres_bin().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "PostgreSQL is not installed: install it (apt-get install -y postgresql) \
                 to run the PostgreSQL ledger tests",
            )
        })?;
        let run_dir = tempfile::Builder::new()
            .prefix("sluice-postgres-")
            .tempdir()?;
        let password = format!("pw-{:016x}", random());
        let pwfile = run_dir.path().join("pwfile");
        std::fs::write(&pwfile, format!("{password}\n"))?;
        if let Some((uid, gid)) = server_user()? {
            std::os::unix::fs::chown(run_dir.path(), Some(uid), Some(gid))?;
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid))?;
        }
        let data = run_dir.path().join("data");
        let out = as_server_user(&bin.join("initdb"))?
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                PG_USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--no-sync", "-E", "UTF8", "--locale=C"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "initdb failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        if let Some(tls) = &options.tls {
            write_tls(run_dir.path(), &data, tls)?;
        }
        let mut pg = Postgres {
            child: None,
            bin,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            password,
            options,
            run_dir,
        };
        // A free port can be taken between choosing and binding: try again.
        let mut tries = 0;
        loop {
            pg.addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            match pg.launch() {
                Ok(()) => return Ok(pg),
                Err(_) if tries < 4 && pg.log().contains("could not bind") => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    fn launch(&mut self) -> io::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        if let Some((uid, gid)) = server_user()? {
            std::os::unix::fs::chown(self.log_path(), Some(uid), Some(gid))?;
        }
        let child = as_server_user(&self.bin.join("postgres"))?
            .arg("-D")
            .arg(self.run_dir.path().join("data"))
            .arg("-k")
            .arg(self.run_dir.path())
            .args(["-c", "listen_addresses=127.0.0.1", "-p"])
            .arg(self.addr.port().to_string())
            .args([
                "-c",
                &format!("fsync={}", if self.options.fsync { "on" } else { "off" }),
            ])
            .args(["-c", "max_connections=100"])
            .args(self.tls_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Waits until the server accepts a login (`pg_isready`), or it exits.
    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(status) = self.child.as_mut().expect("launched").try_wait()? {
                self.child = None;
                return Err(io::Error::other(format!(
                    "postgres exited with {status} before accepting: {}",
                    self.log()
                )));
            }
            let ready = Command::new(self.bin.join("pg_isready"))
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
                        "postgres not ready within {START_TIMEOUT:?}: {}",
                        self.log()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Stop the server (a fast shutdown: open sessions are ended, nothing
    /// committed is lost). Connections are refused until
    /// [`Postgres::start_again`].
    pub fn stop(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // SIGINT is PostgreSQL's fast shutdown.
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                child.wait()?;
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Start the stopped server again, on the same port and data.
    pub fn start_again(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        self.launch()
    }

    /// Stop and start again.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.start_again()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The superuser's password (made per run).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// `postgres://sluice@127.0.0.1:PORT/postgres`: no password in it (give it
    /// by `PGPASSWORD`, a `.pgpass` file or [`Postgres::url_with_password`]).
    pub fn url(&self) -> String {
        format!("postgres://{PG_USER}@{}/{PG_DATABASE}", self.addr)
    }

    /// The URL with the password in it.
    pub fn url_with_password(&self) -> String {
        format!(
            "postgres://{PG_USER}:{}@{}/{PG_DATABASE}",
            self.password, self.addr
        )
    }

    /// Run SQL as the superuser through `psql` (over the Unix socket in the
    /// run directory) and return its unaligned output.
    pub fn psql(&self, sql: &str) -> io::Result<String> {
        let out = as_server_user(&self.bin.join("psql"))?
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.run_dir.path())
            .args([
                "-p",
                &self.addr.port().to_string(),
                "-U",
                PG_USER,
                "-d",
                PG_DATABASE,
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "psql failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `-c` settings of TLS, when it is on.
    fn tls_args(&self) -> Vec<String> {
        let Some(tls) = &self.options.tls else {
            return Vec::new();
        };
        let dir = self.run_dir.path();
        let mut args = vec![
            "-c".to_string(),
            "ssl=on".to_string(),
            "-c".to_string(),
            format!("ssl_cert_file={}", dir.join("server.pem").display()),
            "-c".to_string(),
            format!("ssl_key_file={}", dir.join("server.key").display()),
        ];
        if tls.client_ca.is_some() {
            args.push("-c".into());
            args.push(format!(
                "ssl_ca_file={}",
                dir.join("client-ca.pem").display()
            ));
        }
        args
    }

    /// The directory of the server's Unix socket (and its other files).
    pub fn socket_dir(&self) -> &Path {
        self.run_dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.run_dir.path().join("postgres.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Copy the server's certificate and key (and the clients' CA) into the
/// run directory, owned by the server's user with the modes PostgreSQL
/// demands of a key, and write `pg_hba.conf` for `tls.auth`.
fn write_tls(run_dir: &Path, data: &Path, tls: &PostgresTls) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let owner = server_user()?;
    let mut copies = vec![
        (tls.cert.cert.clone(), run_dir.join("server.pem")),
        (tls.cert.key.clone(), run_dir.join("server.key")),
    ];
    if let Some(ca) = &tls.client_ca {
        copies.push((ca.clone(), run_dir.join("client-ca.pem")));
    }
    for (from, to) in &copies {
        std::fs::copy(from, to)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(to, Some(uid), Some(gid))?;
        }
    }
    let tcp = match tls.auth {
        TlsAuth::PasswordAnyTransport => "host all all 127.0.0.1/32 scram-sha-256\n",
        TlsAuth::PasswordTlsOnly => "hostssl all all 127.0.0.1/32 scram-sha-256\n",
        TlsAuth::ClientCert => "hostssl all all 127.0.0.1/32 cert\n",
    };
    let hba = data.join("pg_hba.conf");
    std::fs::write(&hba, format!("local all all trust\n{tcp}"))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&hba, Some(uid), Some(gid))?;
    }
    Ok(())
}

/// Some bits that differ per call and per process (no RNG dependency).
fn random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}
