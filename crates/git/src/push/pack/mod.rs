//! The pack a push sends, written with gix-pack.
//!
//! Objects: everything reachable from the new tips and not reachable from
//! the remote's advertised tips that exist locally. Counting finishes before
//! the first pack byte (the header carries the count); entries then stream
//! into the writer. Deltas stored in local packs are reused (gix-pack).
//!
//! Loose objects (what `git commit` writes) are deltified here: while
//! counting, each new commit's tree is compared with its first parent's,
//! and every changed tree or file is paired with the version it replaces
//! (its base). Each pairing is then encoded (`push::delta`) and
//! kept when it is under half the object's size. A base that is itself
//! sent goes before its delta (an OFS delta); a base that is not sent is
//! one the remote has — every object of a parent's tree is either counted
//! or reachable from the tips the remote advertised — and is named by id
//! (a REF delta: a thin pack, unless the remote said `no-thin`). Objects
//! stored in packs that gix-pack would write whole (stored whole, or as a
//! delta against an object not sent) get the same treatment against the
//! versions the remote has. gix's own thin mode is never used: it deltas
//! against bases it never checks the remote has.
//!
//! Which commits are new is our own walk (by date, like git's): each
//! commit is read once and the walk stops as soon as only commits the
//! remote has are queued. With no remote tips to stop at, a local pack that
//! the bitmaps show to be exactly what the tips reach is sent as it is
//! (`push::bitmap`); otherwise gix-pack counts everything.
//!
//! Counting and writing fail with a `PackError` that keeps the sides
//! apart: the local object store (an object missing, of another kind, or
//! unreadable) and this side's limits are `local-error`, never tried again;
//! only a failure of the sink — the connection the pack is written to — is
//! the wire's, classed from it by the caller.
//!
//! The rooms: this file holds what counting and writing share (the pack's
//! statistics, [`PackError`], the bases a loose object is tried against);
//! `write` the writing (and [`write::Counted`], what it takes), with the
//! delta encoder both use; `walk` which commits are new; `count` the
//! counting, on `walk` and `write`.

pub(crate) mod count;
mod walk;
pub(crate) mod write;

use gix::ObjectId;

use crate::local::ObjectStoreError;

/// What a pack held and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Objects in the pack.
    pub objects: u64,
    /// Bytes of the pack on the wire.
    pub bytes: u64,
}

/// What a loose object is tried as a delta against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    /// An object sent earlier in this pack, at this index (an OFS delta).
    InPack(usize, ObjectId),
    /// An object the remote has (a REF delta).
    Remote(ObjectId),
}

/// The longest delta chain built here (git's `pack.depth` default).
const MAX_DEPTH: u32 = 50;
/// Objects larger than this are sent whole (the index of a base costs a
/// quarter of its size again).
const MAX_DELTA_OBJECT: usize = 64 << 20;
/// Objects smaller than this are sent whole: a delta's header and one
/// instruction cost about as much.
const MIN_DELTA_OBJECT: usize = 32;
/// Bases tried per object, at most (the versions it replaced, one per
/// path and commit it was found at).
const MAX_CANDIDATES: usize = 4;

/// Why counting or writing a push's pack failed. Everything but [`PackError::Sink`]
/// is this side's (`local-error`); the sink is the connection to the
/// remote, whose failures the caller classes from the wire.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PackError {
    /// The local object store could not give an object the pack needs.
    #[error(transparent)]
    ObjectStore(#[from] ObjectStoreError),
    /// The caller's cancel stopped the count.
    #[error("interrupted")]
    Interrupted,
    /// More objects than one pack can hold.
    #[error("{objects} objects are too many for one pack")]
    TooMany {
        /// Objects counted.
        objects: usize,
    },
    /// A counting, lookup or encoding thread panicked.
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
    /// Writing to the sink (the connection to the remote) failed.
    #[error("{0}")]
    Sink(std::io::Error),
}

impl PackError {
    /// The attempt's error at `phase`: a failure of the sink as `wire`
    /// classes it (the remote's side), anything else `local-error`.
    pub(crate) fn into_git(
        self,
        phase: crate::error::GitPhase,
        wire: impl FnOnce(std::io::Error) -> crate::GitError,
    ) -> crate::GitError {
        match self {
            PackError::Sink(e) => wire(e),
            local => crate::local::local(phase, format_args!("writing the pack: {local}")),
        }
    }
}

/// Threads to use: one per core. Asked once per process: the answer reads
/// cgroup files, a few hundred microseconds a time.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// A failure reading object `id` through the repository.
fn unreadable(id: &ObjectId, e: &(dyn std::error::Error + 'static)) -> PackError {
    ObjectStoreError::unreadable(format!("object {id}"), e).into()
}
