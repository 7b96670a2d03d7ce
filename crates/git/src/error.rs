//! Phases, the typed error of an attempt, and the one table that classes it.
//!
//! Every class is decided from what the client saw on the wire ([`WireState`]):
//! how far the conversation got, an `ERR` packet, an HTTP status, a spawned
//! server's exit — never from error text.

use std::sync::Arc;
use std::time::Duration;

use sluice_policy::{AttemptError, Class};

pub use crate::limit::TimeoutLimit;
use crate::local::LocalCause;
use crate::reject::RejectReason;
use crate::wire::WireState;

/// A protocol milestone. `Connect` is the starting state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GitPhase {
    /// Nothing completed yet.
    Connect,
    /// The advertisement (refs and capabilities) was read.
    Advertised,
    /// Push: the command flush was written.
    CommandsSent,
    /// Push: the last byte of the pack was written (the request is complete).
    PackSent,
    /// Push: report-status was parsed.
    Reported,
    /// Fetch: the fetch request was written; wants and haves answered.
    Negotiated,
    /// Fetch: the pack was received and stored.
    PackReceived,
    /// ls-refs / fetch: finished.
    Done,
}

impl GitPhase {
    /// The kebab-case name of the design.
    pub const fn as_str(self) -> &'static str {
        match self {
            GitPhase::Connect => "connect",
            GitPhase::Advertised => "advertised",
            GitPhase::CommandsSent => "commands-sent",
            GitPhase::PackSent => "pack-sent",
            GitPhase::Reported => "reported",
            GitPhase::Negotiated => "negotiated",
            GitPhase::PackReceived => "pack-received",
            GitPhase::Done => "done",
        }
    }
}

