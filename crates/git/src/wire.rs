//! What the client saw on the wire: a pkt-line sniffer over everything the
//! server sent, counters, and the facts the classifier reads (advertisement
//! complete, request complete, an `ERR` line, a band-3 fatal, a timeout).
//!
//! Nothing here decides a class; [`crate::error::from_wire`] does, from
//! these facts.

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pktline::pkt_len;

/// Facts about one attempt's conversation.
#[derive(Debug, Default)]
pub(crate) struct WireState {
    /// Bytes read from the server.
    pub bytes_read: u64,
    /// Bytes written to the server.
    pub bytes_written: u64,
    /// Top-level flush packets the server sent.
    pub server_flushes: u32,
    /// Flushes needed to complete the advertisement (1 for git:// and
    /// spawned servers; 2 over smart HTTP, whose body opens with a service line).
    pub advert_flushes: u32,
    /// The advertisement was read completely.
    pub advertised: bool,
    /// The read request (ls-refs or fetch command) was written and flushed.
    pub request_complete: bool,
    /// The fetch request in particular (wants) was written and flushed.
    pub fetch_sent: bool,
    /// A transfer is under way (fetch: the request went out and the pack
    /// follows; push: the commands went out and the pack streams): the
    /// watchdog then lets the attempt run on while bytes keep moving.
    pub moving: bool,
    /// The text of an `ERR` packet.
    pub err_line: Option<String>,
    /// The text of a side-band 3 (fatal) message.
    pub fatal: Option<String>,
    /// The attempt's watchdog fired.
    pub timed_out: bool,
    /// Which limit it fired at, and that limit's figure.
    pub timed_out_by: Option<(crate::limit::TimeoutLimit, std::time::Duration)>,
    /// The caller cancelled during the attempt.
    pub cancelled: bool,
    /// The sniffer found bytes that are not pkt-lines.
    pub garbled: bool,
    /// An HTTP failure: status and retry hint.
    #[cfg(feature = "http")]
    pub http_status: Option<(u16, Option<std::time::Duration>, String)>,
    /// Where the attempt's answered HTTP requests note their request id
    /// (none outside an attempt).
    #[cfg(feature = "http")]
    pub facts: Option<sluice_policy::AttemptFacts>,
    /// An HTTP transport failure that happened before anything was sent.
    pub http_connect_failed: bool,
    /// The TLS handshake was refused: a certificate error or an alert
    /// (classed from the `rustls::Error` in the failure's source chain),
    /// and the server (`host:port`) that refused it.
    #[cfg(feature = "http")]
    pub tls_refusal: Option<(sluice_https::TlsRefusal, String)>,
    /// Local trouble before any request (the HTTP client could not be built).
    pub local_failure: Option<String>,
    /// A spawned server's exit status code (None: signal or still running).
    pub child_exit: Option<Option<i32>>,
    /// What the spawned process is, for messages (`the ssh command`,
    /// `git upload-pack`).
    pub child_program: Option<String>,
    /// A spawned server's last non-empty stderr line.
    pub stderr_tail: Option<String>,
    /// ssh's own refusal (authentication, host key) and its line, when
    /// the ssh command's stderr stated one.
    pub ssh_refusal: Option<(crate::ssh_refusal::SshRefusal, String)>,
    /// The most read before the request is complete ([`ADVERT_CAP`] unless
    /// the client was given another limit).
    pub advert_cap: u64,
    /// The server sent more than `advert_cap` before the request was
    /// complete: the read was refused there.
    pub oversized: bool,
    /// The `object-format` the advertisement named (v0/v1: a capability
    /// after the first line's NUL; v2: a capability line), when it did.
    pub object_format: Option<String>,
    /// Side-band 2 text (a hook's words), kept within the caps of
    /// [`sluice_policy::remote_text`] as it passes, when the conversation
    /// asked for it (a push, once its commands are sent; a fetch, from its
    /// negotiation on). Read here, from
    /// the raw pkt-lines, because gix hands its progress handler each
    /// packet with one trailing newline removed: where a line ends would be
    /// lost.
    pub band2: Option<sluice_policy::remote_text::RemoteText>,
    sniff: Sniffer,
}

/// The most the client reads before its request is complete (the
/// advertisement, and for ls-refs v0/v1 the listing itself): 64 MiB, about
/// a million refs. A server that advertises without end is refused here
/// instead of growing the client until the attempt timeout.
pub(crate) const ADVERT_CAP: u64 = 64 << 20;

