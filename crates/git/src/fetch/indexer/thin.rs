//! Completing a thin pack ([`complete`]): the bases its REF deltas left
//! out are read from the local object database and appended as whole
//! objects, as `git index-pack --fix-thin` does; the header's count and the
//! trailer are rewritten.

use std::io::{self, Write};
use std::os::unix::fs::FileExt;

use gix::hash::ObjectId;
use gix_pack::data::entry::Header;

use super::error::{disk, fail, stream, Result};
use super::resolve::{Entries, Obj, What, Written};
use crate::local::ObjectStoreError;

/// Writes at a position of the temporary pack, summing what it writes.
struct At<'a> {
    pack: &'a Written<'a>,
    pos: u64,
    crc: crc32fast::Hasher,
}

impl Write for At<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pack.file.write_all_at(buf, self.pos)?;
        self.crc.update(buf);
        self.pos += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Append the bases of the REF deltas still without an id that `find`
/// has; `None` when it had none, else where the entries now end and the
/// pack's new checksum.
///
/// A base is held whole while it is compressed (the object database hands
/// it so); the file is read back in pieces for the new checksum.
pub(super) fn complete<F: gix::objs::Find>(
    pack: &Written<'_>,
    entries: &mut Entries,
    find: &F,
) -> Result<Option<(u64, ObjectId)>> {
    let mut wanted: Vec<ObjectId> = entries
        .ref_bases
        .iter()
        .filter(|(_, d)| entries.ids[*d as usize].is_null())
        .map(|(b, _)| *b)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let write = disk("write the temporary pack", pack.dir);
    let mut pos = pack.end;
    let mut buf = Vec::new();
    let mut added = 0usize;
    for id in wanted {
        let found = find
            .try_find(&id, &mut buf)
            .map_err(|e| ObjectStoreError::unreadable(format!("base {id}"), &e))?;
        let Some(object) = found else {
            continue;
        };
        let (kind, data) = (object.kind, object.data);
        let header = match kind {
            gix::objs::Kind::Commit => Header::Commit,
            gix::objs::Kind::Tree => Header::Tree,
            gix::objs::Kind::Blob => Header::Blob,
            gix::objs::Kind::Tag => Header::Tag,
        };
        let offset = pos;
        let mut at = At {
            pack,
            pos,
            crc: crc32fast::Hasher::new(),
        };
        let mut head = Vec::with_capacity(16);
        header
            .write_to(data.len() as u64, &mut head)
            .map_err(stream)?;
        let appended = at.write_all(&head).and_then(|()| {
            let mut z = gix::zlib::stream::deflate::Write::new(
                io::BufWriter::with_capacity(64 << 10, &mut at),
                gix::zlib::Compression::DEFAULT,
            );
            for piece in data.chunks(64 << 10) {
                z.write_all(piece)?;
            }
            z.flush()?;
            z.into_inner().flush()
        });
        appended.map_err(disk("write the temporary pack", pack.dir))?;
        pos = at.pos;
        entries.objs.push(Obj::new(
            offset,
            at.crc.finalize(),
            0,
            What::Whole,
            Some(kind),
        ));
        entries.ids.push(pack.object_hash.null());
        added += 1;
    }
    if added == 0 {
        return Ok(None);
    }
    let count = u32::try_from(entries.objs.len()).map_err(|_| fail("too many objects"))?;
    pack.file
        .write_all_at(&count.to_be_bytes(), 8)
        .map_err(write)?;
    let read_back = || disk("read back the temporary pack", pack.dir);
    let mut h = gix::hash::hasher(pack.object_hash);
    let mut piece = vec![0u8; 64 << 10];
    let mut at = 0u64;
    while at < pos {
        let n = (pos - at).min(piece.len() as u64) as usize;
        pack.file
            .read_exact_at(&mut piece[..n], at)
            .map_err(read_back())?;
        h.update(&piece[..n]);
        at += n as u64;
    }
    let hash = h.try_finalize().map_err(stream)?;
    let write = || disk("write the temporary pack", pack.dir);
    pack.file
        .write_all_at(hash.as_slice(), pos)
        .map_err(write())?;
    pack.file
        .set_len(pos + pack.object_hash.len_in_bytes() as u64)
        .map_err(write())?;
    Ok(Some((pos, hash)))
}
