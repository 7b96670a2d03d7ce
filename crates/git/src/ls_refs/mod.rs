//! ls-refs: the remote's refs, listed (protocol v2 `ls-refs` where offered,
//! the v0/v1 advertisement otherwise), as an operation under the policy and
//! as the one conversation a push's settling read holds.
//!
//! Over HTTP a remote seen speaking v2 lately is asked in one POST
//! ([`one_request`]); anything unexpected there goes the long way in the
//! same attempt: gix-protocol's handshake, then its `LsRefsCommand`.

#[cfg(feature = "http")]
pub(crate) mod one_request;

use std::time::Duration;

use gix::bstr::{BString, ByteSlice};
#[cfg(feature = "http")]
use gix::protocol::transport::Protocol;
use gix::protocol::transport::Service;
use sluice_policy::{CancelFlag, Effect, Outcome};

use crate::attempt::{shielded, Attempt};
use crate::client::{no_auth, GitClient};
use crate::connect::{Dial, Session};
use crate::error::{GitError, GitPhase};
#[cfg(feature = "http")]
use crate::http::v2_remotes::SeenV2;
use crate::input::InputError;
use crate::remote::Remote;
#[cfg(feature = "http")]
use crate::remote::TransportKind;
use crate::remote_ref::RemoteRef;
#[cfg(feature = "http")]
use one_request::Miss;
use sluice_policy::CallOptions;

impl GitClient {
    /// List the remote's refs (protocol v2 `ls-refs` where offered, the
    /// v0/v1 advertisement otherwise), with peeled tags and symrefs.
    ///
    /// `prefixes` are literal (`refs/heads/`); empty lists everything.
    ///
    /// git's configuration for the URL (`http.extraHeader`, credential
    /// helpers, askpass) is read from the system and global files: this
    /// runs outside any repository ([`GitClient::ls_refs_in`] reads a
    /// repository's).
    pub fn ls_refs(
        &self,
        url: &str,
        prefixes: &[String],
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<RemoteRef>>, InputError> {
        self.ls_refs_in(url, prefixes, None, opts)
    }

    /// [`GitClient::ls_refs`] run in `repo` (when given): git's
    /// configuration for the URL is the repository's, as fetch and push
    /// read it.
    pub fn ls_refs_in(
        &self,
        url: &str,
        prefixes: &[String],
        repo: Option<&gix::Repository>,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<RemoteRef>>, InputError> {
        let mut remote = Remote::parse(url)?;
        let helpers = self.configure_http(&mut remote, repo);
        for p in prefixes {
            if p.contains('*') {
                return Err(InputError::Prefix(p.clone()));
            }
        }
        let op = self
            .operation("ls-refs", Effect::Read, &remote, opts, helpers)
            .refs(prefixes);
        Ok(remote.note_redirect(self.policy.run(op, |ctx| {
            shielded(ctx, |at| self.ls_refs_attempt(&remote, prefixes, at))
                .map_err(|e| e.to_attempt())
        })))
    }

    fn ls_refs_attempt(
        &self,
        remote: &Remote,
        prefixes: &[String],
        at: &mut Attempt<'_, '_>,
    ) -> Result<Vec<RemoteRef>, GitError> {
        let refs = self.ls_refs_once(
            remote,
            prefixes,
            at.timeout,
            at.cancel_flag(),
            (at.credential(), at.challenge()),
            (Some(at.facts()), at.headers()),
        )?;
        at.reached(GitPhase::Done);
        Ok(refs)
    }

    /// One ls-refs conversation, outside any policy (settling reads call it
    /// under the push's budget); `auth` the credential held and where one
    /// is bought when the remote asks; `call` the attempt's facts (when it
    /// is one) and the call's headers.
    pub(crate) fn ls_refs_once(
        &self,
        remote: &Remote,
        prefixes: &[String],
        timeout: Duration,
        cancel: &CancelFlag,
        auth: (
            Option<&sluice_policy::Credential>,
            Option<&sluice_policy::Challenge>,
        ),
        call: (Option<&sluice_policy::AttemptFacts>, &[(String, String)]),
    ) -> Result<Vec<RemoteRef>, GitError> {
        let (credential, challenge) = auth;
        let (facts, headers) = call;
        let dial = |timeout| {
            let mut d = self
                .connector
                .listing(remote, timeout, cancel, credential, headers);
            d.facts = facts.cloned();
            d.challenge = challenge.cloned();
            d
        };
        #[cfg_attr(not(feature = "http"), allow(unused_mut))]
        let mut timeout = timeout;
        #[cfg(feature = "http")]
        // Without a credential yet, the remote may ask for one: the long
        // way's first request is a GET, sent again with the credential.
        let http = remote.kind == TransportKind::Http && challenge.is_none();
        #[cfg(feature = "http")]
        if let Some(seen) = http.then(|| self.v2_http.get(&remote.display)).flatten() {
            let started = std::time::Instant::now();
            // The POST goes where the remote redirected last time: the
            // operation is redirected there too.
            let before = remote.redirected_memo();
            if seen.base.is_some() {
                remote.set_redirected_memo(seen.base.clone());
            }
            match one_request::ls_refs(dial(timeout), prefixes, &self.agent, seen.unborn) {
                Ok(refs) => return Ok(refs),
                Err(miss) => {
                    self.v2_http.forget(&remote.display);
                    // The long way starts where the operation stood.
                    remote.set_redirected_memo(before);
                    match miss {
                        Miss::Failed(e) => return Err(e),
                        Miss::NotAListing(why) => {
                            tracing::debug!(remote = %remote.display, why = %why, "one-request ls-refs missed; asking the long way");
                            timeout = timeout.saturating_sub(started.elapsed());
                        }
                    }
                }
            }
        }
        self.ls_refs_long_way(dial(timeout), prefixes)
    }

    /// The handshake, then (v2) the `ls-refs` command; a v2 answer over
    /// HTTP is remembered for the one-request path.
    fn ls_refs_long_way(
        &self,
        dial: Dial<'_>,
        prefixes: &[String],
    ) -> Result<Vec<RemoteRef>, GitError> {
        #[cfg(feature = "http")]
        let remote = dial.remote;
        let mut s = Session::open(dial)?;
        let hs = gix::protocol::handshake(
            &mut s.transport,
            Service::UploadPack,
            no_auth,
            Vec::new(),
            &mut gix::progress::Discard,
        )
        .map_err(|e| s.meta.read_fail(sluice_policy::text::error_chain(&e)))?;
        crate::error::check_format(&s.meta.wire.lock(), GitPhase::Advertised)?;
        #[cfg(feature = "http")]
        if remote.kind == TransportKind::Http && hs.server_protocol_version == Protocol::V2 {
            let unborn = hs
                .capabilities
                .capability("ls-refs")
                .and_then(|c| c.supports("unborn"))
                .unwrap_or(false);
            let base = remote.redirected_memo();
            self.v2_http.put(&remote.display, SeenV2 { unborn, base });
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
                .map_err(|e| s.meta.read_fail(sluice_policy::text::error_chain(&e)))?
            }
        };
        Ok(refs.into_iter().map(RemoteRef::from_gix).collect())
    }
}
