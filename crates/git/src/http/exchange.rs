//! One HTTP request and its answer, run as a task on the client's runtime
//! and handed to the attempt's thread through bounded channels.
//!
//! The attempt's thread never waits inside reqwest: it waits on a channel
//! (the answer's head, the next piece of its body, room for the next chunk
//! of a request body), and the session's [`Cut`] aborts the task, which
//! drops its ends of the channels, so every such wait returns at once.
//!
//! A request body up to [`POST_BUFFER`] (git's `http.postBuffer`) is sent
//! whole, with its length, when it ends; a larger one (a pack) streams
//! chunked as it is written, each chunk handed to the HTTP stack once and
//! never kept after it took it: no copy of the whole body exists, and the
//! body (not clonable) can never be sent again by the stack.

use std::io::{self, BufRead, Cursor, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::{mpsc, oneshot, watch};

use super::{ClientError, Cut, HttpClient};
use crate::wire::{TrackedRead, Wire};

/// git's default `http.postBuffer`: a body up to this size goes whole,
/// with a `Content-Length`; a larger one streams chunked.
pub(crate) const POST_BUFFER: usize = 1 << 20;

/// The size of each chunk of a streamed body.
const CHUNK: usize = 64 * 1024;

/// Chunks of a streamed body waiting for the HTTP stack: few, so the pack
/// writer waits on the network and holds little.
const BODY_QUEUE: usize = 2;

/// Pieces of an answer's body read ahead of the attempt's reader.
const ANSWER_QUEUE: usize = 8;

/// The most of an error page kept for its words.
const EXCERPT: usize = 512;

/// Why an exchange gave no answer to read. Its words are what the
/// attempt's error carries; its class comes from the wire, never from here.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The attempt was cut (its timeout, a stall, the low-speed floor, the
    /// limit, a cancel) before or while the request ran.
    #[error("the attempt was cut")]
    Cut,
    /// No client could be built: local trouble.
    #[error(transparent)]
    NoClient(ClientError),
    /// The request failed (connect, TLS, a cut): reqwest's error and its
    /// sources, naming the proxy it went through.
    #[error("{}", describe(.error, .proxy.as_deref()))]
    Send {
        /// reqwest's error.
        error: Arc<reqwest::Error>,
        /// The proxy the request went through (without user info).
        proxy: Option<String>,
    },
    /// A status that is not success: the status line, a line of the body,
    /// the proxy.
    #[error("HTTP {words}")]
    Status {
        /// The words recorded on the wire with the status.
        words: String,
    },
    /// The body was handed to a reader already.
    #[error("the response body was taken already")]
    BodyTaken,
    /// The HTTP stack stopped taking the request body (the server
    /// answered or closed before its end).
    #[error("the request body was not taken whole")]
    BodyRefused,
}

/// The error and its sources, without user info, naming the proxy the
/// request went through (never its user info).
fn describe(e: &reqwest::Error, proxy: Option<&str>) -> String {
    let chain = sluice_policy::text::error_chain(e);
    match proxy {
        Some(p) => format!("{chain} (through proxy {p})"),
        None => chain,
    }
}

pub(crate) fn io_err(e: ExchangeError) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, e)
}

/// An answer's head, and the start of its body when it is no success.
struct Head {
    status: reqwest::StatusCode,
    headers: reqwest::header::HeaderMap,
    excerpt: Vec<u8>,
}

/// A piece of an answer's body. The task ends every body with `End` or
/// `Failed`; a channel that closes without either was cut.
enum Piece {
    Data(Bytes),
    Failed(reqwest::Error),
    End,
}

/// What a request body's writer hands the HTTP stack.
enum Chunk {
    Data(Bytes),
    End,
}

/// How far the HTTP stack took a request body (written by the runtime,
/// waited on by the writer).
#[derive(Default, Clone, Copy)]
struct Taken {
    bytes: u64,
    ended: bool,
    gone: bool,
}

struct BodyProgress(watch::Sender<Taken>);

impl Default for BodyProgress {
    fn default() -> Self {
        BodyProgress(watch::Sender::new(Taken::default()))
    }
}

impl BodyProgress {
    fn update(&self, f: impl FnOnce(&mut Taken)) {
        self.0.send_modify(f);
    }

    fn ended(&self) -> bool {
        self.0.borrow().ended
    }
}

