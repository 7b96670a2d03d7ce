//! The negotiator: which commits a fetch offers as `have`s, round by round.
//!
//! `consecutive` (git's default, `fetch.negotiationAlgorithm` unset) is
//! ours, written after git's own rules, for two differences that made a
//! fetch bring far more than it needed:
//!
//! * When the server acknowledges a commit, every commit already met
//!   below it is common (git marks all of them). gix's `consecutive` marks
//!   only its parents and grandparents, so a walk that had gone deeper
//!   kept offering commits the server was known to have — with a long
//!   history, the rounds ended before any other tip was offered.
//! * The old values of the refs the fetch updates are offered first,
//!   before the walk by commit date, and then (up to one first round's
//!   worth) their ancestors. They are where the new history most
//!   likely starts; git offers them in date order, which puts a
//!   remote-tracking ref whose commits carry older dates than the rest of
//!   the repository (any date a committer chose) behind the whole history.
//!   Offered first, the server acknowledges it in the first round and, the
//!   wanted commits reaching it, sends the pack at once.
//!
//! `skipping` and `noop` are gix's. `skipping` does not need the first
//! difference: its walk skips ahead exponentially, so six fetches of one
//! commit dated before a history of 1,000 receive exactly their own
//! objects with it too (the maintenance tests), the old values offered
//! first or not.

use std::collections::VecDeque;

use gix::negotiate::{Flags, Graph};
use gix::ObjectId;

type Queue = gix::revwalk::PriorityQueue<gix::date::SecondsSinceUnixEpoch, ObjectId>;

/// The negotiator `fetch.negotiationAlgorithm` names.
pub(crate) enum Negotiator {
    /// Ours (`consecutive`, the default).
    Consecutive(Consecutive),
    /// gix's (`skipping`, `noop`).
    Other(Box<dyn gix::negotiate::Negotiator>),
}

impl Negotiator {
    /// The one `repo`'s `fetch.negotiationAlgorithm` names (`consecutive`
    /// when unset or unknown).
    pub(crate) fn for_repo(repo: &gix::Repository) -> Self {
        let algo = repo
            .config_snapshot()
            .string("fetch.negotiationAlgorithm")
            .map(|s| s.to_vec());
        match algo.as_deref() {
            Some(b"skipping") => {
                Negotiator::Other(gix::negotiate::Algorithm::Skipping.into_negotiator())
            }
            Some(b"noop") => Negotiator::Other(gix::negotiate::Algorithm::Noop.into_negotiator()),
            _ => Negotiator::Consecutive(Consecutive::default()),
        }
    }

    /// A tip to offer before the walk by date (gix's negotiators: a tip).
    pub(crate) fn offer_first(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        match self {
            Negotiator::Consecutive(c) => c.offer_first(id, graph),
            Negotiator::Other(n) => n.add_tip(id, graph),
        }
    }

    fn inner(&mut self) -> &mut dyn gix::negotiate::Negotiator {
        match self {
            Negotiator::Consecutive(c) => c,
            Negotiator::Other(n) => n.as_mut(),
        }
    }
}

impl gix::negotiate::Negotiator for Negotiator {
    fn known_common(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        self.inner().known_common(id, graph)
    }

    fn add_tip(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        self.inner().add_tip(id, graph)
    }

    fn next_have(&mut self, graph: &mut Graph<'_, '_>) -> Option<gix::Result<ObjectId>> {
        self.inner().next_have(graph)
    }

    fn in_common_with_remote(
        &mut self,
        id: ObjectId,
        graph: &mut Graph<'_, '_>,
    ) -> gix::Result<bool> {
        self.inner().in_common_with_remote(id, graph)
    }
}

/// git's default negotiation: commits newest first from the tips, each
/// offered unless known common; a commit known common is not offered and
/// makes its ancestors common.
///
/// Kept true throughout: `non_common` counts the commits in the queue
/// (`SEEN`, not `POPPED`) that are not `COMMON`; the walk ends when it is 0.
pub(crate) struct Consecutive {
    queue: Queue,
    non_common: usize,
    /// Offered before the queue, in order (each also in the queue, where
    /// it is skipped once popped here).
    first: VecDeque<ObjectId>,
    /// Ancestors of the commits offered first that may still join them.
    first_more: usize,
}

/// How many ancestors of the fetch's own refs are offered before the walk
/// by date: one first round's worth (16 `have`s, git's and gix's first
/// window). A ref that moved by one commit since the last fetch has its
/// old value acknowledged in the first round; the round is filled from
/// that history instead of walking every commit newer than it first.
const FIRST_ANCESTORS: usize = 16;

impl Default for Consecutive {
    fn default() -> Self {
        Consecutive {
            queue: Queue::new(),
            non_common: 0,
            first: VecDeque::new(),
            first_more: FIRST_ANCESTORS,
        }
    }
}