impl std::fmt::Display for GitPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why one attempt against a git remote failed.
///
/// Non-exhaustive: the `Http` and `Tls` variants exist only with the
/// `http` feature, and a feature turned on elsewhere in a build must not
/// break a match.
///
/// `Clone`, not `PartialEq`: a local failure keeps its typed cause (an
/// `io::Error` among them); compare with `matches!`.
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum GitError {
    /// The remote's own words: an `ERR` packet, a side-band fatal, a spawned
    /// server that exited before advertising.
    #[error("{words}")]
    Remote {
        /// The phase reached.
        phase: GitPhase,
        /// The remote's words.
        words: String,
    },
    /// ssh refused before any remote command ran: it exited 255 and said
    /// `Permission denied (…)` (no credential it offered was taken) or
    /// `Host key verification failed` — an answer, as an http 401 with no
    /// credential source is: asking again gets the same refusal. The one
    /// class read from words in this crate (ARCHITECTURE.md's exceptions).
    #[error("{words}")]
    SshRefused {
        /// The phase reached (`connect`).
        phase: GitPhase,
        /// What ssh refused.
        refusal: crate::ssh_refusal::SshRefusal,
        /// ssh's line.
        words: String,
    },
    /// An HTTP status that is not success (with the `http` feature).
    #[cfg(feature = "http")]
    #[error("HTTP {status}: {words}")]
    Http {
        /// The phase reached.
        phase: GitPhase,
        /// The status code.
        status: u16,
        /// A `Retry-After` hint.
        retry_after: Option<Duration>,
        /// The status line (and body excerpt).
        words: String,
        /// Whether the request body had been sent (a write's request complete).
        request_complete: bool,
    },
    /// The TLS handshake was refused (https): the server's certificate is
    /// not trusted, has expired, is for another name, or the server sent an
    /// alert. Its answer: asking again cannot change it. (With the `http`
    /// feature.)
    #[cfg(feature = "http")]
    #[error("{refusal} ({host})")]
    Tls {
        /// The phase reached (`connect`).
        phase: GitPhase,
        /// What was refused.
        refusal: sluice_https::TlsRefusal,
        /// The server (`host:port`) that presented it.
        host: String,
    },
    /// The connection failed, was cut or reset.
    #[error("{detail} (at {phase})")]
    Transport {
        /// The phase reached.
        phase: GitPhase,
        /// Whether the request was complete when it failed.
        request_complete: bool,
        /// What happened.
        detail: String,
    },
    /// A time limit ended the attempt (the socket was shut or the child
    /// killed): the words name which, with the bytes moved.
    #[error("{} ({moved} bytes moved) (at {phase})", .limit.words(*.ms))]
    Timeout {
        /// The phase reached.
        phase: GitPhase,
        /// Whether the request was complete when it ran out.
        request_complete: bool,
        /// The figure of the limit that ended it (ms): the attempt timeout,
        /// the time left of the operation's deadline at the attempt's
        /// start, or the window of the transfer's floor.
        ms: u64,
        /// Which limit ended it.
        limit: TimeoutLimit,
        /// The bytes moved both ways in the attempt when it ended.
        moved: u64,
    },
    /// The caller cancelled during the attempt.
    #[error("cancelled (at {phase})")]
    Cancelled {
        /// The phase reached.
        phase: GitPhase,
        /// Whether the request was complete.
        request_complete: bool,
    },
    /// The server spoke, but not the protocol.
    #[error("protocol error: {detail} (at {phase})")]
    Protocol {
        /// The phase reached.
        phase: GitPhase,
        /// Whether the request was complete.
        request_complete: bool,
        /// What was wrong.
        detail: String,
    },
    /// The remote lacks something this client needs (object format, delete-refs, ...).
    #[error("unsupported by the remote: {detail}")]
    Unsupported {
        /// The phase reached.
        phase: GitPhase,
        /// What is missing.
        detail: String,
    },
    /// A ref refused by this client, decided from what the remote
    /// advertised before anything was sent (a push's stale lease or
    /// non-fast-forward: phase `advertised`), or from git's rules for the
    /// local refs after a fetch (a non-fast-forward without `+`, a tag
    /// that would be clobbered: phase `done`). The remote's state stands
    /// as it was read: asking again gets the same answer.
    #[error("{name}: {detail}")]
    Refused {
        /// The phase reached.
        phase: GitPhase,
        /// The ref refused (a push's destination, a fetch's local ref).
        name: String,
        /// Why, typed.
        reason: RejectReason,
        /// The reason, in git's words.
        detail: String,
    },
    /// A ref the remote rejected in its report (an `ng` line: a
    /// non-fast-forward, a hook's refusal, a protected branch; or every
    /// ref of a push whose pack the remote could not unpack). The first
    /// ref that is the cause ([`crate::PushReport::first_rejection`]); the
    /// others are in the push's per-ref results.
    #[error("{name}: {words}")]
    Rejected {
        /// The phase reached (`reported`).
        phase: GitPhase,
        /// The destination ref.
        name: String,
        /// Why, typed from the report's words.
        reason: RejectReason,
        /// The remote's words (`unpacker error: ...` for an unpack failure).
        words: String,
    },
    /// The server sent a pack no valid pack is (an entry without end, an
    /// object larger than any this client holds): its fault, stopped as it
    /// arrived; asking again gets the same pack.
    #[error("bad pack from the server: {detail}")]
    BadPack {
        /// The phase reached.
        phase: GitPhase,
        /// What was wrong.
        detail: String,
    },
    /// The server's pack passed a limit the caller set
    /// ([`crate::FetchOptions::max_pack_size`],
    /// [`crate::FetchOptions::max_object_size`]): stopped as it arrived,
    /// nothing written; its answer (asking again gets the same objects).
    #[error("{exceeded}")]
    TooLarge {
        /// The phase reached.
        phase: GitPhase,
        /// Which limit, with the figures and the object.
        exceeded: crate::LimitExceeded,
    },
    /// A refspec's source ref is not in the remote's advertisement: the
    /// remote's answer (asking again gets the same advertisement).
    #[error("couldn't find remote ref {name}")]
    NotAdvertised {
        /// The phase reached (`advertised`).
        phase: GitPhase,
        /// The refspec's source, as given.
        name: String,
    },
    /// Local trouble (reading objects, writing the pack or refs, a lock
    /// held by another process): never the remote's answer; the operation
    /// stops with `local-error`. Its cause is typed ([`LocalCause`]: a full
    /// disk is told from a corrupt store without reading words).
    #[error("local: {cause}")]
    Local {
        /// The phase reached.
        phase: GitPhase,
        /// What failed, with its source.
        #[source]
        cause: Arc<LocalCause>,
    },
}

