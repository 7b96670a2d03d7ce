//! An integrator's landing loop, as sluice runs it, on the library alone:
//! one shared [`Policy`] (with a persistent ledger) under a [`GitClient`]
//! and a [`ForgeClient`]; per round, the forge's CI read of the candidate,
//! ls-refs of the target, a fetch into a repository kept open, a
//! three-way merge made with gix (sluice-git's `merge` feature), and a
//! leased push — every [`OutcomeKind`] of
//! every call handled, with no arm that cannot happen. `cargo test` builds
//! it and runs [`land`] against a `git daemon` and the fake forge
//! (`crates/cli/tests/it/integrator_loop.rs`):
//!
//! ```text
//! cargo run -p sluice-remote --example integrator -- \
//!     <GIT-URL> <FORGE-API-URL> <OWNER/REPO> <CANDIDATE-BRANCH> <KEPT-REPO> <LEDGER>
//! ```

use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use sluice_forge::{ForgeClient, RepoRef};
use sluice_git::gix;
use sluice_git::gix::ObjectId;
use sluice_git::{CallOptions, GitClient, PushOptions, RefStatus, RefUpdate};
use sluice_ledger::SqliteLedger;
use sluice_policy::{OutcomeKind, Policy, Profile};

/// What one landing job is.
pub struct Job<'a> {
    /// The job's name: the seed of its operation ids (one id per logical
    /// operation: `<name>-push-<round>`).
    pub name: &'a str,
    /// The git remote (git://, http(s)://, ssh://, file://).
    pub url: &'a str,
    /// The repository on the forge.
    pub repo: RepoRef,
    /// The branch to land (on the remote).
    pub candidate: &'a str,
    /// The branch it lands on.
    pub target: &'a str,
}

/// How a job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// The target holds this merge commit.
    Landed {
        /// The merge commit.
        commit: ObjectId,
        /// The rounds it took.
        rounds: u32,
    },
    /// The candidate's CI is not green: its verdict (`pending` or
    /// `failure`), required checks and check runs included.
    CiNotGreen(String),
    /// Merging the candidate into the target leaves a conflict: it needs
    /// a rebase.
    NeedsRebase,
    /// The remote or the forge answered in a way another round cannot
    /// change, or the rounds ran out; the words say which.
    GaveUp(String),
}

/// The most rounds a job takes (each reads everything again).
const ROUNDS: u32 = 4;

/// The clients of one process: one policy, shared.
pub fn clients(forge_url: &str, ledger: &Path) -> Result<(GitClient, ForgeClient), Box<dyn Error>> {
    let policy = Arc::new(
        Policy::builder()
            .ledger(Arc::new(SqliteLedger::open(ledger)?))
            .build(),
    );
    let git = GitClient::new(Arc::clone(&policy));
    // `.policy(…)`: without it the forge client would get a policy (a
    // ledger, retry budgets) of its own, and ids would not be global.
    let forge = ForgeClient::builder(forge_url).policy(policy).build()?;
    Ok((git, forge))
}

