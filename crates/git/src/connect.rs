//! Opening one attempt's connection: our own socket (git://), our own child
//! (file, ssh) or our own `Http` (http(s)), each under a watchdog, each
//! reporting to the attempt's [`Wire`]; then handed to gix-transport.

use std::io::{BufRead, BufReader, Read};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::protocol::transport::client::blocking_io::Transport;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::{Protocol, Service};
use sluice_policy::{AttemptCtx, CancelFlag, Challenge, Credential};

use crate::error::{GitError, GitPhase};
#[cfg(feature = "http")]
use crate::http::LazyHttp;
use crate::remote::{Remote, TransportKind};
use crate::watchdog::{Limits, Watchdog};
use crate::wire::{TrackedRead, TrackedWrite, Wire};

/// The read buffer of a git:// socket or a spawned transport's stdout.
const READ_BUFFER: usize = 64 * 1024;

/// A boxed gix transport.
pub(crate) type BoxTransport = Box<dyn Transport + Send>;

/// One attempt's connection.
pub(crate) struct Session {
    /// The transport (dropped first, closing the child's stdin).
    pub transport: BoxTransport,
    /// Everything else: the wire, the child, the watchdog.
    pub meta: Meta,
}

/// A session's wire facts and the processes and threads it owns.
pub(crate) struct Meta {
    pub wire: Wire,
    pub timeout: Duration,
    child: Option<Spawned>,
    stderr_done: Option<Mutex<std::sync::mpsc::Receiver<()>>>,
    watchdog: Option<Watchdog>,
}

/// A spawned server: a thread of its own waits on it (no polling), and it
/// is killed through a pidfd, which cannot name another process once it
/// has been reaped.
struct Spawned {
    pidfd: Arc<Option<rustix::fd::OwnedFd>>,
    /// The exit code once the waiting thread has seen it.
    exited: Mutex<Option<Option<i32>>>,
    /// Sent once, by the waiting thread, when the child has exited.
    exit_rx: Mutex<std::sync::mpsc::Receiver<Option<i32>>>,
}

impl Spawned {
    fn new(mut child: Child) -> Spawned {
        let pid = child.id();
        let pidfd = rustix::process::Pid::from_raw(pid as i32).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let span = tracing::Span::current();
        let waiter = std::thread::Builder::new()
            .name("git-child".into())
            .spawn(move || {
                let _attempt = span.enter();
                let code = child.wait().ok().and_then(|st| st.code());
                let _ = tx.send(code);
            });
        if waiter.is_err() {
            // No thread: nothing will reap it; `exited` stays unknown and
            // the kill below still reaches it.
            tracing::debug!(pid, "could not start a thread to wait on a child");
        }
        Spawned {
            pidfd: Arc::new(pidfd),
            exited: Mutex::new(None),
            exit_rx: Mutex::new(rx),
        }
    }

    /// The exit code when the child exits within `grace`.
    fn wait_for(&self, grace: Duration) -> Option<Option<i32>> {
        let mut exited = self.exited.lock().unwrap_or_else(|p| p.into_inner());
        if exited.is_none() {
            let rx = self.exit_rx.lock().unwrap_or_else(|p| p.into_inner());
            if let Ok(code) = rx.recv_timeout(grace) {
                *exited = Some(code);
            }
        }
        *exited
    }

    fn killer(&self) -> impl Fn() + Send + 'static {
        let pidfd = Arc::clone(&self.pidfd);
        move || kill(&pidfd)
    }
}

fn kill(pidfd: &Option<rustix::fd::OwnedFd>) {
    if let Some(fd) = pidfd {
        let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
    }
}

