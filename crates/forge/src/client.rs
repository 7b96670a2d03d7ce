//! The forge client: one value per forge, shared by threads, running every
//! call under the policy.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
};
use reqwest::{Method, Url};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_policy::{
    AttemptCtx, AttemptError, Bounds, CallOptions, CancelFlag, Credential, CredentialSource,
    Effect, Operation, Outcome, OutcomeKind, Policy, Settlement, StaticSource,
};

use sluice_policy::metric;
use sluice_policy::text::{error_chain, redact};

use crate::app::GitHubAppSource;
use crate::base::{parse_base, split_user_info, API_VERSION};
use crate::classify::{self, api_message, classify, documentation_url, Exchange};
use crate::error::{ForgeError, ForgeFailure, ForgeInputError};
use crate::etag::{ETags, Kept};
use crate::gate::{GateRefusal, Gates, Permit};
use crate::phase::ForgePhase;

/// How often a read waiting for its answer looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(25);

/// An HTTP answer: status and body text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

#[derive(Clone)]
enum Creds {
    Plain(Arc<dyn CredentialSource>),
    App(Arc<GitHubAppSource>),
}

impl Creds {
    fn for_operation(&self) -> Arc<dyn CredentialSource> {
        match self {
            Creds::Plain(s) => Arc::clone(s),
            Creds::App(a) => a.operation_source(),
        }
    }
}

/// Builds a [`ForgeClient`].
///
/// # Default
/// user agent `sluice-remote/<version>`, a fresh [`Policy::default`], no
/// credentials, the `command` profile's bounds, writes to one host at least
/// 1 s apart, at most 8 concurrent requests per host, 5 s to connect, the
/// platform's trust roots and proxies from the environment
/// ([`sluice_https::HttpsConfig::new`]).
///
/// # A policy of its own unless given one
/// Without [`ForgeClientBuilder::policy`], the client gets a
/// [`Policy::default`] of its own: its own ledger (in memory, so an
/// operation id claimed through it is unknown to every other client) and
/// its own retry budget per host (its retries are not counted against a
/// git client's or another forge client's to the same host). A program
/// with more than one client should build one `Arc<Policy>` and give it to
/// each; the client's `Debug` says which it has (`policy: "shared"` or
/// `policy: "own (not shared with other clients)"`).
pub struct ForgeClientBuilder {
    base: String,
    user_agent: String,
    policy: Option<Arc<Policy>>,
    creds: Option<Creds>,
    bounds: Bounds,
    write_spacing: Duration,
    max_concurrent: usize,
    connect_timeout: Duration,
    https: sluice_https::HttpsConfig,
    api_version: String,
}

impl ForgeClientBuilder {
    /// The REST API version asked for on every request
    /// (`X-GitHub-Api-Version`; default [`API_VERSION`], 2022-11-28). The
    /// client reads what its calls need from that version's documents; a
    /// merge's settling read never depends on `merge_commit_sha` (which
    /// 2026-03-10 removes): the `merged` event's `commit_id` stands in.
    pub fn api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// The https settings: trust roots added to the platform's
    /// (`--ca-file`) and the proxy. A TLS certificate error or alert is
    /// answered at `connect`; a handshake cut, reset or timeout is unjudged.
    pub fn https(mut self, https: sluice_https::HttpsConfig) -> Self {
        self.https = https;
        self
    }

