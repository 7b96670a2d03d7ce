//! Credentials bought from a GitHub App: a JWT signed with the app's private
//! key (RS256) buys an installation token, cached until shortly before it
//! expires.
//!
//! The JWT's `iat` is 60 s in the past (clock drift) and its `exp` 9 minutes
//! ahead (GitHub refuses more than 10). The installation token is opaque: its
//! length and format are never assumed; its lifetime comes from the answer's
//! `expires_at`, and a token whose answer names no expiry is used once.
//!
//! After a refusal the policy buys again and must get a token it has not
//! seen: [`GitHubAppSource::operation_source`] gives each operation a source
//! whose first purchase may come from the cache and every later one (the
//! policy buys again only after a refusal) is minted afresh.
//!
//! Bought for an operation ([`CredentialSource::credential_for`]), a mint's
//! `POST` carries the headers the operation's caller gave every request
//! (a `traceparent`, a service's request id) when the token endpoint is on
//! the operation's host — for a forge client built on the App's API base,
//! always; for a git push to `github.com` minting at `api.github.com`,
//! never.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sluice_policy::{CancelFlag, Credential, CredentialError, CredentialSource, Purchase};

use crate::error::ForgeError;

/// How far in the past the JWT's `iat` is put.
pub const JWT_BACKDATE: Duration = Duration::from_secs(60);
/// How far ahead the JWT's `exp` is put (GitHub allows at most 10 minutes).
pub const JWT_LIFETIME: Duration = Duration::from_secs(9 * 60);

/// The claims of the app's JWT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppClaims {
    /// Issued at: `now - 60 s`, epoch seconds.
    pub iat: u64,
    /// Expires: `now + 9 min`, epoch seconds.
    pub exp: u64,
    /// The app's id (or client id).
    pub iss: String,
}

impl AppClaims {
    /// The claims for `app_id` at `now`.
    pub fn at(app_id: &str, now: SystemTime) -> Self {
        let secs = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        AppClaims {
            iat: secs.saturating_sub(JWT_BACKDATE.as_secs()),
            exp: secs + JWT_LIFETIME.as_secs(),
            iss: app_id.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: String,
    #[serde(default)]
    expires_at: Option<String>,
}

struct Cached {
    credential: Credential,
    /// `expires_at` less the refresh margin (see [`refresh_time`]).
    refresh_at: SystemTime,
}

/// When a token minted at `minted` and expiring at `expires_at` is to be
/// replaced: `margin` before it expires, but never before half its life
/// has passed (a margin longer than a short-lived token's life would mint
/// before every request).
fn refresh_time(minted: SystemTime, expires_at: SystemTime, margin: Duration) -> SystemTime {
    let life = expires_at.duration_since(minted).unwrap_or(Duration::ZERO);
    expires_at - margin.min(life / 2)
}

/// A [`CredentialSource`] that buys GitHub App installation tokens.
///
/// `Send + Sync`; share it (in an `Arc`) so the cache is shared. Purchases
/// are serialised, so threads that find the cache empty at once mint one
/// token, not one each.
pub struct GitHubAppSource {
    api_base: reqwest::Url,
    app_id: String,
    installation_id: u64,
    key: EncodingKey,
    http: reqwest::blocking::Client,
    timeout: Duration,
    refresh_margin: Duration,
    cache: Mutex<Option<Cached>>,
    mints: AtomicU32,
}

impl std::fmt::Debug for GitHubAppSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = self
            .cache
            .lock()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.credential.fingerprint().to_string()));
        f.debug_struct("GitHubAppSource")
            .field("api_base", &self.api_base.as_str())
            .field("app_id", &self.app_id)
            .field("installation_id", &self.installation_id)
            .field("cached", &cached)
            .finish_non_exhaustive()
    }
}

