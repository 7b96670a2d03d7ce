//! Push specs `[+]<SRC>:<DST>` (`sluice_git::PushSpec::parse`) and full ref
//! names. No input may panic; a spec that parses is written back to the
//! same spec; its destination is a valid full or short ref name (or `HEAD`
//! for `HEAD` alone).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_git::push::spec::{check_ref_name, check_short_name};
use sluice_git::PushSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = check_ref_name(text);
    if let Ok(s) = PushSpec::parse(text) {
        assert!(check_short_name(&s.dst).is_ok() || s.dst == "HEAD");
        let back = format!(
            "{}{}:{}",
            if s.force { "+" } else { "" },
            s.src.as_deref().unwrap_or(""),
            s.dst
        );
        assert_eq!(PushSpec::parse(&back).as_ref(), Ok(&s), "{text:?} -> {back:?}");
    }
});
