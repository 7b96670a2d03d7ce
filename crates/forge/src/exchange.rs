//! One HTTP exchange with the forge: the request built (the API's headers,
//! the credential as a bearer token, the ETag kept for a read), sent on a
//! thread of its own through the host's gate, its whole answer read, and a
//! failure described as a [`ForgeFailure`] classed by the forge's table.
//! Below the client: it knows the HTTP stacks, the gates and the kept
//! answers ([`Wire`]), never the policy.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
};
use reqwest::{Method, Url};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sluice_policy::{AttemptError, AttemptFacts, CancelFlag, Credential, Effect};

use sluice_policy::metric;
use sluice_policy::text::error_chain;

use crate::classify::{self, api_message, classify, documentation_url, Exchange};
use crate::error::{ForgeFailure, LocalCause};
use crate::etag::{ETags, Kept};
use crate::gate::{GateRefusal, Gates, Permit};
use crate::local;
use crate::phase::ForgePhase;

/// How often a read waiting for its answer looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(25);

/// The shortest wait at a write gate that is an event of the attempt's
/// span (the metric records every pass).
const GATE_EVENT: Duration = Duration::from_millis(1);

/// An HTTP answer: status and body text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// One HTTP request of an attempt, ready to send.
pub(crate) struct Prepared<'a> {
    pub(crate) method: Method,
    pub(crate) url: &'a Url,
    pub(crate) body: Option<&'a [u8]>,
}

/// What an operation gives each of its requests: the credential, where
/// the attempt notes its waits (none for a settling read), and the call's
/// own headers ([`sluice_policy::CallOptions::header`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct ForCall<'a> {
    /// The credential to send, if any.
    pub(crate) credential: Option<&'a Credential>,
    /// The attempt's facts.
    pub(crate) facts: Option<&'a AttemptFacts>,
    /// The call's headers, sent after the client's.
    pub(crate) headers: &'a [(String, String)],
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
    /// The request id of the answer the server sent (a `304`'s, not the
    /// kept answer's it stands for).
    pub(crate) request_id: Option<String>,
}

impl Answer {
    pub(crate) fn response(&self) -> HttpResponse {
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
            request_id: a.request_id.clone(),
        };
        classify::failed(f, effect, &a.headers, SystemTime::now())
    })
}

/// What every request of a client goes through: the two HTTP stacks
/// (reads follow redirects, writes never do and never reuse a kept-alive
/// connection), the per-host gates, the proxies (named in errors) and the
/// answers kept for conditional reads.
pub(crate) struct Wire {
    /// Reads: redirects followed (the credential dropped on another host).
    pub(crate) read_http: reqwest::blocking::Client,
    /// Writes: no redirect, no pooled connection.
    pub(crate) write_http: reqwest::blocking::Client,
    /// The concurrency cap and write pacing per host.
    pub(crate) gates: Gates,
    /// Which proxy each request goes through (named in its errors).
    pub(crate) proxies: sluice_https::Proxies,
    /// The answers kept for conditional reads.
    pub(crate) etags: ETags,
    /// The REST API version asked for (`X-GitHub-Api-Version`).
    pub(crate) api_version: String,
    /// The client's own headers for every request (checked when built).
    pub(crate) headers: Vec<(String, String)>,
}