impl Consecutive {
    /// Queue `id` with `mark` (which holds `SEEN`) unless it was queued
    /// before; a commit not here is left out.
    fn push(&mut self, id: ObjectId, mark: Flags, graph: &mut Graph<'_, '_>) -> gix::Result {
        let mut before = Flags::empty();
        if let Some(commit) = graph.get_or_insert_commit(id, |d| {
            before = d.flags;
            d.flags |= mark;
        })? {
            if !before.contains(Flags::SEEN) {
                self.queue.insert(commit.commit_time, id);
                if !commit.data.flags.contains(Flags::COMMON) {
                    self.non_common += 1;
                }
            }
        }
        Ok(())
    }

    /// Mark `id` (unless `ancestors_only`) and every ancestor of it met
    /// before common; the first ancestors not met are queued.
    fn mark_common(
        &mut self,
        id: ObjectId,
        ancestors_only: bool,
        graph: &mut Graph<'_, '_>,
    ) -> gix::Result {
        let Some(commit) = graph.get_or_insert_commit(id, |_| {})? else {
            return Ok(());
        };
        if commit.data.flags.contains(Flags::COMMON) {
            return Ok(());
        }
        let mut todo = Queue::new();
        todo.insert(commit.commit_time, id);
        if !ancestors_only {
            let flags = &mut commit.data.flags;
            if flags.contains(Flags::SEEN) && !flags.contains(Flags::POPPED) {
                self.non_common -= 1;
            }
            *flags |= Flags::COMMON;
        }
        while let Some(id) = todo.pop_value() {
            let Some(commit) = graph.get(&id) else {
                continue;
            };
            if !commit.data.flags.contains(Flags::SEEN) {
                self.push(id, Flags::SEEN, graph)?;
                continue;
            }
            for parent in commit.parents.clone() {
                let mut before = Flags::empty();
                let Some(p) = graph.get_or_insert_commit(parent, |d| {
                    before = d.flags;
                    d.flags |= Flags::COMMON;
                })?
                else {
                    continue;
                };
                if before.contains(Flags::COMMON) {
                    continue;
                }
                if before.contains(Flags::SEEN) && !before.contains(Flags::POPPED) {
                    self.non_common -= 1;
                }
                todo.insert(p.commit_time, parent);
            }
        }
        Ok(())
    }

    fn offer_first(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        self.push(id, Flags::SEEN, graph)?;
        if graph.get(&id).is_some() && !self.first.contains(&id) {
            self.first.push_back(id);
        }
        Ok(())
    }

    /// The next commit out of `first` (then `true`), then the queue;
    /// `None` when no commit not known common is left.
    fn pop(&mut self, graph: &Graph<'_, '_>) -> Option<(ObjectId, bool)> {
        let popped = |id: &ObjectId| {
            graph
                .get(id)
                .is_none_or(|c| c.data.flags.contains(Flags::POPPED))
        };
        while self.non_common > 0 {
            if let Some(id) = self.first.pop_front() {
                if !popped(&id) {
                    return Some((id, true));
                }
                continue;
            }
            let id = self.queue.pop_value()?;
            if !popped(&id) {
                return Some((id, false));
            }
        }
        None
    }

    fn next(&mut self, graph: &mut Graph<'_, '_>) -> gix::Result<Option<ObjectId>> {
        while let Some((id, from_first)) = self.pop(graph) {
            let Some(commit) = graph.get_mut(&id) else {
                continue;
            };
            commit.data.flags |= Flags::POPPED;
            let flags = commit.data.flags;
            let parents = commit.parents.clone();
            let common = flags.contains(Flags::COMMON);
            if !common {
                self.non_common -= 1;
            }
            // Known common: not offered, its ancestors common too. Common
            // through a remote ref: offered, its ancestors common.
            let (offer, mark) = if common {
                (false, Flags::COMMON | Flags::SEEN)
            } else if flags.contains(Flags::COMMON_REF) {
                (true, Flags::COMMON | Flags::SEEN)
            } else {
                (true, Flags::SEEN)
            };
            for parent in parents {
                self.push(parent, mark, graph)?;
                if mark.contains(Flags::COMMON) {
                    self.mark_common(parent, true, graph)?;
                } else if from_first && self.first_more > 0 {
                    // The own ref's history next, a round's worth.
                    self.first_more -= 1;
                    self.first.push_back(parent);
                }
            }
            if offer {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }
}

impl gix::negotiate::Negotiator for Consecutive {
    fn known_common(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        if graph
            .get(&id)
            .is_none_or(|c| !c.data.flags.contains(Flags::SEEN))
        {
            self.push(id, Flags::COMMON_REF | Flags::SEEN, graph)?;
            self.mark_common(id, true, graph)?;
        }
        Ok(())
    }

    fn add_tip(&mut self, id: ObjectId, graph: &mut Graph<'_, '_>) -> gix::Result {
        self.push(id, Flags::SEEN, graph)
    }

    fn next_have(&mut self, graph: &mut Graph<'_, '_>) -> Option<gix::Result<ObjectId>> {
        self.next(graph).transpose()
    }

    fn in_common_with_remote(
        &mut self,
        id: ObjectId,
        graph: &mut Graph<'_, '_>,
    ) -> gix::Result<bool> {
        let known = graph
            .get(&id)
            .is_some_and(|c| c.data.flags.contains(Flags::COMMON));
        self.mark_common(id, false, graph)?;
        Ok(known)
    }
}
