//! The `sluice-remote` command line, as a library: argument parsing and
//! validation (so both can be fuzzed and tested without a process), the
//! JSON document of the design's CLI contract, and the human summaries.
//!
//! Order of operations for one command line:
//!
//! 1. [`parse`] runs clap over the arguments ([`Cli`]): unknown flags and
//!    missing arguments are clap's usage errors (exit 2; `--help` and
//!    `--version` exit 0);
//! 2. [`validate`] turns the raw strings into a [`Config`]: durations,
//!    attempt counts, profile, URL, refspecs, push specs, leases, push
//!    options; every bad input is a [`UsageError`] naming the argument
//!    (exit 2, nothing on stdout);
//! 3. the binary opens `--repo`, or the repository found from the working
//!    directory ([`open_repo`]; one owned by another user that git's
//!    `safe.directory` does not allow is refused there, exit 5, before any
//!    of its configuration is read), reads `<URL|REMOTE>` as git reads it
//!    ([`resolve_remote`]) and resolves push sources ([`resolve_updates`])
//!    — still bad input when they fail — and only then calls the remote;
//! 4. the [`Outcome`](sluice_policy::Outcome) is printed as one JSON
//!    document ([`contract`]) or a short human summary ([`human`]), and its
//!    result is the exit code ([`exit_code`]).
//!
//! ```
//! let config = sluice_cli::parse([
//!     "sluice-remote", "ls-refs", "git://127.0.0.1:9418/r.git",
//!     "--prefix", "refs/heads/", "--deadline", "12s", "--json",
//! ])
//! .expect("valid");
//! assert!(config.common.json);
//! assert_eq!(config.common.bounds.deadline, std::time::Duration::from_secs(12));
//!
//! let err = sluice_cli::parse(["sluice-remote", "ls-refs", "git://h/r", "--max-attempts", "0"])
//!     .unwrap_err();
//! assert!(err.to_string().starts_with("invalid value for --max-attempts"));
//! ```
//!
//! # Modules
//!
//! * this file — the command line: [`Cli`] (clap's raw view), [`validate`]
//!   (one function per command's checks) into [`Config`], [`open_repo`],
//!   [`resolve_remote`],
//!   [`https_for_repo`], [`resolve_updates`], the exit codes;
//! * [`contract`] — the JSON document of the CLI contract;
//! * [`human`] — the human output (git's forms, the summary on stderr).
//!
//! The binary (`src/main.rs`) adds what only a process needs: `progress`
//! (the progress line), `summary` (`-v`'s metrics recorder), and `demo`
//! (`sluice-remote demo`, with the default `demo` feature; `no_demo.rs`
//! stands in for it without, so the service's build links no test kit).
//!
//! # The contract
//!
//! The product's contract is the command line itself — its arguments, the
//! JSON document ([`contract::document`], its keys [`contract::KEYS`]) and the exit codes
//! ([`EXIT_SUCCEEDED`] … [`EXIT_LOCAL_ERROR`]) — as the design's CLI
//! contract states them. This library is public for the fuzz targets and
//! the tests ([`parse`], [`validate`], [`check_git_url`],
//! [`check_http_url`], [`parse_duration`]); its Rust items are not a
//! stable API for other callers.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod contract;
pub mod human;
pub mod terminal;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};
use sluice_git::{LeaseSpec, PushOptions, PushSpec, RefUpdate, Remote, TransportKind};
use sluice_policy::{Bounds, OutcomeKind, Profile};

/// Exit code: the operation succeeded.
pub const EXIT_SUCCEEDED: u8 = 0;
/// Exit code: the remote answered (a rejection, an error of its own).
pub const EXIT_ANSWERED: u8 = 1;
/// Exit code: usage error or bad input; nothing was asked of the remote.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: no answer within the bounds (never a claim that it failed).
pub const EXIT_UNKNOWN: u8 = 3;
/// Exit code: the operation id had been claimed before.
pub const EXIT_REJECTED: u8 = 4;
/// Exit code: stopped on this side (the object store, the disk, a lock, a
/// token command that cannot start, a ledger that cannot be read or
/// written): never the remote's answer.
pub const EXIT_LOCAL_ERROR: u8 = 5;

