//! Recorded server transcripts replayed into the report parser, with no
//! socket: what git 2.47's `git daemon` and `git http-backend` and Debian's
//! `jgit daemon` answered real pushes, byte for byte
//! (`tests/fixtures/transcripts/<server>/<case>.response`, made again by
//! `tests/fixtures/record-transcripts.py`). Each report is read as the
//! push reads it: out of side-band 1 when the request asked for
//! side-band-64k, as bare pkt-lines when it did not.

use std::path::Path;

use sluice_git::push::report::{parse_sideband, Report};

/// A recorded file of `server`'s `case`.
fn transcript(server: &str, case: &str, ext: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(server)
        .join(format!("{case}.{ext}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One pkt-line: its payload, or `None` for a flush.
fn pkt_lines(mut data: &[u8]) -> Vec<Option<&[u8]>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let hex = std::str::from_utf8(&data[..4]).expect("a pkt-line length");
        let n = usize::from_str_radix(hex, 16).expect("a hex length");
        if n == 0 {
            out.push(None);
            data = &data[4..];
            continue;
        }
        out.push(Some(&data[4..n]));
        data = &data[n..];
    }
    out
}

/// What a push's answer carried: the report's bytes (side-band 1, or the
/// bare pkt-lines) and the side-band 2 text, split into lines.
struct Answer {
    report: Vec<u8>,
    band2: Vec<String>,
}

/// The answer in `server`'s `case`: after the advertisement over git://
/// (`git http-backend`'s POST answer has none).
fn answer(server: &str, case: &str) -> Answer {
    let data = transcript(server, case, "response");
    let mut data = &data[..];
    if server != "http-backend" {
        data = &data[advert_len(data)..];
    }
    if case.ends_with("no-sideband") {
        return Answer {
            report: data.to_vec(),
            band2: Vec::new(),
        };
    }
    let mut report = Vec::new();
    let mut band2 = String::new();
    for pkt in pkt_lines(data) {
        let Some(p) = pkt else { break };
        match p[0] {
            1 => report.extend_from_slice(&p[1..]),
            2 => band2.push_str(&String::from_utf8_lossy(&p[1..])),
            b => panic!("band {b} in {server}/{case}"),
        }
    }
    let band2 = band2
        .split(['\n', '\r'])
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    Answer { report, band2 }
}

/// The length of the advertisement at the start of `data`, its flush
/// included.
fn advert_len(data: &[u8]) -> usize {
    let mut at = 0;
    loop {
        let n = usize::from_str_radix(std::str::from_utf8(&data[at..at + 4]).unwrap(), 16)
            .expect("a hex length");
        if n == 0 {
            return at + 4;
        }
        at += n;
    }
}

fn report(server: &str, case: &str) -> Report {
    let a = answer(server, case);
    parse_sideband(&a.report).unwrap_or_else(|e| panic!("{server}/{case}: {e}"))
}

const MAIN: &str = "refs/heads/main";

fn refs(status: Result<(), &str>) -> Vec<(String, Result<(), String>)> {
    vec![(MAIN.to_owned(), status.map_err(str::to_owned))]
}

const GIT: [&str; 2] = ["git-daemon", "http-backend"];

#[test]
fn a_push_that_landed_reads_unpack_ok_and_ok_from_every_server_with_and_without_side_band() {
    for server in ["git-daemon", "http-backend", "jgit"] {
        for case in ["push-ok", "push-ok-no-sideband"] {
            assert_eq!(
                report(server, case),
                Report {
                    unpack: Ok(()),
                    refs: refs(Ok(())),
                },
                "{server}/{case}"
            );
        }
    }
}

#[test]
fn a_non_fast_forward_refused_by_the_server_reads_ng_with_its_reason() {
    for server in GIT {
        let a = answer(server, "push-ng-non-ff");
        assert_eq!(
            parse_sideband(&a.report),
            Ok(Report {
                unpack: Ok(()),
                refs: refs(Err("non-fast-forward")),
            }),
            "{server}"
        );
        assert_eq!(
            a.band2,
            ["error: denying non-fast-forward refs/heads/main (you should pull first)"],
            "{server}"
        );
    }
    // JGit words it without the hyphen, and says nothing on side-band 2.
    let a = answer("jgit", "push-ng-non-ff");
    assert_eq!(
        parse_sideband(&a.report),
        Ok(Report {
            unpack: Ok(()),
            refs: refs(Err("non-fast forward")),
        })
    );
    assert!(a.band2.is_empty(), "{:?}", a.band2);
}

#[test]
fn a_declining_hook_reads_ng_with_its_reason_after_its_words_on_side_band_2() {
    for server in GIT {
        let a = answer(server, "push-ng-hook");
        assert_eq!(
            a.band2,
            ["checking the push", "refused by policy"],
            "{server}"
        );
        assert_eq!(
            parse_sideband(&a.report),
            Ok(Report {
                unpack: Ok(()),
                refs: refs(Err("pre-receive hook declined")),
            }),
            "{server}"
        );
    }
}

#[test]
fn a_broken_pack_reads_the_unpack_failure_and_each_refs_ng() {
    for server in GIT {
        let a = answer(server, "push-unpack-failure");
        assert_eq!(
            parse_sideband(&a.report),
            Ok(Report {
                unpack: Err("unpack-objects abnormal exit".to_owned()),
                refs: refs(Err("unpacker error")),
            }),
            "{server}"
        );
        assert_eq!(
            a.band2,
            [
                "error: inflate: data stream error (incorrect header check)",
                "error: inflate returned -3"
            ],
            "{server}"
        );
    }
    assert_eq!(
        report("jgit", "push-unpack-failure"),
        Report {
            unpack: Err("error Packfile corruption detected: incorrect header check".to_owned()),
            refs: refs(Err("n/a (unpacker error)")),
        }
    );
}

#[test]
fn jgit_s_progress_on_side_band_2_is_apart_from_its_report() {
    let a = answer("jgit", "push-ok");
    assert_eq!(
        a.band2,
        [
            "Updating references: 100% (1/1)",
            "Updating references: 100% (1/1)"
        ]
    );
    assert_eq!(
        parse_sideband(&a.report),
        Ok(Report {
            unpack: Ok(()),
            refs: refs(Ok(())),
        })
    );
}

#[test]
fn the_requests_asked_for_side_band_but_where_it_was_taken_out_and_the_broken_pack_differs_by_one_byte(
) {
    for server in ["git-daemon", "http-backend", "jgit"] {
        for case in [
            "push-ok",
            "push-ok-no-sideband",
            "push-ng-non-ff",
            "push-unpack-failure",
        ] {
            let req = transcript(server, case, "request");
            let text = String::from_utf8_lossy(&req);
            assert!(text.contains("report-status"), "{server}/{case}");
            assert_eq!(
                text.contains("side-band-64k"),
                case != "push-ok-no-sideband",
                "{server}/{case}"
            );
        }
    }
    // Over HTTP the request names no port: the same push, one byte apart.
    let ok = transcript("http-backend", "push-ok", "request");
    let broken = transcript("http-backend", "push-unpack-failure", "request");
    assert_eq!(ok.len(), broken.len());
    assert_eq!(ok.iter().zip(&broken).filter(|(a, b)| a != b).count(), 1);
}
