//! Http mode: an HTTP/1.1 forwarding proxy that frames requests and
//! responses (Content-Length, chunked, or until close) so it can answer or
//! cut a chosen request.
//!
//! Keep-alive is kept on both sides: one upstream connection per client
//! connection, reused while both ends keep it alive, re-opened when the
//! upstream closed it. A response framed by closing the connection ends the
//! client connection too. `Expect: 100-continue` is answered by the proxy
//! itself (and not forwarded), so a request body never waits on upstream.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;

use super::{connect_upstream, cut, Ctx, Fault, HttpExchange, Point, Service};

const READ_BUF: usize = 64 * 1024;

/// The words of the marker error that ends a body's copy at a stall.
const STALLED: &str = "stalled by the fault";

/// The longest a stalled request body keeps its connection (the proxy's
/// drop ends it first).
const STALL_BOUND: std::time::Duration = std::time::Duration::from_secs(600);

/// Writes `data` to `out`, at no more than `rate` bytes a second when one
/// is given (in pieces of a tenth of a second's worth): a slow link.
fn paced(
    out: &mut Stream,
    data: &[u8],
    rate: Option<u64>,
    stopper: &crate::net::Stopper,
) -> io::Result<()> {
    let Some(rate) = rate else {
        return out.send(data);
    };
    let piece = ((rate / 10).max(1)) as usize;
    for chunk in data.chunks(piece) {
        let start = std::time::Instant::now();
        out.send(chunk)?;
        let due = std::time::Duration::from_secs_f64(chunk.len() as f64 / rate as f64);
        if let Some(rest) = due.checked_sub(start.elapsed()) {
            if stopper.sleep(rest) {
                return Err(io::Error::other("the proxy stopped"));
            }
        }
    }
    Ok(())
}
const MAX_HEAD: usize = 64 * 1024;

/// One side of a connection: plain TCP, or TLS that the proxy ends (the
/// client's side in https mode).
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }

    /// Shuts the socket down: over TLS, without a close_notify (a cut).
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.tcp().shutdown(how)
    }

    /// Writes all of `b` and pushes it onto the socket.
    fn send(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(b),
            Stream::Tls(t) => {
                t.write_all(b)?;
                t.flush()
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

/// A socket with a read buffer.
struct Conn {
    stream: Stream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(stream: Stream) -> Self {
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = vec![0u8; READ_BUF];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    /// A message head through its blank line; `None` on a clean close
    /// before any byte.
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                return Ok(Some(self.buf.drain(..i + 4).collect()));
            }
            if self.buf.len() > MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "message head too long",
                ));
            }
            if self.fill()? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                return Ok(self.buf.drain(..i + 2).collect());
            }
            if self.buf.len() > MAX_HEAD {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
            }
            if self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Passes exactly `n` bytes to `sink`.
    fn copy_n(
        &mut self,
        mut n: u64,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        while n > 0 {
            if self.buf.is_empty() && self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let take = self.buf.len().min(n.min(usize::MAX as u64) as usize);
            sink(&self.buf[..take])?;
            self.buf.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    fn copy_to_eof(&mut self, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        loop {
            if !self.buf.is_empty() {
                sink(&self.buf)?;
                self.buf.clear();
            }
            if self.fill()? == 0 {
                return Ok(());
            }
        }
    }

    /// Passes one body with `framing` to `sink` (bytes as on the wire).
    fn copy_body(
        &mut self,
        framing: Framing,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        match framing {
            Framing::Empty => Ok(()),
            Framing::Length(n) => self.copy_n(n, sink),
            Framing::UntilClose => self.copy_to_eof(sink),
            Framing::Chunked => loop {
                let line = self.read_line()?;
                sink(&line)?;
                let text = String::from_utf8_lossy(&line);
                let size = text.trim().split(';').next().unwrap_or("").trim();
                let size = u64::from_str_radix(size, 16).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("bad chunk size {size:?}"),
                    )
                })?;
                if size == 0 {
                    loop {
                        let t = self.read_line()?;
                        sink(&t)?;
                        if t == b"\r\n" {
                            return Ok(());
                        }
                    }
                }
                self.copy_n(size + 2, sink)?;
            },
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A parsed message head.
struct Head {
    start: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: &[u8]) -> io::Result<Head> {
        let text = String::from_utf8_lossy(raw);
        let mut lines = text.split("\r\n");
        let start = lines.next().unwrap_or("").to_owned();
        let headers = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        if start.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "empty start line",
            ));
        }
        Ok(Head { start, headers })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn remove(&mut self, name: &str) {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.start);
        for (k, v) in &self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }

    fn version_1_0(&self) -> bool {
        self.start.ends_with("HTTP/1.0") || self.start.starts_with("HTTP/1.0")
    }

    /// The framing of a request body.
    fn request_framing(&self) -> io::Result<Framing> {
        if self.has_token("Transfer-Encoding", "chunked") {
            return Ok(Framing::Chunked);
        }
        match self.get("Content-Length") {
            Some(n) => n
                .parse::<u64>()
                .map(|n| {
                    if n == 0 {
                        Framing::Empty
                    } else {
                        Framing::Length(n)
                    }
                })
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad Content-Length")),
            None => Ok(Framing::Empty),
        }
    }

    /// The framing of a response body to a request with `method`.
    fn response_framing(&self, method: &str, status: u16) -> Framing {
        if method.eq_ignore_ascii_case("HEAD")
            || (100..200).contains(&status)
            || status == 204
            || status == 304
        {
            return Framing::Empty;
        }
        if self.has_token("Transfer-Encoding", "chunked") {
            return Framing::Chunked;
        }
        match self
            .get("Content-Length")
            .and_then(|n| n.parse::<u64>().ok())
        {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    }

    fn status(&self) -> Option<u16> {
        self.start.split(' ').nth(1).and_then(|s| s.parse().ok())
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Injected",
    }
}

