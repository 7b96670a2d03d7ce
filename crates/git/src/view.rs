//! A view of the caller's repository opened for one attempt, and the trust
//! check every view passes first: a repository owned by another user is
//! refused as git's `safe.directory` refuses it.

use std::path::{Path, PathBuf};

/// A repository owned by another user that git's `safe.directory` does not
/// allow: git refuses it ("detected dubious ownership"), and so does this
/// client, before any of its configuration is used (its `core.sshCommand`
/// above all).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the repository at {} is owned by {}, not by the current user: refused as git refuses \
     it (dubious ownership), before any of its configuration is read; to trust it, add it \
     to safe.directory in the system or global git configuration \
     (git config --global --add safe.directory {})",
    path.display(),
    owner.map_or_else(|| "another user".to_string(), |uid| format!("another user (uid {uid})")),
    path.display()
)]
pub struct Untrusted {
    /// The directory checked: the work tree, or the git directory of a
    /// bare repository.
    pub path: PathBuf,
    /// Its owner's user id, when it could be read.
    pub owner: Option<u32>,
}

/// Check that `repo` may be used as git would use it: owned by the
/// current user, or allowed by `safe.directory` (a path, a `path/*`, or
/// `*`; an empty value resets the list), read only from the system and
/// global configuration and the command line's (`GIT_CONFIG_COUNT`,
/// `GIT_CONFIG_KEY_<n>`, `GIT_CONFIG_VALUE_<n>`), never from the
/// repository's own.
///
/// gix makes the ownership decision when the repository is opened (its
/// trust is then `Full` or `Reduced`; a reduced repository's own
/// configuration is never used) and applies the system and global
/// `safe.directory`; the command line's is applied here, as git applies
/// it. A repository the caller opened with full trust on purpose
/// (`gix::open::Options::with`) is the caller's decision and passes.
/// Every fetch and push attempt checks the view it opens
/// (`view::fresh_view`), before dialling; the CLI checks the repository it
/// opens before reading any of its configuration.
pub fn check_trusted(repo: &gix::Repository) -> Result<(), Untrusted> {
    if repo.git_dir_trust() == gix::sec::Trust::Full {
        return Ok(());
    }
    let path = repo
        .workdir()
        .unwrap_or_else(|| repo.git_dir())
        .to_path_buf();
    let protected = |m: &gix::config::file::Metadata| {
        use gix::config::Source;
        matches!(
            m.source,
            Source::GitInstallation
                | Source::System
                | Source::Git
                | Source::User
                | Source::Env
                | Source::Cli
        )
    };
    let allowed = repo
        .config_snapshot()
        .plumbing()
        .strings_filter("safe.directory", protected)
        .unwrap_or_default();
    if is_safe(&path, &allowed) {
        return Ok(());
    }
    use std::os::unix::fs::MetadataExt;
    Err(Untrusted {
        owner: std::fs::metadata(&path).ok().map(|m| m.uid()),
        path,
    })
}

/// git's `safe.directory` matching over `values` in order: `*` allows
/// every directory, an empty value resets, `<dir>/*` allows `<dir>` and
/// what is below it, any other value allows that directory (each compared
/// after resolving symbolic links; `~/` is the home directory; a relative
/// value is ignored, as git ignores it).
fn is_safe(path: &Path, values: &[gix::bstr::BString]) -> bool {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let path = real(path);
    let mut safe = false;
    for v in values {
        let v = v.to_string();
        if v == "*" {
            safe = true;
            continue;
        }
        if v.is_empty() {
            safe = false;
            continue;
        }
        let v = match v.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME") {
                Some(home) => Path::new(&home).join(rest).display().to_string(),
                None => continue,
            },
            None => v,
        };
        let v = v.strip_prefix("%(prefix)").unwrap_or(&v).to_string();
        if !Path::new(&v).is_absolute() {
            continue;
        }
        if let Some(dir) = v.strip_suffix("/*") {
            if path.starts_with(real(Path::new(dir))) {
                safe = true;
            }
        } else if real(Path::new(&v)) == path {
            safe = true;
        }
    }
    safe
}

/// Why [`fresh_view`] could not open a view of a repository.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The repository could not be opened again (moved, deleted,
    /// unreadable, no longer a repository).
    #[error("reopening the repository: {detail}")]
    Open {
        /// The git directory that was opened.
        path: PathBuf,
        /// gix's words, with their causes.
        detail: String,
    },
    /// Owned by another user, and not allowed by `safe.directory`.
    #[error(transparent)]
    Untrusted(#[from] Untrusted),
}

/// A view of `repo` opened now, with the options `repo` was opened with:
/// it sees every pack on disk, however many have landed (or been repacked
/// away by `git gc`) since `repo` was opened.
///
/// **Why.** gix's object store sizes its pack slots when a repository is
/// opened (1.1× the packs then on disk, at least 32), and every fetch adds
/// a pack: a [`gix::Repository`] kept open for days or weeks stops seeing
/// new packs (about 32 fetches after it was opened, objects the fetches
/// brought are "missing" through it). This crate's own calls never use the
/// caller's handle for objects: each fetch and push attempt works on a view
/// of its own (about a millisecond; see BENCHMARKS.md). A caller that keeps
/// a handle open and reads objects through it (merging what it fetched,
/// resolving what it will push) should do the same: take a view for each
/// unit of work, or open the repository again.
///
/// The view passes [`check_trusted`] first: a repository owned by another
/// user that `safe.directory` does not allow is refused
/// ([`ViewError::Untrusted`]).
///
/// ```no_run
/// # fn merge(_: &sluice_git::gix::Repository) {}
/// let kept = sluice_git::gix::open("/srv/mirror.git").expect("a repository");
/// // ... weeks of fetches into it later:
/// let view = sluice_git::fresh_view(&kept).expect("a view");
/// merge(&view); // sees what the last fetch brought
/// ```
pub fn fresh_view(repo: &gix::Repository) -> Result<gix::Repository, ViewError> {
    let view = gix::open_opts(repo.git_dir(), repo.open_options().clone()).map_err(|e| {
        ViewError::Open {
            path: repo.git_dir().to_path_buf(),
            detail: sluice_policy::text::error_chain(&e),
        }
    })?;
    check_trusted(&view)?;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_directory_values_match_as_git_matches_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let v = |xs: &[&str]| {
            xs.iter()
                .map(|x| gix::bstr::BString::from(*x))
                .collect::<Vec<_>>()
        };
        let shown = d.display().to_string();
        assert!(is_safe(d, &v(&["*"])));
        assert!(!is_safe(d, &v(&["*", ""])));
        assert!(is_safe(d, &v(&[&shown])));
        assert!(!is_safe(d, &v(&[])));
        let parent = d.parent().expect("parent").display().to_string();
        assert!(is_safe(d, &v(&[&format!("{parent}/*")])));
        assert!(!is_safe(d, &v(&[&parent])));
        assert!(!is_safe(d, &v(&["relative/dir"])));
    }
}