/// A request body as the HTTP stack pulls it. Every byte it takes is
/// counted on the wire then (the watchdog's clock of a moving push), and
/// a small body is shown to the wire whole when taken (the request is
/// complete: `Wire::flushed`).
enum OutBody {
    /// Sent whole, with its length.
    Whole {
        data: Option<Bytes>,
        wire: Wire,
        progress: Arc<BodyProgress>,
    },
    /// Streamed, chunked.
    Streamed {
        rx: mpsc::Receiver<Chunk>,
        ended: bool,
        wire: Wire,
        progress: Arc<BodyProgress>,
    },
}

impl http_body::Body for OutBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            OutBody::Whole {
                data,
                wire,
                progress,
            } => match data.take() {
                Some(b) => {
                    wire.flushed(&b);
                    let n = b.len() as u64;
                    progress.update(|t| {
                        t.bytes += n;
                        t.ended = true;
                    });
                    Poll::Ready(Some(Ok(Frame::data(b))))
                }
                None => Poll::Ready(None),
            },
            OutBody::Streamed {
                rx,
                ended,
                wire,
                progress,
            } => {
                if *ended {
                    return Poll::Ready(None);
                }
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(Chunk::Data(b))) => {
                        let n = b.len() as u64;
                        wire.lock().bytes_written += n;
                        progress.update(|t| t.bytes += n);
                        Poll::Ready(Some(Ok(Frame::data(b))))
                    }
                    Poll::Ready(Some(Chunk::End)) => {
                        *ended = true;
                        progress.update(|t| t.ended = true);
                        Poll::Ready(None)
                    }
                    Poll::Ready(None) => Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the request body was abandoned before its end",
                    )))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Whole { data, .. } => data.is_none(),
            OutBody::Streamed { ended, .. } => *ended,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Whole { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |b| b.len() as u64))
            }
            OutBody::Streamed { .. } => SizeHint::default(),
        }
    }
}

impl Drop for OutBody {
    fn drop(&mut self) {
        let (OutBody::Whole { progress, .. } | OutBody::Streamed { progress, .. }) = self;
        progress.update(|t| t.gone = true);
    }
}

/// The task: send, then pass the head and each piece of the body on.
async fn run(
    client: reqwest::Client,
    req: reqwest::Request,
    head_tx: oneshot::Sender<Result<Head, reqwest::Error>>,
    tx: mpsc::Sender<Piece>,
) {
    let mut resp = match client.execute(req).await {
        Ok(r) => r,
        Err(e) => {
            let _ = head_tx.send(Err(e));
            return;
        }
    };
    let status = resp.status();
    let headers = resp.headers().clone();
    let mut excerpt = Vec::new();
    if !status.is_success() {
        // The first words of an error page, for the cause — only when
        // they are text, as git shows a `text/plain` body: an HTML error
        // page is no message.
        let plain = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/plain")
            });
        if plain && !status.is_redirection() {
            while excerpt.len() < EXCERPT {
                match resp.chunk().await {
                    Ok(Some(b)) => excerpt.extend_from_slice(&b),
                    _ => break,
                }
            }
        }
        let _ = head_tx.send(Ok(Head {
            status,
            headers,
            excerpt,
        }));
        return;
    }
    let head = Head {
        status,
        headers,
        excerpt,
    };
    if head_tx.send(Ok(head)).is_err() {
        return;
    }
    loop {
        let piece = match resp.chunk().await {
            Ok(Some(b)) => Piece::Data(b),
            Ok(None) => Piece::End,
            Err(e) => Piece::Failed(e),
        };
        let last = !matches!(piece, Piece::Data(_));
        if tx.send(piece).await.is_err() || last {
            return;
        }
    }
}

/// What the exchange came to.
#[derive(Debug, Clone)]
pub(crate) enum Answered {
    /// A success: its head is kept for the reader.
    Success,
    /// A redirect the caller may follow: its `Location`.
    Redirect(u16, Option<String>),
}

