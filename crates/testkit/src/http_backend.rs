//! `git http-backend` behind `lighttpd` on 127.0.0.1 with a free port
//! (smart HTTP, protocol v2 included), killed on drop.
//!
//! The configuration follows the shared notes on test servers: `mod_alias`
//! maps `/git` to `git http-backend` (found with `git --exec-path`),
//! `mod_cgi` runs it with `GIT_PROJECT_ROOT` set to the served directory and
//! `GIT_HTTP_EXPORT_ALL`. Repositories under `<base>` are served as
//! `http://127.0.0.1:PORT/git/<repo>`.
//!
//! http-backend serves receive-pack only to an authenticated user
//! (`REMOTE_USER`) or where the repository sets `http.receivepack true`:
//! start with [`HttpBackend::start_with_auth`] to require basic auth for
//! pushing (and only for pushing), or call
//! [`HttpBackend::enable_anonymous_push`] on a repository.
//!
//! [`HttpBackend::start_with_redirects`] puts lighttpd's own `mod_redirect`
//! in front: each [`Redirect`] answers the requests whose path matches it
//! with its status and `Location` (a renamed repository, a loop, a move to
//! another server), before http-backend sees them.
//!
//! [`HttpBackend::start_https`] serves the same over TLS (lighttpd's
//! `mod_openssl`, Debian's `lighttpd-mod-openssl`) with a certificate of a
//! [`crate::tls::TestPki`]: `https://127.0.0.1:PORT/git/<repo>`.

use std::io::{self, Read, Seek};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::net::{free_port, wait_for_port};
use crate::tls::CertFiles;

const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A redirect lighttpd's `mod_redirect` answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// A regular expression (PCRE) over the request's path (and query):
    /// requests that match are redirected. Write a literal dot as `[.]`.
    pub pattern: String,
    /// The `Location`: a path or a whole URL, `$1`… taken from the
    /// pattern's groups.
    pub target: String,
    /// The status: 301, 302, 303, 307 or 308.
    pub code: u16,
}

impl Redirect {
    /// Every request under `/git/<from>/` answered `code` to the same
    /// request under `<to>` (a path such as `/git/new.git`, or a whole
    /// URL), query included.
    pub fn repository(from: &str, to: &str, code: u16) -> Redirect {
        Redirect {
            pattern: format!("^/git/{}/(.*)$", from.replace('.', "[.]")),
            target: format!("{}/$1", to.trim_end_matches('/')),
            code,
        }
    }
}

/// A running lighttpd + git http-backend.
#[derive(Debug)]
pub struct HttpBackend {
    child: Child,
    addr: SocketAddr,
    base: PathBuf,
    run_dir: tempfile::TempDir,
    credentials: Option<(String, String)>,
    tls: Option<CertFiles>,
    stderr: std::fs::File,
}

/// Where `lighttpd` is: on PATH, or in the usual sbin directories (which a
/// non-root PATH may lack).
pub fn find_lighttpd() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|d| d.join("lighttpd"))
        .find(|p| p.is_file())
}

/// lighttpd's `mod_openssl`, where Debian's `lighttpd-mod-openssl` puts it.
pub fn find_mod_openssl() -> Option<PathBuf> {
    [
        "/usr/lib/lighttpd",
        "/usr/local/lib/lighttpd",
        "/usr/lib64/lighttpd",
    ]
    .iter()
    .map(|d| Path::new(d).join("mod_openssl.so"))
    .find(|p| p.is_file())
}

/// The `X-Request-Id` every answer under `/git` carries (lighttpd's
/// `mod_setenv` adds it), so a client's record of the server's request id
/// can be checked. The same for every request: lighttpd has no counter.
pub const REQUEST_ID: &str = "sluice-testkit-http-backend";

