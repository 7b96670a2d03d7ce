//! Focused reproductions of incompatibilities the suite found, against a
//! scripted server that replays the other implementation's exact bytes, so
//! they run without that server installed.
//!
//! * dulwich 0.21 advertises receive-pack for an empty repository as
//!   `0000… capabilities^{}\0 report-status … symref=HEAD:refs/heads/main`:
//!   a `symref` capability for a ref the advertisement does not list (git
//!   sends no `symref` there). gix-protocol 0.68's v1 ref parser keeps such
//!   a symref as an internal lookup entry and then hits `unreachable!()` in
//!   `From<InternalRef> for Ref` (`handshake/refs/shared.rs`), so
//!   `GitClient::push` panics instead of pushing.

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener};
    use std::panic::AssertUnwindSafe;
    use std::sync::Arc;
    use std::time::Duration;

    use sluice_git::{CallOptions, GitClient, PushOptions, RefUpdate};
    use sluice_policy::{Bounds, OutcomeKind, Policy};
    use sluice_testkit::pktline::{encode, encode_sideband};
    use sluice_testkit::RepoBuilder;

    /// dulwich 0.21.2's receive-pack advertisement of an empty repository,
    /// byte for byte (captured with `GIT_TRACE_PACKET` from `git push`).
    const DULWICH_EMPTY_RECEIVE_PACK: &[u8] = b"0000000000000000000000000000000000000000 capabilities^{}\0 report-status delete-refs quiet ofs-delta side-band-64k no-done symref=HEAD:refs/heads/main";

    /// One git:// receive-pack conversation as dulwich has it with an
    /// empty repository: the advertisement above, then (after the commands
    /// and the pack) `unpack ok` / `ok <ref>` in side-band 1. Returns what
    /// the client sent after the request line.
    fn scripted_dulwich() -> (SocketAddr, std::thread::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&len).unwrap(), 16).unwrap();
            let mut request = vec![0u8; n - 4];
            s.read_exact(&mut request).unwrap();
            let mut advert = encode(DULWICH_EMPTY_RECEIVE_PACK);
            advert.extend_from_slice(b"0000");
            s.write_all(&advert).unwrap();
            // Commands, flush, pack: read until the client goes quiet.
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => break,
                }
            }
            let mut report = encode(b"unpack ok\n");
            report.extend_from_slice(&encode(b"ok refs/heads/main\n"));
            report.extend_from_slice(b"0000");
            let mut out = encode_sideband(1, &report);
            out.extend_from_slice(b"0000");
            let _ = s.write_all(&out);
            got
        });
        (addr, server)
    }

    #[test]
    fn a_push_into_dulwichs_empty_repository_does_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let local = RepoBuilder::new()
            .branch("main", 3)
            .build(&dir.path().join("local.git"))
            .unwrap();
        let tip = sluice_testkit::repo::rev_parse(&local, "refs/heads/main").unwrap();
        let (addr, server) = scripted_dulwich();
        let client = GitClient::new(Arc::new(Policy::default()));
        let repo = gix::open(&local).unwrap();
        let opts = CallOptions::new().bounds(Bounds::new(
            Duration::from_secs(20),
            Duration::from_secs(10),
            1,
        ));
        let pushed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            client.push(
                &format!("git://{addr}/e.git"),
                &[RefUpdate::fast_forward(
                    gix::ObjectId::from_hex(tip.as_bytes()).unwrap(),
                    "refs/heads/main",
                )],
                &PushOptions::default(),
                &repo,
                &opts,
            )
        }));
        let out = pushed
            .expect(
                "sluice-git panicked on dulwich's empty-repository receive-pack advertisement \
                 (a symref= capability naming a ref the advertisement does not list)",
            )
            .expect("valid input");
        assert_eq!(
            out.kind,
            OutcomeKind::Succeeded,
            "{:?} {:?}",
            out.error,
            out.attempts
        );
        let sent = server.join().unwrap();
        assert!(
            sent.windows(4).any(|w| w == b"PACK"),
            "the client sent no pack"
        );
    }
}
