//! A TCP proxy in front of a git server that knows where the git conversation
//! is and injects a named fault at a named point.
//!
//! [`TcpFaultProxy`] is its plain TCP mode (no protocol understood: cut
//! every connection, stall new or open ones), for a database's connections.
//!
//! [`FaultProxy`] listens on `127.0.0.1:<free port>` and forwards each
//! connection to an upstream address (a `git daemon` in [`Protocol::Git`]
//! mode, a web server such as [`crate::HttpBackend`] in [`Protocol::Http`]
//! mode). It frames pkt-lines in both directions (git mode) or HTTP/1.1
//! messages (http mode), so it can cut, stall or trickle at exactly the
//! points of the design's protocol-phase tables, and it records every
//! connection ([`ConnectionRecord`]).
//!
//! The fault is chosen per connection (git mode) or per matching request
//! (http mode): [`FaultProxy::set_fault`]`(fault, n)` applies `fault` to the
//! next `n` of them, then everything passes through. It can be changed at any
//! time from the test thread.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use sluice_testkit::{Fault, FaultProxy, GitDaemon};
//! # let base = std::path::Path::new(".");
//! let daemon = GitDaemon::start(base)?;
//! let proxy = FaultProxy::git(daemon.addr())?;
//! proxy.set_fault(Fault::CutBeforeReport, 1); // the first connection only
//! let url = proxy.url("r.git");
//! // ... push to `url`, then:
//! assert!(proxy.wait_idle(std::time::Duration::from_secs(5)));
//! let rec = &proxy.connections()[0];
//! assert!(rec.fault_fired);
//! # let _ = url; Ok(()) }
//! ```

mod git;
mod http;
mod tcp;

pub use tcp::{TcpFaultProxy, TcpMode};

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::net::Stopper;

/// How long the proxy waits to connect upstream.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the proxy speaks with its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The git:// daemon protocol (pkt-lines; upload-pack v0/v1/v2,
    /// receive-pack v0/v1).
    Git,
    /// Plain HTTP/1.1 (smart HTTP through a web server, or any HTTP API).
    Http,
}

/// A fault, named for what it does. Git-mode faults apply per connection;
/// the `Http*` faults apply per matching request in http mode (a git-mode
/// fault in http mode, or the reverse, passes everything through).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fault {
    /// Forward everything.
    PassThrough,
    /// Accept and drop the connection at once; never connect upstream.
    Refuse,
    /// Read the client's request line, then close; never connect upstream.
    ResetBeforeAdvert,
    /// Read the client's request line and never answer; keep the socket open
    /// until the client closes it or the proxy is dropped.
    StallBeforeAdvert,
    /// Forward the server's advertisement one byte at a time, pausing
    /// `every` before each byte; then pass through.
    TrickleAdvert {
        /// The pause before each byte of the advertisement.
        every: Duration,
    },
    /// Forward the server's first message (the advertisement through its
    /// flush-pkt), then close both sides.
    CutAfterAdvert,
    /// upload-pack: forward the response until the pack starts (v2: after
    /// the `packfile` section line, the first band-1 pkt-line; v0/v1: after
    /// the ACK/NAK lines, the first band-1 pkt-line, or a raw `PACK`), then
    /// forward that line's header, band byte and at most 20 bytes of pack
    /// (so the cut is always inside the pack, which is at least 32 bytes),
    /// then close both sides.
    CutInFetchPack,
    /// receive-pack: forward the advertisement, the commands and their
    /// flush (and push options), then at most 20 raw bytes of the pack, then
    /// close both sides. A push that sends no pack (deletions only) is not
    /// cut.
    CutInPushPack,
    /// Forward everything client→server and the advertisement
    /// server→client, then nothing more server→client: read and discard the
    /// server's side until it closes (so a receive-pack finishes and applies
    /// the push), then close the client. Over upload-pack v2, where the
    /// server waits for the next command, this stalls until the client
    /// gives up.
    CutBeforeReport,
    /// Like [`Fault::CutBeforeReport`], but after the server closed keep
    /// the client's socket open, sending nothing, until the client closes it
    /// or the proxy is dropped.
    StallBeforeReport,
    /// http: answer a request whose path contains `path_contains` with
    /// `status` (and `Retry-After: <seconds>` when given) without forwarding
    /// it; the request body, if any, is read and discarded.
    HttpStatus {
        /// The status code to answer.
        status: u16,
        /// `Retry-After` in seconds.
        retry_after: Option<u64>,
        /// Only requests whose path (with query) contains this match.
        path_contains: String,
    },
    /// http: forward a matching request and its whole body, read and discard
    /// the upstream's whole response, then close the client's connection
    /// without sending it any byte of that response.
    HttpCutResponse {
        /// Only requests whose path (with query) contains this match.
        path_contains: String,
    },
    /// http: forward a matching request, then the response's head and the
    /// first `after` bytes of its body, then nothing more: the connection
    /// stays open, silent, until the client closes it (a fetch's pack
    /// stalling mid-body).
    HttpStallResponseBody {
        /// Only requests whose path (with query) contains this match.
        path_contains: String,
        /// Body bytes forwarded before the stall.
        after: u64,
    },
    /// http: forward a matching request's head and the first `after` bytes
    /// of its body, then read nothing more from the client (its writes
    /// block once the socket's buffers fill) until the proxy is dropped (a
    /// push's pack stalling mid-body). Nothing reaches the server after
    /// those bytes.
    HttpStallRequestBody {
        /// Only requests whose path (with query) contains this match.
        path_contains: String,
        /// Body bytes forwarded before the stall.
        after: u64,
    },
}

