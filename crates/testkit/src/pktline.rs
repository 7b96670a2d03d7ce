//! pkt-line framing, pure: no I/O, only byte slices.
//!
//! A pkt-line is four lowercase (or uppercase) hex digits giving the length of
//! the whole line including those four digits, followed by the payload. The
//! lengths `0000` (flush), `0001` (delimiter, protocol v2) and `0002`
//! (response end, protocol v2) carry no payload; `0003` is invalid, and no
//! line may be longer than [`MAX_PKT_LEN`] bytes. A side-band payload starts
//! with its band byte: 1 data, 2 progress, 3 error.
//!
//! [`parse`] frames one line at the front of a buffer, [`Framer`] does the same
//! over a stream fed in arbitrary chunks, and [`encode`] / [`write_pkt`] write
//! lines (for scripted servers).

use std::io::{self, Write};

/// The largest pkt-line, length prefix included.
pub const MAX_PKT_LEN: usize = 65520;

/// The flush-pkt.
pub const FLUSH: &[u8] = b"0000";
/// The delimiter-pkt (protocol v2).
pub const DELIM: &[u8] = b"0001";
/// The response-end-pkt (protocol v2, stateless transports).
pub const RESPONSE_END: &[u8] = b"0002";

/// One framed pkt-line, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pkt<'a> {
    /// `0000`.
    Flush,
    /// `0001`.
    Delim,
    /// `0002`.
    ResponseEnd,
    /// A line with a payload (which may be empty: `0004`).
    Data(&'a [u8]),
}

impl Pkt<'_> {
    /// The payload, if this is a data line.
    pub fn data(&self) -> Option<&[u8]> {
        match self {
            Pkt::Data(d) => Some(d),
            _ => None,
        }
    }

    /// An owned copy.
    pub fn to_owned_pkt(&self) -> OwnedPkt {
        match self {
            Pkt::Flush => OwnedPkt::Flush,
            Pkt::Delim => OwnedPkt::Delim,
            Pkt::ResponseEnd => OwnedPkt::ResponseEnd,
            Pkt::Data(d) => OwnedPkt::Data(d.to_vec()),
        }
    }
}

/// One framed pkt-line owning its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnedPkt {
    /// `0000`.
    Flush,
    /// `0001`.
    Delim,
    /// `0002`.
    ResponseEnd,
    /// A line with a payload.
    Data(Vec<u8>),
}

impl OwnedPkt {
    /// Borrow as a [`Pkt`].
    pub fn as_pkt(&self) -> Pkt<'_> {
        match self {
            OwnedPkt::Flush => Pkt::Flush,
            OwnedPkt::Delim => Pkt::Delim,
            OwnedPkt::ResponseEnd => Pkt::ResponseEnd,
            OwnedPkt::Data(d) => Pkt::Data(d),
        }
    }
}

/// Why bytes are not a pkt-line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PktError {
    /// The four length bytes are not hex digits.
    NotHex([u8; 4]),
    /// Length `0003`, which no protocol defines.
    Reserved,
    /// A length above [`MAX_PKT_LEN`].
    TooLong(usize),
}

impl std::fmt::Display for PktError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PktError::NotHex(b) => write!(
                f,
                "pkt-line length is not hex: {:?}",
                String::from_utf8_lossy(b)
            ),
            PktError::Reserved => write!(f, "pkt-line length 0003 is reserved"),
            PktError::TooLong(n) => write!(f, "pkt-line length {n} exceeds {MAX_PKT_LEN}"),
        }
    }
}

impl std::error::Error for PktError {}

fn hex_val(b: u8) -> Option<usize> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as usize),
        b'a'..=b'f' => Some((b - b'a' + 10) as usize),
        b'A'..=b'F' => Some((b - b'A' + 10) as usize),
        _ => None,
    }
}

/// Reads the length prefix at the front of `buf`: `Ok(None)` when fewer than
/// four bytes are there.
pub fn parse_len(buf: &[u8]) -> Result<Option<usize>, PktError> {
    if buf.len() < 4 {
        // Reject early what can never become hex.
        if buf.iter().any(|&b| hex_val(b).is_none()) {
            let mut bad = [b'?'; 4];
            bad[..buf.len()].copy_from_slice(buf);
            return Err(PktError::NotHex(bad));
        }
        return Ok(None);
    }
    let mut len = 0usize;
    for &b in &buf[..4] {
        match hex_val(b) {
            Some(v) => len = len * 16 + v,
            None => return Err(PktError::NotHex([buf[0], buf[1], buf[2], buf[3]])),
        }
    }
    if len == 3 {
        return Err(PktError::Reserved);
    }
    if len > MAX_PKT_LEN {
        return Err(PktError::TooLong(len));
    }
    Ok(Some(len))
}

