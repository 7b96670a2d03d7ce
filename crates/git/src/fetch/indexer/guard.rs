//! The guard that stops an entry no valid pack holds as it arrives
//! ([`EntryGuard`]), and the parser's iterator that tells it where each
//! entry ended.

use std::io::{self};

use gix_pack::data::input;

use crate::fetch::options::{LimitExceeded, PackObject};

/// The limits a caller set on a received pack
/// ([`crate::FetchOptions::max_pack_size`], `max_object_size`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limits {
    /// The most bytes of the pack on the wire.
    pub(crate) pack: Option<u64>,
    /// The most bytes of one object inflated.
    pub(crate) object: Option<u64>,
}

impl Limits {
    /// The limits of `fetch`.
    pub(crate) fn of(fetch: &crate::FetchOptions) -> Limits {
        Limits {
            pack: fetch.max_pack_size,
            object: fetch.max_object_size,
        }
    }

    /// The object at `offset` of `kind`, inflating to `size`, passes the
    /// object limit: the typed cause.
    pub(crate) fn object_passed(
        &self,
        size: u64,
        object: impl FnOnce() -> PackObject,
    ) -> Option<LimitExceeded> {
        let limit = self.object?;
        (size > limit).then(|| LimitExceeded::ObjectSize {
            limit,
            size,
            object: object(),
        })
    }
}

/// The largest object a pack entry may declare: this client inflates an
/// object whole to resolve deltas and hash it, so a larger one cannot be
/// held (git streams such blobs; the forges refuse them long before).
pub(crate) const MAX_OBJECT_SIZE: u64 = 4 << 30;

/// What a deflate stream of `size` bytes can need at most: stored blocks
/// (5 bytes per 64 KiB, zlib's 6), with room for the reader's look-ahead
/// (the parser buffers up to 64 KiB past an entry's end).
pub(super) fn compressed_allowance(size: u64) -> u64 {
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
    /// The caller's limits.
    pub(crate) limits: Limits,
    /// The limit the pack passed, when one stopped it.
    pub(crate) exceeded: std::cell::RefCell<Option<LimitExceeded>>,
}

pub(super) const RECENT: usize = 512 << 10;

impl EntryGuard {
    #[cfg(test)]
    pub(crate) fn new() -> EntryGuard {
        EntryGuard::with_limits(Limits::default())
    }

    /// A guard that also stops a pack passing `limits`.
    pub(crate) fn with_limits(limits: Limits) -> EntryGuard {
        let g = EntryGuard {
            limits,
            ..EntryGuard::default()
        };
        // The first entry follows the 12-byte pack header.
        g.start.set(12);
        g
    }

    /// Stop the pack for passing a limit: the typed cause is kept (the
    /// first one), the read fails.
    pub(super) fn exceed(&self, e: LimitExceeded) -> io::Error {
        let words = e.to_string();
        self.exceeded.borrow_mut().get_or_insert(e);
        self.trip(words)
    }

    /// The parser finished the entry that ends at `next`.
    pub(super) fn entry_ended(&self, next: u64) {
        self.start.set(next);
        self.end.set(None);
        self.check_header();
    }

    pub(super) fn trip(&self, why: String) -> io::Error {
        self.tripped.borrow_mut().get_or_insert(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    pub(super) fn saw(&self, bytes: &[u8]) -> io::Result<()> {
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
        if let Some(limit) = self.limits.pack {
            if self.pos.get() > limit {
                return Err(self.exceed(LimitExceeded::PackSize {
                    limit,
                    received: self.pos.get(),
                }));
            }
        }
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
    pub(super) fn check_header(&self) {
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
                let kind = match (head[0] >> 4) & 7 {
                    1 => Some(gix::objs::Kind::Commit),
                    2 => Some(gix::objs::Kind::Tree),
                    3 => Some(gix::objs::Kind::Blob),
                    4 => Some(gix::objs::Kind::Tag),
                    _ => None,
                };
                drop(r);
                // A whole object declares its size here (a delta's result
                // is checked when the delta is read).
                if kind.is_some() {
                    let at = self.start.get();
                    if let Some(e) = self.limits.object_passed(size, || PackObject {
                        offset: at,
                        kind,
                        base: None,
                    }) {
                        let _ = self.exceed(e);
                        return;
                    }
                }
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
pub(super) struct Track<'g, I> {
    pub(super) inner: I,
    pub(super) guard: &'g EntryGuard,
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