/// One request, sent at most once.
pub(crate) struct Exchange {
    client: Result<HttpClient, ClientError>,
    method: reqwest::Method,
    url: String,
    headers: Vec<(String, String)>,
    auth: Option<SecretString>,
    wire: Wire,
    cut: Cut,
    /// A 3xx is handed back to the caller (the first request), not
    /// recorded as the answer.
    follow: bool,
    /// The request body so far (a POST), until it is sent whole or starts
    /// streaming.
    buf: Vec<u8>,
    /// The streamed body's sender.
    stream: Option<mpsc::Sender<Chunk>>,
    written: u64,
    progress: Arc<BodyProgress>,
    body_done: bool,
    started: bool,
    head_rx: Option<oneshot::Receiver<Result<Head, reqwest::Error>>>,
    pieces: Option<mpsc::Receiver<Piece>>,
    result: Option<Result<Answered, ExchangeError>>,
    head: Option<Vec<u8>>,
}

/// An exchange shared by the answer's headers, its body and the request
/// body's writer.
pub(crate) type Shared = Arc<Mutex<Exchange>>;

/// What a new exchange is.
pub(crate) struct Ask {
    pub method: reqwest::Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub auth: Option<SecretString>,
    pub follow: bool,
}

impl Exchange {
    pub fn new(client: Result<HttpClient, ClientError>, ask: Ask, wire: Wire, cut: Cut) -> Shared {
        Arc::new(Mutex::new(Exchange {
            client,
            method: ask.method,
            url: ask.url,
            headers: ask.headers,
            auth: ask.auth,
            wire,
            cut,
            follow: ask.follow,
            buf: Vec::new(),
            stream: None,
            written: 0,
            progress: Arc::default(),
            body_done: false,
            started: false,
            head_rx: None,
            pieces: None,
            result: None,
            head: None,
        }))
    }

    /// Start the task with `body` (a POST's; none for a GET).
    fn start(&mut self, body: Option<OutBody>) -> Result<(), ExchangeError> {
        self.started = true;
        let c = match &self.client {
            Ok(c) => c.clone(),
            Err(why) => {
                self.wire.lock().local_failure = Some(why.to_string());
                return Err(ExchangeError::NoClient(why.clone()));
            }
        };
        if self.cut.is_cut() {
            return Err(ExchangeError::Cut);
        }
        let mut req = c.client.request(self.method.clone(), &self.url);
        for (k, v) in &self.headers {
            match reqwest::header::HeaderValue::from_str(v) {
                Ok(mut value) => {
                    // An `http.extraHeader` may carry a credential.
                    value.set_sensitive(k.eq_ignore_ascii_case("authorization"));
                    req = req.header(k.as_str(), value);
                }
                Err(_) => req = req.header(k.as_str(), v.as_str()),
            }
        }
        if let Some(auth) = &self.auth {
            let mut value = reqwest::header::HeaderValue::from_str(auth.expose_secret())
                .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
            value.set_sensitive(true);
            req = req.header(reqwest::header::AUTHORIZATION, value);
        }
        if let Some(body) = body {
            req = req.body(reqwest::Body::wrap(body));
        }
        let req = req.build().map_err(|e| ExchangeError::Send {
            error: Arc::new(e),
            proxy: None,
        })?;
        let (head_tx, head_rx) = oneshot::channel();
        let (tx, rx) = mpsc::channel(ANSWER_QUEUE);
        let task = c.spawn(run(c.client.clone(), req, head_tx, tx));
        if !self.cut.register(task) {
            return Err(ExchangeError::Cut);
        }
        self.head_rx = Some(head_rx);
        self.pieces = Some(rx);
        Ok(())
    }

    /// Add `data` to the request body: kept while the body fits
    /// [`POST_BUFFER`], streamed from there on.
    fn write_body(&mut self, data: &[u8]) -> io::Result<()> {
        if self.body_done {
            return Err(io::Error::other("the request body was already sent"));
        }
        self.buf.extend_from_slice(data);
        if self.stream.is_none() && self.buf.len() > POST_BUFFER {
            let (tx, rx) = mpsc::channel(BODY_QUEUE);
            let body = OutBody::Streamed {
                rx,
                ended: false,
                wire: self.wire.clone(),
                progress: Arc::clone(&self.progress),
            };
            self.stream = Some(tx);
            if let Err(e) = self.start(Some(body)) {
                self.result = Some(Err(e.clone()));
                return Err(io_err(e));
            }
        }
        if self.stream.is_some() {
            while self.buf.len() >= CHUNK {
                let rest = self.buf.split_off(CHUNK);
                let chunk = std::mem::replace(&mut self.buf, rest);
                self.send_chunk(Chunk::Data(Bytes::from(chunk)))?;
            }
        }
        Ok(())
    }

