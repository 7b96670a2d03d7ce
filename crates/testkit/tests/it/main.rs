//! The testkit's own integration tests in one binary (one link instead of
//! one per file), each file a module.

#[path = "../common/mod.rs"]
mod common;

mod fixtures;
mod git_proxy;
mod http;
mod sshd;
