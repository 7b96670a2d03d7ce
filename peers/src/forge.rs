//! The forge scenarios: a write to the test kit's fake GitHub is applied,
//! then its answer is lost (a 502, a cut connection, a stall). Peers:
//! octocrab as built by default (`RetryConfig::Simple(3)`), octocrab with
//! `RetryConfig::None`, and sluice's forge client. `git` and `git2` do not
//! speak the REST API: n/a.

use std::sync::Arc;
use std::time::{Duration, Instant};

use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde_json::{json, Value};
use sluice_forge::{CallOptions, ForgeClient, MergeMethod, RepoRef};
use sluice_policy::{Bounds, Outcome, OutcomeKind, Policy};
use sluice_testkit::fake_forge::{Behaviour, Endpoint, Event, FakeForge};

use crate::{capped, one_line, Report, Row, Said, CAP};

const OWNER: &str = "octo";
const NAME: &str = "repo";
const REPO: &str = "octo/repo";
/// The pull request's head.
const HEAD: &str = "1111111111111111111111111111111111111111";
/// `heads/main` before the ref update.
const BASE: &str = "2222222222222222222222222222222222222222";
/// What the ref update moves `heads/main` to (a child of `BASE`).
const NEW: &str = "3333333333333333333333333333333333333333";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Merge,
    Comment,
    UpdateRef,
}

impl Op {
    fn endpoint(self) -> Endpoint {
        match self {
            Op::Merge => Endpoint::MergePull,
            Op::Comment => Endpoint::CreateIssueComment,
            Op::UpdateRef => Endpoint::UpdateRef,
        }
    }

    fn request(self) -> &'static str {
        match self {
            Op::Merge => "PUT merge",
            Op::Comment => "POST comment",
            Op::UpdateRef => "PATCH ref",
        }
    }
}

struct Case {
    name: &'static str,
    op: Op,
    fault: Behaviour,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "merge: applied, then 502",
            op: Op::Merge,
            fault: Behaviour::ApplyThenStatus(502),
        },
        Case {
            name: "merge: applied, then cut",
            op: Op::Merge,
            fault: Behaviour::ApplyThenCut,
        },
        Case {
            name: "merge: applied, then stalled",
            op: Op::Merge,
            // Longer than any cap: the server says nothing until dropped.
            fault: Behaviour::ApplyThenStall(Duration::from_secs(3600)),
        },
        Case {
            name: "comment: applied, then cut",
            op: Op::Comment,
            fault: Behaviour::ApplyThenCut,
        },
        Case {
            name: "ref update: applied, then 502",
            op: Op::UpdateRef,
            fault: Behaviour::ApplyThenStatus(502),
        },
    ]
}

#[derive(Clone, Copy)]
enum Peer {
    OctocrabDefault,
    OctocrabNoRetry,
    Sluice,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::OctocrabDefault => "octocrab (default)",
            Peer::OctocrabNoRetry => "octocrab (`RetryConfig::None`)",
            Peer::Sluice => "sluice",
        }
    }
}

/// A fresh fake GitHub: pull request 1 open at `HEAD`, `heads/main` at
/// `BASE` with `NEW` a child of it, and the case's fault queued once.
fn setup(case: &Case) -> (FakeForge, u64) {
    let forge = FakeForge::start().expect("the fake forge starts");
    let n = forge.add_pull(REPO, "feature", "main", HEAD);
    forge.set_ref(REPO, "heads/main", BASE);
    forge.add_commit(BASE, &[]);
    forge.add_commit(NEW, &[BASE]);
    forge.push(case.op.endpoint(), case.fault.clone());
    (forge, n)
}

/// Every forge scenario for every forge peer, plus one n/a row each.
pub fn run_all(keep: &dyn Fn(&str) -> bool) -> Vec<Row> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut rows = Vec::new();
    for case in cases().iter().filter(|c| keep(c.name)) {
        for peer in [Peer::OctocrabDefault, Peer::OctocrabNoRetry, Peer::Sluice] {
            eprintln!("forge: {} / {}", case.name, peer.name());
            let (forge, n) = setup(case);
            let report = match peer {
                Peer::OctocrabDefault => octocrab_run(&rt, &forge.url(), case.op, n, None),
                Peer::OctocrabNoRetry => {
                    octocrab_run(&rt, &forge.url(), case.op, n, Some(RetryConfig::None))
                }
                Peer::Sluice => {
                    let url = forge.url();
                    let op = case.op;
                    capped(CAP, move || sluice_run(&url, op, n))
                }
            };
            rows.push(row(case, peer, &forge, n, report));
        }
        rows.push(Row {
            scenario: case.name.to_string(),
            peer: "`git`, `git2`",
            sent: "n/a".into(),
            applied: "n/a".into(),
            report: Report {
                said: Said::NotApplicable,
                words: "no REST API".into(),
                took: Duration::ZERO,
            },
            matches: "n/a".into(),
        });
    }
    rows
}

