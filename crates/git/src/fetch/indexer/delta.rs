//! Applying a delta as it inflates ([`Apply`]): its instructions are read
//! piece by piece, and the result goes to the object's hasher (and to a
//! buffer only when the result is itself a base), so a delta costs its base
//! and, at most, its result — never the delta whole.

use gix::hash::ObjectId;

use super::error::{fail, stream, Result};
use super::guard::MAX_OBJECT_SIZE;

/// Bytes of instructions kept between two pieces: one instruction at most
/// (an insert of 127 bytes and its command byte; a copy of 8 bytes).
const LONGEST: usize = 128;

/// One delta being applied onto `base`, fed its inflated bytes in pieces.
pub(super) struct Apply<'a, C> {
    base: &'a [u8],
    kind: gix::objs::Kind,
    /// Bytes not yet read as a whole instruction (or the header).
    pending: Vec<u8>,
    /// The result's size, once the header was read.
    size: Option<u64>,
    produced: u64,
    hasher: Option<gix::hash::Hasher>,
    object_hash: gix::hash::Kind,
    /// Where the result is kept, when it is needed whole.
    keep: Option<&'a mut Vec<u8>>,
    /// Told the result's size before any of it is produced (the caller's
    /// limit).
    check: C,
}

impl<'a, C: FnMut(u64) -> Result<()>> Apply<'a, C> {
    pub(super) fn new(
        base: &'a [u8],
        kind: gix::objs::Kind,
        object_hash: gix::hash::Kind,
        keep: Option<&'a mut Vec<u8>>,
        check: C,
    ) -> Self {
        Apply {
            base,
            kind,
            pending: Vec::with_capacity(LONGEST * 2),
            size: None,
            produced: 0,
            hasher: None,
            object_hash,
            keep,
            check,
        }
    }

    /// Read the next inflated `piece` of the delta.
    pub(super) fn feed(&mut self, piece: &[u8]) -> Result<()> {
        let mut piece = piece;
        // Complete the instruction left over from the last piece first.
        while !self.pending.is_empty() && !piece.is_empty() {
            let take = piece.len().min(LONGEST);
            self.pending.extend_from_slice(&piece[..take]);
            piece = &piece[take..];
            let mut pending = std::mem::take(&mut self.pending);
            let used = self.run(&pending, false)?;
            pending.drain(..used);
            self.pending = pending;
            if self.pending.len() >= LONGEST {
                return Err(fail("a delta instruction is longer than any can be"));
            }
        }
        if !piece.is_empty() {
            let used = self.run(piece, false)?;
            self.pending.extend_from_slice(&piece[used..]);
        }
        Ok(())
    }

    /// The delta ended: the result's id (every byte it declared produced,
    /// no instruction left).
    pub(super) fn finish(mut self) -> Result<ObjectId> {
        let pending = std::mem::take(&mut self.pending);
        let used = self.run(&pending, true)?;
        if used != pending.len() {
            return Err(fail("a delta ends inside an instruction"));
        }
        let size = self
            .size
            .ok_or_else(|| fail("a delta ends inside its header"))?;
        if self.produced != size {
            return Err(fail("a delta builds another size than its header says"));
        }
        self.hasher
            .take()
            .expect("set with the size")
            .try_finalize()
            .map_err(stream)
    }

