//! The client value and its read operations: ls-refs and fetch.

use std::sync::Arc;
use std::time::Duration;

use gix::bstr::{BString, ByteSlice};
use gix::protocol::handshake::Ref;
use gix::protocol::transport::{Protocol, Service};
use gix::ObjectId;
use sluice_policy::{
    AttemptCtx, Bounds, CancelFlag, CredentialSource, Effect, Operation, Outcome, Policy,
    StaticSource,
};

use crate::connect::{Dial, Meta, Session};
use crate::error::{GitError, Phase};
use crate::remote::{BadUrl, Remote, TransportKind};

/// A caller's progress callback.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// What a caller gives one call besides its arguments.
#[derive(Clone)]
pub struct CallOptions {
    /// Deadline, attempt timeout, attempts, backoff (default: the `command` profile).
    pub bounds: Bounds,
    /// The operation id (generated when `None`); a claimed id is rejected.
    pub id: Option<String>,
    /// Where http(s) credentials are bought; user info in the URL is used
    /// when this is `None`.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// The caller's cancel flag.
    pub cancel: CancelFlag,
    /// Called with fetch and push progress.
    pub progress: Option<ProgressCallback>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            bounds: Bounds::default(),
            id: None,
            credentials: None,
            cancel: CancelFlag::new(),
            progress: None,
        }
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("bounds", &self.bounds)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Progress of a fetch or push.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// What is happening (`receiving`, `counting`, `sending`, or the remote's own words).
    pub stage: String,
    /// Objects handled so far.
    pub objects: u64,
    /// Bytes moved so far.
    pub bytes: u64,
}

/// A ref as the remote advertised it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteRef {
    /// The full name (`HEAD`, `refs/heads/main`).
    pub name: String,
    /// The object it points to; `None` when unborn.
    pub oid: Option<ObjectId>,
    /// For an annotated tag, the object the tag points to.
    pub peeled: Option<ObjectId>,
    /// For a symbolic ref, its target.
    pub symref_target: Option<String>,
}

/// One ref a fetch brought.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRef {
    /// The remote's ref name.
    pub remote_ref: String,
    /// The local ref the refspec mapped it to, if any.
    pub local_ref: Option<String>,
    /// The object fetched (for a pruned ref: the value the deleted ref had).
    pub oid: ObjectId,
    /// The local ref's value before the fetch (`None`: it did not exist, or
    /// there is no local ref).
    pub old: Option<ObjectId>,
    /// What happened to the local ref (git's rules: an unforced refspec
    /// fast-forwards only, a tag is not moved unless forced, the checked-out
    /// branch of a non-bare repository is not written).
    pub status: crate::FetchStatus,
    /// Why it was rejected, in git's words (`None` unless rejected).
    pub reason: Option<String>,
}

impl FetchedRef {
    /// Whether the local ref was left alone because git's rules refuse the
    /// update.
    pub fn is_rejected(&self) -> bool {
        self.status == crate::FetchStatus::Rejected
    }
}

/// Input refused before any call to the remote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A URL that is not a usable remote.
    #[error(transparent)]
    Url(#[from] BadUrl),
    /// A refspec that does not parse.
    #[error("invalid refspec {spec:?}: {reason}")]
    Refspec {
        /// The refspec.
        spec: String,
        /// Why.
        reason: String,
    },
    /// A ref prefix with a glob (prefixes are literal).
    #[error("invalid prefix {0:?}: a prefix is literal and may not contain '*'")]
    Prefix(String),
    /// A ref name that is not a full, valid ref name.
    #[error("invalid ref name {name:?}: {reason}")]
    RefName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A source revision not found in the local repository.
    #[error("cannot resolve {rev:?} in the local repository: {reason}")]
    Revision {
        /// The revision.
        rev: String,
        /// Why.
        reason: String,
    },
    /// The same destination twice, or no update at all.
    #[error("invalid push: {0}")]
    Push(String),
}

