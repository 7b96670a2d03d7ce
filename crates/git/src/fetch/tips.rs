//! The negotiation's starting point: gix-protocol's
//! `mark_complete_and_common_ref`, ours, for three reasons.
//!
//! * The remote's refs whose commits are here are known common (git calls
//!   its negotiator's `known_common` for each; gix-protocol's filter passes
//!   only those whose objects are *not* here, so it never does): with
//!   tags followed, a remote tag at a commit the repository has makes the
//!   history below it common without one `have`.
//! * The old values of the local refs the fetch updates are offered first
//!   ([`super::negotiator`]).
//! * In a repository whose `packed-refs` holds more than about 1,000 refs,
//!   the tips are `HEAD` and the local refs the fetch itself updates (as
//!   git's `fetch.negotiationTip` does when set), not every ref: marking
//!   every ref complete is 20,000 ref reads and a commit read for each
//!   distinct target before the first `have` with 20,000 refs — most of a
//!   small fetch's time (and `git fetch` pays it too). Implicit tag
//!   mappings (tags following the fetched history) are not looked up
//!   either: the server decides which it sends. The server still sends
//!   every object the fetch needs (what it sends depends on the haves only
//!   to leave out what is common); with fewer tips it may send objects
//!   this repository already has under a ref that was not a tip.
//!
//! Elsewhere the tips are every ref, and the refs of the alternates.

use gix::negotiate::{Flags, Negotiator as _};
use gix::objs::Exists as _;
use gix::protocol::fetch::negotiate::Action;
use gix::protocol::fetch::{refmap, RefMap};
use gix::refs::file::ReferenceExt;
use gix::ObjectId;

use super::negotiator::Negotiator;

/// A `packed-refs` file past this size holds about 1,000 refs or more.
const MANY_REFS_PACKED_BYTES: u64 = 64 << 10;

/// Whether `refs` keeps many refs (its `packed-refs` file is past about
/// 1,000 lines).
pub(crate) fn many_refs(refs: &gix::refs::file::Store) -> bool {
    std::fs::metadata(refs.packed_refs_path()).is_ok_and(|m| m.len() > MANY_REFS_PACKED_BYTES)
}

type Queue = gix::revwalk::PriorityQueue<gix::date::SecondsSinceUnixEpoch, ObjectId>;

/// Which local refs start the negotiation.
pub(crate) enum Tips {
    /// Every ref, and every ref of each alternate (its refs and objects).
    Every(Vec<(gix::refs::file::Store, gix::OdbHandle)>),
    /// `HEAD` and the fetch's own local refs (a repository with many refs).
    Own,
}

/// The repository's objects and refs, as the negotiation reads them.
pub(crate) struct Local<'a> {
    pub objects: &'a gix::OdbHandle,
    pub refs: &'a gix::refs::file::Store,
}

