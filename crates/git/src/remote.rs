//! Remote URLs: parsing, the transport they name, and their display form
//! without user info.

use gix::url::Scheme;
use secrecy::SecretString;
use sluice_policy::text::redact;

/// The transport a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportKind {
    /// `git://`: a git daemon over TCP.
    Git,
    /// `http://` or `https://`: smart HTTP.
    Http,
    /// `ssh://` or `host:path`: a spawned `ssh`.
    Ssh,
    /// `file://` or a local path: a spawned `git upload-pack` / `git receive-pack`.
    File,
}

/// A parsed remote.
#[derive(Clone)]
pub struct Remote {
    /// The parsed URL (user info removed).
    pub(crate) url: gix::Url,
    /// The transport.
    pub kind: TransportKind,
    /// The URL without user info, for output.
    pub display: String,
    /// User name from the URL, if any.
    pub(crate) user: Option<String>,
    /// Password from the URL: a static credential.
    pub(crate) password: Option<SecretString>,
    /// `http.extraHeader` lines (`Name: value`) git's configuration gives
    /// this URL: sent on every request of an http(s) remote.
    pub(crate) extra_headers: Vec<(String, String)>,
    /// The base an http(s) remote redirected this operation to (shared by
    /// the operation's clones: its later attempts and settling reads).
    pub(crate) redirected: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("kind", &self.kind)
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

/// A URL that is not a usable git remote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid remote URL {url:?}: {reason}")]
pub struct BadUrl {
    /// The URL as given, user info removed.
    pub url: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The port of a `scheme://[user@]host:port/...` URL when it is digits
/// but no TCP port (above 65535): gix says only that the URL cannot be
/// parsed.
fn port_out_of_range(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_port = host_port.rsplit_once(']').map_or(host_port, |(_, p)| p);
    let (_, port) = host_port.rsplit_once(':')?;
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    (digits && port.parse::<u16>().is_err()).then_some(port)
}

/// Why a build with the features `http` and `https` (on or off) cannot
/// speak to a `scheme` remote, in words that name the feature it needs;
/// `None` when it can. (A function of the features as given, so that its
/// words are tested in every build.)
pub(crate) fn missing_feature(scheme: &Scheme, http: bool, https: bool) -> Option<String> {
    let (name, feature) = match scheme {
        Scheme::Https if !https => ("https://", "https"),
        Scheme::Http if !http => ("http://", "http"),
        _ => return None,
    };
    let has = if http {
        "git://, ssh://, file:// and plain http:// only"
    } else {
        "git://, ssh:// and file:// only"
    };
    Some(format!(
        "{name} remotes need sluice-git's `{feature}` feature, which this build leaves out \
         (it speaks {has}); build sluice-git with `features = [\"https\"]` (the default)"
    ))
}

impl Remote {
    /// Parse `url`: `git://`, `http(s)://`, `ssh://`, `user@host:path`,
    /// `file://` or a local path. An `http://` URL in a build without the
    /// `http` feature, or an `https://` one without `https`, is refused
    /// here, naming the feature.
    pub fn parse(url: &str) -> Result<Remote, BadUrl> {
        let bad = |reason: &str| BadUrl {
            url: redact(url),
            reason: sluice_policy::scrub_user_info(reason, url),
        };
        if url.trim().is_empty() {
            return Err(bad("empty"));
        }
        if url.chars().any(|c| c.is_control()) {
            return Err(bad("contains control characters"));
        }
        let mut parsed = gix::url::parse(url.as_bytes()).map_err(|e| {
            if let Some(port) = port_out_of_range(url) {
                return bad(&format!("bad port {port} (a port is 1 to 65535)"));
            }
            // gix quotes the input, escaped: say what is wrong with the URL
            // as shown (user info removed) instead, when that differs.
            let shown = redact(url);
            if shown == url {
                return bad(&e.to_string());
            }
            match gix::url::parse(shown.as_bytes()) {
                Err(e) => bad(&e.to_string()),
                Ok(_) => bad("its user info cannot be parsed"),
            }
        })?;
        if let Some(why) = missing_feature(
            &parsed.scheme,
            cfg!(feature = "http"),
            cfg!(feature = "https"),
        ) {
            return Err(bad(&why));
        }
        let kind = match parsed.scheme {
            Scheme::Git => TransportKind::Git,
            Scheme::Http | Scheme::Https => TransportKind::Http,
            Scheme::Ssh => TransportKind::Ssh,
            Scheme::File => TransportKind::File,
            _ => {
                return Err(bad(
                    "unsupported scheme (use git://, http(s)://, ssh:// or file://)",
                ))
            }
        };
        if kind != TransportKind::File && parsed.host().is_none_or(str::is_empty) {
            return Err(bad("no host"));
        }
        if parsed.path.is_empty() || parsed.path_is_root() && kind != TransportKind::Http {
            return Err(bad("no repository path"));
        }
        // A user name alone is kept as a user name: the credentials'
        // order decides whether it is one or a token (`https://TOKEN@host`,
        // GitHub's form; see `GitClient::operation`).
        let user = parsed.user().filter(|u| !u.is_empty()).map(str::to_string);
        let password = parsed.password().map(|p| SecretString::from(p.to_string()));
        if kind == TransportKind::Http {
            parsed.set_user(None);
            parsed.set_password(None);
        } else {
            parsed.set_password(None);
        }
        let mut shown = parsed.clone();
        shown.set_user(None);
        let display = if kind == TransportKind::File && !url.starts_with("file://") {
            url.to_string()
        } else {
            // gix reads `file://u:p@x` as a path, not user info; what looks
            // like user info is left out of the display form all the same.
            redact(&shown.to_bstring().to_string())
        };
        Ok(Remote {
            url: parsed,
            kind,
            display,
            user,
            password,
            extra_headers: Vec::new(),
            redirected: Default::default(),
        })
    }

