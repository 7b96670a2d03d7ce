//! Writing the counted objects as a pack ([`write`]): gix-pack's entries
//! for packed objects, loose objects encoded here (whole, as deltas, or
//! streamed when large), a whole local pack or a bitmap's choice copied as
//! stored; what the write takes ([`Counted`]); and the delta encoder
//! (`Worker`) the count's thin deltas use too.

use std::io::Write;

use gix::ObjectId;
use gix_pack::data::output;

use super::{cores, unreadable, Base, PackError, PackStats};
use super::{MAX_DELTA_OBJECT, MIN_DELTA_OBJECT};
use crate::local::ObjectStoreError;
use crate::push::bitmap;
use crate::push::delta;
use crate::push::odb::Db;

/// Objects counted and ready to write.
pub(crate) struct Counted {
    /// Objects stored in local packs, written by gix-pack.
    pub(super) packed: Vec<output::Count>,
    /// Loose objects, in pack order, each with the bases to try: every
    /// in-pack base comes first.
    pub(super) loose: Vec<(ObjectId, Vec<Base>)>,
    pub(super) db: Db,
    /// A local pack that is exactly what the new tips reach, sent as it is.
    pub(super) whole: Option<bitmap::WholePack>,
    /// The objects to send, chosen from a pack's bitmaps and copied as
    /// that pack stores them.
    pub(super) reuse: Option<bitmap::Reuse>,
    /// Packed objects gix-pack would write whole, encoded instead as REF
    /// deltas against a previous version the remote has.
    pub(super) thin_entries: std::collections::HashMap<ObjectId, output::Entry>,
}

impl Counted {
    /// How many objects the pack will hold.
    pub(crate) fn objects(&self) -> u64 {
        if let Some(reuse) = &self.reuse {
            return reuse.len() as u64;
        }
        if let Some(whole) = &self.whole {
            return u64::from(whole.objects);
        }
        (self.packed.len() + self.loose.len()) as u64
    }
}

/// A writer that counts what goes through it and tells `callback` (at most
/// every 100 ms, and once at the end): stage `sending`, the pack's object
/// count, the bytes written so far.
pub(crate) struct ProgressWriter<'a> {
    inner: &'a mut dyn Write,
    objects: u64,
    bytes: u64,
    callback: Option<crate::progress::ProgressCallback>,
    last: Option<std::time::Instant>,
}

impl<'a> ProgressWriter<'a> {
    pub(crate) fn new(
        inner: &'a mut dyn Write,
        objects: u64,
        callback: Option<crate::progress::ProgressCallback>,
    ) -> Self {
        ProgressWriter {
            inner,
            objects,
            bytes: 0,
            callback,
            last: None,
        }
    }

    fn report(&mut self, force: bool) {
        let Some(cb) = &self.callback else { return };
        let now = std::time::Instant::now();
        if !force
            && self
                .last
                .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        cb(&crate::Progress {
            stage: "sending".into(),
            objects: self.objects,
            bytes: self.bytes,
        });
    }
}

impl Write for ProgressWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        self.report(false);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()?;
        self.report(true);
        Ok(())
    }
}

