//! Reading the pack stream as it arrives ([`parse`]): entry by entry, each
//! entry's bytes hashed (the pack's checksum), summed (its CRC32) and
//! written to the temporary file as they pass, its stream inflated into a
//! fixed buffer only to check that it ends where its declared size says.
//! No entry is kept: memory is a few buffers of 64 KiB, whatever the size
//! of the objects, plus the entry table (24 bytes an object).

use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::Path;

use gix::hash::ObjectId;
use gix::zlib::{Decompress, FlushDecompress, Status};

use super::error::{disk, fail, stream, Result, StoreError};
use super::guard::{compressed_allowance, EntryGuard, MAX_OBJECT_SIZE};
use super::resolve::{Entries, Obj, What};
use crate::fetch::options::PackObject;

/// The bytes of the pack as they pass: hashed, summed for the entry's
/// CRC32, written to the temporary file.
struct Tee<'a> {
    input: &'a mut dyn BufRead,
    out: io::BufWriter<&'a File>,
    dir: &'a Path,
    hash: gix::hash::Hasher,
    crc: crc32fast::Hasher,
    /// Bytes passed (the offset in the pack).
    pos: u64,
}

impl Tee<'_> {
    fn pass(&mut self, bytes: &[u8]) -> Result<()> {
        self.hash.update(bytes);
        self.crc.update(bytes);
        self.pos += bytes.len() as u64;
        self.out
            .write_all(bytes)
            .map_err(disk("write the temporary pack", self.dir))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input.read_exact(buf).map_err(eof)?;
        self.pass(buf)
    }

    fn byte(&mut self) -> Result<u8> {
        let mut b = [0u8];
        self.read_exact(&mut b)?;
        Ok(b[0])
    }
}

/// A read of the stream failed: it ended early, or the reader said why.
fn eof(e: io::Error) -> StoreError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        fail("the pack ends early")
    } else {
        stream(e)
    }
}

/// Read the whole pack from `input` into `file`: its entries, and the
/// sender's checksum, checked; `None` for a pack without objects.
pub(super) fn parse(
    input: &mut dyn BufRead,
    file: &File,
    dir: &Path,
    object_hash: gix::hash::Kind,
    guard: &EntryGuard,
) -> Result<(Entries, Option<ObjectId>)> {
    let mut tee = Tee {
        input,
        out: io::BufWriter::with_capacity(64 << 10, file),
        dir,
        hash: gix::hash::hasher(object_hash),
        crc: crc32fast::Hasher::new(),
        pos: 0,
    };
    let mut header = [0u8; 12];
    tee.read_exact(&mut header)?;
    let (_version, count) = gix_pack::data::header::decode(&header).map_err(stream)?;
    let mut entries = Entries {
        objs: Vec::with_capacity((count as usize).min(1 << 20)),
        ids: Vec::with_capacity((count as usize).min(1 << 20)),
        ref_bases: Vec::new(),
    };
    let mut z = Decompress::new();
    let mut scratch = vec![0u8; 64 << 10];
    for index in 0..count {
        let offset = tee.pos;
        tee.crc = crc32fast::Hasher::new();
        let mut b = tee.byte()?;
        let code = (b >> 4) & 7;
        let mut size = u64::from(b & 0x0f);
        let mut shift = 4u32;
        while b & 0x80 != 0 {
            b = tee.byte()?;
            if shift > 57 {
                return Err(tripped(
                    guard,
                    format!("the pack entry at offset {offset} has a size header without end"),
                ));
            }
            size |= u64::from(b & 0x7f) << shift;
            shift += 7;
        }
        if size > MAX_OBJECT_SIZE {
            return Err(tripped(
                guard,
                format!(
                    "the pack entry at offset {offset} declares {size} bytes, more than this \
                     client holds ({MAX_OBJECT_SIZE})"
                ),
            ));
        }
        let (what, base, kind) = match code {
            1..=4 => {
                let kind = [
                    gix::objs::Kind::Commit,
                    gix::objs::Kind::Tree,
                    gix::objs::Kind::Blob,
                    gix::objs::Kind::Tag,
                ][usize::from(code - 1)];
                // A whole object declares its size here: stopped before
                // its stream is read (a delta's result is checked when the
                // delta is applied).
                if let Some(e) = guard.limits.object_passed(size, || PackObject {
                    offset,
                    kind: Some(kind),
                    base: None,
                }) {
                    return Err(StoreError::Limit(e));
                }
                (What::Whole, 0, Some(kind))
            }
            6 => {
                let mut b = tee.byte()?;
                let mut distance = u64::from(b & 0x7f);
                while b & 0x80 != 0 {
                    b = tee.byte()?;
                    distance = distance
                        .checked_add(1)
                        .and_then(|d| d.checked_mul(128))
                        .map(|d| d | u64::from(b & 0x7f))
                        .ok_or_else(|| fail("an OFS delta's base offset overflows"))?;
                }
                let at = offset
                    .checked_sub(distance)
                    .filter(|_| distance > 0)
                    .ok_or_else(|| fail("an OFS delta's base is outside the pack"))?;
                let base = entries
                    .objs
                    .binary_search_by_key(&at, |o| o.offset)
                    .map_err(|_| fail("an OFS delta's base is not an entry"))?;
                (What::Ofs, base as u32, entries.objs[base].kind())
            }
            7 => {
                let mut id = object_hash.null();
                tee.read_exact(id.as_mut_slice())?;
                entries.ref_bases.push((id, index));
                (What::Ref, 0, None)
            }
            _ => {
                return Err(fail(format!(
                    "the pack entry at offset {offset} has no valid type ({code})"
                )))
            }
        };
        inflate(&mut tee, &mut z, &mut scratch, size, offset, guard)?;
        entries.objs.push(Obj::new(
            offset,
            std::mem::replace(&mut tee.crc, crc32fast::Hasher::new()).finalize(),
            base,
            what,
            kind,
        ));
        // A null id stands for "not hashed yet".
        entries.ids.push(object_hash.null());
    }
    let mut trailer = object_hash.null();
    tee.input.read_exact(trailer.as_mut_slice()).map_err(eof)?;
    let ours = std::mem::replace(&mut tee.hash, gix::hash::hasher(object_hash))
        .try_finalize()
        .map_err(stream)?;
    if ours != trailer {
        return Err(fail(format!(
            "the pack's checksum is {trailer}, its bytes hash to {ours}"
        )));
    }
    tee.out
        .write_all(trailer.as_slice())
        .and_then(|()| tee.out.flush())
        .map_err(disk("write the temporary pack", dir))?;
    Ok((entries, (count > 0).then_some(trailer)))
}

