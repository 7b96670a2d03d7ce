//! Validation: clap's raw strings ([`crate::args`]) into a typed
//! [`Config`], one function per command's checks; every bad input a
//! [`UsageError`] naming its argument. Nothing here opens a repository or
//! calls a remote.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use sluice_git::{LeaseSpec, PushOptions, PushSpec, Remote, TransportKind};
use sluice_policy::{Bounds, Profile};

use crate::args::{ledger_shown, Cli, CommandArgs, GlobalArgs, HttpArgs, LedgerArgs};
use crate::forge;
use crate::usage::{strip_invalid_prefix, ParseError, UsageError};

/// What every command was given, validated.
#[derive(Clone)]
pub struct Common {
    /// The profile's bounds with the explicit figures applied.
    pub bounds: Bounds,
    /// The profile chosen (`command` by default).
    pub profile: Profile,
    /// The operation id, when given.
    pub operation_id: Option<String>,
    /// The ledger file, when given.
    pub ledger: Option<PathBuf>,
    /// The token command (http(s) only). Never printed.
    pub token_command: Option<String>,
    /// How long a token command's result is kept (zero: not kept).
    pub token_ttl: Duration,
    /// The GitHub App flags, when given (all three).
    pub app: Option<AppFlags>,
    /// The settle pause, when given.
    pub settle: Option<Duration>,
    /// The https settings (`--ca-file` read, `--proxy` / `--no-proxy`).
    pub https: sluice_git::HttpsConfig,
    /// One JSON document on stdout.
    pub json: bool,
    /// `-v`: git's verbose lines (refs left as they were); 0 without.
    pub verbose: u8,
    /// `-q`: no progress, no summary of a succeeded outcome, no lines for
    /// refs updated or up to date (nothing changes with `--json`).
    pub quiet: bool,
    /// `--trace`: 0 off, 1 debug for the sluice crates, 2+ trace (RUST_LOG
    /// turns tracing on too).
    pub trace: u8,
    /// `--metrics`: the run's metrics on stderr at exit.
    pub metrics: bool,
    /// `--progress` (`Some(true)`), `--no-progress` (`Some(false)`), or
    /// neither: shown when stderr is a terminal.
    pub progress: Option<bool>,
}

impl std::fmt::Debug for Common {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Common")
            .field("bounds", &self.bounds)
            .field("profile", &self.profile)
            .field("operation_id", &self.operation_id)
            .field("ledger", &self.ledger.as_deref().map(ledger_shown))
            .field(
                "token_command",
                &self.token_command.as_ref().map(|_| "<hidden>"),
            )
            .field("token_ttl", &self.token_ttl)
            .field("app", &self.app)
            .field("settle", &self.settle)
            .field("https", &self.https)
            .field("json", &self.json)
            .field("verbose", &self.verbose)
            .field("quiet", &self.quiet)
            .field("trace", &self.trace)
            .field("metrics", &self.metrics)
            .field("progress", &self.progress)
            .finish()
    }
}

/// `--app-id`, `--app-key` and `--installation-id`: a GitHub App's
/// installation tokens as the credential (the forge's, and git's over
/// https).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppFlags {
    /// The app's id (or client id).
    pub app_id: String,
    /// The path of its private key's PEM file (read when the first token
    /// is bought: a key that cannot be read is a `local-error`).
    pub key_file: PathBuf,
    /// The installation's id.
    pub installation_id: u64,
    /// The API that sells its tokens: `--api`, or GitHub's.
    pub api: String,
}

