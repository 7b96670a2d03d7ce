//! One push attempt as typed steps, each a value the next one consumes
//! (rustls's transitions consume `self` too). Each is named for the phase
//! reached and says what it awaits:
//!
//! * [`Connected`] — a receive-pack session is open; awaits the
//!   advertisement ([`Connected::read_advertisement`], phase `advertised`);
//! * [`Advertised`] — capabilities and values read; awaits this client's
//!   decision ([`Advertised::decide`]: per ref refused here, up to date, or
//!   a command; the objects counted before the first byte is written);
//! * [`Ready`] — the commands decided and encoded; awaits their sending
//!   ([`Ready::send_commands`], phase `commands-sent`);
//! * [`CommandsSent`] — awaits the pack ([`CommandsSent::send_pack`], phase
//!   `pack-sent`: the request is complete);
//! * [`PackSent`] — awaits the report ([`PackSent::read_report`], phase
//!   `reported`);
//! * [`Reported`] — the per-ref results ([`Reported::results`]).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use gix::protocol::transport::client::blocking_io::ExtendedBufRead;
use gix::protocol::transport::client::{Capabilities, MessageKind, WriteMode};
use gix::protocol::transport::packetline::blocking_io::encode;
use gix::protocol::transport::{Protocol, Service};
use gix::ObjectId;

use super::advert;
use super::pack::write::{Counted, ProgressWriter};
use super::pack::{self, PackStats};
use super::report::{self, Report};
use super::{Attempted, Judged, Lease, PushJob, RefResult, RefStatus, RefUpdate, RejectReason};
use crate::attempt::Attempt;
use crate::connect::{ssh_config, Connector, Meta, Session};
use crate::error::{GitError, GitPhase};
use crate::progress::Progress;
use sluice_policy::remote_text::RemoteText;

/// Open the attempt's receive-pack session (phase `connect`).
pub(super) fn connect(
    connector: &Connector,
    job: &PushJob<'_>,
    repo: &gix::Repository,
    at: &Attempt<'_, '_>,
) -> Result<Session, GitError> {
    let mut dial = connector.dial(job.remote, Service::ReceivePack, Protocol::V1, at, true);
    dial.ssh_config = ssh_config(job.remote, repo);
    Session::open(dial)
}

/// A session open on a view of the repository: awaits the advertisement.
pub(super) struct Connected<'s> {
    s: &'s mut Session,
    repo: &'s gix::Repository,
}

/// The advertisement read: awaits this client's decision.
pub(super) struct Advertised<'s> {
    s: &'s mut Session,
    repo: &'s gix::Repository,
    caps: Capabilities,
    adv: advert::Advertised,
}

/// What [`Advertised::decide`] came to.
pub(super) enum Decided<'s> {
    /// Nothing to send (every ref refused here or up to date), or a dry
    /// run: the attempt's results, the conversation ended.
    Done(Attempted),
    /// Commands to send.
    Send(Box<Ready<'s>>),
}

/// One command: the update it carries out, the old value it names and the
/// new one (`None`: absent, a delete).
#[derive(Clone, Copy)]
struct Command {
    update: usize,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
}

/// What the attempt decided, carried to its report.
struct Plan {
    /// Per update: decided here (refused, up to date), or `None` while the
    /// remote's report has not answered it.
    results: Vec<Option<RefResult>>,
    /// The commands sent, in order.
    commands: Vec<Command>,
    /// The report comes in side-band 1.
    sideband: bool,
}

/// The commands decided and encoded, the objects counted: awaits the
/// sending of the commands.
pub(super) struct Ready<'s> {
    s: &'s mut Session,
    plan: Plan,
    /// The commands (and push options) as pkt-lines.
    request: Vec<u8>,
    /// The objects to send, when a pack is needed.
    counted: Option<Counted>,
}

/// The reader of the server's answer (side-band demultiplexed).
type Answer<'s> = Box<dyn ExtendedBufRead<'s> + Unpin + 's>;

/// What the server said beside the report while it was read: side-band 3
/// (fatal). Side-band 2 (a hook's words) is kept by the wire
/// ([`crate::wire::WireState::band2`]), within the caps of
/// [`sluice_policy::remote_text`]: a flood is counted, not kept.
#[derive(Clone, Default)]
struct Said {
    fatal: Arc<Mutex<Option<String>>>,
}

