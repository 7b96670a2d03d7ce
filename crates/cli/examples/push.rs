//! A minimal push through the library: one branch, under the default
//! (`command`) bounds, with the outcome's evidence printed.
//!
//! ```text
//! cargo run -p sluice-remote --example push -- <URL> <REPO> <SRC> <DST>
//! cargo run -p sluice-remote --example push -- git://127.0.0.1:9418/r.git ./r.git main refs/heads/main
//! ```
use std::sync::Arc;

use sluice_git::{CallOptions, GitClient, PushOptions, PushSpec, RefUpdate};
use sluice_policy::{OutcomeKind, Policy};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, repo, src, dst] = args.as_slice() else {
        return Err("usage: push <URL> <REPO> <SRC> <DST>".into());
    };
    let repo = gix::open(repo)?;
    // One client per process: it holds the policy (retry budgets, ledger).
    let client = GitClient::new(Arc::new(Policy::default()));
    let spec = PushSpec::parse(&format!("{src}:{dst}"))?;
    let update = RefUpdate::resolve(&spec, None, &repo)?;
    // Bad input is an Err before any call; everything else is an Outcome.
    let outcome = client.push(
        url,
        &[update],
        &PushOptions::default(),
        &repo,
        &CallOptions::default(),
    )?;
    match outcome.kind {
        OutcomeKind::Succeeded => println!("pushed in {} attempt(s)", outcome.attempts.len()),
        OutcomeKind::Answered => {
            println!("the remote answered: {:?}", outcome.error.map(|e| e.cause))
        }
        OutcomeKind::Unknown => println!(
            "no answer in time; may have applied: {:?}",
            outcome.may_have_applied
        ),
        OutcomeKind::Rejected => println!("this operation id ran before"),
        OutcomeKind::LocalError => println!(
            "stopped on this side: {:?}",
            outcome.error.as_ref().map(|e| &e.cause)
        ),
    }
    if let Some(r) = &outcome.reconciled {
        // No verdict: no settling read answered before the deadline.
        let verdict = r.verdict.map_or("no read answered", |v| v.as_str());
        println!("settled by reading: {verdict}");
    }
    Ok(())
}