/// A validated command.
#[derive(Clone, Debug)]
pub enum Action {
    /// `ls-refs <URL|REMOTE> [<PATTERN>...] [--prefix P]... [--heads]
    /// [--tags] [--exit-code]`
    LsRefs {
        /// The remote URL, or a configured remote's name (user info is
        /// removed from every output).
        url: String,
        /// `git ls-remote`'s patterns: a ref equal to one or ending in
        /// `/<pattern>`, globs allowed; matched on this side.
        patterns: Vec<String>,
        /// Literal prefixes asked of the remote (`--prefix`, and
        /// `refs/heads/` for `--heads`, `refs/tags/` for `--tags`).
        prefixes: Vec<String>,
        /// `--exit-code`: exit 2 when no ref matched.
        exit_code: bool,
    },
    /// `fetch <URL|REMOTE> [<REFSPEC>...] [--repo DIR]`
    Fetch {
        /// The remote URL, or a configured remote's name.
        url: String,
        /// Fetch refspecs, each parsed once (none: the remote's `fetch`
        /// lines, or a URL's `HEAD`).
        refspecs: Vec<String>,
        /// The local repository (`None`: found from the working directory).
        repo: Option<PathBuf>,
        /// `--prune`, `--tags`, `--no-tags`.
        options: sluice_git::FetchOptions,
        /// Whether `--tags` or `--no-tags` was given (else a remote's
        /// `tagOpt` decides).
        tags_given: bool,
    },
    /// `push <URL|REMOTE> [+]SRC:DST... [--repo DIR] ...`
    Push {
        /// The remote URL, or a configured remote's name.
        url: String,
        /// The parsed push specs, in order.
        specs: Vec<PushSpec>,
        /// Leases by destination ref, as written (full or short).
        leases: BTreeMap<String, LeaseSpec>,
        /// The local repository (`None`: found from the working directory).
        repo: Option<PathBuf>,
        /// `--atomic`, `--push-option` and `--dry-run`.
        options: PushOptions,
        /// `--porcelain`.
        porcelain: bool,
    },
    /// `http get <URL>`
    HttpGet {
        /// The absolute http(s) URL.
        url: String,
    },
    /// `forge <CALL> ...`
    Forge {
        /// The API's base URL (`--api`, or the default).
        api: String,
        /// The validated call.
        call: forge::ForgeCall,
    },
    /// `ledger show <ID>` (needs `--ledger`).
    LedgerShow {
        /// The operation id.
        id: String,
    },
    /// `ledger list [--since <DUR>]` (needs `--ledger`).
    LedgerList {
        /// How far back (default one day).
        since: Duration,
    },
    /// `completions <SHELL>`: the shell's completions, from the clap
    /// definitions.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// `man`: the man page (roff), from the clap definitions.
    Man,
    /// `demo`
    Demo,
}

impl Action {
    /// The operation kind of the contract (`ls-refs`, `fetch`, `push`,
    /// `http-get`, `demo`).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::LsRefs { .. } => "ls-refs",
            Action::Fetch { .. } => "fetch",
            Action::Push { .. } => "push",
            Action::HttpGet { .. } => "http-get",
            Action::Forge { call, .. } => call.kind(),
            Action::LedgerShow { .. } => "ledger-show",
            Action::LedgerList { .. } => "ledger-list",
            Action::Completions { .. } => "completions",
            Action::Man => "man",
            Action::Demo => "demo",
        }
    }
}

/// A validated command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// The global flags.
    pub common: Common,
    /// The command.
    pub action: Action,
}

/// Parse and validate a command line (the first item is the program name).
/// Never panics; never touches the file system except to check that the
/// `--ledger` file's directory exists and to read the `--ca-file` files.
/// `-C` is not applied here (the binary applies it with [`enter_dirs`]
/// between clap and [`validate`]): relative paths are taken from the
/// process's working directory.
pub fn parse<I, T>(args: I) -> Result<Config, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(ParseError::Clap)?;
    validate(cli).map_err(ParseError::Usage)
}

/// `-C <DIR>`..., as git applies them: each directory entered in turn (a
/// relative one from the one before; an empty one is no change), before
/// anything else is read. One that cannot be entered is bad input naming
/// it.
pub fn enter_dirs(dirs: &[String]) -> Result<(), UsageError> {
    for dir in dirs.iter().filter(|d| !d.is_empty()) {
        std::env::set_current_dir(dir)
            .map_err(|e| UsageError::new("-C", format!("cannot change to {dir:?}: {e}")))?;
    }
    Ok(())
}

/// Parse a duration (`500ms`, `12s`, `5m`, `1h 30m`).
pub fn parse_duration(arg: &str, text: &str, allow_zero: bool) -> Result<Duration, UsageError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        UsageError::new(
            arg,
            format!("{text:?} is not a duration like 500ms, 12s or 5m ({e})"),
        )
    })?;
    if d.is_zero() && !allow_zero {
        return Err(UsageError::new(
            arg,
            format!("{text:?}: must be more than zero"),
        ));
    }
    Ok(d)
}