/// What is needed to open a session.
pub(crate) struct Dial<'a> {
    pub remote: &'a Remote,
    pub service: Service,
    pub version: Protocol,
    pub timeout: Duration,
    /// The most a moving transfer may run (the deadline less the reserve).
    pub limit: Duration,
    pub cancel: &'a CancelFlag,
    /// The credential (http only).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub credential: Option<&'a Credential>,
    /// Where the attempt buys a credential when the remote asks (http only).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub challenge: Option<Challenge>,
    #[cfg(feature = "http")]
    pub http_client: &'a LazyHttp,
    /// The most read before the request is complete.
    pub advert_cap: u64,
    /// The git program spawned for file:// remotes.
    pub git_program: &'a std::path::Path,
    /// `core.sshCommand` from the repository's configuration (its global
    /// and system files included), read only for ssh remotes; `None`: read
    /// the global and system files.
    pub ssh_config: Option<Option<String>>,
    /// Where an attempt's answered HTTP requests note their request id
    /// (`None` outside an attempt: a settling read).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub facts: Option<sluice_policy::AttemptFacts>,
    /// The client's and the call's headers for every http(s) request.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub headers: Vec<(String, String)>,
}

/// What a client dials with, shared by its three operations: its HTTP
/// clients (one for reads, one for writes), the git program of `file://`
/// remotes and the most it reads before a request is complete.
#[derive(Clone)]
pub(crate) struct Connector {
    /// Reads' client: idle connections pooled.
    #[cfg(feature = "http")]
    pub http: LazyHttp,
    /// Writes' client: no idle connection kept.
    #[cfg(feature = "http")]
    pub http_write: LazyHttp,
    /// The git program spawned for file:// remotes.
    pub git_program: std::path::PathBuf,
    /// The most read before the request is complete.
    pub advert_cap: u64,
    /// The client's own headers for every http(s) request.
    pub headers: Vec<(String, String)>,
}

impl Connector {
    /// The defaults: HTTP clients from the default https settings, `git`
    /// on the PATH, the [`crate::wire::ADVERT_CAP`].
    pub fn new() -> Self {
        #[cfg(feature = "http")]
        let https = Arc::new(sluice_https::HttpsConfig::new());
        Connector {
            #[cfg(feature = "http")]
            http: LazyHttp::new(false, Arc::clone(&https)),
            #[cfg(feature = "http")]
            http_write: LazyHttp::new(true, https),
            git_program: "git".into(),
            advert_cap: crate::wire::ADVERT_CAP,
            headers: Vec::new(),
        }
    }

    /// New HTTP clients from `https` (connections already open are not
    /// reused by them).
    #[cfg(feature = "https")]
    pub fn set_https(&mut self, https: Arc<sluice_https::HttpsConfig>) {
        self.http = LazyHttp::new(false, Arc::clone(&https));
        self.http_write = LazyHttp::new(true, https);
    }

    /// What an attempt needs to open a session: its timeout, limit, cancel
    /// flag and credential; `write` picks the writes' HTTP client.
    pub fn dial<'a>(
        &'a self,
        remote: &'a Remote,
        service: Service,
        version: Protocol,
        ctx: &'a AttemptCtx<'_>,
        #[cfg_attr(not(feature = "http"), allow(unused_variables))] write: bool,
    ) -> Dial<'a> {
        Dial {
            remote,
            service,
            version,
            timeout: ctx.timeout,
            limit: ctx.limit,
            cancel: ctx.cancel_flag(),
            credential: ctx.credential(),
            challenge: ctx.challenge().cloned(),
            #[cfg(feature = "http")]
            http_client: if write { &self.http_write } else { &self.http },
            git_program: &self.git_program,
            advert_cap: self.advert_cap,
            ssh_config: None,
            facts: Some(ctx.facts().clone()),
            headers: self.with_call(ctx.headers()),
        }
    }

    /// The client's headers, then the call's.
    fn with_call(&self, call: &[(String, String)]) -> Vec<(String, String)> {
        self.headers.iter().chain(call).cloned().collect()
    }

    /// A listing's dial, outside any attempt (settling reads too): an
    /// upload-pack v2 session that moves no pack, so its limit is its
    /// timeout; `call` the call's headers.
    pub fn listing<'a>(
        &'a self,
        remote: &'a Remote,
        timeout: Duration,
        cancel: &'a CancelFlag,
        credential: Option<&'a Credential>,
        call: &[(String, String)],
    ) -> Dial<'a> {
        Dial {
            remote,
            service: Service::UploadPack,
            version: Protocol::V2,
            timeout,
            limit: timeout,
            cancel,
            credential,
            challenge: None,
            #[cfg(feature = "http")]
            http_client: &self.http,
            git_program: &self.git_program,
            advert_cap: self.advert_cap,
            ssh_config: None,
            facts: None,
            headers: self.with_call(call),
        }
    }
}

