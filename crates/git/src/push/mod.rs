//! Push: send-pack on gix-transport's receive-pack service and gix-pack.
//!
//! One attempt advances `connect → advertised → commands-sent → pack-sent →
//! reported`. The old value of every command is fixed on the first
//! advertisement the operation reads (or is the caller's lease) and carried
//! unchanged by every retry, so a retry can never overwrite an update made
//! in between. A push whose answer was not read is never pushed again
//! blind: [`GitClient::push`](crate::GitClient::push) settles it by reading
//! the destination refs.
//!
//! This file holds the push's values; the operation is in `attempt`, its
//! steps (each a value the next consumes) in `steps`, the settling read in
//! `settle`.

mod advert;
mod attempt;
mod bitmap;
pub(crate) mod delta;
mod odb;
pub mod pack;
pub mod report;
mod settle;
pub mod spec;
mod steps;
pub(crate) mod tracking;
#[cfg(test)]
mod transcripts;

use std::cell::{OnceCell, RefCell};

use gix::ObjectId;

use crate::input::InputError;
pub use crate::reject::RejectReason;
use crate::remote::Remote;
pub use pack::PackStats;
use sluice_policy::CallOptions;
pub use spec::Lease;
use spec::{expand_destination, PushSpec};

/// One ref update, made by the constructor that names what it may do:
///
/// | constructor | the remote ref must | |
/// |---|---|---|
/// | [`RefUpdate::fast_forward`] | be an ancestor of `src` (or absent) | git's plain push |
/// | [`RefUpdate::leased`] | hold `expected` | force-with-lease |
/// | [`RefUpdate::create`] | not exist | |
/// | [`RefUpdate::delete`] | hold `expected` | a leased delete |
/// | [`RefUpdate::force`] | anything: it is overwritten | unleased; clobbers |
///
/// A lease implies force (the remote's value is checked instead of
/// ancestry), so there is no "lease without force" to get wrong, and an
/// unleased force exists only under its own name. The fields are read
/// through [`RefUpdate::src`], [`RefUpdate::dst`], [`RefUpdate::lease`]
/// and [`RefUpdate::is_forced`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefUpdate {
    /// The new value; `None` deletes the ref.
    pub(crate) src: Option<ObjectId>,
    /// The full destination ref name.
    pub(crate) dst: String,
    /// What the remote ref must hold.
    pub(crate) expect: Lease,
    /// Allow a non-fast-forward without a lease.
    pub(crate) force: bool,
}

impl RefUpdate {
    /// Set `dst` (a full ref name) to `src` when that is a fast-forward of
    /// what the remote holds, or when the remote has no such ref (git's
    /// plain `push src:dst`). The ancestry is checked by this client
    /// against the advertisement; a race after it is the server's to
    /// refuse.
    pub fn fast_forward(src: ObjectId, dst: impl Into<String>) -> Self {
        RefUpdate {
            src: Some(src),
            dst: dst.into(),
            expect: Lease::Any,
            force: false,
        }
    }

    /// Set `dst` to `src` only while the remote ref holds `expected`
    /// (force-with-lease): any history, but nobody else's change is
    /// overwritten. A stale lease is a rejected ref, never retried.
    pub fn leased(src: ObjectId, dst: impl Into<String>, expected: ObjectId) -> Self {
        RefUpdate {
            src: Some(src),
            dst: dst.into(),
            expect: Lease::Oid(expected),
            force: true,
        }
    }

    /// Create `dst` at `src`; refused when the remote already has it.
    pub fn create(src: ObjectId, dst: impl Into<String>) -> Self {
        RefUpdate {
            src: Some(src),
            dst: dst.into(),
            expect: Lease::Absent,
            force: true,
        }
    }

    /// Delete `dst` only while it holds `expected`.
    pub fn delete(dst: impl Into<String>, expected: ObjectId) -> Self {
        RefUpdate {
            src: None,
            dst: dst.into(),
            expect: Lease::Oid(expected),
            force: true,
        }
    }

    /// Set `dst` to `src` whatever the remote holds (`None` deletes it
    /// whatever it holds): git's `push +src:dst` without a lease. It
    /// overwrites another writer's change without a trace; prefer
    /// [`RefUpdate::leased`].
    pub fn force(src: Option<ObjectId>, dst: impl Into<String>) -> Self {
        RefUpdate {
            src,
            dst: dst.into(),
            expect: Lease::Any,
            force: true,
        }
    }

