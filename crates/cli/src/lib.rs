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
//! The library in ripgrep's shape, each file a step of the order above:
//!
//! * [`args`] — clap's raw view ([`Cli`]) and the help;
//! * [`config`] — [`validate`] (one function per command's checks) into a
//!   typed [`Config`];
//! * [`forge`] — the forge commands' checks into a [`forge::ForgeCall`];
//! * [`usage`] — [`UsageError`], [`ParseError`] and the exit codes;
//! * [`target`] — the repository ([`open_repo`]), the remote
//!   ([`resolve_remote`]), git's https settings ([`https_for_repo`]) and
//!   the push specs ([`resolve_updates`]);
//! * [`contract`] — the JSON document of the CLI contract;
//! * [`human`] — the human output (git's forms, the summary on stderr);
//! * [`terminal`] — what a remote's words may show on a terminal.
//!
//! The binary (`src/main.rs`) adds what only a process needs: `session`
//! (the policy, credentials, cancel flag and output its commands share),
//! `git_run`, `forge_run` and `ledger_cmd` (the commands), `progress` (the
//! progress line), `summary` (`--metrics`' recorder), and `demo`
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

pub mod args;
pub mod config;
pub mod contract;
pub mod forge;
pub mod human;
pub mod target;
pub mod terminal;
pub mod usage;

pub use args::{Cli, CommandArgs, GlobalArgs, HttpArgs, LedgerArgs};
pub use config::{
    check_git_url, check_http_url, check_token_transport, enter_dirs, parse, parse_duration,
    validate, Action, AppFlags, Common, Config,
};
pub use target::{
    deletes_a_short_name, expand_deletions, https_for, https_for_repo, input_error, open_repo,
    ref_matches, resolve_listing, resolve_remote, resolve_updates, RepoError, Target,
};
pub use usage::{
    clap_message, exit_code, ParseError, UsageError, EXIT_ANSWERED, EXIT_LOCAL_ERROR,
    EXIT_REJECTED, EXIT_SUCCEEDED, EXIT_UNKNOWN, EXIT_USAGE,
};
