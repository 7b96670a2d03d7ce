//! Our `Http` for gix-transport's smart-HTTP transport, on reqwest's async
//! client driven from the attempt's thread.
//!
//! gix's own reqwest backend folds statuses into text and drops
//! `Retry-After`; this one records the status, the hint and whether the
//! request body left whole on the attempt's [`Wire`], so the classifier
//! reads them as data.
//!
//! **The attempt's clock over http(s).** DESIGN's rule ("What an attempt
//! timeout covers") needs a clock per read and per write: waits and stalls
//! end at the attempt timeout, a moving pack runs on while it keeps the
//! low-speed floor, and the limit is hard. reqwest's blocking client has
//! only a total timeout per request (its `timeout` bounds the whole
//! exchange, body included) and no way to cut a blocked read from outside,
//! so a pack longer than the attempt timeout could never arrive. Instead
//! each request runs as a task on a small runtime owned by the client
//! (one worker thread, as reqwest's blocking client has), and the
//! attempt's thread waits only on channels to that task (the answer's head,
//! each piece of its body, room for the next chunk of a request body),
//! each wait raced against the session's [`Cut`]. The same
//! [`Watchdog`](crate::watchdog::Watchdog) that guards git:// sockets and
//! spawned transports watches the wire's byte counts and fires the cut:
//! it aborts the tasks (dropping a request mid-body closes its connection)
//! and every wait returns at once. No reqwest timeout is set on a request;
//! the watchdog is the one clock, the same on every transport.
//!
//! **Request bodies** ([`exchange`]): up to git's `http.postBuffer` (1 MiB)
//! a body is sent whole, with its length, once written; a larger one (a
//! pack) streams chunked as it is written, each chunk taken by the HTTP
//! stack once, so the body exists whole nowhere and is never sent again.
//! A server or proxy that needs a length answers a chunked body with 411,
//! which is its answer (`answered`), as it is to git past its postBuffer.
//!
//! **Redirects** ([`redirect`]): as git's `http.followRedirects=initial`.
//! The `info/refs` GET that opens a conversation follows them; its final
//! URL less the request's tail is the redirected base, which gix-transport
//! takes through [`Http::redirected_base_url`] for the conversation's later
//! requests, and which the operation keeps ([`crate::remote::Remote`]'s
//! memo) for its later attempts and settling reads. A redirect answering a
//! later request is the server's answer. The credential goes only to the
//! host and port it was bought for.

pub(crate) mod exchange;
pub(crate) mod redirect;
pub(crate) mod v2_remotes;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use gix_transport::client::blocking_io::http::{GetResponse, Http, PostBodyDataKind, PostResponse};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;

use crate::wire::Wire;
use exchange::{Answered, Ask, Body, Exchange, ExchangeError, Headers, PostBody, Shared};

/// How long the reads' client keeps an idle connection for reuse: less
/// than the 5 s after which common servers close one.
const READ_POOL_IDLE: Duration = Duration::from_secs(4);

/// The runtime the client's requests run on; shut down without waiting
/// when the client goes.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A reqwest client, the runtime it runs on, and the proxies it routes
/// through (to name the proxy in the errors of a request that went
/// through one).
#[derive(Clone)]
pub(crate) struct HttpClient {
    pub client: reqwest::Client,
    pub proxies: Arc<sluice_https::Proxies>,
    rt: Arc<Runtime>,
}

impl HttpClient {
    fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.0.as_ref().expect("running until dropped").handle()
    }

    /// Run `task` on the client's runtime.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> tokio::task::AbortHandle {
        self.handle().spawn(task).abort_handle()
    }
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
    /// The runtime's thread could not be started.
    #[error("cannot start the HTTP client's thread: {0}")]
    Runtime(Arc<std::io::Error>),
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
            .get_or_init(|| self.build())
            .as_ref()
            .map_err(Clone::clone)
    }

    fn build(&self) -> Result<HttpClient, ClientError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(if self.write {
                "sluice-http-w"
            } else {
                "sluice-http"
            })
            .enable_all()
            .build()
            .map_err(|e| ClientError::Runtime(Arc::new(e)))?;
        let rt = Runtime(Some(rt));
        let proxies = self.https.proxies();
        let mut b = self
            .https
            .async_client_builder_with(proxies.clone())?
            .connect_timeout(Duration::from_secs(30))
            // Redirects are ours to follow (git's `initial` rule, in `get`).
            .redirect(reqwest::redirect::Policy::none());
        if self.write {
            b = b.pool_max_idle_per_host(0);
        } else {
            // Apache and lighttpd close an idle keep-alive connection
            // after 5 s: a request sent on one the server is closing fails
            // ("connection closed before message completed") and costs a
            // retry. Idle connections are dropped here first.
            b = b.pool_idle_timeout(READ_POOL_IDLE);
        }
        let client = {
            let _inside = rt.0.as_ref().expect("just built").enter();
            b.build().map_err(|e| ClientError::Build(Arc::new(e)))?
        };
        Ok(HttpClient {
            client,
            proxies: Arc::new(proxies),
            rt: Arc::new(rt),
        })
    }
}