fn parse_max_attempts(text: &str) -> Result<u32, UsageError> {
    let n: u32 = text.trim().parse().map_err(|e| {
        UsageError::new(
            "--max-attempts",
            format!("{text:?} is not a whole number ({e})"),
        )
    })?;
    if n == 0 {
        return Err(UsageError::new(
            "--max-attempts",
            "0: at least 1 attempt is needed",
        ));
    }
    Ok(n)
}

fn check_operation_id(id: &str) -> Result<(), UsageError> {
    let bad = |why: &str| UsageError::new("--operation-id", format!("{id:?}: {why}"));
    if id.is_empty() {
        return Err(bad("empty"));
    }
    if id.chars().count() > 256 {
        return Err(bad("longer than 256 characters"));
    }
    if id.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad("contains whitespace or control characters"));
    }
    Ok(())
}

fn check_ledger(path: &Path) -> Result<(), UsageError> {
    // A database: checked when it is connected to.
    if path.to_str().is_some_and(sluice_ledger::is_postgres_url) {
        return Ok(());
    }
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(UsageError::new("--ledger", "empty path"));
    }
    if path.is_dir() {
        return Err(UsageError::new(
            "--ledger",
            format!("{shown} is a directory, not a file"),
        ));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(UsageError::new(
                "--ledger",
                format!("{shown}: its directory does not exist"),
            ));
        }
    }
    Ok(())
}

/// Check a git remote URL; returns its transport.
pub fn check_git_url(url: &str) -> Result<TransportKind, UsageError> {
    Remote::parse(url)
        .map(|r| r.kind)
        .map_err(|e| UsageError::new("<URL>", format!("{:?}: {}", e.url, e.reason)))
}

/// Check an absolute http(s) URL for `http get`.
pub fn check_http_url(url: &str) -> Result<(), UsageError> {
    let shown = sluice_git::redact(url);
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(UsageError::new(
            "<URL>",
            format!("{shown:?}: not an absolute http:// or https:// URL"),
        ));
    }
    if url.chars().any(char::is_control) {
        return Err(UsageError::new(
            "<URL>",
            format!("{shown:?}: contains control characters"),
        ));
    }
    sluice_forge::split_user_info(url)
        .map(|_| ())
        .map_err(|e| UsageError::new("<URL>", e.to_string()))
}

fn check_fetch_refspec(spec: &str) -> Result<(), UsageError> {
    use gix::bstr::ByteSlice;
    gix::refspec::parse(
        spec.as_bytes().as_bstr(),
        gix::refspec::parse::Operation::Fetch,
    )
    .map(|_| ())
    .map_err(|e| UsageError::new("<REFSPEC>", format!("{spec:?}: {e}")))
}

/// Validate a parsed command line into a [`Config`]: the flags every
/// command takes first (`validate_common`), then the command's own
/// arguments, each command by a function of its own.
pub fn validate(cli: Cli) -> Result<Config, UsageError> {
    let g = cli.global;
    // A person's fetch or push of a large repository takes minutes.
    let default_profile = match cli.command {
        CommandArgs::Fetch { .. } | CommandArgs::Push { .. } => Profile::Transfer,
        _ => Profile::Command,
    };
    let common = validate_common(&g, default_profile)?;
    // The App's tokens are sold by the API: git commands take it with them.
    if g.api.is_some() && common.app.is_none() && !matches!(cli.command, CommandArgs::Forge { .. })
    {
        return Err(UsageError::new(
            "--api",
            "only forge commands (and a GitHub App's flags) take an API URL",
        ));
    }
    let action = match cli.command {
        CommandArgs::LsRefs {
            url,
            patterns,
            mut prefixes,
            heads,
            tags,
            exit_code,
        } => {
            if heads {
                prefixes.push("refs/heads/".to_string());
            }
            if tags {
                prefixes.push("refs/tags/".to_string());
            }
            validate_ls_refs(&common, url, patterns, prefixes, exit_code)?
        }
        CommandArgs::Fetch {
            url,
            refspecs,
            repo,
            prune,
            tags,
            no_tags,
            max_pack_size,
            max_object_size,
        } => {
            check_remote_arg(&common, &url)?;
            for s in &refspecs {
                check_fetch_refspec(s)?;
            }
            let tags_given = tags || no_tags;
            let tags = if tags {
                sluice_git::TagMode::All
            } else if no_tags {
                sluice_git::TagMode::None
            } else {
                sluice_git::TagMode::Follow
            };
            Action::Fetch {
                url,
                refspecs,
                repo,
                options: sluice_git::FetchOptions {
                    prune,
                    tags,
                    max_pack_size,
                    max_object_size,
                    ..Default::default()
                },
                tags_given,
            }
        }
        CommandArgs::Push {
            url,
            specs,
            delete,
            repo,
            leases,
            atomic,
            push_options,
            dry_run,
            porcelain,
        } => {
            check_push_outputs(&g, dry_run, porcelain)?;
            check_remote_arg(&common, &url)?;
            let specs = if delete { deletions(&specs)? } else { specs };
            let specs = validate_push_specs(&specs)?;
            let leases = validate_leases(&leases, &specs)?;
            check_push_options(&push_options)?;
            Action::Push {
                url,
                specs,
                leases,
                repo,
                options: PushOptions {
                    atomic,
                    push_options,
                    dry_run,
                },
                porcelain,
            }
        }
        CommandArgs::Http {
            method: HttpArgs::Get { url },
        } => {
            check_http_url(&url)?;
            Action::HttpGet { url }
        }
        CommandArgs::Forge { call } => Action::Forge {
            api: forge::check_api(g.api.as_deref())?,
            call: forge::validate_forge(call)?,
        },
        CommandArgs::Ledger { what } => validate_ledger(&g, what)?,
        CommandArgs::Completions { shell } => Action::Completions { shell },
        CommandArgs::Man => Action::Man,
        CommandArgs::Demo => {
            check_demo_flags(&g)?;
            Action::Demo
        }
    };
    Ok(Config { common, action })
}

