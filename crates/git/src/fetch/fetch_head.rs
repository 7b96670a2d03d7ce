//! `FETCH_HEAD`, written by every fetch as `git fetch` writes it: one line
//! per ref fetched, `<oid>\t[not-for-merge]\t<note><url>`, the refs marked
//! for merge first, then the others, each group in the fetch's order; the
//! note names the ref's kind (`branch 'main' of `, `tag 'v1' of `,
//! `'refs/x' of `, nothing for `HEAD`); the URL without user info, a
//! trailing `/` or `.git`.

use gix::bstr::ByteSlice;
use gix::protocol::fetch::refmap::{Source, SpecIndex};
use gix::protocol::fetch::RefMap;

/// Which refs of a fetch `FETCH_HEAD` marks for merge, as git marks them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ForMerge {
    /// Refspecs the caller gave (`git fetch <remote> <refspec>...`): every
    /// ref they fetched; followed tags and `--tags`' are not for merge.
    #[default]
    Given,
    /// A remote's configured refspecs (`git fetch <remote>`): when the
    /// current branch has `branch.<current>.merge`, the remote refs it
    /// names if its `branch.<current>.remote` is this remote (else none);
    /// otherwise the ref of the first refspec if that one is not a
    /// pattern.
    Configured {
        /// The current branch's merge configuration: the remote refs it
        /// merges from this remote (empty when it merges from another);
        /// `None` when it has none.
        merge: Option<Vec<String>>,
    },
}

/// One line of `FETCH_HEAD`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    oid: gix::ObjectId,
    merge: bool,
    remote_ref: String,
    local: Option<String>,
}

/// The note git writes before the URL for `name`.
fn note(name: &str) -> String {
    if name == "HEAD" {
        return String::new();
    }
    let (kind, what) = if let Some(w) = name.strip_prefix("refs/heads/") {
        ("branch ", w)
    } else if let Some(w) = name.strip_prefix("refs/tags/") {
        ("tag ", w)
    } else if let Some(w) = name.strip_prefix("refs/remotes/") {
        ("remote-tracking branch ", w)
    } else {
        ("", name)
    };
    format!("{kind}'{what}' of ")
}

/// The URL as git writes it there: user info already removed (`display`),
/// then trailing `/`s and one `.git` left out.
fn shown_url(display: &str) -> &str {
    let trimmed = display.trim_end_matches('/');
    match trimmed.strip_suffix(".git") {
        Some(rest) if trimmed.len() > 5 => rest,
        _ => trimmed,
    }
}

/// The text of `FETCH_HEAD` for the mappings of `map` (followed tags
/// already narrowed to those kept; before any opportunistic
/// remote-tracking mapping is added, which git leaves out of it), fetched
/// with `specs` from the remote shown as `url`.
pub(crate) fn render(
    map: &RefMap,
    specs: &[gix::refspec::RefSpec],
    first_given: Option<&gix::refspec::RefSpec>,
    rule: &ForMerge,
    url: &str,
) -> String {
    let mut lines: Vec<(usize, Line)> = Vec::new();
    let mut first_marked = false;
    for m in &map.mappings {
        let Some(oid) = m.remote.as_id() else {
            continue;
        };
        let remote_ref = match &m.remote {
            Source::Ref(r) => r.unpack().0.to_string(),
            Source::ObjectId(id) => id.to_string(),
        };
        let (order, merge) = match m.spec_index {
            SpecIndex::Implicit(_) => (usize::MAX, false),
            SpecIndex::ExplicitInRemote(i) => {
                let merge = match rule {
                    ForMerge::Given => true,
                    ForMerge::Configured { merge: Some(merge) } => merge.contains(&remote_ref),
                    ForMerge::Configured { merge: None } => {
                        let spec = specs.get(i);
                        let is_first = spec.is_some() && spec == first_given;
                        let pattern = spec.is_some_and(|s| {
                            s.to_ref().source().is_some_and(|src| src.contains_str("*"))
                        });
                        let mark = is_first && !pattern && !first_marked;
                        first_marked |= mark;
                        mark
                    }
                };
                (i, merge)
            }
        };
        // git keeps a ref once per local ref it maps to; a followed tag
        // (or `--tags`') that a refspec fetched already is not added.
        let local = m.local.as_ref().map(|l| l.to_string());
        let seen = lines
            .iter()
            .any(|(_, l)| l.remote_ref == remote_ref && (order == usize::MAX || l.local == local));
        if seen {
            continue;
        }
        lines.push((
            order,
            Line {
                oid: oid.to_owned(),
                merge,
                remote_ref,
                local,
            },
        ));
    }
    lines.sort_by_key(|(order, _)| *order);
    let url = shown_url(url);
    let mut out = String::new();
    for want in [true, false] {
        for (_, l) in lines.iter().filter(|(_, l)| l.merge == want) {
            out.push_str(&format!(
                "{}\t{}\t{}{url}\n",
                l.oid,
                if l.merge { "" } else { "not-for-merge" },
                note(&l.remote_ref)
            ));
        }
    }
    out
}

/// Write `text` as `repo`'s `FETCH_HEAD` (in its own git directory, as
/// git's per-worktree file), unless `fetch.writeFetchHEAD` is false.
/// Written beside and renamed into place, so a reader never sees half.
pub(crate) fn write(repo: &gix::Repository, text: &str) -> std::io::Result<()> {
    if repo.config_snapshot().boolean("fetch.writeFetchHEAD") == Some(false) {
        return Ok(());
    }
    // One temporary name per writer: fetches running at once into one
    // repository each replace the file whole (the last one's stands, as
    // with git).
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = repo.git_dir().join("FETCH_HEAD");
    let tmp = repo
        .git_dir()
        .join(format!("FETCH_HEAD.{}-{n}.tmp", std::process::id()));
    std::fs::write(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_and_urls_read_as_git_writes_them() {
        assert_eq!(note("refs/heads/main"), "branch 'main' of ");
        assert_eq!(note("refs/tags/v1"), "tag 'v1' of ");
        assert_eq!(note("refs/remotes/o/x"), "remote-tracking branch 'o/x' of ");
        assert_eq!(note("refs/pull/1/head"), "'refs/pull/1/head' of ");
        assert_eq!(note("HEAD"), "");
        assert_eq!(shown_url("git://h/r.git/"), "git://h/r");
        assert_eq!(shown_url("git://h/r//"), "git://h/r");
        assert_eq!(shown_url("/srv/small.git"), "/srv/small");
    }
}
