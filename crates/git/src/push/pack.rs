//! The pack a push sends, written with gix-pack.
//!
//! Objects: everything reachable from the new tips and not reachable from
//! the remote's advertised tips that exist locally. Counting finishes before
//! the first pack byte (the header carries the count); entries then stream
//! into the writer. Deltas stored in local packs are reused (gix-pack).
//!
//! Loose objects (what `git commit` writes) are deltified here: while
//! counting, each new commit's tree is compared with its first parent's,
//! and every changed tree or file is paired with the version it replaces
//! (its base). Each pairing is then encoded ([`delta`](super::delta)) and
//! kept when it is under half the object's size. A base that is itself
//! sent goes before its delta (an OFS delta); a base that is not sent is
//! one the remote has — every object of a parent's tree is either counted
//! or reachable from the tips the remote advertised — and is named by id
//! (a REF delta: a thin pack, unless the remote said `no-thin`). gix's own
//! thin mode is never used: it deltas against bases it never checks the
//! remote has.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix_pack::data::output;

use super::delta;

/// What a pack held and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Objects in the pack.
    pub objects: u64,
    /// Bytes of the pack on the wire.
    pub bytes: u64,
    /// Objects counted that the remote has, left out of the pack: gix's
    /// tree-diff expansion adds each boundary parent commit and its root
    /// tree.
    pub redundant: u64,
}

type Db = gix::odb::Cache<gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>>;

/// Objects counted and ready to write.
pub(crate) struct Counted {
    /// Objects stored in local packs, written by gix-pack.
    packed: Vec<output::Count>,
    /// Loose objects, in pack order, each with the bases to try: every
    /// in-pack base comes first.
    loose: Vec<(ObjectId, Vec<Base>)>,
    db: Db,
    pub redundant: u64,
}

/// What a loose object is tried as a delta against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    /// An object sent earlier in this pack, at this index (an OFS delta).
    InPack(usize, ObjectId),
    /// An object the remote has (a REF delta).
    Remote(ObjectId),
}

