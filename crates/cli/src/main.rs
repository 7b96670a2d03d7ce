//! The `sluice-remote` binary: parses and validates the command line
//! (`sluice_cli`), runs one operation through sluice-git or sluice-forge
//! under the policy, prints the outcome (one JSON document with `--json`,
//! a short human summary otherwise) and exits with the outcome's code:
//! 0 succeeded · 1 answered · 2 usage or bad input · 3 unknown · 4 rejected
//! · 5 local-error.
#![forbid(unsafe_code)]

// `demo` runs against the test kit's daemon and fault proxy, so it is
// built only with the `demo` feature (on by default); without it, `demo`
// says so (see `no_demo.rs`) and the binary links no test kit.
#[cfg(feature = "demo")]
mod demo;
#[cfg(not(feature = "demo"))]
#[path = "no_demo.rs"]
mod demo;
mod forge_run;
mod ledger_cmd;
mod progress;
mod summary;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use serde::Serialize;
use sluice_cli::{contract, human, Action, Common, Config, ParseError, UsageError};
use sluice_git::{CallOptions, GitClient};
use sluice_policy::{
    AttemptError, CommandSource, CredentialSource, Effect, OperationInfo, Outcome, OutcomeKind,
    Policy, Stopped,
};

fn main() -> ExitCode {
    // A bug must still end in one line on stderr, never a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("error: internal error{at}: {msg}");
    }));
    let config = match sluice_cli::parse(std::env::args_os()) {
        Ok(c) => c,
        Err(ParseError::Clap(e)) => {
            // --help / --version print to stdout and exit 0; usage errors
            // print to stderr and exit 2.
            if e.kind() == clap::error::ErrorKind::MissingRequiredArgument {
                eprint!("{}", sluice_cli::clap_message(&e));
            } else {
                let _ = e.print();
            }
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
        Err(ParseError::Usage(e)) => return usage(&e),
    };
    // `-v`: the metrics of this run, summed up on stderr at exit.
    let metrics = if config.common.verbose > 0 {
        init_tracing(config.common.verbose);
        summary::Summary::install()
    } else {
        None
    };
    let code = run_action(&config);
    if let Some(text) = metrics.map(|m| m.render()).filter(|t| !t.is_empty()) {
        eprint!("metrics:\n{text}");
    }
    code
}

fn run_action(config: &Config) -> ExitCode {
    if let Action::Demo = config.action {
        return ExitCode::from(demo::run());
    }
    match run(config) {
        Ok(code) => ExitCode::from(code),
        Err(e) => match e.downcast_ref::<UsageError>() {
            Some(u) => usage(u),
            None => {
                // The workspace's one chain joiner: each cause once, and
                // no URL's user info.
                eprintln!("error: {}", sluice_policy::text::error_chain(e.as_ref()));
                ExitCode::from(sluice_cli::EXIT_USAGE)
            }
        },
    }
}

fn usage(e: &UsageError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(sluice_cli::EXIT_USAGE)
}