    /// This update under `lease` instead of its own expectation:
    /// [`Lease::Oid`] or [`Lease::Absent`] make it leased (which implies
    /// force); [`Lease::Any`] keeps what the constructor allowed.
    pub fn with_lease(mut self, lease: Lease) -> Self {
        if lease != Lease::Any {
            self.force = true;
        }
        self.expect = lease;
        self
    }

    /// The new value; `None` deletes the ref.
    pub fn src(&self) -> Option<ObjectId> {
        self.src
    }

    /// The full destination ref name.
    pub fn dst(&self) -> &str {
        &self.dst
    }

    /// What the remote ref must hold ([`Lease::Any`]: no lease).
    pub fn lease(&self) -> &Lease {
        &self.expect
    }

    /// Whether the update may replace history that is not its ancestor:
    /// leased, created, deleted or forced.
    pub fn is_forced(&self) -> bool {
        self.force || self.expect != Lease::Any
    }

    /// Resolve a parsed spec against `repo`, with an optional lease; a
    /// short destination is expanded by [`expand_destination`]. A spec
    /// with `+` and no lease is [`RefUpdate::force`]; with a lease it is
    /// leased; otherwise [`RefUpdate::fast_forward`] (or a delete of
    /// whatever the remote holds, git's `push :dst`).
    ///
    /// **A repository kept open**: this reads `repo` as it is; pass
    /// [`crate::fresh_view`]`(repo)` when it was opened long ago (see
    /// [`crate::fresh_view`] for why).
    pub fn resolve(
        spec: &PushSpec,
        lease: Option<Lease>,
        repo: &gix::Repository,
    ) -> Result<RefUpdate, InputError> {
        let src = match &spec.src {
            None => None,
            Some(rev) => Some(
                repo.rev_parse_single(rev.as_str())
                    .map_err(|e| InputError::Revision {
                        rev: rev.clone(),
                        reason: sluice_policy::text::error_chain(&e),
                    })?
                    .detach(),
            ),
        };
        let dst = expand_destination(&spec.dst, spec.src.as_deref(), repo)?;
        Ok(RefUpdate {
            src,
            dst,
            expect: lease.unwrap_or(Lease::Any),
            force: spec.force,
        })
    }
}

/// Options of a push.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushOptions {
    /// All refs or none (needs the server's `atomic`).
    pub atomic: bool,
    /// `-o` push options (needs the server's `push-options`).
    pub push_options: Vec<String>,
    /// Everything up to the commands, nothing sent: the would-be per-ref
    /// results. A read (effect `read`), so it may be asked again freely.
    pub dry_run: bool,
}

/// A ref's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefStatus {
    /// Updated (or already up to date).
    Ok,
    /// Rejected, by this client or the remote.
    Rejected,
    /// Its fate is not known: the answer was not read, and a settling read
    /// found it not landed (yet) or moved — see its `verdict`.
    Unknown,
}

impl RefStatus {
    /// `ok`, `rejected` or `unknown`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RefStatus::Ok => "ok",
            RefStatus::Rejected => "rejected",
            RefStatus::Unknown => "unknown",
        }
    }
}

/// One ref's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefResult {
    /// The destination ref.
    pub name: String,
    /// Ok, rejected or unknown.
    pub status: RefStatus,
    /// Why it was rejected (`None` unless rejected).
    pub reason: Option<RejectReason>,
    /// The remote's words for it (an `ng` line's reason, an unpack error),
    /// or this client's when it refused the ref itself.
    pub message: Option<String>,
    /// What a settling read found for this ref, when the push's answer was
    /// not read.
    pub verdict: Option<sluice_policy::Verdict>,
    /// The value the command expected (`None`: absent or not known).
    pub old: Option<ObjectId>,
    /// The value pushed (`None`: a delete).
    pub new: Option<ObjectId>,
}

impl RefResult {
    /// Whether the ref already held the pushed value.
    pub fn is_up_to_date(&self) -> bool {
        self.status == RefStatus::Ok && self.old == self.new && self.verdict.is_none()
    }
}

/// What a push did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushReport {
    /// Per ref, in the order given.
    pub refs: Vec<RefResult>,
    /// The pack of the attempt that was answered (none for deletions only
    /// and for pushes decided locally).
    pub pack: Option<PackStats>,
}

impl PushReport {
    /// The rejection that is the cause, as `<ref>: <reason>`: the first
    /// ref refused for its own reason; only when every ref failed as
    /// collateral of an atomic push, the first of those.
    pub fn first_rejection(&self) -> Option<String> {
        self.cause()
            .map(|(_, r)| format!("{}: {}", r.name, r.rejection_words()))
    }