/// The exit code of an outcome: 0 succeeded · 1 answered · 3 unknown · 4 rejected.
pub fn exit_code(kind: OutcomeKind) -> u8 {
    match kind {
        OutcomeKind::Succeeded => EXIT_SUCCEEDED,
        OutcomeKind::Answered => EXIT_ANSWERED,
        OutcomeKind::Unknown => EXIT_UNKNOWN,
        OutcomeKind::Rejected => EXIT_REJECTED,
        OutcomeKind::LocalError => EXIT_LOCAL_ERROR,
    }
}

/// The exit codes and profiles: the tail of every command's help.
macro_rules! help_tail {
    () => {
        "Exit codes: 0 succeeded · 1 answered (the remote refused; never retried) \
· 2 usage or bad input (nothing sent) · 3 unknown (no answer within the budget; a push may \
have landed: see may_have_applied) · 4 rejected (the operation id was claimed before) \
· 5 local-error (this side failed: a repository, a ledger, a token command).

Profiles (--profile; explicit --deadline/--attempt-timeout/--max-attempts override):
  command  20s deadline, 8s per attempt, 4 attempts (the default)
  round    30s deadline, 10s per attempt, 5 attempts
  submit   60s deadline, 20s per attempt, 5 attempts
  wait     5m deadline, 30s per attempt, 40 attempts (reading through an outage)"
    };
}

/// A command's examples, then [`help_tail!`].
macro_rules! help_with_examples {
    ($examples:literal) => {
        concat!("Examples:\n", $examples, "\n\n", help_tail!())
    };
}

// Declared after the help macros, which it uses.
pub mod forge;

/// The command line as clap sees it: raw strings, checked by [`validate`].
#[derive(Parser)]
#[command(
    name = "sluice-remote",
    version,
    about = "Talk to git remotes and forge APIs under one retry policy.",
    long_about = "Talk to git remotes and forge APIs under one retry policy: what the remote \
                  never judged is tried again, what it answered is not, and a write whose \
                  answer was lost is settled by reading.",
    after_help = help_tail!()
)]
pub struct Cli {
    /// The flags every command takes, anywhere on the line.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: CommandArgs,
}

/// The flags every command takes, anywhere on the line (raw).
#[derive(Args, Default)]
pub struct GlobalArgs {
    /// The operation's overall deadline (`500ms`, `12s`, `5m`); sleeps count.
    #[arg(long, global = true, value_name = "DUR")]
    pub deadline: Option<String>,
    /// The hard deadline of one attempt, capped by what remains.
    #[arg(long, global = true, value_name = "DUR")]
    pub attempt_timeout: Option<String>,
    /// The most attempts (not retries), at least 1.
    #[arg(long, global = true, value_name = "N", allow_negative_numbers = true)]
    pub max_attempts: Option<String>,
    /// Named bounds: wait, round, submit or command (the default).
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// The operation id (generated when not given); asked again with the
    /// same --ledger, rejected (without --ledger: only within this process).
    #[arg(long, global = true, value_name = "ID")]
    pub operation_id: Option<String>,
    /// Where operation ids are claimed: a file (SQLite, shared by the
    /// processes of one machine) or a `postgres://` URL (shared by replicas;
    /// also their retry budget).
    #[arg(long, global = true, value_name = "FILE|URL")]
    pub ledger: Option<PathBuf>,
    /// http(s) only: a command run with `sh -c` whose trimmed stdout is the token.
    #[arg(long, global = true, value_name = "CMD")]
    pub token_command: Option<String>,
    /// The least pause before a credential bought after a refusal (default 5s).
    #[arg(long, global = true, value_name = "DUR")]
    pub settle: Option<String>,
    /// https: trust roots (PEM) added to the platform's; repeatable.
    /// SSL_CERT_FILE replaces the platform's, as in curl and git.
    #[arg(long = "ca-file", global = true, value_name = "PEM", action = ArgAction::Append)]
    pub ca_files: Vec<PathBuf>,
    /// This proxy for every http(s) request (default: HTTPS_PROXY, HTTP_PROXY
    /// and NO_PROXY, as curl reads them).
    #[arg(long, global = true, value_name = "URL", conflicts_with = "no_proxy")]
    pub proxy: Option<String>,
    /// No proxy, whatever the environment says.
    #[arg(long, global = true)]
    pub no_proxy: bool,
    /// Progress of fetch and push on stderr, even when it is not a terminal.
    #[arg(long, global = true, conflicts_with = "no_progress")]
    pub progress: bool,
    /// No progress (the default when stderr is not a terminal).
    #[arg(long = "no-progress", global = true)]
    pub no_progress: bool,
    /// Print one JSON document on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// forge: the REST API's base, http:// or https://, its path kept
    /// (default: GitHub's, api.github.com over https).
    #[arg(long, global = true, value_name = "URL")]
    pub api: Option<String>,
    /// Tracing to stderr (debug for the sluice crates; -vv: trace).
    #[arg(short = 'v', long = "verbose", global = true, action = ArgAction::Count)]
    pub verbose: u8,
}

