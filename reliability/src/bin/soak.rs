//! The large soak: `cargo run --release -p sluice-reliability --bin soak --
//! --ops 10000 [--workers 4] [--fault-rate 0.2] [--seed N]`.
//!
//! `--ops` is the total number of operations of the mix (ls-refs, fetch,
//! leased push), shared evenly by the workers. Prints the figures; exits 1
//! when any promise was broken.

use sluice_reliability::soak::{self, SoakConfig};

fn main() {
    let mut cfg = SoakConfig::ci();
    let mut total: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--ops" => total = Some(parse(&value("--ops"), "--ops")),
            "--workers" => cfg.workers = parse(&value("--workers"), "--workers"),
            "--fault-rate" => {
                cfg.fault_rate = value("--fault-rate")
                    .parse()
                    .unwrap_or_else(|_| usage("--fault-rate takes a number in [0, 1]"))
            }
            "--seed" => cfg.seed = parse(&value("--seed"), "--seed") as u64,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if cfg.workers == 0 {
        usage("--workers must be at least 1");
    }
    if let Some(t) = total {
        cfg.ops_per_worker = t.div_ceil(cfg.workers);
    }
    eprintln!(
        "soak: {} workers × {} operations, fault rate {}, seed {:#x}",
        cfg.workers, cfg.ops_per_worker, cfg.fault_rate, cfg.seed
    );
    let report = soak::run(&cfg);
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
        eprintln!("soak: {msg}");
    }
    eprintln!("usage: soak [--ops N] [--workers N] [--fault-rate P] [--seed N]");
    std::process::exit(2);
}
