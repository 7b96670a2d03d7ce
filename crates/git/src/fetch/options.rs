//! What a fetch does beside its refspecs ([`FetchOptions`], [`TagMode`]),
//! and the limits a service sets on what a remote may send
//! ([`LimitExceeded`]): a leaf, read by the configured remote's reader too.

/// Which tags a fetch brings besides what its refspecs name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TagMode {
    /// git's default: tags pointing into what the fetch brings
    /// (`refs/tags/*` to `refs/tags/*`, only those the new history reaches).
    #[default]
    Follow,
    /// `--tags`: every tag the remote has, to `refs/tags/*`.
    All,
    /// `--no-tags`: no tag but those the refspecs name.
    None,
}

impl TagMode {
    pub(crate) fn to_gix(self) -> gix::protocol::fetch::Tags {
        match self {
            TagMode::Follow => gix::protocol::fetch::Tags::Included,
            TagMode::All => gix::protocol::fetch::Tags::All,
            TagMode::None => gix::protocol::fetch::Tags::None,
        }
    }
}

/// What a fetch does beside its refspecs: `git fetch`'s `--prune`,
/// `--tags` and `--no-tags`, and the limits a service sets on what the
/// remote may send.
///
/// # Default
///
/// No pruning, tags followed, maintenance after a stored pack, and no
/// limit on the pack or its objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchOptions {
    /// Delete the local refs in a glob refspec's destination space
    /// (`refs/remotes/origin/*`) whose remote ref is gone (status
    /// [`crate::FetchStatus::Pruned`]). Tags followed or fetched by `tags` are
    /// never pruned; those an explicit refspec names are.
    pub prune: bool,
    /// Which tags come along.
    pub tags: TagMode,
    /// Whether the call consolidates the repository's packs after it
    /// stored one ([`crate::maintain`], git's `gc --auto` rules): on by
    /// default, after the outcome is fixed and outside the deadline.
    pub maintenance: crate::AfterFetch,
    /// The most bytes the pack may have on the wire (its header, entries
    /// and trailer, not the protocol's framing); `None`: no limit. A pack
    /// that passes it is stopped as the byte past the limit arrives: the
    /// fetch is answered in one attempt ([`crate::GitError::TooLarge`],
    /// [`LimitExceeded::PackSize`]), nothing is written and the temporary
    /// pack is removed. Trying again cannot change the remote's objects.
    pub max_pack_size: Option<u64>,
    /// The most bytes one object of the pack may have inflated (a whole
    /// object as its entry declares it, a delta's result as its delta
    /// declares it); `None`: no limit. An object that passes it stops the
    /// fetch as [`FetchOptions::max_pack_size`] does
    /// ([`LimitExceeded::ObjectSize`]), before it is inflated.
    pub max_object_size: Option<u64>,
}

/// Which limit of [`FetchOptions`] the remote's pack passed, with the
/// figures: the typed cause of [`crate::GitError::TooLarge`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitExceeded {
    /// The pack on the wire passed [`FetchOptions::max_pack_size`].
    PackSize {
        /// The limit, in bytes.
        limit: u64,
        /// The bytes of the pack received when it was stopped (more than
        /// `limit`).
        received: u64,
    },
    /// One object, inflated, passes [`FetchOptions::max_object_size`].
    ObjectSize {
        /// The limit, in bytes.
        limit: u64,
        /// The object's size inflated, as the pack declares it.
        size: u64,
        /// The object.
        object: PackObject,
    },
}

/// An object of a received pack, named by its entry: where it is in the
/// pack, what it is, and its id when it was known (an object is stopped
/// before it is hashed, so a whole object has none; a delta names the
/// object it is built on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackObject {
    /// Its entry's offset in the pack (0 is the `P` of `PACK`).
    pub offset: u64,
    /// Its kind (`blob`, `tree`, `commit`, `tag`), when known: a delta's
    /// is its base's, known once the base was read.
    pub kind: Option<gix::objs::Kind>,
    /// The id of the object a delta is built on (`None` for a whole
    /// object, or a delta whose base was not yet known).
    pub base: Option<gix::ObjectId>,
}

impl std::fmt::Display for PackObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Some(k) => write!(f, "the {k} at pack offset {}", self.offset)?,
            None => write!(f, "the object at pack offset {}", self.offset)?,
        }
        if let Some(base) = self.base {
            write!(f, " (a delta on {base})")?;
        }
        Ok(())
    }
}

impl std::fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitExceeded::PackSize { limit, received } => write!(
                f,
                "the pack passed the limit of {limit} bytes (max-pack-size): \
                 stopped at {received} bytes"
            ),
            LimitExceeded::ObjectSize {
                limit,
                size,
                object,
            } => write!(
                f,
                "{object} inflates to {size} bytes, more than the limit of {limit} \
                 bytes (max-object-size)"
            ),
        }
    }
}