/// The git client: ls-refs, fetch and push under one [`Policy`].
///
/// `Send + Sync`; share one value (its policy holds the per-host retry
/// budgets, its HTTP clients the kept-alive connections).
#[derive(Clone)]
pub struct GitClient {
    pub(crate) policy: Arc<Policy>,
    pub(crate) http: LazyHttp,
    pub(crate) http_write: LazyHttp,
    pub(crate) agent: String,
    pub(crate) git_program: std::path::PathBuf,
    /// HTTP remotes seen speaking protocol v2 lately (one-request ls-refs).
    pub(crate) v2_http: Arc<crate::lsrefs_http::V2Remotes>,
    pub(crate) advert_cap: u64,
}

impl std::fmt::Debug for GitClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitClient")
            .field("policy", &self.policy)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

pub(crate) fn no_auth(
    _: gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>> {
    Ok(None)
}

pub(crate) fn error_text(e: &gix::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    crate::remote::redact(&s)
}

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

/// A reqwest client made on first use: building one loads the platform's
/// trust roots (once per process) and starts a runtime thread, which a
/// client that only speaks git://, ssh:// or file:// never needs. Clones
/// share it.
#[derive(Clone)]
pub(crate) struct LazyHttp {
    cell: Arc<std::sync::OnceLock<Result<HttpClient, String>>>,
    https: Arc<sluice_https::HttpsConfig>,
    write: bool,
}

impl LazyHttp {
    fn new(write: bool, https: Arc<sluice_https::HttpsConfig>) -> Self {
        LazyHttp {
            cell: Arc::default(),
            https,
            write,
        }
    }

    /// The client; writes get one that keeps no idle connections (a POST
    /// is never resent on a stale pooled connection). An error is local
    /// trouble (an unreadable `SSL_CERT_FILE`, a proxy reqwest refuses).
    pub(crate) fn get(&self) -> Result<&HttpClient, String> {
        self.cell
            .get_or_init(|| {
                let proxies = self.https.proxies();
                let mut b = self
                    .https
                    .client_builder_with(proxies.clone())
                    .map_err(|e| e.to_string())?
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
                let client = b
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                Ok(HttpClient {
                    client,
                    proxies: Arc::new(proxies),
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl GitClient {
    /// A client under `policy`.
    pub fn new(policy: Arc<Policy>) -> Self {
        GitClient {
            policy,
            http: LazyHttp::new(false, Arc::default()),
            http_write: LazyHttp::new(true, Arc::default()),
            agent: format!("sluice-remote/{}", env!("CARGO_PKG_VERSION")),
            git_program: "git".into(),
            v2_http: Default::default(),
            advert_cap: crate::wire::ADVERT_CAP,
        }
    }

    /// The most this client reads from a server before its request is
    /// complete (the advertisement, and for v0/v1 the ref listing itself);
    /// 64 MiB by default, about a million refs. A server that sends more is
    /// refused: the call is `answered`, not retried.
    pub fn with_advertisement_limit(mut self, bytes: u64) -> Self {
        self.advert_cap = bytes.max(1024);
        self
    }

    /// The https settings of http(s) remotes: trust roots added to the
    /// platform's (`--ca-file`) and the proxy (`--proxy`, `--no-proxy`).
    /// The default is [`sluice_https::HttpsConfig::new`]: the platform's
    /// roots (or `SSL_CERT_FILE`'s) and proxies from the environment.
    /// Connections already open are not reused by the new settings.
    pub fn with_https(mut self, https: sluice_https::HttpsConfig) -> Self {
        let https = Arc::new(https);
        self.http = LazyHttp::new(false, Arc::clone(&https));
        self.http_write = LazyHttp::new(true, https);
        self
    }

    /// The git program spawned as the server of `file://` remotes
    /// (`<program> upload-pack <dir>`, `<program> receive-pack <dir>`);
    /// `git` on the PATH by default.
    pub fn with_git_program(mut self, program: impl Into<std::path::PathBuf>) -> Self {
        self.git_program = program.into();
        self
    }

    /// The policy every call runs under.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    pub(crate) fn operation(
        &self,
        kind: &str,
        effect: Effect,
        remote: &Remote,
        opts: &CallOptions,
    ) -> Operation {
        let mut op = Operation::new(kind, effect, remote.display.clone())
            .bounds(opts.bounds)
            .cancel(opts.cancel.clone());
        op.host = remote.host();
        if let Some(id) = &opts.id {
            op = op.id(id.clone());
        }
        if remote.kind == TransportKind::Http {
            if let Some(c) = &opts.credentials {
                op = op.credentials(Arc::clone(c));
            } else if let Some(p) = &remote.password {
                op = op.credentials(Arc::new(StaticSource::new(p.clone())));
            }
        }
        op
    }

    pub(crate) fn dial<'a>(
        &'a self,
        remote: &'a Remote,
        service: Service,
        version: Protocol,
        ctx: &'a AttemptCtx<'_>,
        write: bool,
    ) -> Dial<'a> {
        Dial {
            remote,
            service,
            version,
            timeout: ctx.timeout,
            limit: ctx.limit,
            cancel: ctx.cancel_flag(),
            secret: ctx.credential().map(|c| c.secret()),
            http_client: if write { &self.http_write } else { &self.http },
            git_program: &self.git_program,
            advert_cap: self.advert_cap,
            ssh_config: None,
        }
    }

    /// List the remote's refs (protocol v2 `ls-refs` where offered, the
    /// v0/v1 advertisement otherwise), with peeled tags and symrefs.
    ///
    /// `prefixes` are literal (`refs/heads/`); empty lists everything.
    pub fn ls_refs(
        &self,
        url: &str,
        prefixes: &[String],
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<RemoteRef>>, InputError> {
        let remote = Remote::parse(url)?;
        for p in prefixes {
            if p.contains('*') {
                return Err(InputError::Prefix(p.clone()));
            }
        }
        let op = self.operation("ls-refs", Effect::Read, &remote, opts);
        Ok(self.policy.run(op, |ctx| {
            crate::error::shielded(ctx, |ctx| self.ls_refs_attempt(&remote, prefixes, ctx))
                .map_err(|e| e.to_attempt())
        }))
    }

    pub(crate) fn ls_refs_attempt(
        &self,
        remote: &Remote,
        prefixes: &[String],
        ctx: &mut AttemptCtx<'_>,
    ) -> Result<Vec<RemoteRef>, GitError> {
        let refs = self.ls_refs_once(
            remote,
            prefixes,
            ctx.timeout,
            ctx.cancel_flag(),
            ctx.credential().map(|c| c.secret()),
        )?;
        ctx.reached(Phase::Done.as_str());
        Ok(refs)
    }

    /// One ls-refs conversation, outside any policy (settling reads call it
    /// under the push's budget).
    pub(crate) fn ls_refs_once(
        &self,
        remote: &Remote,
        prefixes: &[String],
        timeout: Duration,
        cancel: &CancelFlag,
        secret: Option<&secrecy::SecretString>,
    ) -> Result<Vec<RemoteRef>, GitError> {
        // A listing moves no pack: its limit is its timeout.
        let dial = |timeout| Dial {
            remote,
            service: Service::UploadPack,
            version: Protocol::V2,
            timeout,
            limit: timeout,
            cancel,
            secret,
            http_client: &self.http,
            git_program: &self.git_program,
            advert_cap: self.advert_cap,
            ssh_config: None,
        };
        let mut timeout = timeout;
        let http = remote.kind == TransportKind::Http;
        if let Some(unborn) = http.then(|| self.v2_http.get(&remote.display)).flatten() {
            let started = std::time::Instant::now();
            match crate::lsrefs_http::ls_refs(dial(timeout), prefixes, &self.agent, unborn) {
                Ok(refs) => return Ok(refs),
                Err(miss) => {
                    self.v2_http.forget(&remote.display);
                    match miss {
                        crate::lsrefs_http::Miss::Failed(e) => return Err(e),
                        crate::lsrefs_http::Miss::NotAListing(why) => {
                            tracing::debug!(remote = %remote.display, why = %why, "one-request ls-refs missed; asking the long way");
                            timeout = timeout.saturating_sub(started.elapsed());
                        }
                    }
                }
            }
        }
        let mut s = Session::open(dial(timeout))?;
        let hs = gix::protocol::handshake(
            &mut s.transport,
            Service::UploadPack,
            no_auth,
            Vec::new(),
            &mut gix::progress::Discard,
        )
        .map_err(|e| read_fail(&s.meta, &error_text(&e)))?;
        if http && hs.server_protocol_version == Protocol::V2 {
            let unborn = hs
                .capabilities
                .capability("ls-refs")
                .and_then(|c| c.supports("unborn"))
                .unwrap_or(false);
            self.v2_http.put(&remote.display, unborn);
        }
        let refs = match hs.refs {
            Some(refs) => refs
                .into_iter()
                .filter(|r| {
                    prefixes.is_empty() || {
                        let name = r.unpack().0.to_str_lossy();
                        prefixes.iter().any(|p| name.starts_with(p.as_str()))
                    }
                })
                .collect(),
            None => {
                let pfx = if prefixes.is_empty() {
                    None
                } else {
                    let mut p = gix::protocol::ls_refs::RefPrefixes::new();
                    p.extend(prefixes.iter().map(|s| BString::from(s.as_str())));
                    Some(p)
                };
                gix::protocol::LsRefsCommand::new(
                    pfx,
                    &hs.capabilities,
                    ("agent", Some(self.agent.clone())),
                )
                .invoke_blocking(&mut s.transport, &mut gix::progress::Discard, false)
                .map_err(|e| read_fail(&s.meta, &error_text(&e)))?
            }
        };
        Ok(refs.into_iter().map(remote_ref).collect())
    }

    /// Fetch `refspecs` from `url` into `repo`: negotiates with what `repo`
    /// has, stores the pack, updates the local refs the refspecs name, and
    /// returns the tips fetched.
    pub fn fetch(
        &self,
        url: &str,
        refspecs: &[String],
        repo: &gix::Repository,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        self.fetch_with(url, refspecs, repo, &crate::FetchOptions::default(), opts)
    }

    /// [`GitClient::fetch`] with `git fetch`'s `--prune`, `--tags` and
    /// `--no-tags` ([`crate::FetchOptions`]). Pruned refs are reported
    /// before the fetched ones, as git prints them, status [`crate::FetchStatus::Pruned`], with
    /// `oid` and `old` the value the deleted ref had.
    pub fn fetch_with(
        &self,
        url: &str,
        refspecs: &[String],
        repo: &gix::Repository,
        fetch: &crate::FetchOptions,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        let remote = Remote::parse(url)?;
        if refspecs.is_empty() {
            return Err(InputError::Refspec {
                spec: String::new(),
                reason: "at least one refspec is needed".into(),
            });
        }
        for spec in refspecs {
            gix::refspec::parse(
                spec.as_bytes().as_bstr(),
                gix::refspec::parse::Operation::Fetch,
            )
            .map_err(|e| InputError::Refspec {
                spec: spec.clone(),
                reason: e.to_string(),
            })?;
        }
        // gix's prefix derivation turns `refs/*` into the literal prefix
        // `refs/*`, which a server matches literally (0 refs): filter locally
        // for such catch-all specs.
        let prefix_filter = !refspecs.iter().any(|s| {
            let src = s.trim_start_matches('+');
            let src = src.split(':').next().unwrap_or(src);
            src.starts_with("refs/*") || src == "*" || src.starts_with('*')
        });
        let op = self.operation("fetch", Effect::Read, &remote, opts);
        // A ref refused by git's rules is the fetch's answer (exit 1), the
        // others still updated: decided by the policy, so its events say so.
        Ok(self.policy.run_judged(
            op,
            |ctx| {
                crate::error::shielded(ctx, |ctx| {
                    self.fetch_attempt(&remote, refspecs, prefix_filter, repo, fetch, opts, ctx)
                })
                .map_err(|e| e.to_attempt())
            },
            |refs: &Vec<FetchedRef>| {
                let r = refs.iter().find(|r| r.is_rejected())?;
                Some(sluice_policy::Rejection {
                    error: sluice_policy::AttemptError::answered(
                        Phase::Done.as_str(),
                        format!(
                            "{} -> {}: {}",
                            r.remote_ref,
                            r.local_ref.as_deref().unwrap_or("?"),
                            r.reason.as_deref().unwrap_or("rejected")
                        ),
                    ),
                    may_have_applied: false,
                })
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn fetch_attempt(
        &self,
        remote: &Remote,
        refspecs: &[String],
        prefix_filter: bool,
        repo: &gix::Repository,
        fetch: &crate::FetchOptions,
        opts: &CallOptions,
        ctx: &mut AttemptCtx<'_>,
    ) -> Result<Vec<FetchedRef>, GitError> {
        let local = |detail: String| GitError::Local {
            phase: Phase::Connect,
            detail,
        };
        // gix's object store has a fixed number of pack slots, sized when
        // the repository was opened (1.1× the packs then on disk, at least
        // 32), and every fetch adds a pack: a handle kept open runs out of
        // slots and no longer sees new packs (the soak's fetches failed in
        // negotiation once a repository held 33). The fetch works on a view
        // opened now, sized for the packs on disk.
        let fresh = fresh_view(repo).map_err(local)?;
        let repo = &fresh;
        let mut dial = self.dial(remote, Service::UploadPack, Protocol::V2, ctx, false);
        dial.ssh_config = ssh_config(remote, repo);
        let mut s = Session::open(dial)?;
        let gremote = repo
            .remote_at_without_url_rewrite(remote.url.to_bstring().as_bstr())
            .map_err(|e| local(error_text(&e)))?
            .with_refspecs(
                refspecs.iter().map(|s| s.as_bytes().as_bstr()),
                gix::remote::Direction::Fetch,
            )
            .map_err(|e| local(error_text(&e)))?;
        let mut hs = gix::protocol::handshake(
            &mut s.transport,
            Service::UploadPack,
            no_auth,
            Vec::new(),
            &mut gix::progress::Discard,
        )
        .map_err(|e| read_fail(&s.meta, &error_text(&e)))?;
        let tags = fetch.tags.to_gix();
        let context = gix::protocol::fetch::refmap::init::Context {
            fetch_refspecs: gremote.refspecs(gix::remote::Direction::Fetch).to_vec(),
            extra_refspecs: tags
                .to_refspec()
                .map(|s| s.to_owned())
                .into_iter()
                .collect(),
        };
        let mut ref_map = hs
            .prepare_lsrefs_or_extract_refmap(
                ("agent", Some(self.agent.clone())),
                prefix_filter,
                context,
            )
            .and_then(|m| m.fetch_blocking(gix::progress::Discard, &mut s.transport, false))
            .map_err(|e| read_fail(&s.meta, &error_text(&e)))?;
        ctx.reached(Phase::Advertised.as_str());
        // A refspec naming one ref (no glob, not an object id) whose ref the
        // remote did not advertise is the remote's answer, as git's
        // "couldn't find remote ref": asking again gets the same list.
        for (i, spec) in gremote
            .refspecs(gix::remote::Direction::Fetch)
            .iter()
            .enumerate()
        {
            let gix::refspec::Instruction::Fetch(
                gix::refspec::instruction::Fetch::Only { src }
                | gix::refspec::instruction::Fetch::AndUpdate { src, .. },
            ) = spec.to_ref().instruction()
            else {
                continue;
            };
            let exact =
                src.find_byteset(b"*?[]\\").is_none() && ObjectId::from_hex(src.as_ref()).is_err();
            let matched = ref_map.mappings.iter().any(|m| {
                m.spec_index == gix::protocol::fetch::refmap::SpecIndex::ExplicitInRemote(i)
            });
            if exact && !matched {
                return Err(GitError::NotAdvertised {
                    phase: Phase::Advertised,
                    name: src.to_string(),
                });
            }
        }
        if ref_map.object_hash != repo.object_hash() {
            return Err(GitError::Unsupported {
                phase: Phase::Advertised,
                detail: format!(
                    "the remote uses {} object ids, the local repository {}",
                    ref_map.object_hash,
                    repo.object_hash()
                ),
            });
        }
        let guard = crate::fetch::indexer::EntryGuard::new();
        let received = crate::fetch::receive(
            repo,
            &mut hs,
            &mut s.transport,
            &ref_map,
            tags,
            &self.agent,
            crate::progress::Sink::new(opts.progress.clone()),
            ctx.cancel_flag().as_atomic(),
            &guard,
        );
        if hs.server_protocol_version == Protocol::V2 {
            gix::protocol::indicate_end_of_interaction(&mut s.transport, false).ok();
        }
        let received = received.map_err(|e| {
            let e = match e {
                // The disk or the object store: this side's, never retried.
                crate::fetch::ReceiveError::Local(why) => {
                    return crate::local::local(Phase::Negotiated, why);
                }
                crate::fetch::ReceiveError::Wire(e) => e,
            };
            // A pack entry no valid pack holds (bug D2): the server's fault,
            // stopped as it arrived; asking again gets the same pack.
            if let Some(why) = guard.tripped.borrow().clone() {
                return GitError::BadPack {
                    phase: Phase::Negotiated,
                    detail: why,
                };
            }
            if unsupported_before_request(&s.meta, &e) {
                return GitError::Unsupported {
                    phase: Phase::Advertised,
                    detail: error_text(&e),
                };
            }
            read_fail(&s.meta, &error_text(&e))
        })?;
        // Following tags (git's default): a tag comes along only when what
        // it points to is here now — the history fetched reached it, or the
        // server sent the tag object with `include-tag`. A tag on history
        // nothing fetched is not written (its object is not here).
        if fetch.tags == crate::TagMode::Follow {
            ref_map.mappings.retain(|m| {
                !matches!(
                    m.spec_index,
                    gix::protocol::fetch::refmap::SpecIndex::Implicit(_)
                ) || m.remote.as_id().is_some_and(|id| repo.has_object(id))
            });
        }
        let mut mappings: Vec<_> = ref_map
            .mappings
            .iter()
            .filter_map(|m| {
                let oid = m.remote.as_id()?.to_owned();
                let name = match &m.remote {
                    gix::protocol::fetch::refmap::Source::Ref(r) => r.unpack().0.to_string(),
                    gix::protocol::fetch::refmap::Source::ObjectId(id) => id.to_string(),
                };
                Some(FetchedRef {
                    remote_ref: name,
                    local_ref: m.local.as_ref().map(|l| l.to_string()),
                    oid,
                    old: None,
                    status: crate::FetchStatus::UpToDate,
                    reason: None,
                })
            })
            .collect();
        // The refs and the .keep, classed as before when gix did them inside
        // its receive: from the wire.
        // The pack is stored; what is left is this side's: a ref that
        // cannot be written is a local error, never the remote's.
        // Pruning goes first, as git's does: a stale `origin/a` must not
        // stand in the way of a new `origin/a/b`.
        let pruned = if fetch.prune {
            crate::fetch::prune_refs(
                repo,
                &ref_map,
                gremote.refspecs(gix::remote::Direction::Fetch),
            )
            .map_err(|e| GitError::Local {
                phase: Phase::PackReceived,
                detail: format!("pruning the local refs: {}", error_text(&e)),
            })?
        } else {
            Vec::new()
        };
        let outcomes = crate::fetch::update_refs(repo, &ref_map).map_err(|e| GitError::Local {
            phase: Phase::PackReceived,
            detail: format!("updating the local refs: {}", error_text(&e)),
        })?;
        for (m, o) in mappings.iter_mut().zip(outcomes) {
            m.old = o.old;
            m.status = o.status;
            m.reason = o.reason;
        }
        // Pruned refs first, as git prints them.
        let mappings: Vec<FetchedRef> = pruned
            .into_iter()
            .map(|p| FetchedRef {
                remote_ref: p.remote,
                local_ref: Some(p.local),
                oid: p.old,
                old: Some(p.old),
                status: crate::FetchStatus::Pruned,
                reason: None,
            })
            .chain(mappings)
            .collect();
        if let Some(keep) = &received.keep {
            match std::fs::remove_file(keep) {
                // Another fetch that received the same pack into this
                // repository removed it once its refs pointed into it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(crate::local::local(
                        Phase::PackReceived,
                        format_args!("cannot remove {}: {e}", keep.display()),
                    ))
                }
                Ok(()) => {}
            }
        }
        if received.pack {
            let (objects, bytes) = (received.objects, received.bytes);
            tracing::debug!(objects, bytes, remote = %remote.display, "fetch received a pack");
            if let Some(cb) = &opts.progress {
                cb(&crate::Progress {
                    stage: "received".into(),
                    objects,
                    bytes,
                });
            }
            ctx.reached(Phase::PackReceived.as_str());
        }
        ctx.reached(Phase::Done.as_str());
        Ok(mappings)
    }
}

/// `core.sshCommand` as `repo` reads it (its own, global and system
/// configuration), for an ssh remote; for any other, nothing is read.
pub(crate) fn ssh_config(remote: &Remote, repo: &gix::Repository) -> Option<Option<String>> {
    (remote.kind == TransportKind::Ssh).then(|| {
        repo.config_snapshot()
            .string("core.sshCommand")
            .map(|v| v.to_string())
    })
}

/// A view of `repo` opened now, with the caller's options: it sees every
/// pack on disk, however many have landed (or been repacked away by `git
/// gc`) since the caller opened its handle. gix's object store sizes its
/// pack slots when a repository is opened (1.1× the packs then on disk, at
/// least 32), so a handle kept open for days stops seeing new packs; each
/// fetch and push attempt works on a view of its own (about a millisecond;
/// see BENCHMARKS.md).
pub(crate) fn fresh_view(repo: &gix::Repository) -> Result<gix::Repository, String> {
    gix::open_opts(repo.git_dir(), repo.open_options().clone())
        .map_err(|e| format!("reopening the repository: {}", error_text(&e)))
}

/// gix refused to go on after reading a whole advertisement, before writing
/// the request, because the server lacks what it needs (v0/v1 without
/// `multi_ack_detailed` or side-band): the advertisement is the remote's
/// answer, and asking again gets the same one. Decided from gix's typed
/// classification and the wire, not from the message.
fn unsupported_before_request(s: &Meta, e: &(dyn std::error::Error + 'static)) -> bool {
    let st = s.wire.lock();
    st.advertised
        && !st.request_complete
        && !st.timed_out
        && !st.cancelled
        && !st.garbled
        && gix_error::classify(e).is_unsupported()
}

/// Class a failed read from its wire.
pub(crate) fn read_fail(s: &Meta, detail: &str) -> GitError {
    let (phase, complete) = {
        let st = s.wire.lock();
        let phase = if st.fetch_sent {
            Phase::Negotiated
        } else if st.advertised {
            Phase::Advertised
        } else {
            Phase::Connect
        };
        (phase, st.request_complete)
    };
    s.fail(phase, complete, detail)
}

fn remote_ref(r: Ref) -> RemoteRef {
    match r {
        Ref::Peeled {
            full_ref_name,
            tag,
            object,
        } => RemoteRef {
            name: full_ref_name.to_string(),
            oid: Some(tag),
            peeled: Some(object),
            symref_target: None,
        },
        Ref::Direct {
            full_ref_name,
            object,
        } => RemoteRef {
            name: full_ref_name.to_string(),
            oid: Some(object),
            peeled: None,
            symref_target: None,
        },
        Ref::Symbolic {
            full_ref_name,
            target,
            tag,
            object,
        } => RemoteRef {
            name: full_ref_name.to_string(),
            oid: Some(tag.unwrap_or(object)),
            peeled: tag.map(|_| object),
            symref_target: Some(target.to_string()),
        },
        Ref::Unborn {
            full_ref_name,
            target,
        } => RemoteRef {
            name: full_ref_name.to_string(),
            oid: None,
            peeled: None,
            symref_target: Some(target.to_string()),
        },
    }
}
