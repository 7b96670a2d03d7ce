//! A scripted, hostile git server: speaks the git:// daemon protocol on
//! `127.0.0.1` and answers every connection with a chosen [`Script`] —
//! malformed pkt-lines, an advertisement that never ends, a receive-pack
//! report that names refs nobody pushed, a side-band fatal, a pack far larger
//! than asked, a capability list of garbage.
//!
//! The server reads what a real one would before it misbehaves: the daemon
//! request line, and for receive-pack the client's commands and its whole
//! pack (until the pack's SHA-1 trailer, or EOF), so a push reaches the
//! phase the script is meant to hit. For upload-pack it reads the client's
//! request (through `done`, or the flush that ends a request) before a
//! scripted answer.
//!
//! A push script serves upload-pack connections (the client's settling
//! reads) with a well-formed advertisement of [`ScriptedServer`]'s refs; an
//! upload-pack script serves receive-pack connections the same way.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use sluice_testkit::scripted::{Script, ScriptedServer};
//! let main = "1111111111111111111111111111111111111111";
//! let server = ScriptedServer::start(
//!     Script::UnpackOkNoRefs,
//!     vec![("refs/heads/main".into(), main.into())],
//! )?;
//! let url = server.url("r.git"); // git://127.0.0.1:PORT/r.git
//! // ... push to `url`, then:
//! assert!(server.wait_idle(std::time::Duration::from_secs(5)));
//! let rec = &server.connections()[0];
//! assert!(rec.pack_complete);
//! # let _ = url; Ok(()) }
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::net::Stopper;
use crate::pktline::{self, Framer, OwnedPkt};

/// How long the server waits for a client's next bytes before giving up on
/// a request it expects (a client that went quiet).
const CLIENT_IDLE: Duration = Duration::from_secs(20);
/// The most pack bytes a receive-pack connection reads from a client.
const MAX_PUSH_PACK: u64 = 256 << 20;
/// The largest side-band data per pkt-line (65520 - 4 length - 1 band).
const MAX_BAND_DATA: usize = pktline::MAX_PKT_LEN - 5;
/// The capabilities a well-formed upload-pack advertisement offers.
pub const UPLOAD_CAPS: &str =
    "multi_ack_detailed side-band-64k ofs-delta include-tag object-format=sha1 agent=scripted/1";
/// The capabilities a well-formed receive-pack advertisement offers.
pub const RECEIVE_CAPS: &str =
    "report-status delete-refs side-band-64k quiet atomic ofs-delta object-format=sha1 agent=scripted/1";

