//! Storing a received pack: our own indexer, which reads the pack back with
//! positioned reads (`read_at`) instead of mapping it, so the pack's pages
//! never count in the process's resident memory.
//!
//! 1. The stream is parsed entry by entry (gix-pack's `BytesToEntriesIter`,
//!    which also checks the sender's trailer), thin-pack bases are fetched
//!    from the local object database and inserted before their first delta
//!    (`LookupRefDeltaObjectsIter`), and every entry is written to a
//!    temporary file in `objects/pack` (`EntriesToBytesIter`, which writes
//!    the final header and trailer); 24 bytes an entry are kept.
//! 2. Each whole object is read back and hashed, and the deltas on it are
//!    resolved base by base, depth first: a base's data is kept
//!    while its children are built from it, and the data held along the
//!    current chain is capped ([`CACHE_LIMIT`]); a dropped base is rebuilt
//!    from the nearest ancestor still held when it is needed again. With
//!    several threads, each takes whole objects in turn and holds at most
//!    its share of the cap.
//! 3. A version 2 `.idx` is written (fanout, sorted ids, CRC32s, 31-bit
//!    offsets with a table of 64-bit ones, pack checksum, own checksum), the
//!    pack is checked to end in its checksum (the sender's trailer was
//!    checked on the way in, the written file's hashed as read back), and
//!    the pair is moved into place as `pack-<hash>.pack` / `.idx` behind a
//!    `.keep`, which the caller removes once its refs point into the pack.
//!
//! A failure is a `StoreError` that keeps the sides apart: the pack as the
//! server sent it (the wire's, classed from it), the local disk (a
//! temporary file that cannot be created, written, read back, synced or
//! moved; the `.keep`) and the local object store (a thin pack's base):
//! the last two are `local-error`, never tried again. gix-pack's iterators
//! give one opaque error for their input and output alike, so the file
//! they write and the store they read keep their own first failure.

use std::fs::File;
use std::io::{self, BufRead, BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gix::hash::ObjectId;
use gix::progress::{Count, DynNestedProgress, Progress};
use gix_pack::data::entry::Header;
use gix_pack::data::input;

use crate::local::{DiskError, ObjectStoreError};

/// Data held along the chain being resolved, at most (the top of the chain
/// is always held, whatever its size).
pub(crate) const CACHE_LIMIT: usize = 4 << 20;

#[cfg(test)]
thread_local! {
    /// The cap, as a test sets it.
    static TEST_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(CACHE_LIMIT) };
}

fn cache_limit() -> usize {
    #[cfg(test)]
    return TEST_LIMIT.with(|l| l.get());
    #[cfg(not(test))]
    CACHE_LIMIT
}

/// What a stored pack is.
#[derive(Debug)]
pub(crate) struct Stored {
    /// Objects in the pack (with any bases a thin pack needed).
    pub objects: u32,
    /// The pack's size in bytes.
    pub bytes: u64,
    /// The pack's checksum (its name).
    pub hash: ObjectId,
    /// The `.pack`, `.idx` and `.keep` paths; `None` for an empty pack,
    /// which is not stored.
    pub paths: Option<Paths>,
}

/// Where a stored pack is.
#[derive(Debug)]
pub(crate) struct Paths {
    pub pack: PathBuf,
    pub index: PathBuf,
    /// `None` when the pack was already there.
    pub keep: Option<PathBuf>,
}

/// Why storing a received pack failed: the pack as the server sent it
/// (the wire's, classed from it), or this side (the disk, the object
/// store: `local-error`, never tried again).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The pack stream could not be read, or is no valid pack: an entry,
    /// a delta or the trailer is wrong, a base is missing.
    #[error("{0}")]
    Stream(String),
    /// The local disk refused a step: creating, writing, syncing, reading
    /// back or moving a temporary pack or index, writing the `.keep`.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// A thin pack's base could not be read from the local object store.
    #[error(transparent)]
    ObjectStore(#[from] ObjectStoreError),
}

