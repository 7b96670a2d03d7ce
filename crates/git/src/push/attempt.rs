//! The push as an operation: its input checks, the policy's write with its
//! judge and settling read, and one attempt as the sequence of its steps
//! (`steps`): connected → advertised → commands sent → pack sent →
//! reported.

use std::cell::RefCell;

use sluice_policy::{Effect, Outcome, Rejection};

use super::steps::{self, Decided};
use super::{
    spec::check_ref_name, PushJob, PushOptions, PushReport, PushState, RefResult, RefStatus,
    RefUpdate, RejectReason,
};
use crate::attempt::{shielded, Attempt};
use crate::client::GitClient;
use crate::error::{GitError, GitPhase};
use crate::input::InputError;
use crate::remote::Remote;
use crate::view::attempt_view;
use sluice_policy::CallOptions;

impl GitClient {
    /// Push `updates` from `repo` to `url`, a write under the policy.
    ///
    /// Any ref rejected (by this client or the remote) makes the outcome
    /// `answered`, with the per-ref results kept as its value. A push whose
    /// answer was not read is settled by reading the destination refs, per
    /// ref: landed, not landed (read again with backoff while the deadline
    /// allows: the policy's settling loop), or moved; it is **never pushed
    /// again**: anything but every ref landed
    /// ends `unknown` with `may_have_applied: true`, each ref with its own
    /// verdict.
    ///
    /// **A repository kept open.** Each attempt works on a view of `repo`
    /// opened then ([`crate::fresh_view`]), so a handle kept open for weeks
    /// is safe to pass; but gix's handle sizes its pack list when opened,
    /// and after about 32 more packs (a pack per fetch) `repo` itself no
    /// longer sees new objects: resolve what you push
    /// (new commits fetched since, [`crate::RefUpdate::resolve`]) through
    /// [`crate::fresh_view`]`(repo)`, not through `repo`.
    pub fn push(
        &self,
        url: &str,
        updates: &[RefUpdate],
        options: &PushOptions,
        repo: &gix::Repository,
        opts: &CallOptions,
    ) -> Result<Outcome<PushReport>, InputError> {
        let remote = Remote::parse(url)?;
        check_input(updates, options, repo)?;
        let state = RefCell::new(PushState::default());
        let job = PushJob {
            remote: &remote,
            updates,
            options,
            repo,
            state: &state,
            opts,
        };
        let effect = if options.dry_run {
            Effect::Read
        } else {
            Effect::Write
        };
        // The ledger's record of what ran: `[+]<new>:<dst>` per ref.
        let refs = updates.iter().map(|u| {
            let force = if u.force { "+" } else { "" };
            let new = u.src.map(|id| id.to_string()).unwrap_or_default();
            format!("{force}{new}:{}", u.dst)
        });
        let op = self.operation("push", effect, &remote, opts).refs(refs);
        // An attempt is tried again only when the remote never judged it;
        // one whose answer was lost is settled by reading and never sent
        // again (the policy's rule).
        let out = self.policy.run_write_judged(
            op,
            |ctx| shielded(ctx, |at| self.push_attempt(&job, at)).map_err(|e| e.to_attempt()),
            |rctx| self.push_settle(&job, rctx),
            |report: &PushReport| {
                rejection(report, &job.state.borrow().decided).map(|error| Rejection {
                    error: error.to_attempt(),
                    may_have_applied: report.refs.iter().any(|r| {
                        r.status == RefStatus::Ok && !r.is_up_to_date()
                            || r.status == RefStatus::Unknown
                    }),
                })
            },
        );
        Ok(job.remote.note_redirect(out))
    }

    /// One attempt: each step consumes the one before it.
    fn push_attempt(
        &self,
        job: &PushJob<'_>,
        at: &mut Attempt<'_, '_>,
    ) -> Result<PushReport, GitError> {
        // A view opened now: the caller's handle may be weeks old (see
        // `fresh_view`).
        let repo = attempt_view(job.repo)?;
        let mut session = steps::connect(&self.connector, job, &repo, at)?;
        let connected = steps::Connected::new(&mut session, &repo);
        let advertised = connected.read_advertisement(job, at)?;
        let ready = match advertised.decide(job, &self.agent, at)? {
            Decided::Done(report) => return Ok(report),
            Decided::Send(ready) => ready,
        };
        let sent = ready.send_commands(at)?;
        let packed = sent.send_pack(job, at)?;
        let reported = packed.read_report(at)?;
        reported.results(job)
    }
}

/// The push's answer as its typed error, the ref that is the cause
/// ([`PushReport::first_rejection`]): refused by this client when the
/// attempt decided it before sending its commands (`decided`), else
/// rejected by the remote's report.
fn rejection(report: &PushReport, decided: &[Option<RefResult>]) -> Option<GitError> {
    let (i, r) = report.cause()?;
    let (name, reason) = (r.name.clone(), r.reason.unwrap_or(RejectReason::Other));
    let words = r.rejection_words().to_string();
    let here = decided
        .get(i)
        .is_some_and(|d| d.as_ref().is_some_and(|d| d.status == RefStatus::Rejected));
    Some(if here {
        GitError::Refused {
            phase: GitPhase::Advertised,
            name,
            reason,
            detail: words,
        }
    } else {
        GitError::Rejected {
            phase: GitPhase::Reported,
            name,
            reason,
            words,
        }
    })
}

/// Input refused before any call: a bad or repeated destination, a source
/// not in the repository (as it is on disk now), a push option with a
/// newline or NUL.
fn check_input(
    updates: &[RefUpdate],
    options: &PushOptions,
    repo: &gix::Repository,
) -> Result<(), InputError> {
    if updates.is_empty() {
        return Err(InputError::Push("nothing to push".into()));
    }
    // The input checks look at what is on disk now, too.
    let fresh = attempt_view(repo);
    let view = fresh.as_ref().unwrap_or(repo);
    let mut seen = std::collections::HashSet::new();
    for u in updates {
        check_ref_name(&u.dst)?;
        if !seen.insert(u.dst.as_str()) {
            return Err(InputError::Push(format!("{} is named twice", u.dst)));
        }
        if let Some(src) = u.src {
            if !view.has_object(src) {
                return Err(InputError::Revision {
                    rev: src.to_string(),
                    reason: "not in the local repository".into(),
                });
            }
        }
    }
    for o in &options.push_options {
        if o.contains('\n') || o.contains('\0') {
            return Err(InputError::Push(
                "a push option may not contain a newline or NUL".into(),
            ));
        }
    }
    Ok(())
}