/// `core.sshCommand` as `repo` reads it (its own, global and system
/// configuration), for an ssh remote; for any other, nothing is read.
pub(crate) fn ssh_config(remote: &Remote, repo: &gix::Repository) -> Option<Option<String>> {
    (remote.kind == TransportKind::Ssh).then(|| {
        repo.config_snapshot()
            .string("core.sshCommand")
            .map(|v| v.to_string())
    })
}

/// How the ssh transport starts, in git's order: `GIT_SSH_COMMAND`, then
/// `core.sshCommand` (both run by the shell, with the arguments appended),
/// then `GIT_SSH` (a program, run without a shell), then `ssh`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SshProgram {
    /// A shell command line.
    Shell(String),
    /// A program.
    Program(String),
}

pub(crate) fn ssh_program(
    env: impl Fn(&str) -> Option<String>,
    core_ssh_command: Option<String>,
) -> SshProgram {
    let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    if let Some(c) = set(env("GIT_SSH_COMMAND")) {
        return SshProgram::Shell(c);
    }
    if let Some(c) = set(core_ssh_command) {
        return SshProgram::Shell(c);
    }
    SshProgram::Program(set(env("GIT_SSH")).unwrap_or_else(|| "ssh".into()))
}

/// `core.sshCommand` of the global and system configuration files.
fn global_ssh_command() -> Option<String> {
    let file = gix::config::File::from_globals().ok()?;
    file.string("core.sshCommand").map(|v| v.to_string())
}

impl Session {
    /// Open a session; failures are classed from the wire like any other.
    pub fn open(d: Dial<'_>) -> Result<Session, GitError> {
        match d.remote.kind {
            TransportKind::Git => open_git(d),
            TransportKind::File | TransportKind::Ssh => open_process(d),
            #[cfg(feature = "http")]
            TransportKind::Http => Ok(open_http(d)),
            // Refused when the URL was parsed (`Remote::parse`): a build
            // without the `http` feature never dials one.
            #[cfg(not(feature = "http"))]
            TransportKind::Http => Err(GitError::local(
                crate::error::GitPhase::Connect,
                crate::local::LocalCause::missing_feature(
                    if d.remote.url.scheme == gix::url::Scheme::Https {
                        "https"
                    } else {
                        "http"
                    },
                    crate::remote::missing_feature(&d.remote.url.scheme, false, false)
                        .unwrap_or_default(),
                ),
            )),
        }
    }
}

impl Meta {
    /// Wait briefly for a spawned server to exit so its status can be read.
    pub fn reap(&self, grace: Duration) {
        let Some(child) = &self.child else { return };
        if let Some(code) = child.wait_for(grace) {
            // The stderr reader sees EOF once the child is gone; wait for it
            // so the last line is in.
            if let Some(done) = &self.stderr_done {
                let rx = done.lock().unwrap_or_else(|p| p.into_inner());
                let _ = rx.recv_timeout(Duration::from_millis(200));
            }
            self.wire.lock().child_exit = Some(code);
        }
    }

    /// Class a failure at `phase`.
    pub fn fail(
        &self,
        phase: GitPhase,
        request_complete: bool,
        detail: impl std::fmt::Display,
    ) -> GitError {
        self.reap(Duration::from_millis(300));
        let st = self.wire.lock();
        crate::error::from_wire(
            &st,
            phase,
            request_complete,
            self.timeout,
            detail.to_string(),
        )
    }