/// The most of report-status this client reads (side-band 1, or the bare
/// lines): 4 MiB, as girt caps it; a report past it is not one this
/// client can trust, and the push is settled by reading.
const REPORT_CAP: u64 = 4 << 20;

/// The commands written and flushed: awaits the pack.
pub(super) struct CommandsSent<'s> {
    meta: &'s Meta,
    w: Box<dyn Write + 's>,
    r: Answer<'s>,
    said: Said,
    plan: Plan,
    counted: Option<Counted>,
}

/// The request complete (the pack's trailer, or the commands' flush when
/// there is no pack): awaits the report.
pub(super) struct PackSent<'s> {
    meta: &'s Meta,
    r: Answer<'s>,
    said: Said,
    plan: Plan,
    stats: Option<PackStats>,
}

/// The report read and parsed.
pub(super) struct Reported {
    plan: Plan,
    report: Report,
    stats: Option<PackStats>,
}

impl<'s> Connected<'s> {
    /// A session just opened on `repo`'s view.
    pub fn new(s: &'s mut Session, repo: &'s gix::Repository) -> Self {
        Connected { s, repo }
    }

    /// Read receive-pack's advertisement: its capabilities, every value
    /// (what the remote has) and the values of the refs pushed — no name
    /// kept per advertised ref. receive-pack needs no symrefs: the refs are
    /// read without the `symref` capabilities, which gix-protocol cannot
    /// resolve when they name a ref the advertisement does not list
    /// (dulwich's empty repository) and then panics on.
    pub fn read_advertisement(
        self,
        job: &PushJob<'_>,
        at: &mut Attempt<'_, '_>,
    ) -> Result<Advertised<'s>, GitError> {
        use gix::protocol::transport::client::blocking_io::{SetServiceResponse, Transport as _};
        let names: Vec<&str> = job.updates.iter().map(|u| u.dst.as_str()).collect();
        let Connected { s, repo } = self;
        let (capabilities, adv) = {
            let SetServiceResponse {
                capabilities, refs, ..
            } = s
                .transport
                .handshake(Service::ReceivePack, &[])
                .map_err(|e| {
                    s.meta
                        .read_fail(sluice_policy::text::redact(&e.to_string()))
                })?;
            let adv = match refs {
                Some(mut r) => advert::read(&mut r, &names).map_err(|e| s.meta.read_fail(e))?,
                None => advert::Advertised::default(),
            };
            (capabilities, adv)
        };
        crate::error::check_format(&s.meta.wire.lock(), GitPhase::Advertised)?;
        at.reached(GitPhase::Advertised);
        Ok(Advertised {
            s,
            repo,
            caps: capabilities,
            adv,
        })
    }
}

