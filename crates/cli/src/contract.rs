//! The JSON document of the design's CLI contract.
//!
//! The evidence keys (`result`, `operation`, `deadline_ms`, `elapsed_ms`,
//! `may_have_applied`, `stopped`, `attempts`, `reconciled`,
//! `refused_credentials`, `previous`) come from the policy's `Outcome`
//! serialisation; this module shapes `value` per command:
//!
//! | command | `value` |
//! |---|---|
//! | ls-refs | `[ { name, oid (null when unborn), peeled, symref_target } ]` |
//! | fetch | `[ { remote_ref, local_ref, oid, old, status, reason } ]` |
//! | push | `[ { ref, status: ok\|rejected\|unknown, reason, message, verdict, old, new } ]` |
//! | http get | `{ status, body }` |
//! | forge get-pull | the pull request as the forge sent it |
//! | forge merge-pull | `{ merged, sha }` |
//! | forge update-ref | the ref object |
//! | forge ci-status | `{ state, required, missing, combined, check_runs: [ every check run of every page, less --exclude's ] }` |
//! | forge create-check-run, update-check-run | the check run |
//! | forge comment | `{ id, html_url }` |

use serde::Serialize;
use sluice_forge::HttpResponse;
use sluice_git::{FetchedRef, PushReport, RemoteRef};
use sluice_policy::Outcome;

/// Every top-level key of the document, in order.
pub const KEYS: [&str; 15] = [
    "schema",
    "result",
    "operation",
    "deadline_ms",
    "elapsed_ms",
    "may_have_applied",
    "stopped",
    "attempts",
    "reconciled",
    "refused_credentials",
    "previous",
    "remote_messages",
    "remote_messages_dropped",
    "recorded",
    "value",
];

fn hex(oid: Option<&gix::ObjectId>) -> Option<String> {
    oid.map(|o| o.to_hex().to_string())
}

/// One ref of ls-refs' `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LsRef {
    /// The full name (`HEAD`, `refs/heads/main`).
    pub name: String,
    /// 40 lowercase hex; null when unborn.
    pub oid: Option<String>,
    /// For an annotated tag, the object it points to.
    pub peeled: Option<String>,
    /// For a symbolic ref, its target.
    pub symref_target: Option<String>,
}

/// One ref of fetch's `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Fetched {
    /// The remote's ref name.
    pub remote_ref: String,
    /// The local ref it was stored as, if any.
    pub local_ref: Option<String>,
    /// 40 lowercase hex.
    pub oid: String,
    /// The local ref's value before the fetch (null: it did not exist).
    pub old: Option<String>,
    /// `new`, `fast-forward`, `forced`, `up-to-date` or `rejected`.
    pub status: &'static str,
    /// Why it was rejected, in git's words (null unless rejected).
    pub reason: Option<String>,
}

/// One ref of push's `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pushed {
    /// The URL pushed to, without user info.
    pub url: String,
    /// The destination ref.
    #[serde(rename = "ref")]
    pub name: String,
    /// `ok`, `rejected` or `unknown`.
    pub status: &'static str,
    /// Why it was rejected, kebab-case (`stale-info`, `non-fast-forward`,
    /// `fetch-first`, `hook-declined`, `atomic-push-failed`,
    /// `failed-to-update-ref`, `protected`, `other`); null unless rejected.
    pub reason: Option<&'static str>,
    /// The remote's words for it (or this client's when it refused it).
    pub message: Option<String>,
    /// What a settling read found: `landed`, `not-landed`, `moved`; null
    /// when the push's answer was read.
    pub verdict: Option<&'static str>,
    /// The value the command expected (40 hex), null when absent.
    pub old: Option<String>,
    /// The value pushed (40 hex), null for a delete.
    pub new: Option<String>,
}

/// `value` of http get.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HttpGet {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// `value` of ls-refs.
pub fn ls_refs_value(refs: &[RemoteRef]) -> Vec<LsRef> {
    refs.iter()
        .map(|r| LsRef {
            name: r.name.clone(),
            oid: hex(r.oid.as_ref()),
            peeled: hex(r.peeled.as_ref()),
            symref_target: r.symref_target.clone(),
        })
        .collect()
}

