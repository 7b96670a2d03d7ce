//! A remote's host ([`host_of`]: the key of its retry budget, the `host` of
//! spans and metrics) and whether two URLs share an origin (where a
//! caller's headers may go).

/// The host of a URL-like remote (`scheme://[user@]host[:port]/...`, or
/// git's `[user@]host:path`), with its port when not the scheme's default
/// (http 80, https 443, ssh 22, git 9418); `local` for a local path or a
/// `file://` URL. Never user info or a path: it keys the retry budget and is
/// the `host` of spans and metrics.
pub fn host_of(remote: &str) -> String {
    let (scheme, rest) = match remote.split_once("://") {
        Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
        None => (None, remote),
    };
    let authority = match scheme {
        Some(_) => rest.split(['/', '?', '#']).next().unwrap_or(rest),
        // git's scp-like form: a colon before any slash.
        None => match remote.split_once(':') {
            Some((before, _)) if !before.contains('/') && !before.is_empty() => before,
            _ => return "local".to_string(),
        },
    };
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if hostport.is_empty() {
        return "local".to_string();
    }
    // `[v6]:port` or `host:port`.
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, tail)) => (&hostport[..addr.len() + 2], tail.strip_prefix(':')),
            None => (hostport, None),
        },
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        },
    };
    let default = match scheme.as_deref() {
        Some("http") => Some("80"),
        Some("https") => Some("443"),
        Some("ssh" | "git+ssh" | "ssh+git") => Some("22"),
        Some("git") => Some("9418"),
        _ => None,
    };
    match port.filter(|p| !p.is_empty() && Some(*p) != default) {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// Whether two URLs have the same scheme, host and port (a port left out
/// is the scheme's default). A local path has no origin.
pub(crate) fn same_origin(a: &str, b: &str) -> bool {
    let scheme = |u: &str| u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match (scheme(a), scheme(b)) {
        (Some(x), Some(y)) if x == y => {
            let (ha, hb) = (host_of(a), host_of(b));
            ha != "local" && ha.eq_ignore_ascii_case(&hb)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{host_of, same_origin};

    #[test]
    fn an_origin_is_the_scheme_the_host_and_the_port_its_default_written_or_not() {
        let op = "https://api.example.test/repos/o/r";
        assert!(same_origin(op, "HTTPS://API.example.test:443/app/x"));
        assert!(same_origin(op, "https://u:p@api.example.test/x"));
        assert!(!same_origin(op, "http://api.example.test/x"));
        assert!(!same_origin(op, "https://api.example.test:8443/x"));
        assert!(!same_origin(op, "https://example.test/x"));
        assert!(!same_origin("/srv/r.git", "/srv/r.git"));
        assert!(!same_origin("file:///srv/r.git", "file:///srv/r.git"));
    }

    #[test]
    fn a_host_keeps_a_port_that_is_not_the_default_and_never_user_info_or_a_path() {
        let cases = [
            (
                "https://x-access-token:s3cret@example.com/o/r.git",
                "example.com",
            ),
            ("https://user@example.com:443/o/r", "example.com"),
            ("HTTPS://example.com:8443/o/r", "example.com:8443"),
            ("http://127.0.0.1:80", "127.0.0.1"),
            ("http://127.0.0.1:8080?q=1", "127.0.0.1:8080"),
            ("git://127.0.0.1:9418/r", "127.0.0.1"),
            ("git://127.0.0.1:39418/r", "127.0.0.1:39418"),
            ("ssh://git@example.com:2222/r", "example.com:2222"),
            ("ssh://git@example.com:22/r", "example.com"),
            ("http://[::1]:8080/r", "[::1]:8080"),
            ("http://u:p@[::1]/r", "[::1]"),
            ("git@example.com:o/r.git", "example.com"),
            ("/srv/git/r.git", "local"),
            ("./r.git", "local"),
            ("file:///srv/git/r.git", "local"),
        ];
        for (remote, host) in cases {
            assert_eq!(host_of(remote), host, "{remote}");
        }
    }
}
