//! The pack's version 2 index, and the check that the written pack ends
//! in its checksum.

use std::io::{self, Write};
use std::os::unix::fs::FileExt;

use gix::hash::ObjectId;

use super::error::{disk, fail, Result};
use super::resolve::{Entries, Written};

/// Check that the written pack ends in the checksum `want`.
///
/// The sender's trailer was checked against the bytes received
/// (`BytesToEntriesIter` in `Verify` mode), and `EntriesToBytesIter` hashed
/// the written file as it read it back from disk: what is left to check is
/// that the file ends in that hash.
///
/// A file that does not end in it was written otherwise than it was read
/// back: the disk's fault, not the pack's.
pub(super) fn verify_trailer(pack: &Written<'_>, len: u64, want: ObjectId) -> Result<()> {
    let hash_len = pack.object_hash.len_in_bytes() as u64;
    if len < 12 + hash_len {
        return Err(fail("the pack is too short"));
    }
    let mut trailer = vec![0u8; hash_len as usize];
    let read_back = disk("read back the temporary pack", pack.dir);
    pack.file
        .read_exact_at(&mut trailer, len - hash_len)
        .map_err(read_back)?;
    if trailer.as_slice() != want.as_slice() {
        return Err(disk("read back the temporary pack", pack.dir)(
            io::Error::new(
                io::ErrorKind::InvalidData,
                "the stored pack does not end in its checksum",
            ),
        ));
    }
    Ok(())
}

/// Write a version 2 index of `entries` (all resolved) for the pack `pack`.
pub(super) fn write_index(
    w: &mut impl Write,
    entries: &Entries,
    pack: ObjectId,
    kind: gix::hash::Kind,
) -> io::Result<()> {
    let (objs, ids) = (&entries.objs, &entries.ids);
    let mut order: Vec<u32> = (0..objs.len() as u32).collect();
    let id = |i: u32| &ids[i as usize];
    order.sort_unstable_by(|a, b| id(*a).cmp(id(*b)));
    let mut h = gix::hash::hasher(kind);
    let mut put = |w: &mut dyn Write, b: &[u8]| -> io::Result<()> {
        h.update(b);
        w.write_all(b)
    };
    put(w, b"\xfftOc")?;
    put(w, &2u32.to_be_bytes())?;
    let mut fanout = [0u32; 256];
    for &i in &order {
        fanout[usize::from(id(i).as_slice()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        put(w, &total.to_be_bytes())?;
    }
    for &i in &order {
        put(w, id(i).as_slice())?;
    }
    for &i in &order {
        put(w, &objs[i as usize].crc32.to_be_bytes())?;
    }
    let mut large = Vec::new();
    for &i in &order {
        let off = objs[i as usize].offset;
        if off < 0x8000_0000 {
            put(w, &(off as u32).to_be_bytes())?;
        } else {
            let n = 0x8000_0000u32 | large.len() as u32;
            large.push(off);
            put(w, &n.to_be_bytes())?;
        }
    }
    for off in large {
        put(w, &off.to_be_bytes())?;
    }
    put(w, pack.as_slice())?;
    let own = h.try_finalize().map_err(io::Error::other)?;
    w.write_all(own.as_slice())
}
