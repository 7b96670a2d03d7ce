//! Which commits are new: the walks of a push's count. A small push on
//! top of what the remote advertised is walked to the advertised ids alone
//! ([`walk_to_advertised`]); otherwise git's walk by date against every
//! tip the remote has ([`walk`]). Both read each commit once, through one
//! reader.

use std::sync::atomic::AtomicBool;

use gix::ObjectId;

use super::{unreadable, PackError};
use crate::local::ObjectStoreError;
use crate::push::odb::{find_kind, Db};

/// A commit as the walks read it: the fields up to its committer line.
struct Commit {
    /// The committer's time (seconds).
    time: i64,
    tree: ObjectId,
    parents: Vec<ObjectId>,
    /// Where a pack stores it (`None`: loose).
    location: Option<gix_pack::data::entry::Location>,
}

/// Read commit `id`: its tree, parents and committer time, stopping at the
/// committer line (both walks' one reader).
fn read_commit(db: &Db, id: &ObjectId, buf: &mut Vec<u8>) -> Result<Commit, PackError> {
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
    Ok(Commit {
        time,
        tree: tree.ok_or_else(|| ObjectStoreError::Unreadable {
            what: format!("commit {id}"),
            detail: "it names no tree".into(),
        })?,
        parents,
        location,
    })
}

/// A new commit, as the walk read it.
pub(super) struct Walked {
    pub(super) id: ObjectId,
    pub(super) tree: ObjectId,
    /// Its first parent's tree; `None` for a root commit, or a parent this
    /// repository does not have (shallow).
    pub(super) parent_tree: Option<ObjectId>,
    pub(super) location: Option<gix_pack::data::entry::Location>,
    /// Its first parent (its tree is filled in when the walk ends).
    pub(super) first_parent: Option<ObjectId>,
}

/// At most this many new commits are found by [`walk_to_advertised`];
/// past it the full walk runs.
pub(super) const NEAR_WALK_LIMIT: usize = 16;

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
pub(super) fn walk_to_advertised(
    db: &Db,
    tips: &[ObjectId],
    advertised: &std::collections::HashSet<ObjectId>,
    limit: usize,
) -> Option<Vec<Walked>> {
    let mut buf = Vec::new();
    let mut read = |id: &ObjectId| read_commit(db, id, &mut buf).ok();
    let mut nodes: Vec<(ObjectId, Commit)> = Vec::new();
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
pub(super) fn walk(
    db: &Db,
    tips: &[ObjectId],
    hidden: &[ObjectId],
    interrupt: &AtomicBool,
) -> Result<Vec<Walked>, PackError> {
    use std::collections::{BinaryHeap, HashMap};
    struct Node {
        hidden: bool,
        queued_visible: bool,
        commit: Commit,
    }
    let mut nodes: HashMap<ObjectId, Node> = HashMap::new();
    let mut queue: BinaryHeap<(i64, u64, ObjectId)> = BinaryHeap::new();
    let mut visible_queued = 0usize;
    let mut seq = u64::MAX;
    let mut buf = Vec::new();
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
        let n = Node {
            hidden: hide,
            queued_visible: !hide,
            commit: read_commit(db, &id, buf)?,
        };
        if !hide {
            *visible_queued += 1;
        }
        seq -= 1;
        queue.push((n.commit.time, seq, id));
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
        let parents = n.commit.parents.clone();
        if !hide {
            out.push(Walked {
                id,
                tree: n.commit.tree,
                parent_tree: None,
                location: n.commit.location.take(),
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
        w.parent_tree = w
            .first_parent
            .and_then(|p| nodes.get(&p))
            .map(|n| n.commit.tree);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! The walks' stop rule: nothing the remote has is walked past, nothing
    //! it lacks is left out.

    use std::collections::HashSet;
    use std::path::Path;
    use std::sync::atomic::AtomicBool;

    use gix::ObjectId;
    use sluice_testkit::repo;

    use super::{walk, walk_to_advertised, Db};

    fn commit(dir: &Path, message: &str) -> ObjectId {
        repo::git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
        head(dir)
    }

    fn head(dir: &Path) -> ObjectId {
        let hex = repo::git(dir, &["rev-parse", "HEAD"]);
        ObjectId::from_hex(hex.trim().as_bytes()).expect("an object id")
    }

    fn db(dir: &Path) -> Db {
        let repo = gix::open(dir).expect("open the repository");
        repo.into_sync().objects.to_cache_arc()
    }

    fn ids(walked: &[super::Walked]) -> HashSet<ObjectId> {
        walked.iter().map(|w| w.id).collect()
    }

    /// `a ← b ← c ← d` on main.
    fn line(dir: &Path) -> [ObjectId; 4] {
        repo::init_work(dir).expect("init");
        ["a", "b", "c", "d"].map(|m| commit(dir, m))
    }

    #[test]
    fn the_full_walk_stops_at_what_the_remote_has() {
        let dir = tempfile::tempdir().expect("tempdir");
        let [a, b, c, d] = line(dir.path());
        let db = db(dir.path());
        let no = AtomicBool::new(false);
        let new = walk(&db, &[d], &[b], &no).expect("walks");
        assert_eq!(ids(&new), HashSet::from([c, d]));
        let first = new.iter().find(|w| w.id == c).expect("c is new");
        assert_eq!(first.first_parent, Some(b));
        assert!(
            first.parent_tree.is_some(),
            "the parent the remote has was read"
        );
        let all = walk(&db, &[d], &[], &no).expect("walks");
        assert_eq!(ids(&all), HashSet::from([a, b, c, d]));
        assert!(walk(&db, &[d], &[d], &no).expect("walks").is_empty());
    }

    #[test]
    fn a_commit_reachable_from_a_hidden_tip_is_left_out_past_a_merge() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = dir.path();
        repo::init_work(w).expect("init");
        let a = commit(w, "a");
        let b = commit(w, "b");
        repo::git(w, &["checkout", "-q", "-b", "side", &a.to_string()]);
        let s = commit(w, "s");
        repo::git(w, &["checkout", "-q", "main"]);
        repo::git(w, &["merge", "-q", "--no-ff", "-m", "m", "side"]);
        let m = head(w);
        let new = walk(&db(w), &[m], &[s], &AtomicBool::new(false)).expect("walks");
        assert_eq!(ids(&new), HashSet::from([m, b]), "a and s are the remote's");
    }

    #[test]
    fn the_near_walk_stops_at_advertised_ids_and_gives_up_past_its_limit_or_at_a_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let [a, b, c, d] = line(dir.path());
        let db = db(dir.path());
        let advertised = HashSet::from([b]);
        let new = walk_to_advertised(&db, &[d], &advertised, 16).expect("near");
        assert_eq!(new.iter().map(|w| w.id).collect::<Vec<_>>(), vec![d, c]);
        assert_eq!(new[1].first_parent, Some(b));
        assert!(new[1].parent_tree.is_some());
        assert!(
            walk_to_advertised(&db, &[d], &advertised, 1).is_none(),
            "past the limit"
        );
        assert!(
            walk_to_advertised(&db, &[d], &HashSet::new(), 16).is_none(),
            "a root reached: the full walk decides"
        );
        let at_a = HashSet::from([a]);
        assert_eq!(
            walk_to_advertised(&db, &[d], &at_a, 16).map(|w| w.len()),
            Some(3)
        );
    }
}
