//! `sluice-remote forge …`: the forge's typed calls on the command line,
//! parsed raw ([`ForgeArgs`]) and validated into a [`ForgeCall`].
//!
//! | command | operation kind | effect |
//! |---|---|---|
//! | `get-pull <OWNER>/<REPO> <N>` | `get-pull` | read |
//! | `merge-pull <OWNER>/<REPO> <N> --sha <OID> [--method M]` | `merge-pull` | write |
//! | `update-ref <OWNER>/<REPO> <REF> --sha <OID> [--force]` | `update-ref` | write |
//! | `ci-status <OWNER>/<REPO> <REF>` | `ci-status` | read |
//! | `create-check-run <OWNER>/<REPO> --name S --head-sha OID --external-id S` | `create-check-run` | write |
//! | `update-check-run <OWNER>/<REPO> <ID> [--status S] [--conclusion S]` | `update-check-run` | write |
//!
//! `--api <URL>` (anywhere on the line) is the REST API's base, http:// or
//! https://, its path kept (`/api/v3`); the default is
//! [`DEFAULT_API`].

use clap::Subcommand;
use sluice_forge::{MergeMethod, RepoRef};

use crate::UsageError;

/// The API's base when `--api` is not given.
pub const DEFAULT_API: &str = "https://api.github.com";

/// The statuses a check run takes.
const STATUSES: [&str; 3] = ["queued", "in_progress", "completed"];
/// The conclusions a completed check run takes.
const CONCLUSIONS: [&str; 8] = [
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
];

/// `forge` subcommands (raw).
#[derive(Subcommand, Debug)]
pub enum ForgeArgs {
    /// Read a pull request (printed as the forge sent it with --json).
    #[command(after_help = help_with_examples!("  sluice-remote forge get-pull octo/repo 42 --token-command 'cat token.txt' --json"))]
    GetPull {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The pull request's number.
        #[arg(value_name = "N")]
        number: String,
    },
    /// Merge a pull request at the head you checked; a lost answer is
    /// settled by reading the pull request, never by merging again.
    #[command(after_help = help_with_examples!("  sluice-remote forge merge-pull octo/repo 42 --sha 0123456789abcdef0123456789abcdef01234567 --method squash"))]
    MergePull {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The pull request's number.
        #[arg(value_name = "N")]
        number: String,
        /// The head commit the caller checked (40 hex digits).
        #[arg(long, value_name = "OID")]
        sha: String,
        /// merge (the default), squash or rebase.
        #[arg(long, value_name = "METHOD")]
        method: Option<String>,
    },
    /// Move a ref (`heads/main`) to a commit; the ref is read first, so a
    /// lost answer's settling read tells landed, not landed and moved apart.
    #[command(after_help = help_with_examples!("  sluice-remote forge update-ref octo/repo heads/main --sha 0123456789abcdef0123456789abcdef01234567"))]
    UpdateRef {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The ref, as `heads/main` (a leading `refs/` is dropped).
        #[arg(value_name = "REF")]
        git_ref: String,
        /// The commit to move it to (40 hex digits).
        #[arg(long, value_name = "OID")]
        sha: String,
        /// Move it even when that is not a fast-forward.
        #[arg(long)]
        force: bool,
    },
    /// A ref's CI: the combined status and every check run, all pages.
    #[command(after_help = help_with_examples!("  sluice-remote forge ci-status octo/repo 0123456789abcdef0123456789abcdef01234567 --json"))]
    CiStatus {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// A sha, branch or tag.
        #[arg(value_name = "REF")]
        git_ref: String,
    },
    /// Create a check run; a lost answer is settled by finding its
    /// external id among the head's check runs.
    #[command(after_help = help_with_examples!("  sluice-remote forge create-check-run octo/repo --name sluice --head-sha 0123456789abcdef0123456789abcdef01234567 --external-id land-42"))]
    CreateCheckRun {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The check run's name.
        #[arg(long, value_name = "S")]
        name: String,
        /// The commit it checks (40 hex digits).
        #[arg(long, value_name = "OID")]
        head_sha: String,
        /// Your own id for it, unique per check run.
        #[arg(long, value_name = "S")]
        external_id: String,
        /// queued, in_progress or completed.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// success, failure, neutral, cancelled, skipped, timed_out, ...
        #[arg(long, value_name = "S")]
        conclusion: Option<String>,
    },
    /// Update a check run's status or conclusion; the run is read first.
    #[command(after_help = help_with_examples!("  sluice-remote forge update-check-run octo/repo 4711 --conclusion success"))]
    UpdateCheckRun {
        /// `owner/name`.
        #[arg(value_name = "OWNER/REPO")]
        repo: String,
        /// The check run's id.
        #[arg(value_name = "ID")]
        id: String,
        /// queued, in_progress or completed.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// success, failure, neutral, cancelled, skipped, timed_out, ...
        #[arg(long, value_name = "S")]
        conclusion: Option<String>,
    },
}

/// A validated forge call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForgeCall {
    /// `get-pull`.
    GetPull {
        /// The repository.
        repo: RepoRef,
        /// The pull request's number.
        number: u64,
    },
    /// `merge-pull`.
    MergePull {
        /// The repository.
        repo: RepoRef,
        /// The pull request's number.
        number: u64,
        /// The head checked (40 lowercase hex).
        sha: String,
        /// How to merge.
        method: MergeMethod,
    },
    /// `update-ref`.
    UpdateRef {
        /// The repository.
        repo: RepoRef,
        /// `heads/main`.
        git_ref: String,
        /// The new sha (40 lowercase hex).
        sha: String,
        /// `--force`.
        force: bool,
    },
    /// `ci-status`.
    CiStatus {
        /// The repository.
        repo: RepoRef,
        /// A sha, branch or tag.
        git_ref: String,
    },
    /// `create-check-run`.
    CreateCheckRun {
        /// The repository.
        repo: RepoRef,
        /// The check run asked for.
        new: sluice_forge::NewCheckRun,
    },
    /// `update-check-run`.
    UpdateCheckRun {
        /// The repository.
        repo: RepoRef,
        /// The check run's id.
        id: u64,
        /// The fields to set.
        update: sluice_forge::CheckRunUpdate,
    },
}