impl StoreError {
    /// Whether this side failed (the disk, the object store), not the
    /// pack the server sent.
    pub(crate) fn is_local(&self) -> bool {
        !matches!(self, StoreError::Stream(_))
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// The pack is not a valid one: `what`.
fn fail(what: impl Into<String>) -> StoreError {
    StoreError::Stream(what.into())
}

/// The pack is not a valid one, in the words of `e` (a gix-pack parser,
/// the inflater, the hasher).
fn stream(e: impl std::error::Error + 'static) -> StoreError {
    StoreError::Stream(sluice_policy::text::error_chain(&e))
}

/// `action` on the disk in `dir` failed.
fn disk<'a>(action: &'static str, dir: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |e| DiskError::new(action, dir, e).into()
}

/// One entry of the pack, as the resolver needs it: 24 bytes an object,
/// and its id beside it (the rest of an entry is read again from its header
/// when needed).
struct Obj {
    /// Where the entry starts (it ends where the next one starts).
    offset: u64,
    crc32: u32,
    /// For an OFS delta, its base's index.
    base: u32,
    what: What,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Whole,
    /// An OFS delta; `base` says on what.
    Ofs,
    /// A REF delta whose base is in the pack (see `ref_bases`).
    Ref,
}

/// The temporary files of this process not yet persisted or removed, so an
/// exit that skips the destructors (a second Ctrl-C) can still remove them.
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remove every temporary pack file this process still has open (for an
/// exit that will not run destructors); returns how many were removed.
pub fn remove_temporary_files() -> usize {
    let paths = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    paths
        .iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

fn forget(path: &Path) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| p != path);
}

/// A temporary file in the pack directory, removed unless persisted.
struct TempFile {
    path: PathBuf,
    /// The pack directory it is in.
    dir: PathBuf,
    file: Option<File>,
}

impl TempFile {
    fn new(dir: &Path, kind: &str) -> Result<TempFile> {
        use std::sync::atomic::AtomicU64;
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for _ in 0..16 {
            let path = dir.join(format!(
                "tmp_{kind}_{}_{}_{nanos:x}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    LIVE.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(path.clone());
                    return Ok(TempFile {
                        path,
                        dir: dir.to_path_buf(),
                        file: Some(file),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(disk("create a temporary pack file", dir)(e)),
            }
        }
        Err(disk("create a temporary pack file", dir)(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name tried is taken",
        )))
    }

    fn file(&self) -> &File {
        self.file.as_ref().expect("open until persisted")
    }

    fn persist(mut self, to: &Path) -> Result<()> {
        let file = self.file.take().expect("persisted once");
        file.sync_all()
            .map_err(disk("sync the temporary pack", &self.dir))?;
        drop(file);
        let moved =
            std::fs::rename(&self.path, to).map_err(disk("move the pack into place", &self.dir));
        if moved.is_ok() {
            forget(&self.path);
        } else {
            let _ = std::fs::remove_file(&self.path);
            forget(&self.path);
        }
        moved
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
            forget(&self.path);
        }
    }
}

/// The first failure of a reader, writer or store the gix-pack iterators
/// call, kept beside their one opaque error.
type Recorded<E> = std::rc::Rc<std::cell::RefCell<Option<E>>>;

/// The pack being written: `EntriesToBytesIter` writes it, rewinds, and reads
/// it back for the trailer. Its first failure is kept (a copy), so a full
/// disk is told from a bad pack in gix-pack's one error.
struct PackOut<'a> {
    w: BufWriter<&'a File>,
    failed: Recorded<io::Error>,
}

impl PackOut<'_> {
    fn note<T>(&self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            self.failed
                .borrow_mut()
                .get_or_insert_with(|| crate::local::copy_io(e));
        }
        r
    }
}

impl Write for PackOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.w.write(buf);
        self.note(r)
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = self.w.flush();
        self.note(r)
    }
}

impl Seek for PackOut<'_> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let r = self.w.seek(pos);
        self.note(r)
    }
}

impl Read for PackOut<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.w.flush().and_then(|()| self.w.get_mut().read(buf));
        self.note(r)
    }
}

/// The local object store as a thin pack's bases are found in it, keeping
/// its first failure (so it is told from a bad pack in gix-pack's one
/// error).
struct Bases<F> {
    find: F,
    failed: Recorded<ObjectStoreError>,
}

impl<F: gix::objs::Find> gix::objs::Find for Bases<F> {
    fn try_find<'a>(
        &self,
        id: &gix::oid,
        buffer: &'a mut Vec<u8>,
    ) -> std::result::Result<Option<gix::objs::Data<'a>>, gix_error::Error> {
        let r = self.find.try_find(id, buffer);
        if let Err(e) = &r {
            self.failed
                .borrow_mut()
                .get_or_insert_with(|| ObjectStoreError::unreadable(format!("base {id}"), e));
        }
        r
    }
}

/// Counts the bytes read into a progress task and stops on interrupt.
struct Counted<'a, R> {
    inner: R,
    progress: &'a dyn Count,
    interrupt: &'a AtomicBool,
    guard: &'a EntryGuard,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(io::Error::other("interrupted"));
        }
        let n = self.inner.read(buf)?;
        self.progress.inc_by(n);
        self.guard.saw(&buf[..n])?;
        Ok(n)
    }
}

