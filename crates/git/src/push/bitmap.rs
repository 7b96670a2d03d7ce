//! Reachability bitmaps (`pack-*.bitmap`, gitformat-bitmap), read far
//! enough to answer one question: is a whole local pack exactly what some
//! commits reach? Then the push sends that pack file as it is, with no
//! commit walk, no counting and no entry-by-entry copy.
//!
//! A second question is answered for a push onto what the remote has:
//! which objects of a pack do the new tips reach that the remote's tips do
//! not ([`incremental`], git's own way: the bitmaps of the commits that
//! have one, a walk of the few that have none). Those objects are then
//! copied as the pack stores them, deltas included.
//!
//! Only single-pack bitmaps of version 1 are read. Anything unexpected —
//! another version, a checksum that does not match the pack, a tip without
//! a bitmap of its own, a truncated file — answers "no", and the push
//! counts the usual way.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gix::ObjectId;
use gix_pack::data::output;

use super::odb::{find_kind, Db};
use crate::local::ObjectStoreError;

/// A pack whose every object is reachable from the tips asked about.
#[derive(Debug)]
pub(crate) struct WholePack {
    /// The `.pack` file, opened when it was checked (a repack that deletes
    /// it meanwhile does not take it away).
    pub file: std::fs::File,
    /// Objects in it.
    pub objects: u32,
}

/// The pack in `objects_dir` whose bitmaps show every one of its objects
/// reachable from `tips` (commits), if there is one.
pub(crate) fn whole_pack(objects_dir: &Path, tips: &[ObjectId]) -> Option<WholePack> {
    let dir = std::fs::read_dir(objects_dir.join("pack")).ok()?;
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "bitmap") {
            if let Some(found) = check_pack(&path, tips) {
                return Some(found);
            }
        }
    }
    None
}

fn check_pack(bitmap_path: &Path, tips: &[ObjectId]) -> Option<WholePack> {
    let pack = bitmap_path.with_extension("pack");
    let index =
        gix_pack::index::File::at(bitmap_path.with_extension("idx"), gix::hash::Kind::Sha1).ok()?;
    let data = std::fs::read(bitmap_path).ok()?;
    let bitmaps = Bitmaps::parse(&data, &index)?;
    let mut file = std::fs::File::open(&pack).ok()?;
    if !pack_matches(&mut file, &index)? {
        return None;
    }
    let mut reach = vec![0u64; (index.num_objects() as usize).div_ceil(64)];
    for tip in tips {
        let position = index.lookup(tip)?;
        let words = bitmaps.of_object(position)?;
        for (r, w) in reach.iter_mut().zip(words) {
            *r |= w;
        }
    }
    let reached: u64 = reach.iter().map(|w| u64::from(w.count_ones())).sum();
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(0)).ok()?;
    (reached == u64::from(index.num_objects())).then_some(WholePack {
        file,
        objects: index.num_objects(),
    })
}

/// The objects to push, chosen from a pack's bitmaps, in the pack's order.
pub(crate) struct Reuse {
    pack: gix_pack::data::File,
    plan: Vec<Planned>,
}

/// One object to send and how the pack's entry for it is written.
struct Planned {
    id: ObjectId,
    /// The entry's offset in the pack, and where the next one starts.
    start: u64,
    end: u64,
    how: How,
}

enum How {
    /// As stored: a whole object, or a delta against an earlier object of
    /// this push (by its index in the push).
    Stored(Option<usize>),
    /// As stored, a delta against an object the remote has, named by its
    /// id (a REF delta in a thin pack).
    AgainstId(ObjectId),
    /// Decoded and sent whole: a delta whose base is neither sent nor the
    /// remote's (or the remote takes no thin packs).
    Whole,
}

impl Reuse {
    /// Objects in the push.
    pub(crate) fn len(&self) -> usize {
        self.plan.len()
    }

    /// Blobs and trees that would go whole: stored whole, or as a delta on
    /// a base neither sent nor the remote's.
    pub(crate) fn whole_ids(&self) -> Vec<ObjectId> {
        self.plan
            .iter()
            .filter(|p| matches!(p.how, How::Whole))
            .map(|p| p.id)
            .collect()
    }

