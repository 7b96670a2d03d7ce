//! The servers of the suite, each started on 127.0.0.1 and stopped when its
//! [`Row`] is dropped.
//!
//! A [`Row`] is one server × transport: the served directory (repositories
//! are made there with the git CLI, so every server reads the same on-disk
//! format), the sluice client to use, the URL of a repository, and the
//! route by which its reads are protocol v0 (see [`crate::gate`]).
//!
//! Nothing here skips: a server that cannot be found or started is an
//! error, which the suite reports as a failed row.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use sluice_git::GitClient;
use sluice_policy::secrecy::SecretString;
use sluice_policy::{CredentialSource, Policy, StaticSource};
use sluice_testkit::{FaultProxy, GitDaemon, HttpBackend, ServerCert, Sshd, SshdOptions, TestPki};

use crate::gate::Gate;
use crate::process::{first_file, on_path, output_of, Spawned};

/// The user http-backend requires for pushing: the one sluice sends a
/// token as (GitHub's convention for installation tokens).
pub const HTTP_USER: &str = "x-access-token";
/// The token the http row pushes with (a throwaway, for the loopback
/// server only).
pub const HTTP_TOKEN: &str = "sluice-vendor-tests-token";

/// A transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `git://` (a daemon).
    Git,
    /// Smart HTTP.
    Http,
    /// Smart HTTP over TLS.
    Https,
    /// `ssh://`.
    Ssh,
    /// `file://` (upload-pack / receive-pack spawned by the client).
    File,
}

impl Transport {
    /// As the table writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Git => "git://",
            Transport::Http => "http:// (basic auth for push)",
            Transport::Https => "https:// (rustls; basic auth for push)",
            Transport::Ssh => "ssh://",
            Transport::File => "file://",
        }
    }
}

/// Which implementation answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// git (C).
    Git,
    /// dulwich (Python).
    Dulwich,
    /// JGit (Java).
    JGit,
}

type UrlFn = Box<dyn Fn(&Path, bool) -> String + Send + Sync>;

/// One server × transport, running.
pub struct Row {
    /// The server as the table names it (with the version found at run
    /// time).
    pub server: String,
    /// The transport.
    pub transport: Transport,
    /// The implementation.
    pub implementation: Implementation,
    /// What the server's `agent=` capability must contain (checks that
    /// the intended installation answered).
    pub agent: Option<String>,
    /// The served directory; repositories are made under it.
    pub base: PathBuf,
    /// The client for this row.
    pub client: GitClient,
    /// The client for reads over the v0 route (differs for `file://`,
    /// whose server the client spawns).
    pub v0_client: GitClient,
    /// http credentials.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// The daemon's address, for git:// rows (raw advertisement probes).
    pub daemon: Option<SocketAddr>,
    /// Whether the v0 route can be checked with the git CLI (not for
    /// `file://`, where the route is sluice's own spawned program).
    pub v0_probe: bool,
    /// How reads are made protocol v0 on this row.
    pub v0_route: String,
    urls: UrlFn,
    log: Box<dyn Fn() -> String + Send + Sync>,
    _keep: Vec<Box<dyn Send + Sync>>,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("server", &self.server)
            .field("transport", &self.transport)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Row {
    /// The path of repository `rel` (e.g. `ls.git`) on the server's disk.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// The URL of repository `rel`.
    pub fn url(&self, rel: &str) -> String {
        (self.urls)(&self.path(rel), false)
    }

    /// The URL of repository `rel` on the v0 route. `rel` must be under
    /// `v0/` (the ssh route keys on it).
    pub fn v0_url(&self, rel: &str) -> String {
        assert!(rel.starts_with("v0/"), "v0 repositories live under v0/");
        (self.urls)(&self.path(rel), true)
    }

    /// What the server logged so far (for failure reports).
    pub fn server_log(&self) -> String {
        (self.log)()
    }
}

fn client() -> GitClient {
    GitClient::new(Arc::new(Policy::default()))
}

fn served_dir() -> Result<(tempfile::TempDir, PathBuf), String> {
    let dir = tempfile::Builder::new()
        .prefix("sluice-vendor-")
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?;
    let base = dir.path().join("srv");
    std::fs::create_dir_all(base.join("v0")).map_err(|e| format!("{}: {e}", base.display()))?;
    let base = base
        .canonicalize()
        .map_err(|e| format!("{}: {e}", base.display()))?;
    Ok((dir, base))
}

fn rel_of(base: &Path, repo: &Path) -> String {
    repo.strip_prefix(base)
        .unwrap_or(repo)
        .display()
        .to_string()
}

/// `git --version` of `git`, as `2.47.3`.
pub fn git_version(git: &Path) -> Result<String, String> {
    let v = output_of(git, &["--version"])?;
    Ok(v.trim_start_matches("git version ").trim().to_owned())
}

/// Debian's git exec dir: `$SLUICE_DEBIAN_GIT_EXEC_PATH`, else
/// `/usr/lib/git-core` (what Debian's `git` package installs). An error,
/// never a skip, when its `git-daemon` is missing.
pub fn debian_git_exec_dir() -> Result<PathBuf, String> {
    let dir = std::env::var_os("SLUICE_DEBIAN_GIT_EXEC_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/git-core"));
    if !dir.join("git-daemon").is_file() || !dir.join("git").is_file() {
        return Err(format!(
            "Debian's git daemon is missing: no git-daemon and git in {} \
             (install Debian's git package: apt-get install -y git; \
             scripts/test.sh does)",
            dir.display()
        ));
    }
    Ok(dir)
}