impl Wire {
    /// Send one request and read its whole answer. A failure is described
    /// as a [`ForgeFailure`] and classed by the forge's table
    /// ([`classify::failed`]); a fully read answer is returned for [`judge`].
    ///
    /// The request runs on a helper thread holding the host's permit, so
    /// the caller can stop waiting when it cancels (the abandoned request
    /// ends by its own timeout): a read at once; a write at once too, its
    /// pass through the host's write gate given back then (the host's other
    /// writes need not wait for the abandoned thread), and it fails
    /// `unknown` after `request-sent`, to be settled by reading as any
    /// write without an answer is.
    pub(crate) fn exchange(
        &self,
        p: &Prepared<'_>,
        deadline: Instant,
        cancel: &CancelFlag,
        reached: &mut dyn FnMut(ForgePhase),
        call: ForCall<'_>,
    ) -> Result<Answer, AttemptError> {
        let effect = p.effect();
        let none = HeaderMap::new();
        let fail = |f: ForgeFailure, headers: &HeaderMap| {
            classify::failed(f, effect, headers, SystemTime::now())
        };
        let permit = self
            .pass_gate(p.url, effect, deadline, cancel, call.facts)
            .map_err(|f| fail(f, &none))?;
        self.exchange_held(p, deadline, cancel, reached, Arc::new(permit), call)
    }

    /// The headers a request carries beyond the API's: the client's, then
    /// the call's. Every request of an operation goes to its host (a list's
    /// next page on another host is refused).
    fn caller_headers<'h>(&'h self, call: &'h [(String, String)]) -> Vec<&'h (String, String)> {
        self.headers.iter().chain(call).collect()
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
        facts: Option<&AttemptFacts>,
    ) -> Result<Arc<Permit>, AttemptError> {
        self.pass_gate(url, Effect::Write, deadline, cancel, facts)
            .map(Arc::new)
            .map_err(|f| classify::failed(f, Effect::Write, &HeaderMap::new(), SystemTime::now()))
    }

