//! ls-refs over smart HTTP in one request, for a remote this client has
//! already seen speak protocol v2.
//!
//! Over HTTP, protocol v2 costs two requests per call: a GET of
//! `info/refs` for the capabilities, then the POST of the command. Both are
//! stateless, and a v2 server's capabilities do not change between two
//! calls a few seconds apart, so once a remote answered v2 the client
//! remembers it (for `http::v2_remotes::FRESH`) and sends the `ls-refs` POST alone. Anything
//! unexpected in that answer (not pkt-lines, not refs) forgets the remote
//! and the same attempt goes the long way; an answer the wire judged (a
//! status, a cut, a timeout) is the attempt's result, classed as always.
//!
//! A remote that redirected its `info/refs` is remembered with the base it
//! redirected to, never its old URL, and the POST goes there; a POST
//! answered with a redirect (the repository moved again) goes the long
//! way, whose GET follows it.

use std::io::{Read, Write};

use gix::ObjectId;
use gix_transport::client::blocking_io::http::{Http, PostBodyDataKind, PostResponse};

use crate::connect::{self, Dial};
use crate::error::{GitError, GitPhase};
use crate::pktline::FramingError;
use crate::remote_ref::RemoteRef;

/// The most a one-request listing may be (a million refs is about 80 MiB).
const MAX_LISTING: u64 = 256 << 20;

/// Why the one-request listing did not give refs.
pub(crate) enum Miss {
    /// The answer was not a listing: go the long way in the same attempt.
    NotAListing(NotAListing),
    /// The wire judged it: the attempt's result.
    Failed(GitError),
}

/// What made an answer not a listing (the reason is logged, then the
/// listing is asked for the long way).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotAListing {
    /// The answer's content type is not an upload-pack result.
    #[error("not an upload-pack result")]
    NotUploadPackResult,
    /// The answer does not end with a flush.
    #[error("the listing does not end with a flush")]
    NoFlush,
    /// The answer is not pkt-lines.
    #[error(transparent)]
    Framing(#[from] FramingError),
    /// A line that is not UTF-8.
    #[error("a ref line that is not UTF-8")]
    NotUtf8,
    /// A line without an id and a name.
    #[error("not a ref line: {0:?}")]
    NotARefLine(String),
    /// An id that is not a full hex object id.
    #[error("not an object id: {0:?}")]
    NotAnId(String),
    /// The POST was answered with a redirect (this status).
    #[error("the POST was redirected ({0})")]
    Redirected(u16),
}

/// One `ls-refs` POST; `unborn` asks for unborn refs (the remote offers it).
pub(crate) fn ls_refs(
    d: Dial<'_>,
    prefixes: &[String],
    agent: &str,
    unborn: bool,
) -> Result<Vec<RemoteRef>, Miss> {
    let base = d.remote.http_base().to_bstring().to_string();
    let (mut http, meta) = connect::open_http_raw(d);
    // Nothing is advertised on this path: the request is complete once its
    // body left (what the wire's `flushed` looks for).
    meta.wire.lock().advertised = true;
    let fail = |detail: String| {
        let complete = meta.wire.lock().request_complete;
        let phase = if complete {
            GitPhase::Advertised
        } else {
            GitPhase::Connect
        };
        Miss::Failed(meta.fail(phase, complete, detail))
    };
    let url = format!("{}/git-upload-pack", base.trim_end_matches('/'));
    let headers = [
        format!("User-Agent: git/{agent}"),
        "Content-Type: application/x-git-upload-pack-request".to_string(),
        "Accept: application/x-git-upload-pack-result".to_string(),
        "Git-Protocol: version=2".to_string(),
    ];
    let PostResponse {
        mut headers,
        mut body,
        mut post_body,
    } = http
        .post(
            &url,
            &base,
            headers.iter(),
            PostBodyDataKind::BoundedAndFitsIntoMemory,
        )
        .map_err(|e| fail(e.to_string()))?;
    post_body
        .write_all(&request(prefixes, agent, unborn))
        .map_err(|e| fail(e.to_string()))?;
    let mut data = Vec::new();
    if let Err(e) = (&mut body).take(MAX_LISTING + 1).read_to_end(&mut data) {
        let status = meta.wire.lock().http_status.as_ref().map(|s| s.0);
        if let Some(s) = status.filter(|s| (300..400).contains(s)) {
            return Err(Miss::NotAListing(NotAListing::Redirected(s)));
        }
        return Err(fail(e.to_string()));
    }
    let mut head = String::new();
    let _ = headers.read_to_string(&mut head);
    let typed = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("content-type: application/x-git-upload-pack-result")
    });
    if !typed {
        return Err(Miss::NotAListing(NotAListing::NotUploadPackResult));
    }
    if data.len() as u64 > MAX_LISTING {
        return Err(Miss::Failed(GitError::Protocol {
            phase: GitPhase::Advertised,
            request_complete: true,
            detail: format!("a listing larger than {} MiB", MAX_LISTING >> 20),
        }));
    }
    let st = meta.wire.lock();
    if let Some(words) = &st.err_line {
        return Err(Miss::Failed(GitError::Remote {
            phase: GitPhase::Advertised,
            words: words.clone(),
        }));
    }
    drop(st);
    parse(&data).map_err(Miss::NotAListing)
}