/// The largest object a pack entry may declare: this client inflates an
/// object whole to resolve deltas and hash it, so a larger one cannot be
/// held (git streams such blobs; the forges refuse them long before).
pub(crate) const MAX_OBJECT_SIZE: u64 = 4 << 30;

/// What a deflate stream of `size` bytes can need at most: stored blocks
/// (5 bytes per 64 KiB, zlib's 6), with room for the reader's look-ahead
/// (the parser buffers up to 64 KiB past an entry's end).
fn compressed_allowance(size: u64) -> u64 {
    size + size / 16_384 * 5 + (256 << 10)
}

/// Bug D2's bound: gix-pack holds an entry's whole compressed stream while
/// it parses it, so a server that never ends one entry would grow the
/// client until the attempt is cut. The guard reads each entry's header
/// as the bytes pass (the parser reports where each entry ended) and stops
/// the read as soon as an entry declares more than [`MAX_OBJECT_SIZE`], or
/// its stream runs past what its declared size can need: the server's
/// fault, never buffered.
#[derive(Default)]
pub(crate) struct EntryGuard {
    /// Bytes read so far (pack offsets: 0 is the `P` of `PACK`).
    pos: std::cell::Cell<u64>,
    /// Where the entry being parsed begins.
    start: std::cell::Cell<u64>,
    /// The offset its stream may not pass, once its header was read.
    end: std::cell::Cell<Option<u64>>,
    /// The last bytes read, from offset `recent_at` (the header of the
    /// entry being parsed is among them).
    recent: std::cell::RefCell<Vec<u8>>,
    recent_at: std::cell::Cell<u64>,
    /// Why the read was stopped.
    pub(crate) tripped: std::cell::RefCell<Option<String>>,
}

const RECENT: usize = 512 << 10;

impl EntryGuard {
    pub(crate) fn new() -> EntryGuard {
        let g = EntryGuard::default();
        // The first entry follows the 12-byte pack header.
        g.start.set(12);
        g
    }

    /// The parser finished the entry that ends at `next`.
    fn entry_ended(&self, next: u64) {
        self.start.set(next);
        self.end.set(None);
        self.check_header();
    }

    fn trip(&self, why: String) -> io::Error {
        self.tripped.borrow_mut().get_or_insert(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    fn saw(&self, bytes: &[u8]) -> io::Result<()> {
        {
            let mut r = self.recent.borrow_mut();
            r.extend_from_slice(bytes);
            if r.len() > 2 * RECENT {
                let drop = r.len() - RECENT;
                r.drain(..drop);
                self.recent_at.set(self.recent_at.get() + drop as u64);
            }
        }
        self.pos.set(self.pos.get() + bytes.len() as u64);
        if self.end.get().is_none() {
            self.check_header();
        }
        if let Some(why) = self.tripped.borrow().clone() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        match self.end.get() {
            Some(end) if self.pos.get() > end => Err(self.trip(format!(
                "the pack entry at offset {} runs past what its declared size can need \
                 (the server sent a stream without end)",
                self.start.get()
            ))),
            _ => Ok(()),
        }
    }

    /// Parse the current entry's type-and-size header when its bytes are
    /// in: set the end its stream may not pass.
    fn check_header(&self) {
        let r = self.recent.borrow();
        let Some(from) = self.start.get().checked_sub(self.recent_at.get()) else {
            return;
        };
        let Some(head) = r.get(from as usize..) else {
            return;
        };
        let mut size = 0u64;
        let mut shift = 0u32;
        for (i, &b) in head.iter().enumerate() {
            let bits = if i == 0 {
                u64::from(b & 0x0f)
            } else {
                u64::from(b & 0x7f)
            };
            if shift >= 64 {
                drop(r);
                let _ = self.trip(format!(
                    "the pack entry at offset {} has a size header without end",
                    self.start.get()
                ));
                return;
            }
            size |= bits.checked_shl(shift).unwrap_or(u64::MAX);
            shift += if i == 0 { 4 } else { 7 };
            if b & 0x80 == 0 {
                drop(r);
                if size > MAX_OBJECT_SIZE {
                    let _ = self.trip(format!(
                        "the pack entry at offset {} declares {size} bytes, more than this \
                         client holds ({MAX_OBJECT_SIZE})",
                        self.start.get()
                    ));
                    return;
                }
                // Header (≤ 10 bytes), a base offset or id (≤ 20), the stream.
                self.end
                    .set(Some(self.start.get() + 32 + compressed_allowance(size)));
                return;
            }
        }
    }
}

/// Tells the guard where each entry the parser yields ended.
struct Track<'g, I> {
    inner: I,
    guard: &'g EntryGuard,
}

impl<E, I: Iterator<Item = std::result::Result<input::Entry, E>>> Iterator for Track<'_, I> {
    type Item = std::result::Result<input::Entry, E>;

