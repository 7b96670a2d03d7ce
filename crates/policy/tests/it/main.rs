//! The policy's integration tests in one binary (one link instead of one
//! per file), each file a module. `spans.rs` stays a binary of its own: it
//! installs the process's global tracing subscriber.

#[path = "../common/mod.rs"]
mod common;

mod abandoned;
mod attempts;
mod credentials;
mod evidence;
mod ledger;
mod logging;
mod metrics;
mod outcome_json;
mod properties;
mod read_first;
mod settle_failed_reads;
mod settle_kit;
mod settling;
mod writes;