/// Land `job` through `kept`, a repository the caller keeps open.
pub fn land(
    git: &GitClient,
    forge: &ForgeClient,
    job: &Job<'_>,
    kept: &gix::Repository,
) -> Result<JobEnd, Box<dyn Error>> {
    let target_ref = format!("refs/heads/{}", job.target);
    let candidate_ref = format!("refs/heads/{}", job.candidate);
    // Reads run under generated ids: asked again freely, never recorded.
    let read = CallOptions::new().profile(Profile::Round);
    let mut last = String::new();
    // Merges whose push ended `unknown`: each may still land, so the
    // target at one of them is this job landed.
    let mut unsettled: Vec<ObjectId> = Vec::new();
    for round in 1..=ROUNDS {
        // 1. What the remote holds now.
        let listed = git.ls_refs(job.url, &[target_ref.clone(), candidate_ref.clone()], &read)?;
        let refs = match listed.kind {
            OutcomeKind::Succeeded => listed.value.unwrap_or_default(),
            // Not retried by the policy, and not by us: the remote said no.
            OutcomeKind::Answered => return Ok(JobEnd::GaveUp(words(&listed))),
            OutcomeKind::Unknown => {
                last = words(&listed);
                continue;
            }
            // A generated id is never claimed before; a ledger answering
            // otherwise is worth stopping for.
            OutcomeKind::Rejected => return Ok(JobEnd::GaveUp("ls-refs id rejected".into())),
            OutcomeKind::LocalError => return Err(words(&listed).into()),
        };
        let tip = |name: &str| refs.iter().find(|r| r.name == name).and_then(|r| r.oid);
        let (Some(target), Some(candidate)) = (tip(&target_ref), tip(&candidate_ref)) else {
            return Ok(JobEnd::GaveUp(
                "the target or the candidate is missing".into(),
            ));
        };
        if unsettled.contains(&target) {
            return Ok(JobEnd::Landed {
                commit: target,
                rounds: round,
            });
        }

        // 2. The candidate's CI, from the forge.
        let ci = forge.ci_status(&job.repo, &candidate.to_string(), &read)?;
        match ci.kind {
            OutcomeKind::Succeeded => {
                let state = ci
                    .value
                    .map(|c| c.state.as_str().to_owned())
                    .unwrap_or_default();
                if state != "success" {
                    return Ok(JobEnd::CiNotGreen(state));
                }
            }
            OutcomeKind::Answered => return Ok(JobEnd::GaveUp(words(&ci))),
            OutcomeKind::Unknown => {
                last = words(&ci);
                continue;
            }
            OutcomeKind::Rejected => return Ok(JobEnd::GaveUp("CI read id rejected".into())),
            OutcomeKind::LocalError => return Err(words(&ci).into()),
        }

        // 3. Both tips into the kept repository.
        let specs = ["+refs/heads/*:refs/remotes/origin/*".to_string()];
        let fetched = git.fetch(job.url, &specs, kept, &read)?;
        match fetched.kind {
            OutcomeKind::Succeeded => {}
            OutcomeKind::Answered => return Ok(JobEnd::GaveUp(words(&fetched))),
            OutcomeKind::Unknown => {
                last = words(&fetched);
                continue;
            }
            OutcomeKind::Rejected => return Ok(JobEnd::GaveUp("fetch id rejected".into())),
            OutcomeKind::LocalError => return Err(words(&fetched).into()),
        }

        // 4. The merge, made in a fresh view of the kept handle (a handle
        // kept open for long stops seeing new packs).
        let view = sluice_git::fresh_view(kept)?;
        let Some(merge) = merge_commit(&view, target, candidate, job)? else {
            return Ok(JobEnd::NeedsRebase);
        };

        // 5. The leased push: it lands only while the target holds what
        // this round read. Its id names this round's push, one logical
        // operation, so a lost answer is never sent again under it.
        let id = format!("{}-push-{round}", job.name);
        let update = RefUpdate::leased(merge, target_ref.clone(), target);
        let opts = CallOptions::new().profile(Profile::Submit).id(id);
        let pushed = git.push(job.url, &[update], &PushOptions::default(), kept, &opts)?;
        match pushed.kind {
            OutcomeKind::Succeeded => {
                let ok = pushed
                    .value
                    .as_ref()
                    .is_some_and(|r| r.refs.iter().all(|r| r.status == RefStatus::Ok));
                if ok {
                    return Ok(JobEnd::Landed {
                        commit: merge,
                        rounds: round,
                    });
                }
                last = "a ref was not updated".into();
            }
            // A stale lease (somebody moved the target) or a hook's
            // refusal: the next round reads again and builds a new merge.
            OutcomeKind::Answered => last = words(&pushed),
            // The write may have applied: it is never pushed again blind.
            // The policy settled it by reading until the deadline and found
            // it not landed, or the target moved; the next round reads the
            // target again, and the target at this merge is the job landed
            // (a new merge is leased on what that round reads, so the two
            // cannot both land).
            OutcomeKind::Unknown => {
                last = words(&pushed);
                unsettled.push(merge);
            }
            // The id ran before (`previous` says what it was and how it
            // ended): a job re-run after a crash. Stop; an operator decides.
            OutcomeKind::Rejected => {
                let kind = pushed
                    .previous
                    .as_ref()
                    .and_then(|p| p.kind.clone())
                    .unwrap_or_default();
                return Ok(JobEnd::GaveUp(format!(
                    "{id:?} ran before ({kind})",
                    id = pushed.operation.id
                )));
            }
            OutcomeKind::LocalError => return Err(words(&pushed).into()),
        }
    }
    Ok(JobEnd::GaveUp(format!("{ROUNDS} rounds: {last}")))
}

/// A merge commit of `candidate` into `target`: a three-way merge of the
/// two trees on their merge base (gix's `merge`, which sluice-git's
/// `merge` feature turns on), as `git merge` makes it, with the
/// repository's merge configuration (renames, conflict style). `None` when
/// the merge leaves a conflict git would not resolve on its own: the
/// candidate needs a rebase.
fn merge_commit(
    repo: &gix::Repository,
    target: ObjectId,
    candidate: ObjectId,
    job: &Job<'_>,
) -> Result<Option<ObjectId>, Box<dyn Error>> {
    let labels = gix::merge::blob::builtin_driver::text::Labels {
        ancestor: Some("merge base".into()),
        current: Some(job.target.into()),
        other: Some(job.candidate.into()),
    };
    let options = gix::merge::commit::Options::from(repo.tree_merge_options()?);
    let mut merged = repo.merge_commits(target, candidate, labels, options)?;
    let unresolved = gix::merge::tree::TreatAsUnresolved::git();
    if merged.tree_merge.has_unresolved_conflicts(unresolved) {
        return Ok(None);
    }
    let tree = merged.tree_merge.tree.write()?.detach();
    let who = gix::actor::Signature {
        name: "sluice".into(),
        email: "sluice@example.invalid".into(),
        time: gix::date::Time::now_utc(),
    };
    let commit = gix::objs::Commit {
        tree,
        parents: [target, candidate].into_iter().collect(),
        author: who.clone(),
        committer: who,
        encoding: None,
        message: format!("Merge branch '{}' into {}\n", job.candidate, job.target).into(),
        extra_headers: Vec::new(),
    };
    Ok(Some(repo.write_object(&commit)?.detach()))
}

/// The outcome's error in a line, or its kind.
fn words<T>(o: &sluice_policy::Outcome<T>) -> String {
    match &o.error {
        Some(e) => format!("{}: {e}", o.operation.kind),
        None => format!("{}: {}", o.operation.kind, o.kind.as_str()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, forge_url, repo, candidate, kept, ledger] = args.as_slice() else {
        return Err("usage: integrator <GIT-URL> <FORGE-API-URL> <OWNER/REPO> <CANDIDATE-BRANCH> <KEPT-REPO> <LEDGER>".into());
    };
    let (owner, name) = repo.split_once('/').ok_or("OWNER/REPO")?;
    let (git, forge) = clients(forge_url, Path::new(ledger))?;
    let kept = gix::open(kept)?;
    let job = Job {
        name: "integrator",
        url,
        repo: RepoRef::new(owner, name),
        candidate,
        target: "main",
    };
    println!("{:?}", land(&git, &forge, &job, &kept)?);
    Ok(())
}