    /// The ref [`PushReport::first_rejection`] names, with its place in
    /// the report.
    pub(crate) fn cause(&self) -> Option<(usize, &RefResult)> {
        cause(self.refs.iter()).map(|i| (i, &self.refs[i]))
    }
}

/// Of `refs`, the place of the one that is the cause: the first refused for
/// its own reason; only when every refusal is an atomic push's collateral,
/// the first of those.
fn cause<'r>(refs: impl Iterator<Item = &'r RefResult> + Clone) -> Option<usize> {
    let rejected = refs
        .enumerate()
        .filter(|(_, r)| r.status == RefStatus::Rejected);
    rejected
        .clone()
        .find(|(_, r)| r.reason != Some(RejectReason::AtomicPushFailed))
        .or_else(|| rejected.clone().next())
        .map(|(i, _)| i)
}

impl RefResult {
    /// Why it was rejected, in words: the remote's (or this client's)
    /// message, else git's words for the reason.
    pub(crate) fn rejection_words(&self) -> &str {
        self.message
            .as_deref()
            .unwrap_or(self.reason.unwrap_or(RejectReason::Other).git_words())
    }
}

/// A ref's result as an attempt (or a settling read) hands it to the
/// policy's judge: the result, and whether this client decided it before
/// sending its commands (refused here, or up to date) rather than the
/// remote's report.
#[derive(Clone, Debug)]
struct Judged {
    result: RefResult,
    /// Decided by this client before the commands went out.
    here: bool,
}

/// What an attempt or a settling read hands the policy: per update (in the
/// order given) its result and who decided it; the pack. The caller gets
/// [`Attempted::into_report`].
#[derive(Clone, Debug)]
struct Attempted {
    refs: Vec<Judged>,
    pack: Option<PackStats>,
}

impl Attempted {
    /// The caller's report.
    fn into_report(self) -> PushReport {
        PushReport {
            refs: self.refs.into_iter().map(|j| j.result).collect(),
            pack: self.pack,
        }
    }

    /// The ref that is the cause ([`PushReport::first_rejection`]'s).
    fn cause(&self) -> Option<&Judged> {
        cause(self.refs.iter().map(|j| &j.result)).map(|i| &self.refs[i])
    }
}

/// What one push keeps across its attempts for the later ones and for its
/// settling read: a cell the operation ([`crate::GitClient::push`]) owns
/// and writes between an attempt's steps, from the values the steps
/// return. The steps themselves never see it.
#[derive(Default)]
struct Kept {
    /// Per update: the old value every command carries (`None`: absent),
    /// fixed on the operation's first advertisement.
    expected: OnceCell<Vec<Option<ObjectId>>>,
    /// What the last attempt to decide its commands decided and sent.
    sent: RefCell<Sent>,
}

/// What an attempt decided before sending its commands, and its pack.
#[derive(Clone, Default)]
struct Sent {
    /// Per update, the result decided here (refused, or up to date);
    /// `None` for a ref sent.
    decided: Vec<Option<RefResult>>,
    /// The pack of the last attempt to complete its request (`None`: it
    /// needed none).
    pack: Option<PackStats>,
}

/// One push's arguments, as every attempt and settling read sees them.
struct PushJob<'a> {
    remote: &'a Remote,
    updates: &'a [RefUpdate],
    options: &'a PushOptions,
    /// The caller's repository (each attempt opens a view of its own).
    repo: &'a gix::Repository,
    opts: &'a CallOptions,
}

impl RefResult {
    /// `u` refused (by this client or the remote) for `reason`.
    fn rejected(u: &RefUpdate, old: Option<ObjectId>, reason: RejectReason) -> RefResult {
        RefResult {
            name: u.dst.clone(),
            status: RefStatus::Rejected,
            reason: Some(reason),
            message: None,
            verdict: None,
            old,
            new: u.src,
        }
    }

    /// `u` refused by the remote in its `words` (an `ng` line's reason).
    fn rejected_by_remote(u: &RefUpdate, old: Option<ObjectId>, words: &str) -> RefResult {
        RefResult {
            message: Some(words.to_string()),
            ..RefResult::rejected(u, old, RejectReason::from_report(words))
        }
    }

    /// `u` done (or already so).
    fn ok(u: &RefUpdate, old: Option<ObjectId>) -> RefResult {
        RefResult {
            name: u.dst.clone(),
            status: RefStatus::Ok,
            reason: None,
            message: None,
            verdict: None,
            old,
            new: u.src,
        }
    }
}
