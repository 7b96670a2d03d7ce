//! The memory of a process that holds only this library: its peak
//! resident set (`VmHWM`) before any call and after its calls, one after
//! another on one client — what the library itself adds to a process,
//! without a benchmark harness or libgit2 linked beside it.
//!
//! ```text
//! cargo run --release -p sluice-git --example process_memory -- ls-refs <URL> <PREFIX> [N]
//! cargo run --release -p sluice-git --example process_memory -- fetch <URL> <REFSPEC> <REPO>...
//! ```
//!
//! `ls-refs` lists the refs under `PREFIX` `N` times (60 unless given);
//! `fetch` fetches `REFSPEC` into each `REPO` in turn (each opened just
//! before its fetch).

use std::sync::Arc;
use std::time::Duration;

use sluice_git::{CallOptions, GitClient};
use sluice_policy::{Bounds, OutcomeKind, Policy};

/// This process's peak resident set so far, KiB (Linux).
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage =
        "usage: process_memory ls-refs <URL> <PREFIX> [N] | fetch <URL> <REFSPEC> <REPO>...";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let before = peak_kib();
    let client = GitClient::new(Arc::new(Policy::default()));
    let opts = CallOptions::new().bounds(Bounds::new(
        Duration::from_secs(600),
        Duration::from_secs(600),
        1,
    ));
    let calls = match args.as_slice() {
        [op, url, prefix, rest @ ..] if op == "ls-refs" && rest.len() <= 1 => {
            let n: usize = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(60);
            for _ in 0..n {
                let o = client.ls_refs(url, std::slice::from_ref(prefix), &opts)?;
                if o.kind != OutcomeKind::Succeeded {
                    return Err(format!("ls-refs: {:?}", o.kind).into());
                }
            }
            format!("{n} ls-refs")
        }
        [op, url, refspec, repos @ ..] if op == "fetch" && !repos.is_empty() => {
            for path in repos {
                let repo = gix::open(path)?;
                let o = client.fetch(url, std::slice::from_ref(refspec), &repo, &opts)?;
                if o.kind != OutcomeKind::Succeeded {
                    return Err(format!("fetch into {path}: {:?}", o.kind).into());
                }
            }
            format!("{} fetches", repos.len())
        }
        _ => return Err(usage.into()),
    };
    let show = |k: Option<u64>| k.map_or("unknown".to_owned(), |k| format!("{k} KiB"));
    println!(
        "peak resident set: {} before any call, {} after {calls}",
        show(before),
        show(peak_kib())
    );
    Ok(())
}