/// A `git daemon` row: `git_program` is a `git` (its exec path's daemon)
/// or a `git-daemon`; `git` is the matching `git` executable (for its
/// version).
pub fn git_daemon(label: &str, git_program: &Path, git: &Path) -> Result<Row, String> {
    let version = git_version(git)?;
    let (dir, base) = served_dir()?;
    let daemon = GitDaemon::start_with(git_program, &base)
        .map_err(|e| format!("{label} did not start: {e}"))?;
    let gate = Gate::git(daemon.addr()).map_err(|e| format!("gate: {e}"))?;
    let (addr, gate_addr) = (daemon.addr(), gate.addr());
    let daemon = Arc::new(daemon);
    let urls_base = base.clone();
    let log_daemon = Arc::clone(&daemon);
    Ok(Row {
        server: format!("git {version} `git daemon`{label}"),
        transport: Transport::Git,
        implementation: Implementation::Git,
        agent: Some(format!("git/{version}")),
        base: base.clone(),
        client: client(),
        v0_client: client(),
        credentials: None,
        daemon: Some(addr),
        v0_probe: true,
        v0_route: "a gate in front of the daemon drops the client's `version=2` \
                   extra parameter (as a pre-2.18 daemon does)"
            .into(),
        urls: Box::new(move |repo, v0| {
            let at = if v0 { gate_addr } else { addr };
            format!("git://{at}/{}", rel_of(&urls_base, repo))
        }),
        log: Box::new(move || log_daemon.stderr()),
        _keep: vec![Box::new(gate), Box::new(daemon)],
        _dir: dir,
    })
}

/// The http row: git's http-backend behind lighttpd, basic auth required
/// for receive-pack (user [`HTTP_USER`], password [`HTTP_TOKEN`]).
pub fn http_backend() -> Result<Row, String> {
    let version = git_version(Path::new("git"))?;
    let lighttpd = sluice_testkit::http_backend::find_lighttpd()
        .ok_or("lighttpd is not installed (apt-get install -y lighttpd; scripts/test.sh does)")?;
    let lighttpd_version = output_of(&lighttpd, &["-v"])?
        .split_whitespace()
        .next()
        .unwrap_or("lighttpd")
        .replace('/', " ");
    let (dir, base) = served_dir()?;
    let backend = HttpBackend::start_with_auth(&base, HTTP_USER, HTTP_TOKEN)
        .map_err(|e| format!("lighttpd + http-backend did not start: {e}"))?;
    let gate = Gate::http(backend.addr()).map_err(|e| format!("gate: {e}"))?;
    let (addr, gate_addr) = (backend.addr(), gate.addr());
    let backend = Arc::new(backend);
    let log_backend = Arc::clone(&backend);
    let urls_base = base.clone();
    let credentials: Arc<dyn CredentialSource> =
        Arc::new(StaticSource::new(SecretString::from(HTTP_TOKEN)));
    Ok(Row {
        server: format!("git {version} `http-backend` behind {lighttpd_version}"),
        transport: Transport::Http,
        implementation: Implementation::Git,
        agent: Some(format!("git/{version}")),
        base: base.clone(),
        client: client(),
        v0_client: client(),
        credentials: Some(credentials),
        daemon: None,
        v0_probe: true,
        v0_route: "a gate in front of lighttpd drops the `Git-Protocol` header (as a proxy \
                   that does not pass it on does)"
            .into(),
        urls: Box::new(move |repo, v0| {
            let at = if v0 { gate_addr } else { addr };
            format!("http://{at}/git/{}", rel_of(&urls_base, repo))
        }),
        log: Box::new(move || log_backend.error_log()),
        _keep: vec![Box::new(gate), Box::new(backend)],
        _dir: dir,
    })
}