    /// Hand a chunk to the HTTP stack, waiting for room.
    fn send_chunk(&mut self, chunk: Chunk) -> io::Result<()> {
        if let Chunk::Data(b) = &chunk {
            self.written += b.len() as u64;
        }
        let tx = self.stream.clone().expect("streaming");
        match self.cut.until_cut(&self.client, tx.send(chunk)) {
            Some(Ok(())) => Ok(()),
            _ => Err(self.refused()),
        }
    }

    /// The stack stopped taking the body: the answer (a status sent
    /// early), a failure or a cut says why.
    fn refused(&mut self) -> io::Error {
        self.body_done = true;
        self.stream = None;
        match self.perform() {
            Err(e) => io_err(e),
            Ok(_) => io_err(ExchangeError::BodyRefused),
        }
    }

    /// Wait until the HTTP stack took every byte written so far (a pack's
    /// last chunk: the push's `pack-sent`). A body still in the buffer
    /// waits for its end.
    fn flush_body(&mut self) -> io::Result<()> {
        if self.stream.is_none() || self.body_done {
            return Ok(());
        }
        if !self.buf.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut self.buf));
            self.send_chunk(Chunk::Data(chunk))?;
        }
        let written = self.written;
        let mut rx = self.progress.0.subscribe();
        let taken = self
            .cut
            .until_cut(&self.client, async move {
                rx.wait_for(|t| t.bytes >= written || t.gone)
                    .await
                    .map(|t| *t)
            })
            .and_then(Result::ok);
        if taken.is_none_or(|t| t.bytes < written) {
            return Err(self.refused());
        }
        Ok(())
    }

    /// End the request body: send it whole, or its last chunk and its end.
    fn finish_body(&mut self) -> Result<(), ExchangeError> {
        if self.body_done || self.method != reqwest::Method::POST {
            return Ok(());
        }
        if self.stream.is_some() {
            if !self.buf.is_empty() {
                let chunk = Bytes::from(std::mem::take(&mut self.buf));
                if self.send_chunk(Chunk::Data(chunk)).is_err() {
                    return Ok(());
                }
            }
            if self.send_chunk(Chunk::End).is_err() {
                return Ok(());
            }
            self.body_done = true;
            self.stream = None;
            return Ok(());
        }
        self.body_done = true;
        let body = OutBody::Whole {
            data: Some(Bytes::from(std::mem::take(&mut self.buf))),
            wire: self.wire.clone(),
            progress: Arc::clone(&self.progress),
        };
        self.start(Some(body))
    }

    /// Send the request (once; a POST's body ends here if its writer has
    /// not ended it) and wait for its answer's head.
    pub fn perform(&mut self) -> Result<Answered, ExchangeError> {
        if let Some(r) = &self.result {
            return r.clone();
        }
        let r = self.wait_head();
        self.result = Some(r.clone());
        r
    }

    fn wait_head(&mut self) -> Result<Answered, ExchangeError> {
        if !self.started {
            if self.method == reqwest::Method::POST {
                self.finish_body()?;
            } else {
                self.start(None)?;
            }
        } else if !self.body_done {
            self.finish_body()?;
        }
        if let Some(r) = &self.result {
            // The body's end failed and the answer was read then.
            return r.clone();
        }
        let proxy = reqwest::Url::parse(&self.url).ok().and_then(|u| {
            self.client
                .as_ref()
                .ok()
                .and_then(|c| c.proxies.named_for(&u))
        });
        let Some(rx) = self.head_rx.take() else {
            return Err(ExchangeError::Cut);
        };
        match self.cut.until_cut(&self.client, rx) {
            None | Some(Err(_)) => Err(ExchangeError::Cut),
            Some(Ok(r)) => self.head(r, proxy),
        }
    }

    fn head(
        &mut self,
        r: Result<Head, reqwest::Error>,
        proxy: Option<String>,
    ) -> Result<Answered, ExchangeError> {
        match r {
            Err(e) => {
                self.failed(&e, proxy.as_deref());
                Err(ExchangeError::Send {
                    error: Arc::new(e),
                    proxy,
                })
            }
            Ok(head) => self.answered(head, proxy.as_deref()),
        }
    }

    /// Record on the wire what a failed send shows: a failure while
    /// connecting (a TLS refusal, a proxy's 407), or a request whose body
    /// never left whole.
    fn failed(&self, e: &reqwest::Error, proxy: Option<&str>) {
        let mut st = self.wire.lock();
        if e.is_timeout() {
            st.timed_out = true;
        }
        if self.method == reqwest::Method::POST && !self.progress.ended() {
            // The body never left whole: the request was not complete
            // (the flag a push's report reader looks at).
            st.http_connect_failed = true;
        }
        if e.is_connect() {
            st.http_connect_failed = true;
            // A certificate error or an alert while connecting is the
            // server's answer; a cut, reset or timeout of the handshake is
            // not (no rustls error in the chain).
            st.tls_refusal = sluice_https::tls_refusal(e).map(|r| {
                let host = e
                    .url()
                    .map(|u| {
                        format!(
                            "{}:{}",
                            u.host_str().unwrap_or(""),
                            u.port_or_known_default().unwrap_or(0)
                        )
                    })
                    .unwrap_or_default();
                (r, host)
            });
            // A proxy answering CONNECT with 407: its answer, the same
            // each time. hyper-util reports it only as an error whose type
            // is private (`TunnelError::ProxyAuthRequired`), so its words
            // are the one signal; a test against a real proxy pins them
            // (tests/it/proxy.rs).
            if let Some(p) = proxy.filter(|_| sluice_https::proxy_auth_required(e)) {
                st.http_status = Some((
                    407,
                    None,
                    format!("407 Proxy Authentication Required (through proxy {p})"),
                ));
            }
        }
    }

    /// Keep a successful answer's head for reading; hand a redirect back
    /// when the caller follows them; record any other status, its retry
    /// hint and its words on the wire.
    fn answered(&mut self, head: Head, proxy: Option<&str>) -> Result<Answered, ExchangeError> {
        let status = head.status;
        // OpenTelemetry's names on the attempt's span (the one current on
        // the attempt's thread; a settling read's span has no such fields).
        let span = tracing::Span::current();
        span.record("http.request.method", self.method.as_str());
        span.record("http.response.status_code", i64::from(status.as_u16()));
        if let Some(facts) = &self.wire.lock().facts {
            facts.answered(sluice_https::request_id(&head.headers));
        }
        let location = head
            .headers
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if status.is_success() {
            let mut text = Vec::new();
            for (k, v) in &head.headers {
                text.extend_from_slice(k.as_str().as_bytes());
                text.extend_from_slice(b": ");
                text.extend_from_slice(v.as_bytes());
                text.push(b'\n');
            }
            self.head = Some(text);
            return Ok(Answered::Success);
        }
        let redirect = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
        if redirect && self.follow {
            return Ok(Answered::Redirect(status.as_u16(), location));
        }
        let retry_after = head
            .headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| sluice_policy::parse_retry_after(v, SystemTime::now()));
        let line = format!(
            "{} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        let excerpt =
            String::from_utf8_lossy(&head.excerpt[..head.excerpt.len().min(EXCERPT)]).to_string();
        let mut words = match excerpt.lines().find(|l| !l.trim().is_empty()) {
            Some(l) => format!("{} ({})", line.trim(), l.trim()),
            None => line.trim().to_string(),
        };
        if let (true, Some(to)) = (redirect, &location) {
            // A redirect answering a later request: git does not follow it
            // (`http.followRedirects=initial`), and neither does this.
            words.push_str(&format!(
                " (to {}; only the first request of an operation follows redirects)",
                sluice_policy::text::redact(to)
            ));
        }
        if let Some(p) = proxy {
            words.push_str(&format!(" (through proxy {p})"));
        }
        self.wire.lock().http_status = Some((status.as_u16(), retry_after, words.clone()));
        Err(ExchangeError::Status { words })
    }

    /// Record a refused redirect as the server's answer.
    pub fn refuse(&mut self, status: u16, why: &super::redirect::RedirectRefused) -> ExchangeError {
        let words = format!("{status} {why}");
        self.wire.lock().http_status = Some((status, None, words.clone()));
        let e = ExchangeError::Status { words };
        self.result = Some(Err(e.clone()));
        e
    }
}

