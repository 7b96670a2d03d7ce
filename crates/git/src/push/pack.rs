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
//! (its base). Each pairing is then encoded (`push::delta`) and
//! kept when it is under half the object's size. A base that is itself
//! sent goes before its delta (an OFS delta); a base that is not sent is
//! one the remote has — every object of a parent's tree is either counted
//! or reachable from the tips the remote advertised — and is named by id
//! (a REF delta: a thin pack, unless the remote said `no-thin`). Objects
//! stored in packs that gix-pack would write whole (stored whole, or as a
//! delta against an object not sent) get the same treatment against the
//! versions the remote has. gix's own thin mode is never used: it deltas
//! against bases it never checks the remote has.
//!
//! Which commits are new is our own walk (by date, like git's): each
//! commit is read once and the walk stops as soon as only commits the
//! remote has are queued. With no remote tips to stop at, a local pack that
//! the bitmaps show to be exactly what the tips reach is sent as it is
//! (`push::bitmap`); otherwise gix-pack counts everything.
//!
//! Counting and writing fail with a `PackError` that keeps the sides
//! apart: the local object store (an object missing, of another kind, or
//! unreadable) and this side's limits are `local-error`, never tried again;
//! only a failure of the sink — the connection the pack is written to — is
//! the wire's, classed from it by the caller.

use std::io::Write;
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix_pack::data::output;

use super::odb::{find_kind, Db};
use super::{bitmap, delta};
use crate::local::ObjectStoreError;

/// What a pack held and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Objects in the pack.
    pub objects: u64,
    /// Bytes of the pack on the wire.
    pub bytes: u64,
}

/// Objects counted and ready to write.
pub(crate) struct Counted {
    /// Objects stored in local packs, written by gix-pack.
    packed: Vec<output::Count>,
    /// Loose objects, in pack order, each with the bases to try: every
    /// in-pack base comes first.
    loose: Vec<(ObjectId, Vec<Base>)>,
    db: Db,
    /// A local pack that is exactly what the new tips reach, sent as it is.
    whole: Option<bitmap::WholePack>,
    /// The objects to send, chosen from a pack's bitmaps and copied as
    /// that pack stores them.
    reuse: Option<bitmap::Reuse>,
    /// Packed objects gix-pack would write whole, encoded instead as REF
    /// deltas against a previous version the remote has.
    thin_entries: std::collections::HashMap<ObjectId, output::Entry>,
}

impl Counted {
    /// How many objects the pack will hold.
    pub(crate) fn objects(&self) -> u64 {
        if let Some(reuse) = &self.reuse {
            return reuse.len() as u64;
        }
        if let Some(whole) = &self.whole {
            return u64::from(whole.objects);
        }
        (self.packed.len() + self.loose.len()) as u64
    }
}

/// A writer that counts what goes through it and tells `callback` (at most
/// every 100 ms, and once at the end): stage `sending`, the pack's object
/// count, the bytes written so far.
pub(crate) struct ProgressWriter<'a> {
    inner: &'a mut dyn Write,
    objects: u64,
    bytes: u64,
    callback: Option<crate::progress::ProgressCallback>,
    last: Option<std::time::Instant>,
}

impl<'a> ProgressWriter<'a> {
    pub(crate) fn new(
        inner: &'a mut dyn Write,
        objects: u64,
        callback: Option<crate::progress::ProgressCallback>,
    ) -> Self {
        ProgressWriter {
            inner,
            objects,
            bytes: 0,
            callback,
            last: None,
        }
    }

    fn report(&mut self, force: bool) {
        let Some(cb) = &self.callback else { return };
        let now = std::time::Instant::now();
        if !force
            && self
                .last
                .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        cb(&crate::Progress {
            stage: "sending".into(),
            objects: self.objects,
            bytes: self.bytes,
        });
    }
}

impl Write for ProgressWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        self.report(false);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()?;
        self.report(true);
        Ok(())
    }
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