    /// The pack entries, a chunk at a time, in the push's order; an object
    /// of `instead` (REF deltas against what the remote has) goes as that.
    pub(crate) fn entries(
        self,
        db: Db,
        mut instead: std::collections::HashMap<ObjectId, output::Entry>,
    ) -> impl Iterator<Item = Result<Vec<output::Entry>, ObjectStoreError>> {
        const CHUNK: usize = 256;
        let Reuse { pack, plan } = self;
        let mut next = 0;
        let mut buf = Vec::new();
        std::iter::from_fn(move || {
            if next >= plan.len() {
                return None;
            }
            let end = (next + CHUNK).min(plan.len());
            let chunk: Result<Vec<output::Entry>, ObjectStoreError> = plan[next..end]
                .iter()
                .map(|p| match instead.remove(&p.id) {
                    Some(e) => Ok(e),
                    None => entry(&pack, &db, p, &mut buf),
                })
                .collect();
            next = end;
            Some(chunk)
        })
    }
}

fn entry(
    pack: &gix_pack::data::File,
    db: &Db,
    p: &Planned,
    buf: &mut Vec<u8>,
) -> Result<output::Entry, ObjectStoreError> {
    use gix_pack::data::entry::Header;
    let what = || format!("object {}", p.id);
    let bad = |detail: &str| ObjectStoreError::Unreadable {
        what: what(),
        detail: detail.to_string(),
    };
    if let How::Whole = p.how {
        use gix_pack::Find;
        let (data, _) = db
            .try_find(&p.id, buf)
            .map_err(|e| ObjectStoreError::unreadable(what(), &e))?
            .ok_or(ObjectStoreError::Missing {
                id: p.id,
                kind: None,
            })?;
        let count = output::Count::from_data(p.id, None);
        return output::Entry::from_data(&count, &data, Default::default())
            .map_err(|e| ObjectStoreError::unreadable(what(), &e));
    }
    let e = pack
        .entry(p.start)
        .map_err(|e| ObjectStoreError::unreadable(what(), &e))?;
    let data = pack
        .entry_slice(e.data_offset..p.end)
        .ok_or_else(|| bad("it lies outside its pack"))?;
    let kind = match (&p.how, e.header) {
        (How::AgainstId(base), _) => output::entry::Kind::DeltaOid { id: *base },
        (How::Stored(Some(i)), Header::OfsDelta { .. } | Header::RefDelta { .. }) => {
            output::entry::Kind::DeltaRef { object_index: *i }
        }
        (How::Stored(None), h) => match h.as_kind() {
            Some(k) => output::entry::Kind::Base(k),
            None => return Err(bad("a delta planned as whole")),
        },
        _ => return Err(bad("its entry changed since it was planned")),
    };
    Ok(output::Entry {
        id: p.id,
        kind,
        decompressed_size: usize::try_from(e.decompressed_size)
            .map_err(|_| bad("it is too large for this machine"))?,
        compressed_data: data.to_vec(),
    })
}

/// The `.bitmap` file of the repository's one bitmapped pack, with that
/// pack's index. git keeps one; with more there is no single answer.
fn only_bitmapped_pack(objects_dir: &Path) -> Option<(PathBuf, gix_pack::index::File)> {
    let dir = std::fs::read_dir(objects_dir.join("pack")).ok()?;
    let bitmaps: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bitmap"))
        .collect();
    let [path] = bitmaps.as_slice() else {
        return None;
    };
    let index =
        gix_pack::index::File::at(path.with_extension("idx"), gix::hash::Kind::Sha1).ok()?;
    Some((path.clone(), index))
}