/// Response headers, available once the request was sent.
pub(crate) struct Headers {
    pub(super) ex: Shared,
    pub(super) data: Option<Cursor<Vec<u8>>>,
}

/// An answer's body as the attempt reads it: pieces from the task, in
/// order; a channel closed without an end is a cut.
struct Incoming {
    rx: mpsc::Receiver<Piece>,
    cur: Bytes,
    done: bool,
    cut: Cut,
    client: Result<HttpClient, ClientError>,
}

impl Read for Incoming {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.cur.is_empty() {
                let n = self.cur.len().min(buf.len());
                buf[..n].copy_from_slice(&self.cur[..n]);
                self.cur.advance(n);
                return Ok(n);
            }
            if self.done {
                return Ok(0);
            }
            let rx = &mut self.rx;
            match self.cut.until_cut(&self.client, rx.recv()).flatten() {
                Some(Piece::Data(b)) => self.cur = b,
                Some(Piece::End) => self.done = true,
                Some(Piece::Failed(e)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        describe(&e, None),
                    ))
                }
                None => return Err(io_err(ExchangeError::Cut)),
            }
        }
    }
}

/// A response body, available once the request was sent.
pub(crate) struct Body {
    pub(super) ex: Shared,
    pub(super) wire: Wire,
    data: Option<io::BufReader<TrackedRead<Incoming>>>,
    failed: Option<ExchangeError>,
}