/// The https row: git's http-backend behind lighttpd with `mod_openssl`
/// (a certificate of `pki`, the run's throwaway CA, which the row's clients
/// and — through `GIT_SSL_CAINFO`, set by the caller — the git CLI trust),
/// basic auth required for receive-pack. The v0 route is the fault proxy
/// ending TLS in front of a gate that drops `Git-Protocol`, in front of a
/// plain lighttpd serving the same directory.
pub fn https_backend(pki: Arc<TestPki>) -> Result<Row, String> {
    let version = git_version(Path::new("git"))?;
    let lighttpd = sluice_testkit::http_backend::find_lighttpd()
        .ok_or("lighttpd is not installed (apt-get install -y lighttpd; scripts/test.sh does)")?;
    let lighttpd_version = output_of(&lighttpd, &["-v"])?
        .split_whitespace()
        .next()
        .unwrap_or("lighttpd")
        .replace('/', " ");
    let (dir, base) = served_dir()?;
    let cert = pki.server(ServerCert::Good);
    let backend = HttpBackend::start_https_with_auth(&base, &cert, HTTP_USER, HTTP_TOKEN)
        .map_err(|e| format!("lighttpd with mod_openssl did not start (scripts/test.sh installs lighttpd-mod-openssl): {e}"))?;
    let plain = HttpBackend::start_with_auth(&base, HTTP_USER, HTTP_TOKEN)
        .map_err(|e| format!("lighttpd + http-backend did not start: {e}"))?;
    let gate = Gate::http(plain.addr()).map_err(|e| format!("gate: {e}"))?;
    let tls_gate = FaultProxy::https(gate.addr(), &cert).map_err(|e| format!("tls gate: {e}"))?;
    let (addr, gate_addr) = (backend.addr(), tls_gate.addr());
    let backend = Arc::new(backend);
    let log_backend = Arc::clone(&backend);
    let urls_base = base.clone();
    let credentials: Arc<dyn CredentialSource> =
        Arc::new(StaticSource::new(SecretString::from(HTTP_TOKEN)));
    let trusting = || -> Result<GitClient, String> {
        Ok(client().with_https(
            sluice_git::HttpsConfig::new()
                .with_ca_file(pki.ca_file())
                .map_err(|e| format!("the test CA: {e}"))?,
        ))
    };
    Ok(Row {
        server: format!("git {version} `http-backend` behind {lighttpd_version} with mod_openssl"),
        transport: Transport::Https,
        implementation: Implementation::Git,
        agent: Some(format!("git/{version}")),
        base: base.clone(),
        client: trusting()?,
        v0_client: trusting()?,
        credentials: Some(credentials),
        daemon: None,
        v0_probe: true,
        v0_route: "TLS ended by the fault proxy, then a gate that drops the `Git-Protocol` \
                   header, then a plain lighttpd on the same directory"
            .into(),
        urls: Box::new(move |repo, v0| {
            let at = if v0 { gate_addr } else { addr };
            format!("https://{at}/git/{}", rel_of(&urls_base, repo))
        }),
        log: Box::new(move || log_backend.error_log()),
        _keep: vec![
            Box::new(tls_gate),
            Box::new(gate),
            Box::new(plain),
            Box::new(backend),
            Box::new(pki),
        ],
        _dir: dir,
    })
}