    /// Send this user agent.
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = ua.into();
        self
    }

    /// Run calls under this policy, shared with every client given the
    /// same one: one ledger (an operation id means one operation whichever
    /// client runs it) and one retry budget per host. Without it the client
    /// has a policy of its own (see the type's notes).
    pub fn policy(mut self, policy: Arc<Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Buy credentials from this source.
    pub fn credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.creds = Some(Creds::Plain(source));
        self
    }

    /// Buy credentials from this GitHub App installation (each operation
    /// gets a fresh token after a refusal, see
    /// [`GitHubAppSource::operation_source`]).
    pub fn github_app(mut self, app: Arc<GitHubAppSource>) -> Self {
        self.creds = Some(Creds::App(app));
        self
    }

    /// The bounds of calls whose options name none.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The least time between the end of one write to a host and the start
    /// of the next (GitHub asks for one second).
    pub fn write_spacing(mut self, spacing: Duration) -> Self {
        self.write_spacing = spacing;
        self
    }

    /// The most requests in flight to one host at once (GitHub asks for few;
    /// 1 makes them serial).
    pub fn max_concurrent_per_host(mut self, n: usize) -> Self {
        self.max_concurrent = n.max(1);
        self
    }

    /// The longest a connection (TCP and TLS) may take: a connect that takes
    /// longer is classed `connect`, unjudged. (An attempt whose own timeout
    /// is shorter ends first, as a timeout after sending: unknown.)
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Build the client. User info in the base URL is a static credential
    /// (the password, or the user name when there is no password), used
    /// when no source was set, and is removed from the URL.
    pub fn build(self) -> Result<ForgeClient, ForgeError> {
        let (base, url_secret) = split_user_info(&self.base)?;
        let base = parse_base(base.as_str())?;
        let creds = self
            .creds
            .or_else(|| url_secret.map(|s| Creds::Plain(Arc::new(StaticSource::new(s)))));
        let proxies = self.https.proxies();
        let build = |redirects: reqwest::redirect::Policy, pooled: bool| {
            let mut b = self
                .https
                .client_builder_with(proxies.clone())
                .map_err(|e| ForgeError::Http(e.to_string()))?
                .user_agent(self.user_agent.clone())
                .redirect(redirects)
                .connect_timeout(self.connect_timeout);
            if !pooled {
                // A write never goes out on a kept-alive connection: one the
                // server closed while it idled could fail under the request
                // in a way the HTTP stack might answer by sending it again.
                // A fresh connection per write costs one handshake.
                b = b.pool_max_idle_per_host(0);
            }
            b.build().map_err(|e| ForgeError::Http(error_chain(&e)))
        };
        Ok(ForgeClient {
            inner: Arc::new(Inner {
                base,
                // Reads follow redirects (reqwest drops the credential when
                // one leads to another host); writes never do.
                read_http: build(reqwest::redirect::Policy::limited(10), true)?,
                write_http: build(reqwest::redirect::Policy::none(), false)?,
                shared_policy: self.policy.is_some(),
                policy: self.policy.unwrap_or_else(|| Arc::new(Policy::default())),
                creds,
                bounds: self.bounds,
                gates: Gates::new(self.max_concurrent, self.write_spacing),
                user_agent: self.user_agent,
                api_version: self.api_version,
                proxies,
                etags: ETags::default(),
            }),
        })
    }
}

struct Inner {
    base: Url,
    read_http: reqwest::blocking::Client,
    write_http: reqwest::blocking::Client,
    policy: Arc<Policy>,
    /// Whether the policy was given to the builder (else the client's own).
    shared_policy: bool,
    creds: Option<Creds>,
    bounds: Bounds,
    gates: Gates,
    user_agent: String,
    /// The REST API version asked for.
    api_version: String,
    /// Which proxy each request goes through (named in its errors).
    proxies: sluice_https::Proxies,
    /// The answers kept for conditional reads.
    etags: ETags,
}

/// A client of one forge's REST API (GitHub or GitHub Enterprise).
///
/// Cheap to clone and `Send + Sync`: clones share the policy (retry budget,
/// ledger), the credential source, the per-host concurrency cap and the
/// write pacing. Every call is one policy operation; GET is a read,
/// POST/PATCH/PUT/DELETE are writes.
///
/// Every call takes `&`[`CallOptions`] and returns
/// `Result<Outcome<T>, `[`ForgeInputError`]`>`: bad input (a URL, a sha, a
/// ref name, a number, a state, a head, a repository) is an `Err` before
/// any request; after that, whatever happened is the [`Outcome`], and an
/// outcome with an error carries a [`ForgeFailure`] as its source
/// (`error.source_as::<ForgeFailure>()`), a credential source's failure as
/// [`ForgeFailure::Credential`]. (One exception: a ledger that could not
/// claim the operation id keeps the ledger's own error as the source.)
///
/// A client built without [`ForgeClientBuilder::policy`] has a policy of
/// its own — its own ledger and retry budget, not shared with any other
/// client; its `Debug` says `policy: "own (not shared with other
/// clients)"`. Give every client of one program the same `Arc<Policy>`.
#[derive(Clone)]
pub struct ForgeClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ForgeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeClient")
            .field("base", &self.inner.base.as_str())
            .field("user_agent", &self.inner.user_agent)
            .field("bounds", &self.inner.bounds)
            .field(
                "policy",
                &if self.inner.shared_policy {
                    "shared"
                } else {
                    "own (not shared with other clients)"
                },
            )
            .field(
                "credentials",
                &self.inner.creds.as_ref().map(|_| "<source>"),
            )
            .finish_non_exhaustive()
    }
}

/// One HTTP request of an attempt, ready to send.
pub(crate) struct Prepared<'a> {
    pub(crate) method: Method,
    pub(crate) url: &'a Url,
    pub(crate) body: Option<&'a [u8]>,
}

impl Prepared<'_> {
    pub(crate) fn effect(&self) -> Effect {
        effect_of(&self.method)
    }
}

/// The effect of an HTTP method: GET and HEAD read, anything else writes.
pub fn effect_of(method: &Method) -> Effect {
    if method == Method::GET || method == Method::HEAD || method == Method::OPTIONS {
        Effect::Read
    } else {
        Effect::Write
    }
}

/// A fully read answer, not judged yet.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    fn response(&self) -> HttpResponse {
        HttpResponse {
            status: self.status,
            body: self.body.clone(),
        }
    }
}

