//! ls-refs, fetch and push in-process through gitoxide, every failure classed
//! from the wire.
//!
//! Order of operations for one call: the URL, refspecs and ref names are
//! checked ([`InputError`] before any remote call); the [`sluice_policy`]
//! policy runs attempts; each attempt opens its own connection (our socket
//! for `git://`, our child for `file://` and `ssh://`, our `Http` for
//! `http(s)://`) under a watchdog that enforces the attempt's hard deadline,
//! speaks the protocol through gix-transport / gix-protocol (push is ours:
//! send-pack on `Transport::request` and gix-pack), records the phase
//! reached, and classes any failure from what the wire saw ([`GitError`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use sluice_git::{CallOptions, GitClient};
//! use sluice_policy::Policy;
//!
//! let client = GitClient::new(Arc::new(Policy::default()));
//! let outcome = client
//!     .ls_refs("git://127.0.0.1:9418/repo.git", &["refs/heads/".into()], &CallOptions::default())
//!     .expect("a valid URL");
//! for r in outcome.value.unwrap_or_default() {
//!     println!("{:?}\t{}", r.oid, r.name);
//! }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod client;
mod connect;
mod error;
mod fetch;
mod http;
mod local;
mod lsrefs_http;
mod progress;
pub mod push;
mod remote;
mod watchdog;
mod wire;

pub use client::{
    CallOptions, FetchedRef, GitClient, InputError, Progress, ProgressCallback, RemoteRef,
};
pub use error::{GitError, Phase};
pub use fetch::indexer::remove_temporary_files;
pub use fetch::{FetchOptions, FetchStatus, TagMode};
pub use push::{
    check_ref_name, check_short_name, expand_destination, parse_lease, parse_lease_spec, parse_oid,
    Lease, LeaseSpec, PackStats, PushOptions, PushReport, PushSpec, RefResult, RefStatus,
    RefUpdate, RejectReason,
};
pub use remote::{redact, BadUrl, Remote, TransportKind};
pub use sluice_https::{HttpsConfig, HttpsError, ProxyChoice, TlsRefusal};
