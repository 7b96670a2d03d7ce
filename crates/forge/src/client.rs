//! The forge client: one value per forge, shared by threads, running every
//! call under the policy. Its exchanges go through the [`Wire`] (the
//! `exchange` module); its settling reads are [`Reading`]s; it is built by
//! the `builder` module.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use reqwest::{Method, Url};
use secrecy::SecretString;
use serde::de::DeserializeOwned;
use sluice_policy::{
    AttemptCtx, AttemptError, Bounds, CallOptions, CancelFlag, Credential, CredentialError,
    CredentialSource, Effect, Operation, Outcome, OutcomeKind, Policy, Purchase, ReconcileCtx,
    Settlement, StaticSource,
};

use sluice_policy::text::redact;

#[cfg(feature = "app")]
use crate::app::GitHubAppSource;
use crate::base::resolve;
use crate::error::{ForgeFailure, ForgeInputError};
use crate::exchange::{decode, judge, Answer, ForCall, HttpResponse, Prepared, Wire};
use crate::phase::ForgePhase;
use crate::reading::Reading;

/// Where a client buys its credentials.
#[derive(Clone)]
pub(crate) enum Creds {
    Plain(Arc<dyn CredentialSource>),
    #[cfg(feature = "app")]
    App(Arc<GitHubAppSource>),
}

impl Creds {
    pub(crate) fn for_operation(&self) -> Arc<dyn CredentialSource> {
        match self {
            Creds::Plain(s) => Arc::clone(s),
            #[cfg(feature = "app")]
            Creds::App(a) => a.operation_source(),
        }
    }
}

/// An operation's credential source that is told the client's own
/// headers ([`ForgeClientBuilder::header`](crate::ForgeClientBuilder::header))
/// before the call's when it buys for the operation: a GitHub App's token
/// mint on the forge's host carries them as the forge's requests do.
/// Everything else is the wrapped source's.
struct WithClientHeaders {
    source: Arc<dyn CredentialSource>,
    headers: Vec<(String, String)>,
}

impl CredentialSource for WithClientHeaders {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.source.credential()
    }

    fn credential_within(
        &self,
        limit: std::time::Duration,
        cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        self.source.credential_within(limit, cancel)
    }

    fn credential_for(&self, purchase: &Purchase<'_>) -> Result<Credential, CredentialError> {
        let headers: Vec<(String, String)> = self
            .headers
            .iter()
            .chain(purchase.headers())
            .cloned()
            .collect();
        self.source.credential_for(&purchase.with_headers(&headers))
    }

    fn refused(&self, fingerprint: &str) {
        self.source.refused(fingerprint);
    }

    fn accepted(&self, fingerprint: &str) {
        self.source.accepted(fingerprint);
    }

    fn after_challenge(&self) -> bool {
        self.source.after_challenge()
    }
}