/// Write the counted objects as a pack into `out`; returns what was written.
/// A failure of `out` is [`PackError::Sink`]; any other is this side's.
pub(crate) fn write(counted: Counted, out: &mut dyn Write) -> Result<PackStats, PackError> {
    let Counted {
        packed,
        loose,
        db,
        whole,
        reuse,
        mut thin_entries,
    } = counted;
    if let Some(reuse) = reuse {
        let num = reuse.len();
        let entries = reuse
            .entries(db.clone(), thin_entries)
            .map(|c| Ok(c?.into_iter().map(Item::Entry).collect()));
        return write_entries(entries, num, &db, out);
    }
    if let Some(whole) = whole {
        return write_whole(whole, out);
    }
    let num = packed.len() + loose.len();
    let shift = loose.len();
    let loose = LooseEntries::new(loose, &db);
    let packed: Box<dyn Iterator<Item = Result<Vec<Item>, PackError>>> = if packed.is_empty() {
        Box::new(std::iter::empty())
    } else {
        let entries = output::entry::iter_from_counts(
            packed,
            db.clone(),
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
        .map_err(|e| ObjectStoreError::unreadable("the packed objects to send", &e))?;
        // gix numbers the packed objects from 0; the loose ones go first.
        Box::new(gix::parallel::InOrderIter::from(entries).map(move |chunk| {
            let mut entries = chunk
                .map_err(|e| ObjectStoreError::unreadable("the packed objects to send", &e))?;
            for e in &mut entries {
                match &mut e.kind {
                    output::entry::Kind::DeltaRef { object_index } => {
                        *object_index += shift;
                    }
                    output::entry::Kind::Base(_) => {
                        if let Some(thin) = thin_entries.remove(&e.id) {
                            *e = thin;
                        }
                    }
                    output::entry::Kind::DeltaOid { .. } => {}
                }
            }
            Ok(entries.into_iter().map(Item::Entry).collect())
        }))
    };
    write_entries(loose.chain(packed), num, &db, out)
}

/// A local pack that is exactly the push, copied as it is into `out`.
fn write_whole(whole: bitmap::WholePack, out: &mut dyn Write) -> Result<PackStats, PackError> {
    let mut counter = CountingWrite::new(out);
    // In 1 MiB writes: each write to the wire costs a probe of the
    // connection too, and 8 KiB writes of a 20 MB pack were 2,500.
    let mut file = std::io::BufReader::with_capacity(1 << 20, whole.file);
    if let Err(e) = std::io::copy(&mut file, &mut counter) {
        return Err(match counter.failed.take() {
            Some(sink) => PackError::Sink(sink),
            None => ObjectStoreError::unreadable("the local pack sent whole", &e).into(),
        });
    }
    Ok(PackStats {
        objects: u64::from(whole.objects),
        bytes: counter.n,
    })
}

/// One object of the pack as it is written.
pub(crate) enum Item {
    /// Encoded in memory: small objects, deltas, entries copied as a local
    /// pack stores them.
    Entry(output::Entry),
    /// A large loose object sent whole: inflated from its file and
    /// deflated into the pack as it is written, never held whole.
    Large {
        id: ObjectId,
        kind: gix::object::Kind,
        size: u64,
    },
}

/// A version 2 pack of `num` objects from `items` (chunks in pack order),
/// written to `out` as it is produced: each entry's header and data, then
/// the trailer (the SHA-1 of everything before it). The input and the
/// sink each record their own failure, typed, as it happens.
fn write_entries(
    items: impl Iterator<Item = Result<Vec<Item>, PackError>>,
    num: usize,
    db: &Db,
    out: &mut dyn Write,
) -> Result<PackStats, PackError> {
    let objects = u32::try_from(num).map_err(|_| PackError::TooMany { objects: num })?;
    let mut w = PackOut {
        out: CountingWrite::new(out),
        hasher: gix::hash::hasher(gix::hash::Kind::Sha1),
    };
    let written = write_items(items, objects, db, &mut w);
    let sink = |w: &mut PackOut<'_>, e: PackError| match w.out.failed.take() {
        Some(sink) => PackError::Sink(sink),
        None => e,
    };
    if let Err(e) = written {
        return Err(sink(&mut w, e));
    }
    let PackOut { mut out, hasher } = w;
    let digest = hasher
        .try_finalize()
        .map_err(|e| ObjectStoreError::unreadable("the pack's checksum", &e))?;
    if let Err(e) = out.write_all(digest.as_slice()).and_then(|_| out.flush()) {
        return Err(PackError::Sink(out.failed.take().unwrap_or(e)));
    }
    Ok(PackStats {
        objects: num as u64,
        bytes: out.n,
    })
}

