//! Runs a `forge` command: one typed call of sluice-forge under the
//! process's policy, its value shaped as the contract gives it, printed
//! as JSON or as lines for a person.

use anyhow::Context as _;
use serde::Serialize;
use sluice_cli::forge::ForgeCall;
use sluice_cli::{contract, human, Common, UsageError};
use sluice_forge::{CallOptions, ForgeClient, ForgeInputError};
use sluice_policy::Outcome;

/// Run `call` against the API at `api`; the exit code.
pub(crate) fn run(common: &Common, api: &str, call: &ForgeCall) -> anyhow::Result<u8> {
    let client = ForgeClient::builder(api)
        .policy(crate::policy(common))
        .bounds(common.bounds)
        .https(common.https.clone())
        .build()
        .context("building the forge client")?;
    let mut opts = CallOptions::new()
        .bounds(common.bounds)
        .cancel(crate::cancel_flag());
    if let Some(id) = &common.operation_id {
        opts = opts.id(id.clone());
    }
    if let Some(source) = crate::credentials(common) {
        opts = opts.credentials(source);
    }
    let opts = &opts;
    Ok(match call {
        ForgeCall::GetPull { repo, number } => {
            let out = client.get_pull(repo, *number, opts).map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_pull);
            crate::emit(common, out, text, false)
        }
        ForgeCall::MergePull {
            repo,
            number,
            sha,
            method,
        } => {
            let out = client
                .merge_pull(repo, *number, sha, *method, opts)
                .map_err(refused)?;
            let text = out.value.as_ref().map(|v| human::forge_merge(*number, v));
            write(common, out, text)
        }
        ForgeCall::UpdateRef {
            repo,
            git_ref,
            sha,
            force,
        } => {
            let out = client
                .update_ref(repo, git_ref, sha, *force, opts)
                .map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_ref);
            write(common, out, text)
        }
        ForgeCall::CiStatus { repo, git_ref } => {
            let out = client.ci_status(repo, git_ref, opts).map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_ci);
            crate::emit(
                common,
                out.map(|v| contract::ci_status_value(&v)),
                text,
                false,
            )
        }
        ForgeCall::CreateCheckRun { repo, new } => {
            let out = client.create_check_run(repo, new, opts).map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_check_run);
            write(common, out, text)
        }
        ForgeCall::UpdateCheckRun { repo, id, update } => {
            let out = client
                .update_check_run(repo, *id, update, opts)
                .map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_check_run);
            write(common, out, text)
        }
    })
}

/// The forge's refusal of an argument the command line let through, as
/// the usage error it is (nothing was sent).
fn refused(e: ForgeInputError) -> UsageError {
    let arg = match &e {
        ForgeInputError::Repo { .. } => "<OWNER/REPO>",
        ForgeInputError::Sha(_) => "--sha",
        ForgeInputError::RefName { .. } => "<REF>",
        ForgeInputError::Number { .. } => "<N>",
        _ => "<ARGS>",
    };
    UsageError::new(arg, e.to_string())
}

/// A write's outcome: its summary is always printed (it says how the
/// write was settled when its answer was lost).
fn write<T: Serialize>(common: &Common, out: Outcome<T>, text: Option<String>) -> u8 {
    crate::emit(common, out, text, true)
}
