//! A view of the caller's repository opened for one attempt.

use crate::error::{GitError, Phase};

/// A view of `repo` opened now, with the caller's options: it sees every
/// pack on disk, however many have landed (or been repacked away by `git
/// gc`) since the caller opened its handle. gix's object store sizes its
/// pack slots when a repository is opened (1.1× the packs then on disk, at
/// least 32), so a handle kept open for days stops seeing new packs; each
/// fetch and push attempt works on a view of its own (about a millisecond;
/// see BENCHMARKS.md).
///
/// A view that cannot be opened is this side's trouble: a local failure,
/// at `connect` (nothing was dialled yet).
pub(crate) fn fresh_view(repo: &gix::Repository) -> Result<gix::Repository, GitError> {
    gix::open_opts(repo.git_dir(), repo.open_options().clone()).map_err(|e| GitError::Local {
        phase: Phase::Connect,
        detail: format!(
            "reopening the repository: {}",
            sluice_policy::text::error_chain(&e)
        ),
    })
}
