//! The local side of a fetch: the refs the refspecs map to, updated the way
//! `git fetch` does, in one transaction whose every edit names the value it
//! expects to replace.
//!
//! * a ref that does not exist is created;
//! * a ref already at the fetched value is left alone;
//! * a ref under `refs/tags/` moves only through a forced (`+`) refspec, and
//!   is then a tag update (git's `t [tag update]`), whatever the ancestry;
//! * any other ref's status is decided by ancestry, with or without `+`: a
//!   fast-forward when its old commit is an ancestor of the new one (reflog
//!   `fast-forward`), else forced (reflog `forced-update`) when the refspec
//!   has `+`, else refused as a non-fast-forward;
//! * the branch checked out in a non-bare repository is never written;
//! * a refused update is skipped, the rest go ahead. Every mapping gets its
//!   result ([`RefOutcome`]), and nothing is reported as written that the
//!   transaction did not write.

use gix::bstr::{BString, ByteSlice};
use gix::protocol::fetch::RefMap;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::Target;

/// The reflog message's prefix.
const ACTION: &str = "sluice-remote fetch";

/// What happened to one mapping's local ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchStatus {
    /// The local ref did not exist and was created.
    New,
    /// The local ref moved forward: its old commit is an ancestor of the
    /// new one (with or without `+` in the refspec).
    FastForward,
    /// A forced (`+`) refspec moved it to a commit its old value is not an
    /// ancestor of.
    Forced,
    /// A forced (`+`) refspec moved a ref under `refs/tags/` (git's
    /// `t [tag update]`; without `+` a moved tag is rejected).
    TagUpdate,
    /// The local ref already held the fetched value (or the refspec names
    /// no local ref: nothing was written).
    UpToDate,
    /// Refused: see the result's reason. The local ref is unchanged.
    Rejected,
    /// `--prune`: the local ref was in a refspec's destination space and
    /// its remote ref is gone, so it was deleted.
    Pruned,
}

impl FetchStatus {
    /// The kebab-case name of the JSON contract.
    pub const fn as_str(self) -> &'static str {
        match self {
            FetchStatus::New => "new",
            FetchStatus::FastForward => "fast-forward",
            FetchStatus::Forced => "forced",
            FetchStatus::TagUpdate => "tag-update",
            FetchStatus::UpToDate => "up-to-date",
            FetchStatus::Rejected => "rejected",
            FetchStatus::Pruned => "pruned",
        }
    }
}

/// One mapping's result, in the order of the ref map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefOutcome {
    /// The local ref (`None`: the refspec names none).
    pub local: Option<String>,
    /// Its value before the fetch.
    pub old: Option<gix::ObjectId>,
    pub status: FetchStatus,
    /// Why it was refused, in git's words.
    pub reason: Option<String>,
}

/// git's tag following (`git fetch` without `--tags` or `--no-tags`):
/// a tag the fetch did not ask for comes along only when the local
/// repository has no ref of that name and the tag's object is here once
/// the pack is stored (the history fetched reached it, or the server sent
/// it with `include-tag`). A followed tag therefore never clobbers an
/// existing tag, whatever the server moved it to, and never fails the
/// fetch; a tag an explicit refspec (or `--tags`) names keeps git's rules
/// ([`update`]).
pub(crate) fn keep_followed(map: &mut RefMap, repo: &gix::Repository) {
    map.mappings.retain(|m| {
        if !matches!(
            m.spec_index,
            gix::protocol::fetch::refmap::SpecIndex::Implicit(_)
        ) {
            return true;
        }
        let here = m.remote.as_id().is_some_and(|id| repo.has_object(id));
        let exists = m.local.as_ref().is_some_and(|l| {
            repo.try_find_reference(l.as_bstr())
                .ok()
                .flatten()
                .is_some()
        });
        here && !exists
    });
}

