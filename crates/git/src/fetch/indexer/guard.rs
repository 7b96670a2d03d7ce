//! The guard that stops a pack no valid pack is, or one past the caller's
//! limits, as it arrives ([`EntryGuard`]): it counts the bytes read off the
//! wire (the pack limit) and keeps why the read was stopped, typed when a
//! limit was passed, for the attempt to read once gix-protocol gave up.

use std::io;

use crate::fetch::options::{LimitExceeded, PackObject};

/// The largest object a pack entry may declare: this client holds a delta's
/// base whole while it builds the deltas on it, so a larger one cannot be
/// held (git streams such blobs; the forges refuse them long before).
pub(crate) const MAX_OBJECT_SIZE: u64 = 4 << 30;

/// What a deflate stream of `size` bytes can need at most: stored blocks
/// (5 bytes per 64 KiB, zlib's 6), with room to spare.
pub(super) fn compressed_allowance(size: u64) -> u64 {
    size + size / 16_384 * 5 + (256 << 10)
}

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
    pub(crate) fn of(fetch: &crate::fetch::options::FetchOptions) -> Limits {
        Limits {
            pack: fetch.max_pack_size,
            object: fetch.max_object_size,
        }
    }

    /// An object inflating to `size` passes the object limit: the typed
    /// cause, naming the object.
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

/// Bug D2's bound, and the caller's limits: the parser stops an entry that
/// declares more than [`MAX_OBJECT_SIZE`], or whose stream runs past what
/// its declared size can need, and the reader stops a pack past
/// [`Limits::pack`] as the bytes arrive: the server's fault (or the
/// limit's), never buffered.
#[derive(Default)]
pub(crate) struct EntryGuard {
    /// Bytes read so far (pack offsets: 0 is the `P` of `PACK`).
    pos: std::cell::Cell<u64>,
    /// Why the read was stopped.
    pub(crate) tripped: std::cell::RefCell<Option<String>>,
    /// The caller's limits.
    pub(crate) limits: Limits,
    /// The limit the pack passed, when one stopped it.
    pub(crate) exceeded: std::cell::RefCell<Option<LimitExceeded>>,
}

impl EntryGuard {
    #[cfg(test)]
    pub(crate) fn new() -> EntryGuard {
        EntryGuard::default()
    }

    /// A guard that also stops a pack passing `limits`.
    pub(crate) fn with_limits(limits: Limits) -> EntryGuard {
        EntryGuard {
            limits,
            ..EntryGuard::default()
        }
    }

    /// Stop the pack for passing a limit: the typed cause is kept (the
    /// first one), the read fails.
    pub(super) fn exceed(&self, e: LimitExceeded) -> io::Error {
        let words = e.to_string();
        self.exceeded.borrow_mut().get_or_insert(e);
        self.trip(words)
    }

    /// Stop the pack: `why` is kept (the first reason), the read fails.
    pub(super) fn trip(&self, why: String) -> io::Error {
        self.tripped.borrow_mut().get_or_insert(why.clone());
        io::Error::new(io::ErrorKind::InvalidData, why)
    }

    /// `n` more bytes of the pack were read off the wire.
    pub(super) fn saw(&self, n: usize) -> io::Result<()> {
        self.pos.set(self.pos.get() + n as u64);
        if let Some(why) = self.tripped.borrow().clone() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        if let Some(limit) = self.limits.pack {
            if self.pos.get() > limit {
                return Err(self.exceed(LimitExceeded::PackSize {
                    limit,
                    received: self.pos.get(),
                }));
            }
        }
        Ok(())
    }
}