/// What the server holds, and whether the peer's report matches it.
fn row(case: &Case, peer: Peer, forge: &FakeForge, n: u64, report: Report) -> Row {
    let writes = forge.arrivals(case.op.endpoint()).len();
    let all = forge.all_arrivals().len();
    let sent = format!("{writes} {} ({all} in all)", case.op.request());
    let (applied, intended, landed, how_many) = match case.op {
        Op::Merge => {
            let merged = forge
                .pull(REPO, n)
                .is_some_and(|p| p["merged"] == Value::Bool(true));
            let times = forge.applied_count(&format!("pull:{REPO}#{n}"));
            let text = format!(
                "{times} merge{}; PR {}",
                plural(times),
                if merged { "merged" } else { "open" }
            );
            (text, merged, merged, times)
        }
        Op::Comment => {
            let count = forge.comments(REPO).len();
            let text = format!("{count} comment{}", plural(count));
            (text, count == 1, count >= 1, count)
        }
        Op::UpdateRef => {
            let at = forge.git_ref(REPO, "heads/main").unwrap_or_default();
            let times = forge.applied_count(&format!("ref:{REPO}:heads/main"));
            let text = format!(
                "{times} update{}; ref at {}",
                plural(times),
                if at == NEW {
                    "the new sha"
                } else if at == BASE {
                    "the old sha"
                } else {
                    "another sha"
                }
            );
            (text, at == NEW, at == NEW, times)
        }
    };
    let matches = judge(&report.said, intended, landed, how_many, case.op);
    Row {
        scenario: if fault_fired(case, forge) {
            case.name.to_string()
        } else {
            format!("{} — **the fault did not fire**", case.name)
        },
        peer: peer.name(),
        sent,
        applied,
        report,
        matches,
    }
}

/// Whether the first request at the case's endpoint met its fault (the
/// fake forge's log of how it ended).
fn fault_fired(case: &Case, forge: &FakeForge) -> bool {
    let first = forge
        .completions(case.op.endpoint())
        .into_iter()
        .next()
        .map(|e| e.event);
    match (&case.fault, first) {
        (Behaviour::ApplyThenStatus(s), Some(Event::Answered(a) | Event::ClientGone(a))) => a == *s,
        (Behaviour::ApplyThenCut, Some(Event::Cut)) => true,
        // A stall ends when the client gives up or the server stops.
        (Behaviour::ApplyThenStall(_), None | Some(Event::Cut | Event::Stopped)) => true,
        _ => false,
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Whether what the peer said matches what the server holds.
fn judge(said: &Said, intended: bool, landed: bool, how_many: usize, op: Op) -> String {
    match said {
        Said::Success if intended => "yes".into(),
        Said::Success if op == Op::Comment && how_many > 1 => {
            format!("**no**: success for one comment, {how_many} posted")
        }
        Said::Success => "**no**: success, nothing applied".into(),
        Said::Error if landed => "**no**: an error for a write that landed".into(),
        Said::Error => "yes".into(),
        Said::Unknown => format!(
            "no verdict (says it may have applied); it {}",
            if landed { "landed" } else { "did not land" }
        ),
        Said::Nothing => format!(
            "**no report**; it {}",
            if landed { "landed" } else { "did not land" }
        ),
        Said::NotApplicable => "n/a".into(),
    }
}

/// One octocrab call under the cap: `retry` `None` is the default build.
fn octocrab_run(
    rt: &tokio::runtime::Runtime,
    base: &str,
    op: Op,
    n: u64,
    retry: Option<RetryConfig>,
) -> Report {
    let start = Instant::now();
    let base = base.to_string();
    let result = rt.block_on(async move {
        let mut b = Octocrab::builder()
            .base_uri(base.as_str())
            .expect("a base URI")
            .personal_token("peers-token".to_string());
        if let Some(r) = retry {
            b = b.add_retry_config(r);
        }
        let oc = b.build().expect("an octocrab client");
        tokio::time::timeout(CAP, octocrab_call(oc, op, n)).await
    });
    let took = start.elapsed();
    match result {
        Err(_) => Report {
            said: Said::Nothing,
            words: format!("no return within the {} s cap", CAP.as_secs()),
            took,
        },
        Ok(Ok(words)) => Report {
            said: Said::Success,
            words,
            took,
        },
        Ok(Err(e)) => Report {
            said: Said::Error,
            words: octocrab_words(&e),
            took,
        },
    }
}

async fn octocrab_call(oc: Octocrab, op: Op, n: u64) -> octocrab::Result<String> {
    match op {
        Op::Merge => {
            let m = oc
                .pulls(OWNER, NAME)
                .merge(n)
                .sha(HEAD)
                .method(octocrab::params::pulls::MergeMethod::Merge)
                .send()
                .await?;
            Ok(format!(
                "merged: {}; {}",
                m.merged,
                m.message.unwrap_or_default()
            ))
        }
        Op::Comment => {
            let v: Value = oc
                .post(
                    format!("/repos/{REPO}/issues/{n}/comments"),
                    Some(&json!({ "body": "landed by the peer" })),
                )
                .await?;
            Ok(format!("comment {} created", v["id"]))
        }
        Op::UpdateRef => {
            let v: Value = oc
                .patch(
                    format!("/repos/{REPO}/git/refs/heads/main"),
                    Some(&json!({ "sha": NEW, "force": false })),
                )
                .await?;
            Ok(format!("ref at {}", short(v["object"]["sha"].as_str())))
        }
    }
}

fn short(sha: Option<&str>) -> String {
    sha.map(|s| s.chars().take(7).collect())
        .unwrap_or_else(|| "?".into())
}

/// An octocrab error in its words: GitHub's status and message, or the
/// chain of sources (each once).
fn octocrab_words(e: &octocrab::Error) -> String {
    if let octocrab::Error::GitHub { source, .. } = e {
        return format!(
            "GitHub error {}: {}",
            source.status_code.as_u16(),
            source.message
        );
    }
    error_chain(e)
}

/// `e` and its sources, a source left out when its words are already there.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut words = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !words.contains(&s) {
            words.push_str(": ");
            words.push_str(&s);
        }
        cur = c.source();
    }
    // snafu's variants without words of their own print a backtrace note.
    one_line(words.split("\n\nFound at").next().unwrap_or(""), 400)
}