fn write_items(
    items: impl Iterator<Item = Result<Vec<Item>, PackError>>,
    objects: u32,
    db: &Db,
    w: &mut PackOut<'_>,
) -> Result<(), PackError> {
    let io = |e: std::io::Error| PackError::Sink(e);
    w.write_all(&gix_pack::data::header::encode(
        gix_pack::data::Version::V2,
        objects,
    ))
    .map_err(io)?;
    // Where each entry starts (`None`: an entry gix-pack marked invalid,
    // left out as gix-pack's writer leaves it out).
    let mut offsets: Vec<Option<u64>> = Vec::with_capacity(objects as usize);
    let objects_dir = db.store_ref().path().to_owned();
    let mut zbuf = Vec::new();
    for chunk in items {
        for item in chunk? {
            let here = w.out.n;
            match item {
                Item::Entry(e) => {
                    if e.is_invalid() {
                        offsets.push(None);
                        continue;
                    }
                    if let output::entry::Kind::DeltaRef { object_index } = e.kind {
                        if offsets.get(object_index).copied().flatten().is_none() {
                            return Err(ObjectStoreError::unreadable(
                                format!("the delta base of {}", e.id),
                                &std::io::Error::other("its base is not in the pack"),
                            )
                            .into());
                        }
                    }
                    offsets.push(Some(here));
                    let header = e.to_entry_header(gix_pack::data::Version::V2, |index| {
                        here - offsets[index].expect("checked above")
                    });
                    header.write_to(e.decompressed_size as u64, w).map_err(io)?;
                    w.write_all(&e.compressed_data).map_err(io)?;
                }
                Item::Large { id, kind, size } => {
                    offsets.push(Some(here));
                    let header = match kind {
                        gix::object::Kind::Blob => gix_pack::data::entry::Header::Blob,
                        gix::object::Kind::Tree => gix_pack::data::entry::Header::Tree,
                        gix::object::Kind::Commit => gix_pack::data::entry::Header::Commit,
                        gix::object::Kind::Tag => gix_pack::data::entry::Header::Tag,
                    };
                    header.write_to(size, w).map_err(io)?;
                    write_large(&objects_dir, db, &id, size, w, &mut zbuf)?;
                }
            }
        }
    }
    Ok(())
}

/// The pack's sink: counted, and hashed for the trailer.
struct PackOut<'a> {
    out: CountingWrite<'a>,
    hasher: gix::hash::Hasher,
}

impl Write for PackOut<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Loose objects larger than this are never held whole to be written:
/// sent whole, each is inflated from its file and deflated into the pack
/// a buffer at a time (a loose, incompressible 48 MiB file held three
/// times over made a push's peak 1.5 times git's).
const LARGE_OBJECT: u64 = 4 << 20;

/// The inflate and deflate buffers of a large object.
const STREAM_BUF: usize = 256 * 1024;

/// A loose object's file, its header read: the content follows.
struct LooseFile {
    kind: gix::object::Kind,
    size: u64,
    reader: std::io::BufReader<std::fs::File>,
    state: gix::zlib::Decompress,
    /// Content inflated with the header.
    first: Vec<u8>,
}

/// Open loose object `id` under `objects` and read its header; `None`
/// when it is not loose (packed since it was counted).
fn open_loose(objects: &std::path::Path, id: &ObjectId) -> std::io::Result<Option<LooseFile>> {
    let hex = id.to_hex().to_string();
    let path = objects.join(&hex[..2]).join(&hex[2..]);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut reader = std::io::BufReader::with_capacity(16 * 1024, file);
    let mut state = gix::zlib::Decompress::new();
    let mut head = vec![0u8; 8 * 1024];
    let n = gix::zlib::stream::inflate::read(&mut reader, &mut state, &mut head)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a loose object header");
    let nul = head[..n].iter().position(|&b| b == 0).ok_or_else(bad)?;
    let header = std::str::from_utf8(&head[..nul]).map_err(|_| bad())?;
    let (kind, size) = header.split_once(' ').ok_or_else(bad)?;
    let kind = gix::object::Kind::from_bytes(kind.as_bytes()).map_err(|_| bad())?;
    let size: u64 = size.parse().map_err(|_| bad())?;
    let first = head[nul + 1..n].to_vec();
    Ok(Some(LooseFile {
        kind,
        size,
        reader,
        state,
        first,
    }))
}