/// How a scripted server answers a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Script {
    /// Well-formed: the advertisement of the server's refs; a push is read
    /// whole and answered `unpack ok` / `ok <ref>` for every command (no
    /// ref is changed: the server keeps no state); an upload-pack request
    /// for objects is answered `ERR` (this server has no objects).
    Plain,
    /// Well-formed, but the first ref line offers exactly `caps` (a
    /// capability list that lacks what the client needs, ...); then served
    /// as [`Script::Plain`].
    Caps {
        /// The capability list, as sent.
        caps: String,
    },
    /// After the first ref line, a pkt-line whose four length bytes are
    /// `header` (`zz!!`, `0003`, ...), followed by a few bytes; then the
    /// connection is held open until the client closes it.
    MalformedLength {
        /// The four bytes sent where a length belongs.
        header: [u8; 4],
    },
    /// After the first ref line, a length prefix and the bytes of a
    /// pkt-line longer than the protocol allows (`ffff`: 65535 > 65520).
    OverlongPkt,
    /// Only the length prefix of a line, then the connection ends (EOF in
    /// the middle of the advertisement).
    TruncatedAdvert,
    /// An advertisement that never ends: valid ref lines without end, one
    /// byte every `every` (zero: as fast as the socket takes them), until
    /// the client hangs up or `max_bytes` were sent.
    EndlessAdvert {
        /// The pause before each byte.
        every: Duration,
        /// Stop (and close) after this many bytes.
        max_bytes: u64,
    },
    /// The first ref line's capability list is `len` bytes of seeded
    /// garbage (NULs, high bytes, `=` runs, spaces), the rest of the
    /// advertisement well-formed; then served as [`Script::Plain`].
    GarbageCaps {
        /// Bytes of garbage.
        len: usize,
    },
    /// receive-pack: after the whole pack, `unpack ok` and `ok` for a ref
    /// that was never pushed (`refs/heads/never-pushed`).
    ReportUnknownRefs,
    /// receive-pack: after the whole pack, `unpack ok` and no ref line.
    UnpackOkNoRefs,
    /// Instead of an advertisement, one `ERR <text>` pkt-line (as a daemon
    /// refusing the repository), then the connection ends. `text` is sent
    /// as given (control characters included), cut to fit one pkt-line.
    Err {
        /// The words after `ERR `.
        text: String,
    },
    /// receive-pack: after the commands (and the whole pack, when one is
    /// sent), `unpack ok` and `ng <ref> <reason>` for every command, as a
    /// server refusing each ref; `reason` is sent as given (control
    /// characters included), cut to fit one pkt-line.
    Refuse {
        /// The words after `ng <ref> `.
        reason: String,
    },
    /// After the whole request (receive-pack: the pack; upload-pack: the
    /// fetch request), a side-band band-3 message `fatal: <words>`, then the
    /// connection ends.
    SidebandFatal {
        /// The fatal's words.
        words: String,
    },
    /// upload-pack: after the fetch request, `NAK` and a side-band pack
    /// stream far larger than anything asked for, until the client hangs
    /// up or `max_bytes` of pack were sent (never a complete pack).
    HugePack {
        /// What the pack is made of.
        shape: PackShape,
        /// Stop (and close) after this many pack bytes.
        max_bytes: u64,
    },
}

/// The contents of [`Script::HugePack`]'s stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackShape {
    /// A header claiming `claimed` objects, then small blobs (1 KiB each,
    /// stored deflate), without end.
    ManySmallObjects {
        /// The object count the pack header claims.
        claimed: u32,
    },
    /// A header claiming one object, then one blob claiming 2⁴⁰ bytes whose
    /// deflate stream never ends (stored blocks of 64 KiB).
    OneEndlessObject,
}

impl Script {
    /// [`Script::EndlessAdvert`] at one byte a second (at most 1 MiB).
    pub fn trickle() -> Script {
        Script::EndlessAdvert {
            every: Duration::from_secs(1),
            max_bytes: 1 << 20,
        }
    }

    fn is_push_only(&self) -> bool {
        matches!(
            self,
            Script::ReportUnknownRefs | Script::UnpackOkNoRefs | Script::Refuse { .. }
        )
    }

    fn is_fetch_only(&self) -> bool {
        matches!(self, Script::HugePack { .. })
    }
}

/// Everything the server saw of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedConnection {
    /// 0, 1, 2, ... in accept order.
    pub id: u64,
    /// When it was accepted.
    pub accepted: Instant,
    /// When the server was done with it.
    pub closed: Option<Instant>,
    /// `git-upload-pack` or `git-receive-pack` (as requested).
    pub service: Option<String>,
    /// The requested path.
    pub path: Option<String>,
    /// The script applied (a push script on an upload-pack connection, or
    /// the reverse, is served as [`Script::Plain`] and recorded as such).
    pub script: Script,
    /// receive-pack: the command lines (`<old> <new> <ref>`), without
    /// capabilities.
    pub commands: Vec<String>,
    /// receive-pack: pack bytes read.
    pub pack_bytes: u64,
    /// receive-pack: the pack's SHA-1 trailer was read (the request was
    /// complete).
    pub pack_complete: bool,
    /// upload-pack: the payloads of the client's request lines (at most 64
    /// are kept).
    pub request_lines: Vec<String>,
    /// Bytes sent to the client.
    pub bytes_sent: u64,
    /// Why the conversation ended early, if it did (client closed, write
    /// failed, ...).
    pub ended: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    script: Mutex<Option<Script>>,
    refs: Mutex<Vec<(String, String)>>,
    records: Mutex<Vec<ScriptedConnection>>,
    live: Mutex<Vec<(u64, TcpStream)>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    active: Mutex<usize>,
    idle: Condvar,
    stopper: Stopper,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A git:// server on `127.0.0.1:<free port>` that answers with a
