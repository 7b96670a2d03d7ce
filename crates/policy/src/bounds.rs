//! Bounds of one operation (deadline, attempt timeout, attempts) and the
//! named profiles callers pick them by.

use std::str::FromStr;
use std::time::Duration;

/// The shape of the backoff between attempts: exponential, capped, jittered
/// (built on backon's `ExponentialBuilder`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackoffShape {
    /// The first delay (before jitter).
    pub min_delay: Duration,
    /// The largest delay (before jitter).
    pub max_delay: Duration,
    /// The growth factor between delays.
    pub factor: f32,
    /// Add a random part in `[0, delay)` to every delay.
    pub jitter: bool,
}

impl BackoffShape {
    /// # Default
    /// 200 ms first delay, doubling, capped at 5 s, jittered.
    pub const DEFAULT: BackoffShape = BackoffShape {
        min_delay: Duration::from_millis(200),
        max_delay: Duration::from_secs(5),
        factor: 2.0,
        jitter: true,
    };

    /// A constant delay without jitter (for tests and tight loops).
    pub const fn constant(delay: Duration) -> Self {
        BackoffShape {
            min_delay: delay,
            max_delay: delay,
            factor: 1.0,
            jitter: false,
        }
    }
}

impl Default for BackoffShape {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The bounds of one operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// The overall deadline, fixed when the operation starts; sleeps count.
    pub deadline: Duration,
    /// The hard deadline of one attempt, capped by what remains.
    pub attempt_timeout: Duration,
    /// The most attempts (not retries) the operation makes; at least 1.
    pub max_attempts: u32,
    /// The backoff between attempts.
    pub backoff: BackoffShape,
    /// For writes: time kept back from each attempt's timeout for the reads
    /// that settle an unknown answer (at most half of what remains, so a
    /// write whose deadline is shorter than the reserve is still tried).
    pub reconcile_reserve: Duration,
}

impl Bounds {
    /// Bounds with the given figures and the default backoff and reserve.
    pub const fn new(deadline: Duration, attempt_timeout: Duration, max_attempts: u32) -> Self {
        Bounds {
            deadline,
            attempt_timeout,
            max_attempts,
            backoff: BackoffShape::DEFAULT,
            reconcile_reserve: Duration::from_secs(2),
        }
    }

    /// Replace the deadline.
    pub const fn with_deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// Replace the attempt timeout.
    pub const fn with_attempt_timeout(mut self, d: Duration) -> Self {
        self.attempt_timeout = d;
        self
    }

    /// Replace the maximum number of attempts (counts attempts, not retries).
    pub const fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Replace the backoff shape.
    pub const fn with_backoff(mut self, b: BackoffShape) -> Self {
        self.backoff = b;
        self
    }

    /// Replace the reconcile reserve kept back from write attempts.
    pub const fn with_reconcile_reserve(mut self, d: Duration) -> Self {
        self.reconcile_reserve = d;
        self
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Profile::Command.bounds()
    }
}

/// Named bounds a caller picks by name.
///
/// | profile | deadline | attempt timeout | max attempts | backoff |
/// |---|---|---|---|---|
/// | `wait` | 5 min | 30 s | 40 | 1 s doubling to 30 s, jittered |
/// | `round` | 30 s | 10 s | 5 | 200 ms doubling to 5 s, jittered |
/// | `submit` | 60 s | 20 s | 5 | 500 ms doubling to 10 s, jittered |
/// | `command` | 20 s | 8 s | 4 | 200 ms doubling to 5 s, jittered |
/// | `transfer` | 15 min | 30 s | 4 | as `command`'s |
///
/// Writes keep back 2 s of each attempt for settling reads (at most half of
/// what remains of the deadline).
///
/// Not exhaustive: a new kind of call may get a profile of its own; a
/// `match` outside this crate keeps a wildcard arm (or asks
/// [`Profile::bounds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Profile {
    /// Reading through a forge outage: minutes.
    Wait,
    /// One round of sluice's landing loop: seconds.
    Round,
    /// Submitting a merge (a push, a forge write): a minute.
    Submit,
    /// An interactive command; the CLI's default but for fetch and push.
    Command,
    /// A person's fetch or push of a large repository: minutes (the CLI's
    /// default for `fetch` and `push`). A moving pack runs on to the
    /// deadline; the attempt timeout cuts waits and stalls.
    Transfer,
}

impl Profile {
    /// Every profile, in order.
    pub const ALL: [Profile; 5] = [
        Profile::Wait,
        Profile::Round,
        Profile::Submit,
        Profile::Command,
        Profile::Transfer,
    ];

    /// The profile's name.
    pub const fn name(self) -> &'static str {
        match self {
            Profile::Wait => "wait",
            Profile::Round => "round",
            Profile::Submit => "submit",
            Profile::Command => "command",
            Profile::Transfer => "transfer",
        }
    }

    /// The profile's figures (see the table on [`Profile`]).
    pub const fn bounds(self) -> Bounds {
        match self {
            Profile::Wait => Bounds::new(Duration::from_secs(300), Duration::from_secs(30), 40)
                .with_backoff(BackoffShape {
                    min_delay: Duration::from_secs(1),
                    max_delay: Duration::from_secs(30),
                    factor: 2.0,
                    jitter: true,
                }),
            Profile::Round => Bounds::new(Duration::from_secs(30), Duration::from_secs(10), 5),
            Profile::Submit => Bounds::new(Duration::from_secs(60), Duration::from_secs(20), 5)
                .with_backoff(BackoffShape {
                    min_delay: Duration::from_millis(500),
                    max_delay: Duration::from_secs(10),
                    factor: 2.0,
                    jitter: true,
                }),
            Profile::Command => Bounds::new(Duration::from_secs(20), Duration::from_secs(8), 4),
            Profile::Transfer => {
                Bounds::new(Duration::from_secs(15 * 60), Duration::from_secs(30), 4)
            }
        }
    }
}

/// A profile name that is not one of `wait`, `round`, `submit`, `command`,
/// `transfer`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile {0:?}: expected one of wait, round, submit, command, transfer")]
pub struct UnknownProfile(pub String);

impl FromStr for Profile {
    type Err = UnknownProfile;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProfile(s.to_string()))
    }
}