/// Frames one pkt-line at the front of `buf`. `Ok(None)` means more bytes are
/// needed; otherwise the line and the number of bytes it occupies.
pub fn parse(buf: &[u8]) -> Result<Option<(Pkt<'_>, usize)>, PktError> {
    let Some(len) = parse_len(buf)? else {
        return Ok(None);
    };
    match len {
        0 => Ok(Some((Pkt::Flush, 4))),
        1 => Ok(Some((Pkt::Delim, 4))),
        2 => Ok(Some((Pkt::ResponseEnd, 4))),
        n if buf.len() >= n => Ok(Some((Pkt::Data(&buf[4..n]), n))),
        _ => Ok(None),
    }
}

/// Frames every complete pkt-line at the front of `buf`; returns them and the
/// number of bytes they occupy (a trailing partial line is left over).
pub fn parse_all(buf: &[u8]) -> Result<(Vec<Pkt<'_>>, usize), PktError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((pkt, used)) = parse(&buf[pos..])? {
        out.push(pkt);
        pos += used;
    }
    Ok((out, pos))
}

/// Splits a side-band payload into its band (1, 2 or 3) and the rest.
pub fn sideband(payload: &[u8]) -> Option<(u8, &[u8])> {
    match payload.first() {
        Some(&b @ 1..=3) => Some((b, &payload[1..])),
        _ => None,
    }
}

/// The payload without one trailing `\n`.
pub fn trim_newline(payload: &[u8]) -> &[u8] {
    payload.strip_suffix(b"\n").unwrap_or(payload)
}

/// Appends one data pkt-line carrying `payload` to `out`.
///
/// # Panics
/// When the payload does not fit in one line.
pub fn encode_into(out: &mut Vec<u8>, payload: &[u8]) {
    let len = payload.len() + 4;
    assert!(
        len <= MAX_PKT_LEN,
        "pkt-line payload of {} bytes is too long",
        payload.len()
    );
    out.extend_from_slice(format!("{len:04x}").as_bytes());
    out.extend_from_slice(payload);
}

/// One data pkt-line carrying `payload`.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    encode_into(&mut out, payload);
    out
}

/// One side-band pkt-line: `band` (1 data, 2 progress, 3 error) then
/// `data`.
pub fn encode_sideband(band: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(band);
    payload.extend_from_slice(data);
    encode(&payload)
}

/// Writes one data pkt-line.
pub fn write_pkt(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    w.write_all(&encode(payload))
}

/// Writes a flush-pkt.
pub fn write_flush(w: &mut impl Write) -> io::Result<()> {
    w.write_all(FLUSH)
}

/// The first pkt-line of a git:// connection (the daemon's request):
/// `git-upload-pack /path\0host=h\0` and, after a second NUL, extra
/// parameters such as `version=2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    /// `git-upload-pack`, `git-receive-pack` or `git-upload-archive`.
    pub service: String,
    /// The requested path, as sent.
    pub path: String,
    /// The `host=` parameter, if any.
    pub host: Option<String>,
    /// The extra parameters after the double NUL (`version=2`, ...).
    pub extra: Vec<String>,
}

impl RequestLine {
    /// The protocol version asked for with `version=N`, if any.
    pub fn version(&self) -> Option<u8> {
        self.extra
            .iter()
            .filter_map(|p| p.strip_prefix("version="))
            .filter_map(|v| v.parse().ok())
            .max()
    }
}

/// Parses the payload of a git:// request line; `None` when it is not one.
pub fn parse_request_line(payload: &[u8]) -> Option<RequestLine> {
    let payload = trim_newline(payload);
    let mut parts = payload.split(|&b| b == 0);
    let first = std::str::from_utf8(parts.next()?).ok()?;
    let (service, path) = first.split_once(' ')?;
    if !service.starts_with("git-") {
        return None;
    }
    let mut host = None;
    let mut extra = Vec::new();
    let mut after_empty = false;
    for p in parts {
        if p.is_empty() {
            after_empty = true;
            continue;
        }
        let s = String::from_utf8_lossy(p).into_owned();
        if !after_empty {
            if let Some(h) = s.strip_prefix("host=") {
                host = Some(h.to_owned());
                continue;
            }
        }
        extra.push(s);
    }
    Some(RequestLine {
        service: service.to_owned(),
        path: path.to_owned(),
        host,
        extra,
    })
}

/// A pkt-line framed from a stream, with the exact bytes it occupied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The line.
    pub pkt: OwnedPkt,
    /// Its bytes on the wire, length prefix included.
    pub raw: Vec<u8>,
}

/// Frames pkt-lines out of a byte stream fed in arbitrary chunks.
#[derive(Debug, Default, Clone)]
pub struct Framer {
    buf: Vec<u8>,
}