/// Why counting or writing a push's pack failed. Everything but [`PackError::Sink`]
/// is this side's (`local-error`); the sink is the connection to the
/// remote, whose failures the caller classes from the wire.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PackError {
    /// The local object store could not give an object the pack needs.
    #[error(transparent)]
    ObjectStore(#[from] ObjectStoreError),
    /// The caller's cancel stopped the count.
    #[error("interrupted")]
    Interrupted,
    /// More objects than one pack can hold.
    #[error("{objects} objects are too many for one pack")]
    TooMany {
        /// Objects counted.
        objects: usize,
    },
    /// A counting, lookup or encoding thread panicked.
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
    /// Writing to the sink (the connection to the remote) failed.
    #[error("{0}")]
    Sink(std::io::Error),
}

impl PackError {
    /// The attempt's error at `phase`: a failure of the sink as `wire`
    /// classes it (the remote's side), anything else `local-error`.
    pub(crate) fn into_git(
        self,
        phase: crate::error::GitPhase,
        wire: impl FnOnce(std::io::Error) -> crate::GitError,
    ) -> crate::GitError {
        match self {
            PackError::Sink(e) => wire(e),
            local => crate::local::local(phase, format_args!("writing the pack: {local}")),
        }
    }
}

/// Threads to use: one per core. Asked once per process: the answer reads
/// cgroup files, a few hundred microseconds a time.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// A failure reading object `id` through the repository.
fn unreadable(id: &ObjectId, e: &(dyn std::error::Error + 'static)) -> PackError {
    ObjectStoreError::unreadable(format!("object {id}"), e).into()
}

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

/// A new commit, as the walk read it.
struct Walked {
    id: ObjectId,
    tree: ObjectId,
    /// Its first parent's tree; `None` for a root commit, or a parent this
    /// repository does not have (shallow).
    parent_tree: Option<ObjectId>,
    location: Option<gix_pack::data::entry::Location>,
    /// Its first parent (its tree is filled in when the walk ends).
    first_parent: Option<ObjectId>,
}

/// At most this many new commits are found by [`walk_to_advertised`];
/// past it the full walk runs.
const NEAR_WALK_LIMIT: usize = 16;

/// The new commits of a small push, found without reading what the remote
/// advertised: a walk from `tips` that stops at every commit whose id the
/// remote advertised (a set lookup, no object read). `None` when it would
/// pass `limit` commits, reach a root, or meet a commit this repository
/// lacks: the caller then runs the full walk ([`walk`]), which reads every
/// advertised tip (with 100,000 refs, 100,000 commit reads).
///
/// Every boundary is a commit the remote has, so nothing the remote lacks
/// is left out. Unlike the full walk, a commit the remote holds only below
/// an advertised tip (not itself advertised) is sent again: at most `limit`
/// commits' changes, never a missing object.
fn walk_to_advertised(
    db: &Db,
    tips: &[ObjectId],
    advertised: &std::collections::HashSet<ObjectId>,
    limit: usize,
) -> Option<Vec<Walked>> {
    struct Node {
        time: i64,
        tree: ObjectId,
        parents: Vec<ObjectId>,
        location: Option<gix_pack::data::entry::Location>,
    }
    let mut buf = Vec::new();
    let mut read = |id: &ObjectId| -> Option<Node> {
        let (data, location) = find_kind(db, id, gix::object::Kind::Commit, &mut buf).ok()?;
        let mut tree = None;
        let mut parents = Vec::new();
        let mut time = 0;
        for token in gix::objs::CommitRefIter::from_bytes(data.data, data.object_hash) {
            use gix::objs::commit::ref_iter::Token;
            match token.ok()? {
                Token::Tree { id } => tree = Some(id),
                Token::Parent { id } => parents.push(id),
                Token::Committer { signature } => {
                    time = signature.seconds();
                    break;
                }
                _ => {}
            }
        }
        Some(Node {
            time,
            tree: tree?,
            parents,
            location,
        })
    };
    let mut nodes: Vec<(ObjectId, Node)> = Vec::new();
    let mut pending: Vec<ObjectId> = tips.to_vec();
    while let Some(id) = pending.pop() {
        if advertised.contains(&id) || nodes.iter().any(|(n, _)| *n == id) {
            continue;
        }
        if nodes.len() == limit {
            return None;
        }
        let node = read(&id)?;
        if node.parents.is_empty() {
            return None;
        }
        pending.extend(node.parents.iter().copied());
        nodes.push((id, node));
    }
    // Newest first, as the full walk gives them.
    nodes.sort_by_key(|n| std::cmp::Reverse(n.1.time));
    let mut out = Vec::with_capacity(nodes.len());
    for (id, n) in &nodes {
        let first_parent = n.parents.first().copied();
        let parent_tree = match first_parent {
            Some(p) => match nodes.iter().find(|(q, _)| *q == p) {
                Some((_, pn)) => Some(pn.tree),
                None => Some(read(&p)?.tree),
            },
            None => None,
        };
        out.push(Walked {
            id: *id,
            tree: n.tree,
            parent_tree,
            location: n.location.clone(),
            first_parent,
        });
    }
    Some(out)
}

/// The commits reachable from `tips` and not from `hidden`, newest first
/// (by committer time), each read once.
///
/// git's walk: commits come off a queue by date; a hidden commit marks its
/// parents hidden; the walk stops when only hidden commits are queued. A
/// commit is left out only when it is reachable from a hidden tip (the
/// remote has it); clock skew can at worst let a commit the remote has
/// through, which costs bytes, never correctness.
fn walk(
    db: &Db,
    tips: &[ObjectId],
    hidden: &[ObjectId],
    interrupt: &AtomicBool,
) -> Result<Vec<Walked>, PackError> {
    use std::collections::{BinaryHeap, HashMap};
    struct Node {
        hidden: bool,
        queued_visible: bool,
        time: i64,
        tree: ObjectId,
        parents: Vec<ObjectId>,
        location: Option<gix_pack::data::entry::Location>,
    }
    let mut nodes: HashMap<ObjectId, Node> = HashMap::new();
    let mut queue: BinaryHeap<(i64, u64, ObjectId)> = BinaryHeap::new();
    let mut visible_queued = 0usize;
    let mut seq = u64::MAX;
    let mut buf = Vec::new();
    let read = |id: &ObjectId, buf: &mut Vec<u8>| -> Result<Node, PackError> {
        let (data, location) = find_kind(db, id, gix::object::Kind::Commit, buf)?;
        let mut tree = None;
        let mut parents = Vec::new();
        let mut time = 0;
        for token in gix::objs::CommitRefIter::from_bytes(data.data, data.object_hash) {
            use gix::objs::commit::ref_iter::Token;
            match token.map_err(|e| unreadable(id, &e))? {
                Token::Tree { id } => tree = Some(id),
                Token::Parent { id } => parents.push(id),
                Token::Committer { signature } => {
                    time = signature.seconds();
                    break;
                }
                _ => {}
            }
        }
        Ok(Node {
            hidden: false,
            queued_visible: false,
            time,
            tree: tree.ok_or_else(|| ObjectStoreError::Unreadable {
                what: format!("commit {id}"),
                detail: "it names no tree".into(),
            })?,
            parents,
            location,
        })
    };
    // Queue `id`, hidden or not; a commit already known only gains the mark.
    let mut enqueue = |id: ObjectId,
                       hide: bool,
                       nodes: &mut HashMap<ObjectId, Node>,
                       queue: &mut BinaryHeap<(i64, u64, ObjectId)>,
                       visible_queued: &mut usize,
                       buf: &mut Vec<u8>|
     -> Result<(), PackError> {
        if let Some(n) = nodes.get_mut(&id) {
            if hide && !n.hidden {
                n.hidden = true;
                if n.queued_visible {
                    n.queued_visible = false;
                    *visible_queued -= 1;
                }
            }
            return Ok(());
        }
        let mut n = read(&id, buf)?;
        n.hidden = hide;
        n.queued_visible = !hide;
        if !hide {
            *visible_queued += 1;
        }
        seq -= 1;
        queue.push((n.time, seq, id));
        nodes.insert(id, n);
        Ok(())
    };
    for h in hidden {
        enqueue(
            *h,
            true,
            &mut nodes,
            &mut queue,
            &mut visible_queued,
            &mut buf,
        )?;
    }
    for t in tips {
        enqueue(
            *t,
            false,
            &mut nodes,
            &mut queue,
            &mut visible_queued,
            &mut buf,
        )?;
    }
    let mut out = Vec::new();
    while visible_queued > 0 {
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(PackError::Interrupted);
        }
        let Some((_, _, id)) = queue.pop() else { break };
        let n = nodes.get_mut(&id).expect("queued commits are known");
        let hide = n.hidden;
        if n.queued_visible {
            n.queued_visible = false;
            visible_queued -= 1;
        }
        let parents = n.parents.clone();
        if !hide {
            out.push(Walked {
                id,
                tree: n.tree,
                parent_tree: None,
                location: n.location.take(),
                first_parent: parents.first().copied(),
            });
        }
        for p in parents.iter() {
            match enqueue(
                *p,
                hide,
                &mut nodes,
                &mut queue,
                &mut visible_queued,
                &mut buf,
            ) {
                Ok(()) => {}
                // A parent we do not have (a shallow repository): the
                // remote must have it, or the push is refused.
                Err(_) if !nodes.contains_key(p) => {}
                Err(e) => return Err(e),
            }
        }
    }
    // Every parent of a new commit was queued, so read, unless missing.
    for w in &mut out {
        w.parent_tree = w.first_parent.and_then(|p| nodes.get(&p)).map(|n| n.tree);
    }
    Ok(out)
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

/// Write the counted objects as a pack into `out`; returns what was written.
/// A failure of `out` is [`PackError::Sink`]; any other is this side's.
pub(crate) fn write(counted: Counted, out: &mut dyn Write) -> Result<PackStats, PackError> {
    let Counted {
        packed,
        loose,
        db,
        whole,
        reuse,
        mut thin_entries,
    } = counted;
    if let Some(reuse) = reuse {
        let num = reuse.len();
        let entries = reuse
            .entries(db.clone(), thin_entries)
            .map(|c| Ok(c?.into_iter().map(Item::Entry).collect()));
        return write_entries(entries, num, &db, out);
    }
    if let Some(whole) = whole {
        return write_whole(whole, out);
    }
    let num = packed.len() + loose.len();
    let shift = loose.len();
    let loose = LooseEntries::new(loose, &db);
    let packed: Box<dyn Iterator<Item = Result<Vec<Item>, PackError>>> = if packed.is_empty() {
        Box::new(std::iter::empty())
    } else {
        let entries = output::entry::iter_from_counts(
            packed,
            db.clone(),
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
        .map_err(|e| ObjectStoreError::unreadable("the packed objects to send", &e))?;
        // gix numbers the packed objects from 0; the loose ones go first.
        Box::new(gix::parallel::InOrderIter::from(entries).map(move |chunk| {
            let mut entries = chunk
                .map_err(|e| ObjectStoreError::unreadable("the packed objects to send", &e))?;
            for e in &mut entries {
                match &mut e.kind {
                    output::entry::Kind::DeltaRef { object_index } => {
                        *object_index += shift;
                    }
                    output::entry::Kind::Base(_) => {
                        if let Some(thin) = thin_entries.remove(&e.id) {
                            *e = thin;
                        }
                    }
                    output::entry::Kind::DeltaOid { .. } => {}
                }
            }
            Ok(entries.into_iter().map(Item::Entry).collect())
        }))
    };
    write_entries(loose.chain(packed), num, &db, out)
}

/// A local pack that is exactly the push, copied as it is into `out`.
fn write_whole(whole: bitmap::WholePack, out: &mut dyn Write) -> Result<PackStats, PackError> {
    let mut counter = CountingWrite::new(out);
    // In 1 MiB writes: each write to the wire costs a probe of the
    // connection too, and 8 KiB writes of a 20 MB pack were 2,500.
    let mut file = std::io::BufReader::with_capacity(1 << 20, whole.file);
    if let Err(e) = std::io::copy(&mut file, &mut counter) {
        return Err(match counter.failed.take() {
            Some(sink) => PackError::Sink(sink),
            None => ObjectStoreError::unreadable("the local pack sent whole", &e).into(),
        });
    }
    Ok(PackStats {
        objects: u64::from(whole.objects),
        bytes: counter.n,
    })
}

/// One object of the pack as it is written.
pub(crate) enum Item {
    /// Encoded in memory: small objects, deltas, entries copied as a local
    /// pack stores them.
    Entry(output::Entry),
    /// A large loose object sent whole: inflated from its file and
    /// deflated into the pack as it is written, never held whole.
    Large {
        id: ObjectId,
        kind: gix::object::Kind,
        size: u64,
    },
}

/// A version 2 pack of `num` objects from `items` (chunks in pack order),
/// written to `out` as it is produced: each entry's header and data, then
/// the trailer (the SHA-1 of everything before it). The input and the
/// sink each record their own failure, typed, as it happens.
fn write_entries(
    items: impl Iterator<Item = Result<Vec<Item>, PackError>>,
    num: usize,
    db: &Db,
    out: &mut dyn Write,
) -> Result<PackStats, PackError> {
    let objects = u32::try_from(num).map_err(|_| PackError::TooMany { objects: num })?;
    let mut w = PackOut {
        out: CountingWrite::new(out),
        hasher: gix::hash::hasher(gix::hash::Kind::Sha1),
    };
    let written = write_items(items, objects, db, &mut w);
    let sink = |w: &mut PackOut<'_>, e: PackError| match w.out.failed.take() {
        Some(sink) => PackError::Sink(sink),
        None => e,
    };
    if let Err(e) = written {
        return Err(sink(&mut w, e));
    }
    let PackOut { mut out, hasher } = w;
    let digest = hasher
        .try_finalize()
        .map_err(|e| ObjectStoreError::unreadable("the pack's checksum", &e))?;
    if let Err(e) = out.write_all(digest.as_slice()).and_then(|_| out.flush()) {
        return Err(PackError::Sink(out.failed.take().unwrap_or(e)));
    }
    Ok(PackStats {
        objects: num as u64,
        bytes: out.n,
    })
}

fn write_items(
    items: impl Iterator<Item = Result<Vec<Item>, PackError>>,
    objects: u32,
    db: &Db,
    w: &mut PackOut<'_>,
) -> Result<(), PackError> {
    let io = |e: std::io::Error| PackError::Sink(e);
    w.write_all(&gix_pack::data::header::encode(
        gix_pack::data::Version::V2,
        objects,
    ))
    .map_err(io)?;
    // Where each entry starts (`None`: an entry gix-pack marked invalid,
    // left out as gix-pack's writer leaves it out).
    let mut offsets: Vec<Option<u64>> = Vec::with_capacity(objects as usize);
    let objects_dir = db.store_ref().path().to_owned();
    let mut zbuf = Vec::new();
    for chunk in items {
        for item in chunk? {
            let here = w.out.n;
            match item {
                Item::Entry(e) => {
                    if e.is_invalid() {
                        offsets.push(None);
                        continue;
                    }
                    if let output::entry::Kind::DeltaRef { object_index } = e.kind {
                        if offsets.get(object_index).copied().flatten().is_none() {
                            return Err(ObjectStoreError::unreadable(
                                format!("the delta base of {}", e.id),
                                &std::io::Error::other("its base is not in the pack"),
                            )
                            .into());
                        }
                    }
                    offsets.push(Some(here));
                    let header = e.to_entry_header(gix_pack::data::Version::V2, |index| {
                        here - offsets[index].expect("checked above")
                    });
                    header.write_to(e.decompressed_size as u64, w).map_err(io)?;
                    w.write_all(&e.compressed_data).map_err(io)?;
                }
                Item::Large { id, kind, size } => {
                    offsets.push(Some(here));
                    let header = match kind {
                        gix::object::Kind::Blob => gix_pack::data::entry::Header::Blob,
                        gix::object::Kind::Tree => gix_pack::data::entry::Header::Tree,
                        gix::object::Kind::Commit => gix_pack::data::entry::Header::Commit,
                        gix::object::Kind::Tag => gix_pack::data::entry::Header::Tag,
                    };
                    header.write_to(size, w).map_err(io)?;
                    write_large(&objects_dir, db, &id, size, w, &mut zbuf)?;
                }
            }
        }
    }
    Ok(())
}

/// The pack's sink: counted, and hashed for the trailer.
struct PackOut<'a> {
    out: CountingWrite<'a>,
    hasher: gix::hash::Hasher,
}

