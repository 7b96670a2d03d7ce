//! Why a ref was rejected, typed ([`RejectReason`]): the JSON contract's
//! names, git's words for it, and the reading of a report's `ng` reason.
//! A leaf: the error table and the push both stand on it.

/// Why a ref was rejected, typed; the remote's own words stay beside it
/// in [`RefResult::message`](crate::RefResult::message).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The remote ref does not hold the expected value (a lease, or the
    /// value this operation first read): refused by this client before any
    /// pack was sent.
    StaleInfo,
    /// Not a fast-forward (by this client or the remote).
    NonFastForward,
    /// The remote ref's value is not known locally: fetch first.
    FetchFirst,
    /// A hook (pre-receive, update) declined it.
    HookDeclined,
    /// Another ref of an atomic push failed.
    AtomicPushFailed,
    /// The remote could not update the ref (its lock, or its value changed
    /// under it: a lease race lost on the server).
    FailedToUpdateRef,
    /// A protected branch (a forge's rule).
    Protected,
    /// Anything else (the remote's words in `message`).
    Other,
}

impl RejectReason {
    /// The kebab-case name of the JSON contract.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::StaleInfo => "stale-info",
            RejectReason::NonFastForward => "non-fast-forward",
            RejectReason::FetchFirst => "fetch-first",
            RejectReason::HookDeclined => "hook-declined",
            RejectReason::AtomicPushFailed => "atomic-push-failed",
            RejectReason::FailedToUpdateRef => "failed-to-update-ref",
            RejectReason::Protected => "protected",
            RejectReason::Other => "other",
        }
    }

    /// As git prints it in `! [rejected] … (<words>)`.
    pub const fn git_words(self) -> &'static str {
        match self {
            RejectReason::StaleInfo => "stale info",
            RejectReason::NonFastForward => "non-fast-forward",
            RejectReason::FetchFirst => "fetch first",
            RejectReason::HookDeclined => "hook declined",
            RejectReason::AtomicPushFailed => "atomic push failed",
            RejectReason::FailedToUpdateRef => "failed to update ref",
            RejectReason::Protected => "protected branch",
            RejectReason::Other => "rejected",
        }
    }

    /// The reason of an `ng <ref> <reason>` line of report-status (a field
    /// of the protocol, not stderr): receive-pack's fixed words, and the
    /// forges' "protected branch hook declined".
    pub fn from_report(words: &str) -> RejectReason {
        let w = words.trim();
        if w.contains("protected branch") {
            RejectReason::Protected
        } else if w.contains("hook declined") {
            RejectReason::HookDeclined
        } else if w == "non-fast-forward" {
            RejectReason::NonFastForward
        } else if w == "fetch first" {
            RejectReason::FetchFirst
        } else if w == "stale info" {
            RejectReason::StaleInfo
        } else if w.starts_with("atomic push failure") || w.starts_with("atomic transaction failed")
        {
            RejectReason::AtomicPushFailed
        } else if w.starts_with("failed to update ref") || w.starts_with("failed to lock") {
            RejectReason::FailedToUpdateRef
        } else {
            RejectReason::Other
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
