//! pkt-line framing as both the push's report reader and the one-request
//! ls-refs read it: a length of exactly four hex digits, and a buffer split
//! into its payloads up to the first flush.

/// The longest pkt-line the protocol allows, its four length digits
/// included.
pub(crate) const MAX_PKT_LEN: usize = 65520;

/// A pkt-line length: exactly four hex digits (no sign, no space), as the
/// protocol writes it. `None` for anything else.
pub(crate) fn pkt_len(hdr: &[u8]) -> Option<usize> {
    if hdr.len() != 4 || !hdr.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    hdr.iter().try_fold(0usize, |n, b| {
        Some(n * 16 + (*b as char).to_digit(16)? as usize)
    })
}

/// Why a buffer is not pkt-lines ending in a flush.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FramingError {
    /// Fewer than four bytes where a length should be.
    #[error("truncated pkt-line length")]
    TruncatedLength,
    /// A length that is not four hex digits.
    #[error("bad pkt-line length")]
    BadLength,
    /// The length 3, which no packet has.
    #[error("bad pkt-line length 3")]
    LengthThree,
    /// A length past [`MAX_PKT_LEN`].
    #[error("pkt-line of {0} bytes exceeds 65520")]
    TooLong(usize),
    /// A payload cut short.
    #[error("truncated pkt-line")]
    Truncated,
    /// The data ended before a flush.
    #[error("no flush at the end of the report")]
    NoFlush,
}

/// Split pkt-line framed `data` into payloads, stopping at the first flush
/// (delimiters and response-ends are skipped).
pub(crate) fn payloads(mut data: &[u8]) -> Result<Vec<&[u8]>, FramingError> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if data.len() < 4 {
            return Err(FramingError::TruncatedLength);
        }
        let len = pkt_len(&data[..4]).ok_or(FramingError::BadLength)?;
        match len {
            0 => return Ok(out),
            1 | 2 => {
                data = &data[4..];
                continue;
            }
            3 => return Err(FramingError::LengthThree),
            n if n > MAX_PKT_LEN => return Err(FramingError::TooLong(n)),
            n => {
                if data.len() < n {
                    return Err(FramingError::Truncated);
                }
                out.push(&data[4..n]);
                data = &data[n..];
            }
        }
    }
    Err(FramingError::NoFlush)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pkt_line_length_is_four_hex_digits_and_nothing_else() {
        assert_eq!(pkt_len(b"0000"), Some(0));
        assert_eq!(pkt_len(b"fff0"), Some(65520));
        assert_eq!(pkt_len(b"00Af"), Some(0xaf));
        for bad in [
            &b"+000"[..],
            b"+00a",
            b" 00a",
            b"-001",
            b"00g0",
            b"000",
            b"00000",
        ] {
            assert_eq!(pkt_len(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn payloads_stop_at_the_flush_and_framing_faults_are_named() {
        assert_eq!(
            payloads(b"0009abcde00010009hello0000zz"),
            Ok(vec![&b"abcde"[..], b"hello"])
        );
        assert_eq!(payloads(b"000"), Err(FramingError::TruncatedLength));
        assert_eq!(payloads(b"+000"), Err(FramingError::BadLength));
        assert_eq!(payloads(b"0003"), Err(FramingError::LengthThree));
        assert_eq!(payloads(b"fff1"), Err(FramingError::TooLong(0xfff1)));
        assert_eq!(payloads(b"0010abc"), Err(FramingError::Truncated));
        assert_eq!(payloads(b"0008abcd"), Err(FramingError::NoFlush));
    }
}
