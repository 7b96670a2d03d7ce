//! Resolving the deltas of a written pack: every object's id, base by
//! base, depth first, with the data held along the chain capped
//! ([`CACHE_LIMIT`]), on several threads.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::hash::ObjectId;
use gix::objs::Kind;
use gix::progress::Count;
use gix_pack::data::entry::Header;

use super::delta::Apply;
use super::error::{disk, fail, stream, Result, StoreError};
use super::guard::Limits;
use crate::fetch::options::PackObject;

/// Data held along the chain being resolved, at most (the top of the chain
/// is always held, whatever its size).
pub(crate) const CACHE_LIMIT: usize = 4 << 20;

#[cfg(test)]
thread_local! {
    /// The cap, as a test sets it.
    pub(super) static TEST_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(CACHE_LIMIT) };
}

pub(super) fn cache_limit() -> usize {
    #[cfg(test)]
    return TEST_LIMIT.with(|l| l.get());
    #[cfg(not(test))]
    CACHE_LIMIT
}

/// One entry of the pack, as the resolver needs it: 24 bytes an object,
/// and its id beside it (the rest of an entry is read again from its header
/// when needed).
pub(super) struct Obj {
    /// Where the entry starts (it ends where the next one starts).
    pub(super) offset: u64,
    pub(super) crc32: u32,
    /// For an OFS delta, its base's index.
    pub(super) base: u32,
    pub(super) what: What,
    /// Its kind, when known as it arrived (a whole object's; an OFS
    /// delta's on a known base).
    kind: Option<gix::objs::Kind>,
}

impl Obj {
    pub(super) fn new(
        offset: u64,
        crc32: u32,
        base: u32,
        what: What,
        kind: Option<gix::objs::Kind>,
    ) -> Obj {
        Obj {
            offset,
            crc32,
            base,
            what,
            kind,
        }
    }

    /// Its kind, when known as it arrived.
    pub(super) fn kind(&self) -> Option<gix::objs::Kind> {
        self.kind
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum What {
    Whole,
    /// An OFS delta; `base` says on what.
    Ofs,
    /// A REF delta whose base is in the pack (see `ref_bases`).
    Ref,
}

/// The pack's entries as written to the temporary file: 24 bytes an
/// object, and its id once resolved.
pub(super) struct Entries {
    pub(super) objs: Vec<Obj>,
    /// Every object's id, null until resolved.
    pub(super) ids: Vec<ObjectId>,
    /// REF deltas: (base id, delta index).
    pub(super) ref_bases: Vec<(ObjectId, u32)>,
}

/// The temporary pack as written, read back to resolve and check it.
pub(super) struct Written<'a> {
    pub(super) file: &'a File,
    /// The pack directory (for messages).
    pub(super) dir: &'a Path,
    /// Where the last entry ends (the trailer starts).
    pub(super) end: u64,
    pub(super) object_hash: gix::hash::Kind,
}

/// Bytes read back or inflated at a time.
const CHUNK: usize = 64 << 10;

/// An entry opened for reading: its header, declared size, the part of its
/// stream in `Reader::packed` (`from..to`), where the rest starts and ends.
struct Opened {
    header: Header,
    size: u64,
    from: usize,
    to: usize,
    pos: u64,
    end: u64,
}

/// Reads entries back with positioned reads and inflates them in pieces
/// of [`CHUNK`].
pub(super) struct Reader<'a> {
    pack: &'a Written<'a>,
    z: gix::zlib::Decompress,
    packed: Vec<u8>,
    inflated: Vec<u8>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(pack: &'a Written<'a>) -> Self {
        Reader {
            pack,
            z: gix::zlib::Decompress::new(),
            packed: vec![0; CHUNK],
            inflated: vec![0; CHUNK],
        }
    }

    /// Open entry `i`: its first piece read (header and the start of its
    /// stream, the whole entry when it is small: one read).
    fn open(&mut self, objs: &[Obj], i: usize) -> Result<Opened> {
        let start = objs[i].offset;
        let end = objs.get(i + 1).map_or(self.pack.end, |o| o.offset);
        let n = end
            .checked_sub(start)
            .ok_or_else(|| fail("entries overlap"))?
            .min(CHUNK as u64) as usize;
        self.pack
            .file
            .read_exact_at(&mut self.packed[..n], start)
            .map_err(disk("read back the temporary pack", self.pack.dir))?;
        let entry =
            gix_pack::data::Entry::from_bytes(&self.packed[..n], start, self.pack.object_hash)
                .map_err(stream)?;
        let from = entry.header_size();
        if from > n {
            return Err(fail("an entry is shorter than its header"));
        }
        Ok(Opened {
            header: entry.header,
            size: entry.decompressed_size,
            from,
            to: n,
            pos: start + n as u64,
            end,
        })
    }

