//! git's configuration of a call, read as git reads it: the `http.*` and
//! `http.<url>.*` settings that apply to one URL (git-config's URL
//! matching), and the `url.<base>.insteadOf` / `pushInsteadOf` rewrites of
//! a URL typed on the command line.
//!
//! gix applies `http.*` only to its own HTTP transports, which this crate
//! does not use, so they are read here, once, for fetch, push and ls-refs
//! alike.
//!
//! The URL matching is git's (`git help config`, `http.<url>.*`): the
//! scheme must be equal; the host equal, case aside, where a `*` in the
//! configured host matches one whole dot-separated label; the port equal
//! (a scheme's default port given or not); the configured path a prefix of
//! the URL's at a `/`; a user name, when the configured URL has one,
//! equal. The most specific match wins — the longest path, then one naming
//! the user — and among equals the last in the configuration; a key
//! without a URL (`http.sslVerify`) is the least specific of all.

use std::ffi::OsString;
use std::path::PathBuf;

use gix::bstr::ByteSlice;
use gix::remote::Direction;

#[cfg(feature = "https")]
use crate::HttpsConfig;

/// One setting and the key it came from (`http.sslCAInfo`,
/// `http.https://example.com/.sslCAInfo`, `GIT_SSL_CAINFO`), for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSetting<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub key: String,
}

/// The http settings git applies to one URL ([`HttpSettings::read`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpSettings {
    /// `http.sslCAInfo` (or `GIT_SSL_CAINFO`): roots that replace the
    /// platform's.
    pub ssl_ca_info: Option<HttpSetting<PathBuf>>,
    /// `http.sslVerify` (`false`, or `GIT_SSL_NO_VERIFY` set: the server's
    /// certificate is not checked).
    pub ssl_verify: Option<HttpSetting<bool>>,
    /// `http.proxy`: used when no proxy was chosen otherwise (it wins over
    /// the environment's, as in git).
    pub proxy: Option<HttpSetting<String>>,
}

/// A setting that cannot be used: the key and why.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct HttpSettingError {
    /// The key (or variable) it came from.
    pub key: String,
    /// Why it cannot be used.
    pub reason: String,
}

/// A URL split as git's URL matching needs it.
#[derive(Debug, PartialEq, Eq)]
struct UrlParts {
    scheme: String,
    user: Option<String>,
    host: String,
    port: Option<u16>,
    /// Starts with `/`; without a trailing `/` (the root is `/`).
    path: String,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        "ssh" => Some(22),
        "git" => Some(9418),
        _ => None,
    }
}

fn parse(url: &str) -> Option<UrlParts> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u.split_once(':').map_or(u, |(u, _)| u).to_string()), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
            if p.is_empty() {
                (h, None)
            } else {
                (h, Some(p.parse().ok()?))
            }
        }
        _ => (hostport, None),
    };
    let port = port.or_else(|| default_port(&scheme));
    let mut path = path.to_string();
    while path.len() > 1 && path.ends_with('/') {
        path.pop();
    }
    Some(UrlParts {
        scheme,
        user,
        host: host.to_ascii_lowercase(),
        port,
        path,
    })
}

/// `*` in a configured host matches one whole label.
fn host_matches(pattern: &str, host: &str) -> bool {
    let (p, h): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), host.split('.').collect());
    p.len() == h.len() && p.iter().zip(&h).all(|(p, h)| *p == "*" || p == h)
}

/// How specifically `pattern` (a configured URL) matches `url`: `None`
/// when it does not; else the length of the path matched and whether a
/// user was named, compared in that order.
fn specificity(pattern: &UrlParts, url: &UrlParts) -> Option<(usize, bool)> {
    if pattern.scheme != url.scheme
        || !host_matches(&pattern.host, &url.host)
        || pattern.port != url.port
    {
        return None;
    }
    if let Some(u) = &pattern.user {
        if url.user.as_ref() != Some(u) {
            return None;
        }
    }
    let path_ok = pattern.path == "/"
        || url.path == pattern.path
        || url
            .path
            .strip_prefix(&pattern.path)
            .is_some_and(|rest| rest.starts_with('/'));
    if !path_ok {
        return None;
    }
    let len = if pattern.path == "/" {
        0
    } else {
        pattern.path.len()
    };
    Some((len, pattern.user.is_some()))
}

