//! `sluice-remote demo` in a build without the `demo` feature (the service's
//! build, `--no-default-features`): the demo needs the test kit's git daemon
//! and fault proxy, which this binary does not link.

/// Say that this build has no demo; exit 2 (nothing was run).
pub fn run() -> u8 {
    eprintln!(
        "error: this sluice-remote was built without its demo (the `demo` cargo \
         feature, on by default: `cargo run --release -p sluice-remote -- demo`)"
    );
    sluice_cli::EXIT_USAGE
}