impl LooseFile {
    /// Inflate the content into `out`, a buffer at a time; exactly `size`
    /// bytes or an error.
    fn copy_into(
        mut self,
        out: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut done = self.first.len() as u64;
        if done > self.size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a loose object longer than its header says",
            ));
        }
        out(&self.first)?;
        let mut buf = vec![0u8; STREAM_BUF];
        while done < self.size {
            let want = (self.size - done).min(buf.len() as u64) as usize;
            let n = gix::zlib::stream::inflate::read(
                &mut self.reader,
                &mut self.state,
                &mut buf[..want],
            )?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a loose object shorter than its header says",
                ));
            }
            out(&buf[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// The whole content, in one buffer of its size (the one copy).
    fn read_all(self) -> std::io::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.size as usize);
        self.copy_into(&mut |b| {
            data.extend_from_slice(b);
            Ok(())
        })?;
        Ok(data)
    }
}

/// Deflate large object `id` (`size` bytes) into `w` as it is inflated
/// from its loose file; from the object store when it is no longer loose.
fn write_large(
    objects: &std::path::Path,
    db: &Db,
    id: &ObjectId,
    size: u64,
    w: &mut PackOut<'_>,
    buf: &mut Vec<u8>,
) -> Result<(), PackError> {
    let mut z = gix::zlib::stream::deflate::Write::new(&mut *w, gix::zlib::Compression::default());
    let streamed = match open_loose(objects, id) {
        Err(e) => Err(unreadable(id, &e)),
        Ok(Some(file)) if file.size == size => file
            .copy_into(&mut |b| z.write_all(b))
            .map_err(PackError::Sink),
        Ok(_) => {
            use gix::objs::Find;
            let data = db
                .try_find(id, buf)
                .map_err(|e| unreadable(id, &e))?
                .ok_or(ObjectStoreError::Missing {
                    id: *id,
                    kind: None,
                })?;
            z.write_all(data.data).map_err(PackError::Sink)
        }
    };
    let streamed = streamed.and_then(|_| z.flush().map_err(PackError::Sink));
    drop(z);
    match streamed {
        // Not the sink's failure (it keeps its own): the loose file's.
        Err(PackError::Sink(e)) if w.out.failed.is_none() => Err(unreadable(id, &e)),
        other => other,
    }
}

/// Loose objects as pack entries, a chunk at a time, each chunk encoded on
/// every core.
struct LooseEntries {
    plan: Vec<(ObjectId, Vec<Base>)>,
    /// One per thread, kept across chunks (with their delta-base caches).
    workers: Vec<Worker>,
    next: usize,
}

impl LooseEntries {
    fn new(plan: Vec<(ObjectId, Vec<Base>)>, db: &Db) -> LooseEntries {
        let threads = cores().min(plan.len().div_ceil(LOOSE_PER_THREAD)).max(1);
        LooseEntries {
            plan,
            workers: (0..threads).map(|_| Worker::new(db.clone())).collect(),
            next: 0,
        }
    }
}

/// Loose objects encoded per chunk: bounds what is held before writing.
const LOOSE_CHUNK: usize = 256;
/// Fewer objects than this per thread are not worth a thread.
pub(super) const LOOSE_PER_THREAD: usize = 16;

