//! The remote's text in the CLI's output: human output (to a pipe here,
//! as to a terminal) shows every control character but newline, tab and
//! SGR colours as `^X`, and hook output only as `remote:` lines; `--json`
//! keeps the text as sent. Against a real `git daemon` (a hook's output)
//! and the testkit's scripted server (an `ERR` packet, an `ng` reason with
//! control sequences, which no real server sends).

use crate::common;

use common::*;
use sluice_testkit::repo;
use sluice_testkit::scripted::{Script, ScriptedServer};

/// The window title, clear screen, cursor moves and colour a hostile hook
/// prints, and what human output must show of them.
const HOSTILE: &str = "\x1b]0;pwned\x07\x1b[2J\x1b[3;4Hmoved \x1b[31mred\x1b[0m\x08";
const SHOWN: &str = "^[]0;pwned^G^[[2J^[[3;4Hmoved \x1b[31mred\x1b[0m^H";

/// `text` holds no control character but newline, tab and complete SGR
/// sequences (`ESC [ digits/; m`).
fn no_control_but_sgr(text: &str) -> Result<(), String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == 0x1b {
            let params = b[i + 1..]
                .iter()
                .skip(1)
                .take_while(|c| c.is_ascii_digit() || **c == b';')
                .count();
            if b.get(i + 1) != Some(&b'[') || b.get(i + 2 + params) != Some(&b'm') {
                return Err(format!("a raw ESC at byte {i}: {text:?}"));
            }
            i += 3 + params;
            continue;
        }
        if (c < 0x20 && c != b'\n' && c != b'\t') || c == 0x7f {
            return Err(format!("control byte {c:#04x} at {i}: {text:?}"));
        }
        i += 1;
    }
    Ok(())
}

#[test]
fn a_hooks_control_sequences_are_shown_as_carets_and_kept_as_sent_in_json() {
    let w = World::new();
    repo::install_hook(
        &w.server(),
        "pre-receive",
        &format!(
            "#!/bin/sh\nprintf '%s\\r50%%\\rdone\\n' '{HOSTILE}' >&2\necho 'checking your push...' >&2\nexit 1\n"
        ),
    )
    .expect("hook");
    let local = w.clone_bare("local.git");
    repo::commit_on(&local, "main", "x");
    let args = |json: bool| {
        let mut a = vec![
            "push".to_string(),
            w.url(),
            "main".into(),
            "--repo".into(),
            p(&local),
            "--progress".into(),
        ];
        if json {
            a.push("--json".into());
        }
        a
    };
    let human = sluice(&args(false).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(human.code, 1, "{human:?}");
    no_control_but_sgr(&human.stdout).expect("stdout");
    no_control_but_sgr(&human.stderr).expect("stderr");
    let lines: Vec<&str> = human.stderr.lines().collect();
    assert!(
        lines.contains(&format!("remote: {SHOWN}").as_str()),
        "{}",
        human.stderr
    );
    assert!(lines.contains(&"remote: 50%"), "{}", human.stderr);
    assert!(lines.contains(&"remote: done"), "{}", human.stderr);
    assert!(
        lines.contains(&"remote: checking your push..."),
        "{}",
        human.stderr
    );
    // The hook's words are never a progress stage.
    assert!(
        !human.stderr.contains("push: checking your push"),
        "{}",
        human.stderr
    );
    assert!(
        !human.stderr.contains("push: pre-receive"),
        "{}",
        human.stderr
    );

    let json = sluice(&args(true).iter().map(String::as_str).collect::<Vec<_>>());
    let doc = json.json();
    check_document(&doc, "push", "write");
    let said: Vec<&str> = doc["remote_messages"]
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("text"))
        .collect();
    assert_eq!(said, [HOSTILE, "50%", "done", "checking your push..."]);
    assert_eq!(doc["remote_messages_dropped"]["lines"], 0);
    assert_eq!(doc["remote_messages_dropped"]["bytes"], 0);
}