/// One session's cut: fired by its watchdog (timeout, stall, low-speed
/// floor, limit, cancel), it aborts the session's requests and ends every
/// wait of the attempt's thread on them.
#[derive(Clone)]
pub(crate) struct Cut(Arc<CutInner>);

struct CutInner {
    fired: watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Cut {
    pub fn new() -> Self {
        Cut(Arc::new(CutInner {
            fired: watch::Sender::new(false),
            tasks: Mutex::default(),
        }))
    }

    /// Cut the session: abort its requests, end its waits.
    pub fn fire(&self) {
        self.0.fired.send_replace(true);
        self.abort_all();
    }

    fn abort_all(&self) {
        let mut tasks = self.0.tasks.lock().unwrap_or_else(|p| p.into_inner());
        for t in tasks.drain(..) {
            t.abort();
        }
    }

    pub fn is_cut(&self) -> bool {
        *self.0.fired.borrow()
    }

    /// Keep `task` to abort on a cut; `false` (and aborted) when the cut
    /// came first.
    fn register(&self, task: tokio::task::AbortHandle) -> bool {
        let mut tasks = self.0.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_cut() {
            task.abort();
            return false;
        }
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
        true
    }

    /// Wait for `fut` on the client's runtime unless the session is cut
    /// first (`None`; also without a client).
    fn until_cut<F: Future>(
        &self,
        client: &Result<HttpClient, ClientError>,
        fut: F,
    ) -> Option<F::Output> {
        let c = client.as_ref().ok()?;
        let mut fired = self.0.fired.subscribe();
        c.handle().block_on(async move {
            let cut = std::pin::pin!(fired.wait_for(|f| *f));
            let mut cut = cut;
            let mut fut = std::pin::pin!(fut);
            std::future::poll_fn(|cx| {
                if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                    return Poll::Ready(Some(v));
                }
                if cut.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                Poll::Pending
            })
            .await
        })
    }
}

/// The `Http` implementation handed to gix-transport.
pub(crate) struct SluiceHttp {
    client: Result<HttpClient, ClientError>,
    auth: Option<SecretString>,
    /// `http.extraHeader` lines, sent on every request.
    extra: Vec<(String, String)>,
    /// Where a credential is bought when the first request is answered 401
    /// without one, and the user name it goes with when it names none.
    challenge: Option<(sluice_policy::Challenge, String)>,
    /// The URL the credential was bought for.
    origin: Option<reqwest::Url>,
    wire: Wire,
    cut: Cut,
    /// The base this session's first request was redirected to.
    redirected: Option<String>,
    /// The operation's redirected base, for its later sessions.
    memo: Arc<Mutex<Option<String>>>,
    /// The client's and the call's headers, sent where the credential
    /// would be (the remote's host).
    caller: Vec<(String, String)>,
}

impl SluiceHttp {
    /// `auth` is the whole `Authorization` header value, bought for
    /// `origin`; `memo` keeps the operation's redirected base.
    pub fn new(
        client: Result<HttpClient, ClientError>,
        auth: Option<SecretString>,
        origin: &str,
        wire: Wire,
        cut: Cut,
        memo: Arc<Mutex<Option<String>>>,
        caller: Vec<(String, String)>,
    ) -> Self {
        SluiceHttp {
            client,
            auth,
            extra: Vec::new(),
            challenge: None,
            origin: reqwest::Url::parse(origin).ok(),
            wire,
            cut,
            redirected: None,
            memo,
            caller,
        }
    }

    /// Send `extra` (`http.extraHeader` lines) on every request, and buy
    /// a credential from `challenge` when the first request is answered
    /// 401 without one (sent as the user `user` when it names none).
    pub fn with_config(
        mut self,
        extra: Vec<(String, String)>,
        challenge: Option<(sluice_policy::Challenge, String)>,
    ) -> Self {
        self.extra = extra;
        self.challenge = challenge;
        self
    }

    /// The credential the challenge buys, as an `Authorization` value;
    /// `None` when there is no challenge, a credential was already sent,
    /// the 401 came from elsewhere than the credential's origin, or the
    /// purchase gave none (the 401 then stands).
    fn answer_challenge(&mut self, at: &str) -> Option<SecretString> {
        if self.auth.is_some() {
            return None;
        }
        let same = match (&self.origin, reqwest::Url::parse(at)) {
            (Some(o), Ok(u)) => redirect::same_authority(o, &u),
            _ => false,
        };
        if !same || self.wire.lock().http_status.as_ref().map(|s| s.0) != Some(401) {
            return None;
        }
        let (challenge, user) = self.challenge.take()?;
        let c = challenge.fill().ok()?;
        tracing::debug!(credential = %c.fingerprint(), "asked for a credential: sending one");
        Some(basic_auth(c.user().unwrap_or(&user), c.secret()))
    }

