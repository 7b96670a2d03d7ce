//! Progress of a fetch or push: the value a caller's callback receives, and
//! a gix progress sink that forwards gix's counters to that callback (at
//! most every 100 ms per task) and to `tracing`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::progress::{prodash, MessageLevel, Step, StepShared, Unit};

/// A caller's progress callback.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Progress of a fetch or push.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// What is happening (`receiving`, `counting`, `sending`, ...): this
    /// client's own stage names, never the remote's words (those are the
    /// outcome's `remote_messages`, shown as `remote:` lines).
    pub stage: String,
    /// Objects handled so far.
    pub objects: u64,
    /// Bytes moved so far.
    pub bytes: u64,
}

type Callback = ProgressCallback;

/// One progress task; children share the callback.
pub(crate) struct Sink {
    name: String,
    counter: StepShared,
    bytes: bool,
    callback: Option<Callback>,
    last: Mutex<Option<Instant>>,
}

impl Sink {
    pub fn new(callback: Option<Callback>) -> Self {
        Sink {
            name: "fetch".into(),
            counter: Arc::new(AtomicUsize::new(0)),
            bytes: false,
            callback,
            last: Mutex::new(None),
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
        self.bytes = unit
            .map(|u| format!("{}", u.display(1, None, None)).contains('B'))
            .unwrap_or(false);
        self.counter.store(0, Ordering::Relaxed);
    }
    fn set_name(&mut self, name: String) {
        self.name = name;
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
    fn add_child_with_id(&mut self, name: impl Into<String>, _id: prodash::progress::Id) -> Sink {
        self.add_child(name)
    }
}
