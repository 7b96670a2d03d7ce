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
//!
//! # The contract
//!
//! What this crate promises to callers is what the crate root re-exports:
//! [`GitClient`] and its three operations ([`GitClient::ls_refs`],
//! [`GitClient::fetch`] / [`GitClient::fetch_with`], [`GitClient::push`]),
//! [`CallOptions`], [`FetchOptions`] and [`PushOptions`], the values they
//! return ([`RemoteRef`], [`FetchedRef`], [`PushReport`] and its parts),
//! the errors ([`InputError`], [`GitError`] and [`GitPhase`],
//! [`TrackingRefError`]), the CLI's textual forms of a push ([`PushSpec`],
//! [`LeaseSpec`], [`parse_lease_spec`]), [`Remote`], [`NamedRemote`] (a
//! remote by name, [`GitClient::fetch_remote`]), [`check_trusted`],
//! [`fresh_view`], [`redact`], [`remove_temporary_files`], [`maintain`]
//! (packs consolidated, as git's `gc --auto`), and [`gix`] itself (the gix the signatures name). The public [`push`] module also
//! exposes its pure parsers (`push::report`, `push::spec`: the ref-name
//! checks, `parse_lease`, `parse_oid`, `expand_destination`) and
//! `push::pack`'s statistics, for fuzzing and property tests; everything
//! else is private.
//!
//! # Features
//!
//! * `https` (default): `https://` remotes, TLS through rustls by
//!   [`sluice_https`] ([`GitClient::with_https`], [`HttpsConfig`] and the
//!   other https re-exports); implies `http`.
//! * `http`: plain `http://` remotes (smart HTTP on reqwest and tokio).
//!
//! With neither (`default-features = false`) the crate speaks `git://`,
//! `ssh://` and `file://` only, without reqwest, tokio or rustls; an
//! http(s) URL is refused before any call ([`InputError::Url`], naming the
//! feature it needs). [`GitError`] is `#[non_exhaustive]`: its `Http` and
//! `Tls` variants exist with `http` only.
//!
//! # Modules
//!
//! * `client` — the client value, and what the three operations share
//!   (the policy's operation for a call); `input` — [`InputError`], input
//!   refused before any call.
//! * `ls_refs` — the ls-refs operation and its attempt; `ls_refs::one_request`
//!   lists a v2 HTTP remote in one POST (`http::v2_remotes` remembers which
//!   remotes spoke v2).
//! * `fetch` — the fetch operation (`fetch::attempt`, step by step), the
//!   negotiation and pack receiving, `fetch::indexer` (storing the pack),
//!   `fetch::apply` (reading deltas), `fetch::refs` (git's rules for the
//!   local refs), `fetch::tips` (where the negotiation starts: the local
//!   tips, the remote's refs known common; fewer tips in repositories with
//!   many refs), `fetch::negotiator` (which `have`s, git's `consecutive`
//!   ours, the fetch's own refs offered first), `fetch::options` ([`FetchOptions`], [`TagMode`]), `fetch::named`
//!   (a configured remote fetched by name, [`GitClient::fetch_remote`]).
//! * [`push`] — the push's values; `push::attempt` (the operation),
//!   `push::steps` (connected → advertised → commands sent → pack sent →
//!   reported, each a value the next consumes), `push::settle` (the
//!   settling read), `push::advert`, `push::report`, `push::spec`,
//!   `push::pack`, `push::bitmap`, `push::delta`, `push::odb` (the object
//!   reader `pack` and `bitmap` share), `push::tracking` (a configured
//!   remote's remote-tracking refs after a push that landed).
//! * `attempt` — an attempt's context with the phase reached as a
//!   [`GitPhase`], and the shield that turns a panic into an error.
//! * `connect` — opening one attempt's session (socket, child, `Http`)
//!   under a watchdog; how the client dials (`Connector`).
//! * `http` — our `Http` for gix-transport on reqwest, and the lazily
//!   built reqwest clients.
//! * `wire` — what the client saw on the wire; `error` — [`GitPhase`],
//!   [`GitError`] and the one table that classes a failure from the wire;
//!   `reject` — [`RejectReason`], its names and its reading of a report;
//!   `local` — this side's failures (the object store, the disk), always
//!   `local-error`, never classed from the wire.
//! * `watchdog` — the attempt's hard deadline.
//! * `remote` — URL parsing; `remote_ref` — a ref as a remote advertised it.
//! * `named_remote` — a configured remote read by name as git reads it
//!   ([`NamedRemote`]: `url`, `pushurl`, `fetch` lines, `tagOpt`, the
//!   `insteadOf` rewrites) and the remote a URL stands for.
//! * `pktline` — pkt-line lengths and payloads; `refspec` — a name mapped
//!   through a refspec; `progress` — progress values and gix's sink;
//!   `view` — a fresh view of the caller's repository ([`fresh_view`],
//!   one per attempt, and for callers who keep a handle open), and the
//!   ownership check every view passes first ([`check_trusted`]: git's
//!   `safe.directory`).
//! * `fetch::fetch_head` — `FETCH_HEAD`, written by every fetch as git
//!   writes it ([`ForMerge`]).
//! * `maintenance` — packs consolidated in-process after a fetch, as
//!   git's `gc --auto` and `repack --geometric=2` would ([`maintain`]).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "tokio")]
mod async_client;
mod attempt;
mod client;
mod connect;
mod credentials;
mod error;
mod fetch;
#[cfg(feature = "http")]
mod http;
mod http_config;
mod input;
mod limit;
mod local;
mod ls_refs;
mod maintenance;
mod named_remote;
mod pktline;
mod progress;
pub mod push;
mod refspec;
mod reject;
mod remote;
mod remote_ref;
mod ssh_refusal;
mod view;
mod watchdog;
mod wire;

#[cfg(feature = "tokio")]
pub use async_client::AsyncGitClient;
pub use client::GitClient;
pub use credentials::GitCredentials;
pub use error::{GitError, GitPhase};
pub use fetch::indexer::remove_temporary_files;
pub use fetch::options::{LimitExceeded, PackObject};
pub use fetch::{FetchOptions, FetchStatus, FetchedRef, ForMerge, TagMode};
pub use http_config::{rewrite_url, HttpSetting, HttpSettingError, HttpSettings};
pub use input::InputError;
pub use limit::TimeoutLimit;
pub use local::{LocalCause, ObjectStoreError};
pub use maintenance::{maintain, AfterFetch, Maintained, MaintenanceError};
pub use named_remote::{is_remote_name, NamedRemote};
pub use progress::{Progress, ProgressCallback};
pub use push::spec::{parse_lease_spec, LeaseSpec, PushSpec};
pub use push::tracking::TrackingRefError;
pub use push::{
    Lease, PackStats, PushOptions, PushReport, RefResult, RefStatus, RefUpdate, RejectReason,
};
pub use remote::{BadUrl, Remote, TransportKind};
pub use remote_ref::RemoteRef;
#[cfg(feature = "https")]
pub use sluice_https::{HttpsConfig, HttpsError, ProxyChoice, TlsRefusal};
pub use sluice_policy::text::redact;
pub use sluice_policy::CallOptions;
pub use ssh_refusal::SshRefusal;
pub use view::{check_trusted, fresh_view, Untrusted, ViewError};

/// The gix this crate is built on; use `sluice_git::gix::Repository` and
/// `sluice_git::gix::ObjectId` (they appear in this crate's signatures), so
/// a caller needs no gix dependency of its own, nor the same version of it.
///
/// A [`gix::Repository`] kept open stops seeing new packs after about 32
/// fetches: see [`fresh_view`].
pub use gix;