impl GitError {
    /// This side's failure at `phase` (`local-error`); the causes are built
    /// in `local`.
    pub(crate) fn local(phase: GitPhase, cause: LocalCause) -> GitError {
        GitError::Local {
            phase,
            cause: Arc::new(cause),
        }
    }

    /// The phase the attempt reached.
    pub fn phase(&self) -> GitPhase {
        match self {
            #[cfg(feature = "http")]
            GitError::Http { phase, .. } | GitError::Tls { phase, .. } => *phase,
            GitError::Remote { phase, .. }
            | GitError::SshRefused { phase, .. }
            | GitError::Transport { phase, .. }
            | GitError::Timeout { phase, .. }
            | GitError::Cancelled { phase, .. }
            | GitError::Protocol { phase, .. }
            | GitError::Unsupported { phase, .. }
            | GitError::Refused { phase, .. }
            | GitError::Rejected { phase, .. }
            | GitError::NotAdvertised { phase, .. }
            | GitError::BadPack { phase, .. }
            | GitError::TooLarge { phase, .. }
            | GitError::Local { phase, .. } => *phase,
        }
    }

    /// The class, from the design's table.
    pub fn class(&self) -> Class {
        match self {
            GitError::Remote { .. }
            | GitError::SshRefused { .. }
            | GitError::Unsupported { .. }
            | GitError::Refused { .. }
            | GitError::Rejected { .. }
            | GitError::NotAdvertised { .. }
            | GitError::BadPack { .. }
            | GitError::TooLarge { .. } => Class::Answered,
            #[cfg(feature = "http")]
            GitError::Tls { .. } => Class::Answered,
            #[cfg(feature = "http")]
            GitError::Http {
                status,
                request_complete,
                retry_after,
                ..
            } => http_class(*status, *request_complete, retry_after.is_some()).class,
            GitError::Transport {
                request_complete, ..
            }
            | GitError::Timeout {
                request_complete, ..
            }
            | GitError::Cancelled {
                request_complete, ..
            } => {
                if *request_complete {
                    Class::Unknown
                } else {
                    Class::Unjudged
                }
            }
            GitError::Protocol {
                request_complete, ..
            } => {
                if *request_complete {
                    Class::Unknown
                } else {
                    Class::Answered
                }
            }
            GitError::Local { .. } => Class::Local,
        }
    }

    /// The error as the policy sees it; the `GitError` itself rides along
    /// as its source (`error.source_as::<GitError>()`).
    pub fn to_attempt(&self) -> AttemptError {
        #[cfg_attr(not(feature = "http"), allow(unused_mut))]
        let mut e = AttemptError::new(self.class(), self.phase().as_str(), self.to_string())
            .with_source(self.clone());
        #[cfg(feature = "http")]
        if let GitError::Http {
            status,
            retry_after,
            words,
            request_complete,
            ..
        } = self
        {
            e.cause = format!("HTTP {status}: {words}");
            e.retry_after = *retry_after;
            e.auth = http_class(*status, *request_complete, retry_after.is_some()).auth;
        }
        e
    }
}

/// The remote's objects are in a format this client does not read: its
/// answer, named (nothing is written, asking again cannot change it).
pub(crate) fn foreign_format(phase: GitPhase, format: &str) -> GitError {
    GitError::Unsupported {
        phase,
        detail: format!(
            "the remote's object format is {format}; this client reads {} only",
            crate::wire::SHA1
        ),
    }
}

/// The advertisement named an object format this client does not read.
pub(crate) fn check_format(st: &WireState, phase: GitPhase) -> Result<(), GitError> {
    match st.foreign_format() {
        Some(format) => Err(foreign_format(phase, format)),
        None => Ok(()),
    }
}

/// What the spawned process was, for a message.
fn child_program(st: &WireState) -> &str {
    st.child_program
        .as_deref()
        .unwrap_or("the remote's process")
}

/// How a spawned process ended, in words: `exited with code 1`, `was
/// ended by a signal`.
fn exit_words(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exited with code {c}"),
        None => "was ended by a signal".to_string(),
    }
}