/// Serves one client connection; with `tls`, the proxy ends the client's
/// TLS (presenting that configuration's certificate) and speaks plain
/// HTTP/1.1 upstream.
pub(super) fn handle(
    ctx: &Ctx,
    client: TcpStream,
    upstream: SocketAddr,
    tls: Option<&Arc<rustls::ServerConfig>>,
) {
    let _ = client.set_nodelay(true);
    ctx.update(|r| r.service = Some(Service::Http));
    let stream = match tls {
        None => Stream::Plain(client),
        Some(config) => match rustls::ServerConnection::new(Arc::clone(config)) {
            Ok(conn) => Stream::Tls(Box::new(rustls::StreamOwned::new(conn, client))),
            Err(e) => {
                ctx.update(|r| r.upstream_error = Some(format!("TLS: {e}")));
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
        },
    };
    let mut client = Conn::new(stream);
    let mut up: Option<Conn> = None;
    let _ = serve(ctx, &mut client, &mut up, upstream);
    cut(client.stream.tcp(), up.as_ref().map(|u| u.stream.tcp()));
}

fn serve(
    ctx: &Ctx,
    client: &mut Conn,
    up: &mut Option<Conn>,
    upstream: SocketAddr,
) -> io::Result<()> {
    loop {
        let Some(raw) = client.read_head()? else {
            return Ok(());
        };
        let mut req = Head::parse(&raw)?;
        let mut parts = req.start.split(' ');
        let method = parts.next().unwrap_or("").to_owned();
        let path = parts.next().unwrap_or("").to_owned();
        let framing = req.request_framing()?;
        let expect = req.has_token("Expect", "100-continue");
        let client_close = req.has_token("Connection", "close")
            || (req.version_1_0() && !req.has_token("Connection", "keep-alive"));
        let fault = ctx.inner.take_request_fault(&path);
        let idx = ctx.update(|r| {
            r.http_requests.push(HttpExchange {
                method: method.clone(),
                path: path.clone(),
                had_body: framing != Framing::Empty,
                body_bytes: 0,
                status: None,
                fault: fault.clone(),
                response_forwarded: false,
            });
            r.http_requests.len() - 1
        });
        ctx.milestone(Point::RequestLine);
        let exchange =
            |f: &mut dyn FnMut(&mut HttpExchange)| ctx.update(|r| f(&mut r.http_requests[idx]));

        if let Some(Fault::HttpStatus {
            status,
            retry_after,
            ..
        }) = &fault
        {
            ctx.fired();
            let mut keep = !client_close;
            if expect {
                keep = false; // the body was never sent; do not wait for it
            } else {
                let mut n = 0u64;
                client.copy_body(framing, &mut |b| {
                    n += b.len() as u64;
                    Ok(())
                })?;
                exchange(&mut |e| e.body_bytes = n);
            }
            let mut resp = format!(
                "HTTP/1.1 {status} {}\r\nContent-Length: 0\r\n",
                reason(*status)
            );
            if let Some(s) = retry_after {
                resp.push_str(&format!("Retry-After: {s}\r\n"));
            }
            if !keep {
                resp.push_str("Connection: close\r\n");
            }
            resp.push_str("\r\n");
            client.stream.send(resp.as_bytes())?;
            ctx.update(|r| r.bytes_server_to_client += resp.len() as u64);
            let status = *status;
            exchange(&mut |e| {
                e.status = Some(status);
                e.response_forwarded = true;
            });
            ctx.milestone(Point::Responded);
            if !keep {
                return Ok(());
            }
            continue;
        }

        // Forward the request.
        if up.is_none() {
            let Some(s) = connect_upstream(ctx, upstream) else {
                return Ok(());
            };
            *up = Some(Conn::new(Stream::Plain(s)));
        }
        let upc = up.as_mut().expect("connected above");
        if expect {
            req.remove("Expect");
            let cont = b"HTTP/1.1 100 Continue\r\n\r\n";
            client.stream.send(cont)?;
        }
        let head = req.to_bytes();
        upc.stream.send(&head)?;
        let mut body = 0u64;
        let up_stream = &mut upc.stream;
        let stall_at = match &fault {
            Some(Fault::HttpStallRequestBody { after, .. }) => Some(*after),
            _ => None,
        };
        let mut stall_request = false;
        let stopper = ctx.stopper();
        let upload = ctx.throttle_upload();
        let copied = client.copy_body(framing, &mut |b| {
            let b = match stall_at {
                Some(at) if body + b.len() as u64 >= at => {
                    stall_request = true;
                    &b[..(at - body) as usize]
                }
                _ => b,
            };
            body += b.len() as u64;
            paced(up_stream, b, upload, stopper)?;
            if stall_request {
                return Err(io::Error::other(STALLED));
            }
            Ok(())
        });
        match copied {
            Err(e) if stall_request && e.to_string() == STALLED => ctx.fired(),
            other => other?,
        }
        ctx.update(|r| {
            r.bytes_client_to_server += head.len() as u64 + body;
            r.http_requests[idx].body_bytes = body;
        });
        if stall_request {
            // Nothing more is read from the client: its writes block once
            // the buffers fill, until the proxy is dropped.
            ctx.stopper().sleep(STALL_BOUND);
            return Ok(());
        }
        ctx.milestone(Point::CommandsSent);

        // The response (skipping interim 1xx ones, which are forwarded
        // unless the response is to be cut).
        let cut_response = matches!(fault, Some(Fault::HttpCutResponse { .. }));
        let (resp, raw_resp, status) = loop {
            let Some(raw) = upc.read_head()? else {
                ctx.update(|r| {
                    r.upstream_error = Some("upstream closed before answering".to_owned())
                });
                return Ok(());
            };
            let resp = Head::parse(&raw)?;
            let status = resp.status().unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                if !cut_response {
                    client.stream.send(&raw)?;
                }
                continue;
            }
            break (resp, raw, status);
        };
        exchange(&mut |e| e.status = Some(status));
        let rframing = resp.response_framing(&method, status);
        let up_close = rframing == Framing::UntilClose
            || resp.has_token("Connection", "close")
            || resp.version_1_0();

        if cut_response {
            ctx.fired();
            let mut n = 0u64;
            upc.copy_body(rframing, &mut |b| {
                n += b.len() as u64;
                Ok(())
            })?;
            ctx.update(|r| r.discarded_server_bytes += raw_resp.len() as u64 + n);
            let _ = client.stream.shutdown(Shutdown::Both);
            return Ok(());
        }

        client.stream.send(&raw_resp)?;
        let mut sent = raw_resp.len() as u64;
        let client_stream = &mut client.stream;
        let stall_at = match &fault {
            Some(Fault::HttpStallResponseBody { after, .. }) => Some(*after),
            _ => None,
        };
        let mut body = 0u64;
        let mut stalled = false;
        let rate = ctx.throttle();
        let stopper = ctx.stopper();
        let copied = upc.copy_body(rframing, &mut |b| {
            let b = match stall_at {
                Some(at) if body + b.len() as u64 >= at => {
                    stalled = true;
                    &b[..(at - body) as usize]
                }
                _ => b,
            };
            body += b.len() as u64;
            sent += b.len() as u64;
            paced(client_stream, b, rate, stopper)?;
            if stalled {
                return Err(io::Error::other(STALLED));
            }
            Ok(())
        });
        match copied {
            Err(e) if stalled && e.to_string() == STALLED => {
                ctx.fired();
                ctx.update(|r| r.bytes_server_to_client += sent);
                // Silent from here: wait for the client to close (it sends
                // nothing more on this request), or the proxy's drop.
                let mut sink = [0u8; 4096];
                while matches!(client.stream.read(&mut sink), Ok(n) if n > 0) {}
                return Ok(());
            }
            other => other?,
        }
        ctx.update(|r| r.bytes_server_to_client += sent);
        exchange(&mut |e| e.response_forwarded = true);
        ctx.milestone(Point::Responded);
        if up_close {
            let _ = upc.stream.shutdown(Shutdown::Both);
            *up = None;
            // A close-framed response (or one announcing close) ends the
            // client's connection as well.
            let _ = client.stream.shutdown(Shutdown::Write);
            return Ok(());
        }
        if client_close {
            return Ok(());
        }
    }
}
