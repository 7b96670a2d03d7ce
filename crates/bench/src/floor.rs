//! The floor of a row: a raw client that writes a whole request over
//! git:// in one write — the connect line and everything after it, made
//! beforehand — and reads the server's answer to its end (the server
//! closes the connection when it is done). What it takes is the daemon's
//! and the server program's own time, which no client goes below.
//!
//! The requests are the least a client sends for the row's call: a push's
//! one command and a pack made beforehand by `git pack-objects --thin`; a
//! v2 `ls-refs` with one `ref-prefix`; a v2 `fetch` with one `want`, one
//! `have` (the remote's commit the new ones sit on) and `done`.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Appends `payload` as one pkt-line.
fn pkt(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}

/// git daemon's connect line for `service` on `repo` (v2 when `v2`).
fn connect_line(out: &mut Vec<u8>, service: &str, repo: &str, v2: bool) {
    let extra = if v2 { "\0version=2\0" } else { "" };
    pkt(
        out,
        format!(
            "{service} /{}\0host=127.0.0.1\0{extra}",
            repo.trim_start_matches('/')
        )
        .as_bytes(),
    );
}

/// A push of one command (`old` → `new` on `dst`; `old` all zeros for a
/// creation) and `pack`, with report-status over side-band-64k.
pub fn push_request(repo: &str, old: &str, new: &str, dst: &str, pack: &[u8]) -> Vec<u8> {
    let mut req = Vec::with_capacity(pack.len() + 256);
    connect_line(&mut req, "git-receive-pack", repo, false);
    pkt(
        &mut req,
        format!("{old} {new} {dst}\0report-status side-band-64k quiet agent=bench-raw\n")
            .as_bytes(),
    );
    req.extend_from_slice(b"0000");
    req.extend_from_slice(pack);
    req
}

/// A v2 `ls-refs` of the refs under `prefix`, then the flush that ends
/// the session.
pub fn ls_refs_request(repo: &str, prefix: &str) -> Vec<u8> {
    let mut req = Vec::new();
    connect_line(&mut req, "git-upload-pack", repo, true);
    pkt(&mut req, b"command=ls-refs\n");
    pkt(&mut req, b"agent=bench-raw\n");
    req.extend_from_slice(b"0001");
    pkt(&mut req, b"peel\n");
    pkt(&mut req, b"symrefs\n");
    pkt(&mut req, format!("ref-prefix {prefix}\n").as_bytes());
    req.extend_from_slice(b"0000");
    req.extend_from_slice(b"0000");
    req
}

/// A v2 `fetch` of `want` with one `have` and `done` (a thin pack with OFS
/// deltas, no progress), then the flush that ends the session.
pub fn fetch_request(repo: &str, want: &str, have: &str) -> Vec<u8> {
    let mut req = Vec::new();
    connect_line(&mut req, "git-upload-pack", repo, true);
    pkt(&mut req, b"command=fetch\n");
    pkt(&mut req, b"agent=bench-raw\n");
    req.extend_from_slice(b"0001");
    for line in [
        "thin-pack\n".to_owned(),
        "no-progress\n".to_owned(),
        "ofs-delta\n".to_owned(),
        format!("want {want}\n"),
        format!("have {have}\n"),
        "done\n".to_owned(),
    ] {
        pkt(&mut req, line.as_bytes());
    }
    req.extend_from_slice(b"0000");
    req.extend_from_slice(b"0000");
    req
}

/// Writes `request` to the daemon at `addr` in one write and reads the
/// answer until the server closes; returns the answer.
pub fn replay(addr: SocketAddr, request: &[u8]) -> Result<Vec<u8>> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(request)?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .context("reading the answer")?;
    if answer.is_empty() {
        bail!("the server answered nothing");
    }
    Ok(answer)
}

/// Whether `answer` (a push's) reports `ok <dst>` and `unpack ok`.
pub fn push_accepted(answer: &[u8], dst: &str) -> bool {
    let ok = format!("ok {dst}\n");
    let has = |needle: &[u8]| answer.windows(needle.len()).any(|w| w == needle);
    has(b"unpack ok\n") && has(ok.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_pkt_lines_with_a_final_flush() {
        let r = ls_refs_request("x.git", "refs/heads/main");
        assert!(r.starts_with(b"0035git-upload-pack /x.git\0host=127.0.0.1\0\0version=2\0"));
        assert!(r.ends_with(b"0000"));
        let f = fetch_request("x.git", &"a".repeat(40), &"b".repeat(40));
        assert!(f.windows(5).any(|w| w == b"done\n"));
        let p = push_request(
            "x.git",
            &"0".repeat(40),
            &"c".repeat(40),
            "refs/heads/n",
            b"PACK",
        );
        assert!(p.ends_with(b"0000PACK"));
        assert!(push_accepted(
            b"0010unpack ok\n0016ok refs/heads/n\n",
            "refs/heads/n"
        ));
    }
}
