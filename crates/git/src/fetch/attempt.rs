//! The fetch as an operation: its input checks, the policy's judge (a ref
//! git's rules refuse is the fetch's answer), and one attempt in steps —
//! advertised (the handshake and the ref map), checked (every exact refspec
//! found, the same object format), received (negotiation and the pack
//! stored), refs written (pruned, then updated), finished (the `.keep`
//! gone, progress told).

use gix::bstr::ByteSlice;
use gix::protocol::fetch::refmap::{Source, SpecIndex};
use gix::protocol::fetch::RefMap;
use gix::protocol::transport::{Protocol, Service};
use gix::protocol::Handshake;
use gix::ObjectId;
use sluice_policy::text::error_chain;
use sluice_policy::{AttemptError, Effect, Outcome, Rejection};

use super::indexer::{EntryGuard, Limits};
use super::named::Named;
use super::{FetchOptions, FetchStatus, FetchedRef, ForMerge, Received, TagMode};
use crate::attempt::attempt_view;
use crate::attempt::{shielded, Attempt};
use crate::client::{no_auth, GitClient};
use crate::connect::{ssh_config, Meta, Session};
use crate::error::{GitError, GitPhase};
use crate::input::InputError;
use crate::local::LocalCause;
use crate::progress::{Progress, Sink};
use crate::remote::Remote;
use sluice_policy::CallOptions;

/// One fetch's arguments, as every attempt reads them.
struct FetchJob<'a> {
    remote: &'a Remote,
    refspecs: &'a [String],
    /// Whether the server may filter refs by the refspecs' prefixes (not
    /// for catch-all specs, whose derived prefix a server takes literally).
    prefix_filter: bool,
    repo: &'a gix::Repository,
    fetch: &'a FetchOptions,
    /// Which refs `FETCH_HEAD` marks for merge.
    for_merge: &'a ForMerge,
    /// The first refspec as given (`FETCH_HEAD`'s configured rule).
    first_given: Option<gix::refspec::RefSpec>,
    /// A named remote's `fetch` lines, when the caller gave refspecs of
    /// its own: the remote-tracking refs they map are updated too.
    tracking: Vec<gix::refspec::RefSpec>,
    opts: &'a CallOptions,
    /// Set once an attempt stored a pack: maintenance may follow the call.
    stored: std::sync::atomic::AtomicBool,
}

/// Advertised: the session, gix's handshake and the ref map (what each
/// refspec maps to). Awaits the negotiation.
struct Advertised {
    s: Session,
    hs: Handshake,
    ref_map: RefMap,
    /// The refspecs as gix parsed them.
    specs: Vec<gix::refspec::RefSpec>,
}

impl GitClient {
    /// Fetch `refspecs` from `url` into `repo`: negotiates with what `repo`
    /// has, stores the pack, updates the local refs the refspecs name, and
    /// returns the tips fetched.
    ///
    /// **A repository kept open** is safe to pass (each attempt works on a
    /// view of its own), but read what this call brought through
    /// [`crate::fresh_view`]`(repo)`, not through `repo`: see
    /// [`crate::fresh_view`] for why.
    pub fn fetch(
        &self,
        url: &str,
        refspecs: &[String],
        repo: &gix::Repository,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        self.fetch_with(url, refspecs, repo, &FetchOptions::default(), opts)
    }

    /// [`GitClient::fetch`] with `git fetch`'s `--prune`, `--tags` and
    /// `--no-tags` ([`crate::FetchOptions`]). Pruned refs are reported
    /// before the fetched ones, as git prints them, status [`crate::FetchStatus::Pruned`], with
    /// `oid` and `old` the value the deleted ref had.
    ///
    /// No refspec fetches the remote's `HEAD` (as `git fetch <URL>`). As
    /// git does, tags are followed only when some refspec names a local
    /// ref, a followed tag never replaces a local tag of that name, and
    /// every fetch writes `FETCH_HEAD` (every ref the refspecs fetched for
    /// merge, followed tags not: [`ForMerge::Given`]). A configured
    /// remote is fetched by name with [`GitClient::fetch_remote`].
    ///
    /// **A repository kept open** is safe to pass (each attempt works on a
    /// view of its own), but read what this call brought through
    /// [`crate::fresh_view`]`(repo)`, not through `repo`: see
    /// [`crate::fresh_view`] for why.
    pub fn fetch_with(
        &self,
        url: &str,
        refspecs: &[String],
        repo: &gix::Repository,
        fetch: &FetchOptions,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        let named = Named {
            for_merge: &ForMerge::Given,
            tracking: &[],
        };
        self.fetch_named(url, refspecs, repo, fetch, &named, opts)
    }