impl std::fmt::Debug for GlobalArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token command may hold a literal secret: never shown.
        f.debug_struct("GlobalArgs")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("profile", &self.profile)
            .field("operation_id", &self.operation_id)
            .field("ledger", &self.ledger.as_deref().map(ledger_shown))
            .field(
                "token_command",
                &self.token_command.as_ref().map(|_| "<hidden>"),
            )
            .field("settle", &self.settle)
            .field("ca_files", &self.ca_files)
            .field("proxy", &self.proxy.as_deref().map(sluice_git::redact))
            .field("no_proxy", &self.no_proxy)
            .field("json", &self.json)
            .field("api", &self.api.as_deref().map(sluice_git::redact))
            .field("verbose", &self.verbose)
            .field("progress", &self.progress)
            .finish()
    }
}

/// The commands (raw).
#[derive(Subcommand, Debug)]
pub enum CommandArgs {
    /// List the remote's refs (printed like `git ls-remote`).
    #[command(after_help = help_with_examples!("  sluice-remote ls-refs https://github.com/org/repo.git --prefix refs/heads/
  sluice-remote ls-refs git://127.0.0.1/repo.git --json --profile wait"))]
    LsRefs {
        /// The remote: git://, http(s)://, ssh://, file:// or a path.
        #[arg(value_name = "URL")]
        url: String,
        /// A literal ref prefix (`refs/heads/`); repeatable; no `*`.
        #[arg(long = "prefix", value_name = "P")]
        prefixes: Vec<String>,
    },
    /// Fetch refspecs into a local repository.
    #[command(after_help = help_with_examples!("  sluice-remote fetch origin                  (its fetch lines, in the repository found from here)
  sluice-remote fetch https://github.com/org/repo.git '+refs/heads/*:refs/remotes/origin/*' --repo . --prune
  sluice-remote fetch git://127.0.0.1/repo.git refs/heads/main:refs/heads/main --repo repo.git --no-tags
  sluice-remote fetch ssh://git@host/repo.git 'refs/tags/*:refs/tags/*' --repo . -v"))]
    Fetch {
        /// The remote: a URL, or a configured remote's name (`origin`).
        #[arg(value_name = "URL|REMOTE")]
        url: String,
        /// What to fetch (`+refs/heads/*:refs/remotes/origin/*`); none: a
        /// remote's `fetch` lines, or a URL's `HEAD` (into FETCH_HEAD).
        #[arg(value_name = "REFSPEC")]
        refspecs: Vec<String>,
        /// The local repository (default: found from the working
        /// directory, as git finds it).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// Delete local refs in a glob refspec's destination whose remote
        /// ref is gone (as `git fetch --prune`).
        #[arg(long, short = 'p')]
        prune: bool,
        /// Fetch every tag of the remote too (`refs/tags/*:refs/tags/*`).
        #[arg(long, short = 't', conflicts_with = "no_tags")]
        tags: bool,
        /// Fetch no tag the refspecs do not name (default: tags pointing
        /// into what was fetched).
        #[arg(long = "no-tags", short = 'n')]
        no_tags: bool,
    },
    /// Push revisions of a local repository.
    #[command(after_help = help_with_examples!("  sluice-remote push origin main --lease main  (origin/main's value expected; origin/main updated once it landed)
  sluice-remote push https://github.com/org/repo.git HEAD:main --repo . --operation-id land-1234 --ledger ops.db
  sluice-remote push git://127.0.0.1/repo.git HEAD:refs/heads/topic --repo . --lease topic=absent
  sluice-remote push ssh://git@host/repo.git main --repo . --lease main        (expects origin/main's value)
  sluice-remote push https://github.com/org/repo.git :refs/heads/old --repo . --porcelain
  sluice-remote push git://127.0.0.1/repo.git HEAD:main --repo . --dry-run --json"))]
    Push {
        /// The remote: a URL, or a configured remote's name (`origin`).
        #[arg(value_name = "URL|REMOTE")]
        url: String,
        /// `[+]SRC:DST` (`+` forces; `:DST` deletes; DST full, or short
        /// (`main`) taking the kind of SRC: a branch or a tag).
        #[arg(value_name = "[+]SRC:DST", required = true)]
        specs: Vec<String>,
        /// The local repository the sources are read from (default: found
        /// from the working directory, as git finds it).
        #[arg(long, value_name = "DIR")]
        repo: Option<PathBuf>,
        /// `DST=OID` (full or abbreviated), `DST=absent`, or `DST` alone (what
        /// the remote-tracking ref of the remote named, or configured with
        /// URL, holds): what the remote ref must hold (implies force).
        #[arg(long = "lease", value_name = "DST[=OID|=absent]")]
        leases: Vec<String>,
        /// All refs or none.
        #[arg(long)]
        atomic: bool,
        /// A push option (`-o` of git push); repeatable.
        #[arg(long = "push-option", value_name = "S")]
        push_options: Vec<String>,
        /// Everything up to the commands, nothing sent: what would happen
        /// (a read; refuses --operation-id).
        #[arg(long)]
        dry_run: bool,
        /// git's porcelain output (`To <url>`, one `<flag>\t<from>:<to>\t<summary>`
        /// line per ref, `Done`); not with --json.
        #[arg(long)]
        porcelain: bool,
    },
    /// HTTP calls through the forge client.
    #[command(after_help = help_with_examples!("  sluice-remote http get https://api.github.com/zen --token-command 'cat token.txt'
  sluice-remote http get https://api.github.com/repos/org/repo/pulls/1 --json --profile round"))]
    Http {
        /// The HTTP method.
        #[command(subcommand)]
        method: HttpArgs,
    },
    /// The forge's typed calls (GitHub's REST API): a write whose answer
    /// was lost is settled by reading, never sent again.
    #[command(after_help = help_with_examples!("  sluice-remote forge get-pull octo/repo 42 --json
  sluice-remote forge merge-pull octo/repo 42 --sha 0123456789abcdef0123456789abcdef01234567 --api https://ghe.example/api/v3"))]
    Forge {
        /// The call.
        #[command(subcommand)]
        call: forge::ForgeArgs,
    },
    /// Read the operation ledger (`--ledger FILE`): what ran under an id.
    #[command(after_help = help_with_examples!("  sluice-remote ledger show land-1234 --ledger ops.db
  sluice-remote ledger list --since 2h --ledger ops.db --json"))]
    Ledger {
        /// `show <ID>` or `list [--since DUR]`.
        #[command(subcommand)]
        what: LedgerArgs,
    },
    /// Show, on loopback, what the retry policy does (needs only git).
    #[command(
        help_template = "{about-with-newline}\n{usage-heading} {usage}\n\nOptions:\n  -v, --verbose  Tracing to stderr\n  -h, --help     Print help\n\n{after-help}",
        after_help = "demo chooses its own bounds and prints prose: it takes no other option.\n\nExample:\n  cargo run --release -p sluice-remote -- demo"
    )]
    Demo,
}