/// sluice's forge client with the exercise's bounds (three attempts of
/// 5 s inside 20 s, the settle pause 1 s).
fn sluice_run(base: &str, op: Op, n: u64) -> Report {
    let policy = Arc::new(Policy::builder().settle(Duration::from_secs(1)).build());
    let client = ForgeClient::builder(base)
        .policy(policy)
        .bounds(Bounds::new(
            Duration::from_secs(20),
            Duration::from_secs(5),
            3,
        ))
        .write_spacing(Duration::ZERO)
        .build()
        .expect("a forge client");
    let repo = RepoRef::new(OWNER, NAME);
    let opts = CallOptions::new();
    match op {
        Op::Merge => sluice_report(
            client
                .merge_pull(&repo, n, HEAD, MergeMethod::Merge, &opts)
                .expect("valid input"),
        ),
        Op::Comment => sluice_report(
            client
                .create_issue_comment(&repo, n, "landed by the peer", &opts)
                .expect("valid input"),
        ),
        Op::UpdateRef => sluice_report(
            client
                .update_ref(&repo, "heads/main", NEW, false, &opts)
                .expect("valid input"),
        ),
    }
}

/// A sluice outcome in the table's terms: its kind, attempts, the
/// settling read's verdict and the last attempt's error.
pub fn sluice_report<T>(out: Outcome<T>) -> Report {
    let said = match out.kind {
        OutcomeKind::Succeeded => Said::Success,
        OutcomeKind::Unknown => Said::Unknown,
        OutcomeKind::Answered | OutcomeKind::Rejected | OutcomeKind::LocalError => Said::Error,
    };
    let mut words = format!(
        "{}; {} attempt{}",
        out.kind.as_str(),
        out.attempts.len(),
        plural(out.attempts.len())
    );
    if let Some(r) = &out.reconciled {
        words.push_str(&format!(
            "; settling read: {}",
            r.verdict.map(|v| v.as_str()).unwrap_or("none answered")
        ));
    }
    if let Some(e) = &out.error {
        words.push_str(&format!("; error: {e}"));
    } else if let Some(last) = out.attempts.iter().rev().find(|a| a.cause.is_some()) {
        words.push_str(&format!(
            "; attempt {}: {} at {}: {}",
            last.n,
            last.class.map(|c| c.as_str()).unwrap_or("?"),
            last.phase,
            last.cause.as_deref().unwrap_or("")
        ));
    }
    Report {
        said,
        words,
        took: Duration::ZERO,
    }
}
