//! Parsing a server's retry hints: `Retry-After` (seconds or an HTTP date)
//! and a rate limit's reset time (epoch seconds).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parse a `Retry-After` value: delay-seconds or an HTTP date, relative to
/// `now`. A date in the past is a zero wait; anything else unparsable is
/// `None`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<u64>().ok().map(Duration::from_secs);
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parse a rate limit's reset header (`x-ratelimit-reset`: UTC epoch
/// seconds) into a wait from `now`; a reset in the past is a zero wait.
pub fn parse_rate_limit_reset(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = v.parse::<u64>().ok()?;
    let when = UNIX_EPOCH.checked_add(Duration::from_secs(secs))?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates_are_read() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 60 ", now),
            Some(Duration::from_secs(60))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("", now), None);
    }

    #[test]
    fn rate_limit_reset_is_a_wait_from_now() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(
            parse_rate_limit_reset("1030", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(parse_rate_limit_reset("10", now), Some(Duration::ZERO));
        assert_eq!(parse_rate_limit_reset("x", now), None);
        assert_eq!(parse_rate_limit_reset("99999999999999999999999", now), None);
    }
}
