//! When a standing credential refusal is worth a line in the log.
//!
//! A refusal stands for one host and one cause (the remote's words) until an
//! attempt against that host succeeds. While it stands it is logged when it
//! starts, then at most once per [`REFUSAL_LOG_INTERVAL`] with the count of
//! repeats since the last line; when the host recovers, the repeats not yet
//! reported are, and a refusal that comes back is logged again at once. The
//! times are the policy's clock, so tests run an hour in a moment.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// The least time between two lines about one refusal that still stands.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(600);

/// One standing refusal.
#[derive(Debug)]
struct Standing {
    /// When it started.
    since: Duration,
    /// When its last line was logged.
    logged_at: Duration,
    /// Times it stood since its last line.
    unlogged: u64,
}

/// What to log about a refusal that stood just now.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// It started: log it.
    Started,
    /// It stood `repeats` times since the last line (this one included),
    /// standing for `standing`: log it.
    Repeats { repeats: u64, standing: Duration },
    /// Logged less than the interval ago: counted, not logged.
    Quiet,
}

/// A refusal that ended because its host recovered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub cause: String,
    /// Times it stood since its last line.
    pub unreported: u64,
    /// How long it stood.
    pub standing: Duration,
}

/// The refusals standing now, per host and cause.
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    standing: Mutex<HashMap<String, HashMap<String, Standing>>>,
}

impl RefusalLog {
    /// A refusal with `cause` stood against `host` at `now`.
    pub(crate) fn stood(&self, host: &str, cause: &str, now: Duration) -> Line {
        let mut all = self.standing.lock().expect("refusal log lock");
        let causes = all.entry(host.to_string()).or_default();
        match causes.get_mut(cause) {
            None => {
                causes.insert(
                    cause.to_string(),
                    Standing {
                        since: now,
                        logged_at: now,
                        unlogged: 0,
                    },
                );
                Line::Started
            }
            Some(s) => {
                s.unlogged += 1;
                if now.saturating_sub(s.logged_at) >= REFUSAL_LOG_INTERVAL {
                    let repeats = std::mem::take(&mut s.unlogged);
                    s.logged_at = now;
                    Line::Repeats {
                        repeats,
                        standing: now.saturating_sub(s.since),
                    }
                } else {
                    Line::Quiet
                }
            }
        }
    }

    /// An attempt against `host` succeeded at `now`: every refusal standing
    /// for it ends.
    pub(crate) fn recovered(&self, host: &str, now: Duration) -> Vec<Ended> {
        let mut all = self.standing.lock().expect("refusal log lock");
        let Some(causes) = all.remove(host) else {
            return Vec::new();
        };
        let mut ended: Vec<Ended> = causes
            .into_iter()
            .map(|(cause, s)| Ended {
                cause,
                unreported: s.unlogged,
                standing: now.saturating_sub(s.since),
            })
            .collect();
        ended.sort_by(|a, b| a.cause.cmp(&b.cause));
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn min(m: u64) -> Duration {
        Duration::from_secs(60 * m)
    }

    #[test]
    fn a_standing_refusal_is_logged_at_start_then_each_ten_minutes_with_its_repeats() {
        let log = RefusalLog::default();
        assert_eq!(log.stood("h", "401", min(0)), Line::Started);
        for m in 1..10 {
            assert_eq!(log.stood("h", "401", min(m)), Line::Quiet);
        }
        assert_eq!(
            log.stood("h", "401", min(10)),
            Line::Repeats {
                repeats: 10,
                standing: min(10)
            }
        );
        // Another cause on the host, and the host elsewhere, stand apart.
        assert_eq!(log.stood("h", "403", min(11)), Line::Started);
        assert_eq!(log.stood("g", "401", min(11)), Line::Started);
        assert_eq!(log.stood("h", "401", min(12)), Line::Quiet);
        assert_eq!(
            log.recovered("h", min(13)),
            vec![
                Ended {
                    cause: "401".into(),
                    unreported: 1,
                    standing: min(13)
                },
                Ended {
                    cause: "403".into(),
                    unreported: 0,
                    standing: min(2)
                }
            ]
        );
        assert_eq!(log.stood("h", "401", min(14)), Line::Started);
        assert_eq!(log.stood("g", "401", min(14)), Line::Quiet);
        assert!(log.recovered("nowhere", min(15)).is_empty());
    }
}