impl Write for PackOut<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Loose objects larger than this are never held whole to be written:
/// sent whole, each is inflated from its file and deflated into the pack
/// a buffer at a time (a loose, incompressible 48 MiB file held three
/// times over made a push's peak 1.5 times git's).
const LARGE_OBJECT: u64 = 4 << 20;

/// The inflate and deflate buffers of a large object.
const STREAM_BUF: usize = 256 * 1024;

/// A loose object's file, its header read: the content follows.
struct LooseFile {
    kind: gix::object::Kind,
    size: u64,
    reader: std::io::BufReader<std::fs::File>,
    state: gix::zlib::Decompress,
    /// Content inflated with the header.
    first: Vec<u8>,
}

/// Open loose object `id` under `objects` and read its header; `None`
/// when it is not loose (packed since it was counted).
fn open_loose(objects: &std::path::Path, id: &ObjectId) -> std::io::Result<Option<LooseFile>> {
    let hex = id.to_hex().to_string();
    let path = objects.join(&hex[..2]).join(&hex[2..]);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut reader = std::io::BufReader::with_capacity(16 * 1024, file);
    let mut state = gix::zlib::Decompress::new();
    let mut head = vec![0u8; 8 * 1024];
    let n = gix::zlib::stream::inflate::read(&mut reader, &mut state, &mut head)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a loose object header");
    let nul = head[..n].iter().position(|&b| b == 0).ok_or_else(bad)?;
    let header = std::str::from_utf8(&head[..nul]).map_err(|_| bad())?;
    let (kind, size) = header.split_once(' ').ok_or_else(bad)?;
    let kind = gix::object::Kind::from_bytes(kind.as_bytes()).map_err(|_| bad())?;
    let size: u64 = size.parse().map_err(|_| bad())?;
    let first = head[nul + 1..n].to_vec();
    Ok(Some(LooseFile {
        kind,
        size,
        reader,
        state,
        first,
    }))
}

