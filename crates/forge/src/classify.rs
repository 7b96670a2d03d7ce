//! The forge's classification table: one pure function from what an HTTP
//! exchange showed — (effect, phase reached, status, headers, the API's
//! message) — to the policy's classes.
//!
//! | exchange | read (GET) | write (POST/PATCH/PUT/DELETE) |
//! |---|---|---|
//! | TLS refused while connecting (a certificate error or an alert: [`sluice_https::TlsRefusal`]) | answered | answered |
//! | no status, phase `connect` (refused, DNS, a TLS handshake cut, reset or timeout, connect timeout) | unjudged | unjudged |
//! | no status, phase `request-sent` (cut or timeout after sending) | unknown | unknown |
//! | 2xx with its body read | success | success |
//! | 2xx whose body was cut (phase `response-headers`) | unknown | unknown |
//! | 3xx (a redirect not followed) | answered | answered |
//! | 401 | answered, [`AuthSignal::Unauthorized`] | same |
//! | 403 rate limit (`x-ratelimit-remaining: 0`, a secondary-rate-limit message, or `Retry-After`) | unjudged + hint | unjudged + hint |
//! | other 403, 404 | answered, [`AuthSignal::ForbiddenOrNotFound`] | same |
//! | 408 (the server gave up reading the request) | unjudged | unjudged |
//! | 429 | unjudged + hint | unjudged + hint |
//! | other 4xx | answered, with the API's message | same |
//! | 503 | unjudged (+ `Retry-After`) | unjudged (+ `Retry-After`) |
//! | other 5xx | unjudged (+ `Retry-After`) | unknown: settled by reading |
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
use sluice_policy::{parse_rate_limit_reset, parse_retry_after, AttemptError, AuthSignal, Effect};

/// The least wait GitHub asks for after a secondary rate limit that names
/// no wait of its own: one minute.
pub const SECONDARY_LIMIT_WAIT: Duration = Duration::from_secs(60);

/// The forge's protocol phases, in order: `connect` → `request-sent` →
/// `response-headers` → `body`. An attempt's phase is the last one it
/// completed; `connect` is the starting state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Nothing completed yet (a refused connection reports this).
    Connect,
    /// A connection was made and the request handed to it: from here the
    /// request may be complete on the server.
    RequestSent,
    /// The status line and headers were read.
    ResponseHeaders,
    /// The whole body was read.
    Body,
}

impl Phase {
    /// The kebab-case name used in outcomes.
    pub const fn as_str(self) -> &'static str {
        match self {
            Phase::Connect => "connect",
            Phase::RequestSent => "request-sent",
            Phase::ResponseHeaders => "response-headers",
            Phase::Body => "body",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one HTTP exchange showed: the input of [`classify`].
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    /// GET is a read; POST/PATCH/PUT/DELETE are writes.
    pub effect: Effect,
    /// The last phase completed.
    pub phase: Phase,
    /// The status, when a status line was read.
    pub status: Option<u16>,
    /// The response headers (empty when none were read).
    pub headers: &'a HeaderMap,
    /// The API's message for an answer (see [`api_message`]), or what
    /// happened on the wire when there is no status.
    pub text: &'a str,
    /// A TLS refusal found in the failure's source chain
    /// ([`sluice_https::tls_refusal`]), when there is no status.
    pub tls: Option<&'a sluice_https::TlsRefusal>,
}

/// Class one exchange: `Ok(())` is a success; otherwise the
/// [`AttemptError`] the policy decides on (class, phase, cause, retry hint,
/// credential signal). `now` is the wall clock, for `x-ratelimit-reset` and
/// HTTP-date `Retry-After` values. Pure: no I/O, no clock of its own.
pub fn classify(x: &Exchange<'_>, now: SystemTime) -> Result<(), AttemptError> {
    let phase = x.phase.as_str();
    let Some(status) = x.status else {
        // A certificate error or an alert while connecting: the server's
        // answer, the same whatever we try.
        if let (Some(refusal), Phase::Connect) = (x.tls, x.phase) {
            return Err(AttemptError::answered(
                phase,
                format!("{refusal}: {}", x.text),
            ));
        }
        // No answer at all.
        return Err(if x.phase == Phase::Connect {
            AttemptError::unjudged(phase, x.text.to_string())
        } else {
            AttemptError::unknown(phase, x.text.to_string())
        });
    };
    let cause = describe(status, x.text);
    if (200..300).contains(&status) {
        if x.phase >= Phase::Body {
            return Ok(());
        }
        // The remote said yes but its answer was cut: for a write it is
        // known to have landed, yet its value is missing — settle by reading.
        return Err(AttemptError::unknown(
            phase,
            format!("HTTP {status}, but the body was cut: {}", x.text),
        ));
    }
    if (300..400).contains(&status) {
        let to = x
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("nowhere");
        return Err(AttemptError::answered(
            phase,
            format!("HTTP {status}: redirected to {to} (not followed)"),
        ));
    }
    let hint = retry_hint(status, x.headers, x.text, now);
    match status {
        401 => Err(AttemptError::answered(phase, cause).with_auth(AuthSignal::Unauthorized)),
        403 if is_rate_limit_403(x.headers, x.text) => {
            Err(AttemptError::unjudged(phase, cause).with_retry_after(hint))
        }
        403 | 404 => {
            Err(AttemptError::answered(phase, cause).with_auth(AuthSignal::ForbiddenOrNotFound))
        }
        408 | 429 => Err(AttemptError::unjudged(phase, cause).with_retry_after(hint)),
        400..=499 => Err(AttemptError::answered(phase, cause)),
        503 => Err(AttemptError::unjudged(phase, cause).with_retry_after(hint)),
        500..=599 => match x.effect {
            Effect::Read => Err(AttemptError::unjudged(phase, cause).with_retry_after(hint)),
            // GitHub can apply a write and still answer 500/502/504.
            Effect::Write => Err(AttemptError::unknown(phase, cause)),
        },
        _ => Err(AttemptError::answered(phase, cause)),
    }
}

fn describe(status: u16, text: &str) -> String {
    if text.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {text}")
    }
}

