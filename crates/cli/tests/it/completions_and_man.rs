//! Shell completions and the man page come from the same definitions as
//! the help, and each command's help shows its own options before the
//! global ones.

use std::process::{Command, Stdio};

use crate::common;

use common::*;

#[test]
fn completions_for_every_shell_know_the_commands_and_their_options() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = sluice(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {run:?}");
        for word in [
            "ls-refs",
            "fetch",
            "push",
            "delete",
            "exit-code",
            "trace",
            "metrics",
        ] {
            // Long options as each shell spells them (fish: `-l delete`).
            assert!(run.stdout.contains(word), "{shell} lacks {word}");
        }
    }
    // bash takes the script and completes with it.
    let script = sluice(&["completions", "bash"]).stdout;
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            "source /dev/stdin; f=$(complete -p sluice-remote | sed -E 's/.*-F ([^ ]+).*/\\1/'); \
             COMP_WORDS=(sluice-remote push origin --del); COMP_CWORD=3; \
             \"$f\" sluice-remote --del origin; printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(script.as_bytes())?;
            child.wait_with_output()
        })
        .expect("bash runs");
    let words = String::from_utf8_lossy(&out.stdout);
    assert!(
        words.lines().any(|l| l == "--delete"),
        "{words}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An unknown shell is a usage error.
    let bad = sluice(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert_eq!(bad.stdout, "");
}

#[test]
fn the_man_page_has_every_command_with_its_own_options() {
    let run = sluice(&["man"]);
    assert_eq!(run.code, 0, "{run:?}");
    let page = &run.stdout;
    assert!(page.contains(".TH sluice-remote 1"), "{page}");
    for section in [
        ".SH \"SLUICE-REMOTE LS-REFS\"",
        ".SH \"SLUICE-REMOTE FETCH\"",
        ".SH \"SLUICE-REMOTE PUSH\"",
        ".SH \"SLUICE-REMOTE LEDGER LIST\"",
        ".SH \"SLUICE-REMOTE FORGE MERGE-PULL\"",
        ".SH \"SLUICE-REMOTE COMPLETIONS\"",
    ] {
        assert!(page.contains(section), "{section} missing");
    }
    // Each option where it belongs: --delete under push, the global ones
    // once, in the page's own options.
    let push = page
        .split(".SH \"SLUICE-REMOTE PUSH\"")
        .nth(1)
        .and_then(|rest| rest.split(".SH ").next())
        .expect("the push section");
    assert!(push.contains("delete"), "{push}");
    assert!(!push.contains("\\-\\-settle"), "{push}");
    assert!(page.contains("\\-\\-settle"), "the global options");
    // man itself reads it, when it is installed.
    if let Ok(out) = Command::new("man")
        .args(["-l", "-"])
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(page.as_bytes())?;
            child.wait_with_output()
        })
    {
        if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("SLUICE-REMOTE PUSH"), "{text}");
        }
    }
}

#[test]
fn each_commands_help_shows_its_own_options_before_the_global_ones() {
    for (cmd, own) in [
        (&["ls-refs"][..], "--exit-code"),
        (&["fetch"], "--prune"),
        (&["push"], "--delete"),
        (&["ledger", "list"], "--since"),
    ] {
        let run = sluice(&[cmd, &["--help"]].concat());
        assert_eq!(run.code, 0, "{run:?}");
        let own_at = run.stdout.find(own).expect("its own option");
        let global_at = run
            .stdout
            .find("Global options")
            .expect("a heading for the global ones");
        let deadline_at = run.stdout.find("--deadline").expect("--deadline");
        assert!(
            own_at < global_at && global_at < deadline_at,
            "{cmd:?}:\n{}",
            run.stdout
        );
    }
}