/// `-v`: debug tracing of the sluice crates to stderr (`-vv`: trace).
fn init_tracing(verbose: u8) {
    let level = if verbose >= 2 { "trace" } else { "debug" };
    let filter = [
        "sluice_policy",
        "sluice_git",
        "sluice_forge",
        "sluice_cli",
        "sluice_remote",
        "sluice_testkit",
    ]
    .iter()
    .fold(String::from("warn"), |acc, c| format!("{acc},{c}={level}"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// The policy of this process: the ledger file and settle pause given.
fn policy(common: &Common) -> Arc<Policy> {
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

fn credentials(common: &Common) -> Option<Arc<dyn CredentialSource>> {
    common
        .token_command
        .as_ref()
        .map(|c| Arc::new(CommandSource::new(c.clone())) as Arc<dyn CredentialSource>)
}

/// Raised by the first SIGINT or SIGTERM (what a service manager sends):
/// the operation stops trying, a push whose answer was not read is settled
/// by reading, and the document is still printed. A second signal exits at
/// once (130), removing the temporary pack files first.
fn cancel_flag() -> &'static sluice_policy::CancelFlag {
    static FLAG: std::sync::OnceLock<sluice_policy::CancelFlag> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = sluice_policy::CancelFlag::new();
        let raised = flag.clone();
        let _ = ctrlc::set_handler(move || {
            if raised.is_cancelled() {
                sluice_git::remove_temporary_files();
                std::process::exit(130);
            }
            eprintln!("interrupted: stopping (a push whose request was complete is settled by reading first)");
            raised.cancel();
        });
        flag
    })
}

fn git_options(common: &Common) -> CallOptions {
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

fn run(config: &Config) -> anyhow::Result<u8> {
    let common = &config.common;
    match &config.action {
        Action::LsRefs { url, prefixes } => {
            let client = GitClient::new(policy(common)).with_https(common.https.clone());
            let out = client
                .ls_refs(url, prefixes, &git_options(common))
                .map_err(|e| sluice_cli::input_error(&e))?;
            let text = out.value.as_deref().map(human::ls_refs);
            Ok(emit(
                common,
                out.map(|v| contract::ls_refs_value(&v)),
                text,
                false,
            ))
        }
        Action::Fetch {
            url,
            refspecs,
            repo,
            options,
            tags_given,
        } => fetch(common, url, refspecs, repo.as_deref(), options, *tags_given),
        Action::Push {
            url,
            specs,
            leases,
            repo,
            options,
            porcelain,
        } => push(
            common,
            url,
            specs,
            leases,
            repo.as_deref(),
            options,
            *porcelain,
        ),
        Action::HttpGet { url } => {
            let (parsed, _) = sluice_forge::split_user_info(url)
                .map_err(|e| UsageError::new("<URL>", e.to_string()))?;
            let base = format!("{}/", parsed.origin().ascii_serialization());
            let client = sluice_forge::ForgeClient::builder(&base)
                .policy(policy(common))
                .bounds(common.bounds)
                .https(common.https.clone())
                .build()
                .context("building the HTTP client")?;
            let opts = sluice_forge::CallOptions {
                bounds: Some(common.bounds),
                id: common.operation_id.clone(),
                credentials: credentials(common),
                cancel: Some(cancel_flag().clone()),
            };
            let out = client
                .get_url(url, opts)
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
        Action::Forge { api, call } => forge_run::run(common, api, call),
        Action::LedgerShow { id } => ledger_cmd::show(common, id),
        Action::LedgerList { since } => ledger_cmd::list(common, *since),
        Action::Demo => Ok(demo::run()),
    }
}

/// `fetch <URL|REMOTE> [<REFSPEC>...]`: the repository opened (or found)
/// and checked, the remote read by name when it is one, the fetch, its
/// lines as git prints them.
fn fetch(
    common: &Common,
    url: &str,
    refspecs: &[String],
    repo: Option<&std::path::Path>,
    options: &sluice_git::FetchOptions,
    tags_given: bool,
) -> anyhow::Result<u8> {
    let repo = match sluice_cli::open_repo(repo) {
        Ok(r) => r,
        Err(sluice_cli::RepoError::Usage(u)) => return Err(u.into()),
        Err(sluice_cli::RepoError::Untrusted(e)) => {
            return Ok(refuse_untrusted(common, "fetch", Effect::Read, url, &e))
        }
    };
    let target = sluice_cli::resolve_remote(common, url, &repo, gix::remote::Direction::Fetch)?;
    let https = sluice_cli::https_for_repo(common, &repo)?;
    let client = GitClient::new(policy(common)).with_https(https);
    let bar = progress::Bar::new("fetch", common.verbose > 0, progress_mode(common));
    let mut opts = git_options(common);
    if let Some(cb) = bar.callback() {
        opts = opts.progress(cb);
    }
    let out = match &target.remote {
        Some(remote) => {
            let mut options = *options;
            if !tags_given {
                options.tags = remote.tags;
            }
            client.fetch_remote(remote, refspecs, &repo, &options, &opts)
        }
        None => client.fetch_with(&target.url, refspecs, &repo, options, &opts),
    }
    .map_err(|e| sluice_cli::input_error(&e));
    bar.finish();
    let out = out?;
    let view = view_after(&repo);
    let abbrev = |id: &gix::ObjectId| abbreviate(view.as_ref(), id);
    let text = out
        .value
        .as_deref()
        .map(|v| human::fetch(&out.operation.remote, v, common.verbose > 0, &abbrev));
    Ok(emit(
        common,
        out.map(|v| contract::fetch_value(&v)),
        text,
        true,
    ))
}

/// `push <URL|REMOTE> [+]<SRC>[:<DST>]...`: the repository opened (or
/// found) and checked, the remote read by name when it is one, the
/// updates resolved, the push, the remote-tracking refs of what landed,
/// its lines as git prints them.
fn push(
    common: &Common,
    url: &str,
    specs: &[sluice_git::PushSpec],
    leases: &std::collections::BTreeMap<String, sluice_git::LeaseSpec>,
    repo: Option<&std::path::Path>,
    options: &sluice_git::PushOptions,
    porcelain: bool,
) -> anyhow::Result<u8> {
    let repo = match sluice_cli::open_repo(repo) {
        Ok(r) => r,
        Err(sluice_cli::RepoError::Usage(u)) => return Err(u.into()),
        Err(sluice_cli::RepoError::Untrusted(e)) => {
            let effect = if options.dry_run {
                Effect::Read
            } else {
                Effect::Write
            };
            return Ok(refuse_untrusted(common, "push", effect, url, &e));
        }
    };
    let target = sluice_cli::resolve_remote(common, url, &repo, gix::remote::Direction::Push)?;
    let updates = sluice_cli::resolve_updates(specs, leases, url, &repo)?;
    let https = sluice_cli::https_for_repo(common, &repo)?;
    let client = GitClient::new(policy(common)).with_https(https);
    let bar = progress::Bar::new("push", common.verbose > 0, progress_mode(common));
    let mut opts = git_options(common);
    if let Some(cb) = bar.callback() {
        opts = opts.progress(cb);
    }
    let out = client
        .push(&target.url, &updates, options, &repo, &opts)
        .map_err(|e| sluice_cli::input_error(&e));
    bar.finish();
    let out = out?;
    if !options.dry_run {
        update_tracking(&target, &repo, out.value.as_ref());
    }
    // What git prints: ids abbreviated as git does, forced updates
    // told from fast-forwards.
    let view = view_after(&repo);
    let abbrev = |id: &gix::ObjectId| abbreviate(view.as_ref(), id);
    let fast_forward = |old: gix::ObjectId, new: gix::ObjectId| {
        view.as_ref()
            .and_then(|v| v.merge_base(old, new).ok().flatten())
            .is_some_and(|base| base.detach() == old)
    };
    let full_src = |src: &str| {
        view.as_ref()
            .and_then(|v| v.find_reference(src).ok())
            .map(|r| r.name().as_bstr().to_string())
            .unwrap_or_else(|| src.to_string())
    };
    let text = out.value.as_ref().map(|r| {
        let lines = human::push_lines(specs, r, &abbrev, &fast_forward, &full_src);
        if porcelain {
            // git says `Done` once the exchange completed, rejections
            // or not; not when its answer is unknown.
            let done = matches!(out.kind, OutcomeKind::Succeeded | OutcomeKind::Answered);
            human::push_porcelain(&out.operation.remote, &lines, done)
        } else {
            human::push(&out.operation.remote, &lines, common.verbose > 0)
        }
    });
    Ok(emit(
        common,
        out.map(|v| contract::push_value(&v)),
        text,
        !porcelain,
    ))
}

/// A repository owned by another user that `safe.directory` does not
/// allow: the operation ends `local-error` (exit 5) before any of the
/// repository's configuration is read and before any call — its document
/// with `--json`, the summary otherwise, the cause on stderr either way.
fn refuse_untrusted(
    common: &Common,
    kind: &str,
    effect: Effect,
    remote: &str,
    e: &sluice_git::Untrusted,
) -> u8 {
    let out: Outcome<()> = Outcome {
        kind: OutcomeKind::LocalError,
        value: None,
        error: Some(AttemptError::local("connect", e.to_string())),
        operation: OperationInfo {
            id: common
                .operation_id
                .clone()
                .unwrap_or_else(|| format!("op-{}-refused", std::process::id())),
            kind: kind.to_string(),
            effect,
            remote: sluice_git::redact(remote),
            redirected: None,
        },
        deadline_ms: u64::try_from(common.bounds.deadline.as_millis()).unwrap_or(u64::MAX),
        elapsed_ms: 0,
        may_have_applied: (effect == Effect::Write).then_some(false),
        stopped: Some(Stopped::LocalError),
        attempts: Vec::new(),
        reconciled: None,
        refused_credentials: Vec::new(),
        previous: None,
        remote_messages: Vec::new(),
        remote_messages_dropped: Default::default(),
        recorded: None,
    };
    emit(common, out, None, true)
}

/// After a push, the remote-tracking refs of the refs that landed, as git
/// updates them: for the remote named, or else the configured remote whose
/// URL names the same repository (the one a value-less `--lease` reads).
/// A tracking ref that cannot be written is said on stderr; the push's
/// outcome stands.
fn update_tracking(
    target: &sluice_cli::Target,
    repo: &gix::Repository,
    report: Option<&sluice_git::PushReport>,
) {
    let Some(report) = report else {
        return;
    };
    let remote = target
        .remote
        .clone()
        .or_else(|| sluice_git::NamedRemote::for_url(repo, &target.url));
    let Some(remote) = remote else {
        return;
    };
    let Some(view) = view_after(repo) else {
        return;
    };
    if let Err(e) = remote.update_tracking_refs(&view, &report.refs) {
        eprintln!(
            "warning: the push landed, but the remote-tracking refs of {:?} were not updated: {e}",
            remote.name
        );
    }
}

/// A view of `repo` opened after the operation, so the objects it brought
/// are seen (`None` when it cannot be opened: ids are then not shortened
/// against the repository).
fn view_after(repo: &gix::Repository) -> Option<gix::Repository> {
    gix::open_opts(repo.git_dir(), repo.open_options().clone()).ok()
}

/// `id` abbreviated as git abbreviates it (core.abbrev, auto length).
fn abbreviate(view: Option<&gix::Repository>, id: &gix::ObjectId) -> String {
    match view {
        Some(v) => gix::prelude::ObjectIdExt::attach(*id, v)
            .shorten_or_id()
            .to_string(),
        None => id.to_hex_with_len(7).to_string(),
    }
}

/// Print the outcome and return its exit code. With `--json`, exactly one
/// document on stdout; otherwise the value's text on stdout and the summary
/// on stderr (always for fetch and push; for reads only when there was
/// more than one attempt or the read did not succeed).
fn emit<T: Serialize>(
    common: &Common,
    out: Outcome<T>,
    text: Option<String>,
    always_summary: bool,
) -> u8 {
    let code = sluice_cli::exit_code(out.kind);
    let stdout = std::io::stdout();
    let mut stdout = stdout.lock();
    if common.json {
        let _ = writeln!(stdout, "{}", contract::document(&out));
        if out.kind == OutcomeKind::LocalError {
            // Nothing in the document may carry it (no attempt ran): the
            // local cause, in the caller's terms, on stderr.
            if let Some(e) = &out.error {
                eprintln!("error: {}", e.cause);
            }
        }
    } else {
        if let Some(t) = text {
            let _ = stdout.write_all(t.as_bytes());
        }
        let notable = out.kind != OutcomeKind::Succeeded || out.attempts.len() > 1;
        if always_summary || notable {
            eprint!("{}", human::summary(&out));
        }
    }
    let _ = stdout.flush();
    code
}

/// `--progress` / `--no-progress` as the progress module takes them.
fn progress_mode(common: &Common) -> progress::Mode {
    match common.progress {
        Some(true) => progress::Mode::On,
        Some(false) => progress::Mode::Off,
        None => progress::Mode::Auto,
    }
}
