//! Test fixtures for sluice-remote: loopback git servers, repository
//! builders, deterministic fixture repositories and a phase-aware fault proxy.
//!
//! Everything here drives the `git` command line (and `lighttpd` for smart
//! HTTP); nothing depends on gitoxide or on the other workspace crates, so the
//! server side of a test is always checked by an independent implementation.
//!
//! * [`daemon::GitDaemon`] — `git daemon` on `127.0.0.1` with a free port.
//! * [`http_backend::HttpBackend`] — `git http-backend` behind `lighttpd`.
//! * [`sshd::Sshd`] — OpenSSH's `sshd` with throwaway keys, for `ssh://`.
//! * [`repo`] — deterministic repository builders and git CLI helpers.
//! * [`fixtures`] — the named fixture repositories of `fixtures/build.sh`.
//! * [`proxy::FaultProxy`] — a TCP proxy that understands pkt-lines (and
//!   HTTP/1.1) well enough to inject a named fault at a named point of the
//!   git conversation, and records every connection.
//! * [`pktline`] — a small, pure pkt-line framer.
//! * [`scripted::ScriptedServer`] — a scripted, hostile git:// server that
//!   answers every connection with a chosen [`scripted::Script`] (malformed
//!   pkt-lines, endless advertisements, reports naming refs never pushed,
//!   side-band fatals, oversized packs).
//! * [`fake_forge::FakeForge`] — a fake GitHub REST API on `127.0.0.1`
//!   with state and per-endpoint faults, for the forge client's tests.
//! * [`capture::Capture`] — a `tracing` subscriber that keeps every event
//!   with the spans it was in, for tests of what an operator reads.
//! * [`tinyproxy::Tinyproxy`] — a real forward proxy (CONNECT for https).
//! * [`postgres::Postgres`] — a real PostgreSQL server with a throwaway data
//!   directory (started as the `postgres` user when the tests run as root),
//!   with TLS on when asked.
//! * [`pgbouncer::PgBouncer`] — a real PgBouncer in transaction pooling mode
//!   in front of it.
//! * [`tls::TestPki`] — a throwaway CA and server certificates per run
//!   (good, another CA's, expired, another name's) for https and PostgreSQL
//!   servers, and a client certificate.
//!
//! (`net`, private: the listener and connection helpers the servers and the
//! proxy share.)

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod capture;
pub mod daemon;
pub mod fake_forge;
pub mod fixtures;
pub mod http_backend;
pub mod pgbouncer;
pub mod pktline;
pub mod postgres;
pub mod proxy;
pub mod repo;
pub mod scripted;
pub mod sshd;
pub mod tinyproxy;
pub mod tls;

mod net;

pub use capture::{Capture, EventSeen, SpanSeen};
pub use daemon::GitDaemon;
pub use http_backend::{HttpBackend, Redirect};
pub use pgbouncer::PgBouncer;
pub use postgres::{Postgres, PostgresOptions, PostgresTls, TlsAuth};
pub use proxy::{ConnectionRecord, Fault, FaultProxy, HttpExchange, Point, Protocol, Service};
pub use repo::{BareRepo, RepoBuilder};
pub use sshd::{Sshd, SshdOptions};
pub use tinyproxy::Tinyproxy;
pub use tls::{CertFiles, ServerCert, TestPki};