impl Fault {
    /// [`Fault::TrickleAdvert`] at one byte per second.
    pub fn trickle_advert() -> Fault {
        Fault::TrickleAdvert {
            every: Duration::from_secs(1),
        }
    }

    /// [`Fault::HttpStatus`] without `Retry-After`.
    pub fn http_status(status: u16, path_contains: &str) -> Fault {
        Fault::HttpStatus {
            status,
            retry_after: None,
            path_contains: path_contains.to_owned(),
        }
    }

    /// [`Fault::HttpCutResponse`].
    pub fn http_cut_response(path_contains: &str) -> Fault {
        Fault::HttpCutResponse {
            path_contains: path_contains.to_owned(),
        }
    }

    fn is_http(&self) -> bool {
        self.http_filter().is_some()
    }

    fn http_filter(&self) -> Option<&str> {
        match self {
            Fault::HttpStatus { path_contains, .. }
            | Fault::HttpCutResponse { path_contains }
            | Fault::HttpStallResponseBody { path_contains, .. }
            | Fault::HttpStallRequestBody { path_contains, .. } => Some(path_contains),
            _ => None,
        }
    }
}

/// The service a connection asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Service {
    /// `git-upload-pack`: fetch and ls-refs.
    UploadPack,
    /// `git-receive-pack`: push.
    ReceivePack,
    /// Another git service (e.g. `git-upload-archive`), by name.
    OtherGit(String),
    /// An HTTP connection (http mode).
    Http,
}

/// Milestones of a connection, in conversation order. A milestone is
/// recorded when the proxy has *forwarded* what it names (a cut before that
/// leaves it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    /// The TCP connection was accepted.
    Accepted,
    /// git: the client's request line was read. http: a request head was
    /// read.
    RequestLine,
    /// git: the server's advertisement was forwarded through its flush-pkt.
    Advertised,
    /// git: a client's request section was forwarded through its flush
    /// (receive-pack: the commands; upload-pack v2: a command such as
    /// `ls-refs` or `fetch`; v0: the wants). http: a request (head and
    /// body) was forwarded.
    CommandsSent,
    /// The first pack byte was forwarded (receive-pack: client→server;
    /// upload-pack: server→client).
    PackStarted,
    /// upload-pack: the pack stream's closing flush was forwarded.
    PackComplete,
    /// The server's answer was forwarded completely (receive-pack: the
    /// report through its flush; upload-pack: an ls-refs result or a pack
    /// stream; http: a whole response).
    Responded,
}

/// One HTTP request seen on a connection (http mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpExchange {
    /// The method (`GET`, `POST`, ...).
    pub method: String,
    /// The request target, query included.
    pub path: String,
    /// Whether it had a body (a `Content-Length` above zero, or chunked).
    pub had_body: bool,
    /// The body's bytes on the wire (chunk framing included).
    pub body_bytes: u64,
    /// The status the client got — or, when the response was cut, the
    /// status the upstream answered; `None` when there was none.
    pub status: Option<u16>,
    /// The fault applied to this request.
    pub fault: Option<Fault>,
    /// Whether the response reached the client.
    pub response_forwarded: bool,
}

