//! The time limits that end an attempt, as a cause names them.

/// The least a moving transfer keeps: 1 KiB/s averaged over the attempt
/// timeout.
pub(crate) const LOW_SPEED_FLOOR: u64 = 1024;

/// Which time limit ended an attempt ([`GitError::Timeout`](crate::GitError::Timeout)).
///
/// Not exhaustive: a new bound may be added.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutLimit {
    /// The operation's deadline (less a write's reconcile reserve): no
    /// attempt runs past it, however fast its transfer moves.
    Deadline,
    /// The attempt timeout, before any transfer moved (connecting, the
    /// advertisement, the wait for the server).
    AttemptTimeout,
    /// The attempt timeout as a stall: nothing moved for that long once
    /// the transfer had moved.
    Stalled,
    /// The transfer's floor: fewer than 1 KiB/s over the attempt timeout.
    Floor,
}

impl TimeoutLimit {
    /// The cause's words for a limit of `ms` milliseconds.
    pub fn words(self, ms: u64) -> String {
        match self {
            TimeoutLimit::Deadline => {
                format!("timed out: the operation's deadline ended the attempt ({ms} ms were left)")
            }
            TimeoutLimit::AttemptTimeout => format!("attempt timed out after {ms} ms"),
            TimeoutLimit::Stalled => {
                format!("attempt timed out: nothing moved for {ms} ms")
            }
            TimeoutLimit::Floor => format!(
                "attempt timed out: the transfer fell below its floor of {} bytes/s over {ms} ms",
                LOW_SPEED_FLOOR
            ),
        }
    }
}
