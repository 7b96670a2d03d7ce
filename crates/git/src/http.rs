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

/// One request, sent at most once.
struct Exchange {
    /// The client, or why none could be built (local trouble).
    client: Result<crate::client::HttpClient, String>,
    method: reqwest::Method,
    url: String,
    headers: Vec<(String, String)>,
    auth: Option<SecretString>,
    body: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
    wire: Wire,
    result: Option<Result<(), String>>,
    head: Option<Vec<u8>>,
    resp: Option<reqwest::blocking::Response>,
}

type Shared = Arc<Mutex<Exchange>>;

impl Exchange {
    fn perform(&mut self) {
        if self.result.is_some() {
            return;
        }
        let body = std::mem::take(&mut *self.body.lock().unwrap_or_else(|p| p.into_inner()));
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.wire.lock().timed_out = true;
            self.result = Some(Err("attempt timed out before the request".into()));
            return;
        }
        let (client, proxy) = match &self.client {
            Ok(c) => (
                &c.client,
                reqwest::Url::parse(&self.url)
                    .ok()
                    .and_then(|u| c.proxies.named_for(&u)),
            ),
            Err(why) => {
                self.wire.lock().local_failure = Some(why.clone());
                self.result = Some(Err(why.clone()));
                return;
            }
        };
        let mut req = client.request(self.method.clone(), &self.url).timeout(left);
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
                let mut st = self.wire.lock();
                if e.is_timeout() {
                    st.timed_out = true;
                }
                if e.is_connect() {
                    st.http_connect_failed = true;
                    // A certificate error or an alert while connecting is
                    // the server's answer; a cut, reset or timeout of the
                    // handshake is not (no rustls error in the chain).
                    st.tls_refusal = sluice_https::tls_refusal(&e).map(|r| {
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
                    // proxy pins them (tests/proxy.rs).
                    if let Some(p) = proxy
                        .as_deref()
                        .filter(|_| sluice_https::proxy_auth_required(&e))
                    {
                        st.http_status = Some((
                            407,
                            None,
                            format!("407 Proxy Authentication Required (through proxy {p})"),
                        ));
                    }
                } else if is_post {
                    drop(st);
                    self.wire.flushed(&body);
                }
                self.result = Some(Err(describe(&e, proxy.as_deref())));
            }
            Ok(resp) => {
                if is_post {
                    self.wire.flushed(&body);
                }
                let status = resp.status();
                let mut head = Vec::new();
                for (k, v) in resp.headers() {
                    head.extend_from_slice(k.as_str().as_bytes());
                    head.extend_from_slice(b": ");
                    head.extend_from_slice(v.as_bytes());
                    head.push(b'\n');
                }
                if !status.is_success() {
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
                    let mut excerpt = String::new();
                    let _ = resp.take(512).read_to_string(&mut excerpt);
                    let mut words = match excerpt.lines().find(|l| !l.trim().is_empty()) {
                        Some(l) => format!("{} ({})", line.trim(), l.trim()),
                        None => line.trim().to_string(),
                    };
                    if let Some(p) = &proxy {
                        words.push_str(&format!(" (through proxy {p})"));
                    }
                    self.wire.lock().http_status =
                        Some((status.as_u16(), retry_after, words.clone()));
                    self.result = Some(Err(format!("HTTP {words}")));
                    return;
                }
                self.head = Some(head);
                self.resp = Some(resp);
                self.result = Some(Ok(()));
            }
        }
    }
}

/// The error and its sources, without user info, naming the proxy the
/// request went through (never its user info).
fn describe(e: &reqwest::Error, proxy: Option<&str>) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    if let Some(p) = proxy {
        s.push_str(&format!(" (through proxy {p})"));
    }
    crate::remote::redact(&s)
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

fn io_err(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, msg)
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
            return Err(io_err("the request failed".into()));
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
                    return Err(io_err("the response body was taken already".into()));
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
    client: Result<crate::client::HttpClient, String>,
    auth: Option<SecretString>,
    wire: Wire,
    deadline: Instant,
}

impl SluiceHttp {
    /// `auth` is the whole `Authorization` header value.
    pub fn new(
        client: Result<crate::client::HttpClient, String>,
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

fn gix_err(msg: String) -> gix::Error {
    gix::Error::from_error(io::Error::new(io::ErrorKind::ConnectionAborted, msg))
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
            if let Some(Err(msg)) = &e.result {
                return Err(gix_err(msg.clone()));
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
