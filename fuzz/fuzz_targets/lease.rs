//! Leases `<DST>=<OID>|<DST>=absent` and object ids (`parse_lease`,
//! `parse_oid`). No input may panic; a lease that parses is written back to
//! the same lease; an object id is 40 hex digits, either case.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_git::push::spec::{parse_lease, parse_oid};
use sluice_git::{parse_lease_spec, Lease, LeaseSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(oid) = parse_oid(text) {
        assert_eq!(text.len(), 40);
        assert_eq!(oid.to_string(), text.to_ascii_lowercase());
    }
    if let Ok((dst, lease)) = parse_lease(text) {
        let back = match lease {
            Lease::Absent => format!("{dst}=absent"),
            Lease::Oid(o) => format!("{dst}={o}"),
            Lease::Any => panic!("a parsed lease is never Any"),
        };
        assert_eq!(parse_lease(&back).ok(), Some((dst, lease)));
    }
    if let Ok((dst, spec)) = parse_lease_spec(text) {
        let back = match &spec {
            LeaseSpec::Absent => format!("{dst}=absent"),
            LeaseSpec::Oid(o) => format!("{dst}={o}"),
            LeaseSpec::Abbreviated(h) => format!("{dst}={h}"),
            LeaseSpec::Tracking => dst.clone(),
        };
        assert_eq!(parse_lease_spec(&back).ok(), Some((dst, spec)));
    }
});
