//! An async landing service on the library's tokio facade
//! (`sluice_git::AsyncGitClient`, `sluice_forge::AsyncForgeClient`, the
//! `tokio` features of both crates): one shared [`Policy`], clients built
//! inside the runtime, the CI read and the ref listing run at once, a
//! fetch into a repository kept open, a fast-forward push under an id —
//! and a job given a time limit: when it passes, the job's future is
//! dropped, which cancels the operation in flight (it runs on to its
//! bounded end on the blocking pool, settled as any cancel settles it,
//! its outcome in the ledger). `cargo test` builds it and runs [`serve`]
//! against a `git daemon` and the fake forge
//! (`crates/cli/tests/it/async_service.rs`):
//!
//! ```text
//! cargo run -p sluice-remote --example async_service -- \
//!     <GIT-URL> <FORGE-API-URL> <OWNER/REPO> <CANDIDATE-BRANCH> <TARGET-BRANCH> <KEPT-REPO>
//! ```

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use sluice_forge::{AsyncForgeClient, CiState, ForgeClient, RepoRef};
use sluice_git::gix;
use sluice_git::{AsyncGitClient, CallOptions, GitClient, PushOptions, RefStatus, RefUpdate};
use sluice_policy::{Outcome, OutcomeKind, Policy, Profile};

/// One landing job: fast-forward `target` to `candidate` once the
/// candidate's CI is green.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job's name: the seed of its push's operation id.
    pub name: String,
    /// The git remote.
    pub url: String,
    /// The repository on the forge.
    pub repo: RepoRef,
    /// The branch to land.
    pub candidate: String,
    /// The branch it lands on.
    pub target: String,
}

/// How a job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// The target now holds the candidate's tip.
    Landed(String),
    /// The candidate's CI is not green.
    CiNotGreen(String),
    /// A call ended without success; the words say which and how.
    GaveUp(String),
    /// The job's time limit passed: its future was dropped, which
    /// cancelled the operation in flight.
    TimedOut,
}

/// The service's runtime: what `#[tokio::main]` builds, with the blocking
/// pool sized for the operations in flight at once (each holds one
/// blocking thread until its bounded end, a cancelled one included).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(32)
        .build()
}

/// The clients of the service: one policy, shared. Built inside the
/// runtime (a service builds them in `main` under `#[tokio::main]`).
pub async fn clients(
    forge_url: &str,
) -> Result<(AsyncGitClient, AsyncForgeClient), Box<dyn Error>> {
    let policy = Arc::new(Policy::default());
    let git = GitClient::new(Arc::clone(&policy));
    let forge = ForgeClient::builder(forge_url).policy(policy).build()?;
    Ok((AsyncGitClient::new(git), AsyncForgeClient::new(forge)))
}

/// Run `job`, dropped (and so cancelled) when `limit` passes.
pub async fn serve(
    git: &AsyncGitClient,
    forge: &AsyncForgeClient,
    job: Job,
    kept: gix::ThreadSafeRepository,
    limit: Duration,
) -> Result<JobEnd, Box<dyn Error + Send + Sync>> {
    match tokio::time::timeout(limit, land(git, forge, job, kept)).await {
        Ok(end) => end,
        // The `land` future was dropped with the call it awaited: that
        // call's cancel flag is raised.
        Err(_) => Ok(JobEnd::TimedOut),
    }
}

