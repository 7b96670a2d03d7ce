//! Fetch, ours around gix-protocol: the ref listing and the negotiation are
//! gix-protocol's, the pack is stored by our own indexer ([`indexer`], which
//! never maps the received pack) and the local refs are updated by
//! [`refs::update`] in one transaction. The operation and its attempt, step
//! by step, are in [`attempt`]; this file holds the fetch's values and the
//! receiving of the pack.

// The whole-buffer delta reader push's tests check their deltas with; the
// indexer applies deltas in pieces (`indexer::delta`).
#[cfg(test)]
pub(crate) mod apply;
mod attempt;
pub(crate) mod fetch_head;
pub(crate) mod indexer;
mod named;
mod negotiator;
pub(crate) mod options;
pub(crate) mod refs;
mod tips;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use gix::protocol::fetch::{negotiate, Arguments, RefMap};

pub use fetch_head::ForMerge;
pub use options::{FetchOptions, TagMode};
pub(crate) use refs::prune as prune_refs;
pub(crate) use refs::update as update_refs;
pub use refs::FetchStatus;

/// One ref a fetch brought.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRef {
    /// The remote's ref name.
    pub remote_ref: String,
    /// The local ref the refspec mapped it to, if any.
    pub local_ref: Option<String>,
    /// The object fetched (for a pruned ref: the value the deleted ref had).
    pub oid: gix::ObjectId,
    /// The local ref's value before the fetch (`None`: it did not exist, or
    /// there is no local ref).
    pub old: Option<gix::ObjectId>,
    /// What happened to the local ref (git's rules: an unforced refspec
    /// fast-forwards only, a tag is not moved unless forced, the checked-out
    /// branch of a non-bare repository is not written).
    pub status: FetchStatus,
    /// Why it was rejected, in git's words (`None` unless rejected).
    pub reason: Option<String>,
}

impl FetchedRef {
    /// Whether the local ref was left alone because git's rules refuse the
    /// update.
    pub fn is_rejected(&self) -> bool {
        self.status == FetchStatus::Rejected
    }
}

/// What the pack phase brought.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// A pack was received and stored.
    pub pack: bool,
    /// Objects in it.
    pub objects: u64,
    /// Its size.
    pub bytes: u64,
    /// The `.keep` guarding it until the refs point into it.
    pub keep: Option<PathBuf>,
}

/// Negotiation through gix-protocol's own steps, over what `repo` has.
pub(crate) struct Negotiate<'a, 'b, 'c> {
    pub objects: &'a gix::OdbHandle,
    pub refs: &'a gix::refs::file::Store,
    pub graph: &'a mut gix::negotiate::Graph<'b, 'c>,
    pub alternates: Vec<PathBuf>,
    pub open_options: gix::open::Options,
    pub ref_map: &'a RefMap,
    pub shallow: &'a gix::protocol::fetch::Shallow,
    pub tags: gix::protocol::fetch::Tags,
    pub negotiator: negotiator::Negotiator,
}

impl gix::protocol::fetch::Negotiate for Negotiate<'_, '_, '_> {
    fn mark_complete_and_common_ref(&mut self) -> gix::Result<negotiate::Action> {
        let tips = if self.alternates.is_empty() && tips::many_refs(self.refs) {
            tips::Tips::Own
        } else {
            let alternates = std::mem::take(&mut self.alternates);
            tips::Tips::Every(
                alternates
                    .into_iter()
                    .filter_map(|objects| {
                        // An alternate's objects directory sits in its git dir.
                        let git_dir = objects.parent()?;
                        gix::open_opts(git_dir, self.open_options.clone()).ok()
                    })
                    .map(|r| (r.refs, r.objects))
                    .collect(),
            )
        };
        tips::mark_complete_and_common_ref(
            tips::Local {
                objects: self.objects,
                refs: self.refs,
            },
            tips,
            &mut self.negotiator,
            &mut *self.graph,
            self.ref_map,
            negotiate::make_refmapping_ignore_predicate(self.tags, self.ref_map),
        )
    }

    fn add_wants(&mut self, arguments: &mut Arguments, remote_ref_target_known: &[bool]) -> bool {
        negotiate::add_wants(
            self.objects,
            arguments,
            self.ref_map,
            remote_ref_target_known,
            self.shallow,
            negotiate::make_refmapping_ignore_predicate(self.tags, self.ref_map),
        )
    }

    fn one_round(
        &mut self,
        state: &mut negotiate::one_round::State,
        arguments: &mut Arguments,
        previous_response: Option<&gix::protocol::fetch::Response>,
    ) -> gix::Result<(negotiate::Round, bool)> {
        negotiate::one_round(
            &mut self.negotiator,
            &mut *self.graph,
            state,
            arguments,
            previous_response,
        )
    }
}