/// `value` of fetch.
pub fn fetch_value(refs: &[FetchedRef]) -> Vec<Fetched> {
    refs.iter()
        .map(|r| Fetched {
            remote_ref: r.remote_ref.clone(),
            local_ref: r.local_ref.clone(),
            oid: r.oid.to_hex().to_string(),
            old: hex(r.old.as_ref()),
            status: r.status.as_str(),
            reason: r.reason.clone(),
        })
        .collect()
}

/// `value` of push: the per-ref results of the push to `url` (its user
/// info removed here).
pub fn push_value(report: &PushReport, url: &str) -> Vec<Pushed> {
    let url = sluice_git::redact(url);
    report
        .refs
        .iter()
        .map(|r| Pushed {
            url: url.clone(),
            name: r.name.clone(),
            status: r.status.as_str(),
            reason: r.reason.map(|x| x.as_str()),
            message: r.message.clone(),
            verdict: r.verdict.map(|v| v.as_str()),
            old: hex(r.old.as_ref()),
            new: hex(r.new.as_ref()),
        })
        .collect()
}

/// How bad an outcome is, for a push to several URLs: unknown, then
/// local-error, then rejected, then answered, then succeeded.
fn severity(kind: sluice_policy::OutcomeKind) -> u8 {
    use sluice_policy::OutcomeKind::*;
    match kind {
        Unknown => 4,
        LocalError => 3,
        Rejected => 2,
        Answered => 1,
        _ => 0,
    }
}

/// The one document of a push to several URLs (every `pushurl`, in
/// order), from each URL's outcome: `value` every URL's entries (each
/// carrying its `url`), `attempts` the URLs' in order, `result` the worst
/// (unknown > local-error > rejected > answered > succeeded) with its
/// `error` and `stopped`, `may_have_applied` true if any URL's is,
/// `reconciled` the first settled URL's; the operation and `previous`
/// the first's, `elapsed_ms` the sum, `recorded` false if any was not.
/// One outcome is returned as it is; none is a programming error.
pub fn merge_pushes(outcomes: Vec<Outcome<Vec<Pushed>>>) -> Outcome<Vec<Pushed>> {
    let mut iter = outcomes.into_iter();
    let mut merged = iter.next().expect("a push goes to one URL at least");
    for out in iter {
        if severity(out.kind) > severity(merged.kind) {
            merged.kind = out.kind;
            merged.error = out.error.clone();
            merged.stopped = out.stopped;
        }
        merged.value = match (merged.value.take(), out.value) {
            (Some(mut a), Some(b)) => {
                a.extend(b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        merged.may_have_applied = match (merged.may_have_applied, out.may_have_applied) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), _) | (_, Some(false)) => Some(false),
            _ => None,
        };
        merged.elapsed_ms = merged.elapsed_ms.saturating_add(out.elapsed_ms);
        merged.attempts.extend(out.attempts);
        if merged.reconciled.is_none() {
            merged.reconciled = out.reconciled;
        }
        for f in out.refused_credentials {
            if !merged.refused_credentials.contains(&f) {
                merged.refused_credentials.push(f);
            }
        }
        if merged.previous.is_none() {
            merged.previous = out.previous;
        }
        merged.remote_messages.extend(out.remote_messages);
        merged
            .remote_messages_dropped
            .add(out.remote_messages_dropped);
        merged.recorded = match (merged.recorded, out.recorded) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), _) | (_, Some(true)) => Some(true),
            _ => None,
        };
    }
    merged
}

/// `value` of http get.
pub fn http_value(r: &HttpResponse) -> HttpGet {
    HttpGet {
        status: r.status,
        body: r.body.clone(),
    }
}

/// ci-status' `value`: the verdict, the names required and missing, the
/// combined-status document and every check run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CiStatusValue {
    /// The verdict: `success`, `pending` or `failure`.
    pub state: &'static str,
    /// The names required (given and the base branch's), sorted.
    pub required: Vec<String>,
    /// The required names nothing reported, sorted.
    pub missing: Vec<String>,
    /// The combined commit status.
    pub combined: serde_json::Value,
    /// Every check run of every page.
    pub check_runs: serde_json::Value,
}

/// comment's `value`: the comment's id and the page a person opens.
#[derive(Debug, Clone, Serialize)]
pub struct CommentValue {
    /// The comment's id.
    pub id: u64,
    /// Its page, or `null` when the forge gave none.
    pub html_url: Option<String>,
}

