//! A TCP gate that drops a client's request for protocol v2 on its way to a
//! v2-capable server, so the server answers in protocol v0.
//!
//! sluice asks every server for protocol v2 when it reads, and a git 2.x
//! server grants it; the server side has no setting that refuses it
//! (`protocol.version` is a client setting; upload-pack looks only at the
//! `GIT_PROTOCOL` its front end passes on). What makes a v2-capable server
//! speak v0 in the field is a front end that does not pass the request on:
//! an old `git daemon`, an sshd without `AcceptEnv GIT_PROTOCOL`, an HTTP
//! proxy that drops the `Git-Protocol` header. The gate is that front end:
//!
//! * [`Gate::git`] (git://): rewrites the first pkt-line of each connection,
//!   `git-upload-pack /r.git\0host=H\0\0version=2\0`, to
//!   `git-upload-pack /r.git\0host=H\0`, then forwards bytes both ways.
//! * [`Gate::http`] (smart HTTP): removes the `Git-Protocol` header from each
//!   request and makes every exchange `Connection: close` (on the request
//!   and on the response), so each connection carries one request and the
//!   gate never has to frame bodies.
//!
//! [`Gate::stripped`] counts the requests from which it removed something.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the gate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Git,
    Http,
}

/// A running gate on `127.0.0.1:<free port>`; stops accepting on drop.
#[derive(Debug)]
pub struct Gate {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stripped: Arc<AtomicUsize>,
    acceptor: Option<JoinHandle<()>>,
}

impl Gate {
    /// A git:// gate in front of `upstream` (a daemon).
    pub fn git(upstream: SocketAddr) -> io::Result<Gate> {
        Self::start(upstream, Mode::Git)
    }

    /// A smart-HTTP gate in front of `upstream` (a web server).
    pub fn http(upstream: SocketAddr) -> io::Result<Gate> {
        Self::start(upstream, Mode::Http)
    }

    fn start(upstream: SocketAddr, mode: Mode) -> io::Result<Gate> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stripped = Arc::new(AtomicUsize::new(0));
        let acceptor = {
            let stop = Arc::clone(&stop);
            let stripped = Arc::clone(&stripped);
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = conn else { continue };
                    let stripped = Arc::clone(&stripped);
                    std::thread::spawn(move || {
                        let _ = serve(client, upstream, mode, &stripped);
                    });
                }
            })
        };
        Ok(Gate {
            addr,
            stop,
            stripped,
            acceptor: Some(acceptor),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many requests had a protocol-version request removed.
    pub fn stripped(&self) -> usize {
        self.stripped.load(Ordering::SeqCst)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    mode: Mode,
    stripped: &AtomicUsize,
) -> io::Result<()> {
    let mut server = TcpStream::connect_timeout(&upstream, Duration::from_secs(5))?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    match mode {
        Mode::Git => {
            let (head, removed) = git_request(&mut client)?;
            if removed {
                stripped.fetch_add(1, Ordering::SeqCst);
            }
            server.write_all(&head)?;
            splice(client, server)
        }
        Mode::Http => {
            let (head, rest) = read_head(&mut client)?;
            let (head, removed) = rewrite_head(&head, true);
            if removed {
                stripped.fetch_add(1, Ordering::SeqCst);
            }
            server.write_all(&head)?;
            server.write_all(&rest)?;
            // Request body (if any) upstream, in the background.
            let up = {
                let mut from = client.try_clone()?;
                let mut to = server.try_clone()?;
                std::thread::spawn(move || {
                    let _ = io::copy(&mut from, &mut to);
                    let _ = to.shutdown(Shutdown::Write);
                })
            };
            let (head, rest) = read_head(&mut server)?;
            let (head, _) = rewrite_head(&head, false);
            client.write_all(&head)?;
            client.write_all(&rest)?;
            let _ = io::copy(&mut server, &mut client);
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
            let _ = up.join();
            Ok(())
        }
    }
}

/// Reads the daemon request (the first pkt-line) and returns it without
/// its extra parameters (everything after `host=...\0`), and whether there
/// were any.
fn git_request(client: &mut impl Read) -> io::Result<(Vec<u8>, bool)> {
    let mut len = [0u8; 4];
    client.read_exact(&mut len)?;
    let n = std::str::from_utf8(&len)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .filter(|n| *n >= 4)
        .ok_or_else(|| io::Error::other("not a pkt-line"))?;
    let mut payload = vec![0u8; n - 4];
    client.read_exact(&mut payload)?;
    let parts: Vec<&[u8]> = payload.split(|b| *b == 0).collect();
    let mut kept = parts[0].to_vec();
    kept.push(0);
    if let Some(host) = parts.get(1).filter(|p| p.starts_with(b"host=")) {
        kept.extend_from_slice(host);
        kept.push(0);
    }
    let removed = kept.len() < payload.len();
    let mut line = format!("{:04x}", kept.len() + 4).into_bytes();
    line.extend_from_slice(&kept);
    Ok((line, removed))
}

/// Reads an HTTP head (through the blank line); returns it and the bytes
/// read past it.
fn read_head(s: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > 256 * 1024 {
            return Err(io::Error::other("HTTP head too long"));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed inside an HTTP head",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Drops `Connection`, `Keep-Alive` and (for requests) `Git-Protocol`
/// headers, adds `Connection: close`; returns the head and whether a
/// `Git-Protocol` header was removed.
fn rewrite_head(head: &[u8], request: bool) -> (Vec<u8>, bool) {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    let mut removed = false;
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line
            .split_once(':')
            .map(|(n, _)| n.trim().to_ascii_lowercase());
        match name.as_deref() {
            Some("connection") | Some("keep-alive") => continue,
            Some("git-protocol") if request => {
                removed = true;
                continue;
            }
            _ => {}
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    (out.into_bytes(), removed)
}

/// Copies both ways until each side has closed its half.
fn splice(client: TcpStream, server: TcpStream) -> io::Result<()> {
    let (mut c_read, mut s_write) = (client.try_clone()?, server.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let _ = io::copy(&mut s_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_request_loses_its_extra_parameters() {
        let mut req: &[u8] = b"0037git-upload-pack /r.git\0host=127.0.0.1:1\0\0version=2\0rest";
        let (line, removed) = git_request(&mut req).unwrap();
        assert!(removed);
        assert_eq!(line, b"002cgit-upload-pack /r.git\0host=127.0.0.1:1\0");
        assert_eq!(req, b"rest");
        let mut plain: &[u8] = b"002cgit-upload-pack /r.git\0host=127.0.0.1:1\0";
        let (line, removed) = git_request(&mut plain).unwrap();
        assert!(!removed);
        assert_eq!(line, b"002cgit-upload-pack /r.git\0host=127.0.0.1:1\0");
    }

    #[test]
    fn a_request_head_loses_git_protocol_and_keep_alive() {
        let (head, removed) = rewrite_head(
            b"POST /git/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\ngit-protocol: version=2\r\nConnection: keep-alive\r\n\r\n",
            true,
        );
        assert!(removed);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /git/r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_response_head_keeps_its_headers_but_closes() {
        let (head, removed) = rewrite_head(
            b"HTTP/1.1 200 OK\r\nContent-Type: x\r\nGit-Protocol: odd\r\n\r\n",
            false,
        );
        assert!(!removed);
        assert!(String::from_utf8(head)
            .unwrap()
            .ends_with("Git-Protocol: odd\r\nConnection: close\r\n\r\n"));
    }
}