/// The objects `wants` reach and `haves` do not, read from the bitmaps of
/// the one local pack that holds all of them; `None` when no pack can
/// answer (no bitmap, an object outside the pack, a want that is not a
/// commit, an unreadable object) — the push then counts the usual way.
pub(crate) fn incremental(
    db: &Db,
    objects_dir: &Path,
    wants: &[ObjectId],
    haves: &[ObjectId],
    thin: bool,
    interrupt: &AtomicBool,
) -> Option<Reuse> {
    let (path, index) = only_bitmapped_pack(objects_dir)?;
    if wants
        .iter()
        .chain(haves)
        .any(|id| index.lookup(id).is_none())
    {
        return None;
    }
    let data = std::fs::read(&path).ok()?;
    let bitmaps = Bitmaps::parse(&data, &index)?;
    let pack = gix_pack::data::File::at(path.with_extension("pack"), gix::hash::Kind::Sha1).ok()?;
    if pack.checksum() != index.pack_checksum() || pack.num_objects() != index.num_objects() {
        return None;
    }
    let n = index.num_objects() as usize;
    // Bits are in pack order: the index's entries sorted by offset (the
    // `.rev` file beside the pack lists them so; else they are sorted here).
    let order = read_rev(&path.with_extension("rev"), &index).unwrap_or_else(|| {
        let mut order: Vec<u32> = (0..index.num_objects()).collect();
        order.sort_unstable_by_key(|&i| index.pack_offset_at_index(i));
        order
    });
    let mut pos_of = vec![0u32; n];
    for (p, &i) in order.iter().enumerate() {
        pos_of[i as usize] = p as u32;
    }
    let offsets: Vec<u64> = order
        .iter()
        .map(|&i| index.pack_offset_at_index(i))
        .collect();
    let walk = Walk {
        db,
        index: &index,
        bitmaps: &bitmaps,
        pos_of: &pos_of,
        words: n.div_ceil(64),
        interrupt,
    };
    let have_bits = walk.fill(haves, None)?;
    let want_bits = walk.fill(wants, Some(&have_bits))?;
    let selected = |p: usize| bit(&want_bits, p) && !bit(&have_bits, p);
    let pack_end = pack.pack_end() as u64;
    let mut out_index = vec![u32::MAX; n];
    let mut plan = Vec::new();
    for p in (0..n).filter(|&p| selected(p)) {
        let idx = order[p];
        let id = index.oid_at_index(idx).to_owned();
        let start = offsets[p];
        let end = offsets.get(p + 1).copied().unwrap_or(pack_end);
        let header = pack.entry(start).ok()?.header;
        use gix_pack::data::entry::Header;
        let how = match header {
            Header::OfsDelta { base_distance } => {
                let base = start.checked_sub(base_distance)?;
                let bp = offsets.binary_search(&base).ok()?;
                if selected(bp) {
                    How::Stored(Some(out_index[bp] as usize))
                } else if thin && bit(&have_bits, bp) {
                    How::AgainstId(index.oid_at_index(order[bp]).to_owned())
                } else {
                    How::Whole
                }
            }
            Header::RefDelta { base_id } => {
                // A base sent earlier becomes an OFS delta; one the remote
                // has stays a REF delta (thin); a base sent later would be
                // named before it arrives: decoded instead.
                let base_pos = index.lookup(base_id).map(|i| pos_of[i as usize] as usize);
                match base_pos {
                    Some(bp) if selected(bp) && out_index[bp] != u32::MAX => {
                        How::Stored(Some(out_index[bp] as usize))
                    }
                    Some(bp) if !selected(bp) && thin && bit(&have_bits, bp) => {
                        How::AgainstId(base_id)
                    }
                    _ => How::Whole,
                }
            }
            _ => How::Stored(None),
        };
        out_index[p] = u32::try_from(plan.len()).ok()?;
        plan.push(Planned {
            id,
            start,
            end,
            how,
        });
    }
    Some(Reuse { pack, plan })
}

/// The index positions of a pack's objects in pack order, from its `.rev`
/// file (gitformat-pack: `RIDX`, version 1, SHA-1), if it is there and
/// names this pack and a permutation in offset order.
fn read_rev(path: &Path, index: &gix_pack::index::File) -> Option<Vec<u32>> {
    let data = std::fs::read(path).ok()?;
    let n = index.num_objects() as usize;
    if data.len() != 12 + 4 * n + 40
        || data.get(..4)? != b"RIDX"
        || be32(&data[4..8]) != 1
        || be32(&data[8..12]) != 1
        || &data[12 + 4 * n..12 + 4 * n + 20] != index.pack_checksum().as_slice()
    {
        return None;
    }
    let order: Vec<u32> = data[12..12 + 4 * n].chunks_exact(4).map(be32).collect();
    let ordered = order.iter().all(|&i| (i as usize) < n)
        && order
            .windows(2)
            .all(|w| index.pack_offset_at_index(w[0]) < index.pack_offset_at_index(w[1]));
    ordered.then_some(order)
}

/// Whether commit `new` reaches commit `old`, answered by `new`'s own
/// bitmap in the one bitmapped pack that holds both; `None` when there is
/// no such answer (the caller then walks).
pub(crate) fn reaches(objects_dir: &Path, new: &ObjectId, old: &ObjectId) -> Option<bool> {
    let (path, index) = only_bitmapped_pack(objects_dir)?;
    let (new_idx, old_idx) = (index.lookup(new)?, index.lookup(old)?);
    let data = std::fs::read(path).ok()?;
    let bitmaps = Bitmaps::parse(&data, &index)?;
    let words = bitmaps.of_object(new_idx)?;
    // `old`'s bit: its rank among the pack's offsets.
    let offset = index.pack_offset_at_index(old_idx);
    let position = (0..index.num_objects())
        .filter(|&i| index.pack_offset_at_index(i) < offset)
        .count();
    Some(bit(&words, position))
}

