//! Redirects as git follows them by default (`http.followRedirects=initial`):
//! the first request of a conversation (`info/refs`) follows up to
//! [`MAX_REDIRECTS`], never from https to http; a `Location` may be relative
//! and is resolved against the request's URL; the redirected base is the
//! final URL less the tail the request added to its base, as git's
//! `update_url_from_redirect` computes it. Pure functions, tested without a
//! server.

/// The most redirects the first request follows (git's and curl's default).
pub(crate) const MAX_REDIRECTS: usize = 10;

/// Why a redirect is not followed: the server's answer, never retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RedirectRefused {
    /// The `Location` header is missing or not a URL.
    #[error("a redirect without a usable Location ({0:?})")]
    NoLocation(String),
    /// A redirect from https to http (or to another scheme).
    #[error("refusing a redirect from {from} to {to}: it leaves https")]
    Downgrade {
        /// Where the redirect came from (no user info).
        from: String,
        /// Where it pointed (no user info).
        to: String,
    },
    /// A URL came back in the chain.
    #[error("a redirect loop: {}", .0.join(" -> "))]
    Loop(Vec<String>),
    /// More than [`MAX_REDIRECTS`].
    #[error("more than {MAX_REDIRECTS} redirects: {}", .0.join(" -> "))]
    TooMany(Vec<String>),
    /// The final URL does not end as the request did, so no base can be
    /// taken from it (git: "unable to update url base from redirection").
    #[error(
        "cannot take a repository base from the redirect: asked for {asked}, redirected to {to}"
    )]
    NoBase {
        /// The URL asked for (no user info).
        asked: String,
        /// The URL redirected to (no user info).
        to: String,
    },
}

/// Resolve `location` against `from` (it may be a path, as forges send
/// it) and check the hop: the scheme stays https once https, the URL is
/// not one seen before in `chain`, and `chain` has room.
pub(crate) fn next_hop(
    from: &reqwest::Url,
    location: Option<&str>,
    chain: &[reqwest::Url],
) -> Result<reqwest::Url, RedirectRefused> {
    let shown = |u: &reqwest::Url| sluice_policy::text::redact(u.as_str());
    let loc = location.unwrap_or("");
    let to = from
        .join(loc)
        .map_err(|_| RedirectRefused::NoLocation(sluice_policy::text::redact(loc)))?;
    if loc.trim().is_empty() {
        return Err(RedirectRefused::NoLocation(String::new()));
    }
    let safe = matches!(
        (from.scheme(), to.scheme()),
        ("https", "https") | ("http", "http") | ("http", "https")
    );
    if !safe {
        return Err(RedirectRefused::Downgrade {
            from: shown(from),
            to: shown(&to),
        });
    }
    let mut names: Vec<String> = chain.iter().map(shown).collect();
    names.push(shown(&to));
    if chain.iter().any(|u| u == &to) {
        return Err(RedirectRefused::Loop(names));
    }
    if chain.len() > MAX_REDIRECTS {
        return Err(RedirectRefused::TooMany(names));
    }
    Ok(to)
}

/// The redirected base: `final_url` less the tail `requested` added to
/// `base` (`/info/refs?service=git-upload-pack`).
pub(crate) fn base_of(
    requested: &str,
    base: &str,
    final_url: &reqwest::Url,
) -> Result<String, RedirectRefused> {
    let no_base = || RedirectRefused::NoBase {
        asked: sluice_policy::text::redact(requested),
        to: sluice_policy::text::redact(final_url.as_str()),
    };
    let tail = requested.strip_prefix(base).ok_or_else(no_base)?;
    final_url
        .as_str()
        .strip_suffix(tail)
        .filter(|b| !b.is_empty())
        .map(str::to_string)
        .ok_or_else(no_base)
}

/// Whether a credential bought for `origin` may go to `url`: the same host
/// and port (an upgrade from http to https on the scheme's ports counts as
/// the same), as git and gix decide it.
pub(crate) fn same_authority(origin: &reqwest::Url, url: &reqwest::Url) -> bool {
    if origin.host_str() != url.host_str() {
        return false;
    }
    let (a, b) = (origin.port_or_known_default(), url.port_or_known_default());
    if origin.scheme() == url.scheme() {
        return a == b;
    }
    origin.scheme() == "http"
        && url.scheme() == "https"
        && (a == b || (a, b) == (Some(80), Some(443)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).expect("a URL")
    }

    #[test]
    fn a_relative_location_is_resolved_against_the_request() {
        let from = u("https://h/git/old.git/info/refs?service=git-upload-pack");
        let to = next_hop(
            &from,
            Some("/git/new.git/info/refs?service=git-upload-pack"),
            std::slice::from_ref(&from),
        )
        .expect("followed");
        assert_eq!(
            to.as_str(),
            "https://h/git/new.git/info/refs?service=git-upload-pack"
        );
        let base = base_of(
            "https://h/git/old.git/info/refs?service=git-upload-pack",
            "https://h/git/old.git",
            &to,
        )
        .expect("a base");
        assert_eq!(base, "https://h/git/new.git");
    }

    #[test]
    fn https_to_http_loops_and_long_chains_are_refused() {
        let from = u("https://h/a/info/refs?service=x");
        assert!(matches!(
            next_hop(
                &from,
                Some("http://h/b/info/refs?service=x"),
                std::slice::from_ref(&from)
            ),
            Err(RedirectRefused::Downgrade { .. })
        ));
        let plain = u("http://h/a/info/refs?service=x");
        assert!(next_hop(
            &plain,
            Some("https://h/b/info/refs?service=x"),
            std::slice::from_ref(&plain)
        )
        .is_ok());
        let b = u("http://h/b/info/refs?service=x");
        let e = next_hop(
            &b,
            Some("/a/info/refs?service=x"),
            &[plain.clone(), b.clone()],
        )
        .expect_err("a loop");
        assert_eq!(
            e.to_string(),
            "a redirect loop: http://h/a/info/refs?service=x -> http://h/b/info/refs?service=x -> http://h/a/info/refs?service=x"
        );
        let chain: Vec<_> = (0..=MAX_REDIRECTS)
            .map(|i| u(&format!("http://h/{i}/info/refs")))
            .collect();
        assert!(matches!(
            next_hop(&chain[MAX_REDIRECTS], Some("/x/info/refs"), &chain),
            Err(RedirectRefused::TooMany(_))
        ));
        assert!(matches!(
            next_hop(&from, None, std::slice::from_ref(&from)),
            Err(RedirectRefused::NoLocation(_))
        ));
    }

    #[test]
    fn a_final_url_without_the_requests_tail_gives_no_base() {
        let e = base_of(
            "http://h/a/info/refs?service=x",
            "http://h/a",
            &u("http://h/elsewhere"),
        );
        assert!(matches!(e, Err(RedirectRefused::NoBase { .. })));
    }

    #[test]
    fn a_credential_stays_with_its_host_and_port() {
        let o = u("http://h:80/a");
        assert!(same_authority(&o, &u("http://h/b")));
        assert!(same_authority(&o, &u("https://h/b")));
        assert!(!same_authority(&o, &u("http://other/b")));
        assert!(!same_authority(
            &u("http://h:8080/a"),
            &u("http://h:8081/a")
        ));
        assert!(!same_authority(&u("https://h/a"), &u("http://h/a")));
    }
}
