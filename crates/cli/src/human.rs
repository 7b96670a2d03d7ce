//! The short human summaries printed without `--json`.
//!
//! The value goes to stdout in the form git prints it (`git ls-remote`'s
//! `<oid>\t<name>` lines, `git push`'s per-ref lines); the evidence — how
//! the operation ended, and the attempt history when there was more than
//! one attempt or it did not succeed — goes to stderr ([`summary`]).

use std::fmt::Write as _;

use sluice_git::{FetchedRef, PushReport, PushSpec, RefStatus, RemoteRef};
use sluice_policy::{Outcome, OutcomeKind, PreviousResult};

use crate::target::ref_matches;
use crate::terminal::visible;

/// ls-refs as `git ls-remote` prints it: `<oid>\t<name>`, and
/// `<peeled>\t<name>^{}` for annotated tags, each line only when its
/// name matches `patterns` ([`crate::target::ref_matches`]: git matches
/// `v1^{}` apart from `v1`). Unborn refs have no line.
pub fn ls_refs(refs: &[RemoteRef], patterns: &[String]) -> String {
    let mut s = String::new();
    for r in refs {
        if let Some(oid) = r.oid.filter(|_| ref_matches(&r.name, patterns)) {
            let _ = writeln!(s, "{oid}\t{}", r.name);
        }
        let peeled_name = format!("{}^{{}}", r.name);
        if let Some(p) = r.peeled.filter(|_| ref_matches(&peeled_name, patterns)) {
            let _ = writeln!(s, "{p}\t{peeled_name}");
        }
    }
    s
}