/// `ledger show <ID>` | `ledger list [--since <DUR>]` (raw).
#[derive(Subcommand, Debug)]
pub enum LedgerArgs {
    /// One id: when it was claimed, and how its run ended (or `running`).
    #[command(after_help = help_with_examples!("  sluice-remote ledger show land-1234 --ledger ops.db --json"))]
    Show {
        /// The operation id.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Every id claimed within `--since` (default 1d), oldest first.
    #[command(after_help = help_with_examples!("  sluice-remote ledger list --since 30m --ledger ops.db"))]
    List {
        /// How far back (`30m`, `1d`).
        #[arg(long, value_name = "DUR")]
        since: Option<String>,
    },
}

/// `http` subcommands (raw).
#[derive(Subcommand, Debug)]
pub enum HttpArgs {
    /// GET an absolute http(s) URL.
    #[command(after_help = help_with_examples!("  sluice-remote http get https://api.github.com/zen"))]
    Get {
        /// The URL; user info in it is a static credential.
        #[arg(value_name = "URL")]
        url: String,
    },
}

/// Bad input, found before any call to a remote: exit 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// The argument, as the help names it (`--deadline`, `<URL>`, ...).
    pub arg: String,
    /// What is wrong with it.
    pub message: String,
}

impl UsageError {
    /// A usage error of `arg`.
    pub fn new(arg: impl Into<String>, message: impl Into<String>) -> Self {
        UsageError {
            arg: arg.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid value for {}: {}", self.arg, self.message)
    }
}

impl std::error::Error for UsageError {}

/// Why a command line was not accepted.
#[derive(Debug)]
pub enum ParseError {
    /// clap's own error (unknown flag, missing argument) — or `--help` /
    /// `--version`, which clap reports the same way.
    Clap(clap::Error),
    /// A value that does not validate.
    Usage(UsageError),
}

impl ParseError {
    /// The exit code: 0 for `--help` / `--version`, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ParseError::Clap(e) => e.exit_code(),
            ParseError::Usage(_) => i32::from(EXIT_USAGE),
        }
    }
}