/// Mark the local tips complete (and their history down to the newest
/// remote commit that is here), tell `negotiator` the remote's refs known
/// common, then the tips, the fetch's own first. `NoChange` when no
/// remote ref moved, `SkipToRefUpdate` when every wanted object is here.
pub(crate) fn mark_complete_and_common_ref(
    local: Local<'_>,
    tips: Tips,
    negotiator: &mut Negotiator,
    graph: &mut gix::negotiate::Graph<'_, '_>,
    ref_map: &RefMap,
    mapping_is_ignored: impl Fn(&refmap::Mapping) -> bool,
) -> gix::Result<Action> {
    use gix::error::{message, ResultExt};
    let Local { objects, refs } = local;
    if ref_map.mappings.is_empty() {
        return Ok(Action::NoChange);
    }
    if let Some(refmap::Mapping {
        remote: refmap::Source::Ref(gix::protocol::handshake::Ref::Unborn { .. }),
        ..
    }) = ref_map
        .mappings
        .last()
        .filter(|_| ref_map.mappings.len() == 1)
    {
        return Ok(Action::SkipToRefUpdate);
    }
    let own_only = matches!(tips, Tips::Own);
    let mut cutoff = None::<gix::date::SecondsSinceUnixEpoch>;
    let mut changed = 0usize;
    let mut known = vec![false; ref_map.mappings.len()];
    let mut included = vec![false; ref_map.mappings.len()];
    // The local refs the fetch moves: offered first.
    let mut own: Vec<gix::refs::Reference> = Vec::new();
    for (i, mapping) in ref_map.mappings.iter().enumerate() {
        // Implicit tags are the server's choice: no want.
        if mapping_is_ignored(mapping) {
            if own_only {
                continue;
            }
        } else {
            included[i] = true;
        }
        let want = mapping.remote.as_id();
        let local_ref = mapping.local.as_ref().and_then(|name| refs.find(name).ok());
        let have = local_ref
            .as_ref()
            .and_then(|r| r.target.try_id().map(ToOwned::to_owned));
        if included[i] && want.zip(have.as_deref()).is_none_or(|(w, h)| w != h) {
            changed += 1;
            own.extend(local_ref);
        }
        if let Some(commit) = want
            .and_then(|id| graph.get_or_insert_commit(id.into(), |_| {}).transpose())
            .transpose()
            .or_raise(|| message("Could not look up commit in graph"))?
        {
            known[i] = true;
            cutoff = Some(cutoff.unwrap_or_default().max(commit.commit_time));
        } else if want.is_some_and(|id| objects.exists(id)) {
            known[i] = true;
        }
    }
    if changed == 0 {
        return Ok(Action::NoChange);
    }
    if known.iter().zip(&included).all(|(k, inc)| *k || !*inc) {
        return Ok(Action::SkipToRefUpdate);
    }
    let packed = refs
        .cached_packed_buffer()
        .or_raise(|| message("Could not open packed refs"))?;
    let packed = packed.as_ref().map(|b| &***b);
    // The fetch's own refs' commits, in the order of the mappings.
    let mut first = Vec::new();
    for r in &mut own {
        if let Ok(id) = r.peel_to_id_packed(refs, objects, packed) {
            first.push(id);
        }
    }
    // The tips, marked complete.
    let mut queue = Queue::new();
    match tips {
        Tips::Own => {
            for mut r in refs.find("HEAD").into_iter().chain(own) {
                if let Ok(id) = r.peel_to_id_packed(refs, objects, packed) {
                    if let Some(time) = mark_complete(graph, id)? {
                        queue.insert(time, id);
                    }
                }
            }
        }
        Tips::Every(alternates) => {
            mark_every_ref(refs, objects, graph, &mut queue)?;
            for (alt_refs, alt_objects) in &alternates {
                mark_every_ref(alt_refs, alt_objects, graph, &mut queue)?;
            }
        }
    }
    let tips = queue.clone();
    // Colour their parents complete down to the newest commit of the
    // remote's that is here.
    if let Some(cutoff) = cutoff {
        colour_parents(graph, &mut queue, cutoff)?;
    }
    // The remote's refs at commits complete here: common (git's
    // `known_common`, before the tips).
    for mapping in &ref_map.mappings {
        let Some(id) = mapping.remote.peeled_id().map(ToOwned::to_owned) else {
            continue;
        };
        if graph
            .get(&id)
            .is_some_and(|c| c.data.flags.contains(Flags::COMPLETE))
        {
            negotiator
                .known_common(id, graph)
                .or_raise(|| message("Could not mark common commit"))?;
        }
    }
    for id in first {
        negotiator
            .offer_first(id, graph)
            .or_raise(|| message("Could not add negotiation tip"))?;
    }
    for tip in tips.iter_unordered() {
        negotiator
            .add_tip(*tip, graph)
            .or_raise(|| message("Could not add negotiation tip"))?;
    }
    Ok(Action::MustNegotiate {
        remote_ref_target_known: known,
    })
}

/// Mark every ref of `refs` (peeled through `objects`) complete, queueing
/// the commits not complete before.
fn mark_every_ref(
    refs: &gix::refs::file::Store,
    objects: &gix::OdbHandle,
    graph: &mut gix::negotiate::Graph<'_, '_>,
    queue: &mut Queue,
) -> gix::Result<()> {
    use gix::error::{message, ResultExt};
    let packed = refs
        .cached_packed_buffer()
        .or_raise(|| message("Could not open packed refs"))?;
    let packed = packed.as_ref().map(|b| &***b);
    let platform = refs
        .iter()
        .or_raise(|| message("Could not open packed refs"))?;
    for r in platform
        .all()
        .or_raise(|| message("Could not initialize ref iterator"))?
    {
        // A ref that cannot be read or peeled (its object gone) starts no
        // walk, as in git.
        let Ok(mut r) = r else {
            continue;
        };
        let Ok(id) = r.peel_to_id_packed(refs, objects, packed) else {
            continue;
        };
        if let Some(time) = mark_complete(graph, id)? {
            queue.insert(time, id);
        }
    }
    Ok(())
}

/// Mark `id` complete in `graph`: its commit time when it was not complete
/// before (and is a commit).
fn mark_complete(
    graph: &mut gix::negotiate::Graph<'_, '_>,
    id: ObjectId,
) -> gix::Result<Option<gix::date::SecondsSinceUnixEpoch>> {
    use gix::error::{message, ResultExt};
    let mut was_complete = false;
    Ok(graph
        .get_or_insert_commit(id, |md| {
            was_complete = md.flags.contains(Flags::COMPLETE);
            md.flags |= Flags::COMPLETE;
        })
        .or_raise(|| message("Could not look up commit in graph"))?
        .filter(|_| !was_complete)
        .map(|c| c.commit_time))
}

/// Mark the parents of the queued commits complete, newest first, down to
/// `cutoff`.
fn colour_parents(
    graph: &mut gix::negotiate::Graph<'_, '_>,
    queue: &mut Queue,
    cutoff: gix::date::SecondsSinceUnixEpoch,
) -> gix::Result<()> {
    while let Some(id) = queue
        .peek()
        .and_then(|(time, id)| (*time >= cutoff).then_some(*id))
    {
        queue.pop_value();
        let parents = graph
            .get(&id)
            .map(|c| c.parents.clone())
            .unwrap_or_default();
        for parent in parents {
            if let Some(time) = mark_complete(graph, parent)? {
                queue.insert(time, parent);
            }
        }
    }
    Ok(())
}
