//! The whole command line (`sluice_cli::parse`): any arguments (the input
//! split at NUL bytes) give a config or a usage error, never a panic; a
//! usage error names an argument.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let args: Vec<&str> = std::iter::once("sluice-remote")
        .chain(text.split('\0'))
        .collect();
    if let Err(sluice_cli::ParseError::Usage(e)) = sluice_cli::parse(args) {
        assert!(!e.to_string().is_empty());
    }
});