/// clap's message for a usage error, with a list of missing arguments
/// pulled onto the first line, so that line names them:
/// `error: the following required arguments were not provided: --repo <DIR>`.
pub fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    if e.kind() != clap::error::ErrorKind::MissingRequiredArgument {
        return text;
    }
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or_default().to_string();
    let mut rest = Vec::new();
    let mut listing = true;
    for line in lines {
        if listing && line.starts_with("  ") && !line.trim().is_empty() {
            first.push(' ');
            first.push_str(line.trim());
        } else {
            listing = false;
            rest.push(line);
        }
    }
    let mut out = first;
    for line in rest {
        out.push('\n');
        out.push_str(line);
    }
    out.push('\n');
    out
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Clap(e) => write!(f, "{e}"),
            ParseError::Usage(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ParseError {}

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
    /// The settle pause, when given.
    pub settle: Option<Duration>,
    /// The https settings (`--ca-file` read, `--proxy` / `--no-proxy`).
    pub https: sluice_git::HttpsConfig,
    /// One JSON document on stdout.
    pub json: bool,
    /// 0: quiet; 1: debug tracing; 2+: trace.
    pub verbose: u8,
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
            .field("settle", &self.settle)
            .field("https", &self.https)
            .field("json", &self.json)
            .field("verbose", &self.verbose)
            .field("progress", &self.progress)
            .finish()
    }
}

