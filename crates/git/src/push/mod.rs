//! Push: send-pack on gix-transport's receive-pack service and gix-pack.
//!
//! One attempt advances `connect → advertised → commands-sent → pack-sent →
//! reported`. The old value of every command is fixed on the first
//! advertisement the operation reads (or is the caller's lease) and carried
//! unchanged by every retry, so a retry can never overwrite an update made
//! in between. A push whose answer was not read is never pushed again
//! blind: [`GitClient::push`] settles it by reading the destination refs.

mod advert;
mod bitmap;
pub(crate) mod delta;
mod odb;
pub mod pack;
pub mod report;
pub mod spec;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use gix::protocol::transport::client::{MessageKind, WriteMode};
use gix::protocol::transport::packetline::blocking_io::encode;
use gix::protocol::transport::{Protocol, Service};
use gix::ObjectId;
use sluice_policy::{
    AttemptCtx, AttemptError, Effect, Outcome, ReconcileCtx, Rejection, Settlement, Verdict,
};

use crate::client::{error_text, read_fail, CallOptions, GitClient, InputError};
use crate::connect::Session;
use crate::error::{GitError, Phase};
use crate::remote::Remote;
pub use pack::PackStats;
pub use spec::{
    check_ref_name, check_short_name, expand_destination, parse_lease, parse_lease_spec, parse_oid,
    Lease, LeaseSpec, PushSpec,
};

/// One ref update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefUpdate {
    /// The new value; `None` deletes the ref.
    pub src: Option<ObjectId>,
    /// The full destination ref name.
    pub dst: String,
    /// What the remote ref must hold.
    pub expect: Lease,
    /// Allow a non-fast-forward (a lease implies it).
    pub force: bool,
}

impl RefUpdate {
    /// Resolve a parsed spec against `repo`, with an optional lease; a
    /// short destination is expanded by [`expand_destination`].
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
                        reason: error_text(&e),
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

/// Why a ref was rejected, typed; the remote's own words stay beside it
/// in [`RefResult::message`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The remote ref does not hold the expected value (a lease, or the
    /// value this operation first read): refused by this client before any
    /// pack was sent.
    StaleInfo,
    /// Not a fast-forward (by this client or the remote).
    NonFastForward,
    /// The remote ref's value is not known locally: fetch first.
    FetchFirst,
    /// A hook (pre-receive, update) declined it.
    HookDeclined,
    /// Another ref of an atomic push failed.
    AtomicPushFailed,
    /// The remote could not update the ref (its lock, or its value changed
    /// under it: a lease race lost on the server).
    FailedToUpdateRef,
    /// A protected branch (a forge's rule).
    Protected,
    /// Anything else (the remote's words in `message`).
    Other,
}

