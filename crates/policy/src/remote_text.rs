//! What is kept of the remote's text beside the protocol (side-band 2, a
//! hook's words): bounded, so a server that prints without end cannot grow
//! the client's memory, with what was left out counted.
//!
//! # Caps (one operation, every attempt together)
//!
//! * [`LINES_KEPT`]: 10,000 lines;
//! * [`BYTES_KEPT`]: 1 MiB of text;
//! * [`LINE_BYTES`]: 4 KiB of one line (the rest of it is dropped, the
//!   line kept).
//!
//! A line past either total is dropped whole. What was dropped is the
//! outcome's `remote_messages_dropped: { lines, bytes }` (a cut line's
//! tail counts as bytes only).

use serde::{Deserialize, Serialize};

/// The most lines of the remote's text an operation keeps.
pub const LINES_KEPT: usize = 10_000;
/// The most bytes of the remote's text an operation keeps.
pub const BYTES_KEPT: usize = 1 << 20;
/// The most bytes kept of one line (or of one `ng`/`ERR` reason).
pub const LINE_BYTES: usize = 4 << 10;

/// What the caps left out of `remote_messages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteTextDropped {
    /// Whole lines dropped.
    pub lines: u64,
    /// Bytes dropped (of whole lines, and of lines cut at [`LINE_BYTES`]).
    pub bytes: u64,
}

impl RemoteTextDropped {
    /// Add what another collector dropped.
    pub fn add(&mut self, other: RemoteTextDropped) {
        self.lines = self.lines.saturating_add(other.lines);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// The remote's lines, in order, within the caps.
#[derive(Clone, Debug, Default)]
pub struct RemoteText {
    lines: Vec<String>,
    bytes: usize,
    dropped: RemoteTextDropped,
    /// A line begun in one side-band packet and not yet ended.
    partial: Vec<u8>,
}

impl RemoteText {
    /// Keep `line` if the caps allow (cut at [`LINE_BYTES`]), else count it.
    pub fn push_line(&mut self, line: String) {
        let line = self.cut(line);
        if self.lines.len() >= LINES_KEPT || self.bytes + line.len() > BYTES_KEPT {
            self.dropped.lines += 1;
            self.dropped.bytes += line.len() as u64;
            return;
        }
        self.bytes += line.len();
        self.lines.push(line);
    }

    /// Feed raw side-band text: lines end at `\n` or `\r` (as git's
    /// side-band does); empty lines are skipped; a line not yet ended is
    /// held (at most [`LINE_BYTES`] of it) until [`RemoteText::finish`].
    pub fn feed(&mut self, text: &[u8]) {
        let mut rest = text;
        while !rest.is_empty() {
            let end = rest.iter().position(|b| matches!(b, b'\n' | b'\r'));
            let piece = &rest[..end.unwrap_or(rest.len())];
            let room = (LINE_BYTES + 1).saturating_sub(self.partial.len());
            let take = piece.len().min(room);
            self.partial.extend_from_slice(&piece[..take]);
            self.dropped.bytes += (piece.len() - take) as u64;
            match end {
                Some(i) => {
                    self.end_line();
                    rest = &rest[i + 1..];
                }
                None => break,
            }
        }
    }

    /// End a line left open by [`RemoteText::feed`].
    pub fn finish(&mut self) {
        self.end_line();
    }

    /// Count lines and bytes another collector dropped.
    pub fn add_dropped(&mut self, d: RemoteTextDropped) {
        self.dropped.add(d);
    }

    /// What was dropped so far.
    pub fn dropped(&self) -> RemoteTextDropped {
        self.dropped
    }

    /// The lines kept and what was dropped.
    pub fn into_parts(mut self) -> (Vec<String>, RemoteTextDropped) {
        self.finish();
        (self.lines, self.dropped)
    }

    fn end_line(&mut self) {
        let raw = std::mem::take(&mut self.partial);
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end();
        if !line.is_empty() {
            self.push_line(line.to_string());
        }
    }

    fn cut(&mut self, line: String) -> String {
        if line.len() <= LINE_BYTES {
            return line;
        }
        let mut end = LINE_BYTES;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        self.dropped.bytes += (line.len() - end) as u64;
        line[..end].to_string()
    }
}

/// `text` cut to [`LINE_BYTES`] (on a character boundary), for one `ng` or
/// `ERR` reason; `…` marks a cut.
pub fn bounded_reason(text: &str) -> String {
    if text.len() <= LINE_BYTES {
        return text.to_string();
    }
    let mut end = LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_past_the_caps_are_counted_not_kept() {
        let mut t = RemoteText::default();
        for i in 0..LINES_KEPT + 5 {
            t.push_line(format!("line {i}"));
        }
        let (kept, dropped) = t.into_parts();
        assert_eq!(kept.len(), LINES_KEPT);
        assert_eq!(kept[0], "line 0");
        assert_eq!(dropped.lines, 5);
        let tail: u64 = (LINES_KEPT..LINES_KEPT + 5)
            .map(|i| format!("line {i}").len() as u64)
            .sum();
        assert_eq!(dropped.bytes, tail);
    }

    #[test]
    fn bytes_past_the_cap_drop_whole_lines_and_a_long_line_is_cut() {
        let mut t = RemoteText::default();
        let long = "x".repeat(LINE_BYTES + 100);
        t.push_line(long);
        assert_eq!(
            t.dropped(),
            RemoteTextDropped {
                lines: 0,
                bytes: 100
            }
        );
        for _ in 0..BYTES_KEPT / LINE_BYTES {
            t.push_line("y".repeat(LINE_BYTES));
        }
        let (kept, dropped) = t.into_parts();
        assert_eq!(kept.len(), BYTES_KEPT / LINE_BYTES);
        assert_eq!(kept.iter().map(String::len).sum::<usize>(), BYTES_KEPT);
        assert_eq!(dropped.lines, 1);
        assert_eq!(dropped.bytes, 100 + LINE_BYTES as u64);
    }

    #[test]
    fn fed_text_is_split_at_newlines_and_carriage_returns_across_packets() {
        let mut t = RemoteText::default();
        t.feed(b"checking your pu");
        t.feed(b"sh...\r50%\rdone\n\nnext");
        let (kept, dropped) = t.into_parts();
        assert_eq!(kept, ["checking your push...", "50%", "done", "next"]);
        assert_eq!(dropped, RemoteTextDropped::default());
        let mut t = RemoteText::default();
        t.feed(&vec![b'z'; 3 * LINE_BYTES]);
        t.feed(b"\n");
        let (kept, dropped) = t.into_parts();
        assert_eq!(kept[0].len(), LINE_BYTES);
        assert_eq!(dropped.bytes, 2 * LINE_BYTES as u64);
    }

    #[test]
    fn a_long_reason_is_cut_and_marked() {
        assert_eq!(bounded_reason("short"), "short");
        let r = bounded_reason(&"é".repeat(LINE_BYTES));
        assert!(r.len() <= LINE_BYTES + '…'.len_utf8());
        assert!(r.ends_with('…'));
    }
}
