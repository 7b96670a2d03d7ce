//! The fault proxy's plain TCP mode: bytes forwarded as they come, with no
//! protocol understood, for the connections of a database (PostgreSQL,
//! PgBouncer) a test wants to cut or silence.
//!
//! [`TcpFaultProxy`] listens on `127.0.0.1:<free port>` and forwards each
//! connection to its upstream. At any time the test can
//! [`cut_all`](TcpFaultProxy::cut_all) (shut every open connection now,
//! both sides; new ones still pass) and choose a [`TcpMode`]: pass
//! through, stall new connections (accepted, held open, never answered:
//! a host gone silent), or stall every connection (the open ones stop
//! moving bytes too, until the mode changes back).
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use sluice_testkit::proxy::{TcpFaultProxy, TcpMode};
//! # let upstream: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
//! let proxy = TcpFaultProxy::start(upstream)?;
//! // ... connect a client to proxy.addr(), then the database goes silent:
//! proxy.set_mode(TcpMode::StallNew);
//! proxy.cut_all();
//! # Ok(()) }
//! ```

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::UPSTREAM_CONNECT_TIMEOUT;

/// What the proxy does with connections, new and open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TcpMode {
    /// Forward everything (the default).
    #[default]
    PassThrough,
    /// Accept new connections and hold them open without a byte, never
    /// connecting upstream; open connections still forward.
    StallNew,
    /// As [`TcpMode::StallNew`], and the open connections stop forwarding
    /// (what they read is held, and delivered when the mode goes back to
    /// [`TcpMode::PassThrough`] or [`TcpMode::StallNew`]).
    StallAll,
}

/// Shared between the test thread, the accept loop and the pumps.
#[derive(Debug, Default)]
struct Shared {
    mode: Mutex<TcpMode>,
    /// Woken when the mode changes or the proxy stops.
    changed: Condvar,
    /// Every socket of every open connection (client and upstream sides).
    open: Mutex<Vec<TcpStream>>,
    accepted: AtomicUsize,
    cuts: AtomicUsize,
    stopped: AtomicBool,
}

impl Shared {
    fn mode(&self) -> TcpMode {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn keep(&self, s: &TcpStream) {
        if let Ok(s) = s.try_clone() {
            self.open.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }

    /// Block while every connection is stalled; false once stopped.
    fn wait_while_stalled(&self) -> bool {
        let mut mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        while *mode == TcpMode::StallAll && !self.stopped.load(Ordering::SeqCst) {
            mode = self.changed.wait(mode).unwrap_or_else(|e| e.into_inner());
        }
        !self.stopped.load(Ordering::SeqCst)
    }
}

/// A plain TCP proxy that can cut every connection and stall new or open
/// ones. Stops (its accept loop ends, every connection is shut) when
/// dropped.
#[derive(Debug)]
pub struct TcpFaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl TcpFaultProxy {
    /// Listen on a free port of 127.0.0.1 and forward to `upstream`.
    pub fn start(upstream: SocketAddr) -> io::Result<TcpFaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("tcp-fault-proxy".into())
            .spawn(move || accept_loop(&listener, upstream, &s))?;
        Ok(TcpFaultProxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Choose what happens to new and open connections from now on.
    pub fn set_mode(&self, mode: TcpMode) {
        *self.shared.mode.lock().unwrap_or_else(|e| e.into_inner()) = mode;
        self.shared.changed.notify_all();
    }

    /// Shut every open connection now, both sides (held silent ones
    /// included); how many sockets were shut. New connections are then
    /// treated as the mode says.
    pub fn cut_all(&self) -> usize {
        let open: Vec<TcpStream> = self
            .shared
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for s in &open {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.shared.cuts.fetch_add(1, Ordering::SeqCst);
        open.len()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Times [`cut_all`](Self::cut_all) was called.
    pub fn cuts(&self) -> usize {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for TcpFaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        self.cut_all();
        // Wake the accept loop so that it sees the end.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, upstream: SocketAddr, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.keep(&client);
        if shared.mode() != TcpMode::PassThrough {
            continue; // held open by `open`, never answered
        }
        let Ok(server) = TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT_TIMEOUT) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        shared.keep(&server);
        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
            continue;
        };
        pump(client, s2, shared.clone());
        pump(server, c2, shared.clone());
    }
}

/// Forward `from` to `to` on a thread of its own, holding the bytes while
/// every connection is stalled; shut `to` when `from` ends.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: Arc<Shared>) {
    // Without a thread the streams are dropped with the closure; the
    // clones in `open` keep the client waiting until a cut.
    let _ = std::thread::Builder::new()
        .name("tcp-fault-pump".into())
        .spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if !shared.wait_while_stalled() || to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
        });
}