/// The flags every command takes: the profile and the explicit figures
/// over it, the settle pause, the operation id, the ledger, the token
/// command, the https settings, the outputs.
fn validate_common(g: &GlobalArgs, default_profile: Profile) -> Result<Common, UsageError> {
    let profile = match &g.profile {
        Some(p) => p
            .parse::<Profile>()
            .map_err(|e| UsageError::new("--profile", e.to_string()))?,
        None => default_profile,
    };
    let mut bounds = profile.bounds();
    if let Some(d) = &g.deadline {
        bounds = bounds.with_deadline(parse_duration("--deadline", d, false)?);
    }
    if let Some(d) = &g.attempt_timeout {
        bounds = bounds.with_attempt_timeout(parse_duration("--attempt-timeout", d, false)?);
    }
    if let Some(n) = &g.max_attempts {
        bounds = bounds.with_max_attempts(parse_max_attempts(n)?);
    }
    let settle = match &g.settle {
        Some(s) => Some(parse_duration("--settle", s, true)?),
        None => None,
    };
    if let Some(id) = &g.operation_id {
        check_operation_id(id)?;
    }
    if let Some(l) = &g.ledger {
        check_ledger(l)?;
    }
    if let Some(t) = &g.token_command {
        if t.trim().is_empty() {
            return Err(UsageError::new("--token-command", "empty command"));
        }
    }
    let token_ttl = match &g.token_ttl {
        Some(t) => {
            if g.token_command.is_none() {
                return Err(UsageError::new(
                    "--token-ttl",
                    "keeps a --token-command's result; no --token-command was given",
                ));
            }
            parse_duration("--token-ttl", t, true)?
        }
        None => Duration::ZERO,
    };
    let app = validate_app(g)?;
    let https = validate_https(g)?;
    Ok(Common {
        bounds,
        profile,
        operation_id: g.operation_id.clone(),
        ledger: g.ledger.clone(),
        token_command: g.token_command.clone(),
        token_ttl,
        app,
        settle,
        https,
        json: g.json,
        verbose: g.verbose,
        quiet: g.quiet && !g.json,
        trace: g.trace,
        metrics: g.metrics,
        progress: if g.progress {
            Some(true)
        } else if g.no_progress {
            Some(false)
        } else {
            None
        },
    })
}