    /// Whether an `http.extraHeader` of this remote is `Authorization`.
    pub(crate) fn has_authorization_header(&self) -> bool {
        self.extra_headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    }

    /// The redirected base of this operation, when the remote redirected
    /// it (without user info).
    pub fn redirected(&self) -> Option<String> {
        self.redirected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            .map(redact)
    }

    /// The operation's redirected base as kept.
    #[cfg(feature = "http")]
    pub(crate) fn redirected_memo(&self) -> Option<String> {
        self.redirected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Keep `base` as the operation's redirected base.
    #[cfg(feature = "http")]
    pub(crate) fn set_redirected_memo(&self, base: Option<String>) {
        *self.redirected.lock().unwrap_or_else(|p| p.into_inner()) = base;
    }

    /// `out` with the redirected base this operation was sent to, if any
    /// (the JSON document's `operation.redirected`).
    pub(crate) fn note_redirect<T>(
        &self,
        mut out: sluice_policy::Outcome<T>,
    ) -> sluice_policy::Outcome<T> {
        out.operation.redirected = self.redirected();
        out
    }

    /// Where this operation's http(s) requests go: the redirected base
    /// once the remote redirected it, else the URL.
    #[cfg(feature = "http")]
    pub(crate) fn http_base(&self) -> gix::Url {
        let memo = self
            .redirected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        memo.and_then(|b| gix::url::parse(b.as_bytes()).ok())
            .unwrap_or_else(|| self.url.clone())
    }

    /// The host, with its port when not the scheme's default (`local` for a
    /// local remote): the key of the retry budget and the `host` of spans
    /// and metrics. Never a path or user info.
    pub fn host(&self) -> String {
        let default = match self.url.scheme {
            Scheme::Http => Some(80),
            Scheme::Https => Some(443),
            Scheme::Ssh => Some(22),
            Scheme::Git => Some(9418),
            _ => None,
        };
        match self.url.host().filter(|h| !h.is_empty()) {
            Some(h) => {
                // An IPv6 address keeps its brackets, so its port stays apart.
                let h = if h.contains(':') && !h.starts_with('[') {
                    format!("[{h}]")
                } else {
                    h.to_string()
                };
                match self.url.port.filter(|p| Some(*p) != default) {
                    Some(p) => format!("{h}:{p}"),
                    None => h,
                }
            }
            None => "local".to_string(),
        }
    }

    /// The repository path on the remote.
    pub(crate) fn path(&self) -> String {
        self.url.path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheme_this_build_leaves_out_is_refused_naming_the_feature() {
        let none = |s: &Scheme, http, https| missing_feature(s, http, https);
        for s in [Scheme::Git, Scheme::Ssh, Scheme::File] {
            assert_eq!(none(&s, false, false), None);
        }
        assert_eq!(none(&Scheme::Http, true, false), None);
        assert_eq!(none(&Scheme::Https, true, true), None);
        let why = none(&Scheme::Https, false, false).expect("refused");
        assert!(
            why.starts_with("https:// remotes need sluice-git's `https` feature"),
            "{why}"
        );
        assert!(why.contains("git://, ssh:// and file:// only"), "{why}");
        let why = none(&Scheme::Http, false, false).expect("refused");
        assert!(
            why.starts_with("http:// remotes need sluice-git's `http` feature"),
            "{why}"
        );
        let why = none(&Scheme::Https, true, false).expect("refused");
        assert!(why.contains("`https` feature"), "{why}");
        assert!(why.contains("plain http:// only"), "{why}");
        // This build's own features decide `Remote::parse`.
        let parsed = Remote::parse("https://example.com/o/r.git");
        assert_eq!(parsed.is_ok(), cfg!(feature = "https"), "{parsed:?}");
        if let Err(e) = parsed {
            assert!(e.reason.contains("`https` feature"), "{e}");
        }
    }

    #[test]
    fn the_host_keeps_a_port_that_is_not_the_default_and_never_user_info_or_a_path() {
        let host = |u: &str| Remote::parse(u).expect("valid").host();
        assert_eq!(
            host("https://x-access-token:s3cret@example.com/o/r.git"),
            "example.com"
        );
        assert_eq!(host("https://example.com:443/o/r.git"), "example.com");
        assert_eq!(host("https://example.com:8443/o/r.git"), "example.com:8443");
        assert_eq!(host("http://127.0.0.1:80/r"), "127.0.0.1");
        assert_eq!(host("git://127.0.0.1:9418/r"), "127.0.0.1");
        assert_eq!(host("git://127.0.0.1:39418/r"), "127.0.0.1:39418");
        assert_eq!(host("ssh://git@example.com:22/r"), "example.com");
        assert_eq!(host("ssh://git@example.com:2222/r"), "example.com:2222");
        assert_eq!(host("git@example.com:o/r.git"), "example.com");
        assert_eq!(host("/srv/git/r.git"), "local");
        assert_eq!(host("file:///srv/git/r.git"), "local");
    }

    #[test]
    fn user_info_never_reaches_the_display_form() {
        let r = Remote::parse("https://x-access-token:s3cret@example.com/o/r.git").expect("valid");
        assert_eq!(r.kind, TransportKind::Http);
        assert_eq!(r.display, "https://example.com/o/r.git");
        assert!(!format!("{r:?}").contains("s3cret"));
        assert_eq!(redact("http://u:p@h:1/x"), "http://h:1/x");
        let t = Remote::parse("https://tok3n@example.com/o/r.git").expect("valid");
        assert_eq!(t.display, "https://example.com/o/r.git");
        // The user name is kept; the credentials' order reads it as a token
        // when nothing else applies.
        assert_eq!(t.user.as_deref(), Some("tok3n"));
        assert!(t.password.is_none());
    }

    #[test]
    fn transports_are_recognised_and_bad_urls_refused() {
        assert_eq!(
            Remote::parse("git://127.0.0.1:9418/r.git")
                .expect("git")
                .kind,
            TransportKind::Git
        );
        assert_eq!(
            Remote::parse("ssh://git@h/r.git").expect("ssh").kind,
            TransportKind::Ssh
        );
        assert_eq!(
            Remote::parse("git@h:r.git").expect("scp").kind,
            TransportKind::Ssh
        );
        assert_eq!(
            Remote::parse("file:///tmp/r.git").expect("file").kind,
            TransportKind::File
        );
        assert_eq!(
            Remote::parse("./some/dir").expect("path").kind,
            TransportKind::File
        );
        assert!(Remote::parse("").is_err());
        assert!(Remote::parse("git://").is_err());
        assert!(Remote::parse("ftp://h/r").is_err());
    }
}