impl<'s> Advertised<'s> {
    /// Decide each ref here where no pack is needed (a stale lease, a
    /// non-fast-forward, a ref already up to date, an atomic push with any
    /// of those), check the remote offers what the push needs, and count
    /// the objects before the first byte: a local failure leaves no half
    /// request.
    ///
    /// `expected` is, per update, the old value every command carries: the
    /// operation's first advertisement fixed it ([`Advertised::expected`]).
    pub fn decide(
        self,
        job: &PushJob<'_>,
        expected: &[Option<ObjectId>],
        agent: &str,
        at: &Attempt<'_, '_>,
    ) -> Result<Decided<'s>, GitError> {
        let caps = &self.caps;
        if let Some(format) = caps
            .capability("object-format")
            .and_then(|c| c.value().map(|v| v.to_string()))
            .filter(|f| f != crate::wire::SHA1)
        {
            return Err(crate::error::foreign_format(GitPhase::Advertised, &format));
        }
        let mut plan = self.plan(job, expected)?;
        if plan.commands.is_empty() || job.options.dry_run {
            // Nothing to send (or a dry run: what would be sent, without
            // sending it): end the conversation as git does — a flush on a
            // connection (git://, ssh://, file://), no request at all over
            // http(s), where a flush would be a POST of its own that
            // carries nothing (git's send-pack sends none either).
            for c in &plan.commands {
                plan.results[c.update] = Some(RefResult::ok(&job.updates[c.update], c.old));
            }
            let persists = gix::protocol::transport::client::TransportWithoutIO::connection_persists_across_multiple_requests(&*self.s.transport);
            if let Some(w) = persists
                .then(|| {
                    self.s
                        .transport
                        .request(WriteMode::Binary, MessageKind::Flush, false)
                        .ok()
                })
                .flatten()
            {
                let (mut w, _) = w.into_parts();
                let _ = encode::flush_to_write(&mut w);
                let _ = w.flush();
            }
            // Every ref decided here: a refusal is this client's, not the
            // remote's.
            let here = vec![true; plan.results.len()];
            return Ok(Decided::Done(finish(
                plan.results,
                &here,
                job.updates,
                None,
            )));
        }
        let need_pack = plan.commands.iter().any(|c| c.new.is_some());
        let want = wanted(caps, job, need_pack, agent)?;
        plan.sideband = caps.contains("side-band-64k");
        let counted = self.count(&plan, at)?;
        let request = encode_commands(&plan, job, &want);
        Ok(Decided::Send(Box::new(Ready {
            s: self.s,
            plan,
            request,
            counted,
        })))
    }

    /// Per update, the old value its command carries when this is the
    /// operation's first advertisement: the lease's, else what is
    /// advertised (`None`: absent).
    pub fn expected(&self, updates: &[RefUpdate]) -> Vec<Option<ObjectId>> {
        updates
            .iter()
            .map(|u| match u.expect {
                Lease::Oid(x) => Some(x),
                Lease::Absent => None,
                Lease::Any => self.adv.named.get(&u.dst).copied(),
            })
            .collect()
    }

    /// Per ref: refused here, up to date, or a command carrying the old
    /// value fixed on the operation's first advertisement (`expected`).
    fn plan(&self, job: &PushJob<'_>, expected: &[Option<ObjectId>]) -> Result<Plan, GitError> {
        let (updates, caps, advertised) = (job.updates, &self.caps, &self.adv.named);
        let mut results: Vec<Option<RefResult>> = vec![None; updates.len()];
        let mut commands = Vec::new();
        for (i, u) in updates.iter().enumerate() {
            let cur = advertised.get(&u.dst).copied();
            let command = Command {
                update: i,
                old: cur,
                new: u.src,
            };
            if cur != expected[i] {
                results[i] = Some(RefResult::rejected(u, expected[i], RejectReason::StaleInfo));
            } else if cur == u.src {
                results[i] = Some(RefResult::ok(u, cur));
            } else if u.src.is_none() && !caps.contains("delete-refs") {
                return Err(GitError::Unsupported {
                    phase: GitPhase::Advertised,
                    detail: "the remote does not allow deleting refs (no delete-refs)".into(),
                });
            } else if u.src.is_none() && cur.is_none() {
                results[i] = Some(RefResult {
                    message: Some("remote ref does not exist".into()),
                    ..RefResult::rejected(u, cur, RejectReason::Other)
                });
            } else if let (Some(old), Some(new), false, Lease::Any) =
                (cur, u.src, u.force, u.expect)
            {
                if !self.repo.has_object(old) {
                    results[i] = Some(RefResult::rejected(u, cur, RejectReason::FetchFirst));
                } else if is_ancestor(self.repo, old, new) != Some(true) {
                    results[i] = Some(RefResult::rejected(u, cur, RejectReason::NonFastForward));
                } else {
                    commands.push(command);
                }
            } else {
                commands.push(command);
            }
        }
        let any_local_rejection = results
            .iter()
            .flatten()
            .any(|r| r.status == RefStatus::Rejected);
        if job.options.atomic && any_local_rejection {
            for c in commands.drain(..) {
                results[c.update] = Some(RefResult::rejected(
                    &updates[c.update],
                    c.old,
                    RejectReason::AtomicPushFailed,
                ));
            }
        }
        Ok(Plan {
            results,
            commands,
            sideband: false,
        })
    }

    /// The objects the commands need (none for deletions only). Counting
    /// stops when the caller cancels: that is the caller's cancel, not
    /// local trouble.
    fn count(&self, plan: &Plan, at: &Attempt<'_, '_>) -> Result<Option<Counted>, GitError> {
        if !plan.commands.iter().any(|c| c.new.is_some()) {
            return Ok(None);
        }
        let new_tips: Vec<ObjectId> = plan.commands.iter().filter_map(|c| c.new).collect();
        // The pushed refs' old values first: their trees are the likely
        // bases of what changed (a repeat is dropped when counting).
        let mut remote_tips: Vec<ObjectId> = plan.commands.iter().filter_map(|c| c.old).collect();
        remote_tips.extend(self.adv.tips.iter().copied());
        pack::count::count(
            self.repo,
            &new_tips,
            &remote_tips,
            !self.caps.contains("no-thin"),
            at.cancel_flag().as_atomic(),
        )
        .map(Some)
        .map_err(|e| {
            // Counting stops when the caller cancels: that is the caller's
            // cancel, not local trouble.
            if at.cancel_flag().is_cancelled() {
                GitError::Cancelled {
                    phase: GitPhase::Advertised,
                    request_complete: false,
                }
            } else {
                let words = e.to_string();
                GitError::local(GitPhase::Advertised, e.into_cause(words))
            }
        })
    }
}

