//! receive-pack's advertisement, read for a push: every advertised value
//! (what the remote has, to stop the walk at) and the values of the refs
//! the push names — and nothing else, so 100,000 advertised refs cost no
//! allocation each (gix-protocol's parser keeps every name as a `BString`
//! and the push kept a second map of them).
//!
//! Lines are `<id> <name>` (the capabilities already taken off the first
//! by the transport), an annotated tag's `<id> <name>^{}` peeled line after
//! its ref, `shallow <id>`, and the `capabilities^{}` line of an empty
//! repository.

use std::collections::HashMap;

use gix::bstr::{BString, ByteSlice};
use gix::protocol::transport::client::blocking_io::ReadlineBufRead;
use gix::ObjectId;

/// What a push keeps of an advertisement.
#[derive(Debug, Default)]
pub(super) struct Advertised {
    /// Every advertised value, and every peeled one after it: objects the
    /// remote has.
    pub tips: Vec<ObjectId>,
    /// The refs asked for that the remote has, with their values (an
    /// annotated tag's own id, not its peeled one).
    pub named: HashMap<String, ObjectId>,
}

/// Why an advertisement could not be read. Only its words reach the
/// attempt's error; the wire classes it.
#[derive(Debug, thiserror::Error)]
pub(super) enum AdvertError {
    /// Reading the connection failed.
    #[error("reading the advertisement: {0}")]
    Read(std::io::Error),
    /// A pkt-line that does not decode.
    #[error("decoding the advertisement: {0}")]
    Decode(gix::Error),
    /// A line that is not `<id> <name>`.
    #[error("an advertised ref line is not '<id> <name>': {0:?}")]
    NotARefLine(BString),
    /// A peeled line (`<id> <name>^{}`) not right after its ref.
    #[error("a peeled line does not follow its ref: {0:?}")]
    StrayPeeled(BString),
}

/// Reads the advertisement from `lines` to its flush, keeping the values
/// of `names`.
pub(super) fn read(
    lines: &mut dyn ReadlineBufRead,
    names: &[&str],
) -> Result<Advertised, AdvertError> {
    let mut out = Advertised::default();
    // The name of the last ref line, while a peeled line may follow it.
    let mut peelable = false;
    let mut last_name = Vec::new();
    while let Some(line) = lines.readline() {
        let line = line
            .map_err(AdvertError::Read)?
            .map_err(AdvertError::Decode)?;
        let Some(text) = line.as_bstr() else { continue };
        let text = text.trim_end();
        let bad = || AdvertError::NotARefLine(text.into());
        let space = text.find_byte(b' ').ok_or_else(bad)?;
        let (hex, name) = (&text[..space], &text[space + 1..]);
        if name.is_empty() {
            return Err(bad());
        }
        if hex == b"shallow" {
            continue;
        }
        let id = ObjectId::from_hex(hex).map_err(|_| bad())?;
        if let Some(peeled_of) = name.strip_suffix(b"^{}") {
            if peeled_of == b"capabilities" && id.is_null() {
                continue;
            }
            if !peelable || last_name.as_slice() != peeled_of {
                return Err(AdvertError::StrayPeeled(text.into()));
            }
            peelable = false;
            out.tips.push(id);
            continue;
        }
        out.tips.push(id);
        if let Some(n) = names.iter().find(|n| n.as_bytes() == name) {
            out.named.insert((*n).to_owned(), id);
        }
        last_name.clear();
        last_name.extend_from_slice(name);
        peelable = true;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::protocol::transport::packetline::blocking_io::{encode, StreamingPeekableIter};
    use gix::protocol::transport::packetline::PacketLineRef;

    fn advertisement(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in lines {
            encode::data_to_write(format!("{l}\n").as_bytes(), &mut out).expect("to a Vec");
        }
        encode::flush_to_write(&mut out).expect("to a Vec");
        out
    }

    fn parse(lines: &[&str], names: &[&str]) -> Result<Advertised, AdvertError> {
        let bytes = advertisement(lines);
        let mut it = StreamingPeekableIter::new(&bytes[..], &[PacketLineRef::Flush], false);
        let mut r = it.as_read();
        read(&mut r, names)
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";

    #[test]
    fn keeps_every_value_and_only_the_names_asked_for() {
        let got = parse(
            &[
                &format!("{A} refs/heads/main"),
                &format!("{B} refs/tags/v1"),
                &format!("{C} refs/tags/v1^{{}}"),
                &format!("{C} refs/pull/1/head"),
            ],
            &["refs/tags/v1", "refs/heads/absent"],
        )
        .expect("parses");
        let ids: Vec<String> = got.tips.iter().map(|i| i.to_string()).collect();
        assert_eq!(ids, [A, B, C, C]);
        assert_eq!(got.named.len(), 1);
        // The tag's own id, not the peeled one.
        assert_eq!(got.named["refs/tags/v1"].to_string(), B);
    }

    #[test]
    fn an_empty_repository_advertises_nothing() {
        let zero = "0".repeat(40);
        let got = parse(
            &[&format!("{zero} capabilities^{{}}")],
            &["refs/heads/main"],
        )
        .expect("parses");
        assert!(got.tips.is_empty() && got.named.is_empty());
    }

    #[test]
    fn a_bad_line_or_a_stray_peeled_line_is_an_error() {
        let e = parse(&["not-a-ref-line"], &[]).expect_err("not a ref line");
        assert!(matches!(e, AdvertError::NotARefLine(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "an advertised ref line is not '<id> <name>': \"not-a-ref-line\""
        );
        assert!(matches!(
            parse(&[&format!("{A} ")], &[]),
            Err(AdvertError::NotARefLine(_))
        ));
        assert!(matches!(
            parse(&[&format!("{A} refs/tags/x^{{}}")], &[]),
            Err(AdvertError::StrayPeeled(_))
        ));
        let e = parse(
            &[
                &format!("{A} refs/tags/x"),
                &format!("{B} refs/tags/y^{{}}"),
            ],
            &[],
        )
        .expect_err("a peeled line after another ref");
        assert!(matches!(e, AdvertError::StrayPeeled(_)), "{e:?}");
    }
}