impl LooseFile {
    /// Inflate the content into `out`, a buffer at a time; exactly `size`
    /// bytes or an error.
    fn copy_into(
        mut self,
        out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut done = self.first.len() as u64;
        if done > self.size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a loose object longer than its header says",
            ));
        }
        out(&self.first)?;
        let mut buf = vec![0u8; STREAM_BUF];
        while done < self.size {
            let want = (self.size - done).min(buf.len() as u64) as usize;
            let n = gix::zlib::stream::inflate::read(
                &mut self.reader,
                &mut self.state,
                &mut buf[..want],
            )?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a loose object shorter than its header says",
                ));
            }
            out(&buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// The whole content, in one buffer of its size (the one copy).
    fn read_all(self) -> std::io::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.size as usize);
        self.copy_into(&mut |b| {
            data.extend_from_slice(b);
            Ok(())
        })?;
        Ok(data)
    }
}

/// Deflate large object `id` (`size` bytes) into `w` as it is inflated
/// from its loose file; from the object store when it is no longer loose.
fn write_large(
    objects: &std::path::Path,
    db: &Db,
    id: &ObjectId,
    size: u64,
    w: &mut PackOut<'_>,
    buf: &mut Vec<u8>,
) -> Result<(), PackError> {
    let mut z = gix::zlib::stream::deflate::Write::new(&mut *w, gix::zlib::Compression::default());
    let streamed = match open_loose(objects, id) {
        Err(e) => Err(unreadable(id, &e)),
        Ok(Some(file)) if file.size == size => file
            .copy_into(&mut |b| z.write_all(b))
            .map_err(PackError::Sink),
        Ok(_) => {
            use gix::objs::Find;
            let data = db
                .try_find(id, buf)
                .map_err(|e| unreadable(id, &e))?
                .ok_or(ObjectStoreError::Missing {
                    id: *id,
                    kind: None,
                })?;
            z.write_all(data.data).map_err(PackError::Sink)
        }
    };
    let streamed = streamed.and_then(|_| z.flush().map_err(PackError::Sink));
    drop(z);
    match streamed {
        // Not the sink's failure (it keeps its own): the loose file's.
        Err(PackError::Sink(e)) if w.out.failed.is_none() => Err(unreadable(id, &e)),
        other => other,
    }
}

