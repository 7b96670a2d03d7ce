//! Recorded server transcripts (`tests/fixtures/transcripts/`, made again
//! by `tests/fixtures/record-transcripts.py`) replayed with no socket into
//! what reads them here: receive-pack's advertisement through gix's
//! handshake into [`super::advert::read`], and each answer, byte by byte
//! and whole, through the wire's sniffer ([`crate::wire::Wire`]) as a
//! connection feeds it. The report parser's replays are integration tests
//! (`tests/it/transcripts.rs`): it is public.

use std::io::BufReader;

use gix::protocol::transport::client::blocking_io::{SetServiceResponse, Transport as _};
use gix::protocol::transport::client::git::blocking_io::Connection;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::{Protocol, Service};
use sluice_policy::remote_text::RemoteText;

use super::advert;
use crate::wire::{TrackedRead, Wire};

macro_rules! response {
    ($server:literal, $case:literal) => {
        &include_bytes!(concat!(
            "../../tests/fixtures/transcripts/",
            $server,
            "/",
            $case,
            ".response"
        ))[..]
    };
}

/// main's value in every recording (the commits are made with fixed
/// names and dates).
const MAIN: &str = "b46ca784a7fcecddf656768e01c8a032e0ce3fb3";

/// The facts the advertisement gave: `main`'s value as read, every value,
/// the `agent` and whether `report-status` and `side-band-64k` were offered;
/// and what the wire made of it.
#[derive(Debug, PartialEq)]
struct Read {
    main: Option<String>,
    tips: Vec<String>,
    agent: Option<String>,
    report_status: bool,
    side_band: bool,
    object_format: Option<String>,
}

/// Replays `advertisement` (receive-pack's, as a git:// daemon sends it)
/// through gix's handshake and the push's reader, the wire watching.
fn read_advertisement(advertisement: &'static [u8]) -> Read {
    let wire = Wire::new(1);
    let mut conn = Connection::new(
        BufReader::new(TrackedRead::new(advertisement, wire.clone())),
        Vec::new(),
        Protocol::V1,
        "/r.git",
        Some(("127.0.0.1", None)),
        ConnectMode::Daemon,
        false,
    );
    let SetServiceResponse {
        capabilities, refs, ..
    } = conn
        .handshake(Service::ReceivePack, &[])
        .expect("the handshake reads the advertisement");
    let mut refs = refs.expect("a v0 advertisement lists its refs");
    let adv = advert::read(&mut refs, &["refs/heads/main"]).expect("the refs read");
    drop(refs);
    let st = wire.lock();
    assert!(st.advertised && !st.garbled, "{st:?}");
    Read {
        main: adv.named.get("refs/heads/main").map(|id| id.to_string()),
        tips: adv.tips.iter().map(|id| id.to_string()).collect(),
        agent: capabilities
            .capability("agent")
            .and_then(|c| c.value().map(|v| v.to_string())),
        report_status: capabilities.contains("report-status"),
        side_band: capabilities.contains("side-band-64k"),
        object_format: st.object_format.clone(),
    }
}

/// The advertisement at the start of a recorded push's answer.
fn advertisement_of(response: &[u8]) -> &[u8] {
    let mut at = 0;
    loop {
        let hex = std::str::from_utf8(&response[at..at + 4]).expect("a length");
        let n = usize::from_str_radix(hex, 16).expect("a hex length");
        if n == 0 {
            return &response[..at + 4];
        }
        at += n;
    }
}

#[test]
fn receive_pack_advertisements_of_git_2_47_and_jgit_read_main_and_the_capabilities() {
    let git = Read {
        main: Some(MAIN.into()),
        tips: vec![MAIN.into()],
        agent: Some("git/2.47.3".into()),
        report_status: true,
        side_band: true,
        object_format: Some("sha1".into()),
    };
    assert_eq!(
        read_advertisement(advertisement_of(response!("git-daemon", "push-ok"))),
        git
    );
    // Over HTTP the body opens with the service line and its flush, which
    // the HTTP transport takes off before the handshake reads on.
    let body = response!("http-backend", "receive-pack-advert");
    let service = usize::from_str_radix(std::str::from_utf8(&body[..4]).unwrap(), 16).unwrap();
    assert_eq!(&body[4..service], b"# service=git-receive-pack\n");
    assert_eq!(&body[service..service + 4], b"0000");
    assert_eq!(read_advertisement(&body[service + 4..]), git);
    assert_eq!(
        read_advertisement(advertisement_of(response!("jgit", "push-ok"))),
        Read {
            agent: Some("JGit/4.11.9.201909030838-r".into()),
            object_format: None,
            ..git
        }
    );
}

/// What the sniffer made of a whole answer.
#[derive(Debug, PartialEq, Default)]
struct Sniffed {
    flushes: u32,
    advertised: bool,
    object_format: Option<String>,
    err_line: Option<String>,
    fatal: Option<String>,
    garbled: bool,
    band2: Vec<String>,
}