    /// Inflate the opened entry piece by piece into `sink`.
    fn inflate(&mut self, o: Opened, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let Opened {
            size,
            mut from,
            mut to,
            mut pos,
            end,
            ..
        } = o;
        self.z.reset();
        loop {
            if from == to {
                if pos >= end {
                    return Err(fail("an entry's stream ends early"));
                }
                let n = (end - pos).min(CHUNK as u64) as usize;
                self.pack
                    .file
                    .read_exact_at(&mut self.packed[..n], pos)
                    .map_err(disk("read back the temporary pack", self.pack.dir))?;
                pos += n as u64;
                (from, to) = (0, n);
            }
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let status = self
                .z
                .decompress(
                    &self.packed[from..to],
                    &mut self.inflated,
                    gix::zlib::FlushDecompress::None,
                )
                .map_err(stream)?;
            let consumed = (self.z.total_in() - in0) as usize;
            let produced = (self.z.total_out() - out0) as usize;
            from += consumed;
            if self.z.total_out() > size {
                return Err(fail("an entry inflates past its declared size"));
            }
            sink(&self.inflated[..produced])?;
            match status {
                gix::zlib::Status::StreamEnd => break,
                _ if consumed == 0 && produced == 0 => {
                    return Err(fail("an entry is no valid zlib stream"))
                }
                _ => {}
            }
        }
        if self.z.total_out() != size {
            return Err(fail(
                "an entry inflates to another size than its header says",
            ));
        }
        Ok(())
    }

    /// Inflate entry `i` whole into `out`; returns its header.
    pub(super) fn read(&mut self, objs: &[Obj], i: usize, out: &mut Vec<u8>) -> Result<Header> {
        let o = self.open(objs, i)?;
        let header = o.header;
        out.clear();
        out.reserve_exact(usize::try_from(o.size).map_err(|_| fail("object too large"))?);
        self.inflate(o, &mut |piece| {
            out.extend_from_slice(piece);
            Ok(())
        })?;
        Ok(header)
    }

    /// The id and kind of whole object `i`, hashed as it inflates.
    pub(super) fn hash(&mut self, objs: &[Obj], i: usize) -> Result<(ObjectId, Kind)> {
        let o = self.open(objs, i)?;
        let kind = o
            .header
            .as_kind()
            .ok_or_else(|| fail("a whole object changed into a delta"))?;
        let mut h = gix::hash::hasher(self.pack.object_hash);
        h.update(&gix::objs::encode::loose_header(kind, o.size));
        self.inflate(o, &mut |piece| {
            h.update(piece);
            Ok(())
        })?;
        Ok((h.try_finalize().map_err(stream)?, kind))
    }

    /// Apply delta `i` onto `base` as it inflates: the result's id, and the
    /// result in `keep` when given. `check` is told the result's size
    /// before any of it is built.
    pub(super) fn apply(
        &mut self,
        objs: &[Obj],
        i: usize,
        base: &[u8],
        kind: Kind,
        keep: Option<&mut Vec<u8>>,
        check: impl FnMut(u64) -> Result<()>,
    ) -> Result<ObjectId> {
        let o = self.open(objs, i)?;
        let mut a = Apply::new(base, kind, self.pack.object_hash, keep, check);
        self.inflate(o, &mut |piece| a.feed(piece))?;
        a.finish()
    }
}

/// One base on the chain being resolved.
pub(super) struct Frame {
    obj: u32,
    data: Option<Vec<u8>>,
    /// Its OFS children still to build: indices into `ofs`.
    ofs: std::ops::Range<usize>,
    /// Its REF children still to build: indices into `ref_bases`.
    refs: std::ops::Range<usize>,
}

