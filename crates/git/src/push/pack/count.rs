//! Counting what a push sends ([`count`]): the first way that answers —
//! a small push on top of what the remote advertised, a whole local pack
//! or the bitmaps' choice, our walk against what the remote has, or
//! everything — with the trees of each new commit paired against its
//! parent's (the bases of the loose objects' deltas) and the plan of the
//! loose objects' order.

use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix_pack::data::output;

use super::walk::{walk, walk_to_advertised, Walked, NEAR_WALK_LIMIT};
use super::write::{Counted, Worker, LOOSE_PER_THREAD};
use super::{cores, unreadable, Base, PackError, MAX_CANDIDATES, MAX_DEPTH};
use crate::local::ObjectStoreError;
use crate::push::bitmap;
use crate::push::odb::{find_kind, Db};

/// Count the objects to send for `new_tips`, given what the remote has:
/// the first of these that answers — a small push on top of what the
/// remote advertised ([`count_near`]), a whole local pack the bitmaps show
/// to be exactly what the tips reach, the bitmaps' choice of what the
/// remote lacks ([`count_from_bitmaps`]), our own walk against what the
/// remote has ([`count_walked`]), everything ([`count_all`]).
pub(crate) fn count(
    repo: &gix::Repository,
    new_tips: &[ObjectId],
    remote_tips: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, PackError> {
    let db = open_db(repo);
    let (walk_tips, extra_ids) = split_tips(repo, new_tips)?;
    if let Some(near) = walk_near(&db, &walk_tips, remote_tips) {
        return count_near(db, near, &extra_ids, thin, interrupt);
    }
    let hidden = hidden_commits(repo, remote_tips);
    // Nothing at the remote to stop at, and a local pack whose bitmaps show
    // that the new tips reach exactly its objects: that pack is the answer
    // (a freshly repacked history pushed whole), with no walk and no count.
    if hidden.is_empty() && extra_ids.is_empty() && !walk_tips.is_empty() {
        if let Some(whole) = bitmap::whole_pack(db.store_ref().path(), &walk_tips) {
            return Ok(Counted {
                packed: Vec::new(),
                loose: Vec::new(),
                db,
                whole: Some(whole),
                reuse: None,
                thin_entries: Default::default(),
            });
        }
    }
    if hidden.is_empty() {
        return count_all(repo, db, walk_tips, extra_ids, thin, interrupt);
    }
    if extra_ids.is_empty() && !walk_tips.is_empty() {
        let t = std::time::Instant::now();
        let objects_dir = db.store_ref().path().to_owned();
        if let Some(reuse) =
            bitmap::incremental(&db, &objects_dir, &walk_tips, &hidden, thin, interrupt)
        {
            return count_from_bitmaps(db, reuse, t, &walk_tips, &hidden, thin, interrupt);
        }
    }
    count_walked(db, &walk_tips, &hidden, &extra_ids, thin, interrupt)
}

/// The object store handle counting and writing share.
fn open_db(repo: &gix::Repository) -> Db {
    let mut db = repo.clone().into_sync().objects.to_cache_arc();
    db.prevent_pack_unload();
    db.ignore_replacements = true;
    // Without a delta-base cache every object of a delta chain re-inflates
    // the whole chain: counting a large history spent half its time there.
    // One cache per thread (the handle is cloned for each).
    db.set_pack_cache(|| Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(32 << 20)));
    db
}

/// The new tips as (commits to walk from, objects sent as themselves):
/// tags are sent as themselves and walking starts at their commits.
fn split_tips(
    repo: &gix::Repository,
    new_tips: &[ObjectId],
) -> Result<(Vec<ObjectId>, Vec<ObjectId>), PackError> {
    let mut extra_ids = Vec::new();
    let mut walk_tips = Vec::new();
    for id in new_tips {
        let obj = repo.find_object(*id).map_err(|e| unreadable(id, &e))?;
        match obj.kind {
            gix::object::Kind::Commit => walk_tips.push(*id),
            gix::object::Kind::Tag => {
                extra_ids.push(*id);
                let mut cur = obj;
                while cur.kind == gix::object::Kind::Tag {
                    let target = cur.to_tag_ref().target();
                    extra_ids.push(target);
                    cur = repo
                        .find_object(target)
                        .map_err(|e| unreadable(&target, &e))?;
                }
                if cur.kind == gix::object::Kind::Commit {
                    extra_ids.pop();
                    walk_tips.push(cur.id);
                }
            }
            _ => extra_ids.push(*id),
        }
    }
    Ok((walk_tips, extra_ids))
}