/// comment's `value` from the forge client's comment.
pub fn comment_value(c: &sluice_forge::IssueComment) -> CommentValue {
    CommentValue {
        id: c.id,
        html_url: c.html_url.clone(),
    }
}

/// ci-status' `value` from the forge client's.
pub fn ci_status_value(ci: &sluice_forge::CiStatus) -> CiStatusValue {
    let whole = serde_json::to_value(ci).unwrap_or(serde_json::Value::Null);
    CiStatusValue {
        state: ci.state.as_str(),
        required: ci.required.clone(),
        missing: ci.missing.clone(),
        combined: whole["combined"].clone(),
        check_runs: whole["check_runs"].clone(),
    }
}

/// The whole document, on one line, keys in the contract's order: the
/// policy's `Outcome` serialisation writes every key (null where it does not
/// apply).
pub fn document<T: Serialize>(outcome: &Outcome<T>) -> String {
    serde_json::to_string(outcome).unwrap_or_else(|e| {
        // Cannot happen for these types; still one JSON document.
        serde_json::json!({ "result": outcome.kind.as_str(), "error": e.to_string() }).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_git::{RefResult, RefStatus, RejectReason};
    use sluice_policy::{Effect, OperationInfo, OutcomeKind};

    fn blank() -> Outcome<Vec<Pushed>> {
        Outcome {
            kind: OutcomeKind::Answered,
            value: None,
            error: None,
            operation: OperationInfo {
                id: "op-1".into(),
                kind: "push".into(),
                effect: Effect::Write,
                remote: "git://h/r".into(),
                redirected: None,
            },
            deadline_ms: 20_000,
            elapsed_ms: 12,
            may_have_applied: Some(false),
            stopped: None,
            attempts: vec![],
            reconciled: None,
            refused_credentials: vec![],
            previous: None,
            remote_messages: vec![],
            remote_messages_dropped: Default::default(),
            recorded: None,
        }
    }

    #[test]
    fn every_key_is_present_even_when_null() {
        let text = document(&blank());
        let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
        let obj = doc.as_object().expect("object");
        for k in KEYS {
            assert!(obj.contains_key(k), "{k} missing: {doc}");
        }
        assert_eq!(doc["result"], "answered");
        assert_eq!(doc["value"], serde_json::Value::Null);
        let order: Vec<usize> = KEYS
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).expect("key"))
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "keys out of order: {text}"
        );
        assert_eq!(doc["operation"]["effect"], "write");
    }

    #[test]
    fn values_are_shaped_per_the_contract() {
        let oid =
            gix::ObjectId::from_hex(b"0123456789abcdef0123456789abcdef01234567").expect("hex");
        let v = ls_refs_value(&[RemoteRef {
            name: "HEAD".into(),
            oid: None,
            peeled: None,
            symref_target: Some("refs/heads/main".into()),
        }]);
        assert_eq!(v[0].oid, None);
        assert_eq!(v[0].symref_target.as_deref(), Some("refs/heads/main"));
        let v = push_value(
            &PushReport {
                refs: vec![RefResult {
                    name: "refs/heads/main".into(),
                    status: RefStatus::Rejected,
                    reason: Some(RejectReason::StaleInfo),
                    message: None,
                    verdict: None,
                    old: Some(oid),
                    new: None,
                }],
                pack: None,
            },
            "https://u:secret@example.com/r.git",
        );
        let j = serde_json::to_value(&v).expect("json");
        assert_eq!(j[0]["url"], "https://example.com/r.git");
        assert_eq!(j[0]["ref"], "refs/heads/main");
        assert_eq!(j[0]["status"], "rejected");
        assert_eq!(j[0]["reason"], "stale-info");
        assert_eq!(j[0]["old"], "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(j[0]["new"], serde_json::Value::Null);
        assert_eq!(j[0]["verdict"], serde_json::Value::Null);
        let v = fetch_value(&[FetchedRef {
            remote_ref: "refs/heads/main".into(),
            local_ref: None,
            oid,
            old: None,
            status: sluice_git::FetchStatus::UpToDate,
            reason: None,
        }]);
        let j = serde_json::to_value(&v).expect("json");
        assert_eq!(j[0]["oid"], "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(j[0]["local_ref"], serde_json::Value::Null);
    }
}