/// Judge a fully read answer with the table of [`classify`].
pub(crate) fn judge(effect: Effect, a: &Answer) -> Result<(), AttemptError> {
    let (message, docs) = if (200..300).contains(&a.status) {
        (String::new(), None)
    } else {
        (api_message(&a.body), documentation_url(&a.body))
    };
    classify(
        &Exchange {
            effect,
            phase: ForgePhase::Body,
            status: Some(a.status),
            headers: &a.headers,
            text: &message,
            documentation_url: docs.as_deref(),
            tls: None,
        },
        SystemTime::now(),
    )
}

/// Parse a judged answer's JSON. A read whose answer cannot be parsed is
/// answered; a write's is unknown (it landed, but its value was not read:
/// settle by reading).
pub(crate) fn decode<T: DeserializeOwned>(effect: Effect, a: &Answer) -> Result<T, AttemptError> {
    serde_json::from_str(&a.body).map_err(|e| {
        let f = ForgeFailure::Undecodable {
            status: a.status,
            detail: e.to_string(),
        };
        classify::failed(f, effect, &a.headers, SystemTime::now())
    })
}

/// Reads made while settling a write: GETs with the operation's credential,
/// within the settling read's deadline. The caller's cancel flag does not
/// stop them: a cancelled write is still settled by reading.
pub struct Reading<'a> {
    client: &'a ForgeClient,
    credential: Option<Credential>,
    deadline: Instant,
    cancel: CancelFlag,
}

impl Reading<'_> {
    /// What remains of this read's time.
    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// GET a path under the base URL (or an absolute URL); anything but a
    /// 2xx is an error classed by the table.
    pub fn get(&self, path_or_url: &str) -> Result<HttpResponse, AttemptError> {
        let url = self.resolve(path_or_url)?;
        self.get_answer(&url).map(|a| a.response())
    }

    /// GET and parse JSON.
    pub fn get_json<T: DeserializeOwned>(&self, path_or_url: &str) -> Result<T, AttemptError> {
        let url = self.resolve(path_or_url)?;
        let a = self.get_answer(&url)?;
        decode(Effect::Read, &a)
    }

    /// A path or URL to read, or a local failure with its typed source.
    fn resolve(&self, path_or_url: &str) -> Result<Url, AttemptError> {
        self.client
            .resolve(path_or_url)
            .map(|(url, _)| url)
            .map_err(|e| {
                let f = ForgeFailure::Local {
                    detail: e.to_string(),
                };
                AttemptError::local(ForgePhase::Connect.as_str(), f.to_string()).with_source(f)
            })
    }

    /// GET one object and parse its JSON (the settling read of a write
    /// whose landing one object shows).
    #[allow(dead_code)] // the single-object settling reads of the typed writes
    pub(crate) fn get_json_url<T: DeserializeOwned>(&self, url: &Url) -> Result<T, AttemptError> {
        let a = self.get_answer(url)?;
        decode(Effect::Read, &a)
    }

    /// GET `url` within this read's time; an answer that is not success is
    /// the read's failure.
    pub(crate) fn get_answer(&self, url: &Url) -> Result<Answer, AttemptError> {
        let p = Prepared {
            method: Method::GET,
            url,
            body: None,
        };
        let a = self.client.exchange(
            &p,
            self.credential.as_ref(),
            self.deadline,
            &self.cancel,
            &mut |_| {},
        )?;
        judge(Effect::Read, &a)?;
        Ok(a)
    }
}

impl ForgeClient {
    /// A builder for the API at `base_url` (`https://api.github.com`, or
    /// GitHub Enterprise's `https://HOST/api/v3`).
    pub fn builder(base_url: &str) -> ForgeClientBuilder {
        ForgeClientBuilder {
            base: base_url.to_string(),
            user_agent: crate::base::DEFAULT_USER_AGENT.to_string(),
            policy: None,
            creds: None,
            bounds: Bounds::default(),
            write_spacing: Duration::from_secs(1),
            max_concurrent: 8,
            connect_timeout: Duration::from_secs(5),
            https: sluice_https::HttpsConfig::new(),
            api_version: API_VERSION.to_string(),
        }
    }

    /// A client for `base_url` with the builder's defaults.
    pub fn new(base_url: &str) -> Result<Self, ForgeError> {
        Self::builder(base_url).build()
    }