    /// Class a failed read (ls-refs, fetch) from how far its wire got.
    pub fn read_fail(&self, detail: impl std::fmt::Display) -> GitError {
        let (phase, complete) = {
            let st = self.wire.lock();
            let phase = if st.fetch_sent {
                GitPhase::Negotiated
            } else if st.advertised {
                GitPhase::Advertised
            } else {
                GitPhase::Connect
            };
            (phase, st.request_complete)
        };
        self.fail(phase, complete, detail)
    }
}

impl Drop for Meta {
    fn drop(&mut self) {
        self.watchdog.take();
        if let Some(child) = self.child.take() {
            // Let a server that got its whole request finish on its own
            // (receive-pack updating refs); kill it only if it lingers, then
            // wait until the waiting thread has reaped it.
            if child.wait_for(Duration::from_millis(200)).is_none() {
                kill(&child.pidfd);
                let _ = child.wait_for(Duration::from_secs(5));
            }
        }
    }
}

fn open_git(d: Dial<'_>) -> Result<Session, GitError> {
    let wire = Wire::new(1);
    wire.lock().advert_cap = d.advert_cap;
    let url = &d.remote.url;
    let host = url.host().unwrap_or("localhost").to_string();
    let port = url.port.unwrap_or(9418);
    let started = Instant::now();
    let fail = |detail: String, wire: &Wire| {
        crate::error::from_wire(&wire.lock(), GitPhase::Connect, false, d.timeout, detail)
    };
    let addrs: Vec<_> = match (host.as_str(), port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Err(fail(format!("cannot resolve {host}: {e}"), &wire)),
    };
    let mut last = None;
    let mut stream = None;
    for addr in addrs {
        let left = d.timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            wire.lock().timed_out = true;
            break;
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    wire.lock().timed_out = true;
                }
                last = Some(e)
            }
        }
    }
    let Some(stream) = stream else {
        let detail = match last {
            Some(e) => format!("cannot connect to {host}:{port}: {e}"),
            None => format!("cannot connect to {host}:{port}"),
        };
        return Err(fail(detail, &wire));
    };
    let _ = stream.set_nodelay(true);
    let left = d
        .timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    // A backstop only: the watchdog decides (a stall of the attempt timeout,
    // the low-speed floor, the limit) and marks the wire; a socket timeout
    // firing first would hide that it was a timeout.
    let backstop = left + Duration::from_secs(1);
    let _ = stream.set_read_timeout(Some(backstop));
    let _ = stream.set_write_timeout(Some(backstop));
    let io_err = |e: std::io::Error| fail(format!("socket: {e}"), &wire);
    let read = stream.try_clone().map_err(io_err)?;
    let killer = stream.try_clone().map_err(io_err)?;
    let probe = stream.try_clone().map_err(io_err)?;
    let limits = Limits {
        timeout: left,
        limit: d.limit.saturating_sub(started.elapsed()),
    };
    let watchdog = Watchdog::arm(limits, d.cancel.clone(), wire.clone(), move || {
        let _ = killer.shutdown(Shutdown::Both);
    });
    // Buffered: gix reads each pkt-line as two reads (length, payload), a
    // system call each on a bare socket — 200,000 for an advertisement of
    // 100,000 refs. The wire still sees every byte, in order, as it
    // arrives; nothing is read ahead of what the server already sent.
    let conn = gix::protocol::transport::client::git::blocking_io::Connection::new(
        BufReader::with_capacity(READ_BUFFER, TrackedRead::new(QuickAck(read), wire.clone())),
        TrackedWrite::new(stream, wire.clone()).with_probe(probe),
        d.version,
        d.remote.path(),
        Some((host, Some(port))),
        ConnectMode::Daemon,
        false,
    );
    Ok(Session {
        transport: Box::new(conn),
        meta: Meta {
            wire,
            timeout: d.timeout,
            child: None,
            stderr_done: None,
            watchdog: Some(watchdog),
        },
    })
}