impl GitHubAppSource {
    /// A source for `installation_id` of app `app_id`, signing with the
    /// app's RSA private key (`pem`, PKCS#1 or PKCS#8), against the API at
    /// `api_base` (`https://api.github.com`, or GitHub Enterprise's
    /// `https://HOST/api/v3`).
    ///
    /// # Default
    /// 10 s per token request; tokens refreshed 5 minutes before they expire.
    pub fn new(
        api_base: &str,
        app_id: impl Into<String>,
        installation_id: u64,
        pem: &SecretString,
    ) -> Result<Self, ForgeError> {
        let api_base = crate::base::parse_base(api_base)?;
        let key = EncodingKey::from_rsa_pem(pem.expose_secret().as_bytes())
            .map_err(|e| ForgeError::Key(e.to_string()))?;
        let http = Self::http_client(&sluice_https::HttpsConfig::new())?;
        Ok(GitHubAppSource {
            api_base,
            app_id: app_id.into(),
            installation_id,
            key,
            http,
            timeout: Duration::from_secs(10),
            refresh_margin: Duration::from_secs(300),
            cache: Mutex::new(None),
            mints: AtomicU32::new(0),
        })
    }

    /// The token requests' client, built on a thread of its own (never
    /// panics inside an async runtime).
    fn http_client(
        https: &sluice_https::HttpsConfig,
    ) -> Result<reqwest::blocking::Client, ForgeError> {
        crate::base::off_runtime(|| {
            https
                .client_builder()
                .map_err(|e| ForgeError::Http(e.to_string()))?
                .user_agent(crate::base::DEFAULT_USER_AGENT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| ForgeError::Http(sluice_policy::text::error_chain(&e)))
        })
    }

    /// Mint tokens with these https settings (trust roots, proxy) instead
    /// of the platform's roots and the environment's proxies.
    pub fn with_https(mut self, https: &sluice_https::HttpsConfig) -> Result<Self, ForgeError> {
        self.http = Self::http_client(https)?;
        Ok(self)
    }

    /// The timeout of one token request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Refresh a token this long before its `expires_at` (at most half its
    /// life: a token that lives 2 s is replaced after 1 s). The margin is
    /// checked before every request of an operation, not only when one
    /// starts (see [`Credential::with_refresh_at`]).
    pub fn with_refresh_margin(mut self, margin: Duration) -> Self {
        self.refresh_margin = margin;
        self
    }

    /// How many installation tokens this source has minted.
    pub fn mint_count(&self) -> u32 {
        self.mints.load(Ordering::SeqCst)
    }

    /// The app's JWT at `now` (a secret: it buys tokens).
    pub fn jwt(&self, now: SystemTime) -> Result<SecretString, CredentialError> {
        let claims = AppClaims::at(&self.app_id, now);
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map(SecretString::from)
            // The key cannot sign: nothing was sent, and trying again
            // cannot mend it (local-error).
            .map_err(|e| CredentialError::local(format!("could not sign the app's JWT: {e}")))
    }

    /// A token from the cache when it is good for longer than the refresh
    /// margin; else a new one.
    pub fn cached_or_new(&self) -> Result<Credential, CredentialError> {
        self.cached_or_new_within(self.timeout)
    }

    /// [`GitHubAppSource::cached_or_new`], a mint bounded by `limit` (and by
    /// the source's own request timeout).
    pub fn cached_or_new_within(&self, limit: Duration) -> Result<Credential, CredentialError> {
        self.cached_or_new_with(limit, None)
    }

