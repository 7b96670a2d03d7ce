//! The connections of one PostgreSQL store: a bounded pool of
//! `tokio-postgres` clients on a runtime the store owns, every call under a
//! deadline.
//!
//! Why tokio-postgres and not the blocking `postgres` client: the blocking
//! client bounds nothing but the TCP connect (`connect_timeout`), and a
//! socket read timeout would cut a statement without telling the server.
//! Here each call is a future run by [`Pool::with`] under
//! `tokio::time::timeout_at`; when the bound passes, the connection is
//! dropped (its task aborted, closing the socket) and a cancel request is
//! sent for the statement it was running (from a thread of its own: the
//! caller's time is up), so the server stops it too. The runtime is a
//! current-thread one: a caller's thread drives the connections itself
//! while it waits (no hop to another thread per round trip: a third less
//! time per claim and finish than with a worker thread, measured without
//! `fsync`); callers on several threads take turns driving it, as tokio's
//! `block_on` does.
//!
//! Nothing outlives a transaction on a connection — statements are unnamed
//! (`query_typed`/`execute_typed`: one round trip each, nothing prepared),
//! locks are transaction-scoped, no session `SET` — so the pool works
//! behind PgBouncer in transaction pooling mode, and a connection the
//! server closed (a restart) is replaced by a new one on the next call.

use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_policy::LedgerError;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

use super::tls::MakeRustls;

/// How many connections one store holds at most (idle or in use): calls
/// beyond it wait, within their own bound, for one to be free.
pub const MAX_CONNECTIONS: usize = 8;

/// How long a cancel request for a statement past its bound may take.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// A client and the task that drives its socket.
struct Conn {
    client: Client,
    task: tokio::task::JoinHandle<()>,
}

/// How a call on one connection failed.
enum Failure {
    /// The driver's error (the server's words, or a broken connection).
    Pg(tokio_postgres::Error),
    /// The bound passed first.
    TimedOut,
}

/// What a caller got from the pool: an idle connection, or room for a new
/// one (counted already).
enum Got {
    Idle(Conn),
    Room,
}

#[derive(Default)]
struct State {
    idle: Vec<Conn>,
    /// Connections made (idle or in use) or being made.
    open: usize,
}

/// The connections of one store.
pub(crate) struct Pool {
    rt: Arc<tokio::runtime::Runtime>,
    config: tokio_postgres::Config,
    tls: MakeRustls,
    /// The database as it may be printed.
    pub(crate) shown: String,
    state: Mutex<State>,
    freed: Condvar,
}

/// Whether the server answered the statement (the connection is sound)
/// rather than the connection failing: a server's error other than those
/// that end the session (shutting down, connection failures).
fn answered(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => false,
        Some(db) => {
            let code = db.code().code();
            !(code.starts_with("57P")
                || code.starts_with("08")
                || *db.code() == SqlState::TOO_MANY_CONNECTIONS)
        }
    }
}

/// A bound as a message gives it: to the nearest tenth of a second (a
/// claim's bound less the microseconds already spent reads as the bound).
fn shown_bound(d: Duration) -> Duration {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(ms.saturating_add(50) / 100 * 100)
}