/// Give every delta its id: each whole object's descendants, depth first,
/// on `threads` threads that take whole objects in turn (those from index
/// `first_root` on); returns how many objects were given their id.
pub(super) fn resolve(
    pack: &Written<'_>,
    entries: &mut Entries,
    first_root: usize,
    threads: usize,
    limits: Limits,
    progress: &dyn Count,
    interrupt: &AtomicBool,
) -> Result<usize> {
    let Entries {
        objs,
        ids,
        ref_bases,
    } = entries;
    let objs: &[Obj] = objs;
    // OFS deltas as (base, delta), ordered by base (in pack order within a
    // base).
    let mut ofs: Vec<(u32, u32)> = (0..objs.len() as u32)
        .filter(|&i| objs[i as usize].what == What::Ofs)
        .map(|i| (objs[i as usize].base, i))
        .collect();
    ofs.sort_unstable();
    ref_bases.sort_unstable();
    let deltas = objs.iter().filter(|o| o.what != What::Whole).count();
    // Threads pay off only with something to share.
    let threads = if deltas < MIN_DELTAS_FOR_THREADS {
        1
    } else {
        threads.max(1)
    };
    let shared = Shared {
        objs,
        ofs: &ofs,
        refs: ref_bases,
        ids: std::sync::Mutex::new(std::mem::take(ids)),
        next: std::sync::atomic::AtomicUsize::new(first_root),
        resolved: std::sync::atomic::AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        interrupt,
        pack,
        limit: cache_limit() / threads,
        limits,
    };
    let span = tracing::Span::current();
    let result = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .map(|_| {
                let shared = &shared;
                let span = span.clone();
                scope.spawn(move || span.in_scope(|| shared.work(None)))
            })
            .collect();
        let mut result = shared.work(Some(progress));
        for h in helpers {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(fail("a resolving thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result
    });
    *ids = shared.ids.into_inner().unwrap_or_else(|p| p.into_inner());
    result?;
    Ok(shared.resolved.into_inner())
}

/// What the resolving threads share.
pub(super) struct Shared<'a> {
    objs: &'a [Obj],
    /// OFS deltas as (base, delta), ordered by base.
    ofs: &'a [(u32, u32)],
    /// REF deltas with their base in the pack, ordered by base id.
    refs: &'a [(ObjectId, u32)],
    /// Every object's id, null until resolved.
    ids: std::sync::Mutex<Vec<ObjectId>>,
    /// The next object to look at as a root.
    next: std::sync::atomic::AtomicUsize,
    resolved: std::sync::atomic::AtomicUsize,
    /// Set when a thread failed: the others stop.
    stop: AtomicBool,
    interrupt: &'a AtomicBool,
    pack: &'a Written<'a>,
    /// Each thread's cap on the data it holds.
    limit: usize,
    /// The caller's limits (a delta's result is checked here).
    limits: Limits,
}

/// Fewer deltas than this are resolved on the calling thread alone (any
/// number in the tests, so that they run the threads).
pub(super) const MIN_DELTAS_FOR_THREADS: usize = if cfg!(test) { 1 } else { 2_000 };

/// Roots a thread takes at a time.
pub(super) const ROOTS_PER_TAKE: usize = 64;