/// The longest delta chain built here (git's `pack.depth` default).
const MAX_DEPTH: u32 = 50;
/// Objects larger than this are sent whole (the index of a base costs a
/// quarter of its size again).
const MAX_DELTA_OBJECT: usize = 64 << 20;
/// Objects smaller than this are sent whole: a delta's header and one
/// instruction cost about as much.
const MIN_DELTA_OBJECT: usize = 32;
/// Bases tried per object, at most (the versions it replaced, one per
/// path and commit it was found at).
const MAX_CANDIDATES: usize = 4;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Count the objects to send for `new_tips`, given what the remote has.
pub(crate) fn count(
    repo: &gix::Repository,
    new_tips: &[ObjectId],
    remote_tips: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Result<Counted, String> {
    let mut db = repo.clone().into_sync().objects.to_cache_arc();
    db.prevent_pack_unload();
    db.ignore_replacements = true;
    // Without a delta-base cache every object of a delta chain re-inflates
    // the whole chain: counting a large history spent half its time there.
    // One cache per thread (the handle is cloned for each).
    db.set_pack_cache(|| Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(32 << 20)));

    // Remote tips we have, peeled to commits: hidden from the walk.
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
    // New tips: tags are sent as themselves, walking starts at their commits.
    let mut extra_ids = Vec::new();
    let mut walk_tips = Vec::new();
    for id in new_tips {
        let obj = repo.find_object(*id).map_err(err)?;
        match obj.kind {
            gix::object::Kind::Commit => walk_tips.push(*id),
            gix::object::Kind::Tag => {
                extra_ids.push(*id);
                let mut cur = obj;
                while cur.kind == gix::object::Kind::Tag {
                    let target = cur.to_tag_ref().target();
                    extra_ids.push(target);
                    cur = repo.find_object(target).map_err(err)?;
                }
                if cur.kind == gix::object::Kind::Commit {
                    extra_ids.pop();
                    walk_tips.push(cur.id);
                }
            }
            _ => extra_ids.push(*id),
        }
    }
    let mut ids: Vec<ObjectId> = Vec::new();
    if !walk_tips.is_empty() {
        let walk = repo
            .rev_walk(walk_tips)
            .with_hidden(hidden.iter().copied())
            .all()
            .map_err(err)?;
        for info in walk {
            let info = info.map_err(err)?;
            ids.push(info.id);
        }
    }
    let commits = ids.len();
    ids.extend(extra_ids);
    let walked: Vec<ObjectId> = ids[..commits].to_vec();
    let expansion = if hidden.is_empty() {
        output::count::objects::ObjectExpansion::TreeContents
    } else {
        output::count::objects::ObjectExpansion::TreeAdditionsComparedToAncestor
    };
    // Counting on every core (each thread with its own delta-base cache):
    // 1,000 new commits on the medium fixture, 97 ms -> 58 ms (the bench's
    // `count-experiment`); one thread for a handful of objects, where
    // starting threads costs more than it saves.
    let (counts, _outcome) = if ids.len() < 64 {
        let mut iter = ids.into_iter().map(Ok::<_, gix::Error>);
        output::count::objects_unthreaded(
            &db,
            &mut iter,
            &gix::progress::Discard,
            interrupt,
            expansion,
        )
        .map_err(err)?
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
        .map_err(err)?
    };
    // The tree-diff expansion adds each boundary parent commit (a parent
    // outside the walk, so one reachable from what the remote advertised)
    // and its root tree: the remote has them, so they are left out.
    let mut counts = counts;
    let redundant = if hidden.is_empty() {
        0
    } else {
        let walked_set: std::collections::HashSet<ObjectId> = walked.iter().copied().collect();
        let mut boundary = std::collections::HashSet::new();
        let mut buf = Vec::new();
        for c in &walked {
            let (_, parents) = commit_tree_and_parents(&db, c, &mut buf)?;
            boundary.extend(parents.into_iter().filter(|p| !walked_set.contains(p)));
        }
        let mut known = std::collections::HashSet::new();
        for b in boundary {
            if let Ok((tree, _)) = commit_tree_and_parents(&db, &b, &mut buf) {
                known.insert(tree);
            }
            known.insert(b);
        }
        let before = counts.len();
        counts.retain(|c| !known.contains(&c.id));
        (before - counts.len()) as u64
    };
    resolve_locations(&db, &mut counts)?;
    let sent: std::collections::HashSet<ObjectId> = counts.iter().map(|c| c.id).collect();
    let (loose_counts, packed): (Vec<_>, Vec<_>) = counts
        .into_iter()
        .partition(|c| c.entry_pack_location.is_none());
    let loose_ids: Vec<ObjectId> = loose_counts.into_iter().map(|c| c.id).collect();
    let loose = plan_loose(&db, &walked, loose_ids, &sent, thin)?;
    Ok(Counted {
        packed,
        loose,
        db,
        redundant,
    })
}

/// Look up where each counted object is stored (gix leaves files' pack
/// locations to the writer); on every core past a few thousand.
fn resolve_locations(db: &Db, counts: &mut [output::Count]) -> Result<(), String> {
    use gix_pack::Find;
    use output::count::PackLocation;
    let one = |db: &Db, part: &mut [output::Count]| -> Result<(), String> {
        let mut buf = Vec::new();
        for c in part {
            if let PackLocation::NotLookedUp = c.entry_pack_location {
                c.entry_pack_location =
                    PackLocation::LookedUp(db.location_by_oid(&c.id, &mut buf).map_err(err)?);
            }
        }
        Ok(())
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if counts.len() < 4000 || threads == 1 {
        return one(db, counts);
    }
    let per = counts.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = counts
            .chunks_mut(per)
            .map(|part| {
                let db = db.clone();
                scope.spawn(move || one(&db, part))
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| "a lookup thread panicked".to_string())?
        })
    })
}

/// Pair loose objects with bases and order them so every in-pack base
/// comes before its delta, with chains no deeper than [`MAX_DEPTH`].
fn plan_loose(
    db: &Db,
    walked: &[ObjectId],
    loose_ids: Vec<ObjectId>,
    sent: &std::collections::HashSet<ObjectId>,
    thin: bool,
) -> Result<Vec<(ObjectId, Vec<Base>)>, String> {
    use std::collections::HashMap;
    let loose: HashMap<ObjectId, usize> = loose_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    let mut pairs: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    if !loose.is_empty() {
        let (mut b1, mut b2) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for c in walked {
            // Only loose commits bring loose trees and files with them.
            if !loose.contains_key(c) {
                continue;
            }
            let (tree, parents) = commit_tree_and_parents(db, c, &mut b1)?;
            let Some(parent) = parents.first() else {
                continue;
            };
            let Ok((parent_tree, _)) = commit_tree_and_parents(db, parent, &mut b1) else {
                // A parent we do not have (a shallow repository): no pairs.
                continue;
            };
            pair_trees(
                db,
                tree,
                parent_tree,
                &loose,
                &mut pairs,
                &mut seen,
                (&mut b1, &mut b2),
            )?;
        }
    }

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
    Ok(out)
}

