//! pkt-line framing, both implementations: `sluice_git`'s report framer
//! (`pkt_payloads`) and the testkit's streaming framer, request-line and
//! side-band parsers. No input may panic; the framers must agree on what
//! is a valid line; a stream fed in any chunks frames like it does whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_git::push::report::pkt_payloads;
use sluice_testkit::pktline::{self, Framer, OwnedPkt};

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| *b as usize);
    let data = data.get(1..).unwrap_or_default();
    let payloads = pkt_payloads(data);
    // Frame the whole buffer with the testkit's framer.
    let mut whole = Vec::new();
    let mut rest = data;
    let mut bad = false;
    loop {
        match pktline::parse(rest) {
            Ok(Some((pkt, used))) => {
                whole.push(pkt.to_owned_pkt());
                rest = &rest[used..];
            }
            Ok(None) => break,
            Err(_) => {
                bad = true;
                break;
            }
        }
    }
    // Fed in chunks, the streaming framer sees the same lines.
    let mut f = Framer::new();
    let mut chunked = Vec::new();
    let chunk = split.max(1);
    'outer: for c in data.chunks(chunk) {
        f.push(c);
        loop {
            match f.next_frame() {
                Ok(Some(fr)) => chunked.push(fr.pkt),
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
    }
    assert_eq!(&chunked[..], &whole[..chunked.len().min(whole.len())]);
    // Where `pkt_payloads` succeeds, the testkit agrees up to the first flush
    // (1 and 2 are skipped by the report framer).
    if let Ok(p) = payloads {
        let expect: Vec<&[u8]> = whole
            .iter()
            .take_while(|x| **x != OwnedPkt::Flush)
            .filter_map(|x| match x {
                OwnedPkt::Data(d) => Some(&d[..]),
                _ => None,
            })
            .collect();
        assert!(!bad || whole.contains(&OwnedPkt::Flush));
        assert_eq!(p, expect);
    }
    for x in &whole {
        if let OwnedPkt::Data(d) = x {
            let _ = pktline::parse_request_line(d);
            let _ = pktline::sideband(d);
        }
    }
});