fn bit(words: &[u64], p: usize) -> bool {
    words[p / 64] & (1 << (p % 64)) != 0
}

fn set(words: &mut [u64], p: usize) {
    words[p / 64] |= 1 << (p % 64);
}

/// What reaches what, within one bitmapped pack.
struct Walk<'a> {
    db: &'a Db,
    index: &'a gix_pack::index::File,
    bitmaps: &'a Bitmaps<'a>,
    /// Index position → pack position (bit).
    pos_of: &'a [u32],
    words: usize,
    interrupt: &'a AtomicBool,
}

impl Walk<'_> {
    fn pos(&self, id: &gix::oid) -> Option<usize> {
        self.index
            .lookup(id)
            .map(|i| self.pos_of[i as usize] as usize)
    }

    /// Every object `tips` (commits) reach, as bits, except below objects
    /// set in `stop` (which reach nothing outside `stop`): a commit with a
    /// bitmap adds it; one without adds itself and its tree, and its
    /// parents are walked.
    fn fill(&self, tips: &[ObjectId], stop: Option<&[u64]>) -> Option<Vec<u64>> {
        let mut bits = vec![0u64; self.words];
        let stopped = |p: usize| stop.is_some_and(|s| bit(s, p));
        let mut commits = tips.to_vec();
        let mut trees = Vec::new();
        let mut buf = Vec::new();
        while let Some(c) = commits.pop() {
            if self.interrupt.load(Ordering::Relaxed) {
                return None;
            }
            let idx = self.index.lookup(c)?;
            let p = self.pos_of[idx as usize] as usize;
            if bit(&bits, p) || stopped(p) {
                continue;
            }
            if let Some(words) = self.bitmaps.of_object(idx) {
                for (b, w) in bits.iter_mut().zip(words) {
                    *b |= w;
                }
                continue;
            }
            set(&mut bits, p);
            let (data, _) = find_kind(self.db, &c, gix::object::Kind::Commit, &mut buf).ok()?;
            let mut tree = None;
            for token in gix::objs::CommitRefIter::from_bytes(data.data, data.object_hash) {
                use gix::objs::commit::ref_iter::Token;
                match token.ok()? {
                    Token::Tree { id } => tree = Some(id),
                    Token::Parent { id } => commits.push(id),
                    _ => break,
                }
            }
            trees.push(tree?);
        }
        while let Some(t) = trees.pop() {
            let p = self.pos(&t)?;
            if bit(&bits, p) || stopped(p) {
                continue;
            }
            set(&mut bits, p);
            let (data, _) = find_kind(self.db, &t, gix::object::Kind::Tree, &mut buf).ok()?;
            for e in gix::objs::TreeRefIter::from_bytes(data.data, gix::hash::Kind::Sha1) {
                let e = e.ok()?;
                if e.mode.is_commit() {
                    continue; // a submodule's commit is not in this repository
                }
                if e.mode.is_tree() {
                    trees.push(e.oid.to_owned());
                } else {
                    let p = self.pos(e.oid)?;
                    if !stopped(p) {
                        set(&mut bits, p);
                    }
                }
            }
        }
        Some(bits)
    }
}

/// The pack file is version 2, holds as many objects as its index, and
/// ends with the checksum the index names.
fn pack_matches(f: &mut std::fs::File, index: &gix_pack::index::File) -> Option<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut head = [0u8; 12];
    f.read_exact(&mut head).ok()?;
    let len = f.seek(SeekFrom::End(-20)).ok()?;
    let mut trailer = [0u8; 20];
    f.read_exact(&mut trailer).ok()?;
    Some(
        &head[..4] == b"PACK"
            && be32(&head[4..8]) == 2
            && be32(&head[8..12]) == index.num_objects()
            && trailer == index.pack_checksum().as_slice()
            && len > 12,
    )
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A parsed `.bitmap`: the commits' bitmaps, still compressed.
struct Bitmaps<'a> {
    /// (index position of the commit, xor offset, EWAH bytes).
    entries: Vec<(u32, u8, &'a [u8])>,
    /// Index position of a commit → its entry.
    by_position: std::collections::HashMap<u32, usize>,
    /// Bits per bitmap: the pack's object count.
    bits: u32,
}

