//! The remote's text made safe for a terminal, as git 2.55 shows it: a
//! server must not be able to retitle the operator's window, clear the
//! screen or move the cursor.
//!
//! Newline, tab and SGR colour sequences (`ESC [ <digits and ;> m`) are
//! kept; every other control character is shown as `^X` (ESC as `^[`, DEL
//! as `^?`, a C1 control as `M-^X`, as `cat -v` shows it). In side-band
//! text (`remote:` lines) a `\r` ends a line, as git's does; elsewhere it
//! is `^M`. Applied to everything human output prints of the remote's
//! words — to a terminal or a pipe alike; `--json` and tracing keep the
//! text as sent.

/// `text` with every control character but newline, tab and SGR colour
/// sequences made visible; a `\r` is shown as `^M`.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b' {
            if let Some(len) = sgr_len(rest) {
                out.push_str(&rest[..len]);
                rest = &rest[len..];
                continue;
            }
        }
        push_visible(&mut out, c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A side-band line as git prints it: `remote: ` before each piece, a `\r`
/// ending a piece as a newline does, the rest made [`visible`].
pub fn remote_lines(line: &str) -> String {
    let mut out = String::new();
    for piece in line.split(['\r', '\n']) {
        if piece.is_empty() {
            continue;
        }
        out.push_str("remote: ");
        out.push_str(&visible(piece));
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("remote:\n");
    }
    out
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' | '\t' => out.push(c),
        '\x7f' => out.push_str("^?"),
        c if (c as u32) < 0x20 => {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        }
        c if (0x80..0xa0).contains(&(c as u32)) => {
            out.push_str("M-^");
            out.push(char::from(b'@' + (c as u32 - 0x80) as u8));
        }
        c => out.push(c),
    }
}

/// The length of the SGR sequence `s` opens with (`ESC [`, digits and
/// `;`, then `m`), if it is one.
fn sgr_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(1) != Some(&b'[') {
        return None;
    }
    let params = b[2..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b';')
        .count();
    (b.get(2 + params) == Some(&b'm')).then_some(3 + params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_newlines_and_tabs_are_kept() {
        let s = "\x1b[1;31mred\x1b[m\tand\n\x1b[0mplain";
        assert_eq!(visible(s), s);
    }

    #[test]
    fn every_other_control_character_is_shown_as_caret_notation() {
        assert_eq!(
            visible("\x1b]0;owned\x07title"),
            "^[]0;owned^Gtitle",
            "a window title"
        );
        assert_eq!(visible("\x1b[2J\x1b[H\x1b[10;5f"), "^[[2J^[[H^[[10;5f");
        assert_eq!(visible("a\rb\x7f\x00\x08"), "a^Mb^?^@^H");
        assert_eq!(visible("\u{9b}2J"), "M-^[2J", "a C1 CSI");
        assert_eq!(visible("\x1b[31"), "^[[31", "an SGR cut short");
        assert_eq!(visible("héllo ✓"), "héllo ✓");
    }

    #[test]
    fn a_carriage_return_in_side_band_text_ends_a_line() {
        assert_eq!(
            remote_lines("Counting: 50%\rCounting: 100%\x1b[2K"),
            "remote: Counting: 50%\nremote: Counting: 100%^[[2K\n"
        );
        assert_eq!(remote_lines(""), "remote:\n");
    }
}
