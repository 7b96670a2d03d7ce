//! What the binary's commands share: the policy of this process (its
//! ledger and settle pause), the credentials, the cancel flag raised by a
//! signal, the call options built from them, and the output — the outcome
//! printed as one JSON document or as text and a summary, its exit code
//! returned.

use std::sync::Arc;

use secrecy::SecretString;
use serde::Serialize;
use sluice_cli::{contract, human, AppFlags, Common};
use sluice_git::CallOptions;
use sluice_policy::{
    CommandSource, Credential, CredentialError, CredentialSource, Effect, OperationInfo, Outcome,
    OutcomeKind, Policy, StaticSource,
};

use crate::{ledger_cmd, progress, stdout};

/// The policy of this process: the ledger file and settle pause given.
pub(crate) fn policy(common: &Common) -> Arc<Policy> {
    let mut b = Policy::builder();
    ledger_cmd::warn_id_without_ledger(common);
    if let Some(path) = &common.ledger {
        let (ledger, budgets) = ledger_cmd::open_ledger(path, common.bounds.deadline);
        b = b.ledger(ledger);
        if let Some(budgets) = budgets {
            b = b.budget_store(budgets);
        }
    }
    if let Some(settle) = common.settle {
        b = b.settle(settle);
    }
    Arc::new(b.build())
}

/// The call's credential source: `--token-command` (its result kept for
/// `--token-ttl`), or the GitHub App's flags; none without either.
pub(crate) fn credentials(common: &Common) -> Option<Arc<dyn CredentialSource>> {
    if let Some(app) = &common.app {
        return Some(app_source(common, app));
    }
    let c = common.token_command.as_ref()?;
    Some(if common.token_ttl.is_zero() {
        Arc::new(CommandSource::new(c.clone()))
    } else {
        Arc::new(crate::token_cache::KeptCommandSource::new(
            c,
            common.token_ttl,
        ))
    })
}

/// The forge's credential source: the call's ([`credentials`]), else
/// `GH_TOKEN`, else `GITHUB_TOKEN` (gh's order; never for git nor for
/// `http get`), else none.
fn forge_credentials(common: &Common) -> Option<Arc<dyn CredentialSource>> {
    credentials(common).or_else(|| {
        ["GH_TOKEN", "GITHUB_TOKEN"].iter().find_map(|name| {
            let token = std::env::var(name).ok()?;
            let token = token.trim();
            (!token.is_empty()).then(|| {
                Arc::new(StaticSource::new(SecretString::from(token.to_string())))
                    as Arc<dyn CredentialSource>
            })
        })
    })
}

/// The GitHub App's installation tokens, one operation's source (see
/// [`sluice_forge::GitHubAppSource::operation_source`]). A key that cannot
/// be read or parsed is a source whose every purchase is a local failure:
/// the operation ends `local-error`, its document printed, nothing sent.
fn app_source(common: &Common, app: &AppFlags) -> Arc<dyn CredentialSource> {
    let key = std::fs::read_to_string(&app.key_file).map_err(|e| {
        format!(
            "could not read the GitHub App's key {}: {e}",
            app.key_file.display()
        )
    });
    let source = key.and_then(|pem| {
        sluice_forge::GitHubAppSource::new(
            &app.api,
            app.app_id.clone(),
            app.installation_id,
            &SecretString::from(pem),
        )
        .and_then(|s| s.with_https(&common.https))
        .map_err(|e| format!("the GitHub App's key {}: {e}", app.key_file.display()))
    });
    match source {
        Ok(s) => Arc::new(s).operation_source(),
        Err(why) => Arc::new(Unbuyable(why)),
    }
}

/// A credential source that cannot buy: each purchase a local failure.
struct Unbuyable(String);

impl CredentialSource for Unbuyable {
    fn credential(&self) -> Result<Credential, CredentialError> {
        Err(CredentialError::local(self.0.clone()))
    }
}

/// The cancel flag the signals raise (see [`crate::signals`]).
pub(crate) fn cancel_flag() -> &'static sluice_policy::CancelFlag {
    crate::signals::cancel_flag()
}

pub(crate) fn git_options(common: &Common) -> CallOptions {
    let mut opts = CallOptions::new()
        .bounds(common.bounds)
        .cancel(cancel_flag());
    if let Some(id) = &common.operation_id {
        opts = opts.id(id.clone());
    }
    if let Some(c) = credentials(common) {
        opts = opts.credentials(c);
    }
    opts
}

