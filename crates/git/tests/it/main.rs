//! The git crate's integration tests in one binary (one link of gix's
//! weight instead of one per file), each file a module. `observe.rs` and
//! `ssh.rs` stay binaries of their own: one installs the process's global
//! tracing subscriber, the other sets `GIT_SSH_COMMAND` for its process.

#[path = "../common/mod.rs"]
mod common;

mod async_facade;
mod constructors;
mod credentials;
mod evidence;
mod faults;
mod fetch_limits;
mod fetch_memory;
mod fetch_rules;
mod git_config;
mod hostile_remote;
mod http;
mod http_redirects;
mod http_transfers;
mod https;
mod kept_handle;
mod local_failures;
mod long_lived;
mod maintenance;
mod proxy;
mod push;
mod read;
mod resends;
mod settle_reads;
mod transcripts;
mod transfers;
mod user_side;
mod vcs_names;
mod verdicts;