/// A shared handle on one attempt's [`WireState`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Wire(Arc<Mutex<WireState>>);

impl Wire {
    pub fn new(advert_flushes: u32) -> Self {
        let w = Wire::default();
        {
            let mut st = w.lock();
            st.advert_flushes = advert_flushes;
            st.advert_cap = ADVERT_CAP;
        }
        w
    }

    pub fn lock(&self) -> MutexGuard<'_, WireState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feed bytes the server sent.
    pub fn saw(&self, bytes: &[u8]) {
        let mut st = self.lock();
        st.bytes_read += bytes.len() as u64;
        let advertising = !st.advertised;
        let WireState {
            sniff,
            server_flushes,
            err_line,
            fatal,
            garbled,
            object_format,
            band2,
            ..
        } = &mut *st;
        sniff.advertising = advertising;
        sniff.feed(bytes, band2, &mut |ev| match ev {
            Event::Flush => *server_flushes += 1,
            Event::Err(text) => {
                err_line.get_or_insert(text);
            }
            Event::Fatal(text) => {
                fatal.get_or_insert(text);
            }
            Event::ObjectFormat(name) => {
                object_format.get_or_insert(name);
            }
            Event::Garbled => *garbled = true,
        });
        if st.server_flushes >= st.advert_flushes && st.advert_flushes > 0 {
            st.advertised = true;
        }
    }

    /// Note a request the client flushed after the advertisement.
    pub fn flushed(&self, request: &[u8]) {
        let mut st = self.lock();
        st.bytes_written += request.len() as u64;
        if st.advertised && !request.is_empty() {
            if contains(request, b"command=ls-refs") || contains(request, b"command=fetch") {
                st.request_complete = true;
            }
            if contains(request, b"command=fetch") || contains(request, b"want ") {
                st.request_complete = true;
                st.fetch_sent = true;
                st.moving = true;
            }
        }
    }
}

impl WireState {
    /// The advertised object format, when it is one this client does not
    /// read (it reads sha1 only).
    pub fn foreign_format(&self) -> Option<&str> {
        self.object_format.as_deref().filter(|f| *f != SHA1)
    }
}

/// The one object format this client reads.
pub(crate) const SHA1: &str = "sha1";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

enum Event {
    Flush,
    Err(String),
    Fatal(String),
    ObjectFormat(String),
    Garbled,
}

/// A streaming pkt-line parser that only looks at what matters: flushes,
/// `ERR` lines and band-3 messages. It stops on the first malformed header.
#[derive(Debug, Default)]
struct Sniffer {
    hdr: [u8; 4],
    hdr_len: usize,
    remaining: usize,
    prefix: Vec<u8>,
    dead: bool,
    /// The advertisement is not complete yet: lines are kept longer, for
    /// the capabilities (an upload-pack's first line runs past 256 bytes).
    advertising: bool,
    /// The next payload byte is the first of its line.
    line_start: bool,
    /// The current line is side-band 2 text being kept.
    in_band2: bool,
}

/// What is kept of each line once the advertisement is read (enough for
/// an `ERR` or band-3 line's words).
const PREFIX_KEEP: usize = 256;

/// What is kept of each advertisement line (its capabilities).
const ADVERT_LINE_KEEP: usize = 4096;