/// The ssh row: OpenSSH's sshd running git's upload-pack / receive-pack
/// (the `git` first on sshd's default `PATH`). Returns the row and the
/// `GIT_SSH_COMMAND` its clients need (the caller sets it in the process
/// environment before any other thread starts).
///
/// sshd runs a forced command that runs what the client asked, after
/// dropping `GIT_PROTOCOL` for repositories under `v0/` (as an sshd without
/// `AcceptEnv GIT_PROTOCOL` does): one sshd, one port, one key, so one
/// `GIT_SSH_COMMAND` serves both routes.
pub fn ssh() -> Result<(Row, String), String> {
    let sshd_path = sluice_testkit::sshd::find_sshd()
        .ok_or("sshd is not installed (apt-get install -y openssh-server; scripts/test.sh does)")?;
    let sshd_version = output_of(&sshd_path, &["-V"])
        .unwrap_or_else(|e| e)
        .split(',')
        .next()
        .unwrap_or("OpenSSH")
        .replace('_', " ");
    let version = git_version(Path::new("git"))?;
    let (dir, base) = served_dir()?;
    let sshd = Sshd::start_with(&SshdOptions {
        accept_git_protocol: true,
        force_command: Some(
            "case \"$SSH_ORIGINAL_COMMAND\" in */v0/*) unset GIT_PROTOCOL;; esac; \
             exec sh -c \"$SSH_ORIGINAL_COMMAND\""
                .into(),
        ),
    })
    .map_err(|e| format!("sshd did not start: {e}"))?;
    let command = sshd.git_ssh_command();
    let sshd = Arc::new(sshd);
    let url_sshd = Arc::clone(&sshd);
    let log_sshd = Arc::clone(&sshd);
    let row = Row {
        server: format!("git {version} over {sshd_version} `sshd`"),
        transport: Transport::Ssh,
        implementation: Implementation::Git,
        agent: Some(format!("git/{version}")),
        base,
        client: client(),
        v0_client: client(),
        credentials: None,
        daemon: None,
        v0_probe: true,
        v0_route: "sshd's forced command drops `GIT_PROTOCOL` for repositories under `v0/` \
                   (as an sshd without `AcceptEnv GIT_PROTOCOL` does)"
            .into(),
        urls: Box::new(move |repo, _| url_sshd.url(repo)),
        log: Box::new(move || log_sshd.log()),
        _keep: vec![Box::new(sshd)],
        _dir: dir,
    };
    Ok((row, command))
}

/// The file:// row: the client spawns git's upload-pack / receive-pack.
/// Its v0 route is a client whose spawned program is a wrapper that drops
/// `GIT_PROTOCOL` before running `git`.
pub fn file() -> Result<Row, String> {
    use std::os::unix::fs::PermissionsExt;
    let version = git_version(Path::new("git"))?;
    let (dir, base) = served_dir()?;
    let wrapper = dir.path().join("git-v0");
    std::fs::write(&wrapper, "#!/bin/sh\nunset GIT_PROTOCOL\nexec git \"$@\"\n")
        .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", wrapper.display()))?;
    Ok(Row {
        server: format!("git {version} `upload-pack` / `receive-pack` spawned by the client"),
        transport: Transport::File,
        implementation: Implementation::Git,
        agent: Some(format!("git/{version}")),
        base,
        client: client().with_git_program("git"),
        v0_client: client().with_git_program(wrapper),
        credentials: None,
        daemon: None,
        v0_probe: false,
        v0_route: "the client spawns a wrapper that drops `GIT_PROTOCOL` before running git".into(),
        urls: Box::new(|repo, _| format!("file://{}", repo.display())),
        log: Box::new(String::new),
        _keep: vec![],
        _dir: dir,
    })
}

/// A Python with dulwich: `$SLUICE_DULWICH_PYTHON`, `python3` on `PATH`,
/// `/usr/bin/python3` (Debian's, where `python3-dulwich` installs), in that
/// order; the first that imports dulwich, with dulwich's version.
pub fn dulwich_python() -> Result<(PathBuf, String), String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("SLUICE_DULWICH_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    candidates.extend(on_path("python3"));
    candidates.push(PathBuf::from("/usr/bin/python3"));
    let mut tried = Vec::new();
    for py in candidates {
        match output_of(
            &py,
            &[
                "-c",
                "import dulwich; print('.'.join(map(str, dulwich.__version__)))",
            ],
        ) {
            Ok(v) => return Ok((py, v)),
            Err(e) => tried.push(e),
        }
    }
    Err(format!(
        "no python3 with dulwich (install Debian's python3-dulwich; scripts/test.sh does): {}",
        tried.join("; ")
    ))
}

/// The Python that serves the dulwich row: dulwich's own `TCPGitServer`
/// and protocol handlers, with one fix to its `FileSystemBackend`.
///
/// dulwich 0.21's `python3 -m dulwich.server` (and `dulwich daemon`)
/// cannot serve any repository: its request handler passes the request's
/// path (`b"/r.git"`) to `FileSystemBackend.open_repository` as bytes, which
/// joins it to the str root and fails with "TypeError: Can't mix strings and
/// bytes in path components" (and, decoded, the leading `/` would make the
/// path absolute, outside the root). The subclass decodes the path and
/// strips the `/`; everything on the wire is dulwich's.
pub const DULWICH_SERVER: &str = r#"
import os, sys
from dulwich.server import FileSystemBackend, TCPGitServer

class Backend(FileSystemBackend):
    def open_repository(self, path):
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        return super().open_repository(path.lstrip("/"))

