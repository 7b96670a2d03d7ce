//! Where a command works: the local repository (opened and checked before
//! any of its configuration is read), the remote `<URL|REMOTE>` leads to,
//! the https settings git's configuration adds, and the push specs
//! resolved against the repository.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_git::{LeaseSpec, PushSpec, RefUpdate};

use crate::config::{check_git_url, check_token_transport, Common};
use crate::usage::{strip_invalid_prefix, UsageError};

/// Why the repository could not be used: bad input (exit 2), or a
/// repository owned by another user that `safe.directory` does not allow
/// (`local-error`, exit 5).
#[derive(Debug)]
pub enum RepoError {
    /// `--repo` is no repository, or none was found from the working
    /// directory.
    Usage(UsageError),
    /// Owned by another user and not allowed by `safe.directory`.
    Untrusted(sluice_git::Untrusted),
}

impl std::fmt::Display for RepoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepoError::Usage(e) => write!(f, "{e}"),
            RepoError::Untrusted(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RepoError {}

/// Open `--repo` (a git repository, bare or not), or without it the
/// repository found from the working directory as git finds it (upwards,
/// honouring `GIT_DIR`, `GIT_CEILING_DIRECTORIES` and
/// `GIT_DISCOVERY_ACROSS_FILESYSTEM`); then refuse it, before any of its
/// configuration is read, when it is owned by another user and git's
/// `safe.directory` does not allow it ([`sluice_git::check_trusted`]).
pub fn open_repo(path: Option<&Path>) -> Result<gix::Repository, RepoError> {
    let repo = match path {
        Some(path) => {
            if !path.exists() {
                return Err(RepoError::Usage(UsageError::new(
                    "--repo",
                    format!("{}: no such directory", path.display()),
                )));
            }
            gix::open(path).map_err(|e| {
                RepoError::Usage(UsageError::new(
                    "--repo",
                    format!("{} is not a git repository ({e})", path.display()),
                ))
            })?
        }
        None => gix::ThreadSafeRepository::discover_with_environment_overrides(".")
            .map(gix::Repository::from)
            .map_err(|e| {
                RepoError::Usage(UsageError::new(
                    "--repo",
                    format!(
                        "not in a git repository (nor any parent directory), and no --repo \
                         given ({})",
                        sluice_policy::text::error_chain(&e)
                    ),
                ))
            })?,
    };
    sluice_git::check_trusted(&repo).map_err(RepoError::Untrusted)?;
    Ok(repo)
}

/// Where `<URL|REMOTE>` leads: the URL to call, and the configured remote,
/// its configuration read once for the whole command.
#[derive(Debug)]
pub struct Target {
    /// The URL called (a remote's, rewritten as git rewrites it; user info
    /// kept for the call, removed from every output).
    pub url: String,
    /// The configured remote the argument named; for a push to a URL, the
    /// remote configured with a URL naming the same repository (as git
    /// normalises URLs), when there is one. A push's value-less leases read
    /// its remote-tracking refs, and its landing moves them.
    pub remote: Option<sluice_git::NamedRemote>,
    /// Every URL a push goes to, in order, `url` first: a configured
    /// remote's every `pushurl`, else its every `url`; a typed URL alone.
    pub push_urls: Vec<String>,
}

/// `<URL|REMOTE>` read as git reads it: a configured remote's name is that
/// remote (its `url` to fetch, its `pushurl` or `url` to push, each
/// rewritten by `url.<base>.insteadOf` / `pushInsteadOf`); anything else
/// is a URL or a path. The URL is then checked (and `--token-command`
/// against its transport). A push to a URL takes the remote configured
/// with that URL ([`sluice_git::NamedRemote::for_url`]) for its
/// remote-tracking refs, as git does.
pub fn resolve_remote(
    common: &Common,
    arg: &str,
    repo: &gix::Repository,
    direction: gix::remote::Direction,
) -> Result<Target, UsageError> {
    let named = sluice_git::NamedRemote::find(repo, arg).map_err(|e| input_error(&e))?;
    // A typed URL is rewritten by `insteadOf` / `pushInsteadOf` as a
    // remote's is.
    let url = named.as_ref().map_or_else(
        || sluice_git::rewrite_url(repo.config_snapshot().plumbing(), arg, direction),
        |r| r.url(direction).to_string(),
    );
    let push_urls = match (&named, direction) {
        (Some(r), gix::remote::Direction::Push) if !r.push_urls().is_empty() => {
            r.push_urls().to_vec()
        }
        _ => vec![url.clone()],
    };
    let url = push_urls[0].clone();
    for u in &push_urls {
        let kind = check_git_url(u)?;
        check_token_transport(common, u, kind)?;
    }
    let remote = match (named, direction) {
        (None, gix::remote::Direction::Push) => sluice_git::NamedRemote::for_url(repo, &url),
        (named, _) => named,
    };
    Ok(Target {
        url,
        remote,
        push_urls,
    })
}

/// The https settings for a call to `url` working in `repo`: `common`'s,
/// with git's configuration of the repository (its global and system files
/// included) as [`https_for`] applies it.
pub fn https_for_repo(
    common: &Common,
    repo: &gix::Repository,
    url: &str,
) -> Result<sluice_git::HttpsConfig, UsageError> {
    https_for(common, repo.config_snapshot().plumbing(), url)
}

/// `common`'s https settings with the `http.*` and `http.<url>.*` settings
/// `config` gives `url`, matched as git matches them
/// ([`sluice_git::HttpSettings`]), where no flag decided: `proxy` when
/// neither `--proxy` nor `--no-proxy` was given (it wins over the
/// environment, as in git); `sslCAInfo` or `GIT_SSL_CAINFO`, which replaces
/// the platform's roots and `SSL_CERT_FILE` (`--ca-file` still adds to
/// it); `sslVerify=false` or `GIT_SSL_NO_VERIFY`, which turns certificate
/// checks off, with a warning on stderr. A value that cannot be used is
/// bad input naming its key. A URL that is not http(s) takes none of them
/// (git reads no `http.*` setting and no `GIT_SSL_*` variable for git://,
/// ssh:// or a path): `common`'s settings as they are, no file read.
pub fn https_for(
    common: &Common,
    config: &gix::config::File,
    url: &str,
) -> Result<sluice_git::HttpsConfig, UsageError> {
    if !is_http(url) {
        return Ok(common.https.clone());
    }
    let settings = sluice_git::HttpSettings::for_url(config, url);
    let https = settings
        .apply(common.https.clone())
        .map_err(|e| UsageError::new(e.key, e.reason))?;
    if let Some(key) = settings.verification_off() {
        if url.starts_with("https://") {
            eprintln!(
                "warning: the server's certificate is not checked for {} ({key})",
                sluice_git::redact(url)
            );
        }
    }
    Ok(https)
}

/// Whether `url` is spoken over HTTP: `http://` or `https://`, in any case.
fn is_http(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")
}

/// Where `ls-refs <URL|REMOTE>` leads, as `git ls-remote` finds it: in the
/// repository found from the working directory, the argument is resolved
/// as fetch resolves it ([`resolve_remote`]: a remote's name, `insteadOf`)
/// and that repository's configuration gives the https settings for the
/// URL ([`https_for_repo`]); where none is found (or one owned by another
/// user that `safe.directory` does not allow, which git's gentle discovery
/// passes over too), the argument is a URL or a path, rewritten by the
/// global configuration's `insteadOf`, whose https settings apply
/// ([`https_for`]).
pub fn resolve_listing(
    common: &Common,
    arg: &str,
) -> Result<(String, sluice_git::HttpsConfig), UsageError> {
    match open_repo(None) {
        Ok(repo) => {
            let target = resolve_remote(common, arg, &repo, gix::remote::Direction::Fetch)?;
            let https = https_for_repo(common, &repo, &target.url)?;
            Ok((target.url, https))
        }
        Err(_) => {
            let config = gix::config::File::from_globals().unwrap_or_default();
            let url = sluice_git::rewrite_url(&config, arg, gix::remote::Direction::Fetch);
            let kind = check_git_url(&url)?;
            check_token_transport(common, &url, kind)?;
            let https = https_for(common, &config, &url)?;
            Ok((url, https))
        }
    }
}

/// Resolve the push specs against `repo` — sources, short destinations
/// (by the kind of the source) — with their leases, each matched to the
/// spec whose destination it names (short or full) and resolved for a push
/// to `target` (an abbreviated id in `repo`; a lease without a value from
/// the remote-tracking ref of the target's configured remote, whose
/// configuration is not read again).
pub fn resolve_updates(
    specs: &[PushSpec],
    leases: &BTreeMap<String, LeaseSpec>,
    target: &Target,
    repo: &gix::Repository,
) -> Result<Vec<RefUpdate>, UsageError> {
    let mut updates = specs
        .iter()
        .map(|s| {
            RefUpdate::resolve(s, None, repo).map_err(|e| {
                let shown = format!(
                    "{}{}:{}",
                    if s.force { "+" } else { "" },
                    s.src.as_deref().unwrap_or(""),
                    s.dst
                );
                UsageError::new("[+]SRC:DST", format!("{shown:?}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = std::collections::BTreeSet::new();
    for u in &updates {
        if !seen.insert(u.dst().to_string()) {
            return Err(UsageError::new(
                "[+]SRC:DST",
                format!("{} is named twice", u.dst()),
            ));
        }
    }
    for (dst, lease) in leases {
        let shown = || match lease {
            LeaseSpec::Tracking => dst.clone(),
            _ => format!("{dst}=…"),
        };
        let candidates: Vec<usize> = (0..specs.len())
            .filter(|&i| {
                specs[i].dst == *dst
                    || updates[i].dst() == *dst
                    || (!dst.starts_with("refs/")
                        && (updates[i].dst() == format!("refs/heads/{dst}")
                            || updates[i].dst() == format!("refs/tags/{dst}")))
            })
            .collect();
        let i = match candidates.as_slice() {
            [i] => *i,
            [] => {
                return Err(UsageError::new(
                    "--lease",
                    format!(
                        "{:?}: {dst} is not the destination of any push spec",
                        shown()
                    ),
                ))
            }
            _ => {
                return Err(UsageError::new(
                    "--lease",
                    format!("{:?}: {dst} names more than one destination", shown()),
                ))
            }
        };
        let full = updates[i].dst().to_string();
        let resolved = lease
            .resolve_with(&full, &target.url, target.remote.as_ref(), repo)
            .map_err(|e| {
                UsageError::new(
                    "--lease",
                    format!("{:?}: {}", shown(), strip_invalid_prefix(&e.to_string())),
                )
            })?;
        updates[i] = updates[i].clone().with_lease(resolved);
    }
    Ok(updates)
}

/// A [`sluice_git::InputError`] returned by a client call, as a usage error.
pub fn input_error(e: &sluice_git::InputError) -> UsageError {
    use sluice_git::InputError as E;
    let arg = match e {
        E::Url(_) | E::Remote { .. } => "<URL>",
        E::Refspec { .. } => "<REFSPEC>",
        E::Prefix(_) => "--prefix",
        E::RefName { .. } | E::Revision { .. } | E::Push(_) => "[+]SRC:DST",
        // A kind of bad input this CLI does not know yet: its words name it.
        _ => "<ARGS>",
    };
    UsageError::new(arg, e.to_string())
}

/// Whether a ref name matches `git ls-remote`'s patterns: none given, or
/// the name equal to one or ending in `/<pattern>`, a pattern's globs
/// matched as git's `wildmatch` matches them without `WM_PATHNAME` (`*`
/// crosses `/`).
pub fn ref_matches(name: &str, patterns: &[String]) -> bool {
    use gix::bstr::ByteSlice;
    if patterns.is_empty() {
        return true;
    }
    let path = format!("/{name}");
    patterns.iter().any(|p| {
        let pattern = format!("*/{p}");
        gix::glob::wildmatch(
            pattern.as_bytes().as_bstr(),
            path.as_bytes().as_bstr(),
            gix::glob::wildmatch::Mode::empty(),
        )
    })
}

/// Whether a push spec deletes a ref named short (`:side`, `--delete
/// side`): git finds it among the remote's refs ([`expand_deletions`]).
pub fn deletes_a_short_name(specs: &[PushSpec]) -> bool {
    specs
        .iter()
        .any(|s| s.src.is_none() && !s.dst.starts_with("refs/"))
}

/// The deletions named short (`:side`) expanded as git expands them, by
/// the remote's refs (`remote`, their full names): of git's candidates
/// (`refs/<name>`, `refs/tags/<name>`, `refs/heads/<name>`,
/// `refs/remotes/<name>`, `refs/remotes/<name>/HEAD`) the one the remote
/// has, a branch or a tag before any other. None (git: "unable to delete
/// 'x': remote ref does not exist") or two of a kind is bad input.
pub fn expand_deletions(
    specs: &[PushSpec],
    remote: &[String],
) -> Result<Vec<PushSpec>, UsageError> {
    specs
        .iter()
        .map(|s| {
            if s.src.is_some() || s.dst.starts_with("refs/") {
                return Ok(s.clone());
            }
            let name = &s.dst;
            let candidates = [
                format!("refs/{name}"),
                format!("refs/tags/{name}"),
                format!("refs/heads/{name}"),
                format!("refs/remotes/{name}"),
                format!("refs/remotes/{name}/HEAD"),
            ];
            let found: Vec<&String> = candidates.iter().filter(|c| remote.contains(c)).collect();
            let (strong, weak): (Vec<&String>, Vec<&String>) = found
                .into_iter()
                .partition(|c| c.starts_with("refs/heads/") || c.starts_with("refs/tags/"));
            let pick = if strong.is_empty() { weak } else { strong };
            match pick.as_slice() {
                [one] => Ok(PushSpec {
                    force: s.force,
                    src: None,
                    dst: (*one).clone(),
                }),
                [] => Err(UsageError::new(
                    "[+]SRC:DST",
                    format!("unable to delete {name:?}: remote ref does not exist"),
                )),
                many => Err(UsageError::new(
                    "[+]SRC:DST",
                    format!(
                        "{name:?} matches more than one of the remote's refs ({}): give the full name",
                        many.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pats(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_http_and_https_urls_are_spoken_over_http() {
        for url in ["http://h/r.git", "https://h/r.git", "HTTPS://h/r.git"] {
            assert!(is_http(url), "{url}");
        }
        for url in [
            "git://h/r.git",
            "ssh://h/r.git",
            "file:///r.git",
            "h:r.git",
            "/srv/https://r.git",
            "ext::https://h",
        ] {
            assert!(!is_http(url), "{url}");
        }
    }

    #[test]
    fn patterns_match_a_tail_of_the_name_as_git_ls_remote_does() {
        let cases: &[(&str, &[&str], bool)] = &[
            ("refs/heads/main", &[], true),
            ("refs/heads/main", &["main"], true),
            ("refs/remotes/origin/main", &["main"], true),
            ("refs/heads/notmain", &["main"], false),
            ("HEAD", &["HEAD"], true),
            ("refs/heads/main", &["heads/main"], true),
            ("refs/heads/main", &["eads/main"], false),
            ("refs/tags/v1.0", &["v1*"], true),
            ("refs/tags/v1.0^{}", &["v1.0"], false),
            ("refs/tags/v1.0^{}", &["v1*"], true),
            ("refs/heads/a/b", &["heads/*"], true),
            ("refs/heads/main", &["ma?n"], true),
            ("refs/heads/main", &["x", "main"], true),
        ];
        for (name, p, want) in cases {
            assert_eq!(ref_matches(name, &pats(p)), *want, "{name} {p:?}");
        }
    }

    #[test]
    fn a_deletion_named_short_takes_the_remotes_ref_of_that_name() {
        let remote = pats(&[
            "HEAD",
            "refs/heads/side",
            "refs/tags/v1",
            "refs/heads/both",
            "refs/tags/both",
            "refs/remotes/mirror",
            "refs/heads/kept",
        ]);
        let spec = |s: &str| PushSpec::parse(s).expect("a spec");
        let specs = [spec(":side"), spec(":v1"), spec(":mirror"), spec("kept")];
        let out = expand_deletions(&specs, &remote).expect("expanded");
        let dsts: Vec<&str> = out.iter().map(|s| s.dst.as_str()).collect();
        assert_eq!(
            dsts,
            [
                "refs/heads/side",
                "refs/tags/v1",
                "refs/remotes/mirror",
                "kept"
            ]
        );
        assert!(deletes_a_short_name(&specs));
        assert!(!deletes_a_short_name(&out[..2]));
        let missing = expand_deletions(&[spec(":gone")], &remote).unwrap_err();
        assert!(
            missing.message.contains("remote ref does not exist"),
            "{missing}"
        );
        let two = expand_deletions(&[spec(":both")], &remote).unwrap_err();
        assert!(two.message.contains("more than one"), "{two}");
    }
}