    /// [`Self::exchange`] under a pass already held (`permit`), never
    /// passing the gate again (a second pass would wait on itself).
    pub(crate) fn exchange_held(
        &self,
        p: &Prepared<'_>,
        deadline: Instant,
        cancel: &CancelFlag,
        reached: &mut dyn FnMut(ForgePhase),
        permit: Arc<Permit>,
        call: ForCall<'_>,
    ) -> Result<Answer, AttemptError> {
        let effect = p.effect();
        let none = HeaderMap::new();
        let fail = |f: ForgeFailure, headers: &HeaderMap| {
            classify::failed(f, effect, headers, SystemTime::now())
        };
        let http = match effect {
            Effect::Read => &self.read_http,
            Effect::Write => &self.write_http,
        };
        let credential = call.credential;
        let fingerprint = credential.map(|c| c.fingerprint().to_string());
        // A read sends the ETag of the answer kept for it, if any.
        let kept = match effect {
            Effect::Read => self.etags.get(p.url.as_str(), fingerprint.as_deref()),
            Effect::Write => None,
        };
        let etag = kept.as_ref().map(|k| k.etag.as_str());
        let extra = self.caller_headers(call.headers);
        let request = build_request(
            http,
            p,
            credential,
            etag,
            deadline,
            &self.api_version,
            &extra,
        )
        .map_err(|f| fail(f, &none))?;
        let sent_at = Instant::now();
        // OpenTelemetry's names on the attempt's span (a settling read's
        // span has none of these fields: nothing is recorded there).
        let attempt_span = tracing::Span::current();
        attempt_span.record("http.request.method", p.method.as_str());
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
        attempt_span.record("http.response.status_code", i64::from(status));
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                let detail = error_chain(&e.without_url());
                tracing::debug!(
                    method = %p.method, url = %p.url, credential = ?fingerprint, status,
                    elapsed_ms = sent_at.elapsed().as_millis() as u64, error = %detail, "forge answer cut"
                );
                let request_id = sluice_https::request_id(&headers);
                let f = if (200..300).contains(&status) {
                    ForgeFailure::Cut {
                        status,
                        detail,
                        request_id,
                    }
                } else {
                    ForgeFailure::Status {
                        status,
                        message: detail,
                        documentation_url: None,
                        phase: ForgePhase::ResponseHeaders,
                        request_id,
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
            request_id: sluice_https::request_id(&headers),
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
                request_id: answer.request_id,
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
            self.etags.put(url.as_str(), fingerprint, k);
        }
        answer
    }

    /// Wait for a pass through `url`'s host's gate (the concurrency cap,
    /// and for a write the pacing) until `deadline`. A write's wait is
    /// recorded (`sluice_remote_gate_wait_seconds{host}`), is an event of
    /// the attempt's span, and is noted in the attempt's `facts`.
    fn pass_gate(
        &self,
        url: &Url,
        effect: Effect,
        deadline: Instant,
        cancel: &CancelFlag,
        facts: Option<&AttemptFacts>,
    ) -> Result<Permit, ForgeFailure> {
        let host = host_key(url);
        let started = Instant::now();
        let write = effect == Effect::Write;
        let passed = self.gates.acquire(&host, write, deadline, cancel);
        let waited = started.elapsed();
        if write {
            let host = sluice_policy::host_of(url.as_str());
            if passed.is_ok() {
                metric::gate_wait(&host, waited);
            }
            if let Some(f) = facts {
                f.waited(waited);
            }
            if waited >= GATE_EVENT {
                tracing::info!(
                    host = %host, waited_ms = waited.as_millis() as u64, passed = passed.is_ok(),
                    "held at the host's write gate"
                );
            }
        }
        passed.map_err(|r| ForgeFailure::NotSent {
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
        let proxy = self.proxies.named_for(url);
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
    extra: &[&(String, String)],
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
    // Checked when given (`sluice_policy::check_header`): names the client
    // sets itself are refused there.
    for (name, value) in extra {
        req = req.header(name.as_str(), value.as_str());
    }
    if let Some(c) = credential {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", c.secret().expose_secret()))
            // Ours, not the remote's: local-error, never retried.
            .map_err(|e| {
                local::failure(LocalCause::CredentialHeader {
                    fingerprint: c.fingerprint().to_string(),
                    source: e,
                })
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
    req.build()
        .map_err(|e| local::failure(LocalCause::request(e.without_url())))
}

/// Send `request` on a thread of its own holding `permit` until the
/// request has truly ended, and wait for its answer until `cancel` is
/// raised. A write abandoned on a cancel gives its pass back at once (the
/// thread keeps its clone of the `Arc`, which releases nothing more).
fn send(
    http: &reqwest::blocking::Client,
    request: reqwest::blocking::Request,
    permit: Arc<Permit>,
    effect: Effect,
    cancel: &CancelFlag,
) -> Result<Received, Unsent> {
    let (tx, rx) = mpsc::channel();
    let client = http.clone();
    let held = Arc::clone(&permit);
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
                if cancel.is_cancelled() {
                    if effect == Effect::Write {
                        held.release();
                    }
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
    fn a_credential_that_is_no_header_value_is_a_typed_local_failure() {
        let client = crate::ForgeClient::new("http://127.0.0.1:9/").expect("client");
        let http = &client.inner.wire.read_http;
        let url = Url::parse("http://127.0.0.1:9/").expect("url");
        let p = Prepared {
            method: Method::GET,
            url: &url,
            body: None,
        };
        let c = Credential::new(secrecy::SecretString::from("bad\ntoken"));
        let deadline = Instant::now() + Duration::from_secs(5);
        let f = build_request(
            http,
            &p,
            Some(&c),
            None,
            deadline,
            crate::base::API_VERSION,
            &[],
        )
        .expect_err("not a header");
        let ForgeFailure::Local { cause } = &f else {
            panic!("{f:?}")
        };
        assert!(
            matches!(&**cause, LocalCause::CredentialHeader { fingerprint, .. } if fingerprint == c.fingerprint()),
            "{cause:?}"
        );
        assert!(std::error::Error::source(&**cause).is_some());
        assert_eq!(
            f.to_string(),
            format!(
                "credential {} is not a valid HTTP header value",
                c.fingerprint()
            )
        );
        let e = classify::failed(f, Effect::Read, &HeaderMap::new(), SystemTime::now());
        assert_eq!(e.class, sluice_policy::Class::Local);
    }
}
