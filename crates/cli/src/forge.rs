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

use sluice_forge::{MergeMethod, RepoRef};

pub use crate::args::ForgeArgs;
use crate::usage::UsageError;

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