    fn next(&mut self) -> Option<Self::Item> {
        let e = self.inner.next()?;
        if let Ok(e) = &e {
            self.guard
                .entry_ended(e.pack_offset + u64::from(e.header_size) + e.compressed_size);
        }
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// Where and how a received pack is stored ([`Store::store`]).
pub(crate) struct Store<'a, F> {
    /// The pack directory (`objects/pack`).
    pub dir: &'a Path,
    /// Finds the bases a thin pack leaves out (the local object store).
    pub thin: Option<F>,
    /// The object format.
    pub object_hash: gix::hash::Kind,
    /// Threads resolving deltas, each holding at most its share of
    /// [`CACHE_LIMIT`].
    pub threads: usize,
    /// The caller's cancel.
    pub interrupt: &'a AtomicBool,
    /// Stops an entry no valid pack holds as it arrives.
    pub guard: &'a EntryGuard,
}

/// The pack's entries as written to the temporary file: 24 bytes an
/// object, and its id once resolved.
struct Entries {
    objs: Vec<Obj>,
    /// Every object's id, null until resolved.
    ids: Vec<ObjectId>,
    /// REF deltas with their base in the pack: (base id, delta index).
    ref_bases: Vec<(ObjectId, u32)>,
}

impl<F: gix::objs::Find> Store<'_, F> {
    /// Read, check, index and store the pack in `pack` (a whole pack
    /// stream, header to trailer): written to a temporary file as it
    /// arrives ([`Store::receive`]), its deltas resolved ([`resolve`]),
    /// its index written ([`Store::index`]), both moved into place behind
    /// a `.keep` ([`Store::place`]).
    pub(crate) fn store(
        self,
        pack: &mut dyn BufRead,
        progress: &mut dyn DynNestedProgress,
    ) -> Result<Stored> {
        let tmp = TempFile::new(self.dir, "pack")?;
        let (mut entries, hash) = self.receive(pack, &tmp, progress)?;
        let Some(hash) = hash else {
            // An empty pack: nothing to store.
            return Ok(Stored {
                objects: 0,
                bytes: 0,
                hash: self.object_hash.null(),
                paths: None,
            });
        };
        let bytes = tmp
            .file()
            .metadata()
            .map_err(disk("read the temporary pack's size", self.dir))?
            .len();
        let mut index_progress = progress
            .add_child_with_id("indexing".into(), gix::progress::prodash::progress::UNKNOWN);
        index_progress.init(Some(entries.objs.len()), gix::progress::count("objects"));
        let written = Written {
            file: tmp.file(),
            dir: self.dir,
            end: bytes - self.object_hash.len_in_bytes() as u64,
            object_hash: self.object_hash,
        };
        resolve(
            &written,
            &mut entries,
            self.threads,
            &index_progress,
            self.interrupt,
        )?;
        verify_trailer(&written, bytes, hash)?;
        let idx = self.index(&entries, hash)?;
        let objects = entries.objs.len() as u32;
        drop(entries);
        let paths = self.place(tmp, idx, hash)?;
        Ok(Stored {
            objects,
            bytes,
            hash,
            paths: Some(paths),
        })
    }