/// The read half of a git:// socket that acknowledges what it receives at
/// once (Linux: `TCP_QUICKACK`, set again before every read — the kernel
/// clears it by itself).
///
/// Without it a v2 fetch stalled for 40 ms, every time: after the ls-refs
/// exchange the kernel delays the acknowledgement of the server's next
/// segment (hoping to carry it on our next request), while `git
/// upload-pack` writes `acknowledgments` and then `ACK … ready` and the
/// pack as separate small writes on a socket with Nagle's algorithm on, so
/// its second write waits for that acknowledgement: until our delayed-ACK
/// timer fired (40 ms). A fetch of 10 commits took 48 ms where a raw client
/// sending one request took 18 ms.
struct QuickAck(TcpStream);

impl Read for QuickAck {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        #[cfg(target_os = "linux")]
        {
            // Best effort: a socket that refuses it still reads.
            let _ = rustix::net::sockopt::set_tcp_quickack(&self.0, true);
        }
        self.0.read(buf)
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The ssh command of an ssh remote, started as git starts it
/// ([`ssh_program`]), running `git-<program>` on the remote's path.
fn ssh_command(d: &Dial<'_>, program: &str) -> Command {
    let url = &d.remote.url;
    let host = url.host().unwrap_or_default();
    let target = match &d.remote.user {
        Some(u) => format!("{u}@{host}"),
        None => host.to_string(),
    };
    let mut args: Vec<String> = vec![
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        format!("ConnectTimeout={}", d.timeout.as_secs().max(1)),
    ];
    if d.version == Protocol::V2 {
        args.push("-o".into());
        args.push("SendEnv=GIT_PROTOCOL".into());
    }
    if let Some(p) = url.port {
        args.push("-p".into());
        args.push(p.to_string());
    }
    args.push(target);
    args.push(format!("git-{program} {}", shell_quote(&d.remote.path())));
    let config = match d.ssh_config.clone() {
        Some(c) => c,
        None => global_ssh_command(),
    };
    match ssh_program(|k| std::env::var(k).ok(), config) {
        SshProgram::Shell(custom) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("{custom} \"$@\""))
                .arg("sluice-ssh")
                .args(args);
            c
        }
        SshProgram::Program(p) => {
            let mut c = Command::new(p);
            c.args(args);
            c
        }
    }
}

fn open_process(d: Dial<'_>) -> Result<Session, GitError> {
    let wire = Wire::new(1);
    wire.lock().advert_cap = d.advert_cap;
    let program = match d.service {
        Service::UploadPack => "upload-pack",
        Service::ReceivePack => "receive-pack",
    };
    wire.lock().child_program = Some(if d.remote.kind == TransportKind::File {
        format!("git {program}")
    } else {
        "the ssh command".to_string()
    });
    let mut cmd = if d.remote.kind == TransportKind::File {
        let mut c = Command::new(d.git_program);
        c.arg(program).arg(d.remote.path());
        c
    } else {
        ssh_command(&d, program)
    };
    if d.version == Protocol::V2 {
        cmd.env("GIT_PROTOCOL", "version=2");
    } else {
        cmd.env_remove("GIT_PROTOCOL");
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| GitError::Transport {
        phase: GitPhase::Connect,
        request_complete: false,
        detail: format!("cannot start the {program} process: {e}"),
    })?;
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let stderr = child.stderr.take().expect("piped stderr");
    let tail_wire = wire.clone();
    let is_ssh = d.remote.kind != TransportKind::File;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let span = tracing::Span::current();
    std::thread::spawn(move || {
        let _attempt = span.enter();
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let t = line.trim();
            if !t.is_empty() {
                let t = sluice_policy::text::redact(t);
                let mut w = tail_wire.lock();
                if is_ssh && w.ssh_refusal.is_none() {
                    if let Some(r) = crate::ssh_refusal::SshRefusal::from_line(&t) {
                        w.ssh_refusal = Some((r, t.clone()));
                    }
                }
                w.stderr_tail = Some(t);
            }
            line.clear();
        }
        let _ = done_tx.send(());
    });
    let child = Spawned::new(child);
    let limits = Limits {
        timeout: d.timeout,
        limit: d.limit,
    };
    let watchdog = Watchdog::arm(limits, d.cancel.clone(), wire.clone(), child.killer());
    let conn = gix::protocol::transport::client::git::blocking_io::Connection::new(
        BufReader::with_capacity(READ_BUFFER, TrackedRead::new(stdout, wire.clone())),
        TrackedWrite::new(stdin, wire.clone()),
        d.version,
        d.remote.path(),
        None::<(String, Option<u16>)>,
        ConnectMode::Process,
        false,
    );
    Ok(Session {
        transport: Box::new(conn),
        meta: Meta {
            wire,
            timeout: d.timeout,
            child: Some(child),
            stderr_done: Some(Mutex::new(done_rx)),
            watchdog: Some(watchdog),
        },
    })
}