/// Whether `pattern` (a configured URL, as in `http.<url>.*`) applies to
/// `url` by git's URL matching.
pub(crate) fn url_matches(pattern: &str, url: &str) -> bool {
    match (parse(pattern), parse(url)) {
        (Some(p), Some(u)) => specificity(&p, &u).is_some(),
        _ => false,
    }
}

/// How a section ranks for a URL: `None` (no URL) below every match.
type Rank = Option<(usize, bool)>;

/// A value as read (`None`: the key without `=`) and its key.
type Found = (Option<gix::bstr::BString>, String);

/// The value of `name` in the `http` section that applies to `url` most
/// specifically, and its key; `None` when no section sets it.
fn best(config: &gix::config::File, url: &UrlParts, name: &str) -> Option<Found> {
    let mut found: Option<(Rank, Found)> = None;
    for section in config.sections_by_name("http")? {
        let Some(value) = section.value_implicit(name) else {
            continue;
        };
        let sub = section.header().subsection_name().map(|s| s.to_string());
        let rank = match &sub {
            None => None,
            Some(s) => match parse(s).and_then(|p| specificity(&p, url)) {
                Some(r) => Some(r),
                None => continue,
            },
        };
        let key = match &sub {
            Some(s) => format!("http.{s}.{name}"),
            None => format!("http.{name}"),
        };
        // Later sections win among equals, as git's last value does.
        if found.as_ref().is_none_or(|(r, _)| rank >= *r) {
            found = Some((rank, (value, key)));
        }
    }
    found.map(|(_, f)| f)
}

impl HttpSettings {
    /// The settings `config` gives `url` (its `http.*` and `http.<url>.*`,
    /// the most specific of each key), without the environment's. A URL
    /// that is not `scheme://…` gets the URL-less keys only.
    pub fn read(config: &gix::config::File, url: &str) -> HttpSettings {
        let parts = parse(url).unwrap_or(UrlParts {
            scheme: String::new(),
            user: None,
            host: String::new(),
            port: None,
            path: "/".into(),
        });
        let string = |name: &str| {
            best(config, &parts, name)
                .and_then(|(v, key)| Some((v?.to_str_lossy().into_owned(), key)))
        };
        let ssl_ca_info = string("sslCAInfo")
            .filter(|(v, _)| !v.is_empty())
            .map(|(v, key)| HttpSetting {
                value: expand_home(&v),
                key,
            });
        let proxy = string("proxy").map(|(value, key)| HttpSetting { value, key });
        let ssl_verify = best(config, &parts, "sslVerify").map(|(v, key)| HttpSetting {
            // `sslVerify` alone is true; a value git cannot read as a
            // boolean keeps verification on.
            value: match v {
                None => true,
                Some(v) => gix::config::Boolean::try_from(v).map_or(true, |b| b.0),
            },
            key,
        });
        HttpSettings {
            ssl_ca_info,
            ssl_verify,
            proxy,
        }
    }

    /// These settings with the environment's over them, as git reads it:
    /// `GIT_SSL_CAINFO` over `http.sslCAInfo`, and `GIT_SSL_NO_VERIFY`
    /// (set at all) turning verification off.
    pub fn with_environment(mut self, var: impl Fn(&str) -> Option<OsString>) -> HttpSettings {
        if let Some(path) = var("GIT_SSL_CAINFO").filter(|v| !v.is_empty()) {
            self.ssl_ca_info = Some(HttpSetting {
                value: PathBuf::from(path),
                key: "GIT_SSL_CAINFO".into(),
            });
        }
        if var("GIT_SSL_NO_VERIFY").is_some() {
            self.ssl_verify = Some(HttpSetting {
                value: false,
                key: "GIT_SSL_NO_VERIFY".into(),
            });
        }
        self
    }

    /// [`HttpSettings::read`] with the process's environment over it.
    pub fn for_url(config: &gix::config::File, url: &str) -> HttpSettings {
        Self::read(config, url).with_environment(|k| std::env::var_os(k))
    }