/// git's opportunistic remote-tracking updates (`git fetch origin main`
/// also moves `origin/main`): for every ref the caller's refspecs fetched,
/// the remote-tracking ref the named remote's `fetch` lines (`tracking`)
/// map it to, as one more mapping under that line (so its `+` decides
/// force). A local ref already mapped is not mapped twice. The lines join
/// the map's implicit refspecs; call after [`keep_followed`].
pub(crate) fn add_tracking(map: &mut RefMap, tracking: &[gix::refspec::RefSpec]) {
    use gix::protocol::fetch::refmap::{Mapping, SpecIndex};
    let mut added = Vec::new();
    for (k, spec) in tracking.iter().enumerate() {
        let gix::refspec::Instruction::Fetch(gix::refspec::instruction::Fetch::AndUpdate {
            src,
            dst,
            ..
        }) = spec.to_ref().instruction()
        else {
            continue;
        };
        for m in &map.mappings {
            if !matches!(m.spec_index, SpecIndex::ExplicitInRemote(_)) {
                continue;
            }
            let gix::protocol::fetch::refmap::Source::Ref(r) = &m.remote else {
                continue;
            };
            let Some(local) = crate::refspec::map_through(
                src.as_bytes(),
                dst.as_bytes(),
                r.unpack().0.as_bytes(),
            ) else {
                continue;
            };
            let taken =
                |l: &Option<BString>| l.as_ref().is_some_and(|l| l.as_slice() == local.as_slice());
            if map.mappings.iter().any(|m| taken(&m.local))
                || added.iter().any(|m: &Mapping| taken(&m.local))
            {
                continue;
            }
            added.push(Mapping {
                remote: m.remote.clone(),
                local: Some(BString::from(local)),
                spec_index: SpecIndex::Implicit(map.extra_refspecs.len() + k),
            });
        }
    }
    map.extra_refspecs.extend(tracking.iter().cloned());
    map.mappings.extend(added);
}

/// The branch a non-bare repository has checked out (`None` when bare, or
/// HEAD is detached).
fn checked_out(repo: &gix::Repository) -> Option<gix::refs::FullName> {
    if repo.is_bare() || repo.workdir().is_none() {
        return None;
    }
    repo.head_name().ok().flatten()
}

/// What the edit of `name` expects to replace, whether it goes through a
/// symbolic ref, the reflog's words for a new ref, and the value it holds.
fn current(
    repo: &gix::Repository,
    name: &gix::refs::FullName,
    is_tag: bool,
) -> gix::Result<(PreviousValue, bool, &'static str, Option<gix::ObjectId>)> {
    Ok(match repo.try_find_reference(name.as_ref())? {
        None => (
            PreviousValue::MustNotExist,
            false,
            if is_tag {
                "storing tag"
            } else {
                "storing head"
            },
            None,
        ),
        Some(r) => match r.target().try_id().map(|id| id.to_owned()) {
            Some(old) => (
                PreviousValue::MustExistAndMatch(Target::Object(old)),
                false,
                "",
                Some(old),
            ),
            // A symbolic local ref: its target is what moves.
            None => {
                let old = r.clone().into_fully_peeled_id().ok().map(|id| id.detach());
                (PreviousValue::MustExist, true, "", old)
            }
        },
    })
}