impl Iterator for LooseEntries {
    type Item = Result<Vec<Item>, PackError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.plan.len() {
            return None;
        }
        let end = (self.next + LOOSE_CHUNK).min(self.plan.len());
        let chunk = &self.plan[self.next..end];
        self.next = end;
        let threads = self
            .workers
            .len()
            .min(chunk.len().div_ceil(LOOSE_PER_THREAD));
        let result: Result<Vec<Item>, PackError> = if threads <= 1 {
            let w = &mut self.workers[0];
            chunk.iter().map(|(id, bases)| w.entry(id, bases)).collect()
        } else {
            // Contiguous parts: a base placed just before its delta is
            // usually in the same part, and in that worker's recent objects.
            let mut slots: Vec<Option<Result<Item, PackError>>> =
                std::iter::repeat_with(|| None).take(chunk.len()).collect();
            let span = tracing::Span::current();
            std::thread::scope(|scope| {
                let per = chunk.len().div_ceil(threads);
                for ((part, slots), w) in chunk
                    .chunks(per)
                    .zip(slots.chunks_mut(per))
                    .zip(self.workers.iter_mut())
                {
                    let span = span.clone();
                    scope.spawn(move || {
                        let _attempt = span.enter();
                        for ((id, bases), slot) in part.iter().zip(slots) {
                            *slot = Some(w.entry(id, bases));
                        }
                    });
                }
            });
            slots
                .into_iter()
                .map(|s| s.expect("every slot is filled"))
                .collect()
        };
        Some(result)
    }
}

/// A pack entry for object `id` (a `kind`) as `delta` against `base`.
fn delta_entry(
    id: &ObjectId,
    kind: gix::object::Kind,
    delta: &[u8],
    base: Base,
) -> Result<output::Entry, PackError> {
    let d = gix::objs::Data {
        kind,
        object_hash: gix::hash::Kind::Sha1,
        data: delta,
    };
    let count = output::Count::from_data(*id, None);
    let mut entry =
        output::Entry::from_data(&count, &d, Default::default()).map_err(|e| unreadable(id, &e))?;
    entry.kind = match base {
        Base::InPack(index, _) => output::entry::Kind::DeltaRef {
            object_index: index,
        },
        Base::Remote(id) => output::entry::Kind::DeltaOid { id },
    };
    Ok(entry)
}

/// Objects a worker keeps after encoding them (as bases for what follows).
const RECENT: usize = 16;
/// Objects larger than this are not kept.
const RECENT_MAX_SIZE: usize = 1 << 20;

/// What one encoding thread owns: an object database handle and the
/// objects it encoded last.
pub(super) struct Worker {
    db: Db,
    recent: std::collections::VecDeque<(ObjectId, gix::object::Kind, std::sync::Arc<[u8]>)>,
    buf: Vec<u8>,
}

impl Worker {
    pub(super) fn new(db: Db) -> Worker {
        Worker {
            db,
            recent: Default::default(),
            buf: Vec::new(),
        }
    }

    fn object(
        &mut self,
        id: &ObjectId,
    ) -> Result<(gix::object::Kind, std::sync::Arc<[u8]>), PackError> {
        use gix::objs::Find;
        if let Some((_, kind, data)) = self.recent.iter().find(|(i, _, _)| i == id) {
            return Ok((*kind, data.clone()));
        }
        let obj = self
            .db
            .try_find(id, &mut self.buf)
            .map_err(|e| unreadable(id, &e))?
            .ok_or(ObjectStoreError::Missing {
                id: *id,
                kind: None,
            })?;
        Ok((obj.kind, obj.data.into()))
    }

    fn remember(&mut self, id: ObjectId, kind: gix::object::Kind, data: std::sync::Arc<[u8]>) {
        if data.len() <= RECENT_MAX_SIZE {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((id, kind, data));
        }
    }

