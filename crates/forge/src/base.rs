//! What the client and the GitHub App source both need, below both: the
//! user agent, the API version, and the parsing of a base URL (user info
//! split off as a secret, never kept in the URL).

use reqwest::Url;
use secrecy::SecretString;
use sluice_policy::text::redact;

use crate::error::{ForgeError, ForgeInputError};

/// The user agent sent unless the builder sets another.
pub const DEFAULT_USER_AGENT: &str = concat!("sluice-remote/", env!("CARGO_PKG_VERSION"));
/// The REST API version asked for (`X-GitHub-Api-Version`).
pub const API_VERSION: &str = "2022-11-28";

/// Build a blocking HTTP client on a thread of its own, never on the
/// caller's: reqwest's blocking client refuses to start on a thread that
/// runs an async runtime (`#[tokio::main]`), and a client built in
/// `build()` is what keeps the builder's checks (trust roots, proxy) where
/// the builder is. The client itself runs on a thread of its own anyway.
pub(crate) fn off_runtime(
    build: impl FnOnce() -> Result<reqwest::blocking::Client, ForgeError> + Send,
) -> Result<reqwest::blocking::Client, ForgeError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sluice-forge-build".into())
            .spawn_scoped(s, build)
            .map_err(|e| ForgeError::Http(format!("could not start a thread to build it: {e}")))?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Parse a base URL: absolute http(s), no user info, no query.
pub(crate) fn parse_base(s: &str) -> Result<Url, ForgeError> {
    let url = Url::parse(s).map_err(|e| ForgeError::InvalidUrl(format!("{:?}: {e}", redact(s))))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ForgeError::InvalidUrl(format!(
            "{:?}: not an http(s) URL",
            redact(s)
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ForgeError::InvalidUrl(format!(
            "{:?}: user info is not allowed here",
            redact(s)
        )));
    }
    Ok(url)
}

/// Split user info off an absolute URL: the URL without it, and the secret
/// it held (the password, or the user name when there is no password).
pub fn split_user_info(s: &str) -> Result<(Url, Option<SecretString>), ForgeError> {
    let mut url =
        Url::parse(s).map_err(|e| ForgeError::InvalidUrl(format!("{:?}: {e}", redact(s))))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ForgeError::InvalidUrl(format!(
            "{:?}: not an http(s) URL",
            redact(s)
        )));
    }
    let secret = match (url.username(), url.password()) {
        ("", None) => None,
        (_, Some(p)) if !p.is_empty() => Some(sluice_policy::percent_decode(p)),
        (u, _) if !u.is_empty() => Some(sluice_policy::percent_decode(u)),
        _ => None,
    };
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Ok((url, secret.map(SecretString::from)))
}

/// A path under `base`, or an absolute URL with its user info taken out
/// (the secret it held returned beside it).
pub(crate) fn resolve(
    base: &Url,
    path_or_url: &str,
) -> Result<(Url, Option<SecretString>), ForgeInputError> {
    if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
        let (url, secret) = split_user_info(path_or_url).map_err(|e| match e {
            ForgeError::InvalidUrl(why) => ForgeInputError::Url(why),
            other => ForgeInputError::Url(other.to_string()),
        })?;
        return Ok((url, secret));
    }
    let joined = format!(
        "{}/{}",
        base.as_str().trim_end_matches('/'),
        path_or_url.trim_start_matches('/')
    );
    let url =
        Url::parse(&joined).map_err(|e| ForgeInputError::Url(format!("{path_or_url:?}: {e}")))?;
    Ok((url, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn user_info_is_split_off_and_gone_from_every_message() {
        let (u, s) =
            split_user_info("https://x-access-token:s3cr%40t@example.invalid/a?b=c").expect("url");
        assert_eq!(u.as_str(), "https://example.invalid/a?b=c");
        assert_eq!(s.expect("secret").expose_secret(), "s3cr@t");
        let (u, s) = split_user_info("https://tok3n@example.invalid/").expect("url");
        assert_eq!(u.as_str(), "https://example.invalid/");
        assert_eq!(s.expect("secret").expose_secret(), "tok3n");
        let (_, s) = split_user_info("http://example.invalid/").expect("url");
        assert!(s.is_none());
        let err = split_user_info("ftp://u:hunter2@example.invalid/").expect_err("not http");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = parse_base("https://u:hunter2@example.invalid/").expect_err("user info");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("example.invalid"), "{err}");
    }
}
