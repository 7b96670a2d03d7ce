//! A configured remote read by name, as git reads it, and the remote a URL
//! stands for: what `git fetch origin` and `git push origin main` use in
//! place of a URL.
//!
//! gix reads the configuration (`remote.<name>.url`, `pushurl`, every
//! `fetch` line, `tagOpt`, and the `url.<base>.insteadOf` /
//! `pushInsteadOf` rewrites); this module decides, as git does, when a
//! `<URL|REMOTE>` argument is a remote's name ([`NamedRemote::find`]), which
//! configured remote a URL stands for ([`NamedRemote::for_url`], by the URL
//! as git would normalise it), and which remote-tracking ref a remote ref
//! maps to ([`NamedRemote::tracking_ref`]). Fetching a remote by name is
//! `fetch::named`'s; writing its remote-tracking refs after a push,
//! `push::tracking`'s.

use gix::bstr::ByteSlice;
use gix::remote::Direction;

use crate::fetch::options::TagMode;
use crate::input::InputError;

/// A remote configured in a repository, read as git reads it.
///
/// Fetch it by name with [`crate::GitClient::fetch_remote`]; push to
/// [`NamedRemote::url`] for [`Direction::Push`] — or, as git does, to each
/// of [`NamedRemote::push_urls`] in turn — and then move its
/// remote-tracking refs with [`NamedRemote::update_tracking_refs`], as
/// `git push <remote>` does:
///
/// ```no_run
/// # fn f(client: &sluice_git::GitClient, repo: &gix::Repository, updates: &[sluice_git::RefUpdate]) -> Result<(), Box<dyn std::error::Error>> {
/// use gix::remote::Direction;
/// let origin = sluice_git::NamedRemote::find(repo, "origin")?.ok_or("no remote origin")?;
/// let outcome = client.push(origin.url(Direction::Push), updates, &Default::default(), repo, &Default::default())?;
/// if let Some(report) = &outcome.value {
///     origin.update_tracking_refs(repo, &report.refs)?;
/// }
/// # Ok(()) }
/// ```
///
/// Its URLs may carry user info as configured; [`NamedRemote`]'s `Debug`
/// never shows them, and [`crate::Remote::parse`] keeps them out of every
/// output.
#[derive(Clone)]
pub struct NamedRemote {
    /// The remote's name (`origin`).
    pub name: String,
    /// The URL fetched from: the first `url`, rewritten by `insteadOf`.
    fetch_url: String,
    /// The URL pushed to: the first `pushurl` (rewritten by `insteadOf`),
    /// else the first `url` rewritten by `pushInsteadOf` (or `insteadOf`
    /// when none matches).
    push_url: String,
    /// Every URL pushed to, in order: every `pushurl` (each rewritten by
    /// `insteadOf`), else every `url` (each rewritten by `pushInsteadOf`,
    /// else `insteadOf`). The first is `push_url`.
    push_urls: Vec<String>,
    /// Every `remote.<name>.fetch` line, in the configuration's order.
    pub fetch_refspecs: Vec<String>,
    /// `remote.<name>.tagOpt`: `--tags` is [`TagMode::All`], `--no-tags`
    /// [`TagMode::None`], unset [`TagMode::Follow`]. A caller's own
    /// `--tags` / `--no-tags` wins over it, as in git.
    pub tags: TagMode,
}

impl std::fmt::Debug for NamedRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedRemote")
            .field("name", &self.name)
            .field("fetch_url", &crate::redact(&self.fetch_url))
            .field("push_url", &crate::redact(&self.push_url))
            .field(
                "push_urls",
                &self
                    .push_urls
                    .iter()
                    .map(|u| crate::redact(u))
                    .collect::<Vec<_>>(),
            )
            .field("fetch_refspecs", &self.fetch_refspecs)
            .field("tags", &self.tags)
            .finish()
    }
}

