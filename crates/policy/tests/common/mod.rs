//! Helpers shared by the policy's integration tests: a policy on a
//! [`ManualClock`] (clock and sleeper at once), a recorder of every call a
//! stub operation receives, and a counting credential source.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_policy::secrecy::{ExposeSecret, SecretString};
use sluice_policy::{
    AttemptCtx, Bounds, Clock, Credential, CredentialError, CredentialSource, Effect, ManualClock,
    Operation, Policy, PolicyBuilder,
};

/// A builder whose clock and sleeper are one [`ManualClock`].
pub fn manual_builder() -> (PolicyBuilder, ManualClock) {
    let clock = ManualClock::new();
    let builder = Policy::builder()
        .clock(Arc::new(clock.clone()))
        .sleeper(Arc::new(clock.clone()));
    (builder, clock)
}

/// A policy whose clock and sleeper are one [`ManualClock`].
pub fn manual_policy() -> (Policy, ManualClock) {
    let (builder, clock) = manual_builder();
    (builder.build(), clock)
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// An ls-refs read against `git://example.test/repo`.
pub fn read_op(bounds: Bounds) -> Operation {
    Operation::new("ls-refs", Effect::Read, "git://example.test/repo").bounds(bounds)
}

/// A push against `git://example.test/repo`.
pub fn write_op(bounds: Bounds) -> Operation {
    Operation::new("push", Effect::Write, "git://example.test/repo").bounds(bounds)
}

/// What one attempt was given.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub n: u32,
    /// The clock when the attempt started.
    pub started: Duration,
    pub timeout: Duration,
    pub remaining: Duration,
    /// The secret of the credential the attempt was given.
    pub secret: Option<String>,
}

/// Records every call a stub operation receives.
#[derive(Clone, Debug, Default)]
pub struct Recorder(Arc<Mutex<Vec<Call>>>);

impl Recorder {
    pub fn record(&self, ctx: &AttemptCtx<'_>) {
        let call = Call {
            n: ctx.n,
            started: ctx.clock().now(),
            timeout: ctx.timeout,
            remaining: ctx.remaining,
            secret: ctx
                .credential()
                .map(|c| c.secret().expose_secret().to_string()),
        };
        self.0.lock().unwrap().push(call);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn starts(&self) -> Vec<Duration> {
        self.calls().iter().map(|c| c.started).collect()
    }
}

/// Sells `tok-1`, `tok-2`, ... and notes when each was bought; optionally
/// takes time on the clock for every purchase.
pub struct CountingSource {
    clock: ManualClock,
    sold: AtomicUsize,
    cost: Duration,
    purchases: Mutex<Vec<(String, Duration)>>,
}

impl CountingSource {
    pub fn new(clock: &ManualClock) -> Self {
        Self::costing(clock, Duration::ZERO)
    }

    /// Every purchase advances the clock by `cost`.
    pub fn costing(clock: &ManualClock, cost: Duration) -> Self {
        CountingSource {
            clock: clock.clone(),
            sold: AtomicUsize::new(0),
            cost,
            purchases: Mutex::new(Vec::new()),
        }
    }

    /// Every token sold, with the clock when it was handed over.
    pub fn purchases(&self) -> Vec<(String, Duration)> {
        self.purchases.lock().unwrap().clone()
    }
}

impl CredentialSource for CountingSource {
    fn credential(&self) -> Result<Credential, CredentialError> {
        self.clock.advance(self.cost);
        let n = self.sold.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("tok-{n}");
        self.purchases
            .lock()
            .unwrap()
            .push((token.clone(), self.clock.now()));
        Ok(Credential::new(SecretString::from(token)))
    }
}
