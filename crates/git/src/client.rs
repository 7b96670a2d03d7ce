//! The client value every operation runs on ([`GitClient`]), and what the
//! three operations share: the policy's operation for a call and gix's "no
//! credentials" callback.
//!
//! The operations themselves live in their own modules: `ls_refs`, `fetch`
//! and `push` each add their methods to [`GitClient`].

use std::sync::Arc;

use secrecy::SecretString;
use sluice_policy::{
    Bounds, CallOptions, Credential, CredentialSource, Effect, Operation, Policy, StaticSource,
};

use crate::connect::Connector;
use crate::credentials::{GitCredentials, HttpAuth};
#[cfg(feature = "http")]
use crate::http::v2_remotes::V2Remotes;
use crate::remote::{Remote, TransportKind};

/// The git client: ls-refs, fetch and push under one [`Policy`].
///
/// `Send + Sync`; share one value (its policy holds the per-host retry
/// budgets, its HTTP clients the kept-alive connections).
#[derive(Clone)]
pub struct GitClient {
    pub(crate) policy: Arc<Policy>,
    /// How sessions are opened: HTTP clients, the git program, the
    /// advertisement limit.
    pub(crate) connector: Connector,
    pub(crate) agent: String,
    /// HTTP remotes seen speaking protocol v2 lately (one-request ls-refs).
    #[cfg(feature = "http")]
    pub(crate) v2_http: Arc<V2Remotes>,
    /// The bounds of calls whose options name none.
    pub(crate) bounds: Bounds,
    /// Where http(s) credentials come from when a call names no source.
    pub(crate) credentials: Option<Arc<dyn CredentialSource>>,
}

impl std::fmt::Debug for GitClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitClient")
            .field("policy", &self.policy)
            .field("agent", &self.agent)
            .field("default_credentials", &self.credentials.is_some())
            .finish_non_exhaustive()
    }
}

/// gix's credential callback for a transport whose credentials are ours
/// (the `Authorization` header of our `Http`): it never has any.
pub(crate) fn no_auth(
    _: gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>> {
    Ok(None)
}

impl GitClient {
    /// A client under `policy`.
    pub fn new(policy: Arc<Policy>) -> Self {
        GitClient {
            policy,
            connector: Connector::new(),
            agent: format!("sluice-remote/{}", env!("CARGO_PKG_VERSION")),
            #[cfg(feature = "http")]
            v2_http: Default::default(),
            bounds: Bounds::default(),
            credentials: None,
        }
    }

    /// Buy credentials for http(s) remotes from this source when a call's
    /// [`CallOptions`] name none (as `ForgeClientBuilder::credentials`
    /// does for the forge): a GitHub App's installation tokens
    /// (`Arc<sluice_forge::GitHubAppSource>`), a token command. A call's
    /// own source overrides it; either overrides user info in the URL.
    /// Remotes that are not http(s) never use it.
    pub fn with_credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// The bounds of calls whose [`CallOptions`] name none (default: the
    /// `command` profile).
    pub fn with_bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The most this client reads from a server before its request is
    /// complete (the advertisement, and for v0/v1 the ref listing itself);
    /// 64 MiB by default, about a million refs. A server that sends more is
    /// refused: the call is `answered`, not retried.
    pub fn with_advertisement_limit(mut self, bytes: u64) -> Self {
        self.connector.advert_cap = bytes.max(1024);
        self
    }

    /// The https settings of http(s) remotes: trust roots added to the
    /// platform's (`--ca-file`) and the proxy (`--proxy`, `--no-proxy`).
    /// The default is [`sluice_https::HttpsConfig::new`]: the platform's
    /// roots (or `SSL_CERT_FILE`'s) and proxies from the environment.
    /// Connections already open are not reused by the new settings.
    /// (With the `https` feature.)
    #[cfg(feature = "https")]
    pub fn with_https(mut self, https: sluice_https::HttpsConfig) -> Self {
        self.connector.set_https(Arc::new(https));
        self
    }

    /// Send the header `name: value` on every http(s) request of every
    /// call, before a call's own ([`CallOptions::header`]), to the
    /// remote's host only (never after a redirect to another host), never
    /// to a proxy. git://, ssh:// and file:// remotes send none.
    ///
    /// # Errors
    ///
    /// [`sluice_policy::HeaderRefused`] for a name the client sets itself
    /// (`Authorization`, `Host`, `Content-Length`, `Transfer-Encoding`,
    /// `X-GitHub-Api-Version`) or a header that is not one.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, sluice_policy::HeaderRefused> {
        let (name, value) = (name.into(), value.into());
        sluice_policy::check_header(&name, &value)?;
        self.connector.headers.push((name, value));
        Ok(self)
    }

    /// The git program spawned as the server of `file://` remotes
    /// (`<program> upload-pack <dir>`, `<program> receive-pack <dir>`);
    /// `git` on the PATH by default.
    pub fn with_git_program(mut self, program: impl Into<std::path::PathBuf>) -> Self {
        self.connector.git_program = program.into();
        self
    }

    /// The policy every call runs under.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// What git's configuration adds to an http(s) `remote`: its
    /// `http.extraHeader` lines (kept on the remote, for every request) and
    /// git's credential helpers and askpass for it, read from `repo`'s
    /// configuration, else the system and global files. Nothing for other
    /// transports.
    pub(crate) fn configure_http(
        &self,
        remote: &mut Remote,
        repo: Option<&gix::Repository>,
    ) -> Option<Arc<GitCredentials>> {
        if remote.kind != TransportKind::Http {
            return None;
        }
        let mut url = remote.url.clone();
        url.set_user(remote.user.clone());
        let auth = HttpAuth::read(repo, &url);
        remote.extra_headers = auth.extra_headers;
        auth.helpers
    }

    /// The policy's operation for one call: its kind and effect, the
    /// remote's display form and host, the caller's bounds, id and cancel
    /// flag, and (http) where credentials come from, in git's order (see
    /// `credentials`): the call's source, else the client's, else user and
    /// password in the URL, else git's credential helpers and askpass
    /// (`helpers`), else a user name alone in the URL as a token — and
    /// none at all when an `http.extraHeader` is `Authorization`.
    pub(crate) fn operation(
        &self,
        kind: &str,
        effect: Effect,
        remote: &Remote,
        opts: &CallOptions,
        helpers: Option<Arc<GitCredentials>>,
    ) -> Operation {
        let mut op = opts.apply(
            Operation::new(kind, effect, remote.display.clone()),
            self.bounds,
        );
        op.host = remote.host();
        if remote.kind != TransportKind::Http || remote.has_authorization_header() {
            return op;
        }
        let user = remote.user.as_deref().unwrap_or("x-access-token");
        if let Some(c) = opts.credential_source().or(self.credentials.as_ref()) {
            op = op.credentials(Arc::clone(c));
        } else if let Some(p) = &remote.password {
            let c = Credential::new(p.clone()).with_user(user);
            op = op.credentials(Arc::new(StaticSource::of(c)));
        } else if let Some(h) = helpers {
            op = op.credentials(h);
        } else if let Some(token) = &remote.user {
            // `https://TOKEN@host`: GitHub's form.
            let c = Credential::new(SecretString::from(token.clone())).with_user("x-access-token");
            op = op.credentials(Arc::new(StaticSource::of(c)));
        }
        op
    }
}
