//! The service soak, large: `cargo run --release -p sluice-reliability --bin
//! service-soak -- --ops 2000 [--threads 8] [--fault-rate 0.2] [--seed N]`,
//! or time-driven: `-- --minutes 60 --leave-to-library`.
//!
//! `--ops` is the number of operations per transport (git://, smart HTTP,
//! ssh, https); `--minutes N` runs for N minutes instead, sampling the process
//! every minute (the RSS slope after the first ten is printed, with the
//! readings at the end that tell the library's memory from the soak's own
//! records);
//! `--leave-to-library` runs `git gc` on thread 0's repositories only and
//! leaves the others to the library's maintenance. The `ssh-fault` relay is the binary of that name next to this one.
//! Prints the figures; exits 1 when any promise was broken (a violation,
//! or descriptors, threads or memory growing with the operations).

use sluice_reliability::service::{self, ServiceConfig};

fn main() {
    let exe = std::env::current_exe().unwrap_or_else(|e| usage(&format!("no own path: {e}")));
    let relay = exe.with_file_name("ssh-fault");
    if !relay.is_file() {
        usage(&format!(
            "the ssh-fault relay is not next to this binary ({}): build the package's binaries",
            relay.display()
        ));
    }
    let mut cfg = ServiceConfig::ci(relay);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--ops" => cfg.ops_per_transport = parse(&value("--ops"), "--ops"),
            "--threads" => cfg.threads = parse(&value("--threads"), "--threads"),
            "--fault-rate" => {
                cfg.fault_rate = value("--fault-rate")
                    .parse()
                    .unwrap_or_else(|_| usage("--fault-rate takes a number in [0, 1]"))
            }
            "--seed" => cfg.seed = parse(&value("--seed"), "--seed") as u64,
            "--gc-every" => cfg.gc_every = parse(&value("--gc-every"), "--gc-every"),
            "--minutes" => {
                let m = parse(&value("--minutes"), "--minutes") as u64;
                cfg.duration = Some(std::time::Duration::from_secs(60 * m));
            }
            "--leave-to-library" => cfg.gc_only_thread_0 = true,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if cfg.threads == 0 {
        usage("--threads must be at least 1");
    }
    let length = match cfg.duration {
        Some(d) => format!("{} minutes", d.as_secs() / 60),
        None => format!("{} operations per transport", cfg.ops_per_transport),
    };
    eprintln!(
        "service soak: {} threads, {length}, fault rate {}, seed {:#x}, git gc on {}",
        cfg.threads,
        cfg.fault_rate,
        cfg.seed,
        if cfg.gc_only_thread_0 {
            "thread 0's repositories (the rest left to the library)"
        } else {
            "every thread's repositories"
        }
    );
    let report = service::run(&cfg);
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
        eprintln!("service-soak: {msg}");
    }
    eprintln!(
        "usage: service-soak [--ops N | --minutes N] [--threads N] [--fault-rate P] [--seed N] [--gc-every N] [--leave-to-library]"
    );
    std::process::exit(2);
}