/// Everything the proxy saw of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionRecord {
    /// 0, 1, 2, ... in accept order.
    pub id: u64,
    /// When it was accepted.
    pub accepted: Instant,
    /// When the proxy finished with it (both directions done).
    pub closed: Option<Instant>,
    /// The service asked for, once known.
    pub service: Option<Service>,
    /// git: the repository path of the request line.
    pub path: Option<String>,
    /// git: the version the client asked for (`version=N`), if any.
    pub requested_version: Option<u8>,
    /// git: the version the server spoke (2 or 1 from its `version N` line,
    /// else 0), once its first line was seen.
    pub protocol_version: Option<u8>,
    /// The last milestone passed.
    pub reached: Point,
    /// Every milestone passed, in order, with its time.
    pub milestones: Vec<(Point, Instant)>,
    /// Bytes forwarded client→server.
    pub bytes_client_to_server: u64,
    /// Bytes forwarded server→client.
    pub bytes_server_to_client: u64,
    /// receive-pack: raw pack bytes forwarded client→server (after the
    /// command flush and push options).
    pub pack_bytes_client_to_server: u64,
    /// Bytes read from the server and deliberately not forwarded.
    pub discarded_server_bytes: u64,
    /// The fault assigned to this connection (git mode; `None` = pass
    /// through). In http mode see [`HttpExchange::fault`].
    pub fault: Option<Fault>,
    /// Whether a fault actually acted on this connection.
    pub fault_fired: bool,
    /// Why connecting or talking upstream failed, if it did.
    pub upstream_error: Option<String>,
    /// A server `ERR` line, if one was seen.
    pub server_error: Option<String>,
    /// http: the requests, in order.
    pub http_requests: Vec<HttpExchange>,
}

impl ConnectionRecord {
    fn new(id: u64) -> Self {
        let now = Instant::now();
        ConnectionRecord {
            id,
            accepted: now,
            closed: None,
            service: None,
            path: None,
            requested_version: None,
            protocol_version: None,
            reached: Point::Accepted,
            milestones: vec![(Point::Accepted, now)],
            bytes_client_to_server: 0,
            bytes_server_to_client: 0,
            pack_bytes_client_to_server: 0,
            discarded_server_bytes: 0,
            fault: None,
            fault_fired: false,
            upstream_error: None,
            server_error: None,
            http_requests: Vec::new(),
        }
    }

    /// Whether `point` was ever passed.
    pub fn passed(&self, point: Point) -> bool {
        self.milestones.iter().any(|(p, _)| *p == point)
    }

    /// The furthest milestone passed, in [`Point`] order.
    pub fn furthest(&self) -> Point {
        self.milestones
            .iter()
            .map(|(p, _)| *p)
            .max()
            .unwrap_or(Point::Accepted)
    }
}

#[derive(Debug)]
struct FaultPlan {
    fault: Fault,
    remaining: usize,
}

#[derive(Debug, Default)]
struct Inner {
    plan: Mutex<Option<FaultPlan>>,
    /// Server→client bytes a second (`None`: no limit): git connections,
    /// and response bodies in http mode.
    throttle: Mutex<Option<u64>>,
    /// Client→server bytes a second of request bodies in http mode.
    throttle_upload: Mutex<Option<u64>>,
    records: Mutex<Vec<ConnectionRecord>>,
    live: Mutex<HashMap<u64, Vec<TcpStream>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    active: Mutex<usize>,
    idle: Condvar,
    stopper: Stopper,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    /// The fault for a new git connection (consumes one use).
    fn take_connection_fault(&self) -> Option<Fault> {
        let mut plan = lock(&self.plan);
        let p = plan.as_mut()?;
        if p.remaining == 0 || p.fault == Fault::PassThrough || p.fault.is_http() {
            return None;
        }
        if p.remaining != usize::MAX {
            p.remaining -= 1;
        }
        Some(p.fault.clone())
    }

    /// The fault for an HTTP request to `path` (consumes one use if it
    /// matches).
    fn take_request_fault(&self, path: &str) -> Option<Fault> {
        let mut plan = lock(&self.plan);
        let p = plan.as_mut()?;
        if p.remaining == 0 || !p.fault.http_filter().is_some_and(|f| path.contains(f)) {
            return None;
        }
        if p.remaining != usize::MAX {
            p.remaining -= 1;
        }
        Some(p.fault.clone())
    }
}

/// A handle for one connection's thread(s) on the proxy's shared state.
#[derive(Debug, Clone)]
struct Ctx {
    inner: Arc<Inner>,
    id: u64,
}

impl Ctx {
    fn update<R>(&self, f: impl FnOnce(&mut ConnectionRecord) -> R) -> R {
        let mut recs = lock(&self.inner.records);
        f(&mut recs[self.id as usize])
    }

