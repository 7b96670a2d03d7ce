//! What one operation is ([`Operation`]: kind, effect, remote, id, bounds,
//! credentials, cancel flag) and the host that keys its retry budget
//! ([`host_of`]).

use std::sync::Arc;

use crate::bounds::Bounds;
use crate::class::Effect;
use crate::clock::CancelFlag;
use crate::credential::CredentialSource;

/// What one operation is, and its bounds.
#[derive(Clone)]
pub struct Operation {
    /// `ls-refs`, `fetch`, `push`, `http-get`, ...
    pub kind: String,
    /// Read or write.
    pub effect: Effect,
    /// The remote, without user info (shown in outcomes).
    pub remote: String,
    /// The refs the operation names, for the ledger's record of what ran
    /// (see [`ClaimRequest::refs`](crate::ClaimRequest::refs)); `None`
    /// when not given.
    pub refs: Option<Vec<String>>,
    /// The host whose retry budget the operation spends.
    pub host: String,
    /// The operation id; generated when `None`. One id names one logical
    /// operation, whatever the kind of call: a job's fetch and its push
    /// take two ids (the push under the fetch's id is `rejected`, its
    /// `previous.kind` saying `fetch`). Ids are global to the ledger, kept
    /// for its retention window. A read under a generated id is not
    /// written to a ledger (see [`OperationInfo::id`](crate::OperationInfo::id)).
    pub id: Option<String>,
    /// Deadline, attempt timeout, attempts, backoff.
    pub bounds: Bounds,
    /// Where credentials are bought, when the remote needs one.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// The caller's cancel flag.
    pub cancel: CancelFlag,
    /// Headers the caller gives every HTTP request of the operation
    /// (checked by [`CallOptions::header`](crate::CallOptions::header)):
    /// the layers read them from [`AttemptCtx::headers`](crate::AttemptCtx::headers)
    /// and [`ReconcileCtx::headers`](crate::ReconcileCtx::headers).
    pub headers: Vec<(String, String)>,
}

impl Operation {
    /// An operation of `kind` and `effect` against `remote` (no user info),
    /// with the default (`command`) bounds.
    pub fn new(kind: impl Into<String>, effect: Effect, remote: impl Into<String>) -> Self {
        let remote = remote.into();
        let host = host_of(&remote);
        Operation {
            kind: kind.into(),
            effect,
            remote,
            refs: None,
            host,
            id: None,
            bounds: Bounds::default(),
            credentials: None,
            cancel: CancelFlag::new(),
            headers: Vec::new(),
        }
    }

    /// Set the bounds.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Set the refs the operation names, as the ledger records them.
    pub fn refs<S: Into<String>>(mut self, refs: impl IntoIterator<Item = S>) -> Self {
        self.refs = Some(refs.into_iter().map(Into::into).collect());
        self
    }

    /// Set the operation id (one id, one logical operation: see the
    /// field).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Set the credential source.
    pub fn credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// Set the cancel flag.
    pub fn cancel(mut self, flag: CancelFlag) -> Self {
        self.cancel = flag;
        self
    }
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("kind", &self.kind)
            .field("effect", &self.effect)
            .field("remote", &self.remote)
            .field("refs", &self.refs)
            .field("id", &self.id)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

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

#[cfg(test)]
mod tests {
    use super::host_of;

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
