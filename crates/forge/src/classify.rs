//! The forge's classification: one pure function from what an HTTP
//! exchange showed — (effect, phase reached, status, headers, the API's
//! message) — to the policy's classes. A status is classed by the
//! workspace's one table, [`sluice_https::status_class`] (git's smart HTTP
//! uses it too, so a status means the same in both); this file adds what
//! only an exchange knows (no status at all, a cut body, a redirect's
//! target) and GitHub's documented waits.
//!
//! | exchange | read (GET) | write (POST/PATCH/PUT/DELETE) |
//! |---|---|---|
//! | TLS refused while connecting (a certificate error or an alert: [`sluice_https::TlsRefusal`]) | answered | answered |
//! | no status, phase `connect` (refused, DNS, a TLS handshake cut, reset or timeout, connect timeout) | unjudged | unjudged |
//! | no status, phase `request-sent` (cut or timeout after sending) | unknown | unknown |
//! | 2xx with its body read | success | success |
//! | 2xx whose body was cut (phase `response-headers`) | unknown | unknown |
//! | 3xx (a redirect not followed) | answered | answered |
//! | 401 | answered, [`AuthSignal`]`::Unauthorized` | same |
//! | 403 rate limit (`x-ratelimit-remaining: 0`, a secondary-rate-limit message, or `Retry-After`) | unjudged + hint | unjudged + hint |
//! | other 403, 404 | answered, [`AuthSignal`]`::ForbiddenOrNotFound` | same |
//! | 408 (the server gave up reading the request) | unjudged | unjudged |
//! | 429 | unjudged + hint | unjudged + hint |
//! | other 4xx | answered, with the API's message | same |
//! | 503 | unjudged (+ `Retry-After`) | unjudged (+ `Retry-After`) |
//! | 500, 502, 504 | unjudged (+ `Retry-After`) | unknown: settled by reading |
//! | other 5xx | unjudged (+ `Retry-After`) | unjudged (+ `Retry-After`) |
//!
//! [`AuthSignal`]: sluice_policy::AuthSignal
//!
//! The credential class is the policy's decision: the table only attaches
//! the [`AuthSignal`]. A 401/403/404 the policy does not count as a refusal
//! stays answered.
//!
//! The retry hint follows GitHub's documented order: `Retry-After` when
//! present; else, with `x-ratelimit-remaining: 0`, the wait until
//! `x-ratelimit-reset`; else, for a rate limit (429 or a secondary limit)
//! without either header, [`SECONDARY_LIMIT_WAIT`].

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use sluice_https::RateLimitFacts;

use crate::error::{CredentialError, ForgeFailure};
use crate::phase::ForgePhase;
use sluice_policy::{parse_rate_limit_reset, parse_retry_after, AttemptError, Class, Effect};

/// The least wait GitHub asks for after a secondary rate limit that names
/// no wait of its own: one minute.
pub const SECONDARY_LIMIT_WAIT: Duration = Duration::from_secs(60);

/// What one HTTP exchange showed: the input of [`classify`].
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    /// GET is a read; POST/PATCH/PUT/DELETE are writes.
    pub effect: Effect,
    /// The last phase completed.
    pub phase: ForgePhase,
    /// The status, when a status line was read.
    pub status: Option<u16>,
    /// The response headers (empty when none were read).
    pub headers: &'a HeaderMap,
    /// The API's message for an answer (see [`api_message`]), or what
    /// happened on the wire when there is no status.
    pub text: &'a str,
    /// GitHub's `documentation_url` of an answer (see
    /// [`documentation_url`]), kept in the [`ForgeFailure`].
    pub documentation_url: Option<&'a str>,
    /// A TLS refusal found in the failure's source chain
    /// ([`sluice_https::tls_refusal`]), when there is no status.
    pub tls: Option<&'a sluice_https::TlsRefusal>,
}

