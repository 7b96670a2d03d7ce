//! `sluice-bench`: the side-by-side benchmark binary (see the library's
//! docs and BENCHMARKS.md).
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match sluice_bench::main_with_args(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
