//! Fetching a configured remote by name ([`GitClient::fetch_remote`]), as
//! `git fetch <remote>` does: its URL, its `fetch` lines, and which refs
//! `FETCH_HEAD` marks for merge.

use gix::bstr::ByteSlice;
use gix::remote::Direction;
use sluice_policy::{CallOptions, Outcome};

use super::fetch_head::ForMerge;
use super::options::FetchOptions;
use super::FetchedRef;
use crate::client::GitClient;
use crate::input::InputError;
use crate::named_remote::NamedRemote;

/// What a fetch of a configured remote by name adds to a fetch of its URL.
pub(crate) struct Named<'a> {
    /// Which refs `FETCH_HEAD` marks for merge.
    pub for_merge: &'a ForMerge,
    /// The remote's `fetch` lines when the caller gave refspecs of its
    /// own (git's opportunistic remote-tracking updates); else empty.
    pub tracking: &'a [String],
}

impl GitClient {
    /// Fetch from a configured remote as `git fetch <remote>
    /// [<refspec>...]` does: from its fetch URL (rewritten by `insteadOf`);
    /// with no `refspecs`, its `fetch` lines (none: its `HEAD`), and
    /// `FETCH_HEAD` marks for merge what the current branch's
    /// `branch.<name>.merge` names when its `branch.<name>.remote` is this
    /// remote (nothing when it is another), or, when the branch has no
    /// merge configuration, the first line's ref when that line is no
    /// pattern ([`ForMerge::Configured`]); with `refspecs`, those, every ref they
    /// fetch marked for merge. `fetch.tags` is the caller's: give
    /// `remote.tags` (its `tagOpt`) unless the caller chose.
    ///
    /// **A repository kept open.** Each attempt works on a view of `repo`
    /// opened then ([`crate::fresh_view`]), so a handle kept open for weeks
    /// is safe to pass; but gix's handle sizes its pack list when opened,
    /// and after about 32 more packs (a pack per fetch) `repo` itself no
    /// longer sees new objects: read what this call brought through
    /// [`crate::fresh_view`]`(repo)`, not through `repo`.
    ///
    /// ```no_run
    /// # fn f(client: &sluice_git::GitClient, repo: &gix::Repository) -> Result<(), Box<dyn std::error::Error>> {
    /// let origin = sluice_git::NamedRemote::find(repo, "origin")?.ok_or("no remote origin")?;
    /// let fetch = sluice_git::FetchOptions { tags: origin.tags, ..Default::default() };
    /// let outcome = client.fetch_remote(&origin, &[], repo, &fetch, &Default::default())?;
    /// # Ok(()) }
    /// ```
    pub fn fetch_remote(
        &self,
        remote: &NamedRemote,
        refspecs: &[String],
        repo: &gix::Repository,
        fetch: &FetchOptions,
        opts: &CallOptions,
    ) -> Result<Outcome<Vec<FetchedRef>>, InputError> {
        let url = remote.url(Direction::Fetch);
        if !refspecs.is_empty() {
            let named = Named {
                for_merge: &ForMerge::Given,
                tracking: &remote.fetch_refspecs,
            };
            return self.fetch_named(url, refspecs, repo, fetch, &named, opts);
        }
        let named = Named {
            for_merge: &ForMerge::Configured {
                merge: merged_from(repo, &remote.name),
            },
            tracking: &[],
        };
        self.fetch_named(url, &remote.fetch_refspecs, repo, fetch, &named, opts)
    }
}

/// The remote refs the current branch merges from the remote `name`
/// (`branch.<current>.merge` when `branch.<current>.remote` is `name`,
/// empty when it is another remote); `None` when the current branch has no
/// `branch.<current>.merge` (or there is no current branch).
fn merged_from(repo: &gix::Repository, name: &str) -> Option<Vec<String>> {
    let branch = repo.head_name().ok().flatten().and_then(|h| {
        h.as_bstr()
            .strip_prefix(b"refs/heads/")
            .map(|b| b.to_str_lossy().into_owned())
    })?;
    let config = repo.config_snapshot();
    let merge: Vec<String> = config
        .strings(format!("branch.{branch}.merge").as_str())?
        .into_iter()
        .map(|m| m.to_string())
        .collect();
    let remote = config
        .string(format!("branch.{branch}.remote").as_str())
        .map(|r| r.to_str_lossy().into_owned());
    if remote.as_deref() != Some(name) {
        return Some(Vec::new());
    }
    Some(merge)
}