#[cfg(feature = "http")]
fn open_http(d: Dial<'_>) -> Session {
    let version = d.version;
    // Later attempts of an operation a remote redirected start where it
    // redirected them (git's `http.followRedirects=initial`).
    let url = d.remote.http_base();
    let (http, meta) = open_http_raw(d);
    let transport = gix::protocol::transport::client::blocking_io::http::Transport::new_http(
        http, url, version, false,
    );
    Session {
        transport: Box::new(transport),
        meta,
    }
}

/// Our `Http` for `d` and the attempt's facts, without gix's transport
/// (the one-request ls-refs uses it directly). Its watchdog keeps the
/// attempt's clock over the wire's bytes, as on every transport, and cuts
/// the session's requests (`http::Cut`).
#[cfg(feature = "http")]
pub(crate) fn open_http_raw(d: Dial<'_>) -> (crate::http::SluiceHttp, Meta) {
    let wire = Wire::new(2);
    wire.lock().advert_cap = d.advert_cap;
    wire.lock().facts = d.facts.clone();
    // The user name: the credential's own (a helper's), else the URL's,
    // else GitHub's convention for a token.
    let user = d.remote.user.as_deref().unwrap_or("x-access-token");
    let auth = d
        .credential
        .map(|c| crate::http::basic_auth(c.user().unwrap_or(user), c.secret()));
    let cut = crate::http::Cut::new();
    let http = crate::http::SluiceHttp::new(
        d.http_client.get().cloned(),
        auth,
        &d.remote.url.to_bstring().to_string(),
        wire.clone(),
        cut.clone(),
        Arc::clone(&d.remote.redirected),
        d.headers.clone(),
    )
    .with_config(
        d.remote.extra_headers.clone(),
        d.challenge.map(|c| (c, user.to_string())),
    );
    let limits = Limits {
        timeout: d.timeout,
        limit: d.limit,
    };
    let watchdog = Watchdog::arm(limits, d.cancel.clone(), wire.clone(), move || cut.fire());
    (
        http,
        Meta {
            wire,
            timeout: d.timeout,
            child: None,
            stderr_done: None,
            watchdog: Some(watchdog),
        },
    )
}

#[cfg(test)]
mod ssh_tests {
    use super::{ssh_program, SshProgram};

