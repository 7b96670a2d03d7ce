//! The one HTTP status table of the workspace: what an answered status
//! means to the policy, the same for the forge's REST calls and for git's
//! smart HTTP. A pure function of the status, whether the request was
//! complete (its body, the part that can take effect, was sent) and the
//! rate-limit facts the response carried.
//!
//! | status | class | credential signal |
//! |---|---|---|
//! | 2xx | none: a success | — |
//! | 3xx (a redirect not followed) | answered | — |
//! | 401 | answered | [`AuthSignal::Unauthorized`]: the policy decides whether it is the credential held refused (then it is the credential class: bought afresh and tried again) |
//! | 403 that is a rate limit ([`RateLimitFacts::limited`]) | unjudged | — |
//! | other 403, 404 | answered | [`AuthSignal::ForbiddenOrNotFound`] (the policy counts it only within the fresh window of buying) |
//! | 408 (the server gave up reading the request) | unjudged | — |
//! | 429, 503 | unjudged | — |
//! | other 4xx | answered | — |
//! | 500, 502, 504 after a complete request | unknown (a server can apply a write and still answer 502) | — |
//! | other 5xx | unjudged | — |
//! | anything else (1xx) | answered | — |

use reqwest::header::HeaderMap;
use sluice_policy::{AuthSignal, Class};

/// What a response said of rate limits: the input of [`status_class`]
/// beside the status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimitFacts {
    /// `x-ratelimit-remaining: 0`: the primary limit is spent.
    pub primary_exhausted: bool,
    /// The response named a wait (`Retry-After`).
    pub retry_after: bool,
    /// GitHub's secondary rate limit, which only its message names (the
    /// forge recognises it: see `sluice_forge::is_secondary_rate_limit`).
    pub secondary: bool,
}

impl RateLimitFacts {
    /// The facts a response's headers carry (`x-ratelimit-remaining`,
    /// `Retry-After`); `secondary` is left false.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let remaining = headers
            .get("x-ratelimit-remaining")
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        RateLimitFacts {
            primary_exhausted: remaining == Some("0"),
            retry_after: headers.contains_key("retry-after"),
            secondary: false,
        }
    }

    /// Whether the response is a rate limit: the primary one spent, the
    /// secondary one named, or a wait asked for.
    pub const fn limited(&self) -> bool {
        self.primary_exhausted || self.secondary || self.retry_after
    }
}

/// The class of one answered status, and the credential signal it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusClass {
    /// The class, from the table in this module's doc.
    pub class: Class,
    /// Set for 401 and for a 403/404 that is no rate limit: the policy
    /// decides whether the credential held was refused.
    pub auth: Option<AuthSignal>,
}

impl StatusClass {
    const fn plain(class: Class) -> Self {
        StatusClass { class, auth: None }
    }
}

/// Class an answered status (see the table in this module's doc). `None`
/// for a 2xx: a success, nothing to class. `request_complete`: the request's
/// body — the part that can take effect: a write's body, git's command
/// request — was sent whole. Pure: the same status means the same to the
/// forge and to git.
pub fn status_class(
    status: u16,
    request_complete: bool,
    limits: RateLimitFacts,
) -> Option<StatusClass> {
    let class = match status {
        200..=299 => return None,
        401 => StatusClass {
            class: Class::Answered,
            auth: Some(AuthSignal::Unauthorized),
        },
        403 if limits.limited() => StatusClass::plain(Class::Unjudged),
        403 | 404 => StatusClass {
            class: Class::Answered,
            auth: Some(AuthSignal::ForbiddenOrNotFound),
        },
        408 | 429 | 503 => StatusClass::plain(Class::Unjudged),
        500 | 502 | 504 if request_complete => StatusClass::plain(Class::Unknown),
        500..=599 => StatusClass::plain(Class::Unjudged),
        _ => StatusClass::plain(Class::Answered),
    };
    Some(class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn class(status: u16, complete: bool, limits: RateLimitFacts) -> Class {
        status_class(status, complete, limits)
            .expect("a failure")
            .class
    }

    const NONE: RateLimitFacts = RateLimitFacts {
        primary_exhausted: false,
        retry_after: false,
        secondary: false,
    };

    #[test]
    fn a_2xx_is_no_failure() {
        for s in [200, 201, 204, 299] {
            assert_eq!(status_class(s, true, NONE), None);
        }
    }

    #[test]
    fn credential_statuses_are_answered_and_carry_their_signal() {
        for complete in [false, true] {
            let c = status_class(401, complete, NONE).expect("401");
            assert_eq!(c.class, Class::Answered);
            assert_eq!(c.auth, Some(AuthSignal::Unauthorized));
            for s in [403, 404] {
                let c = status_class(s, complete, NONE).expect("403/404");
                assert_eq!(c.class, Class::Answered);
                assert_eq!(c.auth, Some(AuthSignal::ForbiddenOrNotFound));
            }
        }
    }

    #[test]
    fn rate_limits_and_a_server_that_gave_up_reading_are_unjudged() {
        for complete in [false, true] {
            for s in [408, 429, 503] {
                assert_eq!(class(s, complete, NONE), Class::Unjudged, "{s}");
            }
            for limits in [
                RateLimitFacts {
                    primary_exhausted: true,
                    ..NONE
                },
                RateLimitFacts {
                    retry_after: true,
                    ..NONE
                },
                RateLimitFacts {
                    secondary: true,
                    ..NONE
                },
            ] {
                let c = status_class(403, complete, limits).expect("403");
                assert_eq!((c.class, c.auth), (Class::Unjudged, None), "{limits:?}");
            }
        }
    }

    #[test]
    fn a_lost_write_answer_is_unknown_only_after_the_request_was_complete() {
        for s in [500, 502, 504] {
            assert_eq!(class(s, true, NONE), Class::Unknown, "{s}");
            assert_eq!(class(s, false, NONE), Class::Unjudged, "{s}");
        }
        for s in [501, 505, 507, 599] {
            assert_eq!(class(s, true, NONE), Class::Unjudged, "{s}");
        }
    }

    #[test]
    fn other_4xx_redirects_and_informational_statuses_are_answered() {
        for s in [100, 301, 302, 400, 405, 409, 410, 422, 451] {
            let c = status_class(s, true, NONE).expect("a failure");
            assert_eq!((c.class, c.auth), (Class::Answered, None), "{s}");
        }
    }

    #[test]
    fn the_facts_are_read_from_the_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(RateLimitFacts::from_headers(&h), NONE);
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("4999"));
        assert!(!RateLimitFacts::from_headers(&h).limited());
        h.insert("x-ratelimit-remaining", HeaderValue::from_static(" 0"));
        h.insert("retry-after", HeaderValue::from_static("3"));
        let f = RateLimitFacts::from_headers(&h);
        assert!(f.primary_exhausted && f.retry_after && !f.secondary);
    }
}