/// Update the refs `map` names; one result per mapping that has an object,
/// in the map's order.
pub(crate) fn update(repo: &gix::Repository, map: &RefMap) -> gix::Result<Vec<RefOutcome>> {
    let mut edits = Vec::new();
    let mut results = Vec::new();
    let head = checked_out(repo);
    for m in &map.mappings {
        let Some(new) = m.remote.as_id() else {
            continue;
        };
        let Some(local) = m.local.as_ref() else {
            results.push(RefOutcome {
                local: None,
                old: None,
                status: FetchStatus::UpToDate,
                reason: None,
            });
            continue;
        };
        let new = new.to_owned();
        let force = m
            .spec_index
            .get(&map.refspecs, &map.extra_refspecs)
            .is_some_and(|s| s.allow_non_fast_forward());
        let name: gix::refs::FullName = local
            .as_bstr()
            .try_into()
            .map_err(|e| gix_error::message!("invalid local ref {local}: {e}"))?;
        let is_tag = name.as_bstr().starts_with(b"refs/tags/");
        let (expected, deref, context, old) = current(repo, &name, is_tag)?;
        let refuse = |why: String| RefOutcome {
            local: Some(local.to_string()),
            old,
            status: FetchStatus::Rejected,
            reason: Some(why),
        };
        if old != Some(new) && head.as_ref().is_some_and(|h| h.as_bstr() == name.as_bstr()) {
            results.push(refuse(format!(
                "refusing to fetch into branch '{name}' checked out in a non-bare repository"
            )));
            continue;
        }
        let (context, status) = match old {
            None => (context, FetchStatus::New),
            Some(old) if old == new => {
                results.push(RefOutcome {
                    local: Some(local.to_string()),
                    old: Some(old),
                    status: FetchStatus::UpToDate,
                    reason: None,
                });
                continue;
            }
            // git looks at a tag's name before its ancestry: moving one
            // takes `+`, and is a tag update either way.
            Some(_) if is_tag && force => ("updating tag", FetchStatus::TagUpdate),
            Some(_) if is_tag => {
                results.push(refuse("would clobber existing tag".into()));
                continue;
            }
            Some(old) if is_ancestor(repo, old, new) => ("fast-forward", FetchStatus::FastForward),
            Some(_) if force => ("forced-update", FetchStatus::Forced),
            Some(_) => {
                results.push(refuse("non-fast-forward".into()));
                continue;
            }
        };
        results.push(RefOutcome {
            local: Some(local.to_string()),
            old,
            status,
            reason: None,
        });
        edits.push(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: BString::from(format!("{ACTION}: {context}")),
                },
                expected,
                new: Target::Object(new),
            },
            name,
            deref,
        });
    }
    for r in results.iter().filter(|r| r.status == FetchStatus::Rejected) {
        tracing::info!(local = ?r.local, why = ?r.reason, "fetch left a ref alone");
    }
    if !edits.is_empty() {
        write(repo, edits)?;
    }
    Ok(results)
}

/// Write `edits` in one transaction, as the repository's committer (or
/// `sluice-remote` when none is configured).
fn write(repo: &gix::Repository, edits: Vec<RefEdit>) -> gix::Result<()> {
    let fallback_time = format!(
        "{} +0000",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    let committer = match repo.committer() {
        Some(Ok(c)) => c,
        _ => gix::actor::SignatureRef {
            name: "sluice-remote".into(),
            email: "sluice-remote@localhost".into(),
            time: &fallback_time,
        },
    };
    // One transaction: all written or none (an error then reports
    // nothing as written). gix waits on a held ref lock as git does
    // (core.filesRefLockTimeout, core.packedRefsTimeout); unset, the wait
    // for a loose ref's lock is a second here, not git's 100 ms: a service
    // runs many fetches into one repository at once, and they all take the
    // same followed tags' locks.
    let patient;
    let repo = match patient_with_locks(repo) {
        Some(r) => {
            patient = r;
            &patient
        }
        None => repo,
    };
    repo.edit_references_as(edits, Some(committer))?;
    Ok(())
}

/// How long a ref edit waits for a loose ref's lock when the configuration
/// does not say (`core.filesRefLockTimeout`, in milliseconds).
const REF_LOCK_WAIT_MS: &str = "1000";

/// A handle on `repo` whose ref edits wait [`REF_LOCK_WAIT_MS`] for a held
/// lock, when `core.filesRefLockTimeout` is not set; `None` when it is (the
/// configured wait stands) or the value cannot be set.
fn patient_with_locks(repo: &gix::Repository) -> Option<gix::Repository> {
    use gix::config::tree::Core;
    if repo
        .config_snapshot()
        .integer("core.filesRefLockTimeout")
        .is_some()
    {
        return None;
    }
    let mut r = repo.clone();
    let mut config = r.config_snapshot_mut();
    config
        .set_value(&Core::FILES_REF_LOCK_TIMEOUT, REF_LOCK_WAIT_MS)
        .ok()?;
    config.commit().ok()?;
    Some(r)
}

/// A local ref `--prune` deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrunedRef {
    /// The remote ref it stood for, which the remote no longer has.
    pub remote: String,
    /// The local ref deleted.
    pub local: String,
    /// Its value before.
    pub old: gix::ObjectId,
}