/// [`Script`]. Dropping it stops the accept loop, shuts every live socket
/// and joins every connection thread.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    inner: Arc<Inner>,
    accept_thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Starts a server answering every connection with `script`, advertising
    /// `refs` (`(name, 40-hex oid)`, in order; the first also serves as
    /// `HEAD`'s value when it is a branch).
    pub fn start(script: Script, refs: Vec<(String, String)>) -> io::Result<ScriptedServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner::default());
        *lock(&inner.script) = Some(script);
        *lock(&inner.refs) = refs;
        let accept_inner = Arc::clone(&inner);
        let accept_thread = std::thread::Builder::new()
            .name(format!("scripted-accept-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_inner))?;
        Ok(ScriptedServer {
            addr,
            inner,
            accept_thread: Some(accept_thread),
        })
    }

    /// Answers connections accepted from now on with `script`.
    pub fn set_script(&self, script: Script) {
        *lock(&self.inner.script) = Some(script);
    }

    /// Advertises `refs` on connections accepted from now on.
    pub fn set_refs(&self, refs: Vec<(String, String)>) {
        *lock(&self.inner.refs) = refs;
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `git://127.0.0.1:PORT/<repo>` (a leading `/` in `repo` is ignored).
    pub fn url(&self, repo: &str) -> String {
        format!("git://{}/{}", self.addr, repo.trim_start_matches('/'))
    }

    /// A snapshot of every connection so far, in accept order.
    pub fn connections(&self) -> Vec<ScriptedConnection> {
        lock(&self.inner.records).clone()
    }

    /// Waits until no connection is being served; `false` when `timeout`
    /// passed first.
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

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.inner.stopper.stop();
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
        for (_, s) in lock(&self.inner.live).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *lock(&self.inner.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        let accepted = listener.accept();
        if inner.stopper.is_stopped() {
            return;
        }
        let Ok((stream, _)) = accepted else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let id = inner.next_id.fetch_add(1, Ordering::SeqCst);
        let script = lock(&inner.script).clone().unwrap_or(Script::Plain);
        let refs = lock(&inner.refs).clone();
        lock(&inner.records).push(ScriptedConnection {
            id,
            accepted: Instant::now(),
            closed: None,
            service: None,
            path: None,
            script: script.clone(),
            commands: Vec::new(),
            pack_bytes: 0,
            pack_complete: false,
            request_lines: Vec::new(),
            bytes_sent: 0,
            ended: None,
        });
        if let Ok(c) = stream.try_clone() {
            lock(&inner.live).push((id, c));
        }
        *lock(&inner.active) += 1;
        let conn_inner = Arc::clone(&inner);
        let spawned = std::thread::Builder::new()
            .name(format!("scripted-conn-{id}"))
            .spawn(move || {
                let mut conn = Conn {
                    inner: &conn_inner,
                    id,
                    stream,
                    framer: Framer::new(),
                    refs,
                };
                if let Err(e) = conn.serve(script) {
                    conn.update(|r| r.ended = Some(e.to_string()));
                }
                let _ = conn.stream.shutdown(Shutdown::Both);
                finish(&conn_inner, id);
            });
        match spawned {
            Ok(h) => {
                let mut threads = lock(&inner.threads);
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
            Err(_) => finish(&inner, id),
        }
    }
}

fn finish(inner: &Inner, id: u64) {
    lock(&inner.live).retain(|(i, _)| *i != id);
    if let Some(r) = lock(&inner.records).get_mut(id as usize) {
        r.closed = Some(Instant::now());
    }
    let mut active = lock(&inner.active);
    *active -= 1;
    inner.idle.notify_all();
}

fn ended(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, why.to_owned())
}

/// One connection being served.
struct Conn<'a> {
    inner: &'a Inner,
    id: u64,
    stream: TcpStream,
    framer: Framer,
    refs: Vec<(String, String)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Svc {
    Upload,
    Receive,
}

impl Conn<'_> {
    fn update<R>(&self, f: impl FnOnce(&mut ScriptedConnection) -> R) -> R {
        let mut recs = lock(&self.inner.records);
        f(&mut recs[self.id as usize])
    }

    fn stopped(&self) -> bool {
        self.inner.stopper.is_stopped()
    }

    /// Reads more bytes into the framer; `Ok(false)` at EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let mut tmp = [0u8; 64 * 1024];
        self.stream.set_read_timeout(Some(CLIENT_IDLE))?;
        let n = self.stream.read(&mut tmp)?;
        if n == 0 {
            return Ok(false);
        }
        self.framer.push(&tmp[..n]);
        Ok(true)
    }

    /// The next pkt-line from the client; an error at EOF or on garbage.
    fn next_pkt(&mut self) -> io::Result<OwnedPkt> {
        loop {
            match self.framer.next_frame() {
                Ok(Some(f)) => return Ok(f.pkt),
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            if !self.fill()? {
                return Err(ended("the client closed the connection"));
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        let n = bytes.len() as u64;
        self.update(|r| r.bytes_sent += n);
        Ok(())
    }

    /// Holds the connection open, discarding what the client sends, until
    /// it closes or the server is dropped.
    fn hold(&mut self) -> io::Result<()> {
        let mut tmp = [0u8; 8192];
        self.stream
            .set_read_timeout(Some(Duration::from_millis(100)))?;
        loop {
            if self.stopped() {
                return Ok(());
            }
            match self.stream.read(&mut tmp) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn serve(&mut self, script: Script) -> io::Result<()> {
        let _ = self.stream.set_nodelay(true);
        let request = match self.next_pkt()? {
            OwnedPkt::Data(d) => d,
            _ => return Err(ended("no request line")),
        };
        let parsed = pktline::parse_request_line(&request);
        let service = parsed.as_ref().map(|p| p.service.clone());
        self.update(|r| {
            r.service = service.clone();
            r.path = parsed.as_ref().map(|p| p.path.clone());
        });
        let svc = match service.as_deref() {
            Some("git-upload-pack") => Svc::Upload,
            Some("git-receive-pack") => Svc::Receive,
            _ => {
                self.send(&pktline::encode(b"ERR unknown service\n"))?;
                return Ok(());
            }
        };
        let script = match (&script, svc) {
            (s, Svc::Upload) if s.is_push_only() => Script::Plain,
            (s, Svc::Receive) if s.is_fetch_only() => Script::Plain,
            (s, _) => s.clone(),
        };
        self.update(|r| r.script = script.clone());
        match script {
            Script::Plain => {
                self.advertise(svc, None)?;
                self.after_advert(svc, &Script::Plain)
            }
            Script::MalformedLength { header } => {
                self.send(&self.first_line(svc, None))?;
                let mut bad = header.to_vec();
                bad.extend_from_slice(b"refs/heads/x\n");
                self.send(&bad)?;
                self.hold()
            }
            Script::OverlongPkt => {
                self.send(&self.first_line(svc, None))?;
                let mut line = b"ffff".to_vec();
                line.extend(std::iter::repeat_n(b'a', 0xffff - 4));
                self.send(&line)?;
                self.hold()
            }
            Script::TruncatedAdvert => {
                self.send(&self.first_line(svc, None))?;
                self.send(b"003f")?;
                Ok(())
            }
            Script::Err { text } => {
                let mut line = format!("ERR {text}").into_bytes();
                line.truncate(pktline::MAX_PKT_LEN - 4);
                self.send(&pktline::encode(&line))
            }
            Script::EndlessAdvert { every, max_bytes } => {
                self.endless_advert(svc, every, max_bytes)
            }
            Script::Caps { caps } => {
                self.advertise(svc, Some(caps.as_bytes()))?;
                self.after_advert(svc, &Script::Plain)
            }
            Script::GarbageCaps { len } => {
                let caps = garbage(len, 0x5eed);
                self.advertise(svc, Some(&caps))?;
                self.after_advert(svc, &Script::Plain)
            }
            s @ (Script::ReportUnknownRefs
            | Script::UnpackOkNoRefs
            | Script::Refuse { .. }
            | Script::SidebandFatal { .. }
            | Script::HugePack { .. }) => {
                self.advertise(svc, None)?;
                self.after_advert(svc, &s)
            }
        }
    }

    fn caps(svc: Svc) -> &'static str {
        match svc {
            Svc::Upload => UPLOAD_CAPS,
            Svc::Receive => RECEIVE_CAPS,
        }
    }

    /// The first line of the advertisement, with `caps` (or the default
    /// capabilities).
    fn first_line(&self, svc: Svc, caps: Option<&[u8]>) -> Vec<u8> {
        let caps = caps.unwrap_or(Self::caps(svc).as_bytes());
        let (name, oid) = match self.refs.first() {
            Some((n, o)) => (n.as_str(), o.as_str()),
            None => (
                "capabilities^{}",
                "0000000000000000000000000000000000000000",
            ),
        };
        let mut payload = format!("{oid} {name}").into_bytes();
        payload.push(0);
        payload.extend_from_slice(caps);
        payload.push(b'\n');
        let max = pktline::MAX_PKT_LEN - 4;
        payload.truncate(max);
        pktline::encode(&payload)
    }

    fn advertise(&mut self, svc: Svc, caps: Option<&[u8]>) -> io::Result<()> {
        let mut out = self.first_line(svc, caps);
        for (name, oid) in self.refs.iter().skip(1) {
            pktline::encode_into(&mut out, format!("{oid} {name}\n").as_bytes());
        }
        out.extend_from_slice(pktline::FLUSH);
        self.send(&out)
    }

    fn endless_advert(&mut self, svc: Svc, every: Duration, max_bytes: u64) -> io::Result<()> {
        let mut sent = 0u64;
        let mut n = 0u64;
        let mut chunk = self.first_line(svc, None);
        loop {
            if every.is_zero() {
                let take = chunk.len().min((max_bytes - sent) as usize);
                self.send(&chunk[..take])?;
                sent += take as u64;
            } else {
                for b in &chunk {
                    if sent >= max_bytes || self.inner.stopper.sleep(every) {
                        return Ok(());
                    }
                    self.send(&[*b])?;
                    sent += 1;
                }
            }
            if sent >= max_bytes || self.stopped() {
                return Ok(());
            }
            n += 1;
            chunk = pktline::encode(
                format!("{:040x} refs/heads/endless-{n}\n", n as u128 * 0x9e37_79b9).as_bytes(),
            );
        }
    }

    fn after_advert(&mut self, svc: Svc, script: &Script) -> io::Result<()> {
        match svc {
            Svc::Receive => self.receive(script),
            Svc::Upload => self.upload(script),
        }
    }

    /// receive-pack: the commands, then the pack, then the scripted report.
    fn receive(&mut self, script: &Script) -> io::Result<()> {
        let mut commands = Vec::new();
        let mut sideband = false;
        let mut first = true;
        loop {
            match self.next_pkt() {
                Ok(OwnedPkt::Flush) => break,
                Ok(OwnedPkt::Data(d)) => {
                    if d.starts_with(b"shallow ") {
                        continue;
                    }
                    let (line, caps) = match d.iter().position(|&b| b == 0) {
                        Some(i) => (&d[..i], Some(&d[i + 1..])),
                        None => (&d[..], None),
                    };
                    if first {
                        first = false;
                        sideband = caps.is_some_and(|c| {
                            pktline::trim_newline(c)
                                .split(|&b| b == b' ')
                                .any(|c| c == b"side-band-64k")
                        });
                    }
                    commands
                        .push(String::from_utf8_lossy(pktline::trim_newline(line)).into_owned());
                }
                Ok(_) => {}
                // A client that only looked (ls-remote over receive-pack,
                // or nothing to push) hangs up after the advertisement.
                Err(_) if first => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        let cmds = commands.clone();
        self.update(|r| r.commands = cmds);
        if commands.is_empty() {
            return Ok(());
        }
        let needs_pack = commands.iter().any(|c| {
            c.split(' ')
                .nth(1)
                .is_some_and(|new| new.bytes().any(|b| b != b'0'))
        });
        if needs_pack {
            self.read_pack()?;
        }
        let refs: Vec<String> = commands
            .iter()
            .filter_map(|c| c.split(' ').nth(2).map(str::to_owned))
            .collect();
        let report: Vec<Vec<u8>> = match script {
            Script::ReportUnknownRefs => vec![
                b"unpack ok\n".to_vec(),
                b"ok refs/heads/never-pushed\n".to_vec(),
            ],
            Script::UnpackOkNoRefs => vec![b"unpack ok\n".to_vec()],
            Script::Refuse { reason } => {
                let mut lines = vec![b"unpack ok\n".to_vec()];
                for r in &refs {
                    let mut line = format!("ng {r} {reason}").into_bytes();
                    // One pkt-line inside one side-band line.
                    line.truncate(MAX_BAND_DATA - 8);
                    line.push(b'\n');
                    lines.push(line);
                }
                lines
            }
            Script::SidebandFatal { words } => {
                let msg = format!("fatal: {words}\n");
                if sideband {
                    self.send(&pktline::encode_sideband(3, msg.as_bytes()))?;
                } else {
                    self.send(&pktline::encode(format!("ERR {words}\n").as_bytes()))?;
                }
                return Ok(());
            }
            _ => {
                let mut lines = vec![b"unpack ok\n".to_vec()];
                lines.extend(refs.iter().map(|r| format!("ok {r}\n").into_bytes()));
                lines
            }
        };
        let mut inner = Vec::new();
        for l in &report {
            pktline::encode_into(&mut inner, l);
        }
        inner.extend_from_slice(pktline::FLUSH);
        if sideband {
            let mut out = Vec::new();
            for chunk in inner.chunks(MAX_BAND_DATA) {
                out.extend_from_slice(&pktline::encode_sideband(1, chunk));
            }
            out.extend_from_slice(pktline::FLUSH);
            self.send(&out)?;
        } else {
            self.send(&inner)?;
        }
        Ok(())
    }

    /// Reads a pack until its SHA-1 trailer (the hash of every byte before
    /// it), EOF, or [`MAX_PUSH_PACK`] bytes.
    fn read_pack(&mut self) -> io::Result<()> {
        let mut hasher = Sha1::new();
        // The last 20 bytes seen are held back: they may be the trailer.
        let mut tail: Vec<u8> = self.framer.take_pending();
        let mut total = tail.len() as u64;
        let mut tmp = vec![0u8; 64 * 1024];
        loop {
            if tail.len() > 20 {
                let keep = tail.len() - 20;
                hasher.update(&tail[..keep]);
                tail.drain(..keep);
            }
            if total >= 32 && tail.len() == 20 && hasher.clone().finish()[..] == tail[..] {
                self.update(|r| {
                    r.pack_bytes = total;
                    r.pack_complete = true;
                });
                return Ok(());
            }
            if total >= MAX_PUSH_PACK {
                self.update(|r| r.pack_bytes = total);
                return Err(ended("pack larger than the scripted server reads"));
            }
            self.stream.set_read_timeout(Some(CLIENT_IDLE))?;
            let n = match self.stream.read(&mut tmp) {
                Ok(n) => n,
                Err(e) => {
                    self.update(|r| r.pack_bytes = total);
                    return Err(e);
                }
            };
            if n == 0 {
                self.update(|r| r.pack_bytes = total);
                return Err(ended("the client closed the connection inside the pack"));
            }
            total += n as u64;
            tail.extend_from_slice(&tmp[..n]);
            self.update(|r| r.pack_bytes = total);
        }
    }

    /// upload-pack: the client's request, then the scripted answer.
    ///
    /// v0/v1 with `multi_ack_detailed`: the wants end with a flush; every
    /// later flush ends a round of haves and is answered `NAK` (this server
    /// has nothing in common with anyone); `done` ends the request.
    fn upload(&mut self, script: &Script) -> io::Result<()> {
        let mut wants = false;
        let mut wants_ended = false;
        loop {
            let pkt = match self.next_pkt() {
                Ok(p) => p,
                // ls-refs over a v0 advertisement: the client just leaves.
                Err(_) => return Ok(()),
            };
            match pkt {
                OwnedPkt::Data(d) => {
                    let line = String::from_utf8_lossy(pktline::trim_newline(&d)).into_owned();
                    if line.starts_with("want ") {
                        wants = true;
                    }
                    let done = line == "done";
                    self.update(|r| {
                        if r.request_lines.len() < 64 {
                            r.request_lines.push(line);
                        }
                    });
                    if done {
                        break;
                    }
                }
                OwnedPkt::Flush if !wants => return Ok(()),
                OwnedPkt::Flush if !wants_ended => wants_ended = true,
                OwnedPkt::Flush => self.send(&pktline::encode(b"NAK\n"))?,
                _ => {}
            }
        }
        match script {
            Script::SidebandFatal { words } => {
                self.send(&pktline::encode(b"NAK\n"))?;
                self.send(&pktline::encode_sideband(
                    3,
                    format!("fatal: {words}\n").as_bytes(),
                ))
            }
            Script::HugePack { shape, max_bytes } => {
                self.send(&pktline::encode(b"NAK\n"))?;
                self.huge_pack(*shape, *max_bytes)
            }
            _ => self.send(&pktline::encode(
                b"ERR the scripted server has no objects to send\n",
            )),
        }
    }

    fn huge_pack(&mut self, shape: PackShape, max_bytes: u64) -> io::Result<()> {
        let count: u32 = match shape {
            PackShape::ManySmallObjects { claimed } => claimed,
            PackShape::OneEndlessObject => 1,
        };
        let mut pack = b"PACK".to_vec();
        pack.extend_from_slice(&2u32.to_be_bytes());
        pack.extend_from_slice(&count.to_be_bytes());
        let mut sent = 0u64;
        let mut seed = 0x1234_5678_9abc_def1u64;
        match shape {
            PackShape::ManySmallObjects { .. } => {
                let mut n = 0u64;
                while sent < max_bytes && !self.stopped() {
                    while pack.len() < MAX_BAND_DATA {
                        n += 1;
                        let mut data = format!("blob {n}\n").into_bytes();
                        data.extend(noise(&mut seed, 1024 - data.len()));
                        pack.extend_from_slice(&object_header(3, data.len() as u64));
                        pack.extend_from_slice(&zlib_stored(&data));
                    }
                    sent += self.send_band(&mut pack)?;
                }
            }
            PackShape::OneEndlessObject => {
                pack.extend_from_slice(&object_header(3, 1 << 40));
                pack.extend_from_slice(&[0x78, 0x01]);
                while sent < max_bytes && !self.stopped() {
                    while pack.len() < MAX_BAND_DATA {
                        // A stored block that is not the last: 0b000, then
                        // LEN, NLEN, LEN bytes.
                        let len: u16 = 60_000;
                        pack.push(0x00);
                        pack.extend_from_slice(&len.to_le_bytes());
                        pack.extend_from_slice(&(!len).to_le_bytes());
                        pack.extend(noise(&mut seed, len as usize));
                    }
                    sent += self.send_band(&mut pack)?;
                }
            }
        }
        Ok(())
    }

    /// Sends the first [`MAX_BAND_DATA`] bytes of `buf` as one band-1 line.
    fn send_band(&mut self, buf: &mut Vec<u8>) -> io::Result<u64> {
        let take = buf.len().min(MAX_BAND_DATA);
        let line = pktline::encode_sideband(1, &buf[..take]);
        buf.drain(..take);
        self.send(&line)?;
        Ok(take as u64)
    }
}

/// `len` bytes of seeded garbage for a capability list: NULs, high bytes,
/// `=` runs, spaces, and printable noise.
pub fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = match x % 8 {
            0 => 0,
            1 => b'=',
            2 => b' ',
            3 => 0x80 | (x >> 8) as u8,
            4 => b'\n',
            _ => b'!' + ((x >> 16) % 94) as u8,
        };
        out.push(b);
    }
    out
}

fn noise(seed: &mut u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A pack object header: type and size, git's variable-length encoding.
pub fn object_header(kind: u8, size: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut b = (kind << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest > 0 {
        out.push(b | 0x80);
        b = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(b);
    out
}

/// `data` as a zlib stream of stored (uncompressed) deflate blocks.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = c.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// SHA-1 (FIPS 180-4), enough to recognise a pack's trailer. Not for
/// anything that needs collision resistance.
#[derive(Clone, Debug)]
pub struct Sha1 {
    h: [u32; 5],
    block: [u8; 64],
    fill: usize,
    len: u64,
}

impl Default for Sha1 {
    fn default() -> Self {
        Self::new()
    }
}

impl Sha1 {
    /// A fresh hasher.
    pub fn new() -> Self {
        Sha1 {
            h: [
                0x6745_2301,
                0xEFCD_AB89,
                0x98BA_DCFE,
                0x1032_5476,
                0xC3D2_E1F0,
            ],
            block: [0; 64],
            fill: 0,
            len: 0,
        }
    }

    /// Feeds `data`.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        while !data.is_empty() {
            let take = (64 - self.fill).min(data.len());
            self.block[self.fill..self.fill + take].copy_from_slice(&data[..take]);
            self.fill += take;
            data = &data[take..];
            if self.fill == 64 {
                let block = self.block;
                self.compress(&block);
                self.fill = 0;
            }
        }
    }

    /// The digest.
    pub fn finish(mut self) -> [u8; 20] {
        let bits = self.len.wrapping_mul(8);
        self.update(&[0x80]);
        while self.fill != 56 {
            self.update(&[0]);
        }
        self.update(&bits.to_be_bytes());
        let mut out = [0u8; 20];
        for (i, w) in self.h.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    fn compress(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 80];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = self.h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (h, v) in self.h.iter_mut().zip([a, b, c, d, e]) {
            *h = h.wrapping_add(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn sha1_matches_the_standard_vectors() {
        let h = |s: &[u8]| {
            let mut x = Sha1::new();
            x.update(s);
            hex(&x.finish())
        };
        assert_eq!(h(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(h(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            h(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        let mut x = Sha1::new();
        for _ in 0..1000 {
            x.update(&[b'a'; 1000]);
        }
        assert_eq!(hex(&x.finish()), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    }

    #[test]
    fn object_headers_use_gits_variable_length_size() {
        assert_eq!(object_header(3, 5), vec![0x35]);
        assert_eq!(object_header(3, 16), vec![0xb0, 0x01]);
        assert_eq!(object_header(1, 1024), vec![0x90, 0x40]);
    }

    #[test]
    fn adler32_matches_a_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn garbage_is_deterministic_and_of_the_asked_length() {
        assert_eq!(garbage(100, 7), garbage(100, 7));
        assert_eq!(garbage(100, 7).len(), 100);
        assert!(garbage(1000, 7).contains(&0));
    }
}