fn quote(p: &Path) -> String {
    let s = p.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl HttpBackend {
    /// Serves `base` without authentication (pushing needs
    /// [`HttpBackend::enable_anonymous_push`] on the repository).
    pub fn start(base: &Path) -> io::Result<HttpBackend> {
        Self::launch(base, None, None, &[])
    }

    /// Serves `base` (over https presenting `tls`, when given) without
    /// authentication, `redirects` answered by lighttpd's `mod_redirect`
    /// first.
    pub fn start_with_redirects(
        base: &Path,
        tls: Option<&CertFiles>,
        redirects: &[Redirect],
    ) -> io::Result<HttpBackend> {
        Self::launch(base, None, tls.cloned(), redirects)
    }

    /// Serves `base` over https presenting `cert`, without authentication.
    pub fn start_https(base: &Path, cert: &CertFiles) -> io::Result<HttpBackend> {
        Self::launch(base, None, Some(cert.clone()), &[])
    }

    /// [`HttpBackend::start_with_auth`] over https presenting `cert`.
    pub fn start_https_with_auth(
        base: &Path,
        cert: &CertFiles,
        user: &str,
        password: &str,
    ) -> io::Result<HttpBackend> {
        Self::launch(
            base,
            Some((user.to_owned(), password.to_owned())),
            Some(cert.clone()),
            &[],
        )
    }

    /// Serves `base`; receive-pack (both `info/refs?service=git-receive-pack`
    /// and `POST .../git-receive-pack`) requires basic auth as
    /// `user`/`password`, everything else is anonymous.
    pub fn start_with_auth(base: &Path, user: &str, password: &str) -> io::Result<HttpBackend> {
        Self::launch(
            base,
            Some((user.to_owned(), password.to_owned())),
            None,
            &[],
        )
    }

    /// Lets anonymous clients push to the repository at `repo`
    /// (`http.receivepack true`).
    pub fn enable_anonymous_push(repo: &Path) -> io::Result<()> {
        crate::repo::try_git(repo, &["config", "http.receivepack", "true"])?;
        Ok(())
    }

    fn launch(
        base: &Path,
        credentials: Option<(String, String)>,
        tls: Option<CertFiles>,
        redirects: &[Redirect],
    ) -> io::Result<HttpBackend> {
        let lighttpd = find_lighttpd().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "lighttpd is not installed: install it (apt-get install -y lighttpd) to run smart-HTTP tests",
            )
        })?;
        let base = base.canonicalize()?;
        let exec_path = crate::repo::try_git(&base, &["--exec-path"])?;
        let backend = PathBuf::from(exec_path.trim()).join("git-http-backend");
        if !backend.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("git-http-backend not found at {}", backend.display()),
            ));
        }
        let mut last_err = None;
        for _ in 0..5 {
            match Self::try_launch(
                &lighttpd,
                &backend,
                &base,
                credentials.clone(),
                tls.clone(),
                redirects,
            ) {
                Ok(b) => return Ok(b),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("lighttpd did not start")))
    }

    fn try_launch(
        lighttpd: &Path,
        backend: &Path,
        base: &Path,
        credentials: Option<(String, String)>,
        tls: Option<CertFiles>,
        redirects: &[Redirect],
    ) -> io::Result<HttpBackend> {
        let run_dir = tempfile::Builder::new()
            .prefix("sluice-lighttpd-")
            .tempdir()?;
        let port = free_port()?;
        let run = run_dir.path();
        let mut modules = vec!["mod_alias", "mod_cgi", "mod_setenv"];
        let mut redirect = String::new();
        if !redirects.is_empty() {
            modules.insert(0, "mod_redirect");
            for r in redirects {
                let lit = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
                redirect.push_str(&format!(
                    "$HTTP[\"url\"] =~ {p} {{\n  url.redirect = ( {p} => {t} )\n  url.redirect-code = {c}\n}}\n",
                    p = lit(&r.pattern),
                    t = lit(&r.target),
                    c = r.code
                ));
            }
        }
        let mut auth = String::new();
        if let Some((user, password)) = &credentials {
            modules.extend(["mod_auth", "mod_authn_file"]);
            let users = run.join("users");
            std::fs::write(&users, format!("{user}:{password}\n"))?;
            let require = r#"auth.require = ( "" => ( "method" => "basic", "realm" => "git", "require" => "valid-user" ) )"#;
            auth = format!(
                "auth.backend = \"plain\"\nauth.backend.plain.userfile = {}\n\
                 $HTTP[\"querystring\"] =~ \"service=git-receive-pack\" {{\n  {require}\n}}\n\
                 $HTTP[\"url\"] =~ \"/git-receive-pack$\" {{\n  {require}\n}}\n",
                quote(&users)
            );
        }
        let mut ssl = String::new();
        if let Some(files) = &tls {
            find_mod_openssl().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        "lighttpd's mod_openssl is not installed: install it (apt-get install -y lighttpd-mod-openssl) to run https tests",
                    )
            })?;
            modules.push("mod_openssl");
            ssl = format!(
                "ssl.engine = \"enable\"\nssl.pemfile = {}\nssl.privkey = {}\n",
                quote(&files.cert),
                quote(&files.key)
            );
        }
        let modules = modules
            .iter()
            .map(|m| format!("\"{m}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let conf = format!(
            "server.modules = ( {modules} )\n\
             server.bind = \"127.0.0.1\"\n\
             server.port = {port}\n\
             server.document-root = {base}\n\
             server.pid-file = {pid}\n\
             server.errorlog = {log}\n\
             server.max-request-size = 0\n\
             alias.url = ( \"/git\" => {backend} )\n\
             $HTTP[\"url\"] =~ \"^/git\" {{\n  cgi.assign = ( \"\" => \"\" )\n  \
             setenv.add-environment = ( \"GIT_PROJECT_ROOT\" => {base}, \"GIT_HTTP_EXPORT_ALL\" => \"\" )\n  \
             setenv.add-response-header = ( \"X-Request-Id\" => \"{REQUEST_ID}\" )\n}}\n\
             {redirect}{auth}{ssl}",
            base = quote(base),
            pid = quote(&run.join("lighttpd.pid")),
            log = quote(&run.join("lighttpd-error.log")),
            backend = quote(backend),
        );
        let conf_path = run.join("lighttpd.conf");
        std::fs::write(&conf_path, conf)?;
        let stderr = tempfile::tempfile()?;
        let child = Command::new(lighttpd)
            .arg("-D")
            .arg("-f")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.try_clone()?)
            .spawn()?;
        let mut me = HttpBackend {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            base: base.to_owned(),
            run_dir,
            credentials,
            tls,
            stderr,
        };
        let addr = me.addr;
        let log_path = me.run_dir.path().join("lighttpd-error.log");
        let child = &mut me.child;
        let stderr = &me.stderr;
        wait_for_port(addr, START_TIMEOUT, || match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(io::Error::other(format!(
                "lighttpd exited with {status} before accepting: {}{}",
                read_all(stderr),
                std::fs::read_to_string(&log_path).unwrap_or_default()
            ))),
        })?;
        Ok(me)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The directory it serves.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// `http(s)://127.0.0.1:PORT/git/<repo>`.
    pub fn url(&self, repo: &str) -> String {
        format!(
            "{}://{}/git/{}",
            self.scheme(),
            self.addr,
            repo.trim_start_matches('/')
        )
    }

    /// `http(s)://user:password@127.0.0.1:PORT/git/<repo>` when started with
    /// credentials, else [`HttpBackend::url`].
    pub fn url_with_credentials(&self, repo: &str) -> String {
        match &self.credentials {
            Some((u, p)) => format!(
                "{}://{u}:{p}@{}/git/{}",
                self.scheme(),
                self.addr,
                repo.trim_start_matches('/')
            ),
            None => self.url(repo),
        }
    }

    /// The user and password pushing requires, if any.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// lighttpd's error log and stderr so far (CGI errors land here).
    pub fn error_log(&self) -> String {
        let log = std::fs::read_to_string(self.run_dir.path().join("lighttpd-error.log"))
            .unwrap_or_default();
        format!("{}{log}", read_all(&self.stderr))
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

impl Drop for HttpBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