impl Sniffer {
    fn feed(
        &mut self,
        mut bytes: &[u8],
        band2: &mut Option<sluice_policy::remote_text::RemoteText>,
        on: &mut dyn FnMut(Event),
    ) {
        while !bytes.is_empty() && !self.dead {
            if self.remaining > 0 {
                let take = self.remaining.min(bytes.len());
                if let Some(text) = band2.as_mut() {
                    let mut chunk = &bytes[..take];
                    if self.line_start {
                        self.in_band2 = chunk[0] == 2;
                        chunk = &chunk[1..];
                    }
                    if self.in_band2 {
                        text.feed(chunk);
                    }
                }
                self.line_start = false;
                let cap = if self.advertising {
                    ADVERT_LINE_KEEP
                } else {
                    PREFIX_KEEP
                };
                if self.prefix.len() < cap {
                    let keep = (cap - self.prefix.len()).min(take);
                    self.prefix.extend_from_slice(&bytes[..keep]);
                }
                self.remaining -= take;
                bytes = &bytes[take..];
                if self.remaining == 0 {
                    self.line_done(on);
                }
                continue;
            }
            let take = (4 - self.hdr_len).min(bytes.len());
            self.hdr[self.hdr_len..self.hdr_len + take].copy_from_slice(&bytes[..take]);
            self.hdr_len += take;
            bytes = &bytes[take..];
            if self.hdr_len < 4 {
                continue;
            }
            self.hdr_len = 0;
            let len = pkt_len(&self.hdr);
            match len {
                Some(0) => on(Event::Flush),
                Some(1) | Some(2) => {}
                Some(n) if (4..=65520).contains(&n) => {
                    self.remaining = n - 4;
                    self.prefix.clear();
                    self.line_start = true;
                    self.in_band2 = false;
                    if self.remaining == 0 {
                        self.line_done(on);
                    }
                }
                _ => {
                    self.dead = true;
                    on(Event::Garbled);
                }
            }
        }
    }

    fn line_done(&mut self, on: &mut dyn FnMut(Event)) {
        let p = &self.prefix;
        if let Some(rest) = p.strip_prefix(b"ERR ") {
            on(Event::Err(text(rest)));
        } else if let Some(rest) = p.strip_prefix(b"\x03") {
            on(Event::Fatal(text(rest)));
        } else if self.advertising {
            if let Some(name) = object_format(p) {
                on(Event::ObjectFormat(name));
            }
        }
    }
}

/// The `object-format=<name>` an advertisement line names: among a v0/v1
/// first line's capabilities (after its NUL), or a v2 capability line.
fn object_format(line: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"object-format=";
    let caps = match line.iter().position(|b| *b == 0) {
        Some(nul) => &line[nul + 1..],
        None if line.starts_with(KEY) => line,
        None => return None,
    };
    caps.split(|b| matches!(b, b' ' | b'\n'))
        .find_map(|cap| cap.strip_prefix(KEY))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim_end().to_string()
}

/// A reader that feeds everything it reads into the [`Wire`].
pub(crate) struct TrackedRead<R> {
    inner: R,
    wire: Wire,
}

impl<R> TrackedRead<R> {
    pub fn new(inner: R, wire: Wire) -> Self {
        TrackedRead { inner, wire }
    }
}

impl<R: Read> Read for TrackedRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.wire.saw(&buf[..n]);
        let mut st = self.wire.lock();
        if !st.request_complete && st.bytes_read > st.advert_cap {
            st.oversized = true;
            return Err(io::Error::other(format!(
                "the server sent more than {} bytes before the request was complete",
                st.advert_cap
            )));
        }
        Ok(n)
    }
}

/// A buffered writer: every request leaves in one write (no Nagle stall:
/// small pkt-lines written apart would wait on delayed acknowledgements),
/// and each flush is noted on the [`Wire`].
pub(crate) struct TrackedWrite<W: Write> {
    inner: W,
    buf: Vec<u8>,
    wire: Wire,
    probe: Option<std::net::TcpStream>,
}

impl<W: Write> TrackedWrite<W> {
    pub fn new(inner: W, wire: Wire) -> Self {
        TrackedWrite {
            inner,
            buf: Vec::with_capacity(8 * 1024),
            wire,
            probe: None,
        }
    }

    /// Before each request leaves, look (without blocking) whether the
    /// server already closed the connection: a request written into a
    /// closed connection never reached anyone, and must not count as
    /// complete.
    pub fn with_probe(mut self, socket: std::net::TcpStream) -> Self {
        self.probe = Some(socket);
        self
    }

    fn peer_closed(&self) -> bool {
        let Some(s) = &self.probe else { return false };
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let mut b = [0u8; 1];
        let closed = matches!(s.peek(&mut b), Ok(0));
        let _ = s.set_nonblocking(false);
        closed
    }
}

const WRITE_CHUNK: usize = 256 * 1024;