/// `--app-id`, `--app-key <FILE>`, `--installation-id`: all three or
/// none (the missing ones named), never with `--token-command`, the key a
/// path (a PEM on the command line would show in `ps`).
fn validate_app(g: &GlobalArgs) -> Result<Option<AppFlags>, UsageError> {
    let given = [
        ("--app-id", g.app_id.is_some()),
        ("--app-key", g.app_key.is_some()),
        ("--installation-id", g.installation_id.is_some()),
    ];
    if given.iter().all(|(_, on)| !on) {
        return Ok(None);
    }
    let missing: Vec<&str> = given
        .iter()
        .filter(|(_, on)| !on)
        .map(|(f, _)| *f)
        .collect();
    if let Some(first) = missing.first() {
        return Err(UsageError::new(
            *first,
            format!(
                "a GitHub App takes --app-id, --app-key and --installation-id together; \
                 missing: {}",
                missing.join(", ")
            ),
        ));
    }
    if g.token_command.is_some() {
        return Err(UsageError::new(
            "--token-command",
            "one credential source: --token-command or the GitHub App's flags, not both",
        ));
    }
    let app_id = g.app_id.clone().unwrap_or_default();
    if app_id.trim().is_empty() || app_id.chars().any(char::is_control) {
        return Err(UsageError::new("--app-id", "empty or not printable"));
    }
    let key_file = g.app_key.clone().unwrap_or_default();
    let key_text = key_file.to_string_lossy();
    if key_text.contains("-----BEGIN") || key_text.contains('\n') {
        return Err(UsageError::new(
            "--app-key",
            "takes the path of the key's PEM file, never the key itself",
        ));
    }
    if key_text.is_empty() {
        return Err(UsageError::new("--app-key", "empty path"));
    }
    let id = g.installation_id.as_deref().unwrap_or_default();
    let installation_id = id.parse::<u64>().map_err(|_| {
        UsageError::new(
            "--installation-id",
            format!("{id:?} is not an installation id (a number)"),
        )
    })?;
    Ok(Some(AppFlags {
        app_id,
        key_file,
        installation_id,
        api: forge::check_api(g.api.as_deref())?,
    }))
}

/// `--ca-file` (each file read now), `--proxy` or `--no-proxy`.
fn validate_https(g: &GlobalArgs) -> Result<sluice_git::HttpsConfig, UsageError> {
    let mut https = sluice_git::HttpsConfig::new();
    for f in &g.ca_files {
        https = https
            .with_ca_file(f)
            .map_err(|e| UsageError::new("--ca-file", e.to_string()))?;
    }
    if let Some(p) = &g.proxy {
        https = https
            .with_proxy(sluice_git::ProxyChoice::Url(p.clone()))
            .map_err(|e| UsageError::new("--proxy", e.to_string()))?;
    } else if g.no_proxy {
        https = https
            .with_proxy(sluice_git::ProxyChoice::Direct)
            .map_err(|e| UsageError::new("--no-proxy", e.to_string()))?;
    }
    Ok(https)
}

/// `<URL|REMOTE>` of fetch and push: a URL is checked now; what may be a
/// configured remote's name (git's rule: no `/`, not `.` or `..`) is
/// checked once the repository is open ([`resolve_remote`]).
fn check_remote_arg(common: &Common, url: &str) -> Result<(), UsageError> {
    if sluice_git::is_remote_name(url) {
        return Ok(());
    }
    let kind = check_git_url(url)?;
    check_token_transport(common, url, kind)
}

/// `--token-command` takes only an http(s) remote.
pub fn check_token_transport(
    common: &Common,
    url: &str,
    kind: TransportKind,
) -> Result<(), UsageError> {
    if common.app.is_some() && kind != TransportKind::Http {
        return Err(UsageError::new(
            "--app-id",
            format!(
                "only http(s) remotes take a GitHub App's token; {:?} is not one",
                sluice_git::redact(url)
            ),
        ));
    }
    if common.token_command.is_some() && kind != TransportKind::Http {
        return Err(UsageError::new(
            "--token-command",
            format!(
                "only http(s) remotes take a token; {:?} is not one",
                sluice_git::redact(url)
            ),
        ));
    }
    Ok(())
}

