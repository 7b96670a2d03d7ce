//! The git CLI's view of a server, and the server's own words.
//!
//! [`ls_remote`] runs `git ls-remote --symref` (git 2.47, asking for
//! protocol v2 unless told `protocol.version=0`) with `GIT_TRACE_PACKET` on,
//! so the answer shows which protocol the server spoke and what it
//! advertised. [`receive_pack_capabilities`] reads a git:// server's
//! receive-pack advertisement directly.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use sluice_git::RemoteRef;

/// Refs as `git ls-remote --symref` shows them: `name → oid` (peeled tags
/// as `name^{}`) and `name → symref target`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every ref, and `^{}` entries for peeled tags.
    pub refs: BTreeMap<String, String>,
    /// Symbolic refs and their targets.
    pub symrefs: BTreeMap<String, String>,
}

impl Listing {
    /// The same view of what sluice's ls-refs returned.
    pub fn of(refs: &[RemoteRef]) -> Listing {
        let mut l = Listing::default();
        for r in refs {
            if let Some(oid) = r.oid {
                l.refs.insert(r.name.clone(), oid.to_string());
            }
            if let Some(p) = r.peeled {
                l.refs.insert(format!("{}^{{}}", r.name), p.to_string());
            }
            if let Some(t) = &r.symref_target {
                l.symrefs.insert(r.name.clone(), t.clone());
            }
        }
        l
    }

    /// The differences from `other`, one line each (empty when equal).
    pub fn diff(&self, other: &Listing, mine: &str, theirs: &str) -> Vec<String> {
        let mut out = Vec::new();
        let names: std::collections::BTreeSet<&String> =
            self.refs.keys().chain(other.refs.keys()).collect();
        for n in names {
            let (a, b) = (self.refs.get(n), other.refs.get(n));
            if a != b {
                out.push(format!("{n}: {mine} {a:?}, {theirs} {b:?}"));
            }
        }
        let names: std::collections::BTreeSet<&String> =
            self.symrefs.keys().chain(other.symrefs.keys()).collect();
        for n in names {
            let (a, b) = (self.symrefs.get(n), other.symrefs.get(n));
            if a != b {
                out.push(format!("symref {n}: {mine} {a:?}, {theirs} {b:?}"));
            }
        }
        out
    }
}

/// What `git ls-remote` printed and the packet trace of it.
#[derive(Debug, Clone)]
pub struct LsRemote {
    /// The refs listed.
    pub listing: Listing,
    /// The lines the server sent (`GIT_TRACE_PACKET`'s `<` lines), in order.
    pub received: Vec<String>,
}

impl LsRemote {
    /// Whether the server answered in protocol v2.
    pub fn spoke_v2(&self) -> bool {
        self.received.first().is_some_and(|l| l == "version 2")
    }

    /// The server's `agent=` capability, if it sent one.
    pub fn agent(&self) -> Option<String> {
        self.received.iter().find_map(|l| {
            l.replace("\\0", " ")
                .split_whitespace()
                .find_map(|w| w.strip_prefix("agent=").map(str::to_owned))
        })
    }

    /// The server's first line, shortened for a table note.
    pub fn first_line(&self) -> String {
        let line = self
            .received
            .iter()
            .find(|l| !l.starts_with("# service=") && *l != "0000")
            .cloned()
            .unwrap_or_default();
        line.replace("\\0", " \\0 ")
    }
}

/// `git ls-remote --symref <url>` from `dir` (with `-c protocol.version=0`
/// when `v0`), traced.
pub fn ls_remote(dir: &Path, url: &str, v0: bool) -> Result<LsRemote, String> {
    let mut args = Vec::new();
    if v0 {
        args.extend(["-c", "protocol.version=0"]);
    }
    args.extend(["ls-remote", "--symref", url]);
    let out = sluice_testkit::repo::git_command(dir)
        .args(&args)
        .env("GIT_TRACE_PACKET", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let words: Vec<&str> = stderr.lines().filter(|l| !l.contains("packet:")).collect();
        return Err(format!(
            "git {} failed ({}): {}",
            args.join(" "),
            out.status,
            words.join(" / ")
        ));
    }
    let received = stderr
        .lines()
        .filter_map(|l| l.split_once("packet:").map(|(_, r)| r.trim()))
        .filter_map(|l| l.split_once("< ").map(|(_, r)| r.to_owned()))
        .collect();
    let mut listing = Listing::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("ref: ") {
            if let Some((target, name)) = rest.split_once('\t') {
                listing.symrefs.insert(name.to_owned(), target.to_owned());
            }
        } else if let Some((oid, name)) = line.split_once('\t') {
            listing.refs.insert(name.to_owned(), oid.to_owned());
        }
    }
    Ok(LsRemote { listing, received })
}

/// The capabilities a git:// server advertises for receive-pack on `path`
/// (the part of its first line after the NUL), read directly.
pub fn receive_pack_capabilities(addr: SocketAddr, path: &str) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("receive-pack advertisement of {addr}{path}: {e}");
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    let payload = format!("git-receive-pack {path}\0host={addr}\0");
    let line = format!("{:04x}{payload}", payload.len() + 4);
    s.write_all(line.as_bytes()).map_err(fail)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).map_err(fail)?;
    let n = usize::from_str_radix(&String::from_utf8_lossy(&len), 16)
        .map_err(|e| format!("receive-pack advertisement of {addr}{path}: bad length: {e}"))?;
    if n < 4 {
        return Err(format!("receive-pack advertisement of {addr}{path}: empty"));
    }
    let mut first = vec![0u8; n - 4];
    s.read_exact(&mut first).map_err(fail)?;
    // End the conversation as a client with nothing to push does.
    let _ = s.write_all(b"0000");
    let text = String::from_utf8_lossy(&first).to_string();
    Ok(text
        .split_once('\0')
        .map(|(_, caps)| caps.trim().to_owned())
        .unwrap_or(text))
}