/// Threads resolving a received pack's deltas: `pack.threads` when set
/// (0 meaning every core), else every core; at most 8.
pub(crate) fn threads(repo: &gix::Repository) -> usize {
    let cores = || std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = match repo.config_snapshot().integer("pack.threads") {
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(1),
        _ => cores(),
    };
    n.clamp(1, 8)
}

/// What receiving a pack needs besides the transport.
pub(crate) struct Receive<'a> {
    /// The view the pack is stored into.
    pub repo: &'a gix::Repository,
    /// The handshake the refs were listed with.
    pub handshake: &'a mut gix::protocol::Handshake,
    /// What the refspecs map.
    pub ref_map: &'a RefMap,
    /// Which tags come along.
    pub tags: gix::protocol::fetch::Tags,
    /// Our agent string.
    pub agent: &'a str,
    /// Where gix's progress goes.
    pub progress: crate::progress::Sink,
    /// Set when the caller cancels.
    pub interrupt: &'a AtomicBool,
    /// Trips on a pack entry no valid pack holds.
    pub guard: &'a indexer::EntryGuard,
}

/// Why receiving failed: storing the pack failed on this side (the disk,
/// the object store: `local-error`), or anything else (the conversation,
/// the pack as the server sent it), which the caller classes from the wire.
#[derive(Debug)]
pub(crate) enum ReceiveError {
    /// Storing the pack failed on this side.
    Local(indexer::StoreError),
    /// The conversation or the pack stream failed.
    Wire(gix::Error),
}

impl From<gix::Error> for ReceiveError {
    fn from(e: gix::Error) -> Self {
        ReceiveError::Wire(e)
    }
}

/// Run the fetch command on `transport`: negotiate, then store the pack.
pub(crate) fn receive<T: gix::protocol::transport::client::blocking_io::Transport>(
    r: Receive<'_>,
    transport: &mut T,
) -> Result<Received, ReceiveError> {
    let Receive {
        repo,
        handshake,
        ref_map,
        tags,
        agent,
        progress,
        interrupt,
        guard,
    } = r;
    let shallow = gix::protocol::fetch::Shallow::NoChange;
    let graph_repo = {
        let mut r = repo.clone();
        // Not `RefreshMode::Never` (as gix's own fetch): a local ref's
        // object whose pack was consolidated away since the view was opened
        // (maintenance in another process, `git gc`) is found in the new
        // pack after a look at the disk, as git re-reads its packs on a
        // miss; a remote tip not here costs a directory listing.
        r.objects.unset_object_cache();
        r
    };
    let cache = graph_repo.commit_graph_if_enabled().ok().flatten();
    let mut graph = graph_repo.revision_graph(cache.as_ref());
    let mut negotiate = Negotiate {
        objects: &graph_repo.objects,
        refs: &graph_repo.refs,
        graph: &mut graph,
        alternates: repo.objects.store_ref().alternate_db_paths()?,
        open_options: repo.open_options().clone(),
        ref_map,
        shallow: &shallow,
        tags,
        negotiator: negotiator::Negotiator::for_repo(repo),
    };
    let pack_dir = repo.objects.store_ref().path().join("pack");
    let mut received = Received::default();
    let mut local = None;
    let fetched = gix::protocol::fetch(
        &mut negotiate,
        |pack, progress, interrupt| -> gix::Result<bool> {
            let stored = indexer::Store {
                dir: &pack_dir,
                thin: Some(repo.objects.clone()),
                object_hash: repo.object_hash(),
                threads: threads(repo),
                interrupt,
                guard,
            }
            .store(pack, progress)
            .map_err(|e| {
                let words = e.to_string();
                if e.is_local() {
                    local = Some(e);
                }
                gix::Error::from_error(std::io::Error::other(words))
            })?;
            if let Some(p) = &stored.paths {
                tracing::debug!(
                    hash = %stored.hash,
                    pack = %p.pack.display(),
                    index = %p.index.display(),
                    "stored the received pack"
                );
            }
            received = Received {
                pack: true,
                objects: u64::from(stored.objects),
                bytes: stored.bytes,
                keep: stored.paths.and_then(|p| p.keep),
            };
            Ok(true)
        },
        progress,
        interrupt,
        gix::protocol::fetch::Context {
            handshake,
            transport,
            user_agent: ("agent", Some(agent.to_owned())),
            trace_packetlines: false,
        },
        gix::protocol::fetch::Options {
            shallow_file: repo.shallow_file()?,
            shallow: &shallow,
            tags,
            reject_shallow_remote: false,
        },
    );
    if let Some(e) = local {
        return Err(ReceiveError::Local(e));
    }
    fetched?;
    Ok(received)
}