    /// The base URL (without user info).
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The policy every call runs under.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.inner.policy
    }

    /// GET an absolute URL (`sluice-remote http get <URL>`), kind `http-get`.
    /// User info in the URL is a static credential (sent as a bearer token
    /// unless `opts` names a source) and never appears in the outcome.
    /// A non-2xx answer ends `answered` with its status and body kept as the
    /// value. Bad input (not an absolute http(s) URL) is an `Err`.
    pub fn get_url(
        &self,
        url: &str,
        opts: &CallOptions,
    ) -> Result<Outcome<HttpResponse>, ForgeInputError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ForgeInputError::Url(format!(
                "{:?}: not an absolute http(s) URL",
                redact(url)
            )));
        }
        self.request(Method::GET, url, None, opts)
    }

    /// Any call: `path_or_url` is a path under the base URL (with its
    /// query) or an absolute URL. Kind `http-<method>`. A write runs without
    /// a settling read: an unknown answer ends `unknown` with
    /// `may_have_applied: true` (use [`ForgeClient::request_write`] to
    /// settle it). A non-2xx answer ends `answered` with its status and body
    /// kept as the value.
    pub fn request(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&serde_json::Value>,
        opts: &CallOptions,
    ) -> Result<Outcome<HttpResponse>, ForgeInputError> {
        self.raw(
            method,
            path_or_url,
            body,
            opts,
            None::<fn(&Reading<'_>) -> _>,
        )
    }

    /// A write settled by `reconcile` when its answer is unknown (see
    /// [`Policy::run_write`]): the closure reads through the [`Reading`]
    /// it is given and says whether the write landed.
    pub fn request_write(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&serde_json::Value>,
        opts: &CallOptions,
        reconcile: impl FnMut(&Reading<'_>) -> Result<Settlement<HttpResponse>, AttemptError>,
    ) -> Result<Outcome<HttpResponse>, ForgeInputError> {
        self.raw(method, path_or_url, body, opts, Some(reconcile))
    }

    fn raw<R>(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&serde_json::Value>,
        opts: &CallOptions,
        reconcile: Option<R>,
    ) -> Result<Outcome<HttpResponse>, ForgeInputError>
    where
        R: FnMut(&Reading<'_>) -> Result<Settlement<HttpResponse>, AttemptError>,
    {
        let (url, url_secret) = self.resolve(path_or_url)?;
        let kind = format!("http-{}", method.as_str().to_ascii_lowercase());
        let body = body.map(|b| serde_json::to_vec(b).unwrap_or_default());
        let p = Prepared {
            method,
            url: &url,
            body: body.as_deref(),
        };
        let effect = p.effect();
        let op = self.operation(&kind, effect, &url, opts, url_secret);
        let last_answer: RefCell<Option<HttpResponse>> = RefCell::new(None);
        let last_cred: RefCell<Option<Credential>> = RefCell::new(None);
        let attempt = |ctx: &mut AttemptCtx<'_>| {
            last_answer.borrow_mut().take();
            let a = self.attempt_exchange(ctx, &p, &last_cred)?;
            if let Err(e) = judge(effect, &a) {
                *last_answer.borrow_mut() = Some(a.response());
                return Err(e);
            }
            Ok(a.response())
        };
        let mut out = match (effect, reconcile) {
            (Effect::Write, Some(mut r)) => self.inner.policy.run_write(op, attempt, |rctx| {
                let reading = self.reading(&last_cred, rctx.timeout, opts);
                r(&reading)
            }),
            _ => self.inner.policy.run(op, attempt),
        };
        if out.kind == OutcomeKind::Answered && out.value.is_none() {
            out.value = last_answer.into_inner();
        }
        Ok(forge_source(out))
    }

    /// Run one typed read.
    pub(crate) fn typed_read<T>(
        &self,
        kind: &str,
        remote: &Url,
        opts: &CallOptions,
        mut body: impl FnMut(
            &ForgeClient,
            &mut AttemptCtx<'_>,
            &RefCell<Option<Credential>>,
        ) -> Result<T, AttemptError>,
    ) -> Outcome<T> {
        let op = self.operation(kind, Effect::Read, remote, opts, None);
        let last_cred = RefCell::new(None);
        forge_source(self.inner.policy.run(op, |ctx| body(self, ctx, &last_cred)))
    }

    /// Run one typed write with its settling read.
    pub(crate) fn typed_write<T: DeserializeOwned>(
        &self,
        kind: &str,
        p: &Prepared<'_>,
        opts: &CallOptions,
        mut reconcile: Option<impl FnMut(&Reading<'_>) -> Result<Settlement<T>, AttemptError>>,
    ) -> Outcome<T> {
        let op = self.operation(kind, Effect::Write, p.url, opts, None);
        let last_cred = RefCell::new(None);
        let attempt = |ctx: &mut AttemptCtx<'_>| {
            let a = self.attempt_exchange(ctx, p, &last_cred)?;
            judge(Effect::Write, &a)?;
            decode::<T>(Effect::Write, &a)
        };
        forge_source(match reconcile.as_mut() {
            Some(r) => self.inner.policy.run_write(op, attempt, |rctx| {
                let reading = self.reading(&last_cred, rctx.timeout, opts);
                r(&reading)
            }),
            None => self.inner.policy.run(op, attempt),
        })
    }

    /// Run one typed write whose attempt is the caller's (a write that
    /// reads first, in the same operation), with its settling read.
    pub(crate) fn typed_write_with<T>(
        &self,
        kind: &str,
        remote: &Url,
        opts: &CallOptions,
        mut attempt: impl FnMut(
            &ForgeClient,
            &mut AttemptCtx<'_>,
            &RefCell<Option<Credential>>,
        ) -> Result<T, AttemptError>,
        mut reconcile: impl FnMut(&Reading<'_>) -> Result<Settlement<T>, AttemptError>,
    ) -> Outcome<T> {
        let op = self.operation(kind, Effect::Write, remote, opts, None);
        let last_cred = RefCell::new(None);
        forge_source(self.inner.policy.run_write(
            op,
            |ctx| attempt(self, ctx, &last_cred),
            |rctx| {
                let reading = self.reading(&last_cred, rctx.timeout, opts);
                reconcile(&reading)
            },
        ))
    }

    fn reading<'a>(
        &'a self,
        last_cred: &RefCell<Option<Credential>>,
        remaining: Duration,
        opts: &CallOptions,
    ) -> Reading<'a> {
        let attempt_timeout = opts
            .given_bounds()
            .unwrap_or(self.inner.bounds)
            .attempt_timeout;
        Reading {
            client: self,
            credential: last_cred.borrow().clone(),
            deadline: Instant::now() + remaining.min(attempt_timeout),
            // Never the caller's flag: a cancelled write is still settled
            // by its reads (the deadline bounds them), and a raised flag
            // would refuse every read at the host's gate before sending.
            cancel: CancelFlag::new(),
        }
    }

    /// One exchange inside an attempt: the attempt's credential, its hard
    /// deadline, its phases.
    pub(crate) fn attempt_exchange(
        &self,
        ctx: &mut AttemptCtx<'_>,
        p: &Prepared<'_>,
        last_cred: &RefCell<Option<Credential>>,
    ) -> Result<Answer, AttemptError> {
        let deadline = Instant::now() + ctx.timeout;
        self.attempt_exchange_until(ctx, p, last_cred, deadline)
    }

    /// As [`Self::attempt_exchange_until`], under a pass through the gate
    /// the attempt already holds ([`Self::hold_write_gate`]).
    pub(crate) fn attempt_exchange_held(
        &self,
        ctx: &mut AttemptCtx<'_>,
        p: &Prepared<'_>,
        last_cred: &RefCell<Option<Credential>>,
        deadline: Instant,
        permit: &Arc<Permit>,
    ) -> Result<Answer, AttemptError> {
        let cred = ctx.credential().cloned();
        last_cred.replace(cred.clone());
        let cancel = ctx.cancel_flag().clone();
        self.exchange_held(
            p,
            cred.as_ref(),
            deadline,
            &cancel,
            &mut |ph| ctx.reached(ph.as_str()),
            Arc::clone(permit),
        )
    }

    /// As [`Self::attempt_exchange`], with the attempt's deadline given (for
    /// attempts of several requests).
    pub(crate) fn attempt_exchange_until(
        &self,
        ctx: &mut AttemptCtx<'_>,
        p: &Prepared<'_>,
        last_cred: &RefCell<Option<Credential>>,
        deadline: Instant,
    ) -> Result<Answer, AttemptError> {
        let cred = ctx.credential().cloned();
        last_cred.replace(cred.clone());
        let cancel = ctx.cancel_flag().clone();
        self.exchange(p, cred.as_ref(), deadline, &cancel, &mut |ph| {
            ctx.reached(ph.as_str())
        })
    }

    fn operation(
        &self,
        kind: &str,
        effect: Effect,
        url: &Url,
        opts: &CallOptions,
        url_secret: Option<SecretString>,
    ) -> Operation {
        let mut op = opts.apply(
            Operation::new(kind, effect, url.as_str()),
            self.inner.bounds,
        );
        let source = opts
            .credential_source()
            .cloned()
            .or_else(|| {
                url_secret.map(|s| Arc::new(StaticSource::new(s)) as Arc<dyn CredentialSource>)
            })
            .or_else(|| self.inner.creds.as_ref().map(Creds::for_operation));
        if let Some(s) = source {
            op = op.credentials(s);
        }
        op
    }

    /// A path under the base URL, or an absolute URL with its user info
    /// taken out.
    pub(crate) fn resolve(
        &self,
        path_or_url: &str,
    ) -> Result<(Url, Option<SecretString>), ForgeInputError> {
        if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
            let (url, secret) = split_user_info(path_or_url).map_err(|e| match e {
                ForgeError::InvalidUrl(why) => ForgeInputError::Url(why),
                other => ForgeInputError::Url(other.to_string()),
            })?;
            return Ok((url, secret));
        }
        let joined = format!(
            "{}/{}",
            self.inner.base.as_str().trim_end_matches('/'),
            path_or_url.trim_start_matches('/')
        );
        let url = Url::parse(&joined)
            .map_err(|e| ForgeInputError::Url(format!("{path_or_url:?}: {e}")))?;
        Ok((url, None))
    }

    /// The URL of an API path made of `segments` (each percent-encoded).
    pub(crate) fn api_url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut p) = url.path_segments_mut() {
            p.pop_if_empty().extend(segments);
        }
        url
    }

    /// Send one request and read its whole answer. A failure is described
    /// as a [`ForgeFailure`] and classed by the forge's table
    /// ([`classify::failed`]); a fully read answer is returned for [`judge`].
    ///
    /// The request runs on a helper thread holding the host's permit, so a
    /// read can stop waiting when the caller cancels (the abandoned request
    /// ends by its own timeout). A write is waited for to its answer or its
    /// timeout, then settled as usual: abandoning it would leave it in
    /// flight while the settling read looks for it.
    pub(crate) fn exchange(
        &self,
        p: &Prepared<'_>,
        credential: Option<&Credential>,
        deadline: Instant,
        cancel: &CancelFlag,
        reached: &mut dyn FnMut(ForgePhase),
    ) -> Result<Answer, AttemptError> {
        let effect = p.effect();
        let none = HeaderMap::new();
        let fail = |f: ForgeFailure, headers: &HeaderMap| {
            classify::failed(f, effect, headers, SystemTime::now())
        };
        let permit = self
            .pass_gate(p.url, effect, deadline, cancel)
            .map_err(|f| fail(f, &none))?;
        self.exchange_held(p, credential, deadline, cancel, reached, Arc::new(permit))
    }

    /// Hold a pass through `url`'s host's write gate for several requests
    /// of one attempt (a write that reads its baseline first: the read is
    /// made once the write may go, under the same pass, so nothing at the
    /// gate comes between them). A refusal is the attempt's failure
    /// (nothing sent: unjudged).
    pub(crate) fn hold_write_gate(
        &self,
        url: &Url,
        deadline: Instant,
        cancel: &CancelFlag,
    ) -> Result<Arc<Permit>, AttemptError> {
        self.pass_gate(url, Effect::Write, deadline, cancel)
            .map(Arc::new)
            .map_err(|f| classify::failed(f, Effect::Write, &HeaderMap::new(), SystemTime::now()))
    }

    /// [`Self::exchange`] under a pass already held (`permit`), never
    /// passing the gate again (a second pass would wait on itself).
    pub(crate) fn exchange_held(
        &self,
        p: &Prepared<'_>,
        credential: Option<&Credential>,
        deadline: Instant,
        cancel: &CancelFlag,
        reached: &mut dyn FnMut(ForgePhase),
        permit: Arc<Permit>,
    ) -> Result<Answer, AttemptError> {
        let effect = p.effect();
        let none = HeaderMap::new();
        let fail = |f: ForgeFailure, headers: &HeaderMap| {
            classify::failed(f, effect, headers, SystemTime::now())
        };
        let http = match effect {
            Effect::Read => &self.inner.read_http,
            Effect::Write => &self.inner.write_http,
        };
        let fingerprint = credential.map(|c| c.fingerprint().to_string());
        // A read sends the ETag of the answer kept for it, if any.
        let kept = match effect {
            Effect::Read => self.inner.etags.get(p.url.as_str(), fingerprint.as_deref()),
            Effect::Write => None,
        };
        let etag = kept.as_ref().map(|k| k.etag.as_str());
        let request = build_request(http, p, credential, etag, deadline, &self.inner.api_version)
            .map_err(|f| fail(f, &none))?;
        let sent_at = Instant::now();
        let (status, headers, body) = match send(http, request, permit, effect, cancel) {
            Ok(answer) => answer,
            Err(Unsent::NotStarted(f)) => return Err(fail(f, &none)),
            Err(Unsent::Abandoned(f)) => {
                reached(ForgePhase::RequestSent);
                return Err(fail(f, &none));
            }
            Err(Unsent::Failed(e)) => {
                let f = self.transport_failure(e, p.url);
                if f.phase() > ForgePhase::Connect {
                    reached(ForgePhase::RequestSent);
                }
                tracing::debug!(
                    method = %p.method, url = %p.url, credential = ?fingerprint, phase = f.phase().as_str(),
                    elapsed_ms = sent_at.elapsed().as_millis() as u64, error = %f, "forge request failed"
                );
                return Err(fail(f, &none));
            }
        };
        reached(ForgePhase::RequestSent);
        reached(ForgePhase::ResponseHeaders);
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                let detail = error_chain(&e.without_url());
                tracing::debug!(
                    method = %p.method, url = %p.url, credential = ?fingerprint, status,
                    elapsed_ms = sent_at.elapsed().as_millis() as u64, error = %detail, "forge answer cut"
                );
                let f = if (200..300).contains(&status) {
                    ForgeFailure::Cut { status, detail }
                } else {
                    ForgeFailure::Status {
                        status,
                        message: detail,
                        documentation_url: None,
                        phase: ForgePhase::ResponseHeaders,
                    }
                };
                return Err(fail(f, &headers));
            }
        };
        reached(ForgePhase::Body);
        tracing::debug!(
            method = %p.method, url = %p.url, credential = ?fingerprint, status,
            elapsed_ms = sent_at.elapsed().as_millis() as u64, "forge answered"
        );
        let answer = Answer {
            status,
            headers,
            body,
        };
        Ok(match effect {
            Effect::Read => self.conditional(p.url, fingerprint.as_deref(), kept, answer),
            Effect::Write => answer,
        })
    }

    /// A read's answer, conditional reads applied: a `304` answered from
    /// the answer `kept` (and counted); a success with an `ETag` kept for
    /// the next read of `url` with the credential `fingerprint`.
    fn conditional(
        &self,
        url: &Url,
        fingerprint: Option<&str>,
        kept: Option<Kept>,
        answer: Answer,
    ) -> Answer {
        if let (304, Some(k)) = (answer.status, &kept) {
            let host = sluice_policy::host_of(url.as_str());
            metric::not_modified(&host);
            return Answer {
                status: k.status,
                headers: k.headers.clone(),
                body: k.body.clone(),
            };
        }
        let etag = answer
            .headers
            .get(ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let (true, Some(etag)) = ((200..300).contains(&answer.status), etag) {
            let k = Kept {
                etag,
                status: answer.status,
                headers: answer.headers.clone(),
                body: answer.body.clone(),
            };
            self.inner.etags.put(url.as_str(), fingerprint, k);
        }
        answer
    }

    /// Wait for a pass through `url`'s host's gate (the concurrency cap,
    /// and for a write the pacing) until `deadline`.
    fn pass_gate(
        &self,
        url: &Url,
        effect: Effect,
        deadline: Instant,
        cancel: &CancelFlag,
    ) -> Result<Permit, ForgeFailure> {
        let host = host_key(url);
        let started = Instant::now();
        self.inner
            .gates
            .acquire(&host, effect == Effect::Write, deadline, cancel)
            .map_err(|r| ForgeFailure::NotSent {
                detail: match r {
                    GateRefusal::Deadline => format!(
                        "no free slot to {host} within the attempt's time ({} ms waited for the concurrency cap or the write pacing)",
                        started.elapsed().as_millis()
                    ),
                    GateRefusal::Cancelled => "cancelled before sending".to_string(),
                },
            })
    }

    /// What a request that got no answer met: where it failed (a connect
    /// error never reached the server; anything later may have), the TLS
    /// refusal or the proxy's 407 when it was one, the proxy named.
    fn transport_failure(&self, e: reqwest::Error, url: &Url) -> ForgeFailure {
        let connect = e.is_connect();
        let redirect = e.is_redirect();
        let tls = if connect {
            sluice_https::tls_refusal(&e)
        } else {
            None
        };
        let refused_by_proxy = sluice_https::proxy_auth_required(&e);
        let mut detail = error_chain(&e.without_url());
        if !connect && redirect {
            return ForgeFailure::Redirect { detail };
        }
        let proxy = self.inner.proxies.named_for(url);
        if let Some(proxy) = &proxy {
            detail.push_str(&format!(" (through proxy {proxy})"));
        }
        if !connect {
            return ForgeFailure::NoAnswer {
                phase: ForgePhase::RequestSent,
                detail,
            };
        }
        if proxy.is_some() && refused_by_proxy {
            return ForgeFailure::ProxyRefused { detail };
        }
        match tls {
            Some(refusal) => ForgeFailure::Tls { refusal, detail },
            None => ForgeFailure::NoAnswer {
                phase: ForgePhase::Connect,
                detail,
            },
        }
    }

    pub(crate) fn observed(key: &str, value: impl Into<String>) -> BTreeMap<String, String> {
        BTreeMap::from([(key.to_string(), value.into())])
    }
}

