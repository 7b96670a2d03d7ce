//! Progress of a fetch or push: the value a caller's callback receives, and
//! a gix progress sink that forwards gix's counters to that callback (at
//! most every 100 ms per task) and to `tracing`.
//!
//! The remote's side-band 2 reaches gix's fetch as progress: gix names a
//! task after each line it cannot parse as git's progress (`Counting
//! objects: 50% (1/2)`), so a hook's or a server's words would become a
//! stage. Only git's own progress (one of its titles, then a count) is a
//! stage here ([`is_git_progress`]); every other line is the remote's
//! text, kept in the outcome's `remote_messages` and shown as `remote:`
//! lines.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::progress::{prodash, MessageLevel, Step, StepShared, Unit};

pub use sluice_policy::{Progress, ProgressCallback};

type Callback = ProgressCallback;

/// The titles of the progress git's servers send beside a fetch or a
/// push (pack-objects, index-pack, unpack-objects, receive-pack).
const GIT_TITLES: [&str; 8] = [
    "Enumerating objects",
    "Counting objects",
    "Compressing objects",
    "Writing objects",
    "Resolving deltas",
    "Unpacking objects",
    "Checking connectivity",
    "Checking objects",
];

/// Whether `line` (one line of the remote's side-band 2) is git's own
/// progress (`Enumerating objects: 4, done.`, `Counting objects: 50%
/// (1/2)`): one of git's titles, a colon, and a count or percentage. A
/// hook's `pre-receive: 50% done` is the remote's text.
pub(crate) fn is_git_progress(line: &str) -> bool {
    gix::protocol::RemoteProgress::from_bytes(line.as_bytes())
        .is_some_and(|p| is_git_title(&p.action.to_string()))
}

fn is_git_title(action: &str) -> bool {
    GIT_TITLES.contains(&action.trim())
}

/// The id gix gives the task of the remote's side-band 2.
fn remote_progress_id() -> prodash::progress::Id {
    gix::protocol::fetch::ProgressId::RemoteProgress.into()
}

/// One progress task; children share the callback.
pub(crate) struct Sink {
    name: String,
    counter: StepShared,
    bytes: bool,
    callback: Option<Callback>,
    last: Mutex<Option<Instant>>,
    /// The task of the remote's side-band 2: gix names it after every
    /// line; the name becomes the stage only when gix then starts a count
    /// (`init`), which it does for git's progress lines alone.
    remote: bool,
    /// The name gix gave last, not yet a stage.
    pending: Option<String>,
}

impl Sink {
    pub fn new(callback: Option<Callback>) -> Self {
        Sink {
            name: "fetch".into(),
            counter: Arc::new(AtomicUsize::new(0)),
            bytes: false,
            callback,
            last: Mutex::new(None),
            remote: false,
            pending: None,
        }
    }

    fn report(&self, force: bool) {
        let Some(cb) = &self.callback else { return };
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if !force && last.is_some_and(|t| now.duration_since(t) < Duration::from_millis(100)) {
            return;
        }
        *last = Some(now);
        let n = self.counter.load(Ordering::Relaxed) as u64;
        cb(&Progress {
            stage: self.name.clone(),
            objects: if self.bytes { 0 } else { n },
            bytes: if self.bytes { n } else { 0 },
        });
    }
}

impl prodash::Count for Sink {
    fn set(&self, step: Step) {
        self.counter.store(step, Ordering::Relaxed);
        self.report(false);
    }
    fn step(&self) -> Step {
        self.counter.load(Ordering::Relaxed)
    }
    fn inc_by(&self, step: Step) {
        self.counter.fetch_add(step, Ordering::Relaxed);
        self.report(false);
    }
    fn counter(&self) -> StepShared {
        Arc::clone(&self.counter)
    }
}

impl prodash::Progress for Sink {
    fn init(&mut self, _max: Option<Step>, unit: Option<Unit>) {
        if let Some(name) = self.pending.take() {
            // gix parses each side-band packet, not each line: a packet
            // holding a hook's line and then git's progress is named after
            // the hook's words. Only git's titles become stages.
            let action = name.split_once(": ").map_or(name.as_str(), |(_, a)| a);
            if is_git_title(action) {
                self.name = name;
            }
        }
        self.bytes = unit
            .map(|u| format!("{}", u.display(1, None, None)).contains('B'))
            .unwrap_or(false);
        self.counter.store(0, Ordering::Relaxed);
    }
    fn set_name(&mut self, name: String) {
        if self.remote {
            self.pending = Some(name);
        } else {
            self.name = name;
        }
    }
    fn name(&self) -> Option<String> {
        Some(self.name.clone())
    }
    fn id(&self) -> prodash::progress::Id {
        prodash::progress::UNKNOWN
    }
    fn message(&self, _level: MessageLevel, message: String) {
        tracing::debug!(task = %self.name, %message, "fetch progress");
        self.report(true);
    }
}

impl prodash::NestedProgress for Sink {
    type SubProgress = Sink;
    fn add_child(&mut self, name: impl Into<String>) -> Sink {
        let mut s = Sink::new(self.callback.clone());
        s.name = name.into();
        s
    }
    fn add_child_with_id(&mut self, name: impl Into<String>, id: prodash::progress::Id) -> Sink {
        let mut s = self.add_child(name);
        s.remote = id == remote_progress_id();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gits_own_progress_lines_are_progress() {
        assert!(is_git_progress("Enumerating objects: 4, done."));
        assert!(is_git_progress("Counting objects:  50% (2/4)"));
        assert!(is_git_progress("Resolving deltas: 100% (2/2), done."));
        assert!(!is_git_progress("pre-receive: checking your push..."));
        assert!(!is_git_progress("pre-receive: 50% done (1/2)"));
        assert!(!is_git_progress("Total 4 (delta 2), reused 0 (delta 0)"));
    }
}