/// The forge's call options: the bounds, the cancel flag, the id and the
/// credentials given (else `GH_TOKEN`, else `GITHUB_TOKEN`).
pub(crate) fn forge_options(common: &Common) -> sluice_forge::CallOptions {
    let mut opts = sluice_forge::CallOptions::new()
        .bounds(common.bounds)
        .cancel(cancel_flag());
    if let Some(id) = &common.operation_id {
        opts = opts.id(id.clone());
    }
    if let Some(source) = forge_credentials(common) {
        opts = opts.credentials(source);
    }
    opts
}

/// `http get`'s call options: as the forge's, without `GH_TOKEN` and
/// `GITHUB_TOKEN` (a URL anywhere never gets the forge's token).
pub(crate) fn http_get_options(common: &Common) -> sluice_forge::CallOptions {
    let mut opts = sluice_forge::CallOptions::new()
        .bounds(common.bounds)
        .cancel(cancel_flag());
    if let Some(id) = &common.operation_id {
        opts = opts.id(id.clone());
    }
    if let Some(source) = credentials(common) {
        opts = opts.credentials(source);
    }
    opts
}

/// A repository owned by another user that `safe.directory` does not
/// allow: the operation ends `local-error` (exit 5) before any of the
/// repository's configuration is read and before any call — its document
/// with `--json`, the summary otherwise, the cause on stderr either way.
pub(crate) fn refuse_untrusted(
    common: &Common,
    kind: &str,
    effect: Effect,
    remote: &str,
    e: sluice_git::Untrusted,
) -> u8 {
    let info = OperationInfo {
        id: common
            .operation_id
            .clone()
            .unwrap_or_else(|| format!("op-{}-refused", std::process::id())),
        kind: kind.to_string(),
        effect,
        remote: sluice_git::redact(remote),
        redirected: None,
    };
    let out: Outcome<()> = Outcome::local_error(info, e, common.bounds.deadline);
    emit(common, out, None, true)
}

/// Print the outcome and return its exit code (the outcome's, whether or
/// not stdout could be written: see [`stdout::write`]). With `--json`, exactly one
/// document on stdout; otherwise the value's text on stdout and the summary
/// on stderr (always for fetch and push; for reads only when there was
/// more than one attempt or the read did not succeed; with `-q`, never for
/// an outcome that succeeded).
pub(crate) fn emit<T: Serialize>(
    common: &Common,
    out: Outcome<T>,
    text: Option<String>,
    always_summary: bool,
) -> u8 {
    let code = sluice_cli::exit_code(out.kind);
    if common.json {
        stdout::write(format!("{}\n", contract::document(&out)).as_bytes());
        if out.kind == OutcomeKind::LocalError {
            // Nothing in the document may carry it (no attempt ran): the
            // local cause, in the caller's terms, on stderr.
            if let Some(e) = &out.error {
                eprintln!("error: {}", e.cause);
            }
        }
    } else {
        if let Some(t) = text {
            stdout::write(t.as_bytes());
        }
        let notable =
            out.kind != OutcomeKind::Succeeded || out.attempts.len() > 1 || human::held_long(&out);
        let quiet = common.quiet && out.kind == OutcomeKind::Succeeded;
        if quiet {
            // The remote's words are still said; the summary is not.
            let words: Vec<String> = (out.remote_messages.iter())
                .filter(|m| !is_pack_summary(m))
                .cloned()
                .collect();
            eprint!("{}", human::remote_lines(&words));
        } else if always_summary || notable {
            eprint!("{}", human::summary(&out));
        }
    }
    code
}

/// Whether `line` is the pack summary git's pack-objects ends its
/// progress with (`Total 4 (delta 0), reused 0 (delta 0), pack-reused 0`).
/// `git fetch -q` asks the server for no progress, so that line never
/// comes; the client does not ask, so `-q` leaves it out here.
fn is_pack_summary(line: &str) -> bool {
    line.strip_prefix("Total ").is_some_and(|rest| {
        rest.split_once(' ')
            .is_some_and(|(n, tail)| n.parse::<u64>().is_ok() && tail.starts_with("(delta "))
    })
}

/// `--progress` / `--no-progress` as the progress module takes them.
pub(crate) fn progress_mode(common: &Common) -> progress::Mode {
    match common.progress {
        Some(true) => progress::Mode::On,
        Some(false) => progress::Mode::Off,
        None => progress::Mode::Auto,
    }
}