/// The capabilities this push asks for; the remote lacking one it needs
/// (atomic, push options, report-status, OFS deltas) is its answer.
fn wanted(
    caps: &Capabilities,
    job: &PushJob<'_>,
    need_pack: bool,
    agent: &str,
) -> Result<Vec<String>, GitError> {
    let unsupported = |detail: &str| GitError::Unsupported {
        phase: GitPhase::Advertised,
        detail: detail.into(),
    };
    let options = job.options;
    if options.atomic && !caps.contains("atomic") {
        return Err(unsupported("the remote does not support atomic pushes"));
    }
    if !options.push_options.is_empty() && !caps.contains("push-options") {
        return Err(unsupported("the remote does not support push options"));
    }
    let report_v2 = caps.contains("report-status-v2");
    if !report_v2 && !caps.contains("report-status") {
        return Err(unsupported("the remote offers no report-status"));
    }
    if need_pack && !caps.contains("ofs-delta") {
        return Err(unsupported(
            "the remote does not accept OFS deltas (no ofs-delta)",
        ));
    }
    let mut want: Vec<String> = vec![if report_v2 {
        "report-status-v2"
    } else {
        "report-status"
    }
    .into()];
    if caps.contains("side-band-64k") {
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
    want.push(format!("agent={agent}"));
    Ok(want)
}

/// The commands as pkt-lines (the capabilities after the first), a flush,
/// then the push options and a flush of their own.
fn encode_commands(plan: &Plan, job: &PushJob<'_>, want: &[String]) -> Vec<u8> {
    let zero = ObjectId::null(gix::hash::Kind::Sha1);
    let mut request = Vec::new();
    for (n, c) in plan.commands.iter().enumerate() {
        let mut line = format!(
            "{} {} {}",
            c.old.unwrap_or(zero),
            c.new.unwrap_or(zero),
            job.updates[c.update].dst
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
    if !job.options.push_options.is_empty() {
        for o in &job.options.push_options {
            encode::data_to_write(format!("{o}\n").as_bytes(), &mut request)
                .expect("writing to a Vec");
        }
        encode::flush_to_write(&mut request).expect("writing to a Vec");
    }
    request
}

impl<'s> Ready<'s> {
    /// Per update, what was decided here (refused, or up to date); `None`
    /// for a ref whose command is to be sent.
    pub fn decided(&self) -> &[Option<RefResult>] {
        &self.plan.results
    }

    /// Write the commands and flush them (phase `commands-sent`); the pack
    /// streams next, so the watchdog lets a moving transfer run on.
    pub fn send_commands(self, at: &mut Attempt<'_, '_>) -> Result<CommandsSent<'s>, GitError> {
        let Session { transport, meta } = self.s;
        let meta: &'s Meta = meta;
        let writer = transport
            .request(WriteMode::Binary, MessageKind::Flush, false)
            .map_err(|e| meta.fail(GitPhase::Advertised, false, e))?;
        let (mut w, mut r) = writer.into_parts();
        w.write_all(&self.request)
            .and_then(|_| w.flush())
            .map_err(|e| meta.fail(GitPhase::Advertised, false, e))?;
        at.reached(GitPhase::CommandsSent);
        meta.wire.lock().moving = true;
        let said = Said::default();
        if self.plan.sideband {
            meta.wire.lock().band2 = Some(RemoteText::default());
            r.set_progress_handler(Some(sideband_handler(&said)));
        }
        Ok(CommandsSent {
            meta,
            w,
            r,
            said,
            plan: self.plan,
            counted: self.counted,
        })
    }
}

/// Side-band 3 (fatal) is kept on the wire. Side-band 2 (a hook's words:
/// we asked for `quiet`, so no progress) is only traced here: the wire
/// keeps it for the outcome's remote messages, a line each (a `\r` ends a
/// line as a newline does), bounded; it never reaches the caller's
/// progress, whose stages are this client's own.
fn sideband_handler<'s>(
    said: &Said,
) -> gix::protocol::transport::client::blocking_io::HandleProgress<'s> {
    let Said { fatal } = said.clone();
    Box::new(move |is_err: bool, text: &[u8]| {
        if is_err {
            let words = String::from_utf8_lossy(text).trim().to_string();
            fatal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| sluice_policy::remote_text::bounded_reason(&words));
        } else if !text.is_empty() {
            // Kept by the wire, which sees where lines end.
            tracing::debug!(remote = %String::from_utf8_lossy(text).trim(), "remote said");
        }
        ControlFlow::Continue(())
    })
}