    /// [`GitClient::fetch_with`], `FETCH_HEAD` marking for merge what
    /// `named.for_merge` says, and the remote-tracking refs of
    /// `named.tracking` updated too.
    pub(crate) fn fetch_named(
        &self,
        url: &str,
        refspecs: &[String],
        repo: &gix::Repository,
        fetch: &FetchOptions,
        named: &Named<'_>,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        let for_merge = named.for_merge;
        let mut tracking = Vec::with_capacity(named.tracking.len());
        for spec in named.tracking {
            let parsed = gix::refspec::parse(
                spec.as_bytes().as_bstr(),
                gix::refspec::parse::Operation::Fetch,
            )
            .map_err(|e| InputError::Refspec {
                spec: spec.clone(),
                reason: e.to_string(),
            })?;
            tracking.push(parsed.to_owned());
        }
        let mut remote = Remote::parse(url)?;
        let helpers = self.configure_http(&mut remote, Some(repo));
        let head = ["HEAD".to_string()];
        let refspecs = if refspecs.is_empty() {
            &head[..]
        } else {
            refspecs
        };
        let mut parsed = Vec::with_capacity(refspecs.len());
        for spec in refspecs {
            gix::refspec::parse(
                spec.as_bytes().as_bstr(),
                gix::refspec::parse::Operation::Fetch,
            )
            .map(|p| parsed.push(p.to_owned()))
            .map_err(|e| InputError::Refspec {
                spec: spec.clone(),
                reason: e.to_string(),
            })?;
        }
        // git follows tags only when a refspec names a local ref
        // (`git fetch <URL> main` follows none).
        let mut fetch = *fetch;
        let stores = parsed
            .iter()
            .any(|p| p.to_ref().destination().is_some_and(|d| !d.is_empty()));
        if fetch.tags == TagMode::Follow && !stores {
            fetch.tags = TagMode::None;
        }
        let fetch = &fetch;
        // gix's prefix derivation turns `refs/*` into the literal prefix
        // `refs/*`, which a server matches literally (0 refs): filter locally
        // for such catch-all specs.
        let prefix_filter = !refspecs.iter().any(|s| {
            let src = s.trim_start_matches('+');
            let src = src.split(':').next().unwrap_or(src);
            src.starts_with("refs/*") || src == "*" || src.starts_with('*')
        });
        let job = FetchJob {
            remote: &remote,
            refspecs,
            prefix_filter,
            repo,
            fetch,
            for_merge,
            first_given: parsed.first().cloned(),
            tracking,
            opts,
            stored: std::sync::atomic::AtomicBool::new(false),
        };
        let op = self
            .operation("fetch", Effect::Read, &remote, opts, helpers)
            .refs(refspecs);
        // A ref refused by git's rules is the fetch's answer (exit 1), the
        // others still updated: decided by the policy, so its events say so.
        let outcome = remote.note_redirect(self.policy.run_judged(
            op,
            |ctx| shielded(ctx, |at| self.fetch_attempt(&job, at)).map_err(|e| e.to_attempt()),
            |refs: &Vec<FetchedRef>| {
                let r = refs.iter().find(|r| r.is_rejected())?;
                let (local, detail) = (
                    r.local_ref.as_deref().unwrap_or("?"),
                    r.reason.as_deref().unwrap_or("rejected"),
                );
                // Refused by git's rules for the local refs: this client's
                // decision, kept typed beside the words.
                let typed = GitError::Refused {
                    phase: GitPhase::Done,
                    name: local.to_string(),
                    reason: crate::reject::RejectReason::from_report(detail),
                    detail: detail.to_string(),
                };
                Some(Rejection {
                    error: AttemptError::answered(
                        GitPhase::Done.as_str(),
                        format!("{} -> {local}: {detail}", r.remote_ref),
                    )
                    .with_source(typed),
                    may_have_applied: false,
                })
            },
        ));
        // The outcome and the ledger's finish are fixed: maintenance runs
        // now, outside every attempt and the deadline, and never changes
        // the outcome (a failure is logged, left for the next fetch).
        if fetch.maintenance == crate::AfterFetch::Auto
            && job.stored.load(std::sync::atomic::Ordering::Relaxed)
        {
            crate::maintenance::after_fetch(repo);
        }
        Ok(outcome)
    }

