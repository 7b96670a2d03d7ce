//! The tests that run this package's programs as other processes, in one
//! binary, each file a module.

mod pg_replicas;
mod policy_file_ledger;
mod sqlite_children;