root, port = sys.argv[1], int(sys.argv[2])
print("dulwich TCPGitServer on 127.0.0.1:%d serving %s" % (port, root), flush=True)
TCPGitServer(Backend(root), "127.0.0.1", port).serve_forever()
"#;

/// The dulwich row: dulwich's `TCPGitServer` serving git://, started as
/// [`DULWICH_SERVER`].
pub fn dulwich() -> Result<Row, String> {
    let (python, version) = dulwich_python()?;
    let (dir, base) = served_dir()?;
    let server = Spawned::start("dulwich TCPGitServer", Duration::from_secs(20), |port| {
        let mut c = Command::new(&python);
        c.args(["-c", DULWICH_SERVER])
            .arg(&base)
            .arg(port.to_string());
        c
    })
    .map_err(|e| format!("dulwich did not start: {e}"))?;
    let addr = server.addr();
    let server = Arc::new(server);
    let log_server = Arc::clone(&server);
    let urls_base = base.clone();
    Ok(Row {
        server: format!("dulwich {version} `TCPGitServer`"),
        transport: Transport::Git,
        implementation: Implementation::Dulwich,
        agent: Some(format!("dulwich/{version}")),
        base: base.clone(),
        client: client(),
        v0_client: client(),
        credentials: None,
        daemon: Some(addr),
        v0_probe: true,
        v0_route: "the server speaks only v0".into(),
        urls: Box::new(move |repo, _| format!("git://{addr}/{}", rel_of(&urls_base, repo))),
        log: Box::new(move || log_server.log()),
        _keep: vec![Box::new(server)],
        _dir: dir,
    })
}

/// `JGIT_CLASSPATH` for Debian's jgit-cli: its `org.eclipse.jgit.pgm.jar`
/// manifest lacks the LFS and Apache-HTTP jars that `jgit` loads at start
/// (`NoClassDefFoundError: org/eclipse/jgit/lfs/BuiltinLFS`), so they are
/// added from Debian's Java directory, where `libjgit-java` installs them.
pub fn jgit_classpath() -> String {
    let java = Path::new("/usr/share/java");
    let mut parts: Vec<String> = std::env::var("JGIT_CLASSPATH")
        .ok()
        .filter(|s| !s.is_empty())
        .into_iter()
        .collect();
    for jar in [
        "org.eclipse.jgit.lfs.jar",
        "org.eclipse.jgit.http.apache.jar",
        "httpclient.jar",
        "httpcore.jar",
        "commons-logging.jar",
    ] {
        if let Some(p) = first_file([java.join(jar)]) {
            parts.push(p.display().to_string());
        }
    }
    parts.join(":")
}

/// The JGit row: Debian's `jgit daemon` with receive-pack enabled.
pub fn jgit() -> Result<Row, String> {
    let jgit = on_path("jgit")
        .ok_or("jgit is not installed (apt-get install -y jgit-cli; scripts/test.sh does)")?;
    let classpath = jgit_classpath();
    let version = {
        let out = Command::new(&jgit)
            .arg("version")
            .env("JGIT_CLASSPATH", &classpath)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", jgit.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            return Err(format!(
                "jgit version failed ({}): {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        text.trim().trim_start_matches("jgit version ").to_owned()
    };
    let (dir, base) = served_dir()?;
    let server = Spawned::start("jgit daemon", Duration::from_secs(60), |port| {
        let mut c = Command::new(&jgit);
        c.args(["daemon", "--listen", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["--export-all", "--enable", "receive-pack"])
            .arg(&base)
            .env("JGIT_CLASSPATH", &classpath);
        c
    })
    .map_err(|e| format!("jgit daemon did not start: {e}"))?;
    let addr = server.addr();
    let server = Arc::new(server);
    let log_server = Arc::clone(&server);
    let urls_base = base.clone();
    let short = version.split('.').take(3).collect::<Vec<_>>().join(".");
    Ok(Row {
        server: format!("JGit {short} `jgit daemon`"),
        transport: Transport::Git,
        implementation: Implementation::JGit,
        agent: Some(format!("JGit/{short}")),
        base: base.clone(),
        client: client(),
        v0_client: client(),
        credentials: None,
        daemon: Some(addr),
        v0_probe: true,
        v0_route: "the server speaks only v0".into(),
        urls: Box::new(move |repo, _| format!("git://{addr}/{}", rel_of(&urls_base, repo))),
        log: Box::new(move || log_server.log()),
        _keep: vec![Box::new(server)],
        _dir: dir,
    })
}