/// HTTP statuses, by the workspace's one table ([`sluice_https::status_class`],
/// the forge's too): 401 answered with the credential signal (the policy
/// decides whether the credential held was refused and buys afresh), 408,
/// 429, 503 and a 403 asking for a wait (`Retry-After`) unjudged,
/// 500/502/504 after the request was complete unknown, other 5xx unjudged,
/// other 4xx answered. Smart HTTP keeps no rate-limit header but
/// `Retry-After`.
#[cfg(feature = "http")]
pub(crate) fn http_class(
    status: u16,
    request_complete: bool,
    retry_after: bool,
) -> sluice_https::StatusClass {
    let limits = sluice_https::RateLimitFacts {
        retry_after,
        ..Default::default()
    };
    // A 2xx never becomes a `GitError::Http`: one that did is no answer the
    // table knows, so it stays the remote's.
    sluice_https::status_class(status, request_complete, limits).unwrap_or(
        sluice_https::StatusClass {
            class: Class::Answered,
            auth: None,
        },
    )
}

/// Class a failure from what the wire saw; `detail` is what the local side
/// reported (an io error, gix's message), used only as words.
pub(crate) fn from_wire(
    st: &WireState,
    phase: GitPhase,
    request_complete: bool,
    timeout: Duration,
    detail: String,
) -> GitError {
    if let Some(why) = &st.local_failure {
        return GitError::local(phase, LocalCause::other(why.clone(), None));
    }
    #[cfg(feature = "http")]
    if let Some((refusal, host)) = &st.tls_refusal {
        return GitError::Tls {
            phase,
            refusal: refusal.clone(),
            host: host.clone(),
        };
    }
    #[cfg(feature = "http")]
    if let Some((status, retry_after, words)) = &st.http_status {
        return GitError::Http {
            phase,
            status: *status,
            retry_after: *retry_after,
            words: words.clone(),
            request_complete,
        };
    }
    if let Some(words) = &st.err_line {
        return GitError::Remote {
            phase,
            words: words.clone(),
        };
    }
    if let Some(words) = &st.fatal {
        return GitError::Remote {
            phase,
            words: words.clone(),
        };
    }
    if let Some(format) = st.foreign_format() {
        // Whatever failed after it (gix decoding 64-hex ids), the format is
        // the cause: asking again cannot change it.
        return foreign_format(phase, format);
    }
    if st.timed_out {
        // The watchdog says which limit fired; a connect that ran out its
        // time (no watchdog yet) is the attempt timeout.
        let (limit, after) = st
            .timed_out_by
            .unwrap_or((TimeoutLimit::AttemptTimeout, timeout));
        return GitError::Timeout {
            phase,
            request_complete,
            ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
            limit,
            moved: st.bytes_read + st.bytes_written,
        };
    }
    if st.cancelled {
        return GitError::Cancelled {
            phase,
            request_complete,
        };
    }
    if st.bytes_read == 0 {
        if let Some(code) = st.child_exit {
            // ssh exits 255 for its own failures: a refused or cut
            // connection the remote never judged — unless ssh said it
            // refused the credentials or the host key (the words are all
            // it keeps of that; see `ssh_refusal`), an answer.
            if let (Some(255), Some((refusal, words))) = (code, &st.ssh_refusal) {
                return GitError::SshRefused {
                    phase,
                    refusal: *refusal,
                    words: words.clone(),
                };
            }
            if code != Some(255) && code != Some(0) {
                let words = st.stderr_tail.clone().unwrap_or_else(|| {
                    format!(
                        "{} {} before the remote advertised anything",
                        child_program(st),
                        exit_words(code)
                    )
                });
                return GitError::Remote { phase, words };
            }
        }
    }
    if st.oversized {
        return GitError::Protocol {
            phase,
            request_complete: false,
            detail: format!(
                "the server sent more than {} bytes before the request was complete; {detail}",
                st.advert_cap
            ),
        };
    }
    if st.garbled {
        return GitError::Protocol {
            phase,
            request_complete,
            detail: format!("the server sent bytes that are not pkt-lines; {detail}"),
        };
    }
    let detail = match (st.child_exit, st.bytes_read) {
        // Nothing read and the process gone: gix's words would be about
        // a buffer ("failed to fill whole buffer"); say what happened.
        (Some(code), 0) => format!(
            "{} {} before the remote said anything",
            child_program(st),
            exit_words(code)
        ),
        _ => detail.replace(
            "failed to fill whole buffer",
            "the connection ended in the middle of the remote's message",
        ),
    };
    let detail = match &st.stderr_tail {
        Some(tail) if st.child_exit.is_some() => format!("{detail}; it said: {tail}"),
        _ => detail,
    };
    GitError::Transport {
        phase,
        request_complete,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "http")]
    use sluice_policy::AuthSignal;

    #[cfg(feature = "http")]
    #[test]
    fn http_statuses_follow_the_table() {
        let class = |s, complete| http_class(s, complete, false).class;
        assert_eq!(class(503, false), Class::Unjudged);
        assert_eq!(class(503, true), Class::Unjudged);
        assert_eq!(class(429, true), Class::Unjudged);
        assert_eq!(class(408, true), Class::Unjudged, "as the forge's");
        assert_eq!(class(502, false), Class::Unjudged);
        assert_eq!(class(502, true), Class::Unknown);
        assert_eq!(class(404, false), Class::Answered);
        assert_eq!(class(422, true), Class::Answered);
        // 401: the credential signal; the policy decides (as the forge's).
        let c = http_class(401, false, false);
        assert_eq!(
            (c.class, c.auth),
            (Class::Answered, Some(AuthSignal::Unauthorized))
        );
        // A 403 asking for a wait is a rate limit, not a refusal.
        let c = http_class(403, false, true);
        assert_eq!((c.class, c.auth), (Class::Unjudged, None));
        let c = http_class(403, false, false);
        assert_eq!(c.auth, Some(AuthSignal::ForbiddenOrNotFound));
    }

    #[cfg(feature = "http")]
    #[test]
    fn an_http_error_carries_the_tables_signal_to_the_policy() {
        let e = GitError::Http {
            phase: GitPhase::Connect,
            status: 401,
            retry_after: None,
            words: "Unauthorized".into(),
            request_complete: false,
        }
        .to_attempt();
        assert_eq!(
            (e.class, e.auth),
            (Class::Answered, Some(AuthSignal::Unauthorized))
        );
        assert_eq!(e.cause, "HTTP 401: Unauthorized");
    }

    #[test]
    fn wire_facts_decide_the_class() {
        let t = Duration::from_secs(1);
        let mut st = WireState::default();
        let e = from_wire(&st, GitPhase::Connect, false, t, "refused".into());
        assert_eq!(e.class(), Class::Unjudged);
        let e = from_wire(&st, GitPhase::PackSent, true, t, "reset".into());
        assert_eq!(e.class(), Class::Unknown);
        st.err_line = Some("access denied".into());
        let e = from_wire(&st, GitPhase::Connect, false, t, "x".into());
        assert_eq!(e.class(), Class::Answered);
        assert_eq!(e.to_string(), "access denied");
        let mut st = WireState::default();
        st.child_exit = Some(Some(128));
        st.stderr_tail = Some("fatal: '/x' does not appear to be a git repository".into());
        let e = from_wire(&st, GitPhase::Connect, false, t, "eof".into());
        assert_eq!(e.class(), Class::Answered);
        st.child_exit = Some(Some(255));
        assert_eq!(
            from_wire(&st, GitPhase::Connect, false, t, "eof".into()).class(),
            Class::Unjudged
        );
        // ssh's own refusal, stated on its stderr with exit 255: answered.
        st.ssh_refusal = Some((
            crate::SshRefusal::Authentication,
            "git@127.0.0.1: Permission denied (publickey).".into(),
        ));
        let e = from_wire(&st, GitPhase::Connect, false, t, "eof".into());
        assert_eq!(e.class(), Class::Answered);
        assert_eq!(
            e.to_string(),
            "git@127.0.0.1: Permission denied (publickey)."
        );
        // The same words with another exit code are the remote's (its
        // last stderr line), answered as any such exit.
        st.child_exit = Some(Some(1));
        assert!(matches!(
            from_wire(&st, GitPhase::Connect, false, t, "eof".into()),
            GitError::Remote { .. }
        ));
    }
}