/// Class one exchange: `Ok(())` is a success; otherwise the
/// [`AttemptError`] the policy decides on (class, phase, cause, retry hint,
/// credential signal). `now` is the wall clock, for `x-ratelimit-reset` and
/// HTTP-date `Retry-After` values. Pure: no I/O, no clock of its own.
pub fn classify(x: &Exchange<'_>, now: SystemTime) -> Result<(), AttemptError> {
    let Some(status) = x.status else {
        let f = match (x.tls, x.phase) {
            // A certificate error or an alert while connecting: the
            // server's answer, the same whatever we try.
            (Some(refusal), ForgePhase::Connect) => ForgeFailure::Tls {
                refusal: refusal.clone(),
                detail: x.text.to_string(),
            },
            // No answer at all.
            _ => ForgeFailure::NoAnswer {
                phase: x.phase,
                detail: x.text.to_string(),
            },
        };
        return Err(failed(f, x.effect, x.headers, now));
    };
    let f = if (200..300).contains(&status) {
        if x.phase >= ForgePhase::Body {
            return Ok(());
        }
        ForgeFailure::Cut {
            status,
            detail: x.text.to_string(),
            request_id: sluice_https::request_id(x.headers),
        }
    } else if (300..400).contains(&status) {
        let to = x
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("nowhere");
        ForgeFailure::Status {
            status,
            message: format!("redirected to {to} (not followed)"),
            documentation_url: None,
            phase: x.phase,
            request_id: sluice_https::request_id(x.headers),
        }
    } else {
        ForgeFailure::Status {
            status,
            message: x.text.to_string(),
            documentation_url: x.documentation_url.map(str::to_string),
            phase: x.phase,
            request_id: sluice_https::request_id(x.headers),
        }
    };
    Err(failed(f, x.effect, x.headers, now))
}

/// Class one failure (the table above): `effect` of the request, the
/// answer's `headers` (empty when none were read), `now` the wall clock
/// for GitHub's waits. The [`AttemptError`]'s words are the failure's, and
/// the failure rides along as its source
/// (`error.source_as::<ForgeFailure>()`). A status is classed by the
/// workspace's one table ([`sluice_https::status_class`]); nothing else
/// here decides a class.
pub fn failed(
    f: ForgeFailure,
    effect: Effect,
    headers: &HeaderMap,
    now: SystemTime,
) -> AttemptError {
    let (class, auth, hint) = match &f {
        ForgeFailure::Status {
            status, message, ..
        } => {
            let limits = rate_limit_facts(headers, message);
            // A write's status came after its body was sent.
            let sc = sluice_https::status_class(*status, effect == Effect::Write, limits)
                .unwrap_or(sluice_https::StatusClass {
                    class: Class::Answered,
                    auth: None,
                });
            let hint = if sc.class == Class::Unjudged {
                retry_hint(*status, headers, message, now)
            } else {
                None
            };
            (sc.class, sc.auth, hint)
        }
        // The forge said yes, but its value was not read: a write is
        // known to have landed — settle by reading.
        ForgeFailure::Cut { .. } => (Class::Unknown, None, None),
        // A read's answer that cannot be parsed is the answer; a write's
        // landed, but its value was not read: settle by reading.
        ForgeFailure::Undecodable { .. } => match effect {
            Effect::Read => (Class::Answered, None, None),
            Effect::Write => (Class::Unknown, None, None),
        },
        ForgeFailure::NoAnswer {
            phase: ForgePhase::Connect,
            ..
        }
        | ForgeFailure::NotSent { .. } => (Class::Unjudged, None, None),
        ForgeFailure::NoAnswer { .. } => (Class::Unknown, None, None),
        ForgeFailure::Tls { .. }
        | ForgeFailure::ProxyRefused { .. }
        | ForgeFailure::Redirect { .. }
        | ForgeFailure::ForeignLink { .. } => (Class::Answered, None, None),
        ForgeFailure::Local { .. } => (Class::Local, None, None),
        // The policy's class for a purchase that failed: on this side and
        // lasting, or a failure a later purchase may mend.
        ForgeFailure::Credential {
            error: CredentialError::Source(e),
        } if e.local => (Class::Local, None, None),
        ForgeFailure::Credential {
            error: CredentialError::Source(e),
        } if e.answered => (Class::Answered, None, None),
        ForgeFailure::Credential {
            error: CredentialError::TokenEndpoint { .. },
        } => (Class::Answered, None, None),
        ForgeFailure::Credential { .. } => (Class::Unjudged, None, None),
    };
    let mut e = AttemptError::new(class, f.phase().as_str(), f.to_string())
        .with_retry_after(hint)
        .with_source(f);
    if let Some(auth) = auth {
        e = e.with_auth(auth);
    }
    e
}

/// The rate-limit facts of a response: its headers, and GitHub's secondary
/// limit, which only its message names.
fn rate_limit_facts(headers: &HeaderMap, message: &str) -> RateLimitFacts {
    RateLimitFacts {
        secondary: is_secondary_rate_limit(message),
        ..RateLimitFacts::from_headers(headers)
    }
}