/// Land `job` through `kept`.
async fn land(
    git: &AsyncGitClient,
    forge: &AsyncForgeClient,
    job: Job,
    kept: gix::ThreadSafeRepository,
) -> Result<JobEnd, Box<dyn Error + Send + Sync>> {
    let target_ref = format!("refs/heads/{}", job.target);
    let candidate_ref = format!("refs/heads/{}", job.candidate);
    let read = CallOptions::new().profile(Profile::Round);

    // 1. The refs and the candidate's CI, at once (each on its own
    // blocking thread; the calls' futures are `'static`, so they spawn).
    // A spawned task outlives a dropped `JoinHandle`: the guard aborts
    // both tasks when this future is dropped, which drops their futures
    // and so cancels their operations.
    let listing = tokio::spawn(git.ls_refs(
        job.url.clone(),
        vec![target_ref.clone(), candidate_ref.clone()],
        read.clone(),
    ));
    let ci = tokio::spawn(forge.ci_status(job.repo.clone(), job.candidate.clone(), read.clone()));
    let _abort = AbortOnDrop(vec![listing.abort_handle(), ci.abort_handle()]);
    let listed = listing.await??;
    let ci = ci.await??;
    let refs = match settled(&listed) {
        Ok(()) => listed.value.unwrap_or_default(),
        Err(words) => return Ok(JobEnd::GaveUp(words)),
    };
    if let Err(words) = settled(&ci) {
        return Ok(JobEnd::GaveUp(words));
    }
    let ci = ci.value.expect("a success carries its value");
    if ci.state != CiState::Success {
        return Ok(JobEnd::CiNotGreen(ci.state.as_str().to_owned()));
    }
    let tip = |name: &str| refs.iter().find(|r| r.name == name).and_then(|r| r.oid);
    let (Some(target), Some(candidate)) = (tip(&target_ref), tip(&candidate_ref)) else {
        return Ok(JobEnd::GaveUp(
            "the target or the candidate is missing".into(),
        ));
    };

    // 2. The candidate into the kept repository.
    let specs = vec!["+refs/heads/*:refs/remotes/origin/*".to_string()];
    let fetched = git
        .fetch(job.url.clone(), specs, kept.clone(), read.clone())
        .await?;
    if let Err(words) = settled(&fetched) {
        return Ok(JobEnd::GaveUp(words));
    }

    // 3. The push, leased on the target this job read, under an id of its
    // own (a lost answer is settled by reading, never sent again).
    let update = RefUpdate::leased(candidate, target_ref, target);
    let opts = CallOptions::new()
        .profile(Profile::Submit)
        .id(format!("{}-push", job.name));
    let pushed = git
        .push(job.url, vec![update], PushOptions::default(), kept, opts)
        .await?;
    if let Err(words) = settled(&pushed) {
        return Ok(JobEnd::GaveUp(words));
    }
    let report = pushed.value.expect("a success carries its value");
    if report.refs.iter().all(|r| r.status == RefStatus::Ok) {
        Ok(JobEnd::Landed(candidate.to_string()))
    } else {
        Ok(JobEnd::GaveUp("a ref was not updated".into()))
    }
}

/// Aborts its tasks when dropped (a task already done is left as it is).
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// `Ok` for a success; else the outcome's kind and words.
fn settled<T>(out: &Outcome<T>) -> Result<(), String> {
    match out.kind {
        OutcomeKind::Succeeded => Ok(()),
        kind => Err(format!(
            "{} {kind:?}: {}",
            out.operation.kind,
            out.error
                .as_ref()
                .map(|e| e.to_string())
                .unwrap_or_default()
        )),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, forge_url, repo, candidate, target, kept] = args.as_slice() else {
        return Err("usage: async_service <GIT-URL> <FORGE-API-URL> <OWNER/REPO> <CANDIDATE> <TARGET> <KEPT-REPO>".into());
    };
    let (owner, name) = repo.split_once('/').ok_or("OWNER/REPO")?;
    let kept = gix::open(kept)?.into_sync();
    let rt = runtime()?;
    let end = rt.block_on(async {
        let (git, forge) = clients(forge_url).await?;
        let job = Job {
            name: format!("land-{candidate}"),
            url: url.clone(),
            repo: RepoRef::new(owner, name),
            candidate: candidate.clone(),
            target: target.clone(),
        };
        serve(&git, &forge, job, kept, Duration::from_secs(600))
            .await
            .map_err(|e| e as Box<dyn Error>)
    })?;
    println!("{end:?}");
    Ok(())
}