/// Every forge outcome with an error carries a [`ForgeFailure`] as the
/// error's source: the forge's own attempts give one; a failure the policy
/// met on the forge's behalf (a credential source that could not give a
/// credential, so no request was made) is given one here, the source's own
/// error kept inside it. A ledger's failure to claim the id keeps the
/// ledger's error.
fn forge_source<T>(mut out: Outcome<T>) -> Outcome<T> {
    if let Some(e) = out.error.as_mut() {
        if e.source_as::<ForgeFailure>().is_none() {
            if let Some(c) = e.source_as::<sluice_policy::CredentialError>() {
                let f = ForgeFailure::Credential { error: c.clone() };
                e.source = Some(Arc::new(f));
            }
        }
    }
    out
}

/// `host:port` of a URL: the key of its pacing gate.
fn host_key(url: &Url) -> String {
    format!(
        "{}:{}",
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// What a request's thread brings back: status, headers, and the body (or
/// why it was cut).
type Received = (u16, HeaderMap, reqwest::Result<String>);

/// Why a request brought back no answer.
enum Unsent {
    /// Its thread could not start: nothing was sent.
    NotStarted(ForgeFailure),
    /// It was handed to the connection and then given up on (a read's
    /// cancel) or lost: it may be complete on the server.
    Abandoned(ForgeFailure),
    /// The HTTP stack failed it.
    Failed(reqwest::Error),
}

/// The request, ready to send: the API's headers, the credential as a
/// bearer token, the body, a timeout of what remains until `deadline`.
fn build_request(
    http: &reqwest::blocking::Client,
    p: &Prepared<'_>,
    credential: Option<&Credential>,
    etag: Option<&str>,
    deadline: Instant,
    api_version: &str,
) -> Result<reqwest::blocking::Request, ForgeFailure> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(ForgeFailure::NotSent {
            detail: "no time left in the attempt before sending".into(),
        });
    }
    let mut req = http
        .request(p.method.clone(), p.url.clone())
        .header(ACCEPT, "application/vnd.github+json")
        .header("x-github-api-version", api_version)
        .timeout(remaining);
    if let Some(c) = credential {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", c.secret().expose_secret()))
            // Ours, not the remote's: local-error, never retried.
            .map_err(|_| ForgeFailure::Local {
                detail: format!(
                    "credential {} is not a valid HTTP header value",
                    c.fingerprint()
                ),
            })?;
        v.set_sensitive(true);
        req = req.header(AUTHORIZATION, v);
    }
    if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(t).ok()) {
        req = req.header(IF_NONE_MATCH, tag);
    }
    if let Some(b) = p.body {
        req = req
            .header(CONTENT_TYPE, "application/json")
            .body(b.to_vec());
    }
    req.build().map_err(|e| ForgeFailure::Local {
        detail: error_chain(&e.without_url()),
    })
}