impl RejectReason {
    /// The kebab-case name of the JSON contract.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::StaleInfo => "stale-info",
            RejectReason::NonFastForward => "non-fast-forward",
            RejectReason::FetchFirst => "fetch-first",
            RejectReason::HookDeclined => "hook-declined",
            RejectReason::AtomicPushFailed => "atomic-push-failed",
            RejectReason::FailedToUpdateRef => "failed-to-update-ref",
            RejectReason::Protected => "protected",
            RejectReason::Other => "other",
        }
    }

    /// As git prints it in `! [rejected] … (<words>)`.
    pub const fn git_words(self) -> &'static str {
        match self {
            RejectReason::StaleInfo => "stale info",
            RejectReason::NonFastForward => "non-fast-forward",
            RejectReason::FetchFirst => "fetch first",
            RejectReason::HookDeclined => "hook declined",
            RejectReason::AtomicPushFailed => "atomic push failed",
            RejectReason::FailedToUpdateRef => "failed to update ref",
            RejectReason::Protected => "protected branch",
            RejectReason::Other => "rejected",
        }
    }

    /// The reason of an `ng <ref> <reason>` line of report-status (a field
    /// of the protocol, not stderr): receive-pack's fixed words, and the
    /// forges' "protected branch hook declined".
    pub fn from_report(words: &str) -> RejectReason {
        let w = words.trim();
        if w.contains("protected branch") {
            RejectReason::Protected
        } else if w.contains("hook declined") {
            RejectReason::HookDeclined
        } else if w == "non-fast-forward" {
            RejectReason::NonFastForward
        } else if w == "fetch first" {
            RejectReason::FetchFirst
        } else if w == "stale info" {
            RejectReason::StaleInfo
        } else if w.starts_with("atomic push failure") || w.starts_with("atomic transaction failed")
        {
            RejectReason::AtomicPushFailed
        } else if w.starts_with("failed to update ref") || w.starts_with("failed to lock") {
            RejectReason::FailedToUpdateRef
        } else {
            RejectReason::Other
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// The first rejection, as `<ref>: <reason>`.
    pub fn first_rejection(&self) -> Option<String> {
        self.refs
            .iter()
            .find(|r| r.status == RefStatus::Rejected)
            .map(|r| {
                format!(
                    "{}: {}",
                    r.name,
                    r.message
                        .as_deref()
                        .unwrap_or(r.reason.unwrap_or(RejectReason::Other).git_words())
                )
            })
    }
}

/// State shared by the attempts and settling reads of one push.
struct PushState {
    /// Per update: the old value every command carries (`None`: absent).
    expected: Option<Vec<Option<ObjectId>>>,
    /// The pack of the last attempt.
    pack: Option<PackStats>,
    /// Per update, what the last attempt decided before sending its
    /// commands (refused here, or up to date); `None` for a ref it sent.
    decided: Vec<Option<RefResult>>,
}

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

fn rejected_by_remote(u: &RefUpdate, old: Option<ObjectId>, words: &str) -> RefResult {
    RefResult {
        message: Some(words.to_string()),
        ..rejected(u, old, RejectReason::from_report(words))
    }
}

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

fn is_ancestor(repo: &gix::Repository, old: ObjectId, new: ObjectId) -> Option<bool> {
    let old = repo.find_object(old).ok()?.peel_to_commit().ok()?.id;
    let new = repo.find_object(new).ok()?.peel_to_commit().ok()?.id;
    if old == new {
        return Some(true);
    }
    // A bitmap of `new` answers at once (a walk of 1,000 commits is ~6 ms).
    if let Some(answer) = bitmap::reaches(repo.objects.store_ref().path(), &new, &old) {
        return Some(answer);
    }
    let walk = repo.rev_walk([new]).all().ok()?;
    for info in walk {
        if info.ok()?.id == old {
            return Some(true);
        }
    }
    Some(false)
}

impl GitClient {
    /// Push `updates` from `repo` to `url`, a write under the policy.
    ///
    /// Any ref rejected (by this client or the remote) makes the outcome
    /// `answered`, with the per-ref results kept as its value. A push whose
    /// answer was not read is settled by reading the destination refs, per
    /// ref: landed, not landed (read once more after half the reserve), or
    /// moved; it is **never pushed again**: anything but every ref landed
    /// ends `unknown` with `may_have_applied: true`, each ref with its own
    /// verdict.
    pub fn push(
        &self,
        url: &str,
        updates: &[RefUpdate],
        options: &PushOptions,
        repo: &gix::Repository,
        opts: &CallOptions,
    ) -> Result<Outcome<PushReport>, InputError> {
        let remote = Remote::parse(url)?;
        if updates.is_empty() {
            return Err(InputError::Push("nothing to push".into()));
        }
        // The input checks look at what is on disk now, too.
        let fresh = crate::client::fresh_view(repo);
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
        let state = RefCell::new(PushState {
            expected: None,
            pack: None,
            decided: Vec::new(),
        });
        let effect = if options.dry_run {
            Effect::Read
        } else {
            Effect::Write
        };
        let op = self.operation("push", effect, &remote, opts);
        // An attempt is tried again only when the remote never judged it;
        // one whose answer was lost is settled by reading and never sent
        // again (the policy's rule).
        let out = self.policy.run_write_judged(
            op,
            |ctx| {
                crate::error::shielded(ctx, |ctx| {
                    self.push_attempt(&remote, updates, options, repo, &state, opts, ctx)
                })
                .map_err(|e| e.to_attempt())
            },
            |rctx| self.push_settle(&remote, updates, options, &state, rctx),
            |report: &PushReport| {
                report.first_rejection().map(|first| Rejection {
                    error: AttemptError::answered(Phase::Reported.as_str(), first),
                    may_have_applied: report.refs.iter().any(|r| {
                        r.status == RefStatus::Ok && !r.is_up_to_date()
                            || r.status == RefStatus::Unknown
                    }),
                })
            },
        );
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn push_attempt(
        &self,
        remote: &Remote,
        updates: &[RefUpdate],
        options: &PushOptions,
        repo: &gix::Repository,
        state: &RefCell<PushState>,
        opts: &CallOptions,
        ctx: &mut AttemptCtx<'_>,
    ) -> Result<PushReport, GitError> {
        // A view opened now: the caller's handle may be weeks old (see
        // `fresh_view`).
        let fresh = crate::client::fresh_view(repo).map_err(|detail| GitError::Local {
            phase: Phase::Connect,
            detail,
        })?;
        let repo = &fresh;
        let mut dial = self.dial(remote, Service::ReceivePack, Protocol::V1, ctx, true);
        dial.ssh_config = crate::client::ssh_config(remote, repo);
        let mut s = Session::open(dial)?;
        // receive-pack needs no symrefs: parse the refs without the
        // `symref` capabilities, which gix-protocol cannot resolve when they
        // name a ref the advertisement does not list (dulwich's empty
        // repository) and then panics on.
        // receive-pack needs no symrefs, and of the refs only every value
        // (what the remote has) and the values of the refs pushed: read
        // them so, without a name kept per advertised ref.
        let names: Vec<&str> = updates.iter().map(|u| u.dst.as_str()).collect();
        let (capabilities, adv) = {
            use gix::protocol::transport::client::blocking_io::{
                SetServiceResponse, Transport as _,
            };
            let SetServiceResponse {
                capabilities, refs, ..
            } = s
                .transport
                .handshake(Service::ReceivePack, &[])
                .map_err(|e| read_fail(&s.meta, &crate::remote::redact(&e.to_string())))?;
            let adv = match refs {
                Some(mut r) => advert::read(&mut r, &names).map_err(|e| read_fail(&s.meta, &e))?,
                None => advert::Advertised::default(),
            };
            (capabilities, adv)
        };
        ctx.reached(Phase::Advertised.as_str());
        let caps = &capabilities;
        let unsupported = |detail: String| GitError::Unsupported {
            phase: Phase::Advertised,
            detail,
        };
        if let Some(format) = caps
            .capability("object-format")
            .and_then(|c| c.value().map(|v| v.to_string()))
        {
            if format != "sha1" {
                return Err(unsupported(format!(
                    "the remote's object format is {format}, ours is sha1"
                )));
            }
        }
        let advertised = &adv.named;
        let mut st = state.borrow_mut();
        let expected = st
            .expected
            .get_or_insert_with(|| {
                updates
                    .iter()
                    .map(|u| match u.expect {
                        Lease::Oid(x) => Some(x),
                        Lease::Absent => None,
                        Lease::Any => advertised.get(&u.dst).copied(),
                    })
                    .collect()
            })
            .clone();
        drop(st);
        let mut results: Vec<Option<RefResult>> = vec![None; updates.len()];
        let mut commands: Vec<(usize, Option<ObjectId>, Option<ObjectId>)> = Vec::new();
        for (i, u) in updates.iter().enumerate() {
            let cur = advertised.get(&u.dst).copied();
            if cur != expected[i] {
                results[i] = Some(rejected(u, expected[i], RejectReason::StaleInfo));
            } else if cur == u.src {
                results[i] = Some(ok(u, cur));
            } else if u.src.is_none() && !caps.contains("delete-refs") {
                return Err(unsupported(
                    "the remote does not allow deleting refs (no delete-refs)".into(),
                ));
            } else if u.src.is_none() && cur.is_none() {
                results[i] = Some(RefResult {
                    message: Some("remote ref does not exist".into()),
                    ..rejected(u, cur, RejectReason::Other)
                });
            } else if let (Some(old), Some(new), false, Lease::Any) =
                (cur, u.src, u.force, u.expect)
            {
                if !repo.has_object(old) {
                    results[i] = Some(rejected(u, cur, RejectReason::FetchFirst));
                } else if is_ancestor(repo, old, new) != Some(true) {
                    results[i] = Some(rejected(u, cur, RejectReason::NonFastForward));
                } else {
                    commands.push((i, cur, u.src));
                }
            } else {
                commands.push((i, cur, u.src));
            }
        }
        let any_local_rejection = results
            .iter()
            .flatten()
            .any(|r| r.status == RefStatus::Rejected);
        if options.atomic && any_local_rejection {
            for (i, old, _) in commands.drain(..) {
                results[i] = Some(rejected(&updates[i], old, RejectReason::AtomicPushFailed));
            }
        }
        let finish = |results: Vec<Option<RefResult>>, pack: Option<PackStats>| PushReport {
            refs: results
                .into_iter()
                .zip(updates)
                .map(|(r, u)| {
                    r.unwrap_or_else(|| RefResult {
                        message: Some("not reported".into()),
                        ..rejected(u, None, RejectReason::Other)
                    })
                })
                .collect(),
            pack,
        };
        if commands.is_empty() || options.dry_run {
            // Nothing to send (or a dry run: what would be sent, without
            // sending it): end the conversation as git does, with a flush.
            for (i, old, _) in &commands {
                results[*i] = Some(ok(&updates[*i], *old));
            }
            if let Ok(w) = s
                .transport
                .request(WriteMode::Binary, MessageKind::Flush, false)
            {
                let (mut w, _) = w.into_parts();
                let _ = encode::flush_to_write(&mut w);
                let _ = w.flush();
            }
            return Ok(finish(results, None));
        }
        if options.atomic && !caps.contains("atomic") {
            return Err(unsupported(
                "the remote does not support atomic pushes".into(),
            ));
        }
        if !options.push_options.is_empty() && !caps.contains("push-options") {
            return Err(unsupported(
                "the remote does not support push options".into(),
            ));
        }
        let report_v2 = caps.contains("report-status-v2");
        if !report_v2 && !caps.contains("report-status") {
            return Err(unsupported("the remote offers no report-status".into()));
        }
        let need_pack = commands.iter().any(|(_, _, new)| new.is_some());
        if need_pack && !caps.contains("ofs-delta") {
            return Err(unsupported(
                "the remote does not accept OFS deltas (no ofs-delta)".into(),
            ));
        }
        let sideband = caps.contains("side-band-64k");
        let mut want: Vec<String> = vec![if report_v2 {
            "report-status-v2"
        } else {
            "report-status"
        }
        .into()];
        if sideband {
            want.push("side-band-64k".into());
        }
        if caps.contains("quiet") {
            want.push("quiet".into());
        }
        if options.atomic {
            want.push("atomic".into());
        }
        if !options.push_options.is_empty() {
            want.push("push-options".into());
        }
        if caps.contains("object-format") {
            want.push("object-format=sha1".into());
        }
        want.push(format!("agent={}", self.agent));

        // Count before the first byte: a local failure leaves no half request.
        let counted = if need_pack {
            let new_tips: Vec<ObjectId> = commands.iter().filter_map(|(_, _, n)| *n).collect();
            // The pushed refs' old values first: their trees are the likely
            // bases of what changed (a repeat is dropped when counting).
            let mut remote_tips: Vec<ObjectId> =
                commands.iter().filter_map(|(_, old, _)| *old).collect();
            remote_tips.extend(adv.tips.iter().copied());
            Some(
                pack::count(
                    repo,
                    &new_tips,
                    &remote_tips,
                    !caps.contains("no-thin"),
                    ctx.cancel_flag().as_atomic(),
                )
                .map_err(|e| {
                    // Counting stops when the caller cancels: that is the
                    // caller's cancel, not local trouble.
                    if ctx.cancel_flag().is_cancelled() {
                        GitError::Cancelled {
                            phase: Phase::Advertised,
                            request_complete: false,
                        }
                    } else {
                        crate::local::local(Phase::Advertised, e)
                    }
                })?,
            )
        } else {
            None
        };

        state.borrow_mut().decided = results.clone();
        let zero = ObjectId::null(gix::hash::Kind::Sha1);
        let mut request = Vec::new();
        for (n, (i, old, new)) in commands.iter().enumerate() {
            let mut line = format!(
                "{} {} {}",
                old.unwrap_or(zero),
                new.unwrap_or(zero),
                updates[*i].dst
            )
            .into_bytes();
            if n == 0 {
                line.push(0);
                line.extend_from_slice(want.join(" ").as_bytes());
            }
            line.push(b'\n');
            encode::data_to_write(&line, &mut request).expect("writing to a Vec");
        }
        encode::flush_to_write(&mut request).expect("writing to a Vec");
        if !options.push_options.is_empty() {
            for o in &options.push_options {
                encode::data_to_write(format!("{o}\n").as_bytes(), &mut request)
                    .expect("writing to a Vec");
            }
            encode::flush_to_write(&mut request).expect("writing to a Vec");
        }

        let meta = &s.meta;
        let fatal: Arc<Mutex<Option<String>>> = Arc::default();
        let said: Arc<Mutex<Vec<String>>> = Arc::default();
        let writer = s
            .transport
            .request(WriteMode::Binary, MessageKind::Flush, false)
            .map_err(|e| meta.fail(Phase::Advertised, false, e))?;
        let (mut w, mut r) = writer.into_parts();
        w.write_all(&request)
            .and_then(|_| w.flush())
            .map_err(|e| meta.fail(Phase::Advertised, false, e))?;
        ctx.reached(Phase::CommandsSent.as_str());
        // The pack streams now: the watchdog lets a moving transfer run on.
        meta.wire.lock().moving = true;
        let mut phase = Phase::CommandsSent;
        let mut stats = None;
        if let Some(counted) = counted {
            let objects = counted.objects();
            if let Some(cb) = &opts.progress {
                cb(&crate::Progress {
                    stage: "counted".into(),
                    objects,
                    bytes: 0,
                });
            }
            let mut sending = pack::ProgressWriter::new(&mut w, objects, opts.progress.clone());
            let st = pack::write(counted, &mut sending).map_err(|e| {
                // The sink failing is a cut before the request was
                // complete, classed from the wire; anything else is local.
                e.into_git(Phase::CommandsSent, |sink| {
                    meta.fail(
                        Phase::CommandsSent,
                        false,
                        format!("writing the pack: {sink}"),
                    )
                })
            })?;
            w.flush()
                .map_err(|e| meta.fail(Phase::CommandsSent, false, e))?;
            tracing::debug!(objects = st.objects, bytes = st.bytes, "pack sent");
            if let Some(cb) = &opts.progress {
                cb(&crate::Progress {
                    stage: "sent".into(),
                    objects: st.objects,
                    bytes: st.bytes,
                });
            }
            stats = Some(st);
            phase = Phase::PackSent;
            ctx.reached(Phase::PackSent.as_str());
        }
        drop(w);
        // The request is complete: its last byte (pack trailer, or the
        // command flush for deletions only) was written.
        state.borrow_mut().pack = stats.clone();
        let complete = |meta: &crate::connect::Meta| !meta.wire.lock().http_connect_failed;
        if sideband {
            let fatal = Arc::clone(&fatal);
            let said = Arc::clone(&said);
            let progress = opts.progress.clone();
            r.set_progress_handler(Some(Box::new(move |is_err: bool, text: &[u8]| {
                let words = String::from_utf8_lossy(text).trim().to_string();
                if is_err {
                    fatal
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_or_insert(words);
                } else if !words.is_empty() {
                    // Side-band 2: a hook's words (we asked for `quiet`, so
                    // no progress), kept in order, a line each.
                    tracing::debug!(remote = %words, "remote said");
                    said.lock().unwrap_or_else(|p| p.into_inner()).extend(
                        words
                            .split(['\n', '\r'])
                            .map(str::trim_end)
                            .filter(|l| !l.is_empty())
                            .map(str::to_string),
                    );
                    if let Some(cb) = &progress {
                        cb(&crate::Progress {
                            stage: words,
                            objects: 0,
                            bytes: 0,
                        });
                    }
                }
                ControlFlow::Continue(())
            })));
        }
        let mut buf = Vec::new();
        let read = r.read_to_end(&mut buf);
        drop(r);
        for line in std::mem::take(&mut *said.lock().unwrap_or_else(|p| p.into_inner())) {
            ctx.remote_message(line);
        }
        if let Some(words) = fatal.lock().unwrap_or_else(|p| p.into_inner()).take() {
            meta.wire.lock().fatal.get_or_insert(words);
        }
        if let Err(e) = read {
            return Err(meta.fail(phase, complete(meta), e));
        }
        let parsed = if sideband {
            report::parse_sideband(&buf)
        } else {
            report::parse_plain(&buf)
        };
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                let st = meta.wire.lock();
                if let Some(words) = st.fatal.clone().or_else(|| st.err_line.clone()) {
                    return Err(GitError::Remote { phase, words });
                }
                return Err(GitError::Protocol {
                    phase,
                    request_complete: complete(meta),
                    detail: e.to_string(),
                });
            }
        };
        ctx.reached(Phase::Reported.as_str());
        let sent: HashMap<&str, (usize, Option<ObjectId>)> = commands
            .iter()
            .map(|(i, old, _)| (updates[*i].dst.as_str(), (*i, *old)))
            .collect();
        for (name, res) in &parsed.refs {
            let Some(&(i, old)) = sent.get(name.as_str()) else {
                return Err(GitError::Protocol {
                    phase: Phase::Reported,
                    request_complete: true,
                    detail: format!("the report names {name}, which was not pushed"),
                });
            };
            results[i] = Some(match res {
                Ok(()) => ok(&updates[i], old),
                Err(reason) => rejected_by_remote(&updates[i], old, reason),
            });
        }
        if let Err(unpack) = &parsed.unpack {
            for (i, old, _) in &commands {
                if results[*i]
                    .as_ref()
                    .is_none_or(|r| r.status == RefStatus::Ok)
                {
                    results[*i] = Some(RefResult {
                        message: Some(format!("unpacker error: {unpack}")),
                        ..rejected(&updates[*i], *old, RejectReason::Other)
                    });
                }
            }
        }
        if let Some((i, _, _)) = commands.iter().find(|(i, _, _)| results[*i].is_none()) {
            // The remote judged the request but its report is incomplete: what
            // it did is unknown, so it is settled by reading.
            return Err(GitError::Protocol {
                phase: Phase::Reported,
                request_complete: true,
                detail: format!("the report does not mention {}", updates[*i].dst),
            });
        }
        Ok(finish(results, stats))
    }

    fn push_settle(
        &self,
        remote: &Remote,
        updates: &[RefUpdate],
        options: &PushOptions,
        state: &RefCell<PushState>,
        rctx: &ReconcileCtx<'_>,
    ) -> Result<Settlement<PushReport>, AttemptError> {
        let (expected, decided, pack) = {
            let st = state.borrow();
            (st.expected.clone(), st.decided.clone(), st.pack.clone())
        };
        let Some(expected) = expected else {
            return Err(AttemptError::answered(
                "connect",
                "nothing was advertised: nothing to settle",
            ));
        };
        let prefixes: Vec<String> = updates.iter().map(|u| u.dst.clone()).collect();
        // A cancelled push is still settled: the read ignores the caller's
        // cancel flag and is bounded by this read's timeout (the attempt
        // timeout, capped by what remains).
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.ls_refs_once(
                remote,
                &prefixes,
                rctx.timeout,
                &sluice_policy::CancelFlag::new(),
                rctx.credential().map(|c| c.secret()),
            )
        }))
        .unwrap_or_else(|_| {
            Err(GitError::Protocol {
                phase: Phase::Connect,
                request_complete: true,
                detail: "the client failed on the server's answer to a settling read".into(),
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
                results.push(r);
                continue;
            }
            let mut r = ok(u, expected[i]);
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
            results.push(r);
        }
        let report = PushReport {
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
                    .find(|r| r.verdict == Some(Verdict::Moved))
                    .map(|r| format!("{}: {}", r.name, r.message.as_deref().unwrap_or("moved")))
                    .unwrap_or_else(|| "moved".into())
            };
            Settlement::moved(None, observed, cause).with_value(report)
        })
    }
}