/// Whether a message names GitHub's secondary rate limit (or its older
/// "abuse detection" wording).
///
/// This matches words, which a class never otherwise comes from: it is one
/// of the workspace's two documented text-matching exceptions (the other is
/// a proxy's 407 to CONNECT, `sluice_https::proxy_auth_required`), because
/// GitHub gives the secondary limit no header or status of its own — its
/// documentation names it only by this message.
pub fn is_secondary_rate_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("secondary rate limit") || m.contains("abuse detection")
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// The wait a response asks for, in GitHub's documented order:
/// `Retry-After`; else with `x-ratelimit-remaining: 0` the time until
/// `x-ratelimit-reset`; else, for a rate limit (429, or a 403 naming a
/// secondary limit) without either, [`SECONDARY_LIMIT_WAIT`]. `None` when
/// the response names no wait and is no rate limit.
pub fn retry_hint(
    status: u16,
    headers: &HeaderMap,
    message: &str,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(d) = header(headers, "retry-after").and_then(|v| parse_retry_after(v, now)) {
        return Some(d);
    }
    let limits = rate_limit_facts(headers, message);
    if limits.primary_exhausted {
        if let Some(d) =
            header(headers, "x-ratelimit-reset").and_then(|v| parse_rate_limit_reset(v, now))
        {
            return Some(d);
        }
    }
    let rate_limited = status == 429 || (status == 403 && limits.limited());
    rate_limited.then_some(SECONDARY_LIMIT_WAIT)
}

/// The API's message from an error body: GitHub's JSON `message`, with the
/// `message` (or `code`) of each entry of `errors` appended; the body's
/// first line (at most 200 characters) when it is not such JSON.
pub fn api_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        if let Some(m) = v.get("message").and_then(|m| m.as_str()) {
            let mut out = m.to_string();
            if let Some(errs) = v.get("errors").and_then(|e| e.as_array()) {
                let details: Vec<String> = errs
                    .iter()
                    .filter_map(|e| {
                        e.get("message")
                            .or_else(|| e.get("code"))
                            .and_then(|m| m.as_str())
                            .map(str::to_string)
                            .or_else(|| e.as_str().map(str::to_string))
                    })
                    .collect();
                if !details.is_empty() {
                    out.push_str(" (");
                    out.push_str(&details.join("; "));
                    out.push(')');
                }
            }
            return out;
        }
    }
    body.lines()
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .take(200)
        .collect()
}

