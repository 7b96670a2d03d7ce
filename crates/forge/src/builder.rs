//! Building a [`ForgeClient`]: its HTTP stacks, gates, policy and
//! credentials ([`ForgeClientBuilder`]), and the client's constructors.

use std::sync::Arc;
use std::time::Duration;

use sluice_policy::{Bounds, CredentialSource, Policy, StaticSource};

use sluice_policy::text::error_chain;

#[cfg(feature = "app")]
use crate::app::GitHubAppSource;
use crate::base::{off_runtime, parse_base, split_user_info};
use crate::client::{Creds, ForgeClient, Inner};
use crate::error::ForgeError;
use crate::etag::ETags;
use crate::exchange::Wire;
use crate::gate::Gates;

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
    headers: Vec<(String, String)>,
}

impl ForgeClientBuilder {
    /// The REST API version asked for on every request
    /// (`X-GitHub-Api-Version`; default [`crate::API_VERSION`],
    /// 2022-11-28). A merge's settling read never depends on
    /// `merge_commit_sha` (which 2026-03-10 removes): the `merged` event's
    /// `commit_id` stands in.
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
    #[cfg(feature = "app")]
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

    /// Send the header `name: value` on every request of every call (a
    /// service's own request id, say), before a call's own
    /// ([`CallOptions::header`](sluice_policy::CallOptions::header)), to
    /// the call's host only — a GitHub App's token mint there included
    /// (see [`CredentialSource::credential_for`](sluice_policy::CredentialSource::credential_for)). A name the client sets itself
    /// (`Authorization`, `Host`, `Content-Length`, `Transfer-Encoding`,
    /// `X-GitHub-Api-Version`) or a header that is not one makes
    /// [`ForgeClientBuilder::build`] fail with [`ForgeError::Header`].
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Build the client. User info in the base URL is a static credential
    /// (the password, or the user name when there is no password), used
    /// when no source was set, and is removed from the URL.
    pub fn build(self) -> Result<ForgeClient, ForgeError> {
        for (name, value) in &self.headers {
            sluice_policy::check_header(name, value).map_err(ForgeError::Header)?;
        }
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
        let wire = Wire {
            // Reads follow redirects (reqwest drops the credential when
            // one leads to another host); writes never do.
            // Each built on a thread of its own: building the client
            // inside an async runtime never panics.
            read_http: off_runtime(|| build(reqwest::redirect::Policy::limited(10), true))?,
            write_http: off_runtime(|| build(reqwest::redirect::Policy::none(), false))?,
            gates: Gates::new(self.max_concurrent, self.write_spacing),
            proxies,
            etags: ETags::default(),
            api_version: self.api_version,
            headers: self.headers,
        };
        Ok(ForgeClient {
            inner: Arc::new(Inner {
                base,
                wire,
                shared_policy: self.policy.is_some(),
                policy: self.policy.unwrap_or_else(|| Arc::new(Policy::default())),
                creds,
                bounds: self.bounds,
                user_agent: self.user_agent,
            }),
        })
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
            api_version: crate::base::API_VERSION.to_string(),
            headers: Vec::new(),
        }
    }

    /// A client for `base_url` with the builder's defaults.
    pub fn new(base_url: &str) -> Result<Self, ForgeError> {
        Self::builder(base_url).build()
    }
}