    /// [`GitHubAppSource::cached_or_new_within`], a mint sending what
    /// `purchase` gives the token endpoint's URL (see [`Purchase::headers_for`]).
    fn cached_or_new_with(
        &self,
        limit: Duration,
        purchase: Option<&Purchase<'_>>,
    ) -> Result<Credential, CredentialError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.as_ref() {
            if SystemTime::now() < c.refresh_at {
                return Ok(c.credential.clone());
            }
        }
        self.mint_into(&mut cache, limit, purchase)
    }

    /// A token minted now, replacing the cached one.
    pub fn fresh(&self) -> Result<Credential, CredentialError> {
        self.fresh_within(self.timeout)
    }

    /// [`GitHubAppSource::fresh`], bounded by `limit` (and by the source's
    /// own request timeout).
    pub fn fresh_within(&self, limit: Duration) -> Result<Credential, CredentialError> {
        self.fresh_with(limit, None)
    }

    /// [`GitHubAppSource::fresh_within`], sending what `purchase` gives the
    /// token endpoint's URL.
    fn fresh_with(
        &self,
        limit: Duration,
        purchase: Option<&Purchase<'_>>,
    ) -> Result<Credential, CredentialError> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        self.mint_into(&mut cache, limit, purchase)
    }

    /// A source for one operation: its first purchase may come from the
    /// cache, every later one (after a refusal) is minted afresh.
    pub fn operation_source(self: &Arc<Self>) -> Arc<dyn CredentialSource> {
        Arc::new(OperationAppSource {
            app: Arc::clone(self),
            calls: AtomicU32::new(0),
        })
    }

    /// Mint a token into `cache`. The request carries the caller's headers
    /// `purchase` gives its URL (none off the operation's host), after the
    /// API's own.
    fn mint_into(
        &self,
        cache: &mut Option<Cached>,
        limit: Duration,
        purchase: Option<&Purchase<'_>>,
    ) -> Result<Credential, CredentialError> {
        if limit.is_zero() {
            return Err(CredentialError::new(
                "no time was left to request an installation token",
            ));
        }
        let minted = SystemTime::now();
        let jwt = self.jwt(minted)?;
        let mut url = self.api_base.clone();
        url.path_segments_mut()
            .map_err(|_| CredentialError::local("the API base cannot take a path"))?
            .pop_if_empty()
            .extend([
                "app",
                "installations",
                &self.installation_id.to_string(),
                "access_tokens",
            ]);
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", jwt.expose_secret()))
            .map_err(|_| CredentialError::local("the app's JWT is not a valid header value"))?;
        auth.set_sensitive(true);
        let extra = purchase.map_or(&[][..], |p| p.headers_for(url.as_str()));
        let mut req = self
            .http
            .post(url)
            .header(ACCEPT, "application/vnd.github+json")
            .header("x-github-api-version", crate::base::API_VERSION);
        // Checked where they were given (`sluice_policy::check_header`):
        // names the source sets itself are refused there.
        for (name, value) in extra {
            req = req.header(name.as_str(), value.as_str());
        }
        let resp = req
            .header(AUTHORIZATION, auth)
            .timeout(self.timeout.min(limit))
            .send()
            .map_err(|e| {
                CredentialError::new(format!(
                    "installation token request failed: {}",
                    sluice_policy::text::error_chain(&e)
                ))
            })?;
        let status = resp.status().as_u16();
        let request_id = request_id(resp.headers());
        let body = resp.text().map_err(|e| {
            CredentialError::new(format!(
                "installation token answer was cut: {}",
                sluice_policy::text::error_chain(&e)
            ))
        })?;
        if !(200..300).contains(&status) {
            let message = crate::classify::api_message(&body);
            let words = format!("installation token request answered HTTP {status}: {message}");
            if matches!(status, 401 | 403 | 404) {
                // A wrong key, app id or installation (or an app that lost
                // its access): answered, and trying again cannot mend it.
                return Err(CredentialError::answered(words)
                    .with_request_id(request_id.clone())
                    .with_detail(crate::error::CredentialError::TokenEndpoint {
                        status,
                        message,
                        request_id,
                    }));
            }
            return Err(CredentialError::new(words));
        }
        let answer: TokenAnswer = serde_json::from_str(&body).map_err(|e| {
            CredentialError::new(format!(
                "installation token answer is not the expected JSON: {e}"
            ))
        })?;
        drop(body);
        if answer.token.is_empty() {
            return Err(CredentialError::new(
                "installation token answer holds an empty token",
            ));
        }
        let expires_at = answer
            .expires_at
            .as_deref()
            .and_then(|s| humantime::parse_rfc3339_weak(s).ok());
        let refresh_at = expires_at.map(|e| refresh_time(minted, e, self.refresh_margin));
        let mut credential = Credential::new(SecretString::from(answer.token));
        if let Some(at) = refresh_at {
            // Checked before every request: replaced before it expires.
            credential = credential.with_refresh_at(at);
        }
        self.mints.fetch_add(1, Ordering::SeqCst);
        tracing::debug!(
            installation = self.installation_id,
            credential = %credential.fingerprint(),
            expires_at = ?answer.expires_at,
            "bought an installation token"
        );
        *cache = refresh_at.map(|refresh_at| Cached {
            credential: credential.clone(),
            refresh_at,
        });
        Ok(credential)
    }
}