/// Loose objects as pack entries, a chunk at a time, each chunk encoded on
/// every core.
struct LooseEntries {
    plan: Vec<(ObjectId, Vec<Base>)>,
    /// One per thread, kept across chunks (with their delta-base caches).
    workers: Vec<Worker>,
    next: usize,
}

impl LooseEntries {
    fn new(plan: Vec<(ObjectId, Vec<Base>)>, db: &Db) -> LooseEntries {
        let threads = cores().min(plan.len().div_ceil(LOOSE_PER_THREAD)).max(1);
        LooseEntries {
            plan,
            workers: (0..threads).map(|_| Worker::new(db.clone())).collect(),
            next: 0,
        }
    }
}

/// Loose objects encoded per chunk: bounds what is held before writing.
const LOOSE_CHUNK: usize = 256;
/// Fewer objects than this per thread are not worth a thread.
const LOOSE_PER_THREAD: usize = 16;

impl Iterator for LooseEntries {
    type Item = Result<Vec<Item>, PackError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.plan.len() {
            return None;
        }
        let end = (self.next + LOOSE_CHUNK).min(self.plan.len());
        let chunk = &self.plan[self.next..end];
        self.next = end;
        let threads = self
            .workers
            .len()
            .min(chunk.len().div_ceil(LOOSE_PER_THREAD));
        let result: Result<Vec<Item>, PackError> = if threads <= 1 {
            let w = &mut self.workers[0];
            chunk.iter().map(|(id, bases)| w.entry(id, bases)).collect()
        } else {
            // Contiguous parts: a base placed just before its delta is
            // usually in the same part, and in that worker's recent objects.
            let mut slots: Vec<Option<Result<Item, PackError>>> =
                std::iter::repeat_with(|| None).take(chunk.len()).collect();
            let span = tracing::Span::current();
            std::thread::scope(|scope| {
                let per = chunk.len().div_ceil(threads);
                for ((part, slots), w) in chunk
                    .chunks(per)
                    .zip(slots.chunks_mut(per))
                    .zip(self.workers.iter_mut())
                {
                    let span = span.clone();
                    scope.spawn(move || {
                        let _attempt = span.enter();
                        for ((id, bases), slot) in part.iter().zip(slots) {
                            *slot = Some(w.entry(id, bases));
                        }
                    });
                }
            });
            slots
                .into_iter()
                .map(|s| s.expect("every slot is filled"))
                .collect()
        };
        Some(result)
    }
}

