//! The negotiation's starting point in a repository with many refs.
//!
//! gix-protocol's `mark_complete_and_common_ref` marks every local ref as
//! complete and hands each one to the negotiator as a tip: with 20,000
//! refs that is 20,000 ref reads and a commit read for each distinct
//! target before the first `have` — most of a small fetch's time (and
//! `git fetch` pays it too). In a repository whose `packed-refs` holds
//! more than about 1,000 refs, this one starts from fewer tips, as git's
//! `fetch.negotiationTip` does when set: `HEAD` and the local refs the
//! fetch itself updates. Implicit tag mappings (tags following the fetched
//! history) are not looked up either: the server decides which it sends.
//!
//! The server still sends every object the fetch needs (what it sends
//! depends on the haves only to leave out what is common); with fewer tips
//! it may send objects this repository already has under a ref that was
//! not a tip. Elsewhere (fewer refs, or alternates) gix-protocol's own
//! function runs unchanged.

use gix::negotiate::Flags;
use gix::objs::Exists as _;
use gix::protocol::fetch::negotiate::Action;
use gix::protocol::fetch::{refmap, RefMap};
use gix::refs::file::ReferenceExt;
use gix::ObjectId;

/// A `packed-refs` file past this size holds about 1,000 refs or more.
const MANY_REFS_PACKED_BYTES: u64 = 64 << 10;

/// Whether `refs` keeps many refs (its `packed-refs` file is past about
/// 1,000 lines).
pub(crate) fn many_refs(refs: &gix::refs::file::Store) -> bool {
    std::fs::metadata(refs.packed_refs_path()).is_ok_and(|m| m.len() > MANY_REFS_PACKED_BYTES)
}

type Queue = gix::revwalk::PriorityQueue<gix::date::SecondsSinceUnixEpoch, ObjectId>;

/// gix-protocol's `mark_complete_and_common_ref` for a repository with many
/// refs and no alternates: the same steps, from `HEAD` and the fetch's own
/// local refs instead of every ref.
pub(crate) fn mark_complete_and_common_ref(
    objects: &gix::OdbHandle,
    refs: &gix::refs::file::Store,
    negotiator: &mut dyn gix::negotiate::Negotiator,
    graph: &mut gix::negotiate::Graph<'_, '_>,
    ref_map: &RefMap,
    mapping_is_ignored: impl Fn(&refmap::Mapping) -> bool,
) -> gix::Result<Action> {
    use gix::error::{message, ResultExt};
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
    let mut cutoff = None::<gix::date::SecondsSinceUnixEpoch>;
    let mut changed = 0usize;
    let mut known = vec![false; ref_map.mappings.len()];
    let mut included = vec![false; ref_map.mappings.len()];
    let mut tip_refs: Vec<gix::refs::Reference> = refs.find("HEAD").into_iter().collect();
    for (i, mapping) in ref_map.mappings.iter().enumerate() {
        // Implicit tags are the server's choice: no want, no lookup.
        if mapping_is_ignored(mapping) {
            continue;
        }
        included[i] = true;
        let want = mapping.remote.as_id();
        let have = mapping.local.as_ref().and_then(|name| {
            let r = refs.find(name).ok()?;
            let id = r.target.try_id().map(ToOwned::to_owned);
            tip_refs.push(r);
            id
        });
        if want.zip(have.as_deref()).is_none_or(|(w, h)| w != h) {
            changed += 1;
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
    // The tips: HEAD and the fetch's own local refs, marked complete.
    let mut queue = Queue::new();
    let packed = refs
        .cached_packed_buffer()
        .or_raise(|| message("Could not open packed refs"))?;
    for mut r in tip_refs {
        let Ok(id) = r.peel_to_id_packed(refs, objects, packed.as_ref().map(|b| &***b)) else {
            continue;
        };
        if let Some(time) = mark_complete(graph, id)? {
            queue.insert(time, id);
        }
    }
    let tips = queue.clone();
    // Colour their parents complete down to the newest commit of the
    // remote's that is here.
    if let Some(cutoff) = cutoff {
        colour_parents(graph, &mut queue, cutoff)?;
    }
    for (mapping, _) in ref_map
        .mappings
        .iter()
        .zip(known.iter().zip(&included))
        .filter(|(_, (k, inc))| !**k && **inc)
    {
        if let Some(id) = mapping.remote.as_id().filter(|id| {
            graph
                .get(id)
                .is_some_and(|c| c.data.flags.contains(Flags::COMPLETE))
        }) {
            negotiator
                .known_common(id.to_owned(), graph)
                .or_raise(|| message("Could not mark common commit"))?;
        }
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
