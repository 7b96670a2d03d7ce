//! The HTTP commands: `forge <CALL>` (one typed call of sluice-forge) and
//! `http get`, under the process's policy, their values shaped as the
//! contract gives them, printed as JSON or as lines for a person.

use anyhow::Context as _;
use serde::Serialize;
use sluice_cli::forge::ForgeCall;
use sluice_cli::{contract, human, Common, UsageError};
use sluice_forge::{ForgeClient, ForgeInputError};
use sluice_policy::Outcome;

use crate::session::{emit, forge_options, http_get_options, policy};

/// Run `call` against the API at `api`; the exit code.
pub(crate) fn run(common: &Common, api: &str, call: &ForgeCall) -> anyhow::Result<u8> {
    let client = ForgeClient::builder(api)
        .policy(policy(common))
        .bounds(common.bounds)
        .https(common.https.clone())
        .build()
        .context("building the forge client")?;
    let opts = &forge_options(common);
    Ok(match call {
        ForgeCall::GetPull { repo, number } => {
            let out = client.get_pull(repo, *number, opts).map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_pull);
            emit(common, out, text, false)
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
        ForgeCall::CiStatus {
            repo,
            git_ref,
            query,
        } => {
            let out = client
                .ci_status_with(repo, git_ref, query, opts)
                .map_err(refused)?;
            let text = out.value.as_ref().map(human::forge_ci);
            emit(
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
        ForgeCall::Comment { repo, number, body } => {
            let out = client
                .create_issue_comment(repo, *number, body, opts)
                .map_err(refused)?;
            let text = out.value.as_ref().map(|c| human::forge_comment(*number, c));
            emit(common, out.map(|c| contract::comment_value(&c)), text, true)
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

/// `http get <URL>`: the body as the server sent it (a newline added when
/// it has none).
pub(crate) fn http_get(common: &Common, url: &str) -> anyhow::Result<u8> {
    let (parsed, _) =
        sluice_forge::split_user_info(url).map_err(|e| UsageError::new("<URL>", e.to_string()))?;
    let base = format!("{}/", parsed.origin().ascii_serialization());
    let client = ForgeClient::builder(&base)
        .policy(policy(common))
        .bounds(common.bounds)
        .https(common.https.clone())
        .build()
        .context("building the HTTP client")?;
    let out = client
        .get_url(url, &http_get_options(common))
        .map_err(|e| UsageError::new("<URL>", e.to_string()))?;
    let text = out.value.as_ref().map(|r| {
        let mut b = r.body.clone();
        if !b.is_empty() && !b.ends_with('\n') {
            b.push('\n');
        }
        b
    });
    Ok(emit(
        common,
        out.map(|v| contract::http_value(&v)),
        text,
        false,
    ))
}

/// The forge's refusal of an argument the command line let through, as
/// the usage error it is (nothing was sent).
fn refused(e: ForgeInputError) -> UsageError {
    let arg = match &e {
        ForgeInputError::Repo { .. } => "<OWNER/REPO>",
        ForgeInputError::Sha(_) => "--sha",
        ForgeInputError::RefName { .. } => "<REF>",
        ForgeInputError::Number { .. } => "<N>",
        ForgeInputError::RequiredAndExcluded { .. } => "--exclude",
        ForgeInputError::CheckName(_) => "--require",
        _ => "<ARGS>",
    };
    UsageError::new(arg, e.to_string())
}

/// A write's outcome: its summary is always printed (it says how the
/// write was settled when its answer was lost).
fn write<T: Serialize>(common: &Common, out: Outcome<T>, text: Option<String>) -> u8 {
    emit(common, out, text, true)
}
