//! The first step: claim the operation id in the ledger. A taken id is
//! `rejected` with no call; a claim that cannot be made is `local-error`.

use super::state::Run;
use std::time::Duration;

use crate::class::AttemptError;
use crate::ledger::{Claim, ClaimRequest};
use crate::outcome::{Outcome, OutcomeKind, PreviousRun, Stopped};

impl Run<'_> {
    /// Claim the operation's id. `Err` is the whole outcome when the run
    /// must not go on: the id was taken (`rejected`, carrying the earlier
    /// run when there is one, with no error and no attempt) or the ledger could not claim it
    /// (`local-error`). A generated id needs no claim (it is unique by
    /// construction), unless this policy generated it before.
    pub(super) fn claim<T>(&self) -> Result<(), Box<Outcome<T>>> {
        let policy = self.policy;
        let id = self.id();
        let known_here = policy.generated_before(id) && !policy.ledger.keeps_generated_ids();
        let claim = if self.generated {
            Ok(Claim::Claimed)
        } else if known_here {
            Ok(Claim::Taken(None))
        } else {
            // The claim is bounded by the whole deadline (it is the first
            // step): a store that cannot answer in that time fails it.
            let left = self.remaining_at(policy.clock.now());
            let mut req = ClaimRequest::new(id, self.info.effect, left)
                .operation(&self.info.kind, &self.info.remote)
                .origin(crate::ledger::this_host(), std::process::id());
            if let Some(refs) = &self.refs {
                req = req.refs(refs);
            }
            policy.ledger.claim(&req)
        };
        match claim {
            Ok(Claim::Claimed) => Ok(()),
            Ok(Claim::Taken(previous)) => {
                tracing::debug!(op = %id, "operation id already claimed: rejected");
                let mut o = self.blank(OutcomeKind::Rejected, self.info.clone());
                // The stores answer a claim still running (or whose
                // process died) with what they know of it: its kind, and
                // `may_have_applied` by its effect. A ledger that keeps
                // nothing of a claim (`None`): running, kind unknown, of
                // this call's effect (one id names one operation).
                o.previous = previous.or_else(|| {
                    (!known_here)
                        .then(|| PreviousRun::running(None, Some(self.info.effect), Duration::ZERO))
                });
                // Nothing ran, so nothing is shaped as an attempt's failure:
                // no error, no attempts; `previous` is the evidence. A
                // write's `may_have_applied` speaks of the operation the id
                // names (see the field): the earlier run's when it was a
                // write, false when it was a read, true when unknown.
                if self.write {
                    o.may_have_applied = Some(match &o.previous {
                        Some(p) => p.may_have_applied.unwrap_or(false),
                        None => true,
                    });
                }
                Err(Box::new(o))
            }
            Err(e) => {
                // Nothing ran: the claim could not be made on this side.
                tracing::warn!(op = %id, error = %e, "the ledger could not claim the operation id");
                let mut o = self.blank(OutcomeKind::LocalError, self.info.clone());
                o.stopped = Some(Stopped::LocalError);
                o.error = Some(AttemptError::local("connect", e.to_string()).with_source(e));
                Err(Box::new(o))
            }
        }
    }
}

impl Run<'_> {
    /// Record in the ledger that this write is entering `phase` (see
    /// [`AttemptCtx::entering`](super::AttemptCtx::entering)): bounded by
    /// what remains, at most [`FINISH_FLOOR`](crate::FINISH_FLOOR); a
    /// failure is logged, never the operation's. Nothing for a read or a
    /// generated id (no claim of it exists).
    pub(super) fn progress(&self, phase: &str) {
        if !self.write || self.generated {
            return;
        }
        let left = self
            .remaining_at(self.policy.clock.now())
            .min(crate::ledger::FINISH_FLOOR);
        let req = crate::ledger::ProgressRequest::new(self.id(), phase, left);
        if let Err(e) = self.policy.ledger.progress(&req) {
            tracing::warn!(op = %self.id(), phase, error = %e, "the ledger could not record the phase reached; going on");
        }
    }
}