impl<'s> CommandsSent<'s> {
    /// Write the pack (none for deletions only): phase `pack-sent`. Its
    /// last byte (or, without a pack, the commands' flush) completes the
    /// request.
    pub fn send_pack(
        self,
        job: &PushJob<'_>,
        at: &mut Attempt<'_, '_>,
    ) -> Result<PackSent<'s>, GitError> {
        let CommandsSent {
            meta,
            mut w,
            r,
            said,
            plan,
            counted,
        } = self;
        let mut stats = None;
        if let Some(counted) = counted {
            let objects = counted.objects();
            let progress = job.opts.progress_callback();
            if let Some(cb) = progress {
                cb(&Progress {
                    stage: "counted".into(),
                    objects,
                    bytes: 0,
                });
            }
            let mut sending = ProgressWriter::new(&mut w, objects, progress.cloned());
            let st = pack::write::write(counted, &mut sending).map_err(|e| {
                // The sink failing is a cut before the request was
                // complete, classed from the wire; anything else is local.
                e.into_git(GitPhase::CommandsSent, |sink| {
                    meta.fail(
                        GitPhase::CommandsSent,
                        false,
                        format!("writing the pack: {sink}"),
                    )
                })
            })?;
            w.flush()
                .map_err(|e| meta.fail(GitPhase::CommandsSent, false, e))?;
            tracing::debug!(objects = st.objects, bytes = st.bytes, "pack sent");
            if let Some(cb) = progress {
                cb(&Progress {
                    stage: "sent".into(),
                    objects: st.objects,
                    bytes: st.bytes,
                });
            }
            stats = Some(st);
            at.reached(GitPhase::PackSent);
        }
        drop(w);
        // The request is complete (the pack's last byte, or the commands'
        // flush without a pack): what the server sends from here (a hook's
        // side-band 2, however much) is not held to the advertisement's
        // limit, only to the caps on what is kept.
        meta.wire.lock().request_complete = true;
        Ok(PackSent {
            meta,
            r,
            said,
            plan,
            stats,
        })
    }
}

impl PackSent<'_> {
    /// The pack sent (`None`: the commands needed none).
    pub fn pack(&self) -> Option<&PackStats> {
        self.stats.as_ref()
    }

    /// Read the report to its end and parse it (phase `reported`). What
    /// the server said beside it is kept; a read that fails is classed
    /// from the wire at the phase reached, the request complete unless
    /// the connection never was made (HTTP).
    pub fn read_report(self, at: &mut Attempt<'_, '_>) -> Result<Reported, GitError> {
        let PackSent {
            meta,
            mut r,
            said,
            plan,
            stats,
        } = self;
        let phase = at.phase();
        let mut buf = Vec::new();
        let read = (&mut r).take(REPORT_CAP + 1).read_to_end(&mut buf);
        drop(r);
        let (lines, dropped) = meta
            .wire
            .lock()
            .band2
            .take()
            .unwrap_or_default()
            .into_parts();
        for line in lines {
            at.remote_message(line);
        }
        at.remote_messages_dropped(dropped);
        if let Some(words) = said.fatal.lock().unwrap_or_else(|p| p.into_inner()).take() {
            meta.wire.lock().fatal.get_or_insert(words);
        }
        // Over HTTP the request goes out when its answer is first read: a
        // connection that failed then never carried it.
        let complete = !meta.wire.lock().http_connect_failed;
        if let Err(e) = read {
            return Err(meta.fail(phase, complete, e));
        }
        if buf.len() as u64 > REPORT_CAP {
            // The request was complete: what the remote did is unknown.
            return Err(GitError::Protocol {
                phase,
                request_complete: complete,
                detail: format!("the report runs past {REPORT_CAP} bytes"),
            });
        }
        let parsed = if plan.sideband {
            report::parse_sideband(&buf)
        } else {
            report::parse_plain(&buf)
        };
        let report = parsed.map_err(|e| {
            let st = meta.wire.lock();
            match st.fatal.clone().or_else(|| st.err_line.clone()) {
                Some(words) => GitError::Remote { phase, words },
                None => GitError::Protocol {
                    phase,
                    request_complete: complete,
                    detail: e.to_string(),
                },
            }
        })?;
        at.reached(GitPhase::Reported);
        Ok(Reported {
            plan,
            report,
            stats,
        })
    }
}