/// fetch as `git fetch` prints it: `From <remote>`, then one line per ref
/// — ` * [new branch]`, ` * [new tag]`, `   old..new`, ` + old...new …
/// (forced update)`, ` t [tag update]`, ` ! [rejected] … (reason)`, ` - [deleted] (none) -> …`
/// (pruned) — with object ids
/// abbreviated by `abbrev`. Refs left as they were are printed only when
/// `verbose` (` = [up to date]`), as with `git fetch -v`; when `quiet`
/// (`-q`), only the refused refs are.
pub fn fetch(
    remote: &str,
    refs: &[FetchedRef],
    verbose: bool,
    quiet: bool,
    abbrev: &dyn Fn(&gix::ObjectId) -> String,
) -> String {
    use sluice_git::FetchStatus;
    let short = |name: &str| {
        ["refs/heads/", "refs/tags/", "refs/remotes/", "refs/"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(name)
            .to_string()
    };
    let mut s = String::new();
    for r in refs {
        if quiet && r.status != FetchStatus::Rejected {
            continue;
        }
        let what = match &r.local_ref {
            Some(l) => format!("{:<10} -> {}", short(&r.remote_ref), short(l)),
            None => format!("{:<10} -> FETCH_HEAD", short(&r.remote_ref)),
        };
        let tag = r.remote_ref.starts_with("refs/tags/");
        let line = match (r.status, r.old) {
            (FetchStatus::New, _) => {
                let kind = if tag { "[new tag]" } else { "[new branch]" };
                format!(" * {kind:<17} {what}")
            }
            (FetchStatus::FastForward, Some(old)) => {
                format!(
                    "   {:<17} {what}",
                    format!("{}..{}", abbrev(&old), abbrev(&r.oid))
                )
            }
            (FetchStatus::Forced, Some(old)) => format!(
                " + {:<17} {what}  (forced update)",
                format!("{}...{}", abbrev(&old), abbrev(&r.oid))
            ),
            (FetchStatus::TagUpdate, _) => format!(" t {:<17} {what}", "[tag update]"),
            (FetchStatus::Rejected, _) => format!(
                " ! {:<17} {what}  ({})",
                "[rejected]",
                r.reason.as_deref().unwrap_or("rejected")
            ),
            (FetchStatus::Pruned, _) => format!(
                " - {:<17} {:<10} -> {}",
                "[deleted]",
                "(none)",
                short(r.local_ref.as_deref().unwrap_or(&r.remote_ref))
            ),
            // Only into FETCH_HEAD: git's ` * branch  main -> FETCH_HEAD`.
            (FetchStatus::UpToDate, _) if r.local_ref.is_none() => {
                let kind = if tag { "tag" } else { "branch" };
                format!(" * {kind:<17} {what}")
            }
            (FetchStatus::UpToDate, _) if verbose => format!(" = {:<17} {what}", "[up to date]"),
            (FetchStatus::UpToDate, _) => continue,
            (_, None) => format!(" * {:<17} {what}", abbrev(&r.oid)),
        };
        s.push_str(&line);
        s.push('\n');
    }
    if s.is_empty() {
        return s;
    }
    format!("From {remote}\n{s}")
}

/// What one ref's push line says, as git decides it.
pub struct PushLine {
    /// git's flag: ` ` fast-forward, `+` forced, `-` deleted, `*` new, `=`
    /// up to date, `!` rejected; `?` (ours) for a ref whose fate is unknown.
    pub flag: char,
    /// `[new branch]`, `old..new`, `old...new`, `[deleted]`, `[up to date]`,
    /// `[rejected]`, `[remote rejected]`, `[unknown]`.
    pub summary: String,
    /// ` (forced update)`, ` (non-fast-forward)`, ...; empty when none.
    pub reason: String,
    /// The source's full name (`refs/heads/main`, `HEAD`, or the spec's
    /// text when it names no ref); empty for a delete.
    pub from: String,
    /// The destination ref.
    pub to: String,
}

/// Every ref's line of a push, decided as git decides them. `abbrev`
/// shortens an object id as git does; `fast_forward(old, new)` says whether
/// `new` descends from `old` (a forced update otherwise); `full_src` gives a
/// source's full ref name when it names a ref.
pub fn push_lines(
    specs: &[PushSpec],
    report: &PushReport,
    abbrev: &dyn Fn(&gix::ObjectId) -> String,
    fast_forward: &dyn Fn(gix::ObjectId, gix::ObjectId) -> bool,
    full_src: &dyn Fn(&str) -> String,
) -> Vec<PushLine> {
    // git's order: up to date, then done, then the rest (rejected,
    // unknown); within each, the refs the remote had (in its sorted
    // advertisement's order), then the new ones in the order given.
    let mut refs: Vec<(usize, &sluice_git::RefResult)> = report.refs.iter().enumerate().collect();
    refs.sort_by_key(|(i, r)| {
        let group = match r.status {
            RefStatus::Ok if r.is_up_to_date() => 0,
            RefStatus::Ok => 1,
            _ => 2,
        };
        match r.old {
            Some(_) => (group, 0, r.name.clone(), 0),
            None => (group, 1, String::new(), *i),
        }
    });
    refs.into_iter()
        .map(|(i, r)| {
            // The report keeps the specs' order (a short destination was
            // expanded, so names may differ).
            let spec = specs
                .get(i)
                .or_else(|| specs.iter().find(|p| p.dst == r.name));
            let from = spec
                .and_then(|p| p.src.as_deref())
                .map(full_src)
                .unwrap_or_default();
            let tag = r.name.starts_with("refs/tags/");
            let (flag, summary, reason) = match r.status {
                RefStatus::Rejected => {
                    let (label, words) = match (r.message.as_deref(), r.reason) {
                        (Some(m), _) => ("[remote rejected]", visible(m)),
                        (None, Some(why)) => ("[rejected]", why.git_words().to_string()),
                        (None, None) => ("[rejected]", "rejected".to_string()),
                    };
                    ('!', label.to_string(), format!(" ({words})"))
                }
                RefStatus::Unknown => (
                    '?',
                    "[unknown]".to_string(),
                    format!(
                        " (answer not read; settled by reading: {})",
                        r.verdict.map_or("no read answered", |v| v.as_str())
                    ),
                ),
                RefStatus::Ok => match (r.old, r.new) {
                    // A deletion, of a ref the remote had or not: git's
                    // line either way.
                    (_, None) => ('-', "[deleted]".to_string(), String::new()),
                    _ if r.is_up_to_date() => ('=', "[up to date]".to_string(), String::new()),
                    (None, Some(_)) => (
                        '*',
                        if tag { "[new tag]" } else { "[new branch]" }.to_string(),
                        String::new(),
                    ),
                    (Some(old), Some(new)) if fast_forward(old, new) => (
                        ' ',
                        format!("{}..{}", abbrev(&old), abbrev(&new)),
                        String::new(),
                    ),
                    (Some(old), Some(new)) => (
                        '+',
                        format!("{}...{}", abbrev(&old), abbrev(&new)),
                        " (forced update)".to_string(),
                    ),
                },
            };
            PushLine {
                flag,
                summary,
                reason,
                from,
                to: r.name.clone(),
            }
        })
        .collect()
}

/// `refs/heads/x` → `x`, as git shortens names in its push lines.
fn short_ref(name: &str) -> &str {
    ["refs/heads/", "refs/tags/", "refs/remotes/"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name)
}

/// push as `git push` prints it: `To <remote>` and one line per ref
/// (` * [new branch]      main -> main`, `   a1b2c3d..e4f5a6b  main -> main`,
/// ` + …...… main -> main (forced update)`, ` - [deleted]         x`,
/// ` ! [rejected]        main -> main (non-fast-forward)`,
/// ` ! [remote rejected] main -> main (pre-receive hook declined)`);
/// up-to-date refs only when `verbose`, and `Everything up-to-date` when
/// every ref was (alone, without `verbose`); when `quiet` (`-q`), only the
/// refused refs and those whose fate is unknown (nothing at all, not even
/// `To`, when there are none).
pub fn push(remote: &str, lines: &[PushLine], verbose: bool, quiet: bool) -> String {
    let everything = !lines.is_empty() && lines.iter().all(|l| l.flag == '=');
    if everything && !quiet {
        let shown = if verbose {
            push_listing(remote, lines, true, false)
        } else {
            String::new()
        };
        return shown + "Everything up-to-date\n";
    }
    push_listing(remote, lines, verbose, quiet)
}

/// `To <remote>` and the lines [`push`] shows.
fn push_listing(remote: &str, lines: &[PushLine], verbose: bool, quiet: bool) -> String {
    let shown: Vec<&PushLine> = lines
        .iter()
        .filter(|l| match l.flag {
            '!' | '?' => true,
            _ if quiet => false,
            '=' => verbose,
            _ => true,
        })
        .collect();
    if quiet && shown.is_empty() {
        return String::new();
    }
    let mut s = format!("To {remote}\n");
    for l in shown {
        let what = if l.from.is_empty() {
            short_ref(&l.to).to_string()
        } else {
            format!("{} -> {}", short_ref(&l.from), short_ref(&l.to))
        };
        let _ = writeln!(s, " {} {:<17} {what}{}", l.flag, l.summary, l.reason);
    }
    s
}

/// push in git's `--porcelain` format: `To <remote>`, one
/// `<flag>\t<from>:<to>\t<summary>` line per ref, and `Done` when every ref
/// went through.
pub fn push_porcelain(remote: &str, lines: &[PushLine], done: bool) -> String {
    let mut s = format!("To {remote}\n");
    for l in lines {
        let _ = writeln!(
            s,
            "{}\t{}:{}\t{}{}",
            l.flag, l.from, l.to, l.summary, l.reason
        );
    }
    if done {
        s.push_str("Done\n");
    }
    s
}

/// How the operation ended, for stderr: one line, then (when there was
/// more than one attempt, it did not succeed, or an attempt was held
/// longer than [`SHOWN_WAIT_MS`]) the attempt history, the
/// settling read and the earlier run of a rejected id.
pub fn summary<T>(outcome: &Outcome<T>) -> String {
    let mut s = (outcome.operation.redirected.as_ref())
        .map_or(String::new(), |r| format!("warning: redirecting to {r}\n"))
        + &remote_lines(&outcome.remote_messages);
    let dropped = outcome.remote_messages_dropped;
    if dropped.lines > 0 || dropped.bytes > 0 {
        let _ = writeln!(
            s,
            "(the remote's text was cut: {} more lines, {} bytes not kept)",
            dropped.lines, dropped.bytes
        );
    }
    let n = outcome.attempts.len();
    let op = &outcome.operation;
    let attempts = if n == 1 {
        "1 attempt".to_string()
    } else {
        format!("{n} attempts")
    };
    let _ = write!(
        s,
        "{}: {} {} — {attempts} in {} ms (deadline {} ms; operation {})",
        outcome.kind.as_str(),
        op.kind,
        op.remote,
        outcome.elapsed_ms,
        outcome.deadline_ms,
        op.id,
    );
    if let Some(stopped) = outcome.stopped {
        let _ = write!(s, "; stopped: {}", stopped.as_str());
    }
    s.push('\n');
    match outcome.kind {
        OutcomeKind::Succeeded => {}
        OutcomeKind::Answered => {
            if let Some(e) = &outcome.error {
                let _ = writeln!(s, "  answer: {}", visible(&e.cause));
            }
        }
        OutcomeKind::LocalError => {
            if let Some(e) = &outcome.error {
                let _ = writeln!(
                    s,
                    "  stopped on this side (not the remote's answer): {}",
                    visible(&e.cause)
                );
            }
            if outcome.may_have_applied == Some(true) {
                let _ = writeln!(s, "  the write MAY HAVE APPLIED");
            }
        }
        OutcomeKind::Unknown => {
            let _ = writeln!(
                s,
                "  no answer within the bounds (not a claim that anything failed){}",
                match outcome.may_have_applied {
                    Some(true) => "; the write MAY HAVE APPLIED",
                    Some(false) => "; the write did not apply",
                    None => "",
                }
            );
            if let Some(e) = &outcome.error {
                let _ = writeln!(
                    s,
                    "  last: {} at {}: {}",
                    e.class.as_str(),
                    e.phase,
                    visible(&e.cause)
                );
            }
        }
        OutcomeKind::Rejected => {
            // A rejection ran nothing, so it carries no attempt's error:
            // the line comes from the id itself.
            let _ = writeln!(
                s,
                "  operation id {:?} was claimed before",
                visible(&outcome.operation.id)
            );
            match &outcome.previous {
                Some(p) if p.result == PreviousResult::Running => {
                    let _ = writeln!(
                        s,
                        "  the earlier run has not ended (its deadline has not passed: it may still be running){}",
                        if p.may_have_applied == Some(true) {
                            "; the write MAY HAVE APPLIED"
                        } else {
                            ""
                        }
                    );
                }
                Some(p) if p.result == PreviousResult::Abandoned => {
                    let _ = writeln!(
                        s,
                        "  the earlier run was abandoned (its deadline passed without a finish: its process died){}{}",
                        origin(p.phase.as_deref(), p.host.as_deref(), p.pid),
                        if p.may_have_applied == Some(true) {
                            "; the write MAY HAVE APPLIED"
                        } else {
                            ""
                        }
                    );
                }
                Some(p) => {
                    let _ = writeln!(
                        s,
                        "  the earlier run: {}{} in {} ms, {} attempt(s)",
                        p.kind
                            .as_deref()
                            .map(|k| format!("{} ", visible(k)))
                            .unwrap_or_default(),
                        p.result.as_str(),
                        p.elapsed_ms,
                        p.attempts.len()
                    );
                }
                None => {
                    let _ = writeln!(s, "  the earlier run has not ended (or left no record)");
                }
            }
        }
    }
    if let Some(r) = &outcome.reconciled {
        let observed: Vec<String> = r
            .observed
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        let _ = writeln!(
            s,
            "  settled by reading: {} ({})",
            r.verdict.map_or("no read answered", |v| v.as_str()),
            observed.join(", ")
        );
    }
    if !outcome.refused_credentials.is_empty() {
        let _ = writeln!(
            s,
            "  refused credentials (fingerprints): {}",
            outcome.refused_credentials.join(", ")
        );
    }
    if n > 1 || outcome.attempts.iter().any(|a| a.class.is_some()) || held_long(outcome) {
        s.push_str(&history(outcome));
    }
    s
}

/// The server's words as git prints them: `remote: <line>`, made safe
/// for a terminal ([`crate::terminal::remote_lines`]).
pub fn remote_lines(messages: &[String]) -> String {
    messages
        .iter()
        .map(|m| crate::terminal::remote_lines(m))
        .collect()
}

/// The attempt history as a small table, each column as wide as its
/// widest cell (`local-error`, `response-headers`), the cause last. A
/// `held` column shows a wait on this side longer than [`SHOWN_WAIT_MS`]
/// (the forge's write gate), and a `request id` column the server's
/// request id (what the forge's support asks for), each only when an
/// attempt has one.
pub fn history<T>(outcome: &Outcome<T>) -> String {
    let held = held_long(outcome);
    let ids = outcome.attempts.iter().any(|a| a.request_id.is_some());
    let mut head = vec!["attempt", "phase", "class", "took"];
    if held {
        head.push("held");
    }
    head.extend(["left", "then"]);
    if ids {
        head.push("request id");
    }
    head.push("cause");
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for a in &outcome.attempts {
        let mut row = vec![
            format!("#{}", a.n),
            a.phase.to_string(),
            a.class.map_or("-", |c| c.as_str()).to_string(),
            format!("{}ms", a.elapsed_ms),
        ];
        if held {
            row.push(match a.waited_ms {
                Some(w) if w > SHOWN_WAIT_MS => format!("{w}ms"),
                _ => "-".to_string(),
            });
        }
        row.push(format!("{}ms", a.remaining_ms));
        row.push(
            a.delay_ms
                .map_or_else(|| "-".to_string(), |d| format!("+{d}ms")),
        );
        if ids {
            row.push(
                a.request_id
                    .as_deref()
                    .map_or_else(|| "-".to_string(), visible),
            );
        }
        row.push(a.cause.as_deref().map_or_else(|| "-".to_string(), visible));
        rows.push(row);
    }
    let columns = rows[0].len();
    let mut width = vec![0usize; columns - 1];
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut s = String::new();
    for row in &rows {
        s.push_str("  ");
        for (cell, w) in row.iter().zip(&width) {
            let _ = write!(s, "{cell:<w$}  ", w = *w);
        }
        s.push_str(&row[columns - 1]);
        s.push('\n');
    }
    s
}

/// The shortest wait on this side the attempt table shows (ms): shorter
/// ones are the ordinary cost of a request.
pub const SHOWN_WAIT_MS: u64 = 100;

/// Whether an attempt was held on this side (the forge's write gate)
/// longer than [`SHOWN_WAIT_MS`]: the summary then shows the attempt
/// table, even for one attempt that succeeded.
pub fn held_long<T>(outcome: &Outcome<T>) -> bool {
    outcome
        .attempts
        .iter()
        .any(|a| a.waited_ms.is_some_and(|w| w > SHOWN_WAIT_MS))
}

/// `forge get-pull`: one line, `#N state head sha -> base: title`.
pub fn forge_pull(pull: &serde_json::Value) -> String {
    let state = if pull["merged"] == true {
        "merged"
    } else {
        pull["state"].as_str().unwrap_or("?")
    };
    format!(
        "#{} {state} {} {} -> {}: {}\n",
        pull["number"],
        pull["head"]["ref"].as_str().unwrap_or("?"),
        pull["head"]["sha"].as_str().unwrap_or("?"),
        pull["base"]["ref"].as_str().unwrap_or("?"),
        pull["title"].as_str().unwrap_or(""),
    )
}

/// `forge merge-pull`: `merged #N as <sha>`.
pub fn forge_merge(number: u64, m: &sluice_forge::MergeResult) -> String {
    match (&m.sha, m.merged) {
        (Some(sha), true) => format!("merged #{number} as {sha}\n"),
        _ => format!("#{number} not merged\n"),
    }
}

/// `forge update-ref`: `refs/heads/main -> <sha>`.
pub fn forge_ref(r: &sluice_forge::GitRef) -> String {
    format!("{} -> {}\n", r.name, r.object.sha)
}

/// `forge comment`: `comment ID on #N URL`.
pub fn forge_comment(number: u64, c: &sluice_forge::IssueComment) -> String {
    format!(
        "comment {} on #{number}{}\n",
        c.id,
        c.html_url
            .as_deref()
            .map(|u| format!(" {u}"))
            .unwrap_or_default()
    )
}

/// `forge create-check-run` and `update-check-run`: `check run ID name:
/// status [conclusion]` (`-` for an id the forge did not give).
pub fn forge_check_run(r: &sluice_forge::CheckRun) -> String {
    format!(
        "check run {} {}: {}{}\n",
        run_id(r),
        r.name,
        r.status,
        r.conclusion
            .as_deref()
            .map(|c| format!(" {c}"))
            .unwrap_or_default()
    )
}

/// A check run's id, or `-` when the forge gave none.
fn run_id(r: &sluice_forge::CheckRun) -> String {
    r.id.map(|i| i.to_string()).unwrap_or_else(|| "-".into())
}

/// `forge ci-status`: the verdict and the required names missing, then one
/// line per status and per check run (with its id).
pub fn forge_ci(ci: &sluice_forge::CiStatus) -> String {
    let missing = if ci.missing.is_empty() {
        String::new()
    } else {
        format!(", missing: {}", ci.missing.join(", "))
    };
    let mut s = format!(
        "{}{missing} ({} statuses, {} check runs)\n",
        ci.state.as_str(),
        ci.combined.statuses.len(),
        ci.check_runs.len()
    );
    for st in &ci.combined.statuses {
        let _ = writeln!(s, "  status {}: {}", st.context, st.state);
    }
    for r in &ci.check_runs {
        let _ = write!(s, "  {}", forge_check_run(r));
    }
    s
}

/// What a claim recorded of a run that did not finish, in words: `,
/// reached pack-sent, on build-7 pid 4242` (what is known of it).
pub fn origin(phase: Option<&str>, host: Option<&str>, pid: Option<u32>) -> String {
    let mut s = String::new();
    if let Some(phase) = phase {
        s.push_str(&format!(", reached {}", visible(phase)));
    }
    match (host, pid) {
        (Some(h), Some(p)) => s.push_str(&format!(", on {} pid {p}", visible(h))),
        (Some(h), None) => s.push_str(&format!(", on {}", visible(h))),
        (None, Some(p)) => s.push_str(&format!(", pid {p}")),
        (None, None) => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_longer_than_100_ms_shows_in_the_table_of_one_attempt_that_succeeded() {
        use sluice_policy::{AttemptRecord, Effect, OperationInfo};
        let record = |waited_ms| AttemptRecord {
            n: 1,
            phase: "body".into(),
            class: None,
            cause: None,
            remaining_ms: 20_000,
            timeout_ms: 8_000,
            delay_ms: None,
            elapsed_ms: 4_800,
            request_id: Some("GH:AB12".into()),
            waited_ms,
        };
        let mut out: Outcome<()> = Outcome::local_error(
            OperationInfo {
                id: "op-1".into(),
                kind: "comment".into(),
                effect: Effect::Write,
                remote: "https://api.github.com/repos/o/r/issues/1/comments".into(),
                redirected: None,
            },
            std::io::Error::other("unused"),
            std::time::Duration::from_secs(20),
        );
        out.kind = OutcomeKind::Succeeded;
        out.error = None;
        out.stopped = None;
        out.attempts = vec![record(Some(4_700))];
        let text = summary(&out);
        assert!(text.contains("held"), "{text}");
        assert!(text.contains("4700ms"), "{text}");
        assert!(text.contains("GH:AB12"), "{text}");
        // A wait of 100 ms or less is the ordinary cost of a request.
        out.attempts = vec![record(Some(100))];
        assert!(!summary(&out).contains("held"), "{}", summary(&out));
    }

    #[test]
    fn refs_print_like_git_ls_remote() {
        let oid =
            gix::ObjectId::from_hex(b"0123456789abcdef0123456789abcdef01234567").expect("hex");
        let peeled =
            gix::ObjectId::from_hex(b"89abcdef0123456789abcdef0123456789abcdef").expect("hex");
        let out = ls_refs(
            &[
                RemoteRef {
                    name: "refs/tags/v1".into(),
                    oid: Some(oid),
                    peeled: Some(peeled),
                    symref_target: None,
                },
                RemoteRef {
                    name: "HEAD".into(),
                    oid: None,
                    peeled: None,
                    symref_target: Some("refs/heads/main".into()),
                },
            ],
            &[],
        );
        assert_eq!(
            out,
            "0123456789abcdef0123456789abcdef01234567\trefs/tags/v1\n\
             89abcdef0123456789abcdef0123456789abcdef\trefs/tags/v1^{}\n"
        );
    }
}