    fn milestone(&self, p: Point) {
        self.update(|r| {
            r.reached = p;
            r.milestones.push((p, Instant::now()));
        });
    }

    fn fired(&self) {
        self.update(|r| r.fault_fired = true);
    }

    fn register(&self, s: &TcpStream) {
        if let Ok(c) = s.try_clone() {
            lock(&self.inner.live).entry(self.id).or_default().push(c);
        }
        // A proxy dropped between accept and registration must not leave
        // this socket open.
        if self.inner.stopper.is_stopped() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn stopper(&self) -> &Stopper {
        &self.inner.stopper
    }

    /// The server→client rate limit now in force.
    fn throttle(&self) -> Option<u64> {
        *lock(&self.inner.throttle)
    }

    /// The client→server rate limit of request bodies now in force.
    fn throttle_upload(&self) -> Option<u64> {
        *lock(&self.inner.throttle_upload)
    }
}

/// The fault-injecting proxy. Dropping it stops the accept loop, shuts down
/// every live socket and joins every connection thread.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    protocol: Protocol,
    https: bool,
    inner: Arc<Inner>,
    accept_thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:<free port>` in front of `upstream`,
    /// passing everything through until [`FaultProxy::set_fault`].
    pub fn start(upstream: SocketAddr, protocol: Protocol) -> io::Result<FaultProxy> {
        Self::launch(upstream, protocol, None)
    }

    /// An http-mode proxy that ends the client's TLS itself, presenting
    /// `cert`, and speaks plain HTTP/1.1 to `upstream` (a plain
    /// [`crate::HttpBackend`]): the http faults then apply to https
    /// clients, and a cut is a TLS connection closed without a
    /// close_notify. Its URLs are `https://127.0.0.1:PORT/...`.
    pub fn https(upstream: SocketAddr, cert: &crate::tls::CertFiles) -> io::Result<FaultProxy> {
        let config = crate::tls::server_config(cert)?;
        Self::launch(upstream, Protocol::Http, Some(Arc::new(config)))
    }

