//! receive-pack's report-status parser (v1 and v2, with and without
//! side-band). No input may panic; a report that parses, written back out
//! as pkt-lines, parses to the same report.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_git::push::report::{parse_plain, parse_sideband, Report};
use sluice_testkit::pktline;

fn encode(r: &Report) -> Option<Vec<u8>> {
    let mut lines = vec![match &r.unpack {
        Ok(()) => "unpack ok\n".to_string(),
        Err(e) => format!("unpack {e}\n"),
    }];
    for (name, res) in &r.refs {
        lines.push(match res {
            Ok(()) => format!("ok {name}\n"),
            Err(reason) => format!("ng {name} {reason}\n"),
        });
    }
    let mut out = Vec::new();
    for l in lines {
        if l.len() + 4 > pktline::MAX_PKT_LEN {
            return None;
        }
        pktline::encode_into(&mut out, l.as_bytes());
    }
    out.extend_from_slice(pktline::FLUSH);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    for parsed in [parse_sideband(data), parse_plain(data)] {
        if let Ok(r) = parsed {
            // Names and reasons with a newline cannot be written back as
            // lines; everything else must round-trip.
            let writable = r
                .refs
                .iter()
                .all(|(n, res)| !n.contains('\n') && res.as_ref().err().is_none_or(|e| !e.contains('\n')))
                && r.unpack.as_ref().err().is_none_or(|e| !e.contains('\n'));
            if writable {
                if let Some(bytes) = encode(&r) {
                    assert_eq!(parse_sideband(&bytes).as_ref(), Ok(&r));
                }
            }
        }
    }
});
