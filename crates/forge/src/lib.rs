//! The forge's HTTP API (GitHub's REST API, or GitHub Enterprise's) through
//! blocking `reqwest`, every call under the one retry policy of
//! [`sluice_policy`].
//!
//! * [`ForgeClient`] — one value per forge, `Send + Sync`, shared: it holds
//!   the policy (retry budget, ledger), the credential source, a cap on
//!   concurrent requests per host and the write pacing (writes to one host
//!   one at a time, each at least a second after the previous one ended).
//! * One calling convention, git's: every call takes
//!   `&`[`CallOptions`] (the policy's, re-exported) and returns
//!   `Result<Outcome<T>, `[`ForgeInputError`]`>` — bad input (a URL, a
//!   sha, a ref name, a number, a state, a head, a repository) is an `Err`
//!   before any request, with nothing claimed or sent.
//! * Every call is one operation and ends with an [`Outcome`](sluice_policy::Outcome): GET is a
//!   read, POST/PATCH/PUT/DELETE are writes. A failed request is a
//!   [`ForgeFailure`] (the status, GitHub's `message` and
//!   `documentation_url` as data), carried as the source of the policy's
//!   `AttemptError` (`error.source_as::<ForgeFailure>()`); it is classed by
//!   one pure function ([`classify`] / [`failed`]), whose statuses are the
//!   workspace's one table ([`sluice_https::status_class`], git's smart HTTP
//!   uses it too); the policy decides on retries, credential refusals and
//!   waits. Every outcome with an error carries a `ForgeFailure` as its
//!   source (a credential source's failure as
//!   [`ForgeFailure::Credential`]).
//! * A client built without `.policy(shared)` has a policy of its own
//!   (ledger and retry budget): see [`ForgeClientBuilder`].
//! * The typed calls ([`ForgeClient::get_pull`],
//!   [`ForgeClient::create_pull`], [`ForgeClient::list_pulls_by_head`],
//!   [`ForgeClient::ci_status`] / [`ForgeClient::ci_status_with`] (the
//!   verdict in the value: see [`CiStatus`]), [`ForgeClient::create_issue_comment`],
//!   [`ForgeClient::create_check_run`]) carry their settling reads; the
//!   generic [`ForgeClient::request`], [`ForgeClient::request_write`] and
//!   [`ForgeClient::get_url`] serve the rest.
//! * Reads are conditional: the last answer to a GET is kept with its
//!   `ETag` per URL and credential ([`KEPT_ANSWERS`] at most, the least
//!   recently used evicted), `If-None-Match` is sent, and a `304` is
//!   answered from what was kept (counted in
//!   `sluice_remote_not_modified_total{host}`).
//! * Credentials: the policy's sources (static, command), and
//!   [`GitHubAppSource`] (a JWT buys installation tokens, cached until
//!   shortly before they expire). The API gets `Authorization: Bearer`;
//!   secrets stay in `secrecy` types and only fingerprints are logged. A
//!   redirect to another host never carries the credential (reqwest drops
//!   `Authorization` when the host, port or scheme changes), and writes never
//!   follow redirects.
//!
//! Phases: `connect` → `request-sent` → `response-headers` → `body`.
//!
//! ```no_run
//! use sluice_forge::{CallOptions, ForgeClient, RepoRef};
//! use sluice_policy::{Bounds, OutcomeKind};
//! use std::time::Duration;
//!
//! let client = ForgeClient::new("https://api.github.com").expect("client");
//! let opts = CallOptions::new().bounds(Bounds::new(Duration::from_secs(12), Duration::from_secs(5), 2));
//! let out = client
//!     .ci_status(&RepoRef::new("octo", "repo"), "main", &opts)
//!     .expect("a repository and a ref name");
//! if out.kind == OutcomeKind::Succeeded {
//!     let ci = out.value.expect("value");
//!     println!("{} (missing: {:?})", ci.state.as_str(), ci.missing);
//! }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "app")]
mod app;
#[cfg(feature = "tokio")]
mod async_client;
mod base;
mod builder;
mod calls;
mod ci;
mod classify;
mod client;
mod error;
mod etag;
mod exchange;
mod gate;
mod input;
mod local;
mod pages;
mod phase;
mod reading;
mod types;

#[cfg(feature = "app")]
pub use app::{AppClaims, GitHubAppSource, JWT_BACKDATE, JWT_LIFETIME};
#[cfg(feature = "tokio")]
pub use async_client::AsyncForgeClient;
pub use base::{split_user_info, API_VERSION, DEFAULT_USER_AGENT};
pub use builder::ForgeClientBuilder;
pub use ci::{CiQuery, CiState, CiStatus};
pub use classify::{
    api_message, classify, documentation_url, failed, is_secondary_rate_limit, retry_hint,
    Exchange, SECONDARY_LIMIT_WAIT,
};
pub use client::ForgeClient;
pub use error::{CredentialError, ForgeError, ForgeFailure, ForgeInputError, LocalCause};
pub use etag::CAPACITY as KEPT_ANSWERS;
pub use exchange::{effect_of, HttpResponse};
pub use pages::next_page;
pub use phase::ForgePhase;
pub use reading::Reading;
pub use reqwest::header::HeaderMap;
pub use reqwest::{Method, Url};
pub use sluice_https::{HttpsConfig, HttpsError, ProxyChoice, TlsRefusal};
pub use sluice_policy::CallOptions;
pub use types::{
    CheckRun, CheckRunList, CheckRunUpdate, CombinedStatus, GitRef, IssueComment, MergeMethod,
    MergeResult, NewCheckRun, NewPullRequest, PullEnd, PullRequest, RefTarget, RepoRef,
    StatusContext,
};