    #[test]
    fn the_ssh_command_is_chosen_in_gits_order() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = &[("GIT_SSH_COMMAND", "ssh -v"), ("GIT_SSH", "plink")];
        assert_eq!(
            ssh_program(env(both), Some("ssh -q".into())),
            SshProgram::Shell("ssh -v".into())
        );
        let program = &[("GIT_SSH", "plink")];
        assert_eq!(
            ssh_program(env(program), Some("ssh -q".into())),
            SshProgram::Shell("ssh -q".into())
        );
        assert_eq!(
            ssh_program(env(program), None),
            SshProgram::Program("plink".into())
        );
        let blank = &[("GIT_SSH_COMMAND", "  ")];
        assert_eq!(
            ssh_program(env(blank), Some(String::new())),
            SshProgram::Program("ssh".into())
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod quickack_tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use sluice_testkit::pktline::{self, Framer, OwnedPkt};
    use sluice_testkit::repo::{self, BareRepo};
    use sluice_testkit::GitDaemon;

    use super::QuickAck;

    /// Reads pkt-lines until a flush; panics on a malformed line or EOF.
    fn until_flush(r: &mut dyn Read, framer: &mut Framer) {
        loop {
            while let Some(frame) = framer.next_frame().expect("a pkt-line") {
                if frame.pkt == OwnedPkt::Flush {
                    return;
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = r.read(&mut chunk).expect("read");
            assert!(n > 0, "the server closed before a flush");
            framer.push(&chunk[..n]);
        }
    }

    fn request(lines: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for &l in lines {
            if l == pktline::FLUSH || l == pktline::DELIM {
                out.extend_from_slice(l);
            } else {
                pktline::encode_into(&mut out, l);
            }
        }
        out
    }

    /// One v2 conversation with `git daemon` as a fetch has it — the
    /// capabilities, `ls-refs`, then a `fetch` with a `have` and no `done`
    /// — each request written after the answer before it. Returns the time
    /// from the fetch request to the end of its answer.
    fn fetch_answer(d: &GitDaemon, want: &str, have: &str, quickack: bool) -> Duration {
        let mut w = TcpStream::connect(d.addr()).expect("connect");
        w.set_nodelay(true).expect("nodelay");
        let plain = w.try_clone().expect("clone");
        let mut r: Box<dyn Read> = if quickack {
            Box::new(QuickAck(plain))
        } else {
            Box::new(plain)
        };
        let mut buf = Framer::new();
        w.write_all(&request(&[
            b"git-upload-pack /up.git\0host=127.0.0.1\0\0version=2\0",
        ]))
        .expect("connect line");
        until_flush(&mut r, &mut buf);
        w.write_all(&request(&[
            b"command=ls-refs\n",
            b"0001",
            b"ref-prefix refs/heads/topic\n",
            b"0000",
        ]))
        .expect("ls-refs");
        until_flush(&mut r, &mut buf);
        let fetch = request(&[
            b"command=fetch\n",
            b"0001",
            b"ofs-delta\n",
            format!("want {want}\n").as_bytes(),
            format!("have {have}\n").as_bytes(),
            b"0000",
        ]);
        let t = Instant::now();
        w.write_all(&fetch).expect("fetch");
        // `acknowledgments` … delimiter, `packfile` … flush.
        until_flush(&mut r, &mut buf);
        t.elapsed()
    }

    /// `git upload-pack` answers a fetch in small writes with Nagle's
    /// algorithm on; a client whose kernel delays its acknowledgement (as
    /// it does once requests and answers alternate) left the second write
    /// waiting for the delayed-ACK timer: at least 40 ms on Linux, on every
    /// fetch over git:// (measured: 48 ms against 6.5 ms). Reading through
    /// [`QuickAck`], the fastest of five fetches is far below that even on
    /// a busy machine. (The same conversation with a plain socket takes
    /// 40 ms or more every time: checked by hand, not here, since it is the
    /// kernel's behaviour, not ours.)
    #[test]
    fn a_fetch_answer_is_not_held_back_by_our_delayed_acknowledgement() {
        let base = tempfile::tempdir().expect("temp dir");
        let up = BareRepo::create(&base.path().join("up.git")).expect("repo");
        let have = up.commit_on("main", "base");
        repo::git(up.path(), &["branch", "topic", "main"]);
        let mut want = String::new();
        for i in 0..3 {
            want = up.commit_on("topic", &format!("topic {i}"));
        }
        let d = GitDaemon::start(base.path()).expect("git daemon");
        let fastest = (0..5)
            .map(|_| fetch_answer(&d, &want, &have, true))
            .min()
            .expect("tries");
        assert!(
            fastest < Duration::from_millis(40),
            "the fetch's answer took {fastest:?}"
        );
    }
}