/// Every URL git pushes to for the remote `name`: every
/// `remote.<name>.pushurl` rewritten by `insteadOf`, else every
/// `remote.<name>.url` rewritten by `pushInsteadOf` (else `insteadOf`).
/// `first` (gix's push URL) when the configuration gives none.
fn push_urls(repo: &gix::Repository, name: &str, first: &str) -> Vec<String> {
    let config = repo.config_snapshot();
    let values = |key: &str| -> Vec<String> {
        config
            .strings(format!("remote.{name}.{key}").as_str())
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.to_str_lossy().into_owned())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let plumbing = config.plumbing();
    let push = values("pushurl");
    let urls: Vec<String> = if push.is_empty() {
        values("url")
            .iter()
            .map(|u| crate::rewrite_url(plumbing, u, Direction::Push))
            .collect()
    } else {
        push.iter()
            .map(|u| crate::rewrite_url(plumbing, u, Direction::Fetch))
            .collect()
    };
    if urls.is_empty() {
        vec![first.to_string()]
    } else {
        urls
    }
}

/// Whether `name` can be a remote's name rather than a URL or a path, as
/// git's `valid_remote_nick`: not empty, not `.` or `..`, no `/`.
pub fn is_remote_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\\')
}

impl NamedRemote {
    /// The remote named `name` in `repo`, or `None` when `name` is not a
    /// configured remote's name (then it is a URL or a path, as git takes
    /// it). A remote configured without a `url` is refused, as git refuses
    /// it; so is one whose configuration does not parse.
    pub fn find(repo: &gix::Repository, name: &str) -> Result<Option<NamedRemote>, InputError> {
        if !is_remote_name(name) {
            return Ok(None);
        }
        let configured = repo
            .remote_names()
            .into_iter()
            .any(|n| n.as_slice() == name.as_bytes());
        if !configured {
            return Ok(None);
        }
        let bad = |reason: String| InputError::Remote {
            name: name.to_string(),
            reason,
        };
        let remote = repo
            .find_remote(name)
            .map_err(|e| bad(sluice_policy::text::error_chain(&e)))?;
        let url = |d: Direction| remote.url(d).map(|u| u.to_bstring().to_string());
        let (Some(fetch_url), Some(push_url)) = (url(Direction::Fetch), url(Direction::Push))
        else {
            return Err(bad(format!(
                "remote.{name}.url is not set: '{name}' does not appear to be a git repository"
            )));
        };
        let fetch_refspecs = remote
            .refspecs(Direction::Fetch)
            .iter()
            .map(|s| s.to_ref().to_bstring().to_string())
            .collect();
        let tags = match remote.fetch_tags() {
            gix::remote::fetch::Tags::All => TagMode::All,
            gix::remote::fetch::Tags::None => TagMode::None,
            gix::remote::fetch::Tags::Included => TagMode::Follow,
        };
        let push_urls = push_urls(repo, name, &push_url);
        Ok(Some(NamedRemote {
            name: name.to_string(),
            fetch_url,
            push_url,
            push_urls,
            fetch_refspecs,
            tags,
        }))
    }

    /// The configured remote one of whose URLs (`url`, `pushurl`, before
    /// and after rewriting) names the same repository as `url`, compared
    /// as git normalises URLs (scheme and host in lower case, the default
    /// port left out, no user info) and, as `git clone` names
    /// repositories, without a trailing `/` or `.git`. The first in the
    /// configuration's order wins; `None` when there is none.
    pub fn for_url(repo: &gix::Repository, url: &str) -> Option<NamedRemote> {
        let wanted = normalised(url)?;
        repo.remote_names().into_iter().find_map(|name| {
            let name = name.to_str().ok()?.to_string();
            let remote = repo.find_remote(name.as_str()).ok()?;
            let plain = repo
                .try_find_remote_without_url_rewrite(name.as_str())?
                .ok()?;
            let matches = [Direction::Fetch, Direction::Push].into_iter().any(|d| {
                remote
                    .urls(d)
                    .chain(plain.urls(d))
                    .any(|u| normalised(&u.to_bstring().to_string()).as_ref() == Some(&wanted))
            });
            if matches {
                NamedRemote::find(repo, &name).ok().flatten()
            } else {
                None
            }
        })
    }

