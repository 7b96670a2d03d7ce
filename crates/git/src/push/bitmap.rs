//! Reachability bitmaps (`pack-*.bitmap`, gitformat-bitmap), read far
//! enough to answer one question: is a whole local pack exactly what some
//! commits reach? Then the push sends that pack file as it is, with no
//! commit walk, no counting and no entry-by-entry copy.
//!
//! Only single-pack bitmaps of version 1 are read. Anything unexpected —
//! another version, a checksum that does not match the pack, a tip without
//! a bitmap of its own, a truncated file — answers "no", and the push
//! counts the usual way.

use std::path::Path;

use gix::ObjectId;

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
    let bitmaps = Bitmaps::parse(&data, index.num_objects())?;
    if bitmaps.pack_checksum != index.pack_checksum().as_slice() {
        return None;
    }
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
    pack_checksum: &'a [u8],
    /// (index position of the commit, xor offset, EWAH bytes).
    entries: Vec<(u32, u8, &'a [u8])>,
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
    fn parse(data: &'a [u8], objects: u32) -> Option<Bitmaps<'a>> {
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
        let pack_checksum = data.get(12..32)?;
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
        Some(Bitmaps {
            pack_checksum,
            entries,
            bits: objects,
        })
    }

    /// The uncompressed bitmap of the commit at index `position`, if it
    /// has one.
    fn of_object(&self, position: u32) -> Option<Vec<u64>> {
        let i = self.entries.iter().position(|e| e.0 == position)?;
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
