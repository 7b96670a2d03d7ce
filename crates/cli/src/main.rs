//! The `sluice-remote` binary: parses and validates the command line
//! (`sluice_cli`), runs one operation through sluice-git or sluice-forge
//! under the policy, prints the outcome (one JSON document with `--json`,
//! a short human summary otherwise) and exits with the outcome's code:
//! 0 succeeded · 1 answered · 2 usage or bad input · 3 unknown · 4 rejected
//! · 5 local-error; after SIGINT or SIGTERM, the outcome printed and recorded,
//! it dies by the signal (130, 143).
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
mod git_run;
mod ledger_cmd;
mod progress;
mod session;
mod signals;
mod stdout;
mod summary;
mod token_cache;

use std::io::IsTerminal;
use std::process::ExitCode;

use sluice_cli::{Action, Config, UsageError};

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
    let cli = match <sluice_cli::Cli as clap::Parser>::try_parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return clap_error(&e),
    };
    // `-C`, as git's: before anything else is read (the --ca-file and
    // --ledger paths, the repository, its configuration).
    if let Err(e) = sluice_cli::enter_dirs(&cli.global.dirs) {
        return usage(&e);
    }
    let config = match sluice_cli::validate(cli) {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    // Tracing only when asked (`--trace`, or RUST_LOG); the metrics of
    // this run, summed up on stderr at exit, only with `--metrics`.
    let rust_log = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    if config.common.trace > 0 || rust_log {
        init_tracing(config.common.trace, rust_log);
    }
    let metrics = if config.common.metrics {
        summary::Summary::install()
    } else {
        None
    };
    let code = run_action(&config);
    if let Some(text) = metrics.map(|m| m.render()).filter(|t| !t.is_empty()) {
        eprint!("metrics:\n{text}");
    }
    // Printed and recorded: a process a signal stopped dies by it.
    signals::die_if_signalled();
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

/// clap's own error: `--help` / `--version` on stdout (exit 0), a usage
/// error on stderr (exit 2).
fn clap_error(e: &clap::Error) -> ExitCode {
    if e.kind() == clap::error::ErrorKind::MissingRequiredArgument {
        eprint!("{}", sluice_cli::clap_message(e));
    } else {
        let _ = e.print();
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

fn usage(e: &UsageError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(sluice_cli::EXIT_USAGE)
}

/// `--trace`: debug tracing of the sluice crates to stderr (twice:
/// trace); RUST_LOG, when set, chooses what is traced instead.
fn init_tracing(trace: u8, rust_log: bool) {
    let filter = if rust_log {
        tracing_subscriber::EnvFilter::from_default_env()
    } else {
        let level = if trace >= 2 { "trace" } else { "debug" };
        let directives = [
            "sluice_policy",
            "sluice_git",
            "sluice_forge",
            "sluice_cli",
            "sluice_remote",
            "sluice_testkit",
        ]
        .iter()
        .fold(String::from("warn"), |acc, c| format!("{acc},{c}={level}"));
        tracing_subscriber::EnvFilter::new(directives)
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn run(config: &Config) -> anyhow::Result<u8> {
    let common = &config.common;
    match &config.action {
        Action::LsRefs {
            url,
            patterns,
            prefixes,
            exit_code,
        } => git_run::ls_refs(common, url, patterns, prefixes, *exit_code),
        Action::Fetch {
            url,
            refspecs,
            repo,
            options,
            tags_given,
        } => git_run::fetch(common, url, refspecs, repo.as_deref(), options, *tags_given),
        Action::Push {
            url,
            specs,
            leases,
            repo,
            options,
            porcelain,
        } => git_run::push(
            common,
            url,
            specs,
            leases,
            repo.as_deref(),
            options,
            *porcelain,
        ),
        Action::HttpGet { url } => forge_run::http_get(common, url),
        Action::Forge { api, call } => forge_run::run(common, api, call),
        Action::LedgerShow { id } => ledger_cmd::show(common, id),
        Action::LedgerList { since } => ledger_cmd::list(common, *since),
        Action::Completions { shell } => Ok(completions(*shell)),
        Action::Man => man(),
        Action::Demo => Ok(demo::run()),
    }
}

/// `completions <SHELL>`: the script on stdout, from the clap definitions.
fn completions(shell: clap_complete::Shell) -> u8 {
    let mut cmd = <sluice_cli::Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sluice-remote", &mut script);
    if shell == clap_complete::Shell::Bash {
        // clap_complete's bash script spells a hyphenated binary's state
        // two ways (`sluice__remote__subcmd__push` in the loop that finds
        // the command, `sluice__subcmd__remote__subcmd__push` in the arms
        // that complete it: clap-rs/clap#6421), so no command's options
        // would complete: the arms are spelled as the loop spells them.
        let text = String::from_utf8_lossy(&script)
            .replace("sluice__subcmd__remote", "sluice__remote")
            .into_bytes();
        script = text;
    }
    stdout::write(&script);
    sluice_cli::EXIT_SUCCEEDED
}

/// `man`: the man page (roff) on stdout, from the clap definitions: the
/// command's page, then a section for each command (its synopsis, its
/// description and its own options), subcommands included.
fn man() -> anyhow::Result<u8> {
    let cmd = <sluice_cli::Cli as clap::CommandFactory>::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    man_sections(&cmd, "sluice-remote", &mut page)?;
    stdout::write(&page);
    Ok(sluice_cli::EXIT_SUCCEEDED)
}

/// A section per subcommand of `cmd` (named `<parent> <name>`), each
/// holding its synopsis, description, options and examples as
/// subsections, then its own subcommands' sections.
fn man_sections(cmd: &clap::Command, parent: &str, page: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{parent} {}", sub.get_name());
        let man = clap_mangen::Man::new(sub.clone().bin_name(name.clone()));
        let mut section = Vec::new();
        man.render_synopsis_section(&mut section)?;
        man.render_description_section(&mut section)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut section)?;
        }
        if sub.get_after_help().is_some() {
            man.render_extra_section(&mut section)?;
        }
        page.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        // The page's sections become this command's subsections.
        for line in String::from_utf8_lossy(&section).lines() {
            let line = match line.strip_prefix(".SH ") {
                Some(title) => format!(".SS {title}"),
                None => line.to_string(),
            };
            page.extend_from_slice(line.as_bytes());
            page.push(b'\n');
        }
        man_sections(sub, &name, page)?;
    }
    Ok(())
}