    /// Whether the server's certificate goes unchecked
    /// (`http.sslVerify=false` or `GIT_SSL_NO_VERIFY`): the key that said
    /// so, for the caller's warning.
    pub fn verification_off(&self) -> Option<&str> {
        self.ssl_verify
            .as_ref()
            .filter(|s| !s.value)
            .map(|s| s.key.as_str())
    }

    /// `https` with these settings where no choice of the caller's
    /// decided: the proxy only when `https` takes the environment's
    /// ([`crate::ProxyChoice::Environment`]; an empty `http.proxy` leaves
    /// it so); the CA file replacing the platform's roots (the caller's
    /// `--ca-file`s still added); verification off when asked. A value
    /// that cannot be used (a file that cannot be read, a proxy that is no
    /// URL) is an error naming its key. (With the `https` feature.)
    #[cfg(feature = "https")]
    pub fn apply(&self, mut https: HttpsConfig) -> Result<HttpsConfig, HttpSettingError> {
        let bad = |key: &str, e: &dyn std::fmt::Display| HttpSettingError {
            key: key.to_string(),
            reason: e.to_string(),
        };
        if *https.proxy() == crate::ProxyChoice::Environment {
            if let Some(p) = &self.proxy {
                let proxy = p.value.trim();
                if !proxy.is_empty() {
                    let url = if proxy.contains("://") {
                        proxy.to_string()
                    } else {
                        format!("http://{proxy}")
                    };
                    https = https
                        .with_proxy(crate::ProxyChoice::Url(url))
                        .map_err(|e| bad(&p.key, &e))?;
                }
            }
        }
        if let Some(ca) = &self.ssl_ca_info {
            https = https
                .with_ca_info(&ca.value)
                .map_err(|e| bad(&ca.key, &e))?;
        }
        if self.verification_off().is_some() {
            https = https.with_ssl_verify(false);
        }
        Ok(https)
    }
}

/// `~/` and `~` at the start of a path, as git's path values expand them.
fn expand_home(v: &str) -> PathBuf {
    match v.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .unwrap_or_else(|| PathBuf::from(v)),
        None => PathBuf::from(v),
    }
}