/// `ls-refs <URL|REMOTE> [<PATTERN>...] [--prefix P]...`: a URL checked
/// now (a remote's name once the repository is found), literal prefixes,
/// patterns without control characters.
fn validate_ls_refs(
    common: &Common,
    url: String,
    patterns: Vec<String>,
    prefixes: Vec<String>,
    exit_code: bool,
) -> Result<Action, UsageError> {
    check_remote_arg(common, &url)?;
    for p in &patterns {
        if p.is_empty() || p.chars().any(char::is_control) {
            return Err(UsageError::new(
                "<PATTERN>",
                format!("{p:?}: empty, or contains control characters"),
            ));
        }
    }
    for p in &prefixes {
        if p.contains('*') {
            return Err(UsageError::new(
                "--prefix",
                format!("{p:?}: a prefix is literal and may not contain '*'"),
            ));
        }
        if p.chars().any(char::is_control) {
            return Err(UsageError::new(
                "--prefix",
                format!("{p:?}: contains control characters"),
            ));
        }
    }
    Ok(Action::LsRefs {
        url,
        patterns,
        prefixes,
        exit_code,
    })
}

/// A push's outputs and id: `--dry-run` takes no operation id,
/// `--porcelain` is not with `--json`.
fn check_push_outputs(g: &GlobalArgs, dry_run: bool, porcelain: bool) -> Result<(), UsageError> {
    if dry_run && g.operation_id.is_some() {
        return Err(UsageError::new(
            "--operation-id",
            "--dry-run is a read that may be asked again: it takes no operation id",
        ));
    }
    if porcelain && g.json {
        return Err(UsageError::new(
            "--porcelain",
            "--porcelain and --json are two outputs: choose one",
        ));
    }
    Ok(())
}

/// `--delete <REF>...` as the push specs `:<REF>`: a plain ref name each,
/// as git's `--delete` takes them (`SRC:DST` among them is refused).
fn deletions(refs: &[String]) -> Result<Vec<String>, UsageError> {
    refs.iter()
        .map(|r| {
            if r.contains(':') || r.starts_with('+') || r.is_empty() {
                Err(UsageError::new(
                    "--delete",
                    format!("{r:?}: --delete takes plain ref names to delete, not [+]SRC:DST"),
                ))
            } else {
                Ok(format!(":{r}"))
            }
        })
        .collect()
}

/// The push specs, parsed in order; a destination named twice is refused.
fn validate_push_specs(specs: &[String]) -> Result<Vec<PushSpec>, UsageError> {
    let mut parsed = Vec::with_capacity(specs.len());
    for s in specs {
        let spec = PushSpec::parse(s)
            .map_err(|e| UsageError::new("[+]SRC:DST", strip_invalid_prefix(&e.to_string())))?;
        if parsed.iter().any(|p: &PushSpec| p.dst == spec.dst) {
            return Err(UsageError::new(
                "[+]SRC:DST",
                format!("{s:?}: {} is named twice", spec.dst),
            ));
        }
        parsed.push(spec);
    }
    Ok(parsed)
}

/// The leases by destination: each parsed, at most one per destination,
/// and — when its name and every spec's destination are full — naming a
/// destination of the specs (a short one is matched once the specs'
/// destinations are expanded, in [`resolve_updates`]).
fn validate_leases(
    leases: &[String],
    specs: &[PushSpec],
) -> Result<BTreeMap<String, LeaseSpec>, UsageError> {
    let mut by_dst = BTreeMap::new();
    for l in leases {
        let (dst, lease) = sluice_git::parse_lease_spec(l)
            .map_err(|e| UsageError::new("--lease", strip_invalid_prefix(&e.to_string())))?;
        let all_full = dst.starts_with("refs/") && specs.iter().all(|p| p.dst.starts_with("refs/"));
        if all_full && !specs.iter().any(|p| p.dst == dst) {
            return Err(UsageError::new(
                "--lease",
                format!("{l:?}: {dst} is not the destination of any push spec"),
            ));
        }
        if by_dst.insert(dst.clone(), lease).is_some() {
            return Err(UsageError::new(
                "--lease",
                format!("{l:?}: {dst} has two leases"),
            ));
        }
    }
    Ok(by_dst)
}

/// `--push-option`s hold no newline and no NUL.
fn check_push_options(push_options: &[String]) -> Result<(), UsageError> {
    for o in push_options {
        if o.contains('\n') || o.contains('\0') {
            return Err(UsageError::new(
                "--push-option",
                format!("{o:?}: may not contain a newline or NUL"),
            ));
        }
    }
    Ok(())
}