/// One EWAH bitmap's serialized length at the start of `data`.
fn ewah_len(data: &[u8]) -> Option<usize> {
    let words = be32(data.get(4..8)?) as usize;
    let len = 8usize.checked_add(words.checked_mul(8)?)?.checked_add(4)?;
    (data.len() >= len).then_some(len)
}

impl<'a> Bitmaps<'a> {
    /// The bitmaps in `data`, if they are for the pack `index` describes
    /// (its checksum).
    fn parse(data: &'a [u8], index: &gix_pack::index::File) -> Option<Bitmaps<'a>> {
        const FULL_DAG: u16 = 0x1;
        if data.get(..4)? != b"BITM" {
            return None;
        }
        let version = u16::from_be_bytes([data[4], data[5]]);
        let flags = u16::from_be_bytes([*data.get(6)?, *data.get(7)?]);
        if version != 1 || flags & FULL_DAG == 0 {
            return None;
        }
        let count = be32(data.get(8..12)?) as usize;
        if data.get(12..32)? != index.pack_checksum().as_slice() {
            return None;
        }
        let mut at = 32;
        // The four type bitmaps (commits, trees, blobs, tags): skipped.
        for _ in 0..4 {
            at += ewah_len(data.get(at..)?)?;
        }
        let mut entries = Vec::with_capacity(count.min(data.len() / 18));
        for _ in 0..count {
            let head = data.get(at..at + 6)?;
            let position = be32(&head[..4]);
            let xor = head[4];
            at += 6;
            let len = ewah_len(data.get(at..)?)?;
            entries.push((position, xor, &data[at..at + len]));
            at += len;
        }
        let by_position = entries.iter().enumerate().map(|(i, e)| (e.0, i)).collect();
        Some(Bitmaps {
            entries,
            by_position,
            bits: index.num_objects(),
        })
    }

    /// The uncompressed bitmap of the commit at index `position`, if it
    /// has one.
    fn of_object(&self, position: u32) -> Option<Vec<u64>> {
        let i = *self.by_position.get(&position)?;
        self.resolve(i, 0)
    }

    /// Entry `i`'s bitmap: its own words XORed with those of the entry
    /// `xor` places before it (chains are short; a cycle or an overlong
    /// chain is refused).
    fn resolve(&self, i: usize, depth: usize) -> Option<Vec<u64>> {
        if depth > 256 {
            return None;
        }
        let (_, xor, raw) = self.entries[i];
        let mut words = decode_ewah(raw, self.bits)?;
        if xor != 0 {
            let base = self.resolve(i.checked_sub(usize::from(xor))?, depth + 1)?;
            for (w, b) in words.iter_mut().zip(base) {
                *w ^= b;
            }
        }
        Some(words)
    }
}

/// Decode one serialized EWAH bitmap into `bits` bits of 64-bit words.
/// (git writes a bitmap's own size rounded up to whole words, or up to its
/// last set bit; bits past either size are not objects.)
fn decode_ewah(data: &[u8], bits: u32) -> Option<Vec<u64>> {
    let size = be32(data.get(..4)?);
    let count = be32(data.get(4..8)?) as usize;
    let want = (bits as usize).div_ceil(64);
    let word = |k: usize| -> Option<u64> {
        let b = data.get(8 + k * 8..16 + k * 8)?;
        Some(u64::from_be_bytes(b.try_into().ok()?))
    };
    let mut out = Vec::with_capacity(want);
    let mut k = 0;
    while k < count {
        let rlw = word(k)?;
        k += 1;
        let fill = if rlw & 1 == 1 { u64::MAX } else { 0 };
        let run = ((rlw >> 1) & 0xffff_ffff) as usize;
        let literals = (rlw >> 33) as usize;
        if out.len() + run + literals > want {
            return None;
        }
        out.extend(std::iter::repeat_n(fill, run));
        for _ in 0..literals {
            out.push(word(k)?);
            k += 1;
        }
    }
    out.resize(want, 0);
    let limit = size.min(bits) as usize;
    if !limit.is_multiple_of(64) {
        if let Some(last) = out.get_mut(limit / 64) {
            *last &= (1u64 << (limit % 64)) - 1;
        }
    }
    for w in out.iter_mut().skip(limit.div_ceil(64)) {
        *w = 0;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ewah(bits: u32, words: &[u64]) -> Vec<u8> {
        let mut v = bits.to_be_bytes().to_vec();
        v.extend((words.len() as u32).to_be_bytes());
        for w in words {
            v.extend(w.to_be_bytes());
        }
        v.extend(0u32.to_be_bytes());
        v
    }

    fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).expect("hex")
    }