    /// The smallest delta of `data` against one of `bases`, if one is
    /// under half its size.
    fn best_delta(
        &mut self,
        kind: gix::object::Kind,
        data: &[u8],
        bases: &[Base],
    ) -> Option<(Vec<u8>, Base)> {
        let size = data.len();
        let mut best: Option<(Vec<u8>, Base)> = None;
        if !(MIN_DELTA_OBJECT..=MAX_DELTA_OBJECT).contains(&size) {
            return None;
        }
        for base in bases {
            let (Base::InPack(_, b) | Base::Remote(b)) = base;
            let Ok((base_kind, base_data)) = self.object(b) else {
                continue;
            };
            if base_kind != kind || base_data.len() > MAX_DELTA_OBJECT {
                continue;
            }
            let limit = best.as_ref().map_or(size / 2, |(d, _)| d.len() - 1);
            if let Some(d) = delta::Index::new(&base_data).delta(data, limit) {
                best = Some((d, *base));
            }
        }
        best
    }

    /// A REF delta of object `id` against one of `bases` (objects the
    /// remote has), when one is under half its size.
    pub(super) fn thin_entry(
        &mut self,
        id: &ObjectId,
        bases: &[ObjectId],
    ) -> Option<output::Entry> {
        let (kind, data) = self.object(id).ok()?;
        let bases: Vec<Base> = bases.iter().map(|b| Base::Remote(*b)).collect();
        let (delta, base) = self.best_delta(kind, &data, &bases)?;
        delta_entry(id, kind, &delta, base).ok()
    }

    /// One loose object as a pack entry: a delta against the base that
    /// gives the smallest one, when that is under half the object's size;
    /// else whole.
    fn entry(&mut self, id: &ObjectId, bases: &[Base]) -> Result<Item, PackError> {
        if let Some(item) = self.large(id, bases)? {
            return Ok(item);
        }
        let (kind, data) = self.object(id)?;
        let entry = match self.best_delta(kind, &data, bases) {
            None => {
                let whole = gix::objs::Data {
                    kind,
                    object_hash: gix::hash::Kind::Sha1,
                    data: &data,
                };
                let count = output::Count::from_data(*id, None);
                output::Entry::from_data(&count, &whole, Default::default())
                    .map_err(|e| unreadable(id, &e))?
            }
            Some((delta, base)) => delta_entry(id, kind, &delta, base)?,
        };
        self.remember(*id, kind, data);
        Ok(Item::Entry(entry))
    }

    /// A loose object larger than [`LARGE_OBJECT`]: a delta when one of
    /// `bases` gives one (the object read once, into one buffer of its
    /// size, and dropped before the next), else sent whole as the pack is
    /// written ([`Item::Large`]). `None`: not loose, or not large.
    fn large(&mut self, id: &ObjectId, bases: &[Base]) -> Result<Option<Item>, PackError> {
        let objects = self.db.store_ref().path().to_owned();
        let Some(file) = open_loose(&objects, id).map_err(|e| unreadable(id, &e))? else {
            return Ok(None);
        };
        if file.size <= LARGE_OBJECT {
            return Ok(None);
        }
        let (kind, size) = (file.kind, file.size);
        if !bases.is_empty() && size <= MAX_DELTA_OBJECT as u64 {
            let data = file.read_all().map_err(|e| unreadable(id, &e))?;
            if let Some((delta, base)) = self.best_delta(kind, &data, bases) {
                return Ok(Some(Item::Entry(delta_entry(id, kind, &delta, base)?)));
            }
        }
        Ok(Some(Item::Large {
            id: *id,
            kind,
            size,
        }))
    }
}

/// The sink, counting what it took and keeping a copy of its first
/// failure (so a failed write is told from a failed read).
struct CountingWrite<'a> {
    inner: &'a mut dyn Write,
    n: u64,
    failed: Option<std::io::Error>,
}

impl<'a> CountingWrite<'a> {
    fn new(inner: &'a mut dyn Write) -> CountingWrite<'a> {
        CountingWrite {
            inner,
            n: 0,
            failed: None,
        }
    }

    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(crate::local::copy_io(e));
            }
        }
        r
    }
}

impl Write for CountingWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        let n = self.note(r)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}