fn commit_tree_and_parents(
    db: &Db,
    id: &ObjectId,
    buf: &mut Vec<u8>,
) -> Result<(ObjectId, Vec<ObjectId>), String> {
    use gix::objs::FindExt;
    let mut iter = db.find_commit_iter(id, buf).map_err(err)?;
    let tree = iter.tree_id().map_err(err)?;
    Ok((tree, iter.parent_ids().collect()))
}

/// Compare a new tree with the one it replaces, pairing every changed
/// loose tree and file with its previous version.
fn pair_trees(
    db: &Db,
    new: ObjectId,
    old: ObjectId,
    loose: &std::collections::HashMap<ObjectId, usize>,
    pairs: &mut std::collections::HashMap<ObjectId, Vec<ObjectId>>,
    seen: &mut std::collections::HashSet<(ObjectId, ObjectId)>,
    (b1, b2): (&mut Vec<u8>, &mut Vec<u8>),
) -> Result<(), String> {
    use gix::objs::FindExt;
    use std::cmp::Ordering;
    let add = |pairs: &mut std::collections::HashMap<ObjectId, Vec<ObjectId>>, n, o| {
        let c = pairs.entry(n).or_default();
        if c.len() < MAX_CANDIDATES && !c.contains(&o) {
            c.push(o);
        }
    };
    let mut stack = vec![(new, old)];
    while let Some((new, old)) = stack.pop() {
        // A pair of trees compared once is not compared again.
        if new == old || !loose.contains_key(&new) || !seen.insert((new, old)) {
            continue;
        }
        add(pairs, new, old);
        let mut n = db.find_tree_iter(&new, b1).map_err(err)?.peekable();
        let mut o = db.find_tree_iter(&old, b2).map_err(err)?.peekable();
        // Both trees are in git's order: a merge finds the same names.
        loop {
            let (ne, oe) = match (n.peek(), o.peek()) {
                (Some(Ok(ne)), Some(Ok(oe))) => (*ne, *oe),
                _ => break,
            };
            match tree_order(
                ne.filename,
                ne.mode.is_tree(),
                oe.filename,
                oe.mode.is_tree(),
            ) {
                Ordering::Less => {
                    n.next();
                }
                Ordering::Greater => {
                    o.next();
                }
                Ordering::Equal => {
                    if ne.oid != oe.oid {
                        let (nid, oid) = (ne.oid.to_owned(), oe.oid.to_owned());
                        if ne.mode.is_tree() && oe.mode.is_tree() {
                            stack.push((nid, oid));
                        } else if ne.mode.is_blob_or_symlink()
                            && oe.mode.is_blob_or_symlink()
                            && loose.contains_key(&nid)
                        {
                            add(pairs, nid, oid);
                        }
                    }
                    n.next();
                    o.next();
                }
            }
        }
    }
    Ok(())
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

/// Write the counted objects as a pack into `out`; returns what was written.
pub(crate) fn write(counted: Counted, out: &mut dyn Write) -> Result<PackStats, String> {
    let Counted {
        packed, loose, db, ..
    } = counted;
    let num = packed.len() + loose.len();
    let shift = loose.len();
    let loose = LooseEntries {
        plan: loose,
        db: db.clone(),
        next: 0,
    };
    let packed: Box<dyn Iterator<Item = gix_error::Result<Vec<output::Entry>>>> =
        if packed.is_empty() {
            Box::new(std::iter::empty())
        } else {
            let entries = output::entry::iter_from_counts(
                packed,
                db,
                Box::new(gix::progress::Discard),
                output::entry::iter_from_counts::Options {
                    thread_limit: None,
                    mode: output::entry::iter_from_counts::Mode::PackCopyAndBaseObjects,
                    allow_thin_pack: false,
                    chunk_size: 64,
                    version: gix_pack::data::Version::V2,
                    compression: Default::default(),
                },
            )
            .map_err(err)?;
            // gix numbers the packed objects from 0; the loose ones go first.
            Box::new(gix::parallel::InOrderIter::from(entries).map(move |chunk| {
                chunk.map(|mut entries| {
                    for e in &mut entries {
                        if let output::entry::Kind::DeltaRef { object_index } = &mut e.kind {
                            *object_index += shift;
                        }
                    }
                    entries
                })
            }))
        };
    let mut counter = CountingWrite { inner: out, n: 0 };
    let mut bytes = output::bytes::FromEntriesIter::new(
        loose.chain(packed),
        &mut counter,
        u32::try_from(num).map_err(|_| "too many objects for one pack".to_string())?,
        gix_pack::data::Version::V2,
        gix::hash::Kind::Sha1,
    );
    for step in bytes.by_ref() {
        step.map_err(err)?;
    }
    drop(bytes);
    Ok(PackStats {
        objects: num as u64,
        bytes: counter.n,
        redundant: 0,
    })
}

/// Loose objects as pack entries, a chunk at a time, each chunk encoded on
/// every core.
struct LooseEntries {
    plan: Vec<(ObjectId, Vec<Base>)>,
    db: Db,
    next: usize,
}

/// Loose objects encoded per chunk: bounds what is held before writing.
const LOOSE_CHUNK: usize = 256;

impl Iterator for LooseEntries {
    type Item = gix_error::Result<Vec<output::Entry>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.plan.len() {
            return None;
        }
        let end = (self.next + LOOSE_CHUNK).min(self.plan.len());
        let chunk = &self.plan[self.next..end];
        self.next = end;
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(chunk.len().div_ceil(16));
        let result: Result<Vec<output::Entry>, String> = if threads <= 1 {
            let mut bufs = (Vec::new(), Vec::new());
            chunk
                .iter()
                .map(|(id, bases)| loose_entry(&self.db, id, bases, &mut bufs))
                .collect()
        } else {
            let mut slots: Vec<Option<Result<output::Entry, String>>> = vec![None; chunk.len()];
            std::thread::scope(|scope| {
                let per = chunk.len().div_ceil(threads);
                for (part, slots) in chunk.chunks(per).zip(slots.chunks_mut(per)) {
                    let db = self.db.clone();
                    scope.spawn(move || {
                        let mut bufs = (Vec::new(), Vec::new());
                        for ((id, bases), slot) in part.iter().zip(slots) {
                            *slot = Some(loose_entry(&db, id, bases, &mut bufs));
                        }
                    });
                }
            });
            slots
                .into_iter()
                .map(|s| s.expect("every slot is filled"))
                .collect()
        };
        Some(result.map_err(|e| gix_error::Error::from_error(std::io::Error::other(e))))
    }
}