impl Framer {
    /// An empty framer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, PktError> {
        let (pkt, used) = match parse(&self.buf)? {
            Some((pkt, used)) => (pkt.to_owned_pkt(), used),
            None => return Ok(None),
        };
        let raw = self.buf.drain(..used).collect();
        Ok(Some(Frame { pkt, raw }))
    }

    /// Bytes received but not yet framed.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Takes the bytes not yet framed (e.g. when raw pack data follows).
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_lines_are_framed_without_payload() {
        assert_eq!(parse(b"0000rest").unwrap(), Some((Pkt::Flush, 4)));
        assert_eq!(parse(b"0001").unwrap(), Some((Pkt::Delim, 4)));
        assert_eq!(parse(b"0002").unwrap(), Some((Pkt::ResponseEnd, 4)));
    }

    #[test]
    fn a_data_line_includes_its_prefix_in_its_length() {
        assert_eq!(
            parse(b"0009hello0000").unwrap(),
            Some((Pkt::Data(b"hello"), 9))
        );
        assert_eq!(parse(b"0004").unwrap(), Some((Pkt::Data(b""), 4)));
    }

    #[test]
    fn uppercase_hex_lengths_are_accepted() {
        assert_eq!(
            parse(b"000Ahello\n").unwrap(),
            Some((Pkt::Data(b"hello\n"), 10))
        );
    }

    #[test]
    fn an_incomplete_line_asks_for_more_bytes() {
        assert_eq!(parse(b"").unwrap(), None);
        assert_eq!(parse(b"00").unwrap(), None);
        assert_eq!(parse(b"0009hel").unwrap(), None);
    }

    #[test]
    fn a_non_hex_prefix_is_an_error_even_before_four_bytes() {
        assert_eq!(parse(b"PACK\0\0\0\x02"), Err(PktError::NotHex(*b"PACK")));
        assert!(matches!(parse(b"PA"), Err(PktError::NotHex(_))));
    }

    #[test]
    fn length_three_and_overlong_lengths_are_errors() {
        assert_eq!(parse(b"0003"), Err(PktError::Reserved));
        assert_eq!(parse(b"fff1"), Err(PktError::TooLong(0xfff1)));
        assert!(parse(b"fff0").unwrap().is_none());
    }

    #[test]
    fn parse_all_stops_at_a_partial_line() {
        let (pkts, used) = parse_all(b"0008abcd00000006x").unwrap();
        assert_eq!(pkts, vec![Pkt::Data(b"abcd"), Pkt::Flush]);
        assert_eq!(used, 12);
    }

    #[test]
    fn sideband_splits_band_and_data() {
        assert_eq!(sideband(b"\x01PACK"), Some((1, &b"PACK"[..])));
        assert_eq!(sideband(b"\x02progress"), Some((2, &b"progress"[..])));
        assert_eq!(sideband(b"\x03fatal"), Some((3, &b"fatal"[..])));
        assert_eq!(sideband(b"NAK\n"), None);
        assert_eq!(sideband(b""), None);
    }

    #[test]
    fn encoding_round_trips() {
        let line = encode(b"want 0123\n");
        assert_eq!(&line[..4], b"000e");
        assert_eq!(parse(&line).unwrap(), Some((Pkt::Data(b"want 0123\n"), 14)));
        let mut out = Vec::new();
        write_pkt(&mut out, b"a").unwrap();
        write_flush(&mut out).unwrap();
        assert_eq!(out, b"0005a0000");
    }

    #[test]
    fn a_sideband_line_round_trips() {
        let line = encode_sideband(2, b"progress");
        let (pkt, _) = parse(&line).unwrap().unwrap();
        assert_eq!(sideband(pkt.data().unwrap()), Some((2, &b"progress"[..])));
    }

    #[test]
    fn a_v2_daemon_request_line_is_understood() {
        let r =
            parse_request_line(b"git-upload-pack /repo.git\0host=127.0.0.1:9418\0\0version=2\0")
                .unwrap();
        assert_eq!(r.service, "git-upload-pack");
        assert_eq!(r.path, "/repo.git");
        assert_eq!(r.host.as_deref(), Some("127.0.0.1:9418"));
        assert_eq!(r.version(), Some(2));
    }

    #[test]
    fn a_v0_push_request_line_has_no_version() {
        let r = parse_request_line(b"git-receive-pack /r\0host=localhost\0").unwrap();
        assert_eq!(r.service, "git-receive-pack");
        assert_eq!(r.version(), None);
        assert!(parse_request_line(b"hello world").is_none());
    }

    #[test]
    fn the_framer_reassembles_lines_split_across_chunks() {
        let mut f = Framer::new();
        f.push(b"00");
        assert_eq!(f.next_frame().unwrap(), None);
        f.push(b"07ab");
        assert_eq!(f.next_frame().unwrap(), None);
        f.push(b"c0000PACK");
        let fr = f.next_frame().unwrap().unwrap();
        assert_eq!(fr.pkt, OwnedPkt::Data(b"abc".to_vec()));
        assert_eq!(fr.raw, b"0007abc");
        assert_eq!(f.next_frame().unwrap().unwrap().pkt, OwnedPkt::Flush);
        assert_eq!(f.pending(), b"PACK");
        assert!(f.next_frame().is_err());
        assert_eq!(f.take_pending(), b"PACK");
    }
}
