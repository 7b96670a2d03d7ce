//! Small networking helpers shared by the servers and the proxy.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 that was free a moment ago (bind to port 0, read the
/// port, drop the listener). Callers retry when it got taken meanwhile.
pub(crate) fn free_port() -> io::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Waits until `addr` accepts a connection, or `alive` says the server died,
/// or `timeout` passes.
pub(crate) fn wait_for_port(
    addr: SocketAddr,
    timeout: Duration,
    mut alive: impl FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        alive()?;
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{addr} did not accept connections within {timeout:?}: {e}"),
                ))
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// A stop flag that sleeping threads can wait on.
#[derive(Debug, Default)]
pub(crate) struct Stopper {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stopper {
    pub(crate) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sleeps for `d` unless stopped first; returns whether it was stopped.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}