impl Body {
    pub(super) fn new(ex: Shared, wire: Wire) -> Self {
        Body {
            ex,
            wire,
            data: None,
            failed: None,
        }
    }
}

/// The request body of a POST: kept while small, streamed once large.
pub(crate) struct PostBody {
    pub(super) ex: Shared,
}

impl Headers {
    fn ready(&mut self) -> io::Result<&mut Cursor<Vec<u8>>> {
        if self.data.is_none() {
            let mut ex = self.ex.lock().unwrap_or_else(|p| p.into_inner());
            ex.perform().map_err(io_err)?;
            self.data = Some(Cursor::new(ex.head.take().unwrap_or_default()));
        }
        Ok(self.data.as_mut().expect("set above"))
    }
}

impl Read for Headers {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ready()?.read(buf)
    }
}

impl BufRead for Headers {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.ready()?.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Some(d) = self.data.as_mut() {
            d.consume(amt)
        }
    }
}

impl Body {
    fn ready(&mut self) -> io::Result<&mut io::BufReader<TrackedRead<Incoming>>> {
        if let Some(e) = &self.failed {
            return Err(io_err(e.clone()));
        }
        if self.data.is_none() {
            let mut ex = self.ex.lock().unwrap_or_else(|p| p.into_inner());
            let answered = ex.perform();
            let rx = ex.pieces.take();
            let (cut, client) = (ex.cut.clone(), ex.client.clone());
            drop(ex);
            match (answered, rx) {
                (Ok(_), Some(rx)) => {
                    let incoming = Incoming {
                        rx,
                        cur: Bytes::new(),
                        done: false,
                        cut,
                        client,
                    };
                    self.data = Some(io::BufReader::with_capacity(
                        64 * 1024,
                        TrackedRead::new(incoming, self.wire.clone()),
                    ));
                }
                (Ok(_), None) => {
                    self.failed = Some(ExchangeError::BodyTaken);
                    return Err(io_err(ExchangeError::BodyTaken));
                }
                (Err(e), _) => {
                    self.failed = Some(e.clone());
                    return Err(io_err(e));
                }
            }
        }
        Ok(self.data.as_mut().expect("set above"))
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.ready()?.read(buf)
    }
}

impl BufRead for Body {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.ready()?.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Some(d) = self.data.as_mut() {
            d.consume(amt)
        }
    }
}

impl Write for PostBody {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.ex
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_body(data)?;
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.ex
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .flush_body()
    }
}

impl Drop for PostBody {
    fn drop(&mut self) {
        // The writer is done: the body ends (sent whole, or its end
        // streamed). The answer is waited for by its reader.
        let mut ex = self.ex.lock().unwrap_or_else(|p| p.into_inner());
        if !ex.body_done {
            if let Err(e) = ex.finish_body() {
                ex.result = Some(Err(e));
            }
        }
    }
}