/// Whether a message names GitHub's secondary rate limit (or its older
/// "abuse detection" wording).
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

fn primary_exhausted(headers: &HeaderMap) -> bool {
    header(headers, "x-ratelimit-remaining") == Some("0")
}

fn is_rate_limit_403(headers: &HeaderMap, message: &str) -> bool {
    primary_exhausted(headers)
        || is_secondary_rate_limit(message)
        || headers.contains_key("retry-after")
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
    if primary_exhausted(headers) {
        if let Some(d) =
            header(headers, "x-ratelimit-reset").and_then(|v| parse_rate_limit_reset(v, now))
        {
            return Some(d);
        }
    }
    let rate_limited = status == 429 || (status == 403 && is_rate_limit_403(headers, message));
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

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use sluice_policy::Class;
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
        phase: Phase,
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
            let r = run(e, Phase::Connect, None, &h, "connection refused").unwrap_err();
            assert_eq!((r.class, r.phase.as_ref()), (Class::Unjudged, "connect"));
            let r = run(e, Phase::RequestSent, None, &h, "operation timed out").unwrap_err();
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
                phase: Phase::Connect,
                status: None,
                headers: &h,
                text: "invalid peer certificate: Expired",
                tls: Some(&refusal),
            };
            let r = classify(&x, now()).unwrap_err();
            assert_eq!((r.class, r.phase.as_ref()), (Class::Answered, "connect"));
            assert!(r.cause.contains("expired"), "{}", r.cause);
            let r = run(e, Phase::Connect, None, &h, "tls handshake eof").unwrap_err();
            assert_eq!(r.class, Class::Unjudged);
        }
    }

    #[test]
    fn a_2xx_is_success_only_with_its_body_read() {
        let h = HeaderMap::new();
        for e in BOTH {
            assert!(run(e, Phase::Body, Some(200), &h, "").is_ok());
            assert!(run(e, Phase::Body, Some(201), &h, "").is_ok());
            assert_eq!(
                class_of(run(e, Phase::ResponseHeaders, Some(201), &h, "cut")),
                Some(Class::Unknown)
            );
        }
    }

    #[test]
    fn credential_statuses_are_answered_with_their_signal() {
        let h = HeaderMap::new();
        for e in BOTH {
            let r = run(e, Phase::Body, Some(401), &h, "Bad credentials").unwrap_err();
            assert_eq!(r.class, Class::Answered);
            assert_eq!(r.auth, Some(AuthSignal::Unauthorized));
            assert_eq!(r.cause, "HTTP 401: Bad credentials");
            for s in [403, 404] {
                let r = run(e, Phase::Body, Some(s), &h, "Not Found").unwrap_err();
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
            let r = run(e, Phase::Body, Some(429), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(2)))
            );
            // Primary limit: the reset time.
            let h = hdrs(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", "1700000030"),
            ]);
            let r = run(e, Phase::Body, Some(403), &h, "API rate limit exceeded").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(Duration::from_secs(30)))
            );
            assert_eq!(r.auth, None);
            // Secondary limit without a header: at least a minute.
            let h = HeaderMap::new();
            let msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.";
            let r = run(e, Phase::Body, Some(403), &h, msg).unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(SECONDARY_LIMIT_WAIT))
            );
            // 429 without any header: a minute as well.
            let r = run(e, Phase::Body, Some(429), &h, "").unwrap_err();
            assert_eq!(
                (r.class, r.retry_after),
                (Class::Unjudged, Some(SECONDARY_LIMIT_WAIT))
            );
            // A 403 with remaining quota and no rate-limit words is no limit.
            let h = hdrs(&[("x-ratelimit-remaining", "4999")]);
            let r = run(
                e,
                Phase::Body,
                Some(403),
                &h,
                "Resource not accessible by integration",
            )
            .unwrap_err();
            assert_eq!((r.class, r.retry_after), (Class::Answered, None));
        }
    }

    #[test]
    fn a_503_is_unjudged_for_both_effects_and_keeps_its_retry_after() {
        let h = hdrs(&[("retry-after", "1")]);
        for e in BOTH {
            let r = run(e, Phase::Body, Some(503), &h, "").unwrap_err();
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
                class_of(run(Effect::Read, Phase::Body, Some(s), &h, "")),
                Some(Class::Unjudged)
            );
            assert_eq!(
                class_of(run(Effect::Write, Phase::Body, Some(s), &h, "")),
                Some(Class::Unknown)
            );
            // Even when the error body was cut, the status decides.
            assert_eq!(
                class_of(run(Effect::Write, Phase::ResponseHeaders, Some(s), &h, "")),
                Some(Class::Unknown)
            );
        }
    }

    #[test]
    fn other_4xx_and_redirects_are_answered_in_the_apis_words() {
        let h = hdrs(&[("location", "https://elsewhere.invalid/x")]);
        for e in BOTH {
            let r = run(
                e,
                Phase::Body,
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
            let r = run(e, Phase::Body, Some(301), &h, "").unwrap_err();
            assert_eq!(r.class, Class::Answered);
            assert!(r.cause.contains("elsewhere.invalid"));
            assert_eq!(
                class_of(run(e, Phase::Body, Some(408), &HeaderMap::new(), "")),
                Some(Class::Unjudged)
            );
        }
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