/// The local refs in the destination space of `specs`' glob refspecs (a
/// `*` on both sides) whose remote ref, mapped back through the refspec,
/// the remote did not advertise: `git fetch --prune`'s stale refs. A
/// symbolic ref (`refs/remotes/origin/HEAD`) is never pruned. Deleted in one
/// transaction, each edit expecting the value read; returns what went.
pub(crate) fn prune(
    repo: &gix::Repository,
    map: &RefMap,
    specs: &[gix::refspec::RefSpec],
) -> gix::Result<Vec<PrunedRef>> {
    let advertised: std::collections::HashSet<&[u8]> = map
        .remote_refs
        .iter()
        .map(|r| r.unpack().0.as_bytes())
        .collect();
    let written: std::collections::HashSet<&[u8]> = map
        .mappings
        .iter()
        .filter_map(|m| m.local.as_ref().map(|l| l.as_bytes()))
        .collect();
    let mut stale: Vec<PrunedRef> = Vec::new();
    for spec in specs {
        let gix::refspec::Instruction::Fetch(gix::refspec::instruction::Fetch::AndUpdate {
            src,
            dst,
            ..
        }) = spec.to_ref().instruction()
        else {
            continue;
        };
        // Only glob refspecs prune: a refspec naming one ref whose source is
        // gone fails the fetch before this.
        let (Some((dp, _)), true) = (dst.split_once_str("*"), src.contains_str("*")) else {
            continue;
        };
        let prefix = dp.to_str().map_err(|e| gix_error::message!("{e}"))?;
        let platform = repo.references()?;
        for r in platform.prefixed(prefix)? {
            let r = r?;
            let name = r.name().as_bstr();
            let Some(remote) =
                crate::refspec::map_through(dst.as_bytes(), src.as_bytes(), name.as_bytes())
            else {
                continue;
            };
            let Some(old) = r.target().try_id().map(|id| id.to_owned()) else {
                continue;
            };
            if advertised.contains(remote.as_slice())
                || written.contains(name.as_bytes())
                || stale.iter().any(|p| p.local.as_bytes() == name.as_bytes())
            {
                continue;
            }
            stale.push(PrunedRef {
                remote: remote.as_bstr().to_string(),
                local: name.to_string(),
                old,
            });
        }
    }
    if stale.is_empty() {
        return Ok(stale);
    }
    let mut edits = Vec::with_capacity(stale.len());
    for p in &stale {
        edits.push(RefEdit {
            change: Change::Delete {
                expected: PreviousValue::MustExistAndMatch(Target::Object(p.old)),
                log: RefLog::AndReference,
            },
            name: p
                .local
                .as_str()
                .try_into()
                .map_err(|e| gix_error::message!("invalid local ref {}: {e}", p.local))?,
            deref: false,
        });
    }
    repo.edit_references(edits)?;
    Ok(stale)
}

/// `old` is an ancestor of (or equal to) `new`; anything that is not a
/// pair of commits is not.
fn is_ancestor(repo: &gix::Repository, old: gix::ObjectId, new: gix::ObjectId) -> bool {
    repo.merge_base(old, new)
        .ok()
        .flatten()
        .is_some_and(|base| base.detach() == old)
}