impl CredentialSource for GitHubAppSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.cached_or_new()
    }

    fn credential_within(
        &self,
        limit: Duration,
        _cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        self.cached_or_new_within(limit)
    }

    /// As [`CredentialSource::credential_within`]; a mint carries the
    /// operation's caller's headers when the token endpoint is on the
    /// operation's host ([`Purchase::headers_for`]).
    fn credential_for(&self, purchase: &Purchase<'_>) -> Result<Credential, CredentialError> {
        self.cached_or_new_with(purchase.limit(), Some(purchase))
    }

    /// A refused token is dropped from the cache: the next purchase mints
    /// afresh (what lets the source itself, not only
    /// [`GitHubAppSource::operation_source`], be a client's default source).
    fn refused(&self, fingerprint: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache
            .as_ref()
            .is_some_and(|c| c.credential.fingerprint() == fingerprint)
        {
            *cache = None;
        }
    }
}

/// The answer's request id: `x-github-request-id`, else `x-request-id`.
fn request_id(headers: &reqwest::header::HeaderMap) -> Option<String> {
    sluice_https::request_id(headers)
}

struct OperationAppSource {
    app: Arc<GitHubAppSource>,
    calls: AtomicU32,
}

impl CredentialSource for OperationAppSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.credential_within(self.app.timeout, &CancelFlag::new())
    }

    /// Bounded by `limit`: the mint's request timeout is what remains of
    /// the operation (a blocking request is not cut by the cancel flag; the
    /// limit bounds it).
    fn credential_within(
        &self,
        limit: Duration,
        _cancel: &CancelFlag,
    ) -> Result<Credential, CredentialError> {
        self.buy(limit, None)
    }

    /// As `credential_within`, a mint carrying the operation's caller's
    /// headers when the token endpoint is on the operation's host.
    fn credential_for(&self, purchase: &Purchase<'_>) -> Result<Credential, CredentialError> {
        self.buy(purchase.limit(), Some(purchase))
    }
}

impl OperationAppSource {
    /// The first purchase from the cache (or minted), every later one
    /// minted afresh.
    fn buy(
        &self,
        limit: Duration,
        purchase: Option<&Purchase<'_>>,
    ) -> Result<Credential, CredentialError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.app.cached_or_new_with(limit, purchase)
        } else {
            self.app.fresh_with(limit, purchase)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jwt_is_issued_a_minute_ago_and_expires_within_ten_minutes() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let c = AppClaims::at("12345", now);
        assert_eq!(c.iat, 1_700_000_000 - 60);
        assert!(c.exp > 1_700_000_000);
        assert!(c.exp <= 1_700_000_000 + 600);
        assert_eq!(c.iss, "12345");
    }

    #[test]
    fn a_token_is_replaced_a_margin_before_it_expires_but_not_before_half_its_life() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let hour = Duration::from_secs(3600);
        let five = Duration::from_secs(300);
        assert_eq!(refresh_time(t0, t0 + hour, five), t0 + hour - five);
        let two = Duration::from_secs(2);
        assert_eq!(
            refresh_time(t0, t0 + two, five),
            t0 + Duration::from_secs(1)
        );
        // An answer already expired: replaced at once.
        assert_eq!(refresh_time(t0 + hour, t0, five), t0);
    }
}