/// One loose object as a pack entry: a delta against the base that gives
/// the smallest one, when that is under half the object's size; else whole.
fn loose_entry(
    db: &Db,
    id: &ObjectId,
    bases: &[Base],
    (b1, b2): &mut (Vec<u8>, Vec<u8>),
) -> Result<output::Entry, String> {
    use gix::objs::Find;
    let obj = db
        .try_find(id, b1)
        .map_err(err)?
        .ok_or_else(|| format!("object {id} is missing"))?;
    let count = output::Count::from_data(*id, None);
    let size = obj.data.len();
    let mut best: Option<(Vec<u8>, Base)> = None;
    if (MIN_DELTA_OBJECT..=MAX_DELTA_OBJECT).contains(&size) {
        for base in bases {
            let (Base::InPack(_, b) | Base::Remote(b)) = base;
            let Some(base_obj) = db.try_find(b, b2).map_err(err)? else {
                continue;
            };
            if base_obj.kind != obj.kind || base_obj.data.len() > MAX_DELTA_OBJECT {
                continue;
            }
            let limit = best.as_ref().map_or(size / 2, |(d, _)| d.len() - 1);
            if let Some(d) = delta::Index::new(base_obj.data).delta(obj.data, limit) {
                best = Some((d, *base));
            }
        }
    }
    let Some((delta, base)) = best else {
        return output::Entry::from_data(&count, &obj, Default::default()).map_err(err);
    };
    let data = gix::objs::Data {
        kind: obj.kind,
        object_hash: obj.object_hash,
        data: &delta,
    };
    let mut entry = output::Entry::from_data(&count, &data, Default::default()).map_err(err)?;
    entry.kind = match base {
        Base::InPack(index, _) => output::entry::Kind::DeltaRef {
            object_index: index,
        },
        Base::Remote(id) => output::entry::Kind::DeltaOid { id },
    };
    Ok(entry)
}

struct CountingWrite<'a> {
    inner: &'a mut dyn Write,
    n: u64,
}

impl Write for CountingWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
