//! The one retry policy every call of sluice-remote to a remote runs under.
//!
//! > What the remote never judged is tried again; what it answered is not.
//! > A read is tried again whatever happened; a write only when the remote
//! > never judged it. A write whose answer was not read is settled by
//! > reading.
//!
//! Order of operations for one [`Operation`] run by [`Policy::run`] (reads)
//! or [`Policy::run_write`] (writes):
//!
//! 1. the operation id is claimed in the [`Ledger`] (a claimed id is
//!    [`OutcomeKind::Rejected`] without any call);
//! 2. a credential is bought when the operation needs one and holds none;
//!    then the remaining budget is computed (buying counts against it) and
//!    the attempt's timeout is capped by it (for writes, less a reserve for
//!    settling reads);
//! 3. the attempt returns a value or an [`AttemptError`] classed by its
//!    layer; the class × effect table decides whether to try again;
//! 4. an unknown write is settled by the caller's read ([`Settlement`]);
//! 5. between attempts backon's exponential backoff (jittered, capped) is
//!    adjusted by the remote's retry hint and the settle pause, checked
//!    against the deadline and the host's retry budget; after a refused
//!    credential the fresh one is bought before the pause, so the pause
//!    runs from its purchase;
//! 6. the [`Outcome`] carries the value or the answer, `may_have_applied`,
//!    `stopped` and the attempt history.
//!
//! This crate does no I/O of its own except the ledger file and the token
//! command; the clock and the sleeper are injectable.
//!
//! # Modules
//!
//! * `engine` — the run of one operation as named steps (claim, attempt,
//!   classify, wait, settle, finish) and the [`Policy`] value;
//! * `blocking_pool` (the `tokio` feature) — `on_blocking_pool`, a
//!   blocking call on tokio's blocking pool, cancelled when its future is
//!   dropped: what the async facades stand on;
//! * `bounds` — [`Bounds`], [`BackoffShape`] and the named [`Profile`]s;
//! * `call` — [`CallOptions`], what a caller gives any client's call
//!   (id, bounds, credentials, cancel flag, progress), and [`Progress`];
//! * `class` — [`Class`], [`Effect`], [`AttemptError`]: what a layer hands back;
//! * `outcome` — [`Outcome`] and its evidence, the design's JSON document;
//! * `ledger` — the [`Ledger`] trait, [`MemoryLedger`] and [`FileLedger`];
//! * `bucket` — the per-host retry budget ([`BudgetStore`], [`LocalBudgets`]);
//! * `credential` — [`CredentialSource`]s, fingerprints, user info in URLs;
//! * `clock` — the injectable [`Clock`] and [`Sleeper`], the [`CancelFlag`];
//! * `hint` — `Retry-After` and rate-limit resets;
//! * `refusal_log` — when a standing credential refusal is logged;
//! * [`metric`] — the metric names and their descriptions;
//! * [`text`] — the one `redact` and the one error-chain joiner of the
//!   workspace.
//!
//! # The contract
//!
//! What callers may rely on is what the crate root exports (the modules
//! above are private but for [`metric`] and [`text`]): [`Policy`] and its
//! `run*` methods, [`Operation`], [`Bounds`], [`AttemptError`] and the
//! closures' contexts ([`AttemptCtx`], [`ReconcileCtx`], [`Settlement`],
//! [`Rejection`]), [`Outcome`] with its JSON shape (versioned by
//! [`SCHEMA`]), the [`Ledger`], [`BudgetStore`] and [`CredentialSource`]
//! traits, and the metric names. Which file a step lives in is not.
//!
//! ```
//! use sluice_policy::{AttemptError, Bounds, Effect, Operation, OutcomeKind, Policy};
//! use std::time::Duration;
//!
//! let policy = Policy::default();
//! let op = Operation::new("ls-refs", Effect::Read, "git://127.0.0.1:9/repo")
//!     .bounds(Bounds::new(Duration::from_secs(5), Duration::from_secs(1), 3));
//! let mut calls = 0;
//! let outcome = policy.run(op, |ctx| {
//!     calls += 1;
//!     if ctx.n == 1 {
//!         return Err(AttemptError::unjudged("connect", "connection refused"));
//!     }
//!     ctx.reached("done");
//!     Ok(42)
//! });
//! assert_eq!(outcome.kind, OutcomeKind::Succeeded);
//! assert_eq!(outcome.value, Some(42));
//! assert_eq!(calls, 2);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "tokio")]
mod blocking_pool;
mod bounds;
mod bucket;
mod call;
mod class;
mod clock;
mod credential;
mod engine;
mod hint;
mod host;
mod ledger;
pub mod metric;
mod outcome;
mod refusal_log;
pub mod remote_text;
pub mod text;

#[cfg(feature = "tokio")]
pub use blocking_pool::on_blocking_pool;
pub use bounds::{BackoffShape, Bounds, Profile, UnknownProfile};
pub use bucket::{BudgetStore, LocalBudgets, RetryBudget, BUDGET_WAIT};
pub use call::{
    check_header, CallOptions, HeaderRefused, Progress, ProgressCallback, RESERVED_HEADERS,
};
pub use class::{AttemptError, AuthSignal, Class, Effect};
pub use clock::{CancelFlag, Clock, ManualClock, Sleeper, SystemClock, ThreadSleeper};
pub use credential::{
    fingerprint, percent_decode, scrub_user_info, user_info_span, Challenge, CommandSource,
    Credential, CredentialError, CredentialSource, Purchase, StaticSource,
};
pub use engine::{
    AttemptCtx, AttemptFacts, Operation, Policy, PolicyBuilder, ReconcileCtx, Rejection,
    Settlement, SAME_CREDENTIAL,
};
pub use hint::{parse_rate_limit_reset, parse_retry_after};
pub use host::host_of;
pub use ledger::{
    this_host, Claim, ClaimRequest, FileLedger, FinishRequest, Ledger, LedgerError, MemoryLedger,
    ProgressRequest, FINISH_FLOOR,
};
pub use outcome::{
    AttemptRecord, OperationInfo, Outcome, OutcomeKind, PreviousResult, PreviousRun, Reconciled,
    RejectedIsNotARun, SettlingRead, Stopped, Verdict, SCHEMA,
};
pub use refusal_log::REFUSAL_LOG_INTERVAL;
pub use secrecy;
