//! The forge soak: `cargo run --release -p sluice-reliability --bin
//! forge-soak -- [--ops 2000] [--workers 8] [--fault-rate 0.2] [--seed N]
//! [--no-retry-budget]`.
//!
//! Prints the figures; exits 1 when any promise was broken (see
//! `sluice_reliability::forge_soak`).

use sluice_policy::RetryBudget;
use sluice_reliability::forge_soak::{self, ForgeSoakConfig};

fn main() {
    let mut cfg = ForgeSoakConfig::standard();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--ops" => cfg.ops = parse(&value("--ops"), "--ops"),
            "--workers" => cfg.workers = parse(&value("--workers"), "--workers"),
            "--fault-rate" => {
                cfg.fault_rate = value("--fault-rate")
                    .parse()
                    .unwrap_or_else(|_| usage("--fault-rate takes a number in [0, 1]"))
            }
            "--seed" => cfg.seed = parse(&value("--seed"), "--seed") as u64,
            "--no-retry-budget" => cfg.retry_budget = RetryBudget::UNLIMITED,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if cfg.workers == 0 {
        usage("--workers must be at least 1");
    }
    eprintln!(
        "forge soak: {} operations on {} threads, fault rate {}, write pacing {:?}, seed {:#x}, retry budget {:?}",
        cfg.ops, cfg.workers, cfg.fault_rate, cfg.write_spacing, cfg.seed, cfg.retry_budget
    );
    let report = forge_soak::run(&cfg);
    println!("{report}");
    if !report.violations.is_empty() {
        std::process::exit(1);
    }
}

fn parse(v: &str, name: &str) -> usize {
    v.parse()
        .unwrap_or_else(|_| usage(&format!("{name} takes a whole number")))
}

fn usage(msg: &str) -> ! {
    if !msg.is_empty() {
        eprintln!("forge-soak: {msg}");
    }
    eprintln!(
        "usage: forge-soak [--ops N] [--workers N] [--fault-rate P] [--seed N] [--no-retry-budget]"
    );
    std::process::exit(2);
}