/// The guard's stop, as this side reads it: the pack is the server's fault.
fn tripped(guard: &EntryGuard, why: String) -> StoreError {
    stream(guard.trip(why))
}

/// Inflate the stream of the entry at `offset` (declared `size`) as it
/// passes, into `scratch` and forgotten: it must end, and end at `size`.
fn inflate(
    tee: &mut Tee<'_>,
    z: &mut Decompress,
    scratch: &mut [u8],
    size: u64,
    offset: u64,
    guard: &EntryGuard,
) -> Result<()> {
    z.reset();
    // Header (≤ 10 bytes), a base offset or id (≤ 20), the stream.
    let allowance = 32 + compressed_allowance(size);
    loop {
        let buf = tee.input.fill_buf().map_err(eof)?;
        if buf.is_empty() {
            return Err(fail("the pack ends early"));
        }
        let (in0, out0) = (z.total_in(), z.total_out());
        let status = z
            .decompress(buf, scratch, FlushDecompress::None)
            .map_err(|e| {
                fail(format!(
                    "the pack entry at offset {offset} is no valid zlib stream: {e}"
                ))
            })?;
        let consumed = (z.total_in() - in0) as usize;
        let produced = z.total_out() - out0;
        tee.hash.update(&buf[..consumed]);
        tee.crc.update(&buf[..consumed]);
        tee.out
            .write_all(&buf[..consumed])
            .map_err(disk("write the temporary pack", tee.dir))?;
        tee.input.consume(consumed);
        tee.pos += consumed as u64;
        if z.total_out() > size {
            return Err(tripped(
                guard,
                format!(
                    "the pack entry at offset {offset} runs past its declared size \
                     ({size} bytes)"
                ),
            ));
        }
        if tee.pos - offset > allowance {
            return Err(tripped(
                guard,
                format!(
                    "the pack entry at offset {offset} runs past what its declared size can \
                     need (the server sent a stream without end)"
                ),
            ));
        }
        match status {
            Status::StreamEnd => break,
            _ if consumed == 0 && produced == 0 => {
                return Err(fail(format!(
                    "the pack entry at offset {offset} is no valid zlib stream"
                )))
            }
            _ => {}
        }
    }
    if z.total_out() != size {
        return Err(fail(
            "an entry inflates to another size than its header says",
        ));
    }
    Ok(())
}