    /// Parse the stream entry by entry into `tmp` (with a thin pack's
    /// bases inserted); the entries, and the pack's checksum (`None` for an
    /// empty pack). A failure is told apart here: the disk's (`tmp`), the
    /// object store's (a base), else the stream's.
    fn receive(
        &self,
        pack: &mut dyn BufRead,
        tmp: &TempFile,
        progress: &mut dyn DynNestedProgress,
    ) -> Result<(Entries, Option<ObjectId>)> {
        let mut read_progress = progress.add_child_with_id(
            "read pack".into(),
            gix::progress::prodash::progress::UNKNOWN,
        );
        read_progress.init(None, gix::progress::bytes());
        let counted = Counted {
            inner: pack,
            progress: &read_progress,
            interrupt: self.interrupt,
            guard: self.guard,
        };
        let parsed = input::BytesToEntriesIter::new_from_header(
            io::BufReader::with_capacity(64 << 10, counted),
            input::Mode::Verify,
            input::EntryDataMode::KeepAndCrc32,
            self.object_hash,
        )
        .map_err(stream)?;
        let version = parsed.version();
        let expected = parsed.size_hint().0.min(1 << 20);
        let parsed = Track {
            inner: parsed,
            guard: self.guard,
        };
        let mut entries = Entries {
            objs: Vec::with_capacity(expected),
            ids: Vec::with_capacity(expected),
            ref_bases: Vec::new(),
        };
        let disk_failed: Recorded<io::Error> = std::rc::Rc::default();
        let base_failed: Recorded<ObjectStoreError> = std::rc::Rc::default();
        let mut out = PackOut {
            w: BufWriter::with_capacity(64 << 10, tmp.file()),
            failed: std::rc::Rc::clone(&disk_failed),
        };
        let typed = |e: StoreError| -> StoreError {
            if let Some(d) = disk_failed.borrow_mut().take() {
                return disk("write the temporary pack", self.dir)(d);
            }
            if let Some(b) = base_failed.borrow_mut().take() {
                return StoreError::ObjectStore(b);
            }
            e
        };
        let hash = {
            let parsed: Box<dyn Iterator<Item = gix_error::Result<input::Entry>>> = match &self.thin
            {
                Some(find) => Box::new(input::LookupRefDeltaObjectsIter::new(
                    parsed,
                    Bases {
                        find,
                        failed: std::rc::Rc::clone(&base_failed),
                    },
                    gix::zlib::Compression::DEFAULT,
                )),
                None => Box::new(parsed),
            };
            let mut written =
                input::EntriesToBytesIter::new(parsed, &mut out, version, self.object_hash);
            for entry in &mut written {
                let e = entry.map_err(|e| typed(stream(e)))?;
                entries.add(&e, self.object_hash)?;
            }
            written.digest()
        };
        drop(read_progress);
        let flushed = out.flush();
        drop(out);
        flushed.map_err(disk("write the temporary pack", self.dir))?;
        Ok((entries, hash))
    }

    /// The index of the resolved `entries`, written to a temporary file.
    fn index(&self, entries: &Entries, hash: ObjectId) -> Result<TempFile> {
        let idx = TempFile::new(self.dir, "idx")?;
        let mut w = BufWriter::with_capacity(64 << 10, idx.file());
        write_index(&mut w, entries, hash, self.object_hash)
            .and_then(|()| w.flush())
            .map_err(disk("write the temporary index", self.dir))?;
        drop(w);
        Ok(idx)
    }

    /// Move the pack and its index into place as `pack-<hash>.pack` /
    /// `.idx`, the pack behind a `.keep` (none when it was already there).
    fn place(&self, pack: TempFile, idx: TempFile, hash: ObjectId) -> Result<Paths> {
        let name = format!("pack-{}", hash.to_hex());
        let pack_path = self.dir.join(format!("{name}.pack"));
        let index_path = self.dir.join(format!("{name}.idx"));
        let keep = if pack_path.is_file() {
            None
        } else {
            let keep = self.dir.join(format!("{name}.keep"));
            std::fs::write(&keep, b"").map_err(disk("write the .keep", self.dir))?;
            pack.persist(&pack_path)?;
            Some(keep)
        };
        if !index_path.is_file() {
            idx.persist(&index_path)?;
        }
        Ok(Paths {
            pack: pack_path,
            index: index_path,
            keep,
        })
    }
}