/// A validated command.
#[derive(Clone, Debug)]
pub enum Action {
    /// `ls-refs <URL> [--prefix P]...`
    LsRefs {
        /// The remote URL (as given; user info is removed from every output).
        url: String,
        /// Literal prefixes.
        prefixes: Vec<String>,
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
pub fn parse<I, T>(args: I) -> Result<Config, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(ParseError::Clap)?;
    validate(cli).map_err(ParseError::Usage)
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

/// `--ledger` as it may be printed: a PostgreSQL URL without its user info
/// and query (a password may be in either).
fn ledger_shown(path: &Path) -> String {
    match path.to_str().filter(|s| sluice_ledger::is_postgres_url(s)) {
        Some(url) => {
            let url = url.split('?').next().unwrap_or(url);
            match (url.find("://"), url.rfind('@')) {
                (Some(s), Some(at)) if at > s => format!("{}://{}", &url[..s], &url[at + 1..]),
                _ => url.to_string(),
            }
        }
        None => path.display().to_string(),
    }
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
    let common = validate_common(&g)?;
    if g.api.is_some() && !matches!(cli.command, CommandArgs::Forge { .. }) {
        return Err(UsageError::new(
            "--api",
            "only forge commands take an API URL",
        ));
    }
    let action = match cli.command {
        CommandArgs::LsRefs { url, prefixes } => validate_ls_refs(&common, url, prefixes)?,
        CommandArgs::Fetch {
            url,
            refspecs,
            repo,
            prune,
            tags,
            no_tags,
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
                    ..Default::default()
                },
                tags_given,
            }
        }
        CommandArgs::Push {
            url,
            specs,
            repo,
            leases,
            atomic,
            push_options,
            dry_run,
            porcelain,
        } => {
            check_push_outputs(&g, dry_run, porcelain)?;
            check_remote_arg(&common, &url)?;
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
fn validate_common(g: &GlobalArgs) -> Result<Common, UsageError> {
    let profile = match &g.profile {
        Some(p) => p
            .parse::<Profile>()
            .map_err(|e| UsageError::new("--profile", e.to_string()))?,
        None => Profile::Command,
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
    let https = validate_https(g)?;
    Ok(Common {
        bounds,
        profile,
        operation_id: g.operation_id.clone(),
        ledger: g.ledger.clone(),
        token_command: g.token_command.clone(),
        settle,
        https,
        json: g.json,
        verbose: g.verbose,
        progress: if g.progress {
            Some(true)
        } else if g.no_progress {
            Some(false)
        } else {
            None
        },
    })
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

/// `ls-refs <URL> [--prefix P]...`: literal prefixes.
fn validate_ls_refs(
    common: &Common,
    url: String,
    prefixes: Vec<String>,
) -> Result<Action, UsageError> {
    let kind = check_git_url(&url)?;
    check_token_transport(common, &url, kind)?;
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
    Ok(Action::LsRefs { url, prefixes })
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

/// `demo` chooses its own bounds and prints prose: every flag but `-v` is
/// refused.
fn check_demo_flags(g: &GlobalArgs) -> Result<(), UsageError> {
    let given = [
        ("--deadline", g.deadline.is_some()),
        ("--attempt-timeout", g.attempt_timeout.is_some()),
        ("--max-attempts", g.max_attempts.is_some()),
        ("--profile", g.profile.is_some()),
        ("--operation-id", g.operation_id.is_some()),
        ("--ledger", g.ledger.is_some()),
        ("--token-command", g.token_command.is_some()),
        ("--settle", g.settle.is_some()),
        ("--ca-file", !g.ca_files.is_empty()),
        ("--proxy", g.proxy.is_some()),
        ("--no-proxy", g.no_proxy),
        ("--json", g.json),
        ("--progress", g.progress),
        ("--no-progress", g.no_progress),
    ];
    match given.iter().find(|(_, on)| *on) {
        Some((flag, _)) => Err(UsageError::new(
            *flag,
            "demo chooses its own bounds and prints prose; only -v applies",
        )),
        None => Ok(()),
    }
}

/// `invalid refspec "x": why` → `"x": why` (the argument is named already).
fn strip_invalid_prefix(message: &str) -> String {
    message
        .strip_prefix("invalid refspec ")
        .unwrap_or(message)
        .to_string()
}

/// Why the repository could not be used: bad input (exit 2), or a
/// repository owned by another user that `safe.directory` does not allow
/// (`local-error`, exit 5).
#[derive(Debug)]
pub enum RepoError {
    /// `--repo` is no repository, or none was found from the working
    /// directory.
    Usage(UsageError),
    /// Owned by another user and not allowed by `safe.directory`.
    Untrusted(sluice_git::Untrusted),
}

impl std::fmt::Display for RepoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepoError::Usage(e) => write!(f, "{e}"),
            RepoError::Untrusted(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RepoError {}

/// Open `--repo` (a git repository, bare or not), or without it the
/// repository found from the working directory as git finds it (upwards,
/// honouring `GIT_DIR`, `GIT_CEILING_DIRECTORIES` and
/// `GIT_DISCOVERY_ACROSS_FILESYSTEM`); then refuse it, before any of its
/// configuration is read, when it is owned by another user and git's
/// `safe.directory` does not allow it ([`sluice_git::check_trusted`]).
pub fn open_repo(path: Option<&Path>) -> Result<gix::Repository, RepoError> {
    let repo = match path {
        Some(path) => {
            if !path.exists() {
                return Err(RepoError::Usage(UsageError::new(
                    "--repo",
                    format!("{}: no such directory", path.display()),
                )));
            }
            gix::open(path).map_err(|e| {
                RepoError::Usage(UsageError::new(
                    "--repo",
                    format!("{} is not a git repository ({e})", path.display()),
                ))
            })?
        }
        None => gix::ThreadSafeRepository::discover_with_environment_overrides(".")
            .map(gix::Repository::from)
            .map_err(|e| {
                RepoError::Usage(UsageError::new(
                    "--repo",
                    format!(
                        "not in a git repository (nor any parent directory), and no --repo \
                         given ({})",
                        sluice_policy::text::error_chain(&e)
                    ),
                ))
            })?,
    };
    sluice_git::check_trusted(&repo).map_err(RepoError::Untrusted)?;
    Ok(repo)
}

/// Where `<URL|REMOTE>` leads: the URL to call, and the configured remote
/// when the argument named one.
#[derive(Debug)]
pub struct Target {
    /// The URL called (a remote's, rewritten as git rewrites it; user info
    /// kept for the call, removed from every output).
    pub url: String,
    /// The configured remote the argument named.
    pub remote: Option<sluice_git::NamedRemote>,
}

/// `<URL|REMOTE>` read as git reads it: a configured remote's name is that
/// remote (its `url` to fetch, its `pushurl` or `url` to push, each
/// rewritten by `url.<base>.insteadOf` / `pushInsteadOf`); anything else
/// is a URL or a path. The URL is then checked (and `--token-command`
/// against its transport).
pub fn resolve_remote(
    common: &Common,
    arg: &str,
    repo: &gix::Repository,
    direction: gix::remote::Direction,
) -> Result<Target, UsageError> {
    let remote = sluice_git::NamedRemote::find(repo, arg).map_err(|e| input_error(&e))?;
    let url = remote
        .as_ref()
        .map_or_else(|| arg.to_string(), |r| r.url(direction).to_string());
    let kind = check_git_url(&url)?;
    check_token_transport(common, &url, kind)?;
    Ok(Target { url, remote })
}

/// The https settings for a call working in `repo`: `common`'s, with git's
/// configuration of the repository (its global and system files included)
/// where no flag decided — `http.proxy` when neither `--proxy` nor
/// `--no-proxy` was given (it wins over the environment, as in git), and
/// `http.sslCAInfo` or `GIT_SSL_CAINFO`, which wins over it as in git (it
/// replaces the platform's roots and `SSL_CERT_FILE`; `--ca-file` still
/// adds to it). A value that cannot be used is bad input naming the key.
pub fn https_for_repo(
    common: &Common,
    repo: &gix::Repository,
) -> Result<sluice_git::HttpsConfig, UsageError> {
    let mut https = common.https.clone();
    let config = repo.config_snapshot();
    if *https.proxy() == sluice_git::ProxyChoice::Environment {
        if let Some(proxy) = config.string("http.proxy") {
            let proxy = proxy.to_string();
            if !proxy.trim().is_empty() {
                let url = if proxy.contains("://") {
                    proxy
                } else {
                    format!("http://{proxy}")
                };
                https = https
                    .with_proxy(sluice_git::ProxyChoice::Url(url))
                    .map_err(|e| UsageError::new("http.proxy", e.to_string()))?;
            }
        }
    }
    let ca_info = config
        .string("http.sslCAInfo")
        .map(|v| PathBuf::from(v.to_string()))
        .filter(|p| !p.as_os_str().is_empty());
    if let Some(path) = ca_info {
        https = https
            .with_ca_info(&path)
            .map_err(|e| UsageError::new("http.sslCAInfo", e.to_string()))?;
    }
    Ok(https)
}

/// Resolve the push specs against `repo` — sources, short destinations
/// (by the kind of the source) — with their leases, each matched to the
/// spec whose destination it names (short or full) and resolved for a push
/// to `url` (an abbreviated id in `repo`; a lease without a value from the
/// remote-tracking ref of the remote configured with `url`).
pub fn resolve_updates(
    specs: &[PushSpec],
    leases: &BTreeMap<String, LeaseSpec>,
    url: &str,
    repo: &gix::Repository,
) -> Result<Vec<RefUpdate>, UsageError> {
    let mut updates = specs
        .iter()
        .map(|s| {
            RefUpdate::resolve(s, None, repo).map_err(|e| {
                let shown = format!(
                    "{}{}:{}",
                    if s.force { "+" } else { "" },
                    s.src.as_deref().unwrap_or(""),
                    s.dst
                );
                UsageError::new("[+]SRC:DST", format!("{shown:?}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = std::collections::BTreeSet::new();
    for u in &updates {
        if !seen.insert(u.dst().to_string()) {
            return Err(UsageError::new(
                "[+]SRC:DST",
                format!("{} is named twice", u.dst()),
            ));
        }
    }
    for (dst, lease) in leases {
        let shown = || match lease {
            LeaseSpec::Tracking => dst.clone(),
            _ => format!("{dst}=…"),
        };
        let candidates: Vec<usize> = (0..specs.len())
            .filter(|&i| {
                specs[i].dst == *dst
                    || updates[i].dst() == *dst
                    || (!dst.starts_with("refs/")
                        && (updates[i].dst() == format!("refs/heads/{dst}")
                            || updates[i].dst() == format!("refs/tags/{dst}")))
            })
            .collect();
        let i = match candidates.as_slice() {
            [i] => *i,
            [] => {
                return Err(UsageError::new(
                    "--lease",
                    format!(
                        "{:?}: {dst} is not the destination of any push spec",
                        shown()
                    ),
                ))
            }
            _ => {
                return Err(UsageError::new(
                    "--lease",
                    format!("{:?}: {dst} names more than one destination", shown()),
                ))
            }
        };
        let full = updates[i].dst().to_string();
        let resolved = lease.resolve(&full, url, repo).map_err(|e| {
            UsageError::new(
                "--lease",
                format!("{:?}: {}", shown(), strip_invalid_prefix(&e.to_string())),
            )
        })?;
        updates[i] = updates[i].clone().with_lease(resolved);
    }
    Ok(updates)
}

/// A [`sluice_git::InputError`] returned by a client call, as a usage error.
pub fn input_error(e: &sluice_git::InputError) -> UsageError {
    use sluice_git::InputError as E;
    let arg = match e {
        E::Url(_) | E::Remote { .. } => "<URL>",
        E::Refspec { .. } => "<REFSPEC>",
        E::Prefix(_) => "--prefix",
        E::RefName { .. } | E::Revision { .. } | E::Push(_) => "[+]SRC:DST",
        // A kind of bad input this CLI does not know yet: its words name it.
        _ => "<ARGS>",
    };
    UsageError::new(arg, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
