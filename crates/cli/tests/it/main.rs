//! The CLI's integration tests in one binary (one link instead of one per
//! file), each file a module; every test runs the `sluice-remote` binary
//! as a child, so none shares process state with another.

#[path = "../common/mod.rs"]
mod common;

mod completions_and_man;
mod credentials;
// The async service example, compiled here and run by `async_service`.
mod async_service;
#[path = "../../examples/async_service.rs"]
#[allow(dead_code)]
mod async_service_example;
mod demo;
mod exit_codes;
mod fetch;
mod fetch_limits;
mod forge;
mod forge_comment;
mod forge_credentials;
mod git_config;
mod help_and_progress;
mod https;
mod ids_and_evidence;
// The integrator's example, compiled here and run by `integrator_loop`.
#[path = "../../examples/integrator.rs"]
#[allow(dead_code)]
mod integrator;
mod integrator_loop;
mod interrupts;
mod json;
mod ledger;
mod ledger_reads;
mod ledger_tls;
mod local_failures;
mod ls_refs;
mod no_secret_anywhere;
mod progress_and_messages;
mod push_delete;
mod push_porcelain;
mod push_urls;
mod quiet_verbose_and_dirs;
// The README's quick start, compiled here and run by `readme`.
#[path = "../../examples/quick_start.rs"]
#[allow(dead_code)]
mod quick_start;
mod readme;
mod remote_text;
mod secrets;
mod signals;
mod ssh_command;
mod user_side;
mod write_errors;