impl Entries {
    /// Note the entry `e` just written.
    fn add(&mut self, e: &input::Entry, object_hash: gix::hash::Kind) -> Result<()> {
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
struct Written<'a> {
    file: &'a File,
    /// The pack directory (for messages).
    dir: &'a Path,
    /// Where the last entry ends (the trailer starts).
    end: u64,
    object_hash: gix::hash::Kind,
}

/// Inflate one zlib stream of known output size into `out`.
fn inflate_into(
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
struct Reader<'a> {
    pack: &'a Written<'a>,
    inflate: gix::zlib::Inflate,
    packed: Vec<u8>,
}

impl Reader<'_> {
    /// Inflate entry `i` into `out`; returns its header.
    fn read(&mut self, objs: &[Obj], i: usize, out: &mut Vec<u8>) -> Result<Header> {
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

/// One base on the chain being resolved.
struct Frame {
    obj: u32,
    data: Option<Vec<u8>>,
    /// Its OFS children still to build: indices into `ofs`.
    ofs: std::ops::Range<usize>,
    /// Its REF children still to build: indices into `ref_bases`.
    refs: std::ops::Range<usize>,
}

/// Give every delta its id: each whole object's descendants, depth first,
/// on `threads` threads that take whole objects in turn.
fn resolve(
    pack: &Written<'_>,
    entries: &mut Entries,
    threads: usize,
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
struct Shared<'a> {
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
}

/// Fewer deltas than this are resolved on the calling thread alone (any
/// number in the tests, so that they run the threads).
const MIN_DELTAS_FOR_THREADS: usize = if cfg!(test) { 1 } else { 2_000 };

/// Roots a thread takes at a time.
const ROOTS_PER_TAKE: usize = 64;

impl Shared<'_> {
    /// The children of object `i` (whose id is `id`): ranges of `ofs` and
    /// `refs`.
    fn children(&self, i: u32, id: &ObjectId) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
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

    fn work(&self, progress: Option<&dyn Count>) -> Result<()> {
        let r = self.work_inner(progress);
        if r.is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
        r
    }

    fn work_inner(&self, progress: Option<&dyn Count>) -> Result<()> {
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
    fn tree(
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
            let (base, rebuilt) = data_of(stack, at, objs, reader, delta)?;
            reader.read(objs, child as usize, delta)?;
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
fn data_of<'s>(
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

/// Check that the written pack ends in the checksum `want`.
///
/// The sender's trailer was checked against the bytes received
/// (`BytesToEntriesIter` in `Verify` mode), and `EntriesToBytesIter` hashed
/// the written file as it read it back from disk: what is left to check is
/// that the file ends in that hash.
///
/// A file that does not end in it was written otherwise than it was read
/// back: the disk's fault, not the pack's.
fn verify_trailer(pack: &Written<'_>, len: u64, want: ObjectId) -> Result<()> {
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
fn write_index(
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

#[cfg(test)]
mod tests {
    use super::*;
    use gix::objs::Kind;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
        let mut c = Command::new("git");
        c.current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().expect("git runs");
        let input = stdin.map(|b| b.to_vec()).unwrap_or_default();
        let mut w = child.stdin.take().expect("stdin");
        let t = std::thread::spawn(move || w.write_all(&input));
        let out = child.wait_with_output().expect("git output");
        t.join().expect("writer").expect("stdin written");
        assert!(out.status.success(), "git {args:?} failed");
        out.stdout
    }

    /// A repository with a history of edits to a few files (so packs of it
    /// hold deltas, chains of them).
    fn history(dir: &Path, commits: usize) -> Vec<String> {
        git(dir, &["init", "-q", "-b", "main", "."], None);
        let mut tips = Vec::new();
        let mut lines: Vec<String> = (0..400)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        for c in 0..commits {
            lines[(c * 37) % 400] = format!("edited in commit {c}\n");
            lines.insert((c * 11) % 400, format!("inserted in {c}\n"));
            std::fs::write(dir.join("a.txt"), lines.concat()).expect("write");
            std::fs::write(dir.join("b.txt"), lines[..200].concat().repeat(2)).expect("write");
            git(dir, &["add", "."], None);
            git(dir, &["commit", "-q", "-m", &format!("c{c}")], None);
            tips.push(
                String::from_utf8(git(dir, &["rev-parse", "HEAD"], None))
                    .expect("utf8")
                    .trim()
                    .to_owned(),
            );
        }
        tips
    }

    fn index(pack: &[u8], dir: &Path, thin: Option<gix::OdbHandle>) -> Stored {
        std::fs::create_dir_all(dir).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        Store {
            dir,
            thin,
            object_hash: gix::hash::Kind::Sha1,
            threads: 2,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect("stored")
    }

    /// Our `.idx` and `git index-pack`'s for the stored pack are the same
    /// bytes.
    fn same_as_git(stored: &Stored, scratch: &Path) {
        let paths = stored.paths.as_ref().expect("stored");
        let theirs = scratch.join("git.idx");
        let _ = std::fs::remove_file(&theirs);
        git(
            scratch,
            &[
                "index-pack",
                "-o",
                theirs.to_str().expect("utf8"),
                paths.pack.to_str().expect("utf8"),
            ],
            None,
        );
        let ours = std::fs::read(&paths.index).expect("ours");
        assert_eq!(
            ours,
            std::fs::read(&theirs).expect("theirs"),
            "idx differs from git's"
        );
        assert!(paths.keep.as_ref().is_some_and(|k| k.is_file()));
    }

    fn deltas_in(scratch: &Path, stored: &Stored) -> usize {
        let idx = stored.paths.as_ref().expect("stored").index.clone();
        let out = git(
            scratch,
            &["verify-pack", "-v", idx.to_str().expect("utf8")],
            None,
        );
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| l.split_whitespace().count() == 7)
            .count()
    }

    #[test]
    fn ofs_and_ref_delta_packs_index_as_git_does() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 40);
        for (n, extra) in [("ofs", Some("--delta-base-offset")), ("ref", None)] {
            let mut args = vec!["pack-objects", "--revs", "--stdout"];
            args.extend(extra);
            let pack = git(&src, &args, Some(b"main\n"));
            let dir = t.path().join(n);
            let stored = index(&pack, &dir, None);
            assert_eq!(
                std::fs::read(&stored.paths.as_ref().expect("p").pack).expect("pack"),
                pack
            );
            same_as_git(&stored, t.path());
            assert!(
                deltas_in(t.path(), &stored) > 20,
                "{n}: too few deltas to prove anything"
            );
        }
    }

    #[test]
    fn a_tiny_base_cache_rebuilds_dropped_bases() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 30);
        let pack = git(
            &src,
            &["pack-objects", "--revs", "--stdout", "--delta-base-offset"],
            Some(b"main\n"),
        );
        TEST_LIMIT.with(|l| l.set(1));
        let stored = index(&pack, &t.path().join("p"), None);
        TEST_LIMIT.with(|l| l.set(CACHE_LIMIT));
        same_as_git(&stored, t.path());
    }

    /// A pack of our own making: a whole blob, an OFS delta on it, a REF
    /// delta on that delta's object, an OFS delta on the REF delta, and the
    /// REF delta's base placed after it.
    #[test]
    fn a_pack_mixing_ofs_and_ref_deltas_indexes_as_git_does() {
        use crate::push::delta::Index;
        let v: Vec<Vec<u8>> = (0..5)
            .map(|k| {
                (0..300)
                    .map(|i| {
                        if i % 50 == k * 7 {
                            format!("changed {k} {i}\n")
                        } else {
                            format!("row {i}\n")
                        }
                    })
                    .collect::<String>()
                    .into_bytes()
            })
            .collect();
        let id =
            |d: &[u8]| gix::objs::compute_hash(gix::hash::Kind::Sha1, Kind::Blob, d).expect("hash");
        let delta =
            |base: &[u8], target: &[u8]| Index::new(base).delta(target, usize::MAX).expect("delta");
        let mut body = Vec::new();
        let push = |body: &mut Vec<u8>, header: Header, data: &[u8]| {
            let at = 12 + body.len() as u64;
            header.write_to(data.len() as u64, body).expect("header");
            let mut z =
                gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::DEFAULT);
            z.write_all(data).expect("deflate");
            z.flush().expect("deflate");
            body.extend(z.into_inner());
            at
        };
        let o0 = push(&mut body, Header::Blob, &v[0]);
        let o1 = 12 + body.len() as u64;
        push(
            &mut body,
            Header::OfsDelta {
                base_distance: o1 - o0,
            },
            &delta(&v[0], &v[1]),
        );
        let o2 = push(
            &mut body,
            Header::RefDelta { base_id: id(&v[1]) },
            &delta(&v[1], &v[2]),
        );
        let o3 = 12 + body.len() as u64;
        push(
            &mut body,
            Header::OfsDelta {
                base_distance: o3 - o2,
            },
            &delta(&v[2], &v[3]),
        );
        push(
            &mut body,
            Header::RefDelta { base_id: id(&v[4]) },
            &delta(&v[4], &v[0][..100]),
        );
        push(&mut body, Header::Blob, &v[4]);
        let mut pack = gix_pack::data::header::encode(gix_pack::data::Version::V2, 6).to_vec();
        pack.extend(body);
        let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
        h.update(&pack);
        let trailer = h.try_finalize().expect("hash");
        pack.extend_from_slice(trailer.as_slice());

        let t = tempfile::tempdir().expect("tmp");
        git(t.path(), &["init", "-q", "--bare", "."], None);
        let stored = index(&pack, &t.path().join("p"), None);
        assert_eq!(stored.objects, 6);
        assert_eq!(stored.hash, trailer);
        same_as_git(&stored, t.path());
    }