impl Pool {
    /// A pool for `config` (nothing connected yet).
    pub(crate) fn new(
        config: tokio_postgres::Config,
        tls: MakeRustls,
        shown: String,
    ) -> io::Result<Pool> {
        let rt = Arc::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
        );
        Ok(Pool {
            rt,
            config,
            tls,
            shown,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        })
    }

    /// The error of this database, its cause in one line.
    pub(crate) fn err(
        &self,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> LedgerError {
        let e = e.into();
        let source = match e.downcast::<io::Error>() {
            Ok(io) => *io,
            Err(other) => {
                // The driver's errors say "db error" or "error connecting to
                // server" and keep the reason in their sources.
                io::Error::other(sluice_policy::text::error_chain(other.as_ref()))
            }
        };
        LedgerError {
            path: self.shown.clone(),
            source,
        }
    }

    fn connect_err(&self, e: tokio_postgres::Error) -> LedgerError {
        let text = sluice_policy::text::error_chain(&e);
        self.err(io::Error::other(format!(
            "connecting ({}): {text}",
            self.tls.described
        )))
    }

    fn timed_out(&self, left: Duration, waiting_for: &str) -> LedgerError {
        self.err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "no answer within {} ({waiting_for}; {})",
                humantime::format_duration(shown_bound(left)),
                self.tls.described
            ),
        ))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing is left half-done under the lock: a list and a count.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, or room for a new one, by `deadline`.
    fn get(&self, deadline: Instant) -> Option<Got> {
        let mut st = self.lock();
        loop {
            if let Some(conn) = st.idle.pop() {
                return Some(Got::Idle(conn));
            }
            if st.open < MAX_CONNECTIONS {
                st.open += 1;
                return Some(Got::Room);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            st = self
                .freed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Give room counted for a connection back (it was never made, or it
    /// is dropped).
    fn release(&self) {
        self.lock().open -= 1;
        self.freed.notify_one();
    }

    /// Run `f` on a connection within `left`. A failure on a connection
    /// taken from the idle list (the server may have closed it since: a
    /// restart, an idle timeout, PgBouncer) is tried once more on a new
    /// one; a failure on a new one is returned. `f` must be safe to run
    /// twice (every caller's is). When `left` passes first, the error says
    /// so and the connection is dropped (its statement cancelled).
    pub(crate) fn with<R>(
        &self,
        left: Duration,
        mut f: impl AsyncFnMut(&Client) -> Result<R, tokio_postgres::Error>,
    ) -> Result<R, LedgerError> {
        let deadline = Instant::now() + left;
        let Some(got) = self.get(deadline) else {
            return Err(self.timed_out(left, "waiting for a free connection of the pool"));
        };
        if let Got::Idle(conn) = got {
            match self.run(&conn, deadline, &mut f) {
                Ok(r) => {
                    self.put(conn);
                    return Ok(r);
                }
                Err(Failure::Pg(e)) if answered(&e) && !conn.client.is_closed() => {
                    // The server answered: the connection is fine, the
                    // statement is not; trying again would not mend it.
                    self.put(conn);
                    return Err(self.err(e));
                }
                Err(Failure::TimedOut) => {
                    self.discard(conn, true);
                    return Err(self.timed_out(left, "a statement"));
                }
                Err(Failure::Pg(e)) => {
                    tracing::debug!(database = %self.shown, error = %sluice_policy::text::error_chain(&e), "a pooled connection failed: trying a new one");
                    // Its room is kept for the new one.
                    self.drop_conn(conn, false);
                }
            }
        }
        let conn = match self.connect(deadline, left) {
            Ok(conn) => conn,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        match self.run(&conn, deadline, &mut f) {
            Ok(r) => {
                self.put(conn);
                Ok(r)
            }
            Err(Failure::TimedOut) => {
                self.discard(conn, true);
                Err(self.timed_out(left, "a statement"))
            }
            Err(Failure::Pg(e)) => {
                if answered(&e) && !conn.client.is_closed() {
                    self.put(conn);
                } else {
                    self.discard(conn, false);
                }
                Err(self.err(e))
            }
        }
    }

    /// Run `f` once on a new connection within `left`, the connection
    /// dropped after it unless `f` succeeded (opening the store: the
    /// schema's check, a transaction of several statements).
    pub(crate) fn fresh<R>(
        &self,
        left: Duration,
        f: impl AsyncFnOnce(&mut Client) -> Result<R, tokio_postgres::Error>,
    ) -> Result<R, LedgerError> {
        let deadline = Instant::now() + left;
        // Room for it (an idle one is given back first).
        let idle = {
            let mut st = self.lock();
            st.idle.pop()
        };
        match idle.map(Got::Idle).or_else(|| self.get(deadline)) {
            Some(Got::Idle(conn)) => self.drop_conn(conn, false),
            Some(Got::Room) => {}
            None => {
                return Err(self.timed_out(left, "waiting for a free connection of the pool"));
            }
        }
        let mut conn = match self.connect(deadline, left) {
            Ok(conn) => conn,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        let r = self.rt.block_on(async {
            match tokio::time::timeout_at(deadline.into(), f(&mut conn.client)).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(Failure::Pg(e)),
                Err(_) => Err(Failure::TimedOut),
            }
        });
        match r {
            Ok(r) => {
                self.put(conn);
                Ok(r)
            }
            Err(Failure::TimedOut) => {
                self.discard(conn, true);
                Err(self.timed_out(left, "opening the ledger"))
            }
            Err(Failure::Pg(e)) => {
                // Perhaps mid-transaction: not reused.
                self.discard(conn, false);
                Err(self.err(e))
            }
        }
    }

    fn run<R>(
        &self,
        conn: &Conn,
        deadline: Instant,
        f: &mut impl AsyncFnMut(&Client) -> Result<R, tokio_postgres::Error>,
    ) -> Result<R, Failure> {
        self.rt.block_on(async {
            match tokio::time::timeout_at(deadline.into(), f(&conn.client)).await {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(Failure::Pg(e)),
                Err(_) => Err(Failure::TimedOut),
            }
        })
    }

    /// A new connection by `deadline` (TCP, TLS as the URL says, login).
    fn connect(&self, deadline: Instant, left: Duration) -> Result<Conn, LedgerError> {
        // The timer is made inside the runtime's context.
        let made = self.rt.block_on(async {
            tokio::time::timeout_at(deadline.into(), self.config.connect(self.tls.clone())).await
        });
        let (client, connection) = match made {
            Ok(Ok(made)) => made,
            Ok(Err(e)) => return Err(self.connect_err(e)),
            Err(_) => return Err(self.timed_out(left, "connecting")),
        };
        let shown = self.shown.clone();
        let task = self.rt.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(database = %shown, error = %sluice_policy::text::error_chain(&e), "a database connection ended");
            }
        });
        Ok(Conn { client, task })
    }

    /// Keep `conn` for the next call.
    fn put(&self, conn: Conn) {
        if conn.client.is_closed() {
            self.discard(conn, false);
            return;
        }
        self.lock().idle.push(conn);
        self.freed.notify_one();
    }

    /// Drop `conn` and give its room back.
    fn discard(&self, conn: Conn, cancel: bool) {
        self.drop_conn(conn, cancel);
        self.release();
    }

    /// Drop `conn` (its room still counted): abort the task that drives it,
    /// closing its socket, and, when a statement may still run on the
    /// server, send a cancel request for it.
    fn drop_conn(&self, conn: Conn, cancel: bool) {
        if cancel {
            // On a thread of its own: the caller's time is up, and the
            // runtime runs only inside some caller's `block_on`.
            let token = conn.client.cancel_token();
            let tls = self.tls.clone();
            let rt = self.rt.clone();
            let spawned = std::thread::Builder::new()
                .name("sluice-ledger-cancel".into())
                .spawn(move || {
                    rt.block_on(async {
                        let _ = tokio::time::timeout(CANCEL_WAIT, token.cancel_query(tls)).await;
                    })
                });
            if let Err(e) = spawned {
                tracing::debug!(database = %self.shown, error = %e, "no thread to cancel a statement");
            }
        }
        conn.task.abort();
    }
}
