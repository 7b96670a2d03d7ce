//! `Retry-After` and rate-limit reset parsers. No input may panic; a
//! number of seconds is that many seconds; an HTTP date is a wait from now.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use sluice_policy::{parse_rate_limit_reset, parse_retry_after};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let ra = parse_retry_after(text, now);
    let rl = parse_rate_limit_reset(text, now);
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = t.parse::<u64>() {
            assert_eq!(ra, Some(Duration::from_secs(n)));
            if let Some(w) = rl {
                assert_eq!(w, Duration::from_secs(n.saturating_sub(1_700_000_000)));
            }
        } else {
            assert_eq!(ra, None);
        }
    } else {
        assert_eq!(rl, None);
    }
});
