//! What a fetch does beside its refspecs ([`FetchOptions`], [`TagMode`]):
//! a leaf, read by the configured remote's reader too.

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
/// `--tags` and `--no-tags`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchOptions {
    /// Delete the local refs in a glob refspec's destination space
    /// (`refs/remotes/origin/*`) whose remote ref is gone (status
    /// [`crate::FetchStatus::Pruned`]). Tags followed or fetched by `tags` are
    /// never pruned; those an explicit refspec names are.
    pub prune: bool,
    /// Which tags come along.
    pub tags: TagMode,
}
