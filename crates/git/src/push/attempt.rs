//! The push as an operation: its input checks, the policy's write with its
//! judge and settling read, and one attempt as the sequence of its steps
//! (`steps`): connected → advertised → commands sent → pack sent →
//! reported.

use sluice_policy::{Effect, Outcome, Rejection};

use super::steps::{self, Decided};
use super::{
    spec::check_ref_name, Attempted, Kept, PushJob, PushOptions, PushReport, RefStatus, RefUpdate,
    RejectReason,
};
use crate::attempt::attempt_view;
use crate::attempt::{shielded, Attempt};
use crate::client::GitClient;
use crate::error::{GitError, GitPhase};
use crate::input::InputError;
use crate::remote::Remote;
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
    /// **A repository kept open** is safe to pass (each attempt works on a
    /// view of its own), but resolve what you push ([`crate::RefUpdate::resolve`])
    /// through [`crate::fresh_view`]`(repo)`, not through `repo`: see
    /// [`crate::fresh_view`] for why.
    pub fn push(
        &self,
        url: &str,
        updates: &[RefUpdate],
        options: &PushOptions,
        repo: &gix::Repository,
        opts: &CallOptions,
    ) -> Result<Outcome<PushReport>, InputError> {
        let mut remote = Remote::parse(url)?;
        let helpers = self.configure_http(&mut remote, Some(repo));
        check_input(updates, options, repo)?;
        let job = PushJob {
            remote: &remote,
            updates,
            options,
            repo,
            opts,
        };
        // What the attempts leave for the later ones and the settling read.
        let kept = Kept::default();
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
        let op = self
            .operation("push", effect, &remote, opts, helpers)
            .refs(refs);
        // An attempt is tried again only when the remote never judged it;
        // one whose answer was lost is settled by reading and never sent
        // again (the policy's rule).
        let out = self.policy.run_write_judged(
            op,
            |ctx| {
                shielded(ctx, |at| self.push_attempt(&job, &kept, at)).map_err(|e| e.to_attempt())
            },
            |rctx| self.push_settle(&job, &kept, rctx),
            |attempted: &Attempted| {
                rejection(attempted).map(|error| Rejection {
                    error: error.to_attempt(),
                    may_have_applied: attempted.refs.iter().any(|j| {
                        let r = &j.result;
                        r.status == RefStatus::Ok && !r.is_up_to_date()
                            || r.status == RefStatus::Unknown
                    }),
                })
            },
        );
        Ok(job.remote.note_redirect(out.map(Attempted::into_report)))
    }

    /// One attempt: each step consumes the one before it. What a later
    /// attempt or the settling read needs is kept in `kept` between the
    /// steps: the old values on the first advertisement, what was decided
    /// before the commands went out, the pack once the request is
    /// complete.
    fn push_attempt(
        &self,
        job: &PushJob<'_>,
        kept: &Kept,
        at: &mut Attempt<'_, '_>,
    ) -> Result<Attempted, GitError> {
        // A view opened now: the caller's handle may be weeks old (see
        // `fresh_view`).
        let repo = attempt_view(job.repo)?;
        let mut session = steps::connect(&self.connector, job, &repo, at)?;
        let connected = steps::Connected::new(&mut session, &repo);
        let advertised = connected.read_advertisement(job, at)?;
        let expected = kept
            .expected
            .get_or_init(|| advertised.expected(job.updates));
        let ready = match advertised.decide(job, expected, &self.agent, at)? {
            Decided::Done(attempted) => return Ok(attempted),
            Decided::Send(ready) => ready,
        };
        kept.sent.borrow_mut().decided = ready.decided().to_vec();
        let sent = ready.send_commands(at)?;
        let packed = sent.send_pack(job, at)?;
        kept.sent.borrow_mut().pack = packed.pack().cloned();
        let reported = packed.read_report(at)?;
        reported.results(job)
    }
}

/// The push's answer as its typed error, the ref that is the cause
/// ([`PushReport::first_rejection`]): refused by this client when the
/// attempt decided it before sending its commands, else rejected by the
/// remote's report.
fn rejection(attempted: &Attempted) -> Option<GitError> {
    let cause = attempted.cause()?;
    let r = &cause.result;
    let (name, reason) = (r.name.clone(), r.reason.unwrap_or(RejectReason::Other));
    let words = r.rejection_words().to_string();
    Some(if cause.here {
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