    /// One attempt, step by step.
    fn fetch_attempt(
        &self,
        job: &FetchJob<'_>,
        at: &mut Attempt<'_, '_>,
    ) -> Result<Vec<FetchedRef>, GitError> {
        // gix's object store has a fixed number of pack slots, sized when
        // the repository was opened (1.1× the packs then on disk, at least
        // 32), and every fetch adds a pack: a handle kept open runs out of
        // slots and no longer sees new packs (the soak's fetches failed in
        // negotiation once a repository held 33). The fetch works on a view
        // opened now, sized for the packs on disk.
        let fresh = attempt_view(job.repo)?;
        let repo = &fresh;
        let mut adv = self.fetch_advertised(job, repo, at)?;
        check_mapped(&adv, repo)?;
        let received = self.fetch_receive(job, repo, &mut adv, at)?;
        if received.pack {
            job.stored.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // Following tags (git's default): a tag comes along only when what
        // it points to is here now — the history fetched reached it, or the
        // server sent the tag object with `include-tag`. A tag on history
        // nothing fetched is not written (its object is not here).
        if job.fetch.tags == TagMode::Follow {
            super::refs::keep_followed(&mut adv.ref_map, repo);
        }
        let fetch_head = super::fetch_head::render(
            &adv.ref_map,
            &adv.specs,
            job.first_given.as_ref(),
            job.for_merge,
            &job.remote.display,
        );
        super::refs::add_tracking(&mut adv.ref_map, &job.tracking);
        let refs = write_refs(job.fetch, repo, &adv)?;
        super::fetch_head::write(repo, &fetch_head).map_err(|e| {
            let words = format!(
                "cannot write FETCH_HEAD in {}: {e}",
                repo.git_dir().display()
            );
            GitError::local(GitPhase::PackReceived, LocalCause::disk(words, e))
        })?;
        if let Some(keep) = &received.keep {
            match std::fs::remove_file(keep) {
                // Another fetch that received the same pack into this
                // repository removed it once its refs pointed into it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let words = format!("cannot remove {}: {e}", keep.display());
                    return Err(GitError::local(
                        GitPhase::PackReceived,
                        LocalCause::disk(words, e),
                    ));
                }
                Ok(()) => {}
            }
        }
        if received.pack {
            let (objects, bytes) = (received.objects, received.bytes);
            tracing::debug!(objects, bytes, remote = %job.remote.display, "fetch received a pack");
            if let Some(cb) = job.opts.progress_callback() {
                cb(&Progress {
                    stage: "received".into(),
                    objects,
                    bytes,
                });
            }
            at.reached(GitPhase::PackReceived);
        }
        at.reached(GitPhase::Done);
        Ok(refs)
    }

