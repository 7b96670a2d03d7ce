//! Durations as the CLI takes them (`--deadline`, `--attempt-timeout`,
//! `--settle`: `sluice_cli::parse_duration`). No input may panic; zero is
//! refused unless allowed; what parses, written back by humantime, parses
//! to the same duration.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for allow_zero in [false, true] {
        if let Ok(d) = sluice_cli::parse_duration("--deadline", text, allow_zero) {
            assert!(allow_zero || !d.is_zero());
            let back = humantime::format_duration(d).to_string();
            assert_eq!(
                sluice_cli::parse_duration("--deadline", &back, allow_zero).ok(),
                Some(d),
                "{text:?} -> {back:?}"
            );
        }
    }
});