impl Shared<'_> {
    /// The children of object `i` (whose id is `id`): ranges of `ofs` and
    /// `refs`.
    pub(super) fn children(
        &self,
        i: u32,
        id: &ObjectId,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let lo = self.ofs.partition_point(|&(b, _)| b < i);
        let hi = lo + self.ofs[lo..].partition_point(|&(b, _)| b == i);
        let (rlo, rhi) = if self.refs.is_empty() {
            (0, 0)
        } else {
            let rlo = self.refs.partition_point(|(b, _)| b < id);
            (
                rlo,
                rlo + self.refs[rlo..].partition_point(|(b, _)| b == id),
            )
        };
        (lo..hi, rlo..rhi)
    }

    pub(super) fn work(&self, progress: Option<&dyn Count>) -> Result<()> {
        let r = self.work_inner(progress);
        if r.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        r
    }

    pub(super) fn work_inner(&self, progress: Option<&dyn Count>) -> Result<()> {
        let objs = self.objs;
        let mut reader = Reader::new(self.pack);
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let first = self.next.fetch_add(ROOTS_PER_TAKE, Ordering::Relaxed);
            if first >= objs.len() {
                return Ok(());
            }
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            if self.interrupt.load(Ordering::Relaxed) {
                return Err(fail("interrupted"));
            }
            if let Some(p) = progress {
                p.set(self.resolved.load(Ordering::Relaxed));
            }
            let take = objs.iter().enumerate().skip(first).take(ROOTS_PER_TAKE);
            for (root, obj) in take {
                if obj.what != What::Whole {
                    continue;
                }
                self.tree(root, &mut reader, &mut stack)?;
            }
        }
    }

    /// Whether object `i` has OFS children (known before its id).
    fn has_ofs_children(&self, i: u32) -> bool {
        let lo = self.ofs.partition_point(|&(b, _)| b < i);
        self.ofs.get(lo).is_some_and(|&(b, _)| b == i)
    }

    /// Record `id` for object `i`; false when it had one (reached again
    /// through a base the pack holds twice).
    fn set_id(&self, i: usize, id: ObjectId) -> bool {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if !ids[i].is_null() {
            return false;
        }
        ids[i] = id;
        drop(ids);
        self.resolved.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Hash the whole object `root`, then resolve everything below it.
    ///
    /// An object that is no base (no delta is built on it) is hashed as it
    /// inflates and never held; a base is held while the deltas on it are
    /// built (and dropped under the cap, see [`CACHE_LIMIT`]). A REF
    /// delta's base is known only by its id, so an object found to be one
    /// after it was hashed is inflated again.
    pub(super) fn tree(
        &self,
        root: usize,
        reader: &mut Reader<'_>,
        stack: &mut Vec<Frame>,
    ) -> Result<()> {
        let objs = self.objs;
        let (id, kind, data) = if self.has_ofs_children(root as u32) {
            let mut data = Vec::new();
            let kind = reader
                .read(objs, root, &mut data)?
                .as_kind()
                .ok_or_else(|| fail("a whole object changed into a delta"))?;
            let id = gix::objs::compute_hash(self.pack.object_hash, kind, &data).map_err(stream)?;
            (id, kind, Some(data))
        } else {
            let (id, kind) = reader.hash(objs, root)?;
            (id, kind, None)
        };
        if !self.set_id(root, id) {
            return Ok(());
        }
        let (o, r) = self.children(root as u32, &id);
        if o.is_empty() && r.is_empty() {
            return Ok(());
        }
        let data = match data {
            Some(d) => d,
            None => {
                let mut d = Vec::new();
                reader.read(objs, root, &mut d)?;
                d
            }
        };
        let mut held = data.len();
        stack.clear();
        stack.push(Frame {
            obj: root as u32,
            data: Some(data),
            ofs: o,
            refs: r,
        });
        while let Some(top) = stack.last_mut() {
            let child = if let Some(i) = top.ofs.next() {
                self.ofs[i].1
            } else if let Some(i) = top.refs.next() {
                self.refs[i].1
            } else {
                let f = stack.pop().expect("a top");
                held -= f.data.map_or(0, |d| d.len());
                continue;
            };
            let last = top.ofs.is_empty() && top.refs.is_empty();
            let at = stack.len() - 1;
            let base_obj = stack[at].obj as usize;
            let base_id = self.ids.lock().unwrap_or_else(|p| p.into_inner())[base_obj];
            let (base, rebuilt) = data_of(stack, at, objs, kind, reader)?;
            held += rebuilt;
            let check = |size: u64| match self.limits.object_passed(size, || PackObject {
                offset: objs[child as usize].offset,
                kind: Some(kind),
                base: Some(base_id),
            }) {
                Some(e) => Err(StoreError::Limit(e)),
                None => Ok(()),
            };
            // The result is kept only when a delta is known to be built on
            // it; else it is hashed as it is built.
            let mut target = Vec::new();
            let kept = self.has_ofs_children(child);
            let id = reader.apply(
                objs,
                child as usize,
                base,
                kind,
                kept.then_some(&mut target),
                check,
            )?;
            if !self.set_id(child as usize, id) {
                continue;
            }
            let (o, r) = self.children(child, &id);
            let is_base = !(o.is_empty() && r.is_empty());
            if is_base && !kept {
                // A REF delta's base, found by its id: built again, kept.
                reader.apply(objs, child as usize, base, kind, Some(&mut target), |_| {
                    Ok(())
                })?;
            }
            if last {
                // The base has no other child: its data goes now (the frame
                // stays, as a link of the chain a dropped child is rebuilt
                // along).
                if let Some(d) = stack[at].data.take() {
                    held -= d.len();
                }
            }
            if !is_base {
                continue;
            }
            held += target.len();
            stack.push(Frame {
                obj: child,
                data: Some(target),
                ofs: o,
                refs: r,
            });
            // Over the cap: drop the data nearest the root first (the
            // furthest from being needed again); the top stays.
            let top = stack.len() - 1;
            for f in stack[..top].iter_mut() {
                if held <= self.limit {
                    break;
                }
                if let Some(d) = f.data.take() {
                    held -= d.len();
                }
            }
        }
        Ok(())
    }
}

/// The data of frame `at`, rebuilt from the nearest frame below it that
/// still holds its data (or from the pack) when it was dropped; also says
/// how many bytes were rebuilt (now held again). Rebuilding holds one base
/// and one result at a time.
pub(super) fn data_of<'s>(
    stack: &'s mut [Frame],
    at: usize,
    objs: &[Obj],
    kind: Kind,
    reader: &mut Reader<'_>,
) -> Result<(&'s [u8], usize)> {
    let mut rebuilt = 0;
    if stack[at].data.is_none() {
        let from = (0..at).rev().find(|&i| stack[i].data.is_some());
        let (mut data, start) = match from {
            Some(i) => (stack[i].data.clone().expect("held"), i + 1),
            None => {
                let mut d = Vec::new();
                reader.read(objs, stack[0].obj as usize, &mut d)?;
                (d, 1)
            }
        };
        for f in &stack[start..=at] {
            let mut next = Vec::new();
            reader.apply(objs, f.obj as usize, &data, kind, Some(&mut next), |_| {
                Ok(())
            })?;
            data = next;
        }
        rebuilt = data.len();
        stack[at].data = Some(data);
    }
    Ok((stack[at].data.as_deref().expect("held"), rebuilt))
}
