//! Shared helpers of the forge's integration tests: the exercise
//! bounds, clients against the fake forge, a scripted token source and a
//! tracing capture.
#![allow(dead_code)]

pub mod paged;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::SecretString;
use sluice_forge::{ForgeClient, RepoRef};
use sluice_policy::{Bounds, Credential, CredentialError, CredentialSource, Policy};
use sluice_testkit::fake_forge::FakeForge;

/// The exercise: two attempts, five seconds each, inside twelve.
pub fn exercise() -> Bounds {
    Bounds::new(Duration::from_secs(12), Duration::from_secs(5), 2)
}

/// The repository every test uses.
pub fn repo() -> RepoRef {
    RepoRef::new("octo", "repo")
}

/// `octo/repo`, as the fake forge names it.
pub const REPO: &str = "octo/repo";

/// A commit id.
pub const SHA: &str = "1111111111111111111111111111111111111111";

/// A policy whose settle pause is `settle`.
pub fn policy(settle: Duration) -> Arc<Policy> {
    Arc::new(Policy::builder().settle(settle).build())
}

/// A sleeper that records every pause the policy asks for, then sleeps it
/// (the forge's own pacing and deadlines run on the real clock).
#[derive(Default)]
pub struct RecordingSleeper(Mutex<Vec<Duration>>);

impl RecordingSleeper {
    /// Every pause asked for so far.
    pub fn pauses(&self) -> Vec<Duration> {
        self.0.lock().expect("pauses").clone()
    }
}

impl sluice_policy::Sleeper for RecordingSleeper {
    fn sleep(&self, dur: Duration, cancel: &std::sync::atomic::AtomicBool) {
        self.0.lock().expect("pauses").push(dur);
        sluice_policy::ThreadSleeper.sleep(dur, cancel);
    }
}

/// A policy whose pauses are recorded by the returned sleeper.
pub fn recorded_policy() -> (Arc<Policy>, Arc<RecordingSleeper>) {
    let sleeper = Arc::new(RecordingSleeper::default());
    let policy = Policy::builder()
        .settle(Duration::from_secs(1))
        .sleeper(sleeper.clone())
        .build();
    (Arc::new(policy), sleeper)
}

/// What the policy planned for an operation: every attempt's timeout and
/// every pause after one. It never exceeds the deadline.
pub fn planned_ms<T>(out: &sluice_policy::Outcome<T>) -> u64 {
    out.attempts
        .iter()
        .map(|a| a.timeout_ms + a.delay_ms.unwrap_or(0))
        .sum()
}

/// A client of `forge` under `policy`, with the exercise's bounds.
pub fn client_with(
    forge: &FakeForge,
    policy: Arc<Policy>,
    source: Option<Arc<dyn CredentialSource>>,
) -> ForgeClient {
    let mut b = ForgeClient::builder(&forge.url())
        .policy(policy)
        .bounds(exercise());
    if let Some(s) = source {
        b = b.credentials(s);
    }
    b.build().expect("client")
}

/// A client of `forge` with the default policy (settle shortened to 1 s).
pub fn client(forge: &FakeForge) -> ForgeClient {
    client_with(forge, policy(Duration::from_secs(1)), None)
}

/// A source handing out `tokens` in order (the last one again when they
/// run out), counting its calls.
pub struct Scripted {
    tokens: Vec<String>,
    calls: AtomicUsize,
}

impl Scripted {
    /// A source of these tokens.
    pub fn new(tokens: &[&str]) -> Arc<Self> {
        Arc::new(Scripted {
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            calls: AtomicUsize::new(0),
        })
    }

    /// How often a credential was bought.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl CredentialSource for Scripted {
    fn credential(&self) -> Result<Credential, CredentialError> {
        let i = self.calls.fetch_add(1, Ordering::SeqCst);
        let t = &self.tokens[i.min(self.tokens.len() - 1)];
        Ok(Credential::new(SecretString::from(t.clone())))
    }
}

/// Tracing output captured in memory.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("capture lock")).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Run `f` with every tracing event of this thread, at every level,
/// captured.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, String) {
    let out = Captured::default();
    let sub = tracing_subscriber::fmt()
        .with_writer(out.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let r = tracing::subscriber::with_default(sub, f);
    (r, out.text())
}

/// Milliseconds between two log instants.
pub fn gap(a: std::time::Instant, b: std::time::Instant) -> Duration {
    b.saturating_duration_since(a)
}
