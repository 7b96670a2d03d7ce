//! Applying a git delta (gitformat-pack, "Deltified representation"): the
//! reader of what `push::delta` writes. Every size and range in the delta is
//! checked, so a hostile pack gets an error, never a panic or an allocation
//! beyond the target size it declared (which the pack's own entry header
//! bounds).

/// A delta that does not describe a target from the given base.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad delta: {0}")]
pub(crate) struct BadDelta(&'static str);

/// Read one size varint (7 bits a byte, least significant first).
fn size(d: &[u8], at: &mut usize) -> Result<usize, BadDelta> {
    let mut n = 0usize;
    let mut shift = 0u32;
    loop {
        let b = *d.get(*at).ok_or(BadDelta("truncated size"))?;
        *at += 1;
        if shift > 63 {
            return Err(BadDelta("size overflows"));
        }
        n |= usize::from(b & 0x7f)
            .checked_shl(shift)
            .ok_or(BadDelta("size overflows"))?;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(n);
        }
    }
}

/// Build the target of `delta` over `base` into `out` (cleared first).
pub(crate) fn apply(base: &[u8], delta: &[u8], out: &mut Vec<u8>) -> Result<(), BadDelta> {
    let mut at = 0;
    if size(delta, &mut at)? != base.len() {
        return Err(BadDelta("base size differs"));
    }
    let want = size(delta, &mut at)?;
    out.clear();
    // The declared size is the sender's word: reserve no more than the
    // instructions can produce (at most 0x10000 bytes a delta byte), so a
    // hostile header costs nothing before the bytes are really written.
    out.reserve_exact(want.min(delta.len().saturating_mul(0x10000)));
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let mut off = 0usize;
            let mut len = 0usize;
            for k in 0..4 {
                if op & (1 << k) != 0 {
                    off |=
                        usize::from(*delta.get(at).ok_or(BadDelta("truncated copy"))?) << (8 * k);
                    at += 1;
                }
            }
            for k in 0..3 {
                if op & (0x10 << k) != 0 {
                    len |=
                        usize::from(*delta.get(at).ok_or(BadDelta("truncated copy"))?) << (8 * k);
                    at += 1;
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let src = off
                .checked_add(len)
                .and_then(|end| base.get(off..end))
                .ok_or(BadDelta("copy beyond the base"))?;
            if out.len() + len > want {
                return Err(BadDelta("target longer than declared"));
            }
            out.extend_from_slice(src);
        } else if op == 0 {
            return Err(BadDelta("reserved instruction 0"));
        } else {
            let n = usize::from(op);
            let lit = delta.get(at..at + n).ok_or(BadDelta("truncated literal"))?;
            if out.len() + n > want {
                return Err(BadDelta("target longer than declared"));
            }
            out.extend_from_slice(lit);
            at += n;
        }
    }
    if out.len() != want {
        return Err(BadDelta("target shorter than declared"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_literals_and_the_0x10000_case() {
        let base: Vec<u8> = (0..0x20000u32).map(|i| (i % 251) as u8).collect();
        // base size 0x20000, target 0x10000 + 3
        let mut d = vec![0x80, 0x80, 0x08, 0x83, 0x80, 0x04];
        d.push(0x80 | 0x01); // copy offset 5, size 0 → 0x10000
        d.push(5);
        d.extend_from_slice(&[3, b'a', b'b', b'c']);
        let mut out = Vec::new();
        apply(&base, &d, &mut out).expect("valid");
        assert_eq!(&out[..0x10000], &base[5..5 + 0x10000]);
        assert_eq!(&out[0x10000..], b"abc");
    }

    #[test]
    fn hostile_deltas_are_errors() {
        let base = b"hello world".to_vec();
        let mut out = Vec::new();
        for d in [
            &[][..],
            &[11][..],
            &[12, 1, 1, b'x'][..],
            &[11, 1, 0][..],
            &[11, 2, 0x91, 10, 5][..],
            &[11, 1, 2, b'a', b'b'][..],
            &[11, 3, 1, b'a'][..],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ][..],
            // A target of 2^62 bytes declared, three written.
            &[
                11, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 3, b'a', b'b', b'c',
            ][..],
        ] {
            assert!(apply(&base, d, &mut out).is_err(), "{d:?}");
        }
    }
}