impl<W: Write> Write for TrackedWrite<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= WRITE_CHUNK {
            // Large bodies (packs) go out as they come; only small requests
            // are held until their flush.
            self.inner.write_all(&self.buf)?;
            self.wire.lock().bytes_written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() && self.peer_closed() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the server closed the connection before the request was sent",
            ));
        }
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
        }
        self.inner.flush()?;
        self.wire.flushed(&self.buf);
        self.buf.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_stops_at_the_limit_until_the_request_is_complete() {
        let w = Wire::new(1);
        w.lock().advert_cap = 64 * 1024;
        let mut r = TrackedRead::new(std::io::repeat(b'0'), w.clone());
        let mut buf = [0u8; 4096];
        let mut read = 0u64;
        let err = loop {
            match r.read(&mut buf) {
                Ok(n) => read += n as u64,
                Err(e) => break e,
            }
            assert!(read <= 64 * 1024 + 4096, "{read}");
        };
        assert!(w.lock().oversized, "{err}");
        // Once the request is complete, the answer (a listing, a pack) is
        // not limited here.
        let w = Wire::new(1);
        w.lock().advert_cap = 1024;
        w.lock().request_complete = true;
        let mut r = TrackedRead::new(std::io::repeat(b'0'), w.clone());
        for _ in 0..10 {
            r.read_exact(&mut buf).expect("not limited");
        }
        assert!(!w.lock().oversized);
    }

    #[test]
    fn the_sniffer_counts_flushes_and_keeps_err_and_fatal_words() {
        let w = Wire::new(1);
        w.saw(b"000eversion 2\n00");
        assert!(!w.lock().advertised);
        w.saw(b"00");
        assert!(w.lock().advertised);
        w.saw(b"0015ERR access denied");
        w.saw(b"000a\x03fatal");
        let st = w.lock();
        assert_eq!(st.err_line.as_deref(), Some("access denied"));
        assert_eq!(st.fatal.as_deref(), Some("fatal"));
        assert_eq!(st.server_flushes, 1);
        assert!(!st.garbled);
    }

    #[test]
    fn the_sniffer_reads_the_advertised_object_format() {
        // v0/v1: a capability after the first line's NUL, past 256 bytes.
        let w = Wire::new(1);
        let caps = format!("{} object-format=sha256 agent=git/2.47", "x".repeat(300));
        let line = format!("{} HEAD\0{caps}\n", "1".repeat(64));
        let mut pkt = format!("{:04x}", line.len() + 4).into_bytes();
        pkt.extend_from_slice(line.as_bytes());
        w.saw(&pkt);
        w.saw(b"0000");
        assert_eq!(w.lock().foreign_format(), Some("sha256"));
        // v2: a capability line; sha1 is ours.
        let w = Wire::new(1);
        w.saw(b"000eversion 2\n0017object-format=sha1\n0000");
        assert_eq!(w.lock().object_format.as_deref(), Some("sha1"));
        assert_eq!(w.lock().foreign_format(), None);
        // A ref named like the capability, after the advertisement, is not it.
        w.saw(b"001aobject-format=sha256\n");
        assert_eq!(w.lock().foreign_format(), None);
    }

    #[test]
    fn side_band_two_lines_are_kept_where_they_end_across_packets() {
        let w = Wire::new(1);
        w.saw(b"000a\x02early");
        assert!(w.lock().band2.is_none(), "kept only when asked");
        w.lock().band2 = Some(sluice_policy::remote_text::RemoteText::default());
        // A line split across two packets, a packet ending in a newline,
        // a carriage return, band 1 and band 3 between.
        w.saw(b"000b\x02checki000b\x02ng...\n");
        w.saw(b"0009\x01data0009\x02done0008\x03bad000c\x0250%\rok\n");
        let (kept, dropped) = w.lock().band2.take().expect("kept").into_parts();
        assert_eq!(kept, ["checking...", "done50%", "ok"]);
        assert_eq!(dropped, Default::default());
    }

    #[test]
    fn the_sniffer_stops_on_garbage() {
        let w = Wire::new(1);
        w.saw(b"zzzz0000");
        let st = w.lock();
        assert!(st.garbled);
        assert_eq!(st.server_flushes, 0);
    }

    #[test]
    fn a_request_is_complete_only_after_the_advertisement() {
        let w = Wire::new(1);
        w.flushed(b"0014command=ls-refs\n0000");
        assert!(!w.lock().request_complete);
        w.saw(b"0000");
        w.flushed(b"0014command=ls-refs\n0000");
        assert!(w.lock().request_complete);
        assert!(!w.lock().fetch_sent);
        w.flushed(b"0032want 0123\n");
        assert!(w.lock().fetch_sent);
    }
}
