//! The results as a Markdown table, written under the target directory
//! and, on request, into `vendor-tests/README.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::scenarios::{Cell, RowResult, COLUMNS};

/// Where the README keeps the table.
pub const START: &str = "<!-- interop-table:start -->";
/// The end of the table in the README.
pub const END: &str = "<!-- interop-table:end -->";

/// The table, its notes (numbered: not-supported reasons, failures) and
/// what the servers said.
pub fn render(rows: &[RowResult], header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}\n");
    let _ = write!(out, "| server | transport |");
    for c in COLUMNS {
        let _ = write!(out, " {} |", c.title);
    }
    let _ = write!(out, "\n|---|---|");
    for _ in COLUMNS {
        let _ = write!(out, "---|");
    }
    out.push('\n');
    let mut notes: Vec<String> = Vec::new();
    for row in rows {
        let _ = write!(out, "| {} | {} |", row.server, row.transport);
        for (i, cell) in row.cells.iter().enumerate() {
            let text = match cell {
                Cell::Pass => "pass".to_owned(),
                Cell::Fail(why) => {
                    notes.push(format!(
                        "**fail** — {} × {}: {}",
                        row.server,
                        COLUMNS[i].title,
                        one_line(why)
                    ));
                    format!("**fail** [{}]", notes.len())
                }
                Cell::NotSupported(why) => {
                    notes.push(format!(
                        "not supported — {} × {}: {}",
                        row.server,
                        COLUMNS[i].title,
                        one_line(why)
                    ));
                    format!("not supported [{}]", notes.len())
                }
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    if !notes.is_empty() {
        out.push('\n');
        for (i, n) in notes.iter().enumerate() {
            let _ = writeln!(out, "* [{}] {n}", i + 1);
        }
    }
    out.push_str("\nThe columns:\n\n");
    for c in COLUMNS {
        let _ = writeln!(out, "* **{}**: {}.", c.title, one_line(c.what));
    }
    out.push_str("\nHow each row's reads are made protocol v0:\n\n");
    for row in rows {
        let _ = writeln!(out, "* {}: {}.", row.server, row.v0_route);
    }
    let said: Vec<&String> = rows.iter().flat_map(|r| &r.notes).collect();
    if !said.is_empty() {
        out.push_str("\nWhat the servers said:\n\n");
        for s in said {
            let _ = writeln!(out, "* {}", one_line(s));
        }
    }
    out
}

fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// The cargo target directory the running test binary lives in.
pub fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        let t = PathBuf::from(t);
        return if t.is_absolute() {
            t
        } else {
            workspace.join(t)
        };
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()) {
            return dir.to_owned();
        }
    }
    workspace.join("target")
}

/// Writes `table` to `<target>/vendor-tests/interop-table.md`; returns the
/// path.
pub fn write_target(table: &str) -> std::io::Result<PathBuf> {
    let dir = target_dir().join("vendor-tests");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("interop-table.md");
    std::fs::write(&path, table)?;
    Ok(path)
}

/// Replaces the text between [`START`] and [`END`] in `readme` with
/// `table`.
pub fn update_readme(readme: &Path, table: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(readme)?;
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        return Err(std::io::Error::other(format!(
            "{} has no {START} … {END} markers",
            readme.display()
        )));
    };
    let new = format!(
        "{}{START}\n{}\n{END}{}",
        &text[..a],
        table.trim_end(),
        &text[b + END.len()..]
    );
    std::fs::write(readme, new)
}