/// A small push of new (loose) commits on top of what the remote
/// advertised — the everyday case at a forge with tens of thousands of
/// refs: its new commits are found without reading one advertised tip
/// (the full walk reads every one: 20,000 commits, most of a one-commit
/// push's time). `None` when this walk does not answer; else the new
/// commits, with when the walk began.
fn walk_near(
    db: &Db,
    walk_tips: &[ObjectId],
    remote_tips: &[ObjectId],
) -> Option<(Vec<Walked>, std::time::Instant)> {
    if walk_tips.is_empty() || remote_tips.is_empty() {
        return None;
    }
    let t = std::time::Instant::now();
    let advertised: std::collections::HashSet<ObjectId> = remote_tips.iter().copied().collect();
    // Packed new commits are left to the bitmaps, which know what the
    // remote has below its tips (a renamed file is not sent again).
    walk_to_advertised(db, walk_tips, &advertised, NEAR_WALK_LIMIT)
        .filter(|w| w.is_empty() || w.iter().any(|c| c.location.is_none()))
        .map(|w| (w, t))
}

/// Count what the commits [`walk_near`] found bring.
fn count_near(
    db: Db,
    (walked, t): (Vec<Walked>, std::time::Instant),
    extra_ids: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, PackError> {
    let walk_us = t.elapsed().as_micros() as u64;
    let (counts, pairs) = count_against_parents(&db, &walked, extra_ids, interrupt)?;
    let objects = counts.len();
    let counted = finish(db, counts, &pairs, thin)?;
    tracing::debug!(
        commits = walked.len(),
        objects,
        walk_us,
        us = t.elapsed().as_micros() as u64,
        walk = "to the advertised ids",
        "pack counted"
    );
    Ok(counted)
}

/// Remote tips we have, peeled to commits: hidden from the walk.
fn hidden_commits(repo: &gix::Repository, remote_tips: &[ObjectId]) -> Vec<ObjectId> {
    let mut hidden = Vec::new();
    let mut hidden_set = std::collections::HashSet::new();
    for id in remote_tips {
        if !repo.has_object(id) {
            continue;
        }
        if let Ok(obj) = repo.find_object(*id) {
            if let Ok(c) = obj.peel_to_commit() {
                if hidden_set.insert(c.id) {
                    hidden.push(c.id);
                }
            }
        }
    }
    hidden
}

/// What the remote has is known: the one bitmapped pack may answer what
/// to send without walking every new commit's trees ([`bitmap::incremental`]);
/// what would go whole is then tried as a thin delta.
fn count_from_bitmaps(
    db: Db,
    reuse: bitmap::Reuse,
    t: std::time::Instant,
    walk_tips: &[ObjectId],
    hidden: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, PackError> {
    let chosen_us = t.elapsed().as_micros() as u64;
    // What goes whole (stored whole, or a delta on a base neither
    // sent nor the remote's) is tried as a delta against the
    // version at the same path in the remote's tip.
    let thin_entries = if thin {
        let whole = reuse.whole_ids();
        let pairs = if whole.is_empty() {
            Pairs::default()
        } else {
            tip_pairs(&db, walk_tips, hidden, interrupt)?
        };
        let todo: Vec<(ObjectId, Vec<ObjectId>)> = whole
            .into_iter()
            .filter_map(|id| Some((id, pairs.get(&id)?.clone())))
            .collect();
        thin_deltas(&db, &todo)?
    } else {
        Default::default()
    };
    tracing::debug!(
        objects = reuse.len(),
        chosen_us,
        thin = thin_entries.len(),
        us = t.elapsed().as_micros() as u64,
        "pack chosen from bitmaps"
    );
    Ok(Counted {
        packed: Vec::new(),
        loose: Vec::new(),
        db,
        whole: None,
        reuse: Some(reuse),
        thin_entries,
    })
}

/// Our own walk from the new tips to what the remote has ([`walk`]), each
/// new commit compared with its first parent.
fn count_walked(
    db: Db,
    walk_tips: &[ObjectId],
    hidden: &[ObjectId],
    extra_ids: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, PackError> {
    let t = std::time::Instant::now();
    let walked = walk(&db, walk_tips, hidden, interrupt)?;
    let walk_us = t.elapsed().as_micros() as u64;
    let (counts, pairs) = count_against_parents(&db, &walked, extra_ids, interrupt)?;
    let count_us = t.elapsed().as_micros() as u64 - walk_us;
    let objects = counts.len();
    let counted = finish(db, counts, &pairs, thin)?;
    tracing::debug!(
        commits = walked.len(),
        objects,
        walk_us,
        count_us,
        plan_us = t.elapsed().as_micros() as u64 - walk_us - count_us,
        "pack counted"
    );
    Ok(counted)
}

/// Everything the tips reach goes (nothing at the remote to stop at):
/// gix-pack's counting, on every core.
fn count_all(
    repo: &gix::Repository,
    db: Db,
    walk_tips: Vec<ObjectId>,
    extra_ids: Vec<ObjectId>,
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, PackError> {
    let mut ids: Vec<ObjectId> = Vec::new();
    if !walk_tips.is_empty() {
        let walk = repo
            .rev_walk(walk_tips)
            .all()
            .map_err(|e| ObjectStoreError::unreadable("the history to send", &e))?;
        for info in walk {
            let info = info.map_err(|e| ObjectStoreError::unreadable("the history to send", &e))?;
            ids.push(info.id);
        }
    }
    ids.extend(extra_ids);
    let counts = count_everything(&db, ids, interrupt)?;
    finish(db, counts, &Default::default(), thin)
}

/// Split counted objects into packed (written by gix-pack) and loose
/// (encoded here), with the bases each may be tried against.
fn finish(
    db: Db,
    mut counts: Vec<output::Count>,
    pairs: &Pairs,
    thin: bool,
) -> Result<Counted, PackError> {
    resolve_locations(&db, &mut counts)?;
    let sent: std::collections::HashSet<ObjectId> = counts.iter().map(|c| c.id).collect();
    let (loose_counts, packed): (Vec<_>, Vec<_>) = counts
        .into_iter()
        .partition(|c| c.entry_pack_location.is_none());
    let loose_ids: Vec<ObjectId> = loose_counts.into_iter().map(|c| c.id).collect();
    let thin_entries = if thin {
        thin_for_packed(&db, &packed, pairs, &sent)?
    } else {
        Default::default()
    };
    let loose = plan_loose(loose_ids, pairs, &sent, thin);
    Ok(Counted {
        packed,
        loose,
        db,
        whole: None,
        reuse: None,
        thin_entries,
    })
}

/// Packed objects that gix-pack would write whole — stored whole, or as a
/// delta whose base is not sent — and whose previous version the remote
/// has, encoded as REF deltas against it (on every core, before the first
/// byte). Only those smaller than whole are returned.
fn thin_for_packed(
    db: &Db,
    packed: &[output::Count],
    pairs: &Pairs,
    sent: &std::collections::HashSet<ObjectId>,
) -> Result<std::collections::HashMap<ObjectId, output::Entry>, PackError> {
    use gix_pack::data::entry::Header;
    use gix_pack::Find;
    let sent_at: std::collections::HashSet<(u32, u64)> = packed
        .iter()
        .filter_map(|c| c.entry_pack_location.as_ref())
        .map(|l| (l.pack_id, l.pack_offset))
        .collect();
    let mut todo: Vec<(ObjectId, Vec<ObjectId>)> = Vec::new();
    for c in packed {
        let Some(candidates) = pairs.get(&c.id) else {
            continue;
        };
        let bases: Vec<ObjectId> = candidates
            .iter()
            .filter(|b| !sent.contains(*b))
            .copied()
            .collect();
        if bases.is_empty() {
            continue;
        }
        let Some(loc) = c.entry_pack_location.as_ref() else {
            continue;
        };
        let Some(stored) = db.entry_by_location(loc) else {
            continue;
        };
        let Ok(entry) = gix_pack::data::Entry::from_bytes(&stored.data, 0, gix::hash::Kind::Sha1)
        else {
            continue;
        };
        let written_whole = match entry.header {
            Header::Blob | Header::Tree => true,
            Header::OfsDelta { base_distance } => {
                Header::verified_base_pack_offset(loc.pack_offset, base_distance)
                    .is_none_or(|base| !sent_at.contains(&(loc.pack_id, base)))
            }
            Header::RefDelta { .. } => true,
            Header::Commit | Header::Tag => false,
        };
        if written_whole {
            todo.push((c.id, bases));
        }
    }
    thin_deltas(db, &todo)
}

/// Each object of `todo` as a REF delta against the best of its bases
/// (objects the remote has), where that is under half its size; on every
/// core.
fn thin_deltas(
    db: &Db,
    todo: &[(ObjectId, Vec<ObjectId>)],
) -> Result<std::collections::HashMap<ObjectId, output::Entry>, PackError> {
    if todo.is_empty() {
        return Ok(Default::default());
    }
    let threads = cores().min(todo.len().div_ceil(LOOSE_PER_THREAD)).max(1);
    let per = todo.len().div_ceil(threads);
    let span = tracing::Span::current();
    let parts: Result<Vec<Vec<(ObjectId, output::Entry)>>, PackError> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = todo
                .chunks(per)
                .map(|part| {
                    let mut w = Worker::new(db.clone());
                    let span = span.clone();
                    scope.spawn(move || {
                        let _attempt = span.enter();
                        part.iter()
                            .filter_map(|(id, bases)| Some((*id, w.thin_entry(id, bases)?)))
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| PackError::Panicked("encoding")))
                .collect()
        });
    Ok(parts?.into_iter().flatten().collect())
}

/// Every object reachable from `ids` (no remote tips to stop at), with
/// gix-pack's counting: on every core past a handful of objects (each
/// thread with its own delta-base cache; 1,000 commits of the medium
/// fixture, 97 ms -> 58 ms in the bench's `count-experiment`).
fn count_everything(
    db: &Db,
    ids: Vec<ObjectId>,
    interrupt: &AtomicBool,
) -> Result<Vec<output::Count>, PackError> {
    let expansion = output::count::objects::ObjectExpansion::TreeContents;
    let (counts, _outcome) = if ids.len() < 64 {
        let mut iter = ids.into_iter().map(Ok::<_, gix::Error>);
        output::count::objects_unthreaded(
            db,
            &mut iter,
            &gix::progress::Discard,
            interrupt,
            expansion,
        )
        .map_err(|e| ObjectStoreError::unreadable("the objects to send", &e))?
    } else {
        let iter = ids.into_iter().map(Ok::<_, gix::Error>);
        output::count::objects(
            db.clone(),
            Box::new(iter),
            &gix::progress::Discard,
            interrupt,
            output::count::objects::Options {
                thread_limit: None,
                chunk_size: 50,
                input_object_expansion: expansion,
            },
        )
        .map_err(|e| ObjectStoreError::unreadable("the objects to send", &e))?
    };
    Ok(counts)
}

type Pairs = std::collections::HashMap<ObjectId, Vec<ObjectId>>;

/// Trees read for the commit being compared and the one before it: in a
/// walk from the newest commit, a commit's "old" trees are the next
/// commit's "new" ones, so each tree is read about once.
struct Trees {
    current: std::collections::HashMap<ObjectId, Tree>,
    previous: std::collections::HashMap<ObjectId, Tree>,
}

#[derive(Clone)]
struct Tree {
    data: std::rc::Rc<[u8]>,
    location: Option<gix_pack::data::entry::Location>,
}

impl Trees {
    fn get(&mut self, db: &Db, id: &ObjectId, buf: &mut Vec<u8>) -> Result<Tree, PackError> {
        if let Some(t) = self.current.get(id) {
            return Ok(t.clone());
        }
        if let Some(t) = self.previous.remove(id) {
            self.current.insert(*id, t.clone());
            return Ok(t);
        }
        let (data, location) = find_kind(db, id, gix::object::Kind::Tree, buf)?;
        let t = Tree {
            data: data.data.into(),
            location,
        };
        self.current.insert(*id, t.clone());
        Ok(t)
    }

    fn next_commit(&mut self) {
        self.previous = std::mem::take(&mut self.current);
    }
}

/// Each blob and tree of the new tips' trees paired with the version at
/// the same path in the remote's first tip that this repository has (the
/// caller puts the pushed refs' old values first): delta base candidates
/// the remote holds.
fn tip_pairs(
    db: &Db,
    wants: &[ObjectId],
    haves: &[ObjectId],
    interrupt: &AtomicBool,
) -> Result<Pairs, PackError> {
    let mut buf = Vec::new();
    let mut tree_of = |id: &ObjectId| -> Result<ObjectId, PackError> {
        let (data, _) = find_kind(db, id, gix::object::Kind::Commit, &mut buf)?;
        gix::objs::CommitRefIter::from_bytes(data.data, data.object_hash)
            .tree_id()
            .map_err(|e| unreadable(id, &e))
    };
    let Some(have) = haves.first() else {
        return Ok(Pairs::default());
    };
    let old_tree = tree_of(have)?;
    let mut walked = Vec::new();
    for want in wants {
        walked.push(Walked {
            id: *want,
            tree: tree_of(want)?,
            parent_tree: Some(old_tree),
            location: None,
            first_parent: None,
        });
    }
    Ok(count_part(db, &walked, interrupt)?.1)
}

/// Count what `walked` (new commits, newest first) bring compared with
/// their first parents, and pair every changed tree and file with the
/// version it replaces (its delta base candidates).
///
/// An object of a commit's tree that is not counted is in its first
/// parent's tree at the same path, so — by the same argument down the
/// first-parent chain — it is counted for an older new commit or is in a
/// commit outside the walk, which the remote has. Unlike gix-pack's
/// tree-diff expansion, boundary commits and their root trees are not
/// counted (the remote has them).
///
/// Past [`COUNT_PER_THREAD`] commits the walk is cut into contiguous parts
/// counted on every core (each with its own tree cache and delta-base
/// cache), and the parts' counts are joined in walk order without repeats.
/// A part does not know what an earlier part counted, so it may count an
/// object an earlier part has too (dropped when joining) — never fewer
/// than each commit's own difference, which is what completeness needs.
fn count_against_parents(
    db: &Db,
    walked: &[Walked],
    extra: &[ObjectId],
    interrupt: &AtomicBool,
) -> Result<(Vec<output::Count>, Pairs), PackError> {
    use output::count::PackLocation;
    use std::collections::{HashMap, HashSet};
    let threads = cores().min(walked.len() / COUNT_PER_THREAD).max(1);
    let parts = if threads == 1 {
        vec![count_part(db, walked, interrupt)?]
    } else {
        let per = walked.len().div_ceil(threads);
        let span = tracing::Span::current();
        std::thread::scope(|scope| {
            let handles: Vec<_> = walked
                .chunks(per)
                .map(|part| {
                    let db = db.clone();
                    let span = span.clone();
                    scope.spawn(move || span.in_scope(|| count_part(&db, part, interrupt)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| PackError::Panicked("counting"))?)
                .collect::<Result<Vec<_>, PackError>>()
        })?
    };
    let mut counts = Vec::new();
    let mut pairs: Pairs = HashMap::new();
    let mut seen: HashSet<ObjectId> = HashSet::new();
    for (part_counts, part_pairs) in parts {
        counts.extend(part_counts.into_iter().filter(|c| seen.insert(c.id)));
        for (new, olds) in part_pairs {
            for old in olds {
                add_pair(&mut pairs, new, old);
            }
        }
    }
    for id in extra {
        if seen.insert(*id) {
            counts.push(output::Count {
                id: *id,
                entry_pack_location: PackLocation::NotLookedUp,
            });
        }
    }
    Ok((counts, pairs))
}

/// Fewer new commits than this per thread are counted on one thread.
const COUNT_PER_THREAD: usize = 64;

/// Pair `new` with `old`, a delta base candidate, keeping at most
/// [`MAX_CANDIDATES`].
fn add_pair(pairs: &mut Pairs, new: ObjectId, old: ObjectId) {
    let c = pairs.entry(new).or_default();
    if c.len() < MAX_CANDIDATES && !c.contains(&old) {
        c.push(old);
    }
}

/// [`count_against_parents`] on one contiguous part of the walk.
fn count_part(
    db: &Db,
    walked: &[Walked],
    interrupt: &AtomicBool,
) -> Result<(Vec<output::Count>, Pairs), PackError> {
    use output::count::PackLocation;
    use std::collections::{HashMap, HashSet};
    let mut counts = Vec::new();
    let mut pairs: Pairs = HashMap::new();
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut trees = Trees {
        current: HashMap::new(),
        previous: HashMap::new(),
    };
    let mut buf = Vec::new();
    for w in walked {
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(PackError::Interrupted);
        }
        trees.next_commit();
        let (tree, old_root) = (w.tree, w.parent_tree);
        if seen.insert(w.id) {
            counts.push(output::Count {
                id: w.id,
                entry_pack_location: PackLocation::LookedUp(w.location.clone()),
            });
        }
        if Some(tree) == old_root {
            continue;
        }
        if let Some(o) = old_root {
            add_pair(&mut pairs, tree, o);
        }
        if !seen.insert(tree) {
            continue;
        }
        let mut stack = vec![(tree, old_root)];
        while let Some((new, old)) = stack.pop() {
            let n = trees.get(db, &new, &mut buf)?;
            counts.push(output::Count {
                id: new,
                entry_pack_location: PackLocation::LookedUp(n.location),
            });
            let o = match old {
                Some(o) => Some(trees.get(db, &o, &mut buf)?),
                None => None,
            };
            let mut olds = o
                .as_ref()
                .map(|o| gix::objs::TreeRefIter::from_bytes(&o.data, gix::hash::Kind::Sha1))
                .into_iter()
                .flatten()
                .peekable();
            for e in gix::objs::TreeRefIter::from_bytes(&n.data, gix::hash::Kind::Sha1) {
                let e = e.map_err(|e| unreadable(&new, &e))?;
                if e.mode.is_commit() {
                    continue; // a submodule's commit is not ours to send
                }
                let is_tree = e.mode.is_tree();
                // The old entry of the same name and kind, if any (both
                // trees are in git's order).
                let mut same = None;
                while let Some(Ok(oe)) = olds.peek() {
                    match tree_order(oe.filename, oe.mode.is_tree(), e.filename, is_tree) {
                        std::cmp::Ordering::Less => {
                            olds.next();
                        }
                        std::cmp::Ordering::Equal => {
                            same = Some(oe.oid.to_owned());
                            olds.next();
                            break;
                        }
                        std::cmp::Ordering::Greater => break,
                    }
                }
                let id = e.oid.to_owned();
                if same == Some(id) {
                    continue;
                }
                if let Some(o) = same {
                    add_pair(&mut pairs, id, o);
                }
                if !seen.insert(id) {
                    continue;
                }
                if is_tree {
                    stack.push((id, same));
                } else {
                    counts.push(output::Count {
                        id,
                        entry_pack_location: PackLocation::NotLookedUp,
                    });
                }
            }
        }
    }
    Ok((counts, pairs))
}

/// Look up where each counted object is stored (gix leaves files' pack
/// locations to the writer); on every core past a few thousand.
fn resolve_locations(db: &Db, counts: &mut [output::Count]) -> Result<(), PackError> {
    use gix_pack::Find;
    use output::count::PackLocation;
    // A miss here is a loose object: no need to look for new packs on disk
    // after each one (a directory listing per object). Every index is still
    // loaded before a miss is reported.
    let one = |mut db: Db, part: &mut [output::Count]| -> Result<(), PackError> {
        db.refresh_never();
        let mut buf = Vec::new();
        for c in part {
            if let PackLocation::NotLookedUp = c.entry_pack_location {
                let at = db
                    .location_by_oid(&c.id, &mut buf)
                    .map_err(|e| unreadable(&c.id, &e))?;
                c.entry_pack_location = PackLocation::LookedUp(at);
            }
        }
        Ok(())
    };
    let threads = cores();
    if counts.len() < 4000 || threads == 1 {
        return one(db.clone(), counts);
    }
    let per = counts.len().div_ceil(threads);
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        let handles: Vec<_> = counts
            .chunks_mut(per)
            .map(|part| {
                let db = db.clone();
                let span = span.clone();
                scope.spawn(move || span.in_scope(|| one(db, part)))
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| PackError::Panicked("lookup"))?)
    })
}

/// Order loose objects so every in-pack base comes before its delta, with
/// chains no deeper than [`MAX_DEPTH`], and list the bases each one is
/// tried against.
fn plan_loose(
    loose_ids: Vec<ObjectId>,
    pairs: &Pairs,
    sent: &std::collections::HashSet<ObjectId>,
    thin: bool,
) -> Vec<(ObjectId, Vec<Base>)> {
    use std::collections::HashMap;
    let loose: HashMap<ObjectId, usize> = loose_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();

    // Order: each object after the loose base it was first paired with; a
    // cycle (a file changed back and forth) is cut where it closes. Other
    // candidates are kept when already placed.
    const UNSEEN: u8 = 0;
    const OPEN: u8 = 1;
    const PLACED: u8 = 2;
    let mut state = vec![UNSEEN; loose_ids.len()];
    let mut position = vec![0usize; loose_ids.len()];
    let mut depth = vec![0u32; loose_ids.len()];
    let mut out: Vec<(ObjectId, Vec<Base>)> = Vec::with_capacity(loose_ids.len());
    let mut chain = Vec::new();
    let none = Vec::new();
    for start in 0..loose_ids.len() {
        let mut at = start;
        while state[at] == UNSEEN {
            state[at] = OPEN;
            chain.push(at);
            let first_loose = pairs
                .get(&loose_ids[at])
                .and_then(|c| c.iter().find_map(|b| loose.get(b)));
            match first_loose {
                Some(&b) => at = b,
                None => break,
            }
        }
        while let Some(i) = chain.pop() {
            let id = loose_ids[i];
            let mut bases = Vec::new();
            let mut d = 0;
            for b in pairs.get(&id).unwrap_or(&none) {
                match loose.get(b) {
                    Some(&bi) if state[bi] == PLACED && depth[bi] < MAX_DEPTH => {
                        bases.push(Base::InPack(position[bi], *b));
                        d = d.max(depth[bi] + 1);
                    }
                    Some(_) => {}
                    None if thin && !sent.contains(b) => {
                        bases.push(Base::Remote(*b));
                        d = d.max(1);
                    }
                    None => {}
                }
            }
            state[i] = PLACED;
            position[i] = out.len();
            depth[i] = d;
            out.push((id, bases));
        }
    }
    out
}

/// git's order of tree entries: by name, a tree's name as if it ended
/// in `/`.
fn tree_order(a: &[u8], a_tree: bool, b: &[u8], b_tree: bool) -> std::cmp::Ordering {
    let common = a.len().min(b.len());
    a[..common].cmp(&b[..common]).then_with(|| {
        let next = |name: &[u8], tree: bool| match name.get(common) {
            Some(&c) => c,
            None if tree => b'/',
            None => 0,
        };
        next(a, a_tree).cmp(&next(b, b_tree))
    })
}