/// `url` rewritten as git rewrites a remote's URL: for a push, by the
/// longest `url.<base>.pushInsteadOf` that is a prefix of it, else (as for
/// a fetch) by the longest `url.<base>.insteadOf`; the prefix is replaced
/// by `<base>`. Unchanged when none matches. Applies to a URL typed on
/// the command line as to a configured remote's.
pub fn rewrite_url(config: &gix::config::File, url: &str, direction: Direction) -> String {
    let longest = |key: &str| -> Option<(usize, String)> {
        let mut found: Option<(usize, String)> = None;
        for section in config.sections_by_name("url")? {
            let Some(base) = section.header().subsection_name() else {
                continue;
            };
            for prefix in section.values(key) {
                let prefix = prefix.to_str_lossy();
                if !prefix.is_empty()
                    && url.starts_with(prefix.as_ref())
                    && found.as_ref().is_none_or(|(n, _)| prefix.len() > *n)
                {
                    found = Some((prefix.len(), base.to_string()));
                }
            }
        }
        found
    };
    let hit = match direction {
        Direction::Push => longest("pushInsteadOf").or_else(|| longest("insteadOf")),
        Direction::Fetch => longest("insteadOf"),
    };
    match hit {
        Some((n, base)) => format!("{base}{}", &url[n..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> gix::config::File {
        gix::config::File::try_from(text).expect("config parses")
    }

    #[test]
    fn the_most_specific_http_url_section_wins_per_key_as_in_git() {
        let c = config(
            "[http]\n\tsslCAInfo = /all.pem\n\tsslVerify = true\n\
             [http \"https://example.com\"]\n\tsslCAInfo = /host.pem\n\
             [http \"https://example.com/org\"]\n\tsslCAInfo = /org.pem\n\
             [http \"https://*.example.com\"]\n\tsslVerify = false\n\
             [http \"https://example.com:8443\"]\n\tproxy = p:1\n\
             [http \"https://alice@example.com/org/\"]\n\tproxy = alice:1\n",
        );
        let ca = |url: &str| {
            HttpSettings::read(&c, url)
                .ssl_ca_info
                .map(|s| (s.value.display().to_string(), s.key))
        };
        assert_eq!(
            ca("https://example.com/org/repo.git"),
            Some((
                "/org.pem".into(),
                "http.https://example.com/org.sslCAInfo".into()
            ))
        );
        // A path prefix matches at a `/` only.
        assert_eq!(
            ca("https://example.com/organ/r.git").unwrap().0,
            "/host.pem"
        );
        // The default port given or not; another port is another server.
        assert_eq!(ca("https://example.com:443/x").unwrap().0, "/host.pem");
        assert_eq!(ca("https://example.com:8443/x").unwrap().0, "/all.pem");
        // Scheme and host must be equal (case aside for the host).
        assert_eq!(ca("http://example.com/org/x").unwrap().0, "/all.pem");
        assert_eq!(ca("https://EXAMPLE.com/org/x").unwrap().0, "/org.pem");
        // `*` is one whole label.
        let verify = |url: &str| HttpSettings::read(&c, url).ssl_verify.map(|s| s.value);
        assert_eq!(verify("https://git.example.com/r"), Some(false));
        assert_eq!(verify("https://a.git.example.com/r"), Some(true));
        assert_eq!(verify("https://example.com/r"), Some(true));
        // A user in the configured URL must be the URL's; it then wins.
        let proxy = |url: &str| HttpSettings::read(&c, url).proxy.map(|s| s.value);
        assert_eq!(proxy("https://example.com:8443/r"), Some("p:1".into()));
        assert_eq!(
            proxy("https://alice@example.com/org/r"),
            Some("alice:1".into())
        );
        assert_eq!(proxy("https://bob@example.com/org/r"), None);
    }

    #[test]
    fn among_equals_the_last_wins_and_the_environment_wins_over_all() {
        let c = config(
            "[http \"https://h\"]\n\tsslCAInfo = /first.pem\n\
             [http \"https://h/\"]\n\tsslCAInfo = /second.pem\n\
             [http]\n\tsslVerify\n",
        );
        let s = HttpSettings::read(&c, "https://h/r");
        assert_eq!(s.ssl_ca_info.unwrap().value, PathBuf::from("/second.pem"));
        assert_eq!(s.ssl_verify.as_ref().map(|v| v.value), Some(true));
        let env = |k: &str| match k {
            "GIT_SSL_CAINFO" => Some(OsString::from("/env.pem")),
            "GIT_SSL_NO_VERIFY" => Some(OsString::new()),
            _ => None,
        };
        let s = HttpSettings::read(&c, "https://h/r").with_environment(env);
        assert_eq!(s.ssl_ca_info.as_ref().unwrap().key, "GIT_SSL_CAINFO");
        assert_eq!(s.verification_off(), Some("GIT_SSL_NO_VERIFY"));
    }

    #[test]
    fn typed_urls_are_rewritten_by_the_longest_instead_of_and_push_instead_of_first() {
        let c = config(
            "[url \"https://mirror.example/\"]\n\tinsteadOf = gh:\n\tinsteadOf = https://github.com/\n\
             [url \"https://mirror.example/special/\"]\n\tinsteadOf = https://github.com/org/\n\
             [url \"ssh://git@push.example/\"]\n\tpushInsteadOf = https://github.com/\n",
        );
        assert_eq!(
            rewrite_url(&c, "gh:org/r.git", Direction::Fetch),
            "https://mirror.example/org/r.git"
        );
        assert_eq!(
            rewrite_url(&c, "https://github.com/org/r.git", Direction::Fetch),
            "https://mirror.example/special/r.git"
        );
        assert_eq!(
            rewrite_url(&c, "https://github.com/org/r.git", Direction::Push),
            "ssh://git@push.example/org/r.git"
        );
        assert_eq!(
            rewrite_url(&c, "gh:x", Direction::Push),
            "https://mirror.example/x",
            "no pushInsteadOf matches: insteadOf applies"
        );
        assert_eq!(rewrite_url(&c, "/a/path", Direction::Fetch), "/a/path");
    }
}