    #[test]
    fn git_s_own_bitmaps_answer_which_tips_reach_the_whole_pack() {
        use sluice_testkit::repo;
        let dir = tempfile::tempdir().expect("tempdir");
        let local = sluice_testkit::RepoBuilder::new()
            .branch("main", 120)
            .branch_from("other", "main", 15)
            .build(&dir.path().join("r.git"))
            .expect("builds");
        let objects = local.join("objects");
        let main = oid(&repo::rev_parse(&local, "refs/heads/main").expect("main"));
        let other = oid(&repo::rev_parse(&local, "refs/heads/other").expect("other"));
        // No bitmap yet: no answer.
        assert!(whole_pack(&objects, &[main, other]).is_none());
        repo::git(&local, &["repack", "-adbq"]);
        let all = repo::git(&local, &["rev-list", "--objects", "--all"])
            .lines()
            .count() as u32;
        // other is main plus 15 commits: it alone reaches everything.
        let whole = whole_pack(&objects, &[other]).expect("other reaches the pack");
        assert_eq!(whole.objects, all);
        assert!(whole_pack(&objects, &[main, other]).is_some());
        // main does not reach other's commits.
        assert!(whole_pack(&objects, &[main]).is_none());
        // A commit that is not in the pack at all.
        assert!(whole_pack(&objects, &[oid("1111111111111111111111111111111111111111")]).is_none());
    }

    #[test]
    fn a_tip_s_bitmap_answers_ancestry_and_the_rev_file_gives_pack_order() {
        use sluice_testkit::repo;
        let dir = tempfile::tempdir().expect("tempdir");
        let local = sluice_testkit::RepoBuilder::new()
            .branch("main", 40)
            .branch_from("other", "main", 5)
            .build(&dir.path().join("r.git"))
            .expect("builds");
        let objects = local.join("objects");
        let rev = |r: &str| oid(&repo::rev_parse(&local, r).expect(r));
        let (main, back, other) = (
            rev("refs/heads/main"),
            rev("main~5"),
            rev("refs/heads/other"),
        );
        // No bitmap yet: no answer (the caller walks).
        assert_eq!(reaches(&objects, &main, &back), None);
        repo::git(&local, &["repack", "-adbq"]);
        assert_eq!(reaches(&objects, &main, &back), Some(true));
        assert_eq!(reaches(&objects, &other, &main), Some(true));
        assert_eq!(reaches(&objects, &main, &other), Some(false));
        assert_eq!(reaches(&objects, &back, &main), Some(false));
        // The .rev file's order is the offsets' order.
        let pack_dir = objects.join("pack");
        repo::git(
            &local,
            &["-c", "pack.writeReverseIndex=true", "repack", "-adbq"],
        );
        let idx_path = std::fs::read_dir(&pack_dir)
            .expect("pack dir")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "idx"))
            .expect("an index");
        let index = gix_pack::index::File::at(&idx_path, gix::hash::Kind::Sha1).expect("idx");
        let order = read_rev(&idx_path.with_extension("rev"), &index).expect("a .rev file");
        let mut sorted: Vec<u32> = (0..index.num_objects()).collect();
        sorted.sort_by_key(|&i| index.pack_offset_at_index(i));
        assert_eq!(order, sorted);
    }

    #[test]
    fn runs_and_literals_decode() {
        // 2 words of ones, then one literal; then a run of 1 zero word.
        let rlw1 = 1 | (2 << 1) | (1 << 33);
        let rlw2 = 1 << 1;
        let data = ewah(256, &[rlw1, 0b1011, rlw2]);
        let words = decode_ewah(&data, 256).unwrap();
        assert_eq!(words, vec![u64::MAX, u64::MAX, 0b1011, 0]);
    }

    #[test]
    fn bits_past_the_size_are_cleared_and_overlong_runs_refused() {
        let data = ewah(70, &[1 | (2 << 1)]);
        let words = decode_ewah(&data, 70).unwrap();
        assert_eq!(words, vec![u64::MAX, 0b11_1111]);
        // A size rounded up to whole words, past the object count.
        let data = ewah(128, &[1 | (2 << 1)]);
        assert_eq!(decode_ewah(&data, 70).unwrap(), vec![u64::MAX, 0b11_1111]);
        let data = ewah(70, &[1 | (5 << 1)]);
        assert!(decode_ewah(&data, 70).is_none());
        assert!(decode_ewah(&data[..10], 70).is_none());
    }
}