    fn exchange(
        &self,
        method: reqwest::Method,
        url: &str,
        mut headers: Vec<(String, String)>,
        follow: bool,
    ) -> Shared {
        headers.extend(self.extra.iter().cloned());
        // The credential, and the caller's headers, go only where the
        // credential was bought.
        let home = matches!(
            (&self.origin, reqwest::Url::parse(url)),
            (Some(o), Ok(u)) if redirect::same_authority(o, &u)
        );
        let auth = if home { self.auth.clone() } else { None };
        if home {
            headers.extend(self.caller.iter().cloned());
        }
        Exchange::new(
            self.client.clone(),
            Ask {
                method,
                url: url.to_string(),
                headers,
                auth,
                follow,
            },
            self.wire.clone(),
            self.cut.clone(),
        )
    }

    fn answer(&self, ex: Shared) -> (Headers, Body) {
        (
            Headers {
                ex: Arc::clone(&ex),
                data: None,
            },
            Body::new(ex, self.wire.clone()),
        )
    }
}

/// `Basic <user:secret in base64>`, the value of an `Authorization` header.
pub(crate) fn basic_auth(user: &str, secret: &SecretString) -> SecretString {
    use base64::Engine;
    let raw = format!("{user}:{}", secret.expose_secret());
    SecretString::from(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    ))
}

impl Drop for SluiceHttp {
    fn drop(&mut self) {
        // Nothing of the session outlives it.
        self.cut.abort_all();
    }
}

fn header_pairs(headers: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter_map(|h| {
            h.as_ref()
                .split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

fn gix_err(e: ExchangeError) -> gix::Error {
    gix::Error::from_error(exchange::io_err(e))
}

impl Http for SluiceHttp {
    type Headers = Headers;
    type ResponseBody = Body;
    type PostBody = PostBody;

    /// The first request of a conversation (`info/refs`): redirects
    /// followed as git's `http.followRedirects=initial` follows them.
    fn get(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::Result<GetResponse<Headers, Body>> {
        let headers = header_pairs(headers);
        let mut chain: Vec<reqwest::Url> = reqwest::Url::parse(url).into_iter().collect();
        let mut at = url.to_string();
        let mut last_status = 0;
        let ex = loop {
            let ex = self.exchange(reqwest::Method::GET, &at, headers.clone(), true);
            let answered = ex.lock().unwrap_or_else(|p| p.into_inner()).perform();
            match answered {
                Err(e @ ExchangeError::Status { .. }) if self.challenge.is_some() => {
                    // Asked for a credential: bought inside this attempt
                    // and the request sent again with it, as git does.
                    match self.answer_challenge(&at) {
                        Some(auth) => {
                            self.auth = Some(auth);
                            self.wire.lock().http_status = None;
                            continue;
                        }
                        None => return Err(gix_err(e)),
                    }
                }
                Err(e) => return Err(gix_err(e)),
                Ok(Answered::Success) => break ex,
                Ok(Answered::Redirect(status, location)) => {
                    last_status = status;
                    let from = chain.last().cloned().expect("a sent request's URL parses");
                    match redirect::next_hop(&from, location.as_deref(), &chain) {
                        Ok(to) => {
                            tracing::debug!(
                                status,
                                to = %sluice_policy::text::redact(to.as_str()),
                                "following a redirect"
                            );
                            at = to.to_string();
                            chain.push(to);
                        }
                        Err(why) => {
                            let mut e = ex.lock().unwrap_or_else(|p| p.into_inner());
                            return Err(gix_err(e.refuse(status, &why)));
                        }
                    }
                }
            }
        };
        if chain.len() > 1 {
            let last = chain.last().expect("more than one");
            match redirect::base_of(url, base_url, last) {
                Ok(base) => {
                    self.redirected = Some(base.clone());
                    *self.memo.lock().unwrap_or_else(|p| p.into_inner()) = Some(base);
                }
                Err(why) => {
                    let mut e = ex.lock().unwrap_or_else(|p| p.into_inner());
                    return Err(gix_err(e.refuse(last_status, &why)));
                }
            }
        }
        let (headers, body) = self.answer(ex);
        Ok(GetResponse { headers, body })
    }

    fn post(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        _body: PostBodyDataKind,
    ) -> gix::Result<PostResponse<Headers, Body, PostBody>> {
        let ex = self.exchange(reqwest::Method::POST, url, header_pairs(headers), false);
        let (headers, body) = self.answer(Arc::clone(&ex));
        Ok(PostResponse {
            post_body: PostBody { ex },
            headers,
            body,
        })
    }

    fn configure(&mut self, _config: &dyn std::any::Any) -> gix::Result {
        Ok(())
    }

    fn redirected_base_url(&self) -> Option<String> {
        self.redirected.clone()
    }
}
