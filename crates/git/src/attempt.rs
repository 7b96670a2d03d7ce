//! One attempt as the git crate runs it: the policy's [`AttemptCtx`] with
//! the phase reached kept beside it as a [`GitPhase`] value, and the shield
//! that turns a panic in the protocol code into an error of that phase.
//!
//! The policy records phases as words (`ctx.reached("advertised")`); this
//! crate never reads them back: what it needs to know about how far an
//! attempt got, it keeps typed here.

use std::ops::Deref;

use sluice_policy::AttemptCtx;

use crate::error::{GitError, GitPhase};

/// An attempt in progress: the policy's context and the phase reached.
pub(crate) struct Attempt<'a, 'c> {
    ctx: &'a mut AttemptCtx<'c>,
    phase: GitPhase,
}

impl<'a, 'c> Attempt<'a, 'c> {
    fn new(ctx: &'a mut AttemptCtx<'c>) -> Self {
        Attempt {
            ctx,
            phase: GitPhase::Connect,
        }
    }

    /// Record that the attempt completed `phase`, here and for the policy.
    pub fn reached(&mut self, phase: GitPhase) {
        self.phase = phase;
        self.ctx.reached(phase.as_str());
        if phase == GitPhase::CommandsSent {
            // The next step, the pack, completes the request: a push's
            // ledger entry says so before its first byte goes out.
            self.ctx.entering(GitPhase::PackSent.as_str());
        }
    }

    /// The last phase recorded.
    pub fn phase(&self) -> GitPhase {
        self.phase
    }

    /// Keep a line the server said beside the protocol (a hook's words).
    pub fn remote_message(&mut self, line: impl Into<String>) {
        self.ctx.remote_message(line);
    }

    /// Count what a cap on the remote's text left out (the outcome's
    /// `remote_messages_dropped`).
    pub fn remote_messages_dropped(&mut self, d: sluice_policy::remote_text::RemoteTextDropped) {
        self.ctx.remote_messages_dropped(d);
    }
}

impl<'c> Deref for Attempt<'_, 'c> {
    type Target = AttemptCtx<'c>;

    fn deref(&self) -> &AttemptCtx<'c> {
        self.ctx
    }
}

/// Run one attempt so that a panic inside the protocol code (a hostile or
/// broken server tripping an assertion in a parser) becomes an error instead
/// of unwinding through the caller. What the server made of the request is
/// then not known: the error counts as after the request was complete, so a
/// push is settled by reading, never sent again blind.
pub(crate) fn shielded<T>(
    ctx: &mut AttemptCtx<'_>,
    f: impl FnOnce(&mut Attempt<'_, '_>) -> Result<T, GitError>,
) -> Result<T, GitError> {
    let mut at = Attempt::new(ctx);
    catch_panic(|| f(&mut at)).unwrap_or_else(|what| {
        Err(GitError::Protocol {
            phase: at.phase(),
            request_complete: true,
            detail: format!("the client failed on the server's answer: {what}"),
        })
    })
}

/// The crate's one panic shield, under [`shielded`] and a push's settling
/// read: run `f`; a panic in it is caught and returned as its words.
pub(crate) fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}

/// [`fresh_view`](crate::fresh_view) for one attempt: a view that cannot be opened is this
/// side's trouble, a local failure at `connect` (nothing was dialled yet).
pub(crate) fn attempt_view(repo: &gix::Repository) -> Result<gix::Repository, GitError> {
    crate::view::fresh_view(repo)
        .map_err(|e| GitError::local(GitPhase::Connect, crate::local::LocalCause::view(e)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sluice_policy::{Bounds, Class, Effect, Operation, Policy};

    use super::*;

    #[test]
    fn the_panic_shield_gives_back_the_value_or_the_panic_s_words() {
        assert_eq!(catch_panic(|| 7), Ok(7));
        assert_eq!(
            catch_panic(|| -> u8 { panic!("a parser tripped") }),
            Err("a parser tripped".to_string())
        );
        let n = 3;
        assert_eq!(
            catch_panic(|| -> u8 { panic!("index {n} out of range") }),
            Err("index 3 out of range".to_string())
        );
        assert_eq!(
            catch_panic(|| -> u8 { std::panic::panic_any(42_u32) }),
            Err("a panic".to_string())
        );
    }

    #[test]
    fn a_panic_is_an_unknown_error_at_the_phase_the_attempt_reached() {
        let policy = Policy::default();
        let op = Operation::new("ls-refs", Effect::Read, "git://127.0.0.1/r.git").bounds(
            Bounds::new(Duration::from_secs(5), Duration::from_secs(5), 1),
        );
        let out = policy.run(op, |ctx| {
            shielded(ctx, |at| -> Result<(), GitError> {
                at.reached(GitPhase::Advertised);
                assert_eq!(at.phase(), GitPhase::Advertised);
                panic!("a parser tripped");
            })
            .map_err(|e| e.to_attempt())
        });
        assert_eq!(out.attempts.len(), 1);
        assert_eq!(out.attempts[0].phase, "advertised");
        assert_eq!(out.attempts[0].class, Some(Class::Unknown));
        let error = out.error.expect("the attempt failed");
        match error.source_as::<GitError>() {
            Some(GitError::Protocol {
                phase,
                request_complete,
                detail,
            }) => {
                assert_eq!(*phase, GitPhase::Advertised);
                assert!(request_complete);
                assert!(detail.contains("a parser tripped"), "{detail}");
            }
            other => panic!("not a protocol error: {other:?}"),
        }
    }
}
