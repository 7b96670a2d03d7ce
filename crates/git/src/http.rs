//! Our `Http` for gix-transport's smart-HTTP transport, on blocking reqwest.
//!
//! gix's own reqwest backend folds statuses into text and drops
//! `Retry-After`; this one records the status, the hint and whether the
//! request body left, on the attempt's [`Wire`], so the classifier reads
//! them as data. A POST is sent once the caller starts reading its answer
//! (the whole body is known by then), on a client that keeps no idle
//! connections for writes: the HTTP stack must never resend a POST whose
//! body was sent.

use std::io::{self, BufRead, Cursor, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use gix_transport::client::blocking_io::http::{GetResponse, Http, PostBodyDataKind, PostResponse};
use secrecy::{ExposeSecret, SecretString};

use crate::wire::{TrackedRead, Wire};

/// How long the reads' client keeps an idle connection for reuse: less
/// than the 5 s after which common servers close one.
const READ_POOL_IDLE: Duration = Duration::from_secs(4);

/// A reqwest client and the proxies it routes through (to name the proxy
/// in the errors of a request that went through one).
#[derive(Clone)]
pub(crate) struct HttpClient {
    pub client: reqwest::blocking::Client,
    pub proxies: Arc<sluice_https::Proxies>,
}

/// Why no HTTP client could be built: local trouble, never the remote's.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ClientError {
    /// The https configuration cannot be used (an unreadable
    /// `SSL_CERT_FILE`, a `--ca-file` without a certificate).
    #[error(transparent)]
    Https(#[from] sluice_https::HttpsError),
    /// reqwest refused to build the client (a proxy it cannot use).
    #[error("cannot build the HTTP client: {0}")]
    Build(Arc<reqwest::Error>),
}

/// A reqwest client made on first use: building one loads the platform's
/// trust roots (once per process) and starts a runtime thread, which a
/// client that only speaks git://, ssh:// or file:// never needs. Clones
/// share it.
#[derive(Clone)]
pub(crate) struct LazyHttp {
    cell: Arc<std::sync::OnceLock<Result<HttpClient, ClientError>>>,
    https: Arc<sluice_https::HttpsConfig>,
    write: bool,
}

impl LazyHttp {
    /// A client for reads, or (`write`) for writes, built from `https`.
    pub fn new(write: bool, https: Arc<sluice_https::HttpsConfig>) -> Self {
        LazyHttp {
            cell: Arc::default(),
            https,
            write,
        }
    }

    /// The client; writes get one that keeps no idle connections (a POST
    /// is never resent on a stale pooled connection).
    pub fn get(&self) -> Result<&HttpClient, ClientError> {
        self.cell
            .get_or_init(|| {
                let proxies = self.https.proxies();
                let mut b = self
                    .https
                    .client_builder_with(proxies.clone())?
                    .connect_timeout(Duration::from_secs(30));
                if self.write {
                    b = b.pool_max_idle_per_host(0);
                } else {
                    // Apache and lighttpd close an idle keep-alive connection
                    // after 5 s: a request sent on one the server is closing
                    // fails ("connection closed before message completed") and
                    // costs a retry. Idle connections are dropped here first.
                    b = b.pool_idle_timeout(READ_POOL_IDLE);
                }
                let client = b.build().map_err(|e| ClientError::Build(Arc::new(e)))?;
                Ok(HttpClient {
                    client,
                    proxies: Arc::new(proxies),
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Why an exchange gave no answer to read. Its words are what the
/// attempt's error carries; its class comes from the wire, never from here.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The attempt's time was up before the request could be sent.
    #[error("attempt timed out before the request")]
    TimedOutBeforeRequest,
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
    /// An earlier read of this body failed.
    #[error("the request failed")]
    Failed,
}

/// One request, sent at most once.
struct Exchange {
    /// The client, or why none could be built (local trouble).
    client: Result<HttpClient, ClientError>,
    method: reqwest::Method,
    url: String,
    headers: Vec<(String, String)>,
    auth: Option<SecretString>,
    body: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
    wire: Wire,
    result: Option<Result<(), ExchangeError>>,
    head: Option<Vec<u8>>,
    resp: Option<reqwest::blocking::Response>,
}

type Shared = Arc<Mutex<Exchange>>;

impl Exchange {
    /// Send the request (once) and keep its result.
    fn perform(&mut self) {
        if self.result.is_none() {
            self.result = Some(self.send());
        }
    }

    fn send(&mut self) -> Result<(), ExchangeError> {
        let body = std::mem::take(&mut *self.body.lock().unwrap_or_else(|p| p.into_inner()));
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.wire.lock().timed_out = true;
            return Err(ExchangeError::TimedOutBeforeRequest);
        }
        let c = match &self.client {
            Ok(c) => c,
            Err(why) => {
                self.wire.lock().local_failure = Some(why.to_string());
                return Err(ExchangeError::NoClient(why.clone()));
            }
        };
        let proxy = reqwest::Url::parse(&self.url)
            .ok()
            .and_then(|u| c.proxies.named_for(&u));
        let mut req = c
            .client
            .request(self.method.clone(), &self.url)
            .timeout(left);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(auth) = &self.auth {
            let mut value = reqwest::header::HeaderValue::from_str(auth.expose_secret())
                .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
            value.set_sensitive(true);
            req = req.header(reqwest::header::AUTHORIZATION, value);
        }
        let is_post = self.method == reqwest::Method::POST;
        if is_post {
            req = req.body(body.clone());
        }
        match req.send() {
            Err(e) => {
                self.failed(&e, proxy.as_deref(), is_post.then_some(&body));
                Err(ExchangeError::Send {
                    error: Arc::new(e),
                    proxy,
                })
            }
            Ok(resp) => {
                if is_post {
                    self.wire.flushed(&body);
                }
                self.answered(resp, proxy.as_deref())
            }
        }
    }

    /// Record on the wire what a failed send shows: a timeout, a failure
    /// while connecting (a TLS refusal, a proxy's 407), or a POST body that
    /// may have left.
    fn failed(&self, e: &reqwest::Error, proxy: Option<&str>, post: Option<&Vec<u8>>) {
        let mut st = self.wire.lock();
        if e.is_timeout() {
            st.timed_out = true;
        }
        if e.is_connect() {
            st.http_connect_failed = true;
            // A certificate error or an alert while connecting is
            // the server's answer; a cut, reset or timeout of the
            // handshake is not (no rustls error in the chain).
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
            // A proxy answering CONNECT with 407: its answer, the
            // same each time. hyper-util reports it only as an error
            // whose type is private (`TunnelError::ProxyAuthRequired`),
            // so its words are the one signal; a test against a real
            // proxy pins them (tests/it/proxy.rs).
            if let Some(p) = proxy.filter(|_| sluice_https::proxy_auth_required(e)) {
                st.http_status = Some((
                    407,
                    None,
                    format!("407 Proxy Authentication Required (through proxy {p})"),
                ));
            }
        } else if let Some(body) = post {
            drop(st);
            self.wire.flushed(body);
        }
    }

    /// Keep a successful answer for reading; record any other status, its
    /// retry hint and its words on the wire.
    fn answered(
        &mut self,
        resp: reqwest::blocking::Response,
        proxy: Option<&str>,
    ) -> Result<(), ExchangeError> {
        let status = resp.status();
        if status.is_success() {
            let mut head = Vec::new();
            for (k, v) in resp.headers() {
                head.extend_from_slice(k.as_str().as_bytes());
                head.extend_from_slice(b": ");
                head.extend_from_slice(v.as_bytes());
                head.push(b'\n');
            }
            self.head = Some(head);
            self.resp = Some(resp);
            return Ok(());
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| sluice_policy::parse_retry_after(v, SystemTime::now()));
        let line = format!(
            "{} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        // The body's words only when they are text, as git shows a
        // `text/plain` body: an HTML error page is no message.
        let plain = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/plain")
            });
        let mut excerpt = String::new();
        if plain {
            let _ = resp.take(512).read_to_string(&mut excerpt);
        }
        let mut words = match excerpt.lines().find(|l| !l.trim().is_empty()) {
            Some(l) => format!("{} ({})", line.trim(), l.trim()),
            None => line.trim().to_string(),
        };
        if let Some(p) = proxy {
            words.push_str(&format!(" (through proxy {p})"));
        }
        self.wire.lock().http_status = Some((status.as_u16(), retry_after, words.clone()));
        Err(ExchangeError::Status { words })
    }
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

/// Response headers, available once the request was sent.
pub(crate) struct Headers {
    ex: Shared,
    data: Option<Cursor<Vec<u8>>>,
}

/// A response body, available once the request was sent.
pub(crate) struct Body {
    ex: Shared,
    wire: Wire,
    data: Option<io::BufReader<TrackedRead<reqwest::blocking::Response>>>,
    failed: bool,
}

/// The request body of a POST, kept until the answer is read.
pub(crate) struct PostBody {
    buf: Arc<Mutex<Vec<u8>>>,
}

fn io_err(e: ExchangeError) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, e)
}

impl Headers {
    fn ready(&mut self) -> io::Result<&mut Cursor<Vec<u8>>> {
        if self.data.is_none() {
            let mut ex = self.ex.lock().unwrap_or_else(|p| p.into_inner());
            ex.perform();
            match ex.result.clone().expect("performed") {
                Ok(()) => self.data = Some(Cursor::new(ex.head.take().unwrap_or_default())),
                Err(e) => return Err(io_err(e)),
            }
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
    fn ready(
        &mut self,
    ) -> io::Result<&mut io::BufReader<TrackedRead<reqwest::blocking::Response>>> {
        if self.failed {
            return Err(io_err(ExchangeError::Failed));
        }
        if self.data.is_none() {
            let mut ex = self.ex.lock().unwrap_or_else(|p| p.into_inner());
            ex.perform();
            match (ex.result.clone().expect("performed"), ex.resp.take()) {
                (Ok(()), Some(resp)) => {
                    self.data = Some(io::BufReader::with_capacity(
                        64 * 1024,
                        TrackedRead::new(resp, self.wire.clone()),
                    ));
                }
                (Ok(()), None) => {
                    self.failed = true;
                    return Err(io_err(ExchangeError::BodyTaken));
                }
                (Err(e), _) => {
                    self.failed = true;
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
        self.buf
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The `Http` implementation handed to gix-transport.
pub(crate) struct SluiceHttp {
    client: Result<HttpClient, ClientError>,
    auth: Option<SecretString>,
    wire: Wire,
    deadline: Instant,
}

impl SluiceHttp {
    /// `auth` is the whole `Authorization` header value.
    pub fn new(
        client: Result<HttpClient, ClientError>,
        auth: Option<SecretString>,
        wire: Wire,
        timeout: Duration,
    ) -> Self {
        SluiceHttp {
            client,
            auth,
            wire,
            deadline: Instant::now() + timeout,
        }
    }

    fn exchange(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> (Shared, Arc<Mutex<Vec<u8>>>) {
        let headers = headers
            .into_iter()
            .filter_map(|h| {
                let h = h.as_ref();
                h.split_once(':')
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            })
            .collect();
        let body = Arc::new(Mutex::new(Vec::new()));
        let ex = Exchange {
            client: self.client.clone(),
            method,
            url: url.to_string(),
            headers,
            auth: self.auth.clone(),
            body: Arc::clone(&body),
            deadline: self.deadline,
            wire: self.wire.clone(),
            result: None,
            head: None,
            resp: None,
        };
        (Arc::new(Mutex::new(ex)), body)
    }
}

fn gix_err(e: ExchangeError) -> gix::Error {
    gix::Error::from_error(io_err(e))
}

impl Http for SluiceHttp {
    type Headers = Headers;
    type ResponseBody = Body;
    type PostBody = PostBody;

    fn get(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::Result<GetResponse<Headers, Body>> {
        let (ex, _) = self.exchange(reqwest::Method::GET, url, headers);
        {
            let mut e = ex.lock().unwrap_or_else(|p| p.into_inner());
            e.perform();
            if let Some(Err(why)) = &e.result {
                return Err(gix_err(why.clone()));
            }
        }
        Ok(GetResponse {
            headers: Headers {
                ex: Arc::clone(&ex),
                data: None,
            },
            body: Body {
                ex,
                wire: self.wire.clone(),
                data: None,
                failed: false,
            },
        })
    }

    fn post(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        _body: PostBodyDataKind,
    ) -> gix::Result<PostResponse<Headers, Body, PostBody>> {
        let (ex, buf) = self.exchange(reqwest::Method::POST, url, headers);
        Ok(PostResponse {
            post_body: PostBody { buf },
            headers: Headers {
                ex: Arc::clone(&ex),
                data: None,
            },
            body: Body {
                ex,
                wire: self.wire.clone(),
                data: None,
                failed: false,
            },
        })
    }

    fn configure(&mut self, _config: &dyn std::any::Any) -> gix::Result {
        Ok(())
    }
}