    #[test]
    fn a_thin_pack_is_completed_from_the_repository() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        let tips = history(&src, 20);
        let old = &tips[14];
        let input = format!("main\n^{old}\n");
        let pack = git(
            &src,
            &[
                "pack-objects",
                "--revs",
                "--thin",
                "--stdout",
                "--delta-base-offset",
            ],
            Some(input.as_bytes()),
        );
        let sent = u32::from_be_bytes(pack[8..12].try_into().expect("4"));
        // Without the repository the bases are missing.
        std::fs::create_dir_all(t.path().join("q")).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        let err = Store {
            dir: &t.path().join("q"),
            thin: None::<gix::OdbHandle>,
            object_hash: gix::hash::Kind::Sha1,
            threads: 1,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect_err("bases missing");
        assert!(err.to_string().contains("no base"), "{err}");
        assert_eq!(
            std::fs::read_dir(t.path().join("q")).expect("dir").count(),
            0,
            "temporaries left"
        );

        let repo = gix::open(&src).expect("open");
        let stored = index(&pack, &t.path().join("p"), Some(repo.objects.clone()));
        assert!(
            stored.objects > sent,
            "bases were added: {} vs {sent}",
            stored.objects
        );
        same_as_git(&stored, t.path());
        // The completed pack stands alone: git lists each of its objects
        // once, and every delta's base is one of them.
        let idx = stored.paths.as_ref().expect("p").index.clone();
        let out = git(
            t.path(),
            &["verify-pack", "-v", idx.to_str().expect("utf8")],
            None,
        );
        let out = String::from_utf8(out).expect("utf8");
        let rows: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|c| c.len() >= 5 && c[0].len() == 40)
            .collect();
        let ids: std::collections::HashSet<&str> = rows.iter().map(|c| c[0]).collect();
        assert_eq!(ids.len(), rows.len(), "an object listed twice: {out}");
        assert_eq!(ids.len(), stored.objects as usize, "{out}");
        let bases: Vec<&str> = rows.iter().filter(|c| c.len() == 7).map(|c| c[6]).collect();
        assert!(!bases.is_empty(), "the completed pack holds deltas: {out}");
        for base in bases {
            assert!(ids.contains(base), "delta base {base} is not in the pack");
        }
    }

    #[test]
    fn a_corrupt_trailer_is_refused_and_leaves_nothing() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 3);
        let mut pack = git(
            &src,
            &["pack-objects", "--revs", "--stdout"],
            Some(b"main\n"),
        );
        let n = pack.len();
        pack[n - 1] ^= 1;
        let dir = t.path().join("p");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        let err = Store {
            dir: &dir,
            thin: None::<gix::OdbHandle>,
            object_hash: gix::hash::Kind::Sha1,
            threads: 1,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect_err("a corrupt trailer is refused");
        assert!(!err.is_local(), "the server's pack, not this side: {err}");
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
    }

    /// A pack whose one entry declares `declared` bytes and whose deflate
    /// stream is `blocks` stored blocks of 60,000 bytes that never end.
    fn endless_entry(declared: u64, blocks: usize) -> Vec<u8> {
        let mut p = b"PACK".to_vec();
        p.extend_from_slice(&2u32.to_be_bytes());
        p.extend_from_slice(&1u32.to_be_bytes());
        // Type 3 (blob), size in the 4 + 7·k bits varint.
        let mut size = declared;
        let mut b = 0x30 | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            p.push(b | 0x80);
            b = (size & 0x7f) as u8;
            size >>= 7;
        }
        p.push(b);
        p.extend_from_slice(&[0x78, 0x01]);
        for _ in 0..blocks {
            let len: u16 = 60_000;
            p.push(0x00);
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(&(!len).to_le_bytes());
            p.extend(std::iter::repeat_n(0x5a, len as usize));
        }
        p
    }

    #[test]
    fn an_entry_running_past_its_declared_size_is_stopped_as_it_arrives() {
        for (declared, why) in [(100, "runs past"), (1 << 40, "more than this client holds")] {
            let t = tempfile::tempdir().expect("tmp");
            // 60 MB of stream for a 100-byte object: stopped after ~256 KiB.
            let pack = endless_entry(declared, 1_000);
            let dir = t.path().join("p");
            std::fs::create_dir_all(&dir).expect("mkdir");
            let guard = EntryGuard::new();
            let mut read = 0usize;
            let mut counting = CountingRead {
                inner: &pack[..],
                read: &mut read,
            };
            let mut reader = io::BufReader::new(&mut counting);
            let interrupt = AtomicBool::new(false);
            let err = Store {
                dir: &dir,
                thin: None::<gix::OdbHandle>,
                object_hash: gix::hash::Kind::Sha1,
                threads: 1,
                interrupt: &interrupt,
                guard: &guard,
            }
            .store(&mut reader, &mut gix::progress::Discard);
            assert!(err.is_err());
            let tripped = guard
                .tripped
                .borrow()
                .clone()
                .expect("the guard stopped it");
            assert!(tripped.contains(why), "{tripped}");
            assert!(read < 2 << 20, "read {read} bytes before stopping");
            assert_eq!(
                std::fs::read_dir(&dir).expect("dir").count(),
                0,
                "no leftovers"
            );
        }
    }

    struct CountingRead<'a> {
        inner: &'a [u8],
        read: &'a mut usize,
    }

    impl Read for CountingRead<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            *self.read += n;
            Ok(n)
        }
    }
}
