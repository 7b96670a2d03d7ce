//! The forge crate's integration tests in one binary (one link instead of
//! one per file), each file a module.

#[path = "../common/mod.rs"]
mod common;

mod cancel_in_flight;
mod configuration;
mod credentials_and_wire;
mod evidence;
mod exercise;
mod https;
mod in_runtime;
mod required_checks;
mod resends;
mod settle_reads;
mod writes;