/// A pack entry for object `id` (a `kind`) as `delta` against `base`.
fn delta_entry(
    id: &ObjectId,
    kind: gix::object::Kind,
    delta: &[u8],
    base: Base,
) -> Result<output::Entry, PackError> {
    let d = gix::objs::Data {
        kind,
        object_hash: gix::hash::Kind::Sha1,
        data: delta,
    };
    let count = output::Count::from_data(*id, None);
    let mut entry =
        output::Entry::from_data(&count, &d, Default::default()).map_err(|e| unreadable(id, &e))?;
    entry.kind = match base {
        Base::InPack(index, _) => output::entry::Kind::DeltaRef {
            object_index: index,
        },
        Base::Remote(id) => output::entry::Kind::DeltaOid { id },
    };
    Ok(entry)
}

/// Objects a worker keeps after encoding them (as bases for what follows).
const RECENT: usize = 16;
/// Objects larger than this are not kept.
const RECENT_MAX_SIZE: usize = 1 << 20;

/// What one encoding thread owns: an object database handle and the
/// objects it encoded last.
struct Worker {
    db: Db,
    recent: std::collections::VecDeque<(ObjectId, gix::object::Kind, std::sync::Arc<[u8]>)>,
    buf: Vec<u8>,
}

impl Worker {
    fn new(db: Db) -> Worker {
        Worker {
            db,
            recent: Default::default(),
            buf: Vec::new(),
        }
    }