    /// Run the whole instructions at the start of `d`: how many bytes they
    /// took (the rest waits for more).
    fn run(&mut self, d: &[u8], last: bool) -> Result<usize> {
        let mut at = 0;
        if self.size.is_none() {
            let mut i = 0;
            let Some(base_size) = varint(d, &mut i)? else {
                return Ok(0);
            };
            let Some(size) = varint(d, &mut i)? else {
                return Ok(0);
            };
            if base_size != self.base.len() as u64 {
                return Err(fail("a delta's base has another size than it says"));
            }
            (self.check)(size)?;
            if size > MAX_OBJECT_SIZE {
                // A few bytes of copies can declare any size: held whole
                // when it is a base, so bounded as an entry's is.
                return Err(fail(format!(
                    "a delta declares a result of {size} bytes, more than this client \
                     holds ({MAX_OBJECT_SIZE})"
                )));
            }
            let mut h = gix::hash::hasher(self.object_hash);
            h.update(&gix::objs::encode::loose_header(self.kind, size));
            self.hasher = Some(h);
            if let Some(keep) = self.keep.as_deref_mut() {
                keep.clear();
                keep.reserve_exact(usize::try_from(size).map_err(|_| fail("object too large"))?);
            }
            self.size = Some(size);
            at = i;
        }
        while at < d.len() {
            let cmd = d[at];
            if cmd & 0x80 != 0 {
                let n = 1 + (cmd & 0x7f).count_ones() as usize;
                if d.len() - at < n {
                    break;
                }
                let mut i = at + 1;
                let mut field = |mask: u8, shift: u32, v: &mut u64| {
                    if cmd & mask != 0 {
                        *v |= u64::from(d[i]) << shift;
                        i += 1;
                    }
                };
                let (mut off, mut len) = (0u64, 0u64);
                for (bit, shift) in [(0x01, 0), (0x02, 8), (0x04, 16), (0x08, 24)] {
                    field(bit, shift, &mut off);
                }
                for (bit, shift) in [(0x10, 0), (0x20, 8), (0x40, 16)] {
                    field(bit, shift, &mut len);
                }
                if len == 0 {
                    len = 0x10000;
                }
                let end = off
                    .checked_add(len)
                    .filter(|&e| e <= self.base.len() as u64)
                    .ok_or_else(|| fail("a delta copies from outside its base"))?;
                let base = self.base;
                self.emit(&base[off as usize..end as usize])?;
                at += n;
            } else if cmd != 0 {
                let n = usize::from(cmd);
                if d.len() - at < 1 + n {
                    break;
                }
                self.emit(&d[at + 1..at + 1 + n])?;
                at += 1 + n;
            } else {
                return Err(fail("a delta holds the reserved instruction 0"));
            }
        }
        if last && at != d.len() {
            return Err(fail("a delta ends inside an instruction"));
        }
        Ok(at)
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<()> {
        self.produced += bytes.len() as u64;
        if Some(self.produced) > self.size {
            return Err(fail("a delta builds more than its header says"));
        }
        self.hasher
            .as_mut()
            .expect("set with the size")
            .update(bytes);
        if let Some(keep) = self.keep.as_deref_mut() {
            keep.extend_from_slice(bytes);
        }
        Ok(())
    }
}

/// A size varint at `d[*at..]` (7 bits a byte, least significant first);
/// `None` when `d` ends inside it.
fn varint(d: &[u8], at: &mut usize) -> Result<Option<u64>> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let Some(&b) = d.get(*at) else {
            return Ok(None);
        };
        *at += 1;
        if shift > 63 {
            return Err(fail("a delta's header has a size without end"));
        }
        v |= u64::from(b & 0x7f)
            .checked_shl(shift)
            .ok_or_else(|| fail("a delta's header has a size without end"))?;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(Some(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streamed result is the one the whole-buffer reader builds, for
    /// every way of cutting the delta into pieces.
    #[test]
    fn a_delta_fed_in_pieces_of_any_size_builds_what_the_whole_one_builds() {
        use crate::push::delta::Index;
        let base: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("row {i}\n").into_bytes())
            .collect();
        let mut target = base.clone();
        target.splice(5_000..5_100, b"something else entirely".iter().copied());
        target.extend_from_slice(&[b'x'; 300]);
        let delta = Index::new(&base).delta(&target, usize::MAX).expect("delta");
        let want = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &target)
            .expect("hash");
        for piece in [1, 2, 3, 7, 64, 127, 128, 129, 4096, delta.len()] {
            let mut kept = Vec::new();
            let mut a = Apply::new(
                &base,
                gix::objs::Kind::Blob,
                gix::hash::Kind::Sha1,
                Some(&mut kept),
                |_| Ok(()),
            );
            for p in delta.chunks(piece) {
                a.feed(p).expect("feed");
            }
            assert_eq!(a.finish().expect("finish"), want, "pieces of {piece}");
            assert_eq!(kept, target, "pieces of {piece}");
        }
    }

    #[test]
    fn a_delta_copying_past_its_base_or_cut_short_is_refused() {
        let base = b"0123456789";
        // base 10, result 20, copy 20 bytes from offset 0.
        let bad = [10u8, 20, 0x80 | 0x10, 20];
        let mut a = Apply::new(
            base,
            gix::objs::Kind::Blob,
            gix::hash::Kind::Sha1,
            None,
            |_| Ok(()),
        );
        assert!(a.feed(&bad).is_err());
        // base 10, result 4, insert of 4 bytes cut after 2.
        let mut a = Apply::new(
            base,
            gix::objs::Kind::Blob,
            gix::hash::Kind::Sha1,
            None,
            |_| Ok(()),
        );
        a.feed(&[10, 4, 4, b'a', b'b']).expect("waits for more");
        assert!(a.finish().is_err());
    }
}
