//! Resolving the deltas of a written pack: every object's id, base by
//! base, depth first, with the data held along the chain capped
//! ([`CACHE_LIMIT`]), on several threads.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::hash::ObjectId;
use gix::progress::Count;
use gix_pack::data::entry::Header;
use gix_pack::data::input;

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
    /// REF deltas with their base in the pack: (base id, delta index).
    pub(super) ref_bases: Vec<(ObjectId, u32)>,
}

impl Entries {
    /// Note the entry `e` just written.
    pub(super) fn add(&mut self, e: &input::Entry, object_hash: gix::hash::Kind) -> Result<()> {
        let index = u32::try_from(self.objs.len()).map_err(|_| fail("too many objects"))?;
        let (what, base) = match e.header {
            Header::OfsDelta { base_distance } => {
                let at = Header::verified_base_pack_offset(e.pack_offset, base_distance)
                    .ok_or_else(|| fail("an OFS delta's base is outside the pack"))?;
                let base = self
                    .objs
                    .binary_search_by_key(&at, |o| o.offset)
                    .map_err(|_| fail("an OFS delta's base is not an entry"))?;
                (What::Ofs, base as u32)
            }
            Header::RefDelta { base_id } => {
                self.ref_bases.push((base_id, index));
                (What::Ref, 0)
            }
            _ => (What::Whole, 0),
        };
        self.objs.push(Obj {
            offset: e.pack_offset,
            crc32: e.crc32.expect("computed"),
            base,
            what,
        });
        // A null id stands for "not hashed yet".
        self.ids.push(object_hash.null());
        Ok(())
    }
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

/// Inflate one zlib stream of known output size into `out`.
pub(super) fn inflate_into(
    inflate: &mut gix::zlib::Inflate,
    data: &[u8],
    size: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let size = usize::try_from(size).map_err(|_| fail("object too large"))?;
    out.clear();
    out.resize(size, 0);
    inflate.reset();
    let (_, _, produced) = inflate.once(data, out).map_err(stream)?;
    if produced != size {
        return Err(fail(
            "an entry inflates to another size than its header says",
        ));
    }
    Ok(())
}

/// Reads entries back with positioned reads and inflates them.
pub(super) struct Reader<'a> {
    pack: &'a Written<'a>,
    inflate: gix::zlib::Inflate,
    packed: Vec<u8>,
}

impl Reader<'_> {
    /// Inflate entry `i` into `out`; returns its header.
    pub(super) fn read(&mut self, objs: &[Obj], i: usize, out: &mut Vec<u8>) -> Result<Header> {
        let start = objs[i].offset;
        let end = objs.get(i + 1).map_or(self.pack.end, |o| o.offset);
        let n = end
            .checked_sub(start)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| fail("entries overlap"))?;
        self.packed.clear();
        self.packed.resize(n, 0);
        self.pack
            .file
            .read_exact_at(&mut self.packed, start)
            .map_err(disk("read back the temporary pack", self.pack.dir))?;
        let entry = gix_pack::data::Entry::from_bytes(&self.packed, start, self.pack.object_hash)
            .map_err(stream)?;
        let body = self
            .packed
            .get(entry.header_size()..)
            .ok_or_else(|| fail("an entry is shorter than its header"))?;
        let r = inflate_into(&mut self.inflate, body, entry.decompressed_size, out);
        if self.packed.capacity() > 1 << 20 {
            self.packed = Vec::new();
        }
        r.map(|()| entry.header)
    }
}

/// The size of a delta's result, as its header declares it (after its
/// base's size).
pub(super) fn delta_result_size(delta: &[u8]) -> Result<u64> {
    let mut at = 0;
    let mut varint = || -> Result<u64> {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = *delta
                .get(at)
                .ok_or_else(|| fail("a delta ends inside its header"))?;
            at += 1;
            if shift >= 64 {
                return Err(fail("a delta's header has a size without end"));
            }
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    };
    varint()?;
    varint()
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
/// on `threads` threads that take whole objects in turn.
pub(super) fn resolve(
    pack: &Written<'_>,
    entries: &mut Entries,
    threads: usize,
    limits: Limits,
    progress: &dyn Count,
    interrupt: &AtomicBool,
) -> Result<()> {
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
        next: std::sync::atomic::AtomicUsize::new(0),
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
    let resolved = shared.resolved.into_inner();
    if resolved != objs.len() {
        return Err(fail(format!(
            "{} deltas have no base in the pack or the repository",
            objs.len() - resolved
        )));
    }
    Ok(())
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
        let mut reader = Reader {
            pack: self.pack,
            inflate: gix::zlib::Inflate::default(),
            packed: Vec::new(),
        };
        let mut delta = Vec::new();
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
                self.tree(root, &mut reader, &mut delta, &mut stack)?;
            }
        }
    }

    /// Hash the whole object `root`, then resolve everything below it.
    pub(super) fn tree(
        &self,
        root: usize,
        reader: &mut Reader<'_>,
        delta: &mut Vec<u8>,
        stack: &mut Vec<Frame>,
    ) -> Result<()> {
        let objs = self.objs;
        let mut data = Vec::new();
        let kind = reader
            .read(objs, root, &mut data)?
            .as_kind()
            .ok_or_else(|| fail("a whole object changed into a delta"))?;
        let id = gix::objs::compute_hash(self.pack.object_hash, kind, &data).map_err(stream)?;
        self.ids.lock().unwrap_or_else(|p| p.into_inner())[root] = id;
        self.resolved.fetch_add(1, Ordering::Relaxed);
        let (o, r) = self.children(root as u32, &id);
        if o.is_empty() && r.is_empty() {
            return Ok(());
        }
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
            let (base, rebuilt) = data_of(stack, at, objs, reader, delta)?;
            reader.read(objs, child as usize, delta)?;
            let size = delta_result_size(delta)?;
            if let Some(e) = self.limits.object_passed(size, || PackObject {
                offset: objs[child as usize].offset,
                kind: Some(kind),
                base: Some(self.ids.lock().unwrap_or_else(|p| p.into_inner())[base_obj]),
            }) {
                return Err(StoreError::Limit(e));
            }
            let mut target = Vec::new();
            crate::fetch::apply::apply(base, delta, &mut target).map_err(stream)?;
            held += rebuilt;
            let id =
                gix::objs::compute_hash(self.pack.object_hash, kind, &target).map_err(stream)?;
            {
                let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
                let slot = &mut ids[child as usize];
                if !slot.is_null() {
                    // Reached again through a base the pack holds twice.
                    continue;
                }
                *slot = id;
            }
            self.resolved.fetch_add(1, Ordering::Relaxed);
            if last {
                // The base has no other child: its data goes now (the frame
                // stays, as a link of the chain a dropped child is rebuilt
                // along).
                if let Some(d) = stack[at].data.take() {
                    held -= d.len();
                }
            }
            let (o, r) = self.children(child, &id);
            if o.is_empty() && r.is_empty() {
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
/// how many bytes were rebuilt (now held again).
pub(super) fn data_of<'s>(
    stack: &'s mut [Frame],
    at: usize,
    objs: &[Obj],
    reader: &mut Reader<'_>,
    delta: &mut Vec<u8>,
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
            reader.read(objs, f.obj as usize, delta)?;
            let mut next = Vec::new();
            crate::fetch::apply::apply(&data, delta, &mut next).map_err(stream)?;
            data = next;
        }
        rebuilt = data.len();
        stack[at].data = Some(data);
    }
    Ok((stack[at].data.as_deref().expect("held"), rebuilt))
}