    fn object(
        &mut self,
        id: &ObjectId,
    ) -> Result<(gix::object::Kind, std::sync::Arc<[u8]>), PackError> {
        use gix::objs::Find;
        if let Some((_, kind, data)) = self.recent.iter().find(|(i, _, _)| i == id) {
            return Ok((*kind, data.clone()));
        }
        let obj = self
            .db
            .try_find(id, &mut self.buf)
            .map_err(|e| unreadable(id, &e))?
            .ok_or(ObjectStoreError::Missing {
                id: *id,
                kind: None,
            })?;
        Ok((obj.kind, obj.data.into()))
    }

    fn remember(&mut self, id: ObjectId, kind: gix::object::Kind, data: std::sync::Arc<[u8]>) {
        if data.len() <= RECENT_MAX_SIZE {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((id, kind, data));
        }
    }

    /// The smallest delta of `data` against one of `bases`, if one is
    /// under half its size.
    fn best_delta(
        &mut self,
        kind: gix::object::Kind,
        data: &[u8],
        bases: &[Base],
    ) -> Option<(Vec<u8>, Base)> {
        let size = data.len();
        let mut best: Option<(Vec<u8>, Base)> = None;
        if !(MIN_DELTA_OBJECT..=MAX_DELTA_OBJECT).contains(&size) {
            return None;
        }
        for base in bases {
            let (Base::InPack(_, b) | Base::Remote(b)) = base;
            let Ok((base_kind, base_data)) = self.object(b) else {
                continue;
            };
            if base_kind != kind || base_data.len() > MAX_DELTA_OBJECT {
                continue;
            }
            let limit = best.as_ref().map_or(size / 2, |(d, _)| d.len() - 1);
            if let Some(d) = delta::Index::new(&base_data).delta(data, limit) {
                best = Some((d, *base));
            }
        }
        best
    }