impl Reported {
    /// Each ref's result: the report's `ok`/`ng`, an unpack error on every
    /// ref not already refused. A report that names a ref not pushed, or
    /// leaves one out, is a protocol error after a complete request: what
    /// the remote did is unknown, so it is settled by reading.
    pub fn results(self, job: &PushJob<'_>) -> Result<Attempted, GitError> {
        let Reported {
            plan,
            report,
            stats,
        } = self;
        let (updates, mut results) = (job.updates, plan.results);
        // Decided here: every ref the remote's report does not answer.
        let here: Vec<bool> = results.iter().map(Option::is_some).collect();
        let sent: HashMap<&str, (usize, Option<ObjectId>)> = plan
            .commands
            .iter()
            .map(|c| (updates[c.update].dst.as_str(), (c.update, c.old)))
            .collect();
        for (name, res) in &report.refs {
            let Some(&(i, old)) = sent.get(name.as_str()) else {
                return Err(GitError::Protocol {
                    phase: GitPhase::Reported,
                    request_complete: true,
                    detail: format!("the report names {name}, which was not pushed"),
                });
            };
            results[i] = Some(match res {
                Ok(()) => RefResult::ok(&updates[i], old),
                Err(reason) => RefResult::rejected_by_remote(&updates[i], old, reason),
            });
        }
        if let Err(unpack) = &report.unpack {
            for c in &plan.commands {
                if results[c.update]
                    .as_ref()
                    .is_none_or(|r| r.status == RefStatus::Ok)
                {
                    results[c.update] = Some(RefResult {
                        message: Some(format!("unpacker error: {unpack}")),
                        ..RefResult::rejected(&updates[c.update], c.old, RejectReason::Other)
                    });
                }
            }
        }
        if let Some(c) = plan.commands.iter().find(|c| results[c.update].is_none()) {
            // The remote judged the request but its report is incomplete: what
            // it did is unknown, so it is settled by reading.
            return Err(GitError::Protocol {
                phase: GitPhase::Reported,
                request_complete: true,
                detail: format!("the report does not mention {}", updates[c.update].dst),
            });
        }
        Ok(finish(results, &here, updates, stats))
    }
}

/// The attempt's results: every update's, with whether it was decided
/// here (`here`); one the remote never answered shown as "not reported".
fn finish(
    results: Vec<Option<RefResult>>,
    here: &[bool],
    updates: &[RefUpdate],
    pack: Option<PackStats>,
) -> Attempted {
    Attempted {
        refs: results
            .into_iter()
            .zip(updates)
            .zip(here)
            .map(|((r, u), &here)| Judged {
                result: r.unwrap_or_else(|| RefResult {
                    message: Some("not reported".into()),
                    ..RefResult::rejected(u, None, RejectReason::Other)
                }),
                here,
            })
            .collect(),
        pack,
    }
}

/// Whether `old` is an ancestor of `new` (both peeled to commits); `None`
/// when either cannot be read.
fn is_ancestor(repo: &gix::Repository, old: ObjectId, new: ObjectId) -> Option<bool> {
    let old = repo.find_object(old).ok()?.peel_to_commit().ok()?.id;
    let new = repo.find_object(new).ok()?.peel_to_commit().ok()?.id;
    if old == new {
        return Some(true);
    }
    // A bitmap of `new` answers at once (a walk of 1,000 commits is ~6 ms).
    if let Some(answer) = super::bitmap::reaches(repo.objects.store_ref().path(), &new, &old) {
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