impl ForgeCall {
    /// The operation kind (`get-pull`, `merge-pull`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            ForgeCall::GetPull { .. } => "get-pull",
            ForgeCall::MergePull { .. } => "merge-pull",
            ForgeCall::UpdateRef { .. } => "update-ref",
            ForgeCall::CiStatus { .. } => "ci-status",
            ForgeCall::CreateCheckRun { .. } => "create-check-run",
            ForgeCall::UpdateCheckRun { .. } => "update-check-run",
        }
    }
}

fn repo(text: &str) -> Result<RepoRef, UsageError> {
    text.parse::<RepoRef>()
        .map_err(|e| UsageError::new("<OWNER/REPO>", e))
}

fn number(arg: &str, text: &str) -> Result<u64, UsageError> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(UsageError::new(
            arg,
            format!("{text:?} is not a positive whole number"),
        )),
    }
}

fn oid(arg: &str, text: &str) -> Result<String, UsageError> {
    if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(UsageError::new(
            arg,
            format!("{text:?} is not a full object id (40 hex digits)"),
        ))
    }
}

fn one_of(arg: &str, text: Option<String>, allowed: &[&str]) -> Result<Option<String>, UsageError> {
    match text {
        Some(t) if !allowed.contains(&t.as_str()) => Err(UsageError::new(
            arg,
            format!("{t:?} is not one of {}", allowed.join(", ")),
        )),
        t => Ok(t),
    }
}

/// Check `--api`: an absolute http:// or https:// URL with a host (its
/// path is kept); the default when not given.
pub fn check_api(api: Option<&str>) -> Result<String, UsageError> {
    let Some(api) = api else {
        return Ok(DEFAULT_API.to_string());
    };
    let shown = sluice_policy::text::redact(api);
    let bad = |why: &str| UsageError::new("--api", format!("{shown:?}: {why}"));
    if !(api.starts_with("http://") || api.starts_with("https://")) {
        return Err(bad("not an http:// or https:// URL"));
    }
    let url = sluice_forge::Url::parse(api).map_err(|e| bad(&e.to_string()))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a base URL takes no query or fragment"));
    }
    Ok(api.to_string())
}

/// Validate a `forge` command's arguments.
pub fn validate_forge(args: ForgeArgs) -> Result<ForgeCall, UsageError> {
    Ok(match args {
        ForgeArgs::GetPull { repo: r, number: n } => ForgeCall::GetPull {
            repo: repo(&r)?,
            number: number("<N>", &n)?,
        },
        ForgeArgs::MergePull {
            repo: r,
            number: n,
            sha,
            method,
        } => ForgeCall::MergePull {
            repo: repo(&r)?,
            number: number("<N>", &n)?,
            sha: oid("--sha", &sha)?,
            method: match method {
                Some(m) => m.parse().map_err(|e| UsageError::new("--method", e))?,
                None => MergeMethod::Merge,
            },
        },
        ForgeArgs::UpdateRef {
            repo: r,
            git_ref,
            sha,
            force,
        } => {
            let name = git_ref.strip_prefix("refs/").unwrap_or(&git_ref);
            if name.is_empty()
                || name.starts_with('/')
                || name.ends_with('/')
                || name.contains("//")
                || name.contains("..")
                || !name.contains('/')
            {
                return Err(UsageError::new(
                    "<REF>",
                    format!("{git_ref:?} is not a ref such as heads/main"),
                ));
            }
            ForgeCall::UpdateRef {
                repo: repo(&r)?,
                git_ref: name.to_string(),
                sha: oid("--sha", &sha)?,
                force,
            }
        }
        ForgeArgs::CiStatus { repo: r, git_ref } => {
            if git_ref.is_empty() || git_ref.contains("..") {
                return Err(UsageError::new(
                    "<REF>",
                    format!("{git_ref:?} is not a sha, branch or tag"),
                ));
            }
            ForgeCall::CiStatus {
                repo: repo(&r)?,
                git_ref,
            }
        }
        ForgeArgs::CreateCheckRun {
            repo: r,
            name,
            head_sha,
            external_id,
            status,
            conclusion,
        } => {
            let mut new =
                sluice_forge::NewCheckRun::new(name, oid("--head-sha", &head_sha)?, external_id);
            new.status = one_of("--status", status, &STATUSES)?;
            new.conclusion = one_of("--conclusion", conclusion, &CONCLUSIONS)?;
            ForgeCall::CreateCheckRun {
                repo: repo(&r)?,
                new,
            }
        }
        ForgeArgs::UpdateCheckRun {
            repo: r,
            id,
            status,
            conclusion,
        } => {
            let mut update = sluice_forge::CheckRunUpdate::new();
            update.status = one_of("--status", status, &STATUSES)?;
            update.conclusion = one_of("--conclusion", conclusion, &CONCLUSIONS)?;
            if update.status.is_none() && update.conclusion.is_none() {
                return Err(UsageError::new(
                    "--status",
                    "update-check-run needs --status or --conclusion",
                ));
            }
            ForgeCall::UpdateCheckRun {
                repo: repo(&r)?,
                id: number("<ID>", &id)?,
                update,
            }
        }
    })
}
