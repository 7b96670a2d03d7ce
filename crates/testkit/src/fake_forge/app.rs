//! A GitHub App's installation tokens: a JWT-shaped bearer is recorded and
//! a token minted (scripted ones first) with an `expires_at`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::{fingerprint, json_reply, message, Reply, Request, State};

/// `POST /app/installations/{id}/access_tokens`.
pub(super) fn access_token(st: &mut State, req: &Request) -> Reply {
    let jwt = req.bearer().unwrap_or("");
    if jwt.split('.').count() != 3 || jwt.split('.').any(str::is_empty) {
        return message(401, "A JSON web token could not be decoded");
    }
    st.app_jwts.push(jwt.to_string());
    let n = st.minted.len() + 1;
    let token = st.app_tokens.pop_front().unwrap_or_else(|| {
        let salt = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "ghs_fake{n:04}{}",
            &fingerprint(&format!("{salt}/{n}"))[..8]
        )
    });
    st.minted.push(token.clone());
    let lifetime = st.app_token_lifetime.unwrap_or(Duration::from_secs(3600));
    let expires = SystemTime::now() + lifetime;
    st.minted_expiry.insert(token.clone(), expires);
    json_reply(
        201,
        json!({
            "token": token,
            "expires_at": humantime::format_rfc3339_seconds(expires).to_string(),
            "permissions": { "pull_requests": "write", "checks": "write" },
            "repository_selection": "all",
        }),
    )
}

/// 401 for a minted installation token past its expiry, when the fake was
/// told to refuse them ([`super::FakeForge::refuse_expired_app_tokens`]).
pub(super) fn expired(st: &State, req: &Request) -> Option<Reply> {
    if !st.refuse_expired {
        return None;
    }
    let expires = st.minted_expiry.get(req.bearer()?)?;
    (SystemTime::now() >= *expires).then(|| message(401, "Bad credentials"))
}