/// `ledger show <ID>` | `ledger list [--since DUR]`: both need `--ledger`.
fn validate_ledger(g: &GlobalArgs, what: LedgerArgs) -> Result<Action, UsageError> {
    if g.ledger.is_none() {
        return Err(UsageError::new(
            "--ledger",
            "`ledger show` and `ledger list` read a ledger: give --ledger FILE",
        ));
    }
    Ok(match what {
        LedgerArgs::Show { id } => {
            if id.trim().is_empty() {
                return Err(UsageError::new("<ID>", "empty operation id"));
            }
            Action::LedgerShow { id }
        }
        LedgerArgs::List { since } => Action::LedgerList {
            since: match since {
                Some(t) => parse_duration("--since", &t, false)?,
                None => Duration::from_secs(24 * 3600),
            },
        },
    })
}

/// `demo` chooses its own bounds and prints prose: every flag but
/// `--trace`, `--metrics` and `-C` is refused.
fn check_demo_flags(g: &GlobalArgs) -> Result<(), UsageError> {
    let given = [
        ("--deadline", g.deadline.is_some()),
        ("--attempt-timeout", g.attempt_timeout.is_some()),
        ("--max-attempts", g.max_attempts.is_some()),
        ("--profile", g.profile.is_some()),
        ("--operation-id", g.operation_id.is_some()),
        ("--ledger", g.ledger.is_some()),
        ("--token-command", g.token_command.is_some()),
        ("--token-ttl", g.token_ttl.is_some()),
        ("--app-id", g.app_id.is_some()),
        ("--app-key", g.app_key.is_some()),
        ("--installation-id", g.installation_id.is_some()),
        ("--settle", g.settle.is_some()),
        ("--ca-file", !g.ca_files.is_empty()),
        ("--proxy", g.proxy.is_some()),
        ("--no-proxy", g.no_proxy),
        ("--json", g.json),
        ("--progress", g.progress),
        ("--no-progress", g.no_progress),
        ("-v", g.verbose > 0),
        ("-q", g.quiet),
    ];
    match given.iter().find(|(_, on)| *on) {
        Some((flag, _)) => Err(UsageError::new(
            *flag,
            "demo chooses its own bounds and prints prose; only --trace, --metrics and -C apply",
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::clap_message;

    fn err(args: &[&str]) -> UsageError {
        let mut v = vec!["sluice-remote"];
        v.extend_from_slice(args);
        match parse(v) {
            Err(ParseError::Usage(e)) => e,
            Err(ParseError::Clap(e)) => panic!("clap error instead: {e}"),
            Ok(c) => panic!("accepted: {c:?}"),
        }
    }

    fn ok(args: &[&str]) -> Config {
        let mut v = vec!["sluice-remote"];
        v.extend_from_slice(args);
        parse(v).unwrap_or_else(|e| panic!("refused: {e}"))
    }

    #[test]
    fn global_flags_are_accepted_before_and_after_the_command() {
        let a = ok(&["--json", "--deadline", "500ms", "ls-refs", "git://h/r"]);
        let b = ok(&["ls-refs", "git://h/r", "--deadline", "500ms", "--json"]);
        assert!(a.common.json && b.common.json);
        assert_eq!(a.common.bounds.deadline, Duration::from_millis(500));
        assert_eq!(b.common.bounds.deadline, Duration::from_millis(500));
    }

    #[test]
    fn explicit_figures_override_the_profile() {
        let c = ok(&[
            "--profile",
            "wait",
            "--max-attempts",
            "2",
            "ls-refs",
            "git://h/r",
        ]);
        assert_eq!(c.common.profile, Profile::Wait);
        assert_eq!(c.common.bounds.max_attempts, 2);
        assert_eq!(c.common.bounds.deadline, Profile::Wait.bounds().deadline);
        let d = ok(&["ls-refs", "git://h/r"]);
        assert_eq!(d.common.bounds, Profile::Command.bounds());
    }

    #[test]
    fn each_bad_value_names_its_argument() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["ls-refs", "git://h/r", "--deadline", "soon"],
                "--deadline",
            ),
            (&["ls-refs", "git://h/r", "--deadline", "0s"], "--deadline"),
            (
                &["ls-refs", "git://h/r", "--attempt-timeout", "12"],
                "--attempt-timeout",
            ),
            (&["ls-refs", "git://h/r", "--settle", "x"], "--settle"),
            (
                &["ls-refs", "git://h/r", "--max-attempts", "0"],
                "--max-attempts",
            ),
            (
                &["ls-refs", "git://h/r", "--max-attempts", "-1"],
                "--max-attempts",
            ),
            (&["ls-refs", "git://h/r", "--profile", "fast"], "--profile"),
            (&["ls-refs", "git://h/r", "--prefix", "refs/*"], "--prefix"),
            (&["ls-refs", "ftp://h/r"], "<URL>"),
            (&["ls-refs", "git://"], "<URL>"),
            (
                &["ls-refs", "git://h/r", "--token-command", "echo t"],
                "--token-command",
            ),
            (
                &["fetch", "git://h/r", "refs/heads/a:refs/b:c", "--repo", "."],
                "<REFSPEC>",
            ),
            (
                &["push", "git://h/r", "main:HEAD", "--repo", "."],
                "[+]SRC:DST",
            ),
            (
                &["push", "git://h/r", "main:a..b", "--repo", "."],
                "[+]SRC:DST",
            ),
            (
                &[
                    "push",
                    "git://h/r",
                    "main",
                    "--repo",
                    ".",
                    "--lease",
                    "main=xyz",
                ],
                "--lease",
            ),
            (
                &[
                    "push",
                    "git://h/r",
                    "a:refs/heads/x",
                    "--repo",
                    ".",
                    "--lease",
                    "refs/heads/x=12",
                ],
                "--lease",
            ),
            (
                &[
                    "push",
                    "git://h/r",
                    "a:refs/heads/x",
                    "--repo",
                    ".",
                    "--lease",
                    "refs/heads/y=absent",
                ],
                "--lease",
            ),
            (
                &[
                    "push",
                    "git://h/r",
                    "a:refs/heads/x",
                    "--repo",
                    ".",
                    "--push-option",
                    "a\nb",
                ],
                "--push-option",
            ),
            (&["http", "get", "ftp://h/x"], "<URL>"),
            (
                &["--operation-id", "a b", "ls-refs", "git://h/r"],
                "--operation-id",
            ),
            (&["--json", "demo"], "--json"),
        ];
        for (args, arg) in cases {
            let e = err(args);
            assert_eq!(&e.arg, arg, "{args:?}: {e}");
            assert!(e
                .to_string()
                .starts_with(&format!("invalid value for {arg}")));
        }
    }

    #[test]
    fn push_specs_and_leases_are_parsed() {
        let oid = "0123456789abcdef0123456789abcdef01234567";
        let lease = format!("refs/heads/main={oid}");
        let c = ok(&[
            "push",
            "git://h/r",
            "+HEAD~1:refs/heads/main",
            ":refs/heads/old",
            "--repo",
            ".",
            "--lease",
            &lease,
            "--atomic",
            "--push-option",
            "ci.skip",
        ]);
        let Action::Push {
            specs,
            leases,
            options,
            ..
        } = c.action
        else {
            panic!("not a push");
        };
        assert_eq!(specs.len(), 2);
        assert!(specs[0].force);
        assert_eq!(specs[1].src, None);
        assert!(matches!(
            leases.get("refs/heads/main"),
            Some(LeaseSpec::Oid(_))
        ));
        assert!(options.atomic);
        assert_eq!(options.push_options, vec!["ci.skip".to_string()]);
    }

    #[test]
    fn the_token_command_never_shows_in_debug_output() {
        let c = ok(&[
            "--token-command",
            "echo s3cret-token",
            "http",
            "get",
            "http://h/x",
        ]);
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn a_missing_argument_is_named_on_the_first_line() {
        let Err(ParseError::Clap(e)) = parse(["sluice-remote", "push", "git://h/r"]) else {
            panic!("accepted");
        };
        let msg = clap_message(&e);
        let first = msg.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error:") && first.contains("[+]SRC:DST"),
            "{msg}"
        );
        // --repo is not one: the repository is found from the working
        // directory, as git finds it.
        let c = ok(&["push", "git://h/r", "a:refs/heads/a"]);
        assert!(matches!(c.action, Action::Push { repo: None, .. }));
    }

    #[test]
    fn clap_usage_errors_exit_2_and_help_exits_0() {
        let e = parse(["sluice-remote", "ls-refs"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = parse(["sluice-remote", "--bogus", "ls-refs", "git://h/r"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = parse(["sluice-remote", "--help"]).unwrap_err();
        assert_eq!(e.exit_code(), 0);
        let e = parse(["sluice-remote", "--version"]).unwrap_err();
        assert_eq!(e.exit_code(), 0);
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