/// Feeds `advertisement` then `answer` to a [`Wire`] in pieces of `step`
/// bytes, keeping side-band 2 from the answer on (as a push does once its
/// commands are sent) when `band2`.
fn sniff(
    advertisement: &[u8],
    answer: &[u8],
    advert_flushes: u32,
    band2: bool,
    step: usize,
) -> Sniffed {
    let w = Wire::new(advert_flushes);
    for piece in advertisement.chunks(step) {
        w.saw(piece);
    }
    if band2 {
        w.lock().band2 = Some(RemoteText::default());
    }
    for piece in answer.chunks(step) {
        w.saw(piece);
    }
    let mut st = w.lock();
    Sniffed {
        flushes: st.server_flushes,
        advertised: st.advertised,
        object_format: st.object_format.clone(),
        err_line: st.err_line.clone(),
        fatal: st.fatal.clone(),
        garbled: st.garbled,
        band2: st
            .band2
            .take()
            .map(|t| t.into_parts().0)
            .unwrap_or_default(),
    }
}

/// [`sniff`] a byte at a time, seven at a time and whole: the same facts.
/// A git:// `response` is split after its advertisement's flush.
fn sniffed(response: &[u8], advert_flushes: u32, band2: bool) -> Sniffed {
    let (advertisement, answer) = if band2 {
        response.split_at(advertisement_of(response).len())
    } else {
        (response, &[][..])
    };
    sniffed_apart(advertisement, answer, advert_flushes, band2)
}

/// [`sniffed`] of an advertisement and an answer that came apart (over
/// HTTP: the GET's body, the POST's).
fn sniffed_apart(advertisement: &[u8], answer: &[u8], advert_flushes: u32, band2: bool) -> Sniffed {
    let whole = sniff(
        advertisement,
        answer,
        advert_flushes,
        band2,
        advertisement.len().max(answer.len()).max(1),
    );
    for step in [1, 7] {
        assert_eq!(
            sniff(advertisement, answer, advert_flushes, band2, step),
            whole,
            "in pieces of {step}"
        );
    }
    whole
}

#[test]
fn the_sniffer_reads_every_recorded_push_answer_to_its_last_flush() {
    let sha1 = || Some("sha1".to_string());
    let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let answered = |object_format: Option<String>, band2: Vec<String>| Sniffed {
        flushes: 2,
        advertised: true,
        object_format,
        band2,
        ..Sniffed::default()
    };
    for (response, object_format) in [
        (response!("git-daemon", "push-ok"), sha1()),
        (response!("git-daemon", "push-ok-no-sideband"), sha1()),
        (response!("jgit", "push-ok-no-sideband"), None),
    ] {
        assert_eq!(
            sniffed(response, 1, true),
            answered(object_format, Vec::new())
        );
    }
    assert_eq!(
        sniffed(response!("git-daemon", "push-ng-hook"), 1, true),
        answered(sha1(), lines(&["checking the push", "refused by policy"]))
    );
    assert_eq!(
        sniffed(response!("git-daemon", "push-ng-non-ff"), 1, true),
        answered(
            sha1(),
            lines(&["error: denying non-fast-forward refs/heads/main (you should pull first)"])
        )
    );
    assert_eq!(
        sniffed(response!("git-daemon", "push-unpack-failure"), 1, true),
        answered(
            sha1(),
            lines(&[
                "error: inflate: data stream error (incorrect header check)",
                "error: inflate returned -3"
            ])
        )
    );
    assert_eq!(
        sniffed(response!("jgit", "push-ok"), 1, true),
        answered(
            None,
            lines(&[
                "Updating references: 100% (1/1)",
                "Updating references: 100% (1/1)"
            ])
        )
    );
    assert_eq!(
        sniffed(response!("jgit", "push-unpack-failure"), 1, true),
        answered(None, Vec::new())
    );
    // Over HTTP the wire sees the GET's body (the service line, its flush,
    // the advertisement), then the POST's answer (the report alone).
    assert_eq!(
        sniffed_apart(
            response!("http-backend", "receive-pack-advert"),
            response!("http-backend", "push-ng-hook"),
            2,
            true
        ),
        Sniffed {
            flushes: 3,
            ..answered(sha1(), lines(&["checking the push", "refused by policy"]))
        }
    );
}

#[test]
fn the_sniffer_reads_the_advertised_object_format_and_a_daemon_s_err_line() {
    // v2: the capability line; git:// then the ls-refs answer (two flushes).
    let v2 = sniffed(response!("git-daemon", "advert-v2"), 1, false);
    assert_eq!((v2.flushes, v2.object_format.as_deref()), (2, Some("sha1")));
    let v2 = sniffed(response!("http-backend", "advert-v2"), 1, false);
    assert_eq!((v2.flushes, v2.object_format.as_deref()), (1, Some("sha1")));
    // v0: a capability after the first line's NUL; over HTTP after the
    // service line's flush. JGit 4.11 names none (and answers v0 to v2).
    for (response, flushes, object_format) in [
        (response!("git-daemon", "advert-v0"), 1, Some("sha1")),
        (response!("http-backend", "advert-v0"), 2, Some("sha1")),
        (response!("jgit", "advert-v0"), 1, None),
        (response!("jgit", "advert-v2"), 1, None),
    ] {
        let s = sniffed(response, flushes, false);
        assert!(s.advertised && !s.garbled, "{s:?}");
        assert_eq!(s.object_format.as_deref(), object_format, "{s:?}");
    }
    assert_eq!(
        sniffed(response!("git-daemon", "err-no-repository"), 1, false),
        Sniffed {
            err_line: Some("access denied or repository not exported: /nope.git".into()),
            ..Sniffed::default()
        }
    );
    // JGit hangs up without a word.
    assert!(response!("jgit", "err-no-repository").is_empty());
}
