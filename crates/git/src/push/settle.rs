//! Settling a push whose answer was not read: one ls-refs of the
//! destination refs, each ref's verdict (landed, not landed, moved) from
//! what it holds now against what was pushed and what was expected.

use std::collections::{BTreeMap, HashMap};

use gix::ObjectId;
use sluice_policy::{AttemptError, ReconcileCtx, Settlement, Verdict};

use super::{Attempted, Judged, Kept, PushJob, RefResult, RefStatus};
use crate::attempt::catch_panic;
use crate::client::GitClient;
use crate::error::{GitError, GitPhase};

impl GitClient {
    /// Settle a push whose answer was not read: read the destination
    /// refs and compare each with what was pushed and what was expected
    /// (as the attempts left them in `kept`).
    pub(super) fn push_settle(
        &self,
        job: &PushJob<'_>,
        kept: &Kept,
        rctx: &ReconcileCtx<'_>,
    ) -> Result<Settlement<Attempted>, AttemptError> {
        let (remote, updates, options) = (job.remote, job.updates, job.options);
        let super::Sent { decided, pack } = kept.sent.borrow().clone();
        let Some(expected) = kept.expected.get() else {
            return Err(AttemptError::answered(
                GitPhase::Connect.as_str(),
                "nothing was advertised: nothing to settle",
            ));
        };
        let prefixes: Vec<String> = updates.iter().map(|u| u.dst.clone()).collect();
        // A cancelled push is still settled: the read ignores the caller's
        // cancel (not its stop: a second signal ends it at once) and is
        // bounded by this read's timeout (the attempt timeout, capped by
        // what remains).
        // A panic in the protocol code (a hostile answer) is this read's
        // failure, as it is an attempt's.
        let read = catch_panic(|| {
            self.ls_refs_once(
                remote,
                &prefixes,
                rctx.timeout,
                &rctx.cancel_flag().stops_only(),
                (rctx.credential(), None),
                (None, rctx.headers()),
            )
        })
        .unwrap_or_else(|what| {
            Err(GitError::Protocol {
                phase: GitPhase::Connect,
                request_complete: true,
                detail: format!(
                    "the client failed on the server's answer to a settling read: {what}"
                ),
            })
        });
        let refs = read.map_err(|e| e.to_attempt())?;
        let now: HashMap<&str, ObjectId> = refs
            .iter()
            .filter_map(|r| r.oid.map(|o| (r.name.as_str(), o)))
            .collect();
        let mut observed = BTreeMap::new();
        let (mut landed, mut not_landed, mut moved) = (0, 0, 0);
        let mut results = Vec::with_capacity(updates.len());
        for (i, u) in updates.iter().enumerate() {
            let cur = now.get(u.dst.as_str()).copied();
            let shown = cur
                .map(|o| o.to_string())
                .unwrap_or_else(|| "absent".into());
            observed.insert(u.dst.clone(), shown.clone());
            // Decided before the commands were sent (refused here, or up to
            // date): not part of what is being settled.
            if let Some(r) = decided.get(i).cloned().flatten() {
                results.push(Judged {
                    result: r,
                    here: true,
                });
                continue;
            }
            let mut r = RefResult::ok(u, expected[i]);
            if cur == u.src {
                landed += 1;
                r.verdict = Some(Verdict::Landed);
            } else if cur == expected[i] {
                not_landed += 1;
                r.status = RefStatus::Unknown;
                r.verdict = Some(Verdict::NotLanded);
            } else {
                moved += 1;
                r.status = RefStatus::Unknown;
                r.verdict = Some(Verdict::Moved);
                r.message = Some(format!("moved by somebody else (now {shown})"));
            }
            results.push(Judged {
                result: r,
                here: false,
            });
        }
        let report = Attempted {
            refs: results,
            pack,
        };
        Ok(if not_landed == 0 && moved == 0 {
            Settlement::landed(report, observed)
        } else if moved == 0 && (landed == 0 || !options.atomic) {
            Settlement::not_landed(observed).with_value(report)
        } else {
            let cause = if options.atomic {
                "an atomic push found its refs changed by somebody else".to_string()
            } else {
                report
                    .refs
                    .iter()
                    .map(|j| &j.result)
                    .find(|r| r.verdict == Some(Verdict::Moved))
                    .map(|r| format!("{}: {}", r.name, r.message.as_deref().unwrap_or("moved")))
                    .unwrap_or_else(|| "moved".into())
            };
            Settlement::moved(None, observed, cause).with_value(report)
        })
    }
}