/// GitHub's `documentation_url` from an error body, when it names one.
pub fn documentation_url(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("documentation_url")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use sluice_policy::AuthSignal;
    use std::time::UNIX_EPOCH;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn hdrs(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("header value"));
        }
        h
    }

    fn run(
        effect: Effect,
        phase: ForgePhase,
        status: Option<u16>,
        h: &HeaderMap,
        text: &str,
    ) -> Result<(), AttemptError> {
        classify(
            &Exchange {
                effect,
                phase,
                status,
                headers: h,
                text,
                documentation_url: None,
                tls: None,
            },
            now(),
        )
    }

    fn class_of(r: Result<(), AttemptError>) -> Option<Class> {
        r.err().map(|e| e.class)
    }

    const BOTH: [Effect; 2] = [Effect::Read, Effect::Write];

    #[test]
    fn a_failure_before_any_answer_is_unjudged_at_connect_and_unknown_after_sending() {
        let h = HeaderMap::new();
        for e in BOTH {
            let r = run(e, ForgePhase::Connect, None, &h, "connection refused").unwrap_err();
            assert_eq!((r.class, r.phase.as_ref()), (Class::Unjudged, "connect"));
            let r = run(e, ForgePhase::RequestSent, None, &h, "operation timed out").unwrap_err();
            assert_eq!(
                (r.class, r.phase.as_ref()),
                (Class::Unknown, "request-sent")
            );
        }
    }

    #[test]
    fn a_tls_refusal_while_connecting_is_answered_and_a_handshake_cut_is_not() {
        let h = HeaderMap::new();
        let refusal = sluice_https::TlsRefusal::Expired;
        for e in BOTH {
            let x = Exchange {
                effect: e,
                phase: ForgePhase::Connect,
                status: None,
                headers: &h,
                text: "invalid peer certificate: Expired",
                documentation_url: None,
                tls: Some(&refusal),
            };
            let r = classify(&x, now()).unwrap_err();
            assert_eq!((r.class, r.phase.as_ref()), (Class::Answered, "connect"));
            assert!(r.cause.contains("expired"), "{}", r.cause);
            let r = run(e, ForgePhase::Connect, None, &h, "tls handshake eof").unwrap_err();
            assert_eq!(r.class, Class::Unjudged);
        }
    }

    #[test]
    fn a_2xx_is_success_only_with_its_body_read() {
        let h = HeaderMap::new();
        for e in BOTH {
            assert!(run(e, ForgePhase::Body, Some(200), &h, "").is_ok());
            assert!(run(e, ForgePhase::Body, Some(201), &h, "").is_ok());
            assert_eq!(
                class_of(run(e, ForgePhase::ResponseHeaders, Some(201), &h, "cut")),
                Some(Class::Unknown)
            );
        }
    }

    #[test]
    fn credential_statuses_are_answered_with_their_signal() {
        let h = HeaderMap::new();
        for e in BOTH {
            let r = run(e, ForgePhase::Body, Some(401), &h, "Bad credentials").unwrap_err();
            assert_eq!(r.class, Class::Answered);
            assert_eq!(r.auth, Some(AuthSignal::Unauthorized));
            assert_eq!(r.cause, "HTTP 401: Bad credentials");
            for s in [403, 404] {
                let r = run(e, ForgePhase::Body, Some(s), &h, "Not Found").unwrap_err();
                assert_eq!(r.class, Class::Answered);
                assert_eq!(r.auth, Some(AuthSignal::ForbiddenOrNotFound));
            }
        }
    }

    #[test]
    fn rate_limits_are_unjudged_with_githubs_documented_waits() {
        for e in BOTH {
            // Retry-After first.
            let h = hdrs(&[
                ("retry-after", "2"),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000030"),
            ]);
            let r = run(e, ForgePhase::Body, Some(429), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(2)))
            );
            // Primary limit: the reset time.
            let h = hdrs(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000030"),
            ]);
            let r = run(
                e,
                ForgePhase::Body,
                Some(403),
                &h,
                "API rate limit exceeded",
            )
            .unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(30)))
            );
            assert_eq!(r.auth, None);
            // Secondary limit without a header: at least a minute.
            let h = HeaderMap::new();
            let msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.";
            let r = run(e, ForgePhase::Body, Some(403), &h, msg).unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(SECONDARY_LIMIT_WAIT))
            );
            // 429 without any header: a minute as well.
            let r = run(e, ForgePhase::Body, Some(429), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(SECONDARY_LIMIT_WAIT))
            );
            // A 403 with remaining quota and no rate-limit words is no limit.
            let h = hdrs(&[("x-ratelimit-remaining", "4999")]);
            let r = run(
                e,
                ForgePhase::Body,
                Some(403),
                &h,
                "Resource not accessible by integration",
            )
            .unwrap_err();
            assert_eq!((r.class, r.retry_after), (Class::Answered, None));
        }
    }

    #[test]
    fn githubs_primary_limit_with_429_and_its_secondary_limit_with_retry_after_wait_as_documented()
    {
        for e in BOTH {
            // The primary limit answered 429: wait until the reset.
            let h = hdrs(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000045"),
            ]);
            let r = run(
                e,
                ForgePhase::Body,
                Some(429),
                &h,
                "API rate limit exceeded",
            )
            .unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(45)))
            );
            // The secondary limit with Retry-After: that wait, not a minute.
            let h = hdrs(&[("retry-after", "7")]);
            let msg = "You have exceeded a secondary rate limit and have been temporarily blocked.";
            let r = run(e, ForgePhase::Body, Some(403), &h, msg).unwrap_err();
            assert_eq!(
                (r.class, r.retry_after, r.auth),
                (Class::Unjudged, Some(Duration::from_secs(7)), None)
            );
            // A reset already past: no wait beyond what backoff gives.
            let h = hdrs(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1699999990"),
            ]);
            let r = run(
                e,
                ForgePhase::Body,
                Some(403),
                &h,
                "API rate limit exceeded",
            )
            .unwrap_err();
            assert_eq!(r.class, Class::Unjudged);
            assert!(r.retry_after.unwrap_or_default() <= Duration::from_secs(60));
        }
    }

    #[test]
    fn a_503_is_unjudged_for_both_effects_and_keeps_its_retry_after() {
        let h = hdrs(&[("retry-after", "1")]);
        for e in BOTH {
            let r = run(e, ForgePhase::Body, Some(503), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(1)))
            );
        }
    }

    #[test]
    fn other_5xx_are_unjudged_for_reads_and_unknown_for_writes() {
        let h = HeaderMap::new();
        for s in [500, 502, 504] {
            assert_eq!(
                class_of(run(Effect::Read, ForgePhase::Body, Some(s), &h, "")),
                Some(Class::Unjudged)
            );
            assert_eq!(
                class_of(run(Effect::Write, ForgePhase::Body, Some(s), &h, "")),
                Some(Class::Unknown)
            );
            // Even when the error body was cut, the status decides.
            assert_eq!(
                class_of(run(
                    Effect::Write,
                    ForgePhase::ResponseHeaders,
                    Some(s),
                    &h,
                    ""
                )),
                Some(Class::Unknown)
            );
        }
    }

    #[test]
    fn a_5xx_that_says_nothing_of_the_write_is_unjudged_for_both_effects() {
        let h = hdrs(&[("retry-after", "4")]);
        for e in BOTH {
            let r = run(e, ForgePhase::Body, Some(501), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(4)))
            );
        }
    }

    #[test]
    fn other_4xx_and_redirects_are_answered_in_the_apis_words() {
        let h = hdrs(&[("location", "https://elsewhere.invalid/x")]);
        for e in BOTH {
            let r = run(
                e,
                ForgePhase::Body,
                Some(422),
                &h,
                "Validation Failed (A pull request already exists)",
            )
            .unwrap_err();
            assert_eq!(r.class, Class::Answered);
            assert_eq!(
                r.cause,
                "HTTP 422: Validation Failed (A pull request already exists)"
            );
            assert_eq!(r.auth, None);
            let r = run(e, ForgePhase::Body, Some(301), &h, "").unwrap_err();
            assert_eq!(r.class, Class::Answered);
            assert!(r.cause.contains("elsewhere.invalid"));
            assert_eq!(
                class_of(run(e, ForgePhase::Body, Some(408), &HeaderMap::new(), "")),
                Some(Class::Unjudged)
            );
        }
    }

    #[test]
    fn the_failure_rides_along_typed_with_githubs_words_as_data() {
        let h = HeaderMap::new();
        let x = Exchange {
            effect: Effect::Write,
            phase: ForgePhase::Body,
            status: Some(405),
            headers: &h,
            text: "Pull Request is not mergeable",
            documentation_url: Some(
                "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request",
            ),
            tls: None,
        };
        let e = classify(&x, now()).unwrap_err();
        assert_eq!(e.class, Class::Answered);
        assert_eq!(e.cause, "HTTP 405: Pull Request is not mergeable");
        let f = e.source_as::<ForgeFailure>().expect("typed source");
        assert!(
            matches!(
                f,
                ForgeFailure::Status {
                    status: 405,
                    message,
                    documentation_url: Some(docs),
                    phase: ForgePhase::Body,
                    request_id: None,
                } if message == "Pull Request is not mergeable"
                    && docs == "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"
            ),
            "{f:?}"
        );
        assert_eq!(f.status(), Some(405));
        assert_eq!(f.message(), Some("Pull Request is not mergeable"));
        // Failures without a status are typed too.
        let e = run(
            Effect::Read,
            ForgePhase::Connect,
            None,
            &h,
            "connection refused",
        )
        .unwrap_err();
        assert!(
            matches!(
                e.source_as::<ForgeFailure>(),
                Some(ForgeFailure::NoAnswer {
                    phase: ForgePhase::Connect,
                    detail,
                }) if detail == "connection refused"
            ),
            "{e:?}"
        );
        let e = failed(
            ForgeFailure::Undecodable {
                status: 201,
                detail: "expected value".into(),
                request_id: None,
            },
            Effect::Write,
            &h,
            now(),
        );
        assert_eq!((e.class, e.phase.as_ref()), (Class::Unknown, "body"));
    }

    #[test]
    fn githubs_documentation_url_is_read_from_its_error_json() {
        assert_eq!(
            documentation_url(r#"{"message":"x","documentation_url":"https://docs.github.com/x"}"#),
            Some("https://docs.github.com/x".to_string())
        );
        assert_eq!(documentation_url("<html>"), None);
    }

    #[test]
    fn the_apis_message_is_read_from_githubs_error_json() {
        assert_eq!(
            api_message(
                r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for o:b."}],"documentation_url":"x"}"#
            ),
            "Validation Failed (A pull request already exists for o:b.)"
        );
        assert_eq!(api_message(r#"{"message":"Not Found"}"#), "Not Found");
        assert_eq!(
            api_message("<html>bad gateway</html>\nmore"),
            "<html>bad gateway</html>"
        );
        assert_eq!(api_message(""), "");
    }
}