/// What clones of one client share.
pub(crate) struct Inner {
    pub(crate) base: Url,
    /// The HTTP stacks, gates, proxies and kept answers.
    pub(crate) wire: Wire,
    pub(crate) policy: Arc<Policy>,
    /// Whether the policy was given to the builder (else the client's own).
    pub(crate) shared_policy: bool,
    pub(crate) creds: Option<Creds>,
    pub(crate) bounds: Bounds,
    pub(crate) user_agent: String,
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
/// A client built without [`ForgeClientBuilder::policy`](crate::ForgeClientBuilder::policy) has a policy of
/// its own — its own ledger and retry budget, not shared with any other
/// client; its `Debug` says `policy: "own (not shared with other
/// clients)"`. Give every client of one program the same `Arc<Policy>`.
#[derive(Clone)]
pub struct ForgeClient {
    pub(crate) inner: Arc<Inner>,
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

impl ForgeClient {
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
                let reading = self.reading(&last_cred, rctx, opts);
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
                let reading = self.reading(&last_cred, rctx, opts);
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
                let reading = self.reading(&last_cred, rctx, opts);
                reconcile(&reading)
            },
        ))
    }

    /// The settling read `rctx` asks for: it watches the operation's stop
    /// (a cancel leaves it alone).
    fn reading<'a>(
        &'a self,
        last_cred: &RefCell<Option<Credential>>,
        rctx: &ReconcileCtx<'_>,
        opts: &CallOptions,
    ) -> Reading<'a> {
        let attempt_timeout = opts
            .given_bounds()
            .unwrap_or(self.inner.bounds)
            .attempt_timeout;
        // The operation's credential as the policy holds it (replaced when
        // it was due), else the attempt's last (a refused one).
        let credential = rctx
            .credential()
            .cloned()
            .or_else(|| last_cred.borrow().clone());
        Reading::new(
            &self.inner.wire,
            &self.inner.base,
            credential,
            Instant::now() + rctx.timeout.min(attempt_timeout),
            rctx.cancel_flag().stops_only(),
            rctx.headers().to_vec(),
        )
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

    /// As [`Self::attempt_exchange`], with the attempt's deadline given (for
    /// attempts of several requests).
    pub(crate) fn attempt_exchange_until(
        &self,
        ctx: &mut AttemptCtx<'_>,
        p: &Prepared<'_>,
        last_cred: &RefCell<Option<Credential>>,
        deadline: Instant,
    ) -> Result<Answer, AttemptError> {
        // Checked before every request: a token within its refresh margin
        // of expiring is replaced before it is sent.
        let cred = ctx.credential_for_request().cloned();
        last_cred.replace(cred.clone());
        let cancel = ctx.cancel_flag().clone();
        // A write's ledger entry says its request may have gone out before
        // it does (a no-op for a read operation).
        ctx.entering(ForgePhase::RequestSent.as_str());
        let facts = ctx.facts().clone();
        let headers = ctx.headers().to_vec();
        let r = self.exchange(
            p,
            deadline,
            &cancel,
            &mut |ph| ctx.reached(ph.as_str()),
            ForCall {
                credential: cred.as_ref(),
                facts: Some(&facts),
                headers: &headers,
            },
        );
        noted(ctx, r)
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
            op = op.credentials(if self.inner.wire.headers.is_empty() {
                s
            } else {
                Arc::new(WithClientHeaders {
                    source: s,
                    headers: self.inner.wire.headers.clone(),
                })
            });
        }
        op
    }

    /// A path under the base URL, or an absolute URL with its user info
    /// taken out.
    pub(crate) fn resolve(
        &self,
        path_or_url: &str,
    ) -> Result<(Url, Option<SecretString>), ForgeInputError> {
        resolve(&self.inner.base, path_or_url)
    }

    /// The URL of an API path made of `segments` (each percent-encoded).
    pub(crate) fn api_url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut p) = url.path_segments_mut() {
            p.pop_if_empty().extend(segments);
        }
        url
    }

    /// Hold a pass through `url`'s host's write gate for the requests of
    /// one attempt (see [`Wire::hold_write_gate`]).
    pub(crate) fn hold_write_gate(
        &self,
        url: &Url,
        deadline: Instant,
        ctx: &AttemptCtx<'_>,
    ) -> Result<Arc<crate::gate::Permit>, AttemptError> {
        self.inner
            .wire
            .hold_write_gate(url, deadline, ctx.cancel_flag(), Some(ctx.facts()))
    }

    /// As [`Self::attempt_exchange_until`], under a pass through the gate
    /// the attempt already holds ([`Self::hold_write_gate`]).
    pub(crate) fn attempt_exchange_held(
        &self,
        ctx: &mut AttemptCtx<'_>,
        p: &Prepared<'_>,
        last_cred: &RefCell<Option<Credential>>,
        deadline: Instant,
        permit: &Arc<crate::gate::Permit>,
    ) -> Result<Answer, AttemptError> {
        // Checked before every request: a token within its refresh margin
        // of expiring is replaced before it is sent.
        let cred = ctx.credential_for_request().cloned();
        last_cred.replace(cred.clone());
        let cancel = ctx.cancel_flag().clone();
        ctx.entering(ForgePhase::RequestSent.as_str());
        let facts = ctx.facts().clone();
        let headers = ctx.headers().to_vec();
        let r = self.inner.wire.exchange_held(
            p,
            deadline,
            &cancel,
            &mut |ph| ctx.reached(ph.as_str()),
            Arc::clone(permit),
            ForCall {
                credential: cred.as_ref(),
                facts: Some(&facts),
                headers: &headers,
            },
        );
        noted(ctx, r)
    }

    /// Send one request and read its whole answer (see [`Wire::exchange`]).
    pub(crate) fn exchange(
        &self,
        p: &Prepared<'_>,
        deadline: Instant,
        cancel: &sluice_policy::CancelFlag,
        reached: &mut dyn FnMut(ForgePhase),
        call: ForCall<'_>,
    ) -> Result<Answer, AttemptError> {
        self.inner.wire.exchange(p, deadline, cancel, reached, call)
    }

    pub(crate) fn observed(key: &str, value: impl Into<String>) -> BTreeMap<String, String> {
        BTreeMap::from([(key.to_string(), value.into())])
    }
}

/// An exchange's answer noted in the attempt's facts: the request id of an
/// answered request (a success or a failure with a status), which the
/// attempt's record keeps (the last answered request's).
fn noted(ctx: &AttemptCtx<'_>, r: Result<Answer, AttemptError>) -> Result<Answer, AttemptError> {
    match &r {
        Ok(a) => ctx.facts().answered(a.request_id.clone()),
        Err(e) => {
            if let Some(f) = e.source_as::<ForgeFailure>() {
                if f.status().is_some() {
                    ctx.facts().answered(f.request_id().map(str::to_string));
                }
            }
        }
    }
    r
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
                let f = ForgeFailure::Credential {
                    error: crate::error::CredentialError::of(c),
                };
                e.source = Some(Arc::new(f));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
