//! `--token-ttl`: a token command's result kept across runs of the binary
//! (one run is one operation, so a cache in memory would keep nothing).
//!
//! The token is kept in a file of its own, named by the fingerprint of the
//! command (never the command: it may hold a secret), mode 0600, in a
//! directory of this user's, mode 0700: `$XDG_RUNTIME_DIR/sluice-remote`
//! (a tmpfs the session owns), else `$XDG_CACHE_HOME/sluice-remote`, else
//! `~/.cache/sluice-remote`. A directory that another user owns or others
//! may enter is not used: the command then runs as without a ttl. The file
//! holds the time it expires and the token; a token the remote refused is
//! deleted at once, so the command runs again for the fresh one.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use secrecy::{ExposeSecret, SecretString};
use sluice_policy::{CancelFlag, CommandSource, Credential, CredentialError, CredentialSource};

/// A token command whose result is kept for `ttl` in a file.
pub(crate) struct KeptCommandSource {
    command: CommandSource,
    ttl: Duration,
    file: Option<PathBuf>,
}

impl KeptCommandSource {
    /// `command`'s result kept for `ttl` (in the directory [`cache_dir`]
    /// finds; not kept when there is none fit for secrets).
    pub(crate) fn new(command: &str, ttl: Duration) -> Self {
        let file = cache_dir().map(|d| {
            d.join(format!(
                "token-{}",
                sluice_policy::fingerprint(&format!("token-command\0{command}"))
            ))
        });
        KeptCommandSource {
            command: CommandSource::new(command),
            ttl,
            file,
        }
    }

    /// The kept token, when there is one that has not expired.
    fn kept(&self) -> Option<Credential> {
        let text = std::fs::read_to_string(self.file.as_ref()?).ok()?;
        let (expires, token) = text.split_once('\n')?;
        let expires = UNIX_EPOCH + Duration::from_millis(expires.trim().parse().ok()?);
        let token = token.trim();
        if token.is_empty() || SystemTime::now() >= expires {
            return None;
        }
        // Held past its ttl within one operation, it is bought again.
        Some(Credential::new(SecretString::from(token.to_string())).with_refresh_at(expires))
    }

    /// Keep `c` until `ttl` from now (best effort: a file that cannot be
    /// written keeps nothing).
    fn keep(&self, c: &Credential) -> Option<SystemTime> {
        let file = self.file.as_ref()?;
        let expires = SystemTime::now() + self.ttl;
        let ms = expires.duration_since(UNIX_EPOCH).ok()?.as_millis();
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| write!(f, "{ms}\n{}\n", c.secret().expose_secret()))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!(error = %e, "could not keep the token command's result");
            return None;
        }
        Some(expires)
    }
}

impl CredentialSource for KeptCommandSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.credential_within(Duration::from_secs(24 * 3600), &CancelFlag::new())
    }

    fn credential_within(
        &self,
        limit: Duration,
        cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        if let Some(c) = self.kept() {
            return Ok(c);
        }
        let c = self.command.credential_within(limit, cancel)?;
        Ok(match self.keep(&c) {
            Some(expires) => c.with_refresh_at(expires),
            None => c,
        })
    }

    /// A refused token is no longer kept: the next purchase runs the command.
    fn refused(&self, fingerprint: &str) {
        if self.kept().is_some_and(|c| c.fingerprint() == fingerprint) {
            if let Some(f) = &self.file {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// This user's directory for kept tokens, made when missing; `None` when
/// there is none fit for secrets.
fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = env("XDG_RUNTIME_DIR")
        .or_else(|| env("XDG_CACHE_HOME"))
        .or_else(|| env("HOME").map(|h| h.join(".cache")))?;
    if !base.is_absolute() {
        return None;
    }
    let dir = base.join("sluice-remote");
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir);
    private(&dir).then_some(dir)
}

/// Whether `dir` is a directory (not a link) of this user's that no one
/// else may enter.
fn private(dir: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    // The process's own uid, as its /proc entry is owned.
    let Ok(me) = std::fs::metadata("/proc/self") else {
        return false;
    };
    meta.is_dir() && meta.uid() == me.uid() && meta.permissions().mode() & 0o077 == 0
}