    /// Connected, then advertised: the session opened, the handshake read
    /// and the refspecs mapped over what the remote listed.
    fn fetch_advertised(
        &self,
        job: &FetchJob<'_>,
        repo: &gix::Repository,
        at: &mut Attempt<'_, '_>,
    ) -> Result<Advertised, GitError> {
        let local = |e: Box<dyn std::error::Error + Send + Sync>| {
            GitError::local(
                GitPhase::Connect,
                LocalCause::other(error_chain(&*e), Some(e)),
            )
        };
        let mut dial =
            self.connector
                .dial(job.remote, Service::UploadPack, Protocol::V2, at, false);
        dial.ssh_config = ssh_config(job.remote, repo);
        let mut s = Session::open(dial)?;
        let gremote = repo
            .remote_at_without_url_rewrite(job.remote.url.to_bstring().as_bstr())
            .map_err(|e| local(e.into()))?
            .with_refspecs(
                job.refspecs.iter().map(|s| s.as_bytes().as_bstr()),
                gix::remote::Direction::Fetch,
            )
            .map_err(|e| local(e.into()))?;
        let specs = gremote.refspecs(gix::remote::Direction::Fetch).to_vec();
        let mut hs = gix::protocol::handshake(
            &mut s.transport,
            Service::UploadPack,
            no_auth,
            Vec::new(),
            &mut gix::progress::Discard,
        )
        .map_err(|e| s.meta.read_fail(error_chain(&e)))?;
        crate::error::check_format(&s.meta.wire.lock(), GitPhase::Advertised)?;
        let context = gix::protocol::fetch::refmap::init::Context {
            fetch_refspecs: specs.clone(),
            extra_refspecs: job
                .fetch
                .tags
                .to_gix()
                .to_refspec()
                .map(|s| s.to_owned())
                .into_iter()
                .collect(),
        };
        let ref_map = hs
            .prepare_lsrefs_or_extract_refmap(
                ("agent", Some(self.agent.clone())),
                job.prefix_filter,
                context,
            )
            .and_then(|m| m.fetch_blocking(gix::progress::Discard, &mut s.transport, false))
            .map_err(|e| s.meta.read_fail(error_chain(&e)))?;
        at.reached(GitPhase::Advertised);
        Ok(Advertised {
            s,
            hs,
            ref_map,
            specs,
        })
    }

    /// Negotiated and received: gix-protocol's negotiation, then the pack
    /// stored by our indexer; the conversation ended (v2).
    fn fetch_receive(
        &self,
        job: &FetchJob<'_>,
        repo: &gix::Repository,
        adv: &mut Advertised,
        at: &mut Attempt<'_, '_>,
    ) -> Result<Received, GitError> {
        let guard = EntryGuard::with_limits(Limits::of(job.fetch));
        // The remote's text beside the pack (side-band 2): kept as the
        // outcome's `remote_messages`, within the caps; git's own progress
        // lines are progress ([`crate::progress`]), not kept.
        adv.s.meta.wire.lock().band2 = Some(sluice_policy::remote_text::RemoteText::default());
        let received = super::receive(
            super::Receive {
                repo,
                handshake: &mut adv.hs,
                ref_map: &adv.ref_map,
                tags: job.fetch.tags.to_gix(),
                agent: &self.agent,
                progress: Sink::new(job.opts.progress_callback().cloned()),
                interrupt: at.cancel_flag().as_atomic(),
                guard: &guard,
            },
            &mut adv.s.transport,
        );
        if adv.hs.server_protocol_version == Protocol::V2 {
            gix::protocol::indicate_end_of_interaction(&mut adv.s.transport, false).ok();
        }
        let band2 = adv.s.meta.wire.lock().band2.take();
        let (lines, dropped) = band2.unwrap_or_default().into_parts();
        for line in lines {
            if !crate::progress::is_git_progress(&line) {
                at.remote_message(line);
            }
        }
        at.remote_messages_dropped(dropped);
        received.map_err(|e| {
            // A limit the caller set, passed by the server's pack: its
            // answer, typed (asking again gets the same objects).
            if let Some(exceeded) = guard.exceeded.borrow().clone() {
                return GitError::TooLarge {
                    phase: GitPhase::Negotiated,
                    exceeded,
                };
            }
            let e = match e {
                // The disk or the object store: this side's, never retried.
                super::ReceiveError::Local(why) => {
                    return GitError::local(GitPhase::Negotiated, why.into_cause());
                }
                super::ReceiveError::Wire(e) => e,
            };
            // A pack entry no valid pack holds (bug D2): the server's fault,
            // stopped as it arrived; asking again gets the same pack.
            if let Some(why) = guard.tripped.borrow().clone() {
                return GitError::BadPack {
                    phase: GitPhase::Negotiated,
                    detail: why,
                };
            }
            if unsupported_before_request(&adv.s.meta, &e) {
                return GitError::Unsupported {
                    phase: GitPhase::Advertised,
                    detail: error_chain(&e),
                };
            }
            adv.s.meta.read_fail(error_chain(&e))
        })
    }
}

