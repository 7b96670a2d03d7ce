//! What a view opened per attempt costs: `gix::open_opts` with a handle's
//! own options, timed over many opens of the repository given (the cost
//! `fresh_view` adds to every fetch and push attempt).
//!
//! `cargo run --release -p sluice-git --example reopen_cost -- <REPO> [N]`

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: reopen_cost <REPO> [N]")?;
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(200);
    let handle = gix::open(&path)?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let view = gix::open_opts(handle.git_dir(), handle.open_options().clone())?;
        // Touch the object store the way an attempt does first.
        let head = view.head_id().ok().map(|id| id.detach());
        if let Some(id) = head {
            let _ = view.find_object(id)?;
        }
        times.push(t0.elapsed());
    }
    times.sort();
    println!(
        "{n} opens of {path}: min {:?}, median {:?}, max {:?}",
        times[0],
        times[n / 2],
        times[n - 1]
    );
    Ok(())
}