/// The command, as pkt-lines.
fn request(prefixes: &[String], agent: &str, unborn: bool) -> Vec<u8> {
    fn line(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(format!("{:04x}", s.len() + 4).as_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    let mut out = Vec::with_capacity(256);
    line(&mut out, "command=ls-refs\n");
    line(&mut out, &format!("agent={agent}\n"));
    out.extend_from_slice(b"0001");
    line(&mut out, "peel\n");
    line(&mut out, "symrefs\n");
    if unborn {
        line(&mut out, "unborn\n");
    }
    for p in prefixes {
        line(&mut out, &format!("ref-prefix {p}\n"));
    }
    out.extend_from_slice(b"0000");
    out
}

/// `ls-refs` output: `(oid|unborn) SP name *(SP attribute)`, then a flush.
fn parse(data: &[u8]) -> Result<Vec<RemoteRef>, NotAListing> {
    if data.len() < 4 || !data.ends_with(b"0000") {
        return Err(NotAListing::NoFlush);
    }
    let lines = crate::pktline::payloads(data)?;
    let mut refs = Vec::with_capacity(lines.len());
    for l in lines {
        let l = std::str::from_utf8(l).map_err(|_| NotAListing::NotUtf8)?;
        let mut words = l.trim_end_matches('\n').split(' ');
        let (Some(id), Some(name)) = (words.next(), words.next()) else {
            return Err(NotAListing::NotARefLine(l.to_string()));
        };
        let oid = match id {
            "unborn" => None,
            hex => Some(parse_oid(hex)?),
        };
        let mut r = RemoteRef {
            name: name.to_string(),
            oid,
            peeled: None,
            symref_target: None,
        };
        for attr in words {
            if let Some(t) = attr.strip_prefix("symref-target:") {
                r.symref_target = Some(t.to_string());
            } else if let Some(p) = attr.strip_prefix("peeled:") {
                r.peeled = Some(parse_oid(p)?);
            }
        }
        refs.push(r);
    }
    Ok(refs)
}

fn parse_oid(hex: &str) -> Result<ObjectId, NotAListing> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|_| NotAListing::NotAnId(hex.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_reads_oids_names_symrefs_peeled_and_unborn() {
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let mut data = Vec::new();
        for l in [
            format!("{a} HEAD symref-target:refs/heads/main\n"),
            format!("{a} refs/heads/main\n"),
            format!("{b} refs/tags/v1 peeled:{a}\n"),
            "unborn refs/heads/none symref-target:refs/heads/x\n".to_string(),
        ] {
            data.extend_from_slice(format!("{:04x}{l}", l.len() + 4).as_bytes());
        }
        data.extend_from_slice(b"0000");
        let refs = parse(&data).expect("a listing");
        assert_eq!(refs.len(), 4);
        assert_eq!(refs[0].symref_target.as_deref(), Some("refs/heads/main"));
        assert_eq!(refs[2].peeled.map(|o| o.to_string()), Some(a.clone()));
        assert_eq!(refs[3].oid, None);
        assert!(parse(b"0000").expect("empty").is_empty());
        assert!(parse(b"garbage").is_err());
        assert_eq!(
            parse(b"0009HEAD\n0000"),
            Err(NotAListing::NotARefLine("HEAD\n".into()))
        );
    }

    #[test]
    fn the_request_is_a_command_a_delimiter_arguments_and_a_flush() {
        let r = request(&["refs/heads/".into()], "sluice/1", true);
        let s = String::from_utf8(r).expect("text");
        assert!(s.starts_with("0014command=ls-refs\n"), "{s}");
        assert!(s.contains("0001"));
        assert!(s.contains("ref-prefix refs/heads/\n"));
        assert!(s.contains("unborn\n"));
        assert!(s.ends_with("0000"));
    }
}
