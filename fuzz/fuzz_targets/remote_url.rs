//! Remote URLs, as the CLI takes them (`sluice_cli::check_git_url`,
//! `check_http_url`) and as the library parses them
//! (`sluice_git::Remote::parse`). No input may panic; a password in the
//! URL never reaches the display form, an error, or `Debug`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_git::{redact, Remote};

fuzz_target!(|data: &[u8]| {
    let Ok(url) = std::str::from_utf8(data) else {
        return;
    };
    let _ = redact(url);
    // A recognisable password in a URL of the fuzzer's making.
    let secret = "Zq7pSECRETxK";
    if url.contains(secret) {
        // The secret is only a secret where this target puts it (the user
        // info); text the fuzzer wrote elsewhere may be shown.
        return;
    }
    let with_secret = match url.split_once("://") {
        Some((scheme, rest)) => format!("{scheme}://u:{secret}@{rest}"),
        None => return,
    };
    for u in [url.to_string(), with_secret.clone()] {
        for e in [
            sluice_cli::check_git_url(&u).err(),
            sluice_cli::check_http_url(&u).err(),
        ]
        .into_iter()
        .flatten()
        {
            assert!(!e.to_string().contains(secret), "{u:?} -> {e}");
        }
        match Remote::parse(&u) {
            Ok(r) => {
                assert!(!r.display.contains(secret), "{u:?} -> {:?}", r.display);
                assert!(!format!("{r:?}").contains(secret));
                let _ = r.host();
            }
            Err(e) => {
                assert!(!e.to_string().contains(secret), "{u:?} -> {e}");
                assert!(!format!("{e:?}").contains(secret));
            }
        }
    }
});
