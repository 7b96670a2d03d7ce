//! Usage errors and exit codes: what the command line says when it
//! refuses its input (exit 2, nothing asked of the remote), and the exit
//! code of every outcome, as the design's CLI contract gives them.

use sluice_policy::OutcomeKind;

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

/// `invalid refspec "x": why` → `"x": why` (the argument is named already).
pub(crate) fn strip_invalid_prefix(message: &str) -> String {
    message
        .strip_prefix("invalid refspec ")
        .unwrap_or(message)
        .to_string()
}