    /// A REF delta of object `id` against one of `bases` (objects the
    /// remote has), when one is under half its size.
    fn thin_entry(&mut self, id: &ObjectId, bases: &[ObjectId]) -> Option<output::Entry> {
        let (kind, data) = self.object(id).ok()?;
        let bases: Vec<Base> = bases.iter().map(|b| Base::Remote(*b)).collect();
        let (delta, base) = self.best_delta(kind, &data, &bases)?;
        delta_entry(id, kind, &delta, base).ok()
    }

    /// One loose object as a pack entry: a delta against the base that
    /// gives the smallest one, when that is under half the object's size;
    /// else whole.
    fn entry(&mut self, id: &ObjectId, bases: &[Base]) -> Result<Item, PackError> {
        if let Some(item) = self.large(id, bases)? {
            return Ok(item);
        }
        let (kind, data) = self.object(id)?;
        let entry = match self.best_delta(kind, &data, bases) {
            None => {
                let whole = gix::objs::Data {
                    kind,
                    object_hash: gix::hash::Kind::Sha1,
                    data: &data,
                };
                let count = output::Count::from_data(*id, None);
                output::Entry::from_data(&count, &whole, Default::default())
                    .map_err(|e| unreadable(id, &e))?
            }
            Some((delta, base)) => delta_entry(id, kind, &delta, base)?,
        };
        self.remember(*id, kind, data);
        Ok(Item::Entry(entry))
    }

    /// A loose object larger than [`LARGE_OBJECT`]: a delta when one of
    /// `bases` gives one (the object read once, into one buffer of its
    /// size, and dropped before the next), else sent whole as the pack is
    /// written ([`Item::Large`]). `None`: not loose, or not large.
    fn large(&mut self, id: &ObjectId, bases: &[Base]) -> Result<Option<Item>, PackError> {
        let objects = self.db.store_ref().path().to_owned();
        let Some(file) = open_loose(&objects, id).map_err(|e| unreadable(id, &e))? else {
            return Ok(None);
        };
        if file.size <= LARGE_OBJECT {
            return Ok(None);
        }
        let (kind, size) = (file.kind, file.size);
        if !bases.is_empty() && size <= MAX_DELTA_OBJECT as u64 {
            let data = file.read_all().map_err(|e| unreadable(id, &e))?;
            if let Some((delta, base)) = self.best_delta(kind, &data, bases) {
                return Ok(Some(Item::Entry(delta_entry(id, kind, &delta, base)?)));
            }
        }
        Ok(Some(Item::Large {
            id: *id,
            kind,
            size,
        }))
    }
}

/// The sink, counting what it took and keeping a copy of its first
/// failure (so a failed write is told from a failed read).
struct CountingWrite<'a> {
    inner: &'a mut dyn Write,
    n: u64,
    failed: Option<std::io::Error>,
}

impl<'a> CountingWrite<'a> {
    fn new(inner: &'a mut dyn Write) -> CountingWrite<'a> {
        CountingWrite {
            inner,
            n: 0,
            failed: None,
        }
    }

    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(crate::local::copy_io(e));
            }
        }
        r
    }
}

impl Write for CountingWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        let n = self.note(r)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}
