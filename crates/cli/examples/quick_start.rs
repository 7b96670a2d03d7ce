//! The README's library quick start, word for word (the README test checks
//! that the two agree, and runs `quick_start` against a `git daemon` it
//! starts on 127.0.0.1):
//!
//! ```text
//! cargo run -p sluice-remote --example quick_start -- <URL> <REPO> <LEDGER>
//! ```

use std::path::Path;
use std::sync::Arc;

use sluice_cli::contract;
use sluice_git::gix;
use sluice_git::{CallOptions, GitClient, PushOptions, PushSpec, RefUpdate};
use sluice_ledger::SqliteLedger;
use sluice_policy::{OutcomeKind, Policy};

/// ls-refs, fetch and push against `url` (a git://, http(s)://, ssh:// or
/// file:// URL) from the repository at `repo`, with operation ids claimed
/// once in the SQLite ledger at `ledger`. Returns the push's JSON document.
pub fn quick_start(
    url: &str,
    repo: &Path,
    ledger: &Path,
) -> Result<String, Box<dyn std::error::Error>> {
    // One policy and one client per process, shared by every thread (both
    // are Send + Sync). Without `.ledger(…)` an id is remembered only in
    // this process's memory; with the SQLite file (created on first use) a
    // claimed id is rejected in any later process too.
    let ledger = SqliteLedger::open(ledger)?;
    let policy = Policy::builder().ledger(Arc::new(ledger)).build();
    let client = GitClient::new(Arc::new(policy));

    // ls-refs: a read, tried again whatever went wrong, within the bounds
    // (`CallOptions::default()`: the `command` profile, 20 s).
    let listed = client.ls_refs(url, &["refs/heads/".into()], &CallOptions::default())?;
    for r in listed.value.as_deref().unwrap_or_default() {
        let oid = r.oid.map(|o| o.to_string()).unwrap_or_default();
        println!("{oid} {}", r.name);
    }

    // fetch: the local refs are updated as `git fetch` updates them (the
    // repository opened with the gix sluice-git re-exports).
    let repo = gix::open(repo)?;
    let refspecs = ["+refs/heads/*:refs/remotes/origin/*".to_string()];
    let fetched = client.fetch(url, &refspecs, &repo, &CallOptions::default())?;
    for r in fetched.value.as_deref().unwrap_or_default() {
        let local = r.local_ref.as_deref().unwrap_or("-");
        println!("{} {} -> {local}", r.status.as_str(), r.remote_ref);
    }

    // push, under an operation id of the caller's: a write is never sent
    // twice, and asking again for a claimed id is `rejected` with no call.
    let spec = PushSpec::parse("refs/remotes/origin/main:refs/heads/quick-start")?;
    let update = RefUpdate::resolve(&spec, None, &repo)?;
    let opts = CallOptions::new().id("quick-start-1");
    let updates = [update];
    let pushed = client.push(url, &updates, &PushOptions::default(), &repo, &opts)?;
    println!("push: {}", pushed.kind.as_str());
    let again = client.push(url, &updates, &PushOptions::default(), &repo, &opts)?;
    assert_eq!(again.kind, OutcomeKind::Rejected);

    // The JSON document the CLI prints: the outcome's value shaped by
    // `contract` (here a push's per-ref results), the evidence as it is.
    let document = pushed.map(|r| contract::push_value(&r, url));
    Ok(contract::document(&document))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, repo, ledger] = args.as_slice() else {
        return Err("usage: quick_start <URL> <REPO> <LEDGER>".into());
    };
    println!("{}", quick_start(url, Path::new(repo), Path::new(ledger))?);
    Ok(())
}