/// Send `request` on a thread of its own holding `permit` until the
/// request has truly ended, and wait for its answer: a read stops waiting
/// when `cancel` is raised; a write is waited for to its answer or its
/// timeout.
fn send(
    http: &reqwest::blocking::Client,
    request: reqwest::blocking::Request,
    permit: Arc<Permit>,
    effect: Effect,
    cancel: &CancelFlag,
) -> Result<Received, Unsent> {
    let (tx, rx) = mpsc::channel();
    let client = http.clone();
    // The request's thread is the attempt's: its events are the attempt's.
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name("sluice-forge-request".into())
        .spawn(move || {
            let _attempt = span.enter();
            let _permit = permit;
            let result = client.execute(request).map(|resp| {
                let status = resp.status().as_u16();
                let headers = resp.headers().clone();
                (status, headers, resp.text())
            });
            let _ = tx.send(result);
        })
        .map_err(|e| {
            Unsent::NotStarted(ForgeFailure::NotSent {
                detail: format!("could not start the request: {e}"),
            })
        })?;
    let lost = |detail: &str| {
        Unsent::Abandoned(ForgeFailure::NoAnswer {
            phase: ForgePhase::RequestSent,
            detail: detail.to_string(),
        })
    };
    loop {
        match rx.recv_timeout(CANCEL_POLL) {
            Ok(r) => return r.map_err(Unsent::Failed),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if effect == Effect::Read && cancel.is_cancelled() {
                    return Err(lost("cancelled while waiting for the answer"));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(lost("the request ended without an answer"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_have_effects() {
        assert_eq!(effect_of(&Method::GET), Effect::Read);
        for m in [Method::POST, Method::PATCH, Method::PUT, Method::DELETE] {
            assert_eq!(effect_of(&m), Effect::Write);
        }
    }

    #[test]
    fn api_paths_are_joined_under_the_base_and_encoded() {
        let c = ForgeClient::new("https://ghe.invalid/api/v3/").expect("client");
        assert_eq!(
            c.api_url(&["repos", "o", "r", "commits", "feature/x", "status"])
                .as_str(),
            "https://ghe.invalid/api/v3/repos/o/r/commits/feature%2Fx/status"
        );
        let (u, _) = c.resolve("/repos/o/r/pulls?state=all").expect("path");
        assert_eq!(
            u.as_str(),
            "https://ghe.invalid/api/v3/repos/o/r/pulls?state=all"
        );
        assert!(ForgeClient::new("https://u:p@ghe.invalid/").is_ok());
        assert!(ForgeClient::new("not a url").is_err());
    }

    #[test]
    fn the_client_is_send_sync_and_its_debug_names_no_secret() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ForgeClient>();
        let c = ForgeClient::new("https://x-access-token:hunter2@ghe.invalid/").expect("client");
        let d = format!("{c:?}");
        assert!(!d.contains("hunter2"), "{d}");
        assert!(d.contains("ghe.invalid"));
    }

    #[test]
    fn the_debug_text_says_whether_the_policy_is_shared_or_the_clients_own() {
        let own = ForgeClient::new("https://ghe.invalid/").expect("client");
        let d = format!("{own:?}");
        assert!(
            d.contains(r#"policy: "own (not shared with other clients)""#),
            "{d}"
        );
        let shared = ForgeClient::builder("https://ghe.invalid/")
            .policy(Arc::new(Policy::default()))
            .build()
            .expect("client");
        let d = format!("{shared:?}");
        assert!(d.contains(r#"policy: "shared""#), "{d}");
    }
}