/// Checked: a refspec naming one ref (no glob, not an object id) whose ref
/// the remote did not advertise is the remote's answer, as git's "couldn't
/// find remote ref": asking again gets the same list. So is an object
/// format that is not ours.
fn check_mapped(adv: &Advertised, repo: &gix::Repository) -> Result<(), GitError> {
    for (i, spec) in adv.specs.iter().enumerate() {
        let gix::refspec::Instruction::Fetch(
            gix::refspec::instruction::Fetch::Only { src }
            | gix::refspec::instruction::Fetch::AndUpdate { src, .. },
        ) = spec.to_ref().instruction()
        else {
            continue;
        };
        let exact =
            src.find_byteset(b"*?[]\\").is_none() && ObjectId::from_hex(src.as_ref()).is_err();
        let matched = adv
            .ref_map
            .mappings
            .iter()
            .any(|m| m.spec_index == SpecIndex::ExplicitInRemote(i));
        if exact && !matched {
            return Err(GitError::NotAdvertised {
                phase: GitPhase::Advertised,
                name: src.to_string(),
            });
        }
    }
    if adv.ref_map.object_hash != repo.object_hash() {
        return Err(GitError::Unsupported {
            phase: GitPhase::Advertised,
            detail: format!(
                "the remote uses {} object ids, the local repository {}",
                adv.ref_map.object_hash,
                repo.object_hash()
            ),
        });
    }
    Ok(())
}

/// The refs written: pruned first (as git's `--prune` does: a stale
/// `origin/a` must not stand in the way of a new `origin/a/b`), then
/// updated by git's rules. The pack is stored; what is left is this side's:
/// a ref that cannot be written is a local error, never the remote's.
/// Pruned refs come first in the result, as git prints them.
fn write_refs(
    fetch: &FetchOptions,
    repo: &gix::Repository,
    adv: &Advertised,
) -> Result<Vec<FetchedRef>, GitError> {
    let ref_map = &adv.ref_map;
    let mut mappings: Vec<FetchedRef> = ref_map
        .mappings
        .iter()
        .filter_map(|m| {
            let oid = m.remote.as_id()?.to_owned();
            let name = match &m.remote {
                Source::Ref(r) => r.unpack().0.to_string(),
                Source::ObjectId(id) => id.to_string(),
            };
            Some(FetchedRef {
                remote_ref: name,
                local_ref: m.local.as_ref().map(|l| l.to_string()),
                oid,
                old: None,
                status: FetchStatus::UpToDate,
                reason: None,
            })
        })
        .collect();
    let pruned = if fetch.prune {
        super::prune_refs(repo, ref_map, &adv.specs).map_err(|e| {
            let words = format!("pruning the local refs: {}", error_chain(&e));
            GitError::local(GitPhase::PackReceived, LocalCause::refs(words, e))
        })?
    } else {
        Vec::new()
    };
    let outcomes = super::update_refs(repo, ref_map).map_err(|e| {
        let words = format!("updating the local refs: {}", error_chain(&e));
        GitError::local(GitPhase::PackReceived, LocalCause::refs(words, e))
    })?;
    for (m, o) in mappings.iter_mut().zip(outcomes) {
        m.old = o.old;
        m.status = o.status;
        m.reason = o.reason;
    }
    Ok(pruned
        .into_iter()
        .map(|p| FetchedRef {
            remote_ref: p.remote,
            local_ref: Some(p.local),
            oid: p.old,
            old: Some(p.old),
            status: FetchStatus::Pruned,
            reason: None,
        })
        .chain(mappings)
        .collect())
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
