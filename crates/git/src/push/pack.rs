//! The pack a push sends, written with gix-pack.
//!
//! Objects: everything reachable from the new tips and not reachable from
//! the remote's advertised tips that exist locally. Counting finishes before
//! the first pack byte (the header carries the count); entries then stream
//! into the writer. Deltas stored in local packs are reused; no thin pack is
//! ever written (gix's thin mode deltas against bases it never checks the
//! remote has).

use std::io::Write;
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix_pack::data::output;

/// What a pack held and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Objects in the pack.
    pub objects: u64,
    /// Bytes of the pack on the wire.
    pub bytes: u64,
    /// Objects sent that the remote already had (the tree-diff expansion
    /// resends a boundary parent commit and its root tree).
    pub redundant: u64,
}

/// Objects counted and ready to write.
pub(crate) struct Counted {
    counts: Vec<output::Count>,
    db: gix::odb::Cache<gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>>,
    pub redundant: u64,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Count the objects to send for `new_tips`, given what the remote has.
pub(crate) fn count(
    repo: &gix::Repository,
    new_tips: &[ObjectId],
    remote_tips: &[ObjectId],
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
    ids.extend(extra_ids);
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
    // The tree-diff expansion adds each boundary parent commit (and its root
    // tree), which the remote has: count them as redundant.
    let redundant = if hidden.is_empty() {
        0
    } else {
        counts.iter().filter(|c| hidden_set.contains(&c.id)).count() as u64 * 2
    };
    Ok(Counted {
        counts,
        db,
        redundant,
    })
}

/// Write the counted objects as a pack into `out`; returns what was written.
pub(crate) fn write(counted: Counted, out: &mut dyn Write) -> Result<PackStats, String> {
    let num = counted.counts.len();
    let entries = output::entry::iter_from_counts(
        counted.counts,
        counted.db,
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
    let in_order = gix::parallel::InOrderIter::from(entries);
    let mut counter = CountingWrite { inner: out, n: 0 };
    let mut bytes = output::bytes::FromEntriesIter::new(
        in_order,
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
