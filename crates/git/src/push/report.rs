//! Parsing receive-pack's report-status (v1 and v2), a pure function over
//! bytes: the pkt-lines carried in side-band 1, or the bare lines when the
//! server spoke without side-band.

/// The most ref statuses a report may hold (girt's figure; a push names
/// far fewer refs, and a status for a ref not pushed is refused anyway).
pub const MAX_REFS: usize = 100_000;

/// What the server reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `unpack ok` → `Ok`, `unpack <error>` → `Err(error)`.
    pub unpack: Result<(), String>,
    /// Per ref, in report order: `ok <ref>` → `Ok`, `ng <ref> <reason>` → `Err(reason)`.
    pub refs: Vec<(String, Result<(), String>)>,
}

/// Why a report could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed report-status: {0}")]
pub struct ReportError(pub String);

/// Split pkt-line framed `data` into payloads, stopping at the first flush.
pub fn pkt_payloads(data: &[u8]) -> Result<Vec<&[u8]>, ReportError> {
    crate::pktline::payloads(data).map_err(|e| ReportError(e.to_string()))
}

/// Parse a report from its lines (each without framing; a trailing `\n` is
/// allowed). `option` lines of report-status-v2 are accepted and skipped.
pub fn parse_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Result<Report, ReportError> {
    let mut unpack = None;
    let mut refs = Vec::new();
    for raw in lines {
        let line = String::from_utf8_lossy(raw);
        let line = line.strip_suffix('\n').unwrap_or(&line);
        if unpack.is_none() {
            let rest = line
                .strip_prefix("unpack ")
                .ok_or_else(|| ReportError(format!("expected 'unpack', got {line:?}")))?;
            unpack = Some(if rest == "ok" {
                Ok(())
            } else {
                Err(sluice_policy::remote_text::bounded_reason(rest))
            });
            continue;
        }
        if refs.len() >= MAX_REFS {
            return Err(ReportError(format!("more than {MAX_REFS} ref statuses")));
        }
        if let Some(name) = line.strip_prefix("ok ") {
            if name.is_empty() {
                return Err(ReportError("'ok' without a ref name".into()));
            }
            refs.push((name.to_string(), Ok(())));
        } else if let Some(rest) = line.strip_prefix("ng ") {
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, "rejected"));
            if name.is_empty() {
                return Err(ReportError("'ng' without a ref name".into()));
            }
            refs.push((
                name.to_string(),
                Err(sluice_policy::remote_text::bounded_reason(reason)),
            ));
        } else if line.starts_with("option ") {
            if refs.is_empty() {
                return Err(ReportError("'option' before any ref status".into()));
            }
        } else {
            return Err(ReportError(format!("unexpected line {line:?}")));
        }
    }
    let unpack = unpack.ok_or_else(|| ReportError("empty report".into()))?;
    Ok(Report { unpack, refs })
}

/// Parse the content of side-band 1: pkt-lines ending in a flush.
pub fn parse_sideband(data: &[u8]) -> Result<Report, ReportError> {
    parse_lines(pkt_payloads(data)?)
}

/// Parse a report read without side-band: the line payloads, concatenated.
pub fn parse_plain(data: &[u8]) -> Result<Report, ReportError> {
    parse_lines(
        data.split_inclusive(|b| *b == b'\n')
            .filter(|l| !l.is_empty()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in lines {
            out.extend_from_slice(format!("{:04x}{l}", l.len() + 4).as_bytes());
        }
        out.extend_from_slice(b"0000");
        out
    }

    #[test]
    fn a_report_of_git_2_47_parses() {
        // As git 2.47 frames it.
        let data =
            b"000eunpack ok\n0017ok refs/heads/main\n0027ng refs/heads/dev non-fast-forward\n0000";
        assert_eq!(
            &data[..],
            &pkt(&[
                "unpack ok\n",
                "ok refs/heads/main\n",
                "ng refs/heads/dev non-fast-forward\n"
            ])[..]
        );
        let r = parse_sideband(data).expect("parses");
        assert_eq!(r.unpack, Ok(()));
        assert_eq!(
            r.refs,
            vec![
                ("refs/heads/main".to_string(), Ok(())),
                (
                    "refs/heads/dev".to_string(),
                    Err("non-fast-forward".to_string())
                ),
            ]
        );
    }

    #[test]
    fn report_status_v2_options_are_skipped() {
        let data = pkt(&[
            "unpack ok\n",
            "ok refs/heads/main\n",
            "option forced-update\n",
        ]);
        assert_eq!(parse_sideband(&data).expect("parses").refs.len(), 1);
    }

    #[test]
    fn an_unpack_error_is_kept_in_the_remotes_words() {
        let r = parse_plain(
            b"unpack unpack-objects abnormal exit\nng refs/heads/main unpacker error\n",
        )
        .expect("parses");
        assert_eq!(r.unpack, Err("unpack-objects abnormal exit".into()));
        assert_eq!(r.refs[0].1, Err("unpacker error".into()));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(parse_sideband(b"zzzz").is_err());
        assert!(parse_sideband(b"0003").is_err());
        assert!(parse_sideband(b"0010unpack ok\n").is_err());
        assert!(parse_sideband(b"000eunpack ok\n").is_err());
        assert!(parse_sideband(b"0000").is_err());
        assert!(parse_plain(b"hello\n").is_err());
        assert!(parse_plain(b"unpack ok\nok \n").is_err());
    }
}
