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
    let kind = check_git_url(&url)?;
    check_token_transport(common, &url, kind)?;
    let remote = match (named, direction) {
        (None, gix::remote::Direction::Push) => sluice_git::NamedRemote::for_url(repo, &url),
        (named, _) => named,
    };
    Ok(Target { url, remote })
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
/// bad input naming its key.
pub fn https_for(
    common: &Common,
    config: &gix::config::File,
    url: &str,
) -> Result<sluice_git::HttpsConfig, UsageError> {
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

/// Where `ls-refs <URL>` leads, as `git ls-remote` finds it: in the
/// repository found from the working directory (when there is one it may
/// read), the URL rewritten by its `insteadOf` and its https settings for
/// that URL; elsewhere the global configuration's.
pub fn resolve_listing(
    common: &Common,
    arg: &str,
) -> Result<(String, sluice_git::HttpsConfig), UsageError> {
    let config = match open_repo(None) {
        Ok(repo) => repo.config_snapshot().plumbing().clone(),
        Err(_) => gix::config::File::from_globals().unwrap_or_default(),
    };
    let url = sluice_git::rewrite_url(&config, arg, gix::remote::Direction::Fetch);
    let kind = check_git_url(&url)?;
    check_token_transport(common, &url, kind)?;
    let https = https_for(common, &config, &url)?;
    Ok((url, https))
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