    /// The URL for `direction`, as configured (user info included).
    pub fn url(&self, direction: Direction) -> &str {
        match direction {
            Direction::Fetch => &self.fetch_url,
            Direction::Push => &self.push_url,
        }
    }

    /// Every URL a push to this remote goes to, in git's order: every
    /// `pushurl`, else every `url` (each rewritten as git rewrites it). The
    /// first is [`NamedRemote::url`] for [`Direction::Push`]. git pushes to
    /// each in turn, whatever the ones before did.
    pub fn push_urls(&self) -> &[String] {
        &self.push_urls
    }

    /// The remote-tracking ref the remote's `fetch` lines map the remote
    /// ref `remote_ref` to (`refs/heads/main` → `refs/remotes/origin/main`),
    /// the first line that maps it; `None` when none does.
    pub fn tracking_ref(&self, remote_ref: &str) -> Option<String> {
        self.fetch_refspecs.iter().find_map(|spec| {
            let parsed = gix::refspec::parse(
                spec.as_bytes().as_bstr(),
                gix::refspec::parse::Operation::Fetch,
            )
            .ok()?;
            let gix::refspec::Instruction::Fetch(gix::refspec::instruction::Fetch::AndUpdate {
                src,
                dst,
                ..
            }) = parsed.instruction()
            else {
                return None;
            };
            crate::refspec::map_through(src.as_bytes(), dst.as_bytes(), remote_ref.as_bytes())
                .and_then(|t| String::from_utf8(t).ok())
        })
    }
}

/// `url` as git's `url_normalize` would compare it (scheme and host in
/// lower case, the default port dropped, no user info), less a trailing
/// `/` and `.git`; a local path made absolute. `None` when it does not
/// parse.
fn normalised(url: &str) -> Option<String> {
    let mut u = gix::url::parse(url.as_bytes().as_bstr()).ok()?;
    u.set_user(None);
    u.set_password(None);
    let default_port = match u.scheme {
        gix::url::Scheme::Http => Some(80),
        gix::url::Scheme::Https => Some(443),
        gix::url::Scheme::Ssh => Some(22),
        gix::url::Scheme::Git => Some(9418),
        _ => None,
    };
    if u.port.is_some() && u.port == default_port {
        u.port = None;
    }
    let mut path = u.path.to_string();
    let mut host = u.host().unwrap_or("").to_ascii_lowercase();
    if u.scheme == gix::url::Scheme::File {
        // `file://localhost/x` is `/x`, as git reads it.
        if host == "localhost" {
            host.clear();
        }
        let p = std::path::Path::new(&path);
        if let Ok(abs) = std::fs::canonicalize(p) {
            path = abs.display().to_string();
        }
    }
    let path = path.trim_end_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    Some(format!(
        "{}://{}:{}{}",
        u.scheme.as_str(),
        host,
        u.port.map(|p| p.to_string()).unwrap_or_default(),
        path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_naming_one_repository_normalise_alike() {
        let n = |u: &str| normalised(u).expect("parses");
        assert_eq!(n("git://LOCALHOST:9418/r.git/"), n("git://localhost/r"));
        assert_eq!(
            n("https://user:tok@Example.com:443/o/r.git"),
            n("https://example.com/o/r")
        );
        assert_ne!(n("git://localhost/r"), n("git://localhost/s"));
        assert_ne!(n("git://localhost:1/r"), n("git://localhost:2/r"));
        assert_ne!(n("http://h/r"), n("https://h/r"));
        assert_eq!(n("file://localhost/srv/r.git"), n("/srv/r"));
    }

    #[test]
    fn remote_names_are_what_git_takes_for_nicknames() {
        assert!(is_remote_name("origin"));
        assert!(!is_remote_name("."));
        assert!(!is_remote_name("../r"));
        assert!(!is_remote_name("git://h/r"));
        assert!(!is_remote_name(""));
    }
}