#[test]
fn control_sequences_in_an_err_packet_are_shown_as_carets_and_kept_in_json() {
    let server = ScriptedServer::start(
        Script::Err {
            text: format!("access denied {HOSTILE}\n"),
        },
        Vec::new(),
    )
    .expect("scripted server");
    let url = server.url("r.git");
    for json in [false, true] {
        let mut args = vec!["ls-refs", &url, "--max-attempts", "3"];
        if json {
            args.push("--json");
        }
        let run = sluice(&args);
        assert_eq!(run.code, 1, "{run:?}");
        if json {
            let doc = run.json();
            assert_eq!(doc["attempts"].as_array().expect("attempts").len(), 1);
            let cause = doc["attempts"][0]["cause"].as_str().expect("cause");
            assert!(cause.contains(HOSTILE), "{cause:?}");
        } else {
            no_control_but_sgr(&run.stderr).expect("stderr");
            assert!(
                run.stderr
                    .contains(&format!("answer: access denied {SHOWN}")),
                "{}",
                run.stderr
            );
        }
    }
}

#[test]
fn control_sequences_in_an_ng_reason_are_shown_as_carets_and_kept_in_json() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    let gone = repo::rev_parse(&local, "refs/heads/main").expect("main");
    let server = ScriptedServer::start(
        Script::Refuse {
            reason: format!("frozen {HOSTILE}"),
        },
        vec![("refs/heads/gone".into(), gone.clone())],
    )
    .expect("scripted server");
    let url = server.url("r.git");
    for json in [false, true] {
        let mut args = vec!["push", &url, ":refs/heads/gone", "--repo"];
        let repo_arg = p(&local);
        args.push(&repo_arg);
        if json {
            args.push("--json");
        }
        let run = sluice(&args);
        assert_eq!(run.code, 1, "{run:?}");
        if json {
            let doc = run.json();
            let message = doc["value"][0]["message"].as_str().expect("message");
            assert_eq!(message, format!("frozen {HOSTILE}"));
        } else {
            no_control_but_sgr(&run.stdout).expect("stdout");
            no_control_but_sgr(&run.stderr).expect("stderr");
            assert!(
                run.stdout
                    .contains(&format!("[remote rejected] gone (frozen {SHOWN})")),
                "{}",
                run.stdout
            );
            assert!(
                run.stderr.contains(&format!("frozen {SHOWN}")),
                "{}",
                run.stderr
            );
        }
    }
    assert!(server.wait_idle(std::time::Duration::from_secs(10)));
    let conns = server.connections();
    assert_eq!(conns.len(), 2, "one connection per run");
    let delete = format!("{gone} {} refs/heads/gone", "0".repeat(40));
    assert!(
        conns.iter().all(|c| c.commands == [delete.clone()]),
        "{conns:?}"
    );
}

#[test]
fn an_atomic_push_refused_for_one_ref_names_that_ref_and_its_reason() {
    let w = World::new();
    let local = w.clone_bare("local.git");
    // The local main leaves the server's behind: a non-fast-forward.
    repo::git(
        &local,
        &["update-ref", "refs/heads/main", "refs/heads/main~1"],
    );
    repo::commit_on(&local, "main", "here");
    repo::commit_on(&local, "dev", "fine");
    let before = repo::refs(&w.server());
    let base = ["push", &w.url(), "main", "dev", "--atomic", "--repo"];
    let local_arg = p(&local);
    let mut args = base.to_vec();
    args.push(&local_arg);
    let human = sluice(&args);
    assert_eq!(human.code, 1, "{human:?}");
    assert!(
        human
            .stderr
            .contains("answer: refs/heads/main: non-fast-forward"),
        "{}",
        human.stderr
    );
    args.push("--json");
    let doc = sluice(&args).json();
    let value = doc["value"].as_array().expect("value");
    let reason = |name: &str| {
        value
            .iter()
            .find(|r| r["ref"] == name)
            .map(|r| r["reason"].clone())
            .expect("the ref")
    };
    assert_eq!(reason("refs/heads/main"), "non-fast-forward");
    assert_eq!(reason("refs/heads/dev"), "atomic-push-failed");
    assert_eq!(
        doc["attempts"][0]["cause"],
        "refs/heads/main: non-fast-forward"
    );
    assert_eq!(repo::refs(&w.server()), before, "nothing written");
}