    fn launch(
        upstream: SocketAddr,
        protocol: Protocol,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<FaultProxy> {
        let https = tls.is_some();
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner::default());
        let accept_inner = Arc::clone(&inner);
        let accept_thread = std::thread::Builder::new()
            .name(format!("fault-proxy-accept-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_inner, upstream, protocol, tls))?;
        Ok(FaultProxy {
            addr,
            upstream,
            protocol,
            https,
            inner,
            accept_thread: Some(accept_thread),
        })
    }

    /// [`FaultProxy::start`] in [`Protocol::Git`] mode.
    pub fn git(upstream: SocketAddr) -> io::Result<FaultProxy> {
        Self::start(upstream, Protocol::Git)
    }

    /// [`FaultProxy::start`] in [`Protocol::Http`] mode.
    pub fn http(upstream: SocketAddr) -> io::Result<FaultProxy> {
        Self::start(upstream, Protocol::Http)
    }

    /// Applies `fault` to the next `times` connections (git mode) or
    /// matching requests (http mode), then passes through; `usize::MAX`
    /// means always. Replaces any earlier setting.
    pub fn set_fault(&self, fault: Fault, times: usize) {
        *lock(&self.inner.plan) = Some(FaultPlan {
            fault,
            remaining: times,
        });
    }

    /// Applies `fault` to every connection / matching request from now on.
    pub fn set_fault_always(&self, fault: Fault) {
        self.set_fault(fault, usize::MAX);
    }

    /// Passes everything through from now on.
    pub fn clear_fault(&self) {
        *lock(&self.inner.plan) = None;
    }

    /// How many more connections / requests the current fault will hit.
    pub fn fault_remaining(&self) -> usize {
        lock(&self.inner.plan).as_ref().map_or(0, |p| p.remaining)
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address it forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Its mode.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// `git://127.0.0.1:PORT/<repo>` in git mode, `http://127.0.0.1:PORT/<repo>`
    /// in http mode (a leading `/` in `repo` is ignored).
    pub fn url(&self, repo: &str) -> String {
        match self.protocol {
            Protocol::Git => format!("git://{}/{}", self.addr, repo.trim_start_matches('/')),
            Protocol::Http => self.http_url(repo),
        }
    }

    /// `http://127.0.0.1:PORT/<path>` (`https://` for [`FaultProxy::https`];
    /// a leading `/` in `path` is ignored).
    pub fn http_url(&self, path: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// A snapshot of every connection so far, in accept order.
    pub fn connections(&self) -> Vec<ConnectionRecord> {
        lock(&self.inner.records).clone()
    }

    /// Limits what git connections (and, in http mode, response bodies)
    /// forward from the server to the client to `bytes_per_second` (`None`:
    /// no limit), from the next write on: a slow link whose transfer keeps
    /// moving.
    pub fn throttle(&self, bytes_per_second: Option<u64>) {
        *lock(&self.inner.throttle) = bytes_per_second.filter(|r| *r > 0);
    }

    /// In http mode, limits what request bodies forward from the client to
    /// the server to `bytes_per_second` (`None`: no limit), from the next
    /// write on: a slow uplink under a push's pack.
    pub fn throttle_upload(&self, bytes_per_second: Option<u64>) {
        *lock(&self.inner.throttle_upload) = bytes_per_second.filter(|r| *r > 0);
    }

    /// Cuts the client side of every live connection now (the upstream side
    /// is left to its fault: with [`Fault::StallBeforeReport`] the server's
    /// answer is still read and thrown away, so a receive-pack that got its
    /// whole pack goes on applying it). A test calls this on an event — a
    /// hook that says it started — to cut a push right after its pack.
    /// Returns how many connections were cut.
    pub fn cut_clients(&self) -> usize {
        let live = lock(&self.inner.live);
        let mut n = 0;
        for socks in live.values() {
            // The client's socket is registered first, at accept.
            if let Some(client) = socks.first() {
                let _ = client.shutdown(Shutdown::Both);
                n += 1;
            }
        }
        n
    }

    /// Waits until no connection is being handled (every connection thread
    /// finished); `false` when `timeout` passed first.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut active = lock(&self.inner.active);
        while *active > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            active = self
                .inner
                .idle
                .wait_timeout(active, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.inner.stopper.stop();
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
        for socks in lock(&self.inner.live).values() {
            for s in socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let threads = std::mem::take(&mut *lock(&self.inner.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    inner: Arc<Inner>,
    upstream: SocketAddr,
    protocol: Protocol,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    loop {
        let accepted = listener.accept();
        if inner.stopper.is_stopped() {
            return;
        }
        let Ok((client, _)) = accepted else {
            // Transient accept errors (EMFILE, aborted handshakes): go on.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let id = inner.next_id.fetch_add(1, Ordering::SeqCst);
        lock(&inner.records).push(ConnectionRecord::new(id));
        *lock(&inner.active) += 1;
        let ctx = Ctx {
            inner: Arc::clone(&inner),
            id,
        };
        ctx.register(&client);
        let tls = tls.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("fault-proxy-conn-{id}"))
            .spawn(move || {
                match protocol {
                    Protocol::Git => git::handle(&ctx, client, upstream),
                    Protocol::Http => http::handle(&ctx, client, upstream, tls.as_ref()),
                }
                finish(&ctx);
            });
        match spawned {
            Ok(h) => {
                let mut threads = lock(&inner.threads);
                // Reap finished threads so a long test does not pile them up.
                let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *threads)
                    .into_iter()
                    .partition(|t| t.is_finished());
                *threads = running;
                threads.push(h);
                drop(threads);
                for t in done {
                    let _ = t.join();
                }
            }
            Err(_) => {
                let ctx = Ctx {
                    inner: Arc::clone(&inner),
                    id,
                };
                finish(&ctx);
            }
        }
    }
}

fn finish(ctx: &Ctx) {
    if let Some(socks) = lock(&ctx.inner.live).remove(&ctx.id) {
        for s in socks {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
    ctx.update(|r| r.closed = Some(Instant::now()));
    let mut active = lock(&ctx.inner.active);
    *active -= 1;
    ctx.inner.idle.notify_all();
}

/// Shuts both sockets down in both directions (a "cut").
fn cut(a: &TcpStream, b: Option<&TcpStream>) {
    let _ = a.shutdown(Shutdown::Both);
    if let Some(b) = b {
        let _ = b.shutdown(Shutdown::Both);
    }
}

fn connect_upstream(ctx: &Ctx, upstream: SocketAddr) -> Option<TcpStream> {
    match TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(s) => {
            let _ = s.set_nodelay(true);
            ctx.register(&s);
            Some(s)
        }
        Err(e) => {
            ctx.update(|r| r.upstream_error = Some(format!("connect {upstream}: {e}")));
            None
        }
    }
}
