//! What a caller gives one call besides its arguments ([`CallOptions`]),
//! the same for every client (git and forge), and the progress a transfer
//! reports ([`Progress`]).
//!
//! Every client's calls take `&CallOptions` and return
//! `Result<Outcome<T>, InputError>`: bad input (a URL, a refspec, an object
//! id) is an `Err` before anything is sent; after that, whatever happens is
//! an [`Outcome`](crate::Outcome).

use std::sync::Arc;

use crate::bounds::{Bounds, Profile};
use crate::clock::CancelFlag;
use crate::credential::CredentialSource;
use crate::engine::Operation;

/// A caller's progress callback.
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Progress of a transfer (a fetch's or a push's pack).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// What is happening (`receiving`, `counting`, `sending`, ...): this
    /// client's own stage names, never the remote's words (those are the
    /// outcome's `remote_messages`).
    pub stage: String,
    /// Objects handled so far.
    pub objects: u64,
    /// Bytes moved so far.
    pub bytes: u64,
}

/// What a caller gives one call besides its arguments: the operation id,
/// its bounds, where credentials come from, a cancel flag and a progress
/// callback. Every member is optional; the default is "the client's
/// defaults, a generated id, no way to cancel, no progress".
///
/// ```
/// use sluice_policy::{CallOptions, CancelFlag, Profile};
///
/// let cancel = CancelFlag::new();
/// let opts = CallOptions::new()
///     .id("land-1234-push")
///     .profile(Profile::Submit)
///     .cancel(&cancel);
/// assert_eq!(opts.operation_id(), Some("land-1234-push"));
/// // Another thread may now `cancel.cancel()` to stop the call.
/// ```
///
/// # The cancel flag is the caller's, per call
///
/// Options carry no cancel flag unless one is set with
/// [`CallOptions::cancel`], and a call without one gets a flag of its own
/// that nobody else holds. A flag, once raised, stays raised (a call
/// started under it ends `cancelled` at once, with no attempt): make one
/// [`CancelFlag`] per call you may want to stop. Clones of options share
/// the flag they were given — that is what setting it on a template
/// means — so a template kept for many calls should not be given one
/// (set it on each call's copy: `template.clone().cancel(&flag)`).
///
/// # Ids
///
/// One id names one logical operation, global to the ledger whatever the
/// kind of call (see [`OperationInfo::id`](crate::OperationInfo::id)): a
/// template reused for several calls should not carry an id either.
#[derive(Clone, Default)]
pub struct CallOptions {
    id: Option<String>,
    bounds: Option<Bounds>,
    credentials: Option<Arc<dyn CredentialSource>>,
    cancel: Option<CancelFlag>,
    progress: Option<ProgressCallback>,
}

impl CallOptions {
    /// No options: the client's bounds, a generated id, no cancel flag, no
    /// progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Run under this operation id (a claimed id is `rejected`, nothing
    /// sent).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Run within these bounds (deadline, attempt timeout, attempts,
    /// backoff) instead of the client's.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = Some(bounds);
        self
    }

    /// Run within a named profile's bounds (`wait`, `round`, `submit`,
    /// `command`).
    pub fn profile(self, profile: Profile) -> Self {
        self.bounds(profile.bounds())
    }

    /// Buy credentials from this source (before user info in a URL and
    /// before a client's own source).
    pub fn credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// Stop the call when `flag` is raised (between attempts and during
    /// one). The options keep a handle on the same flag: see the type's
    /// notes on sharing.
    pub fn cancel(mut self, flag: &CancelFlag) -> Self {
        self.cancel = Some(flag.clone());
        self
    }

    /// Call `callback` with the transfer's progress (fetch and push; a
    /// call that moves no pack never calls it).
    pub fn progress(mut self, callback: ProgressCallback) -> Self {
        self.progress = Some(callback);
        self
    }

    /// The operation id given, if any.
    pub fn operation_id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The bounds given, if any (`None`: the client's).
    pub fn given_bounds(&self) -> Option<Bounds> {
        self.bounds
    }

    /// The credential source given, if any.
    pub fn credential_source(&self) -> Option<&Arc<dyn CredentialSource>> {
        self.credentials.as_ref()
    }

    /// The cancel flag given, if any.
    pub fn cancel_flag(&self) -> Option<&CancelFlag> {
        self.cancel.as_ref()
    }

    /// The progress callback given, if any.
    pub fn progress_callback(&self) -> Option<&ProgressCallback> {
        self.progress.as_ref()
    }

    /// `op` with these options' id, bounds (`default` when none were
    /// given) and cancel flag (a fresh one when none was given).
    /// Credentials are left to the client: where they come from depends
    /// on the transport.
    pub fn apply(&self, mut op: Operation, default: Bounds) -> Operation {
        op = op.bounds(self.bounds.unwrap_or(default));
        op = op.cancel(self.cancel.clone().unwrap_or_default());
        if let Some(id) = &self.id {
            op = op.id(id.clone());
        }
        op
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("id", &self.id)
            .field("bounds", &self.bounds)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<source>"),
            )
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.as_ref().map(|_| "<callback>"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::Effect;

    #[test]
    fn a_template_without_a_flag_gives_every_call_its_own() {
        let template = CallOptions::new().profile(Profile::Round);
        let a = template.apply(
            Operation::new("fetch", Effect::Read, "r"),
            Bounds::default(),
        );
        a.cancel.cancel();
        let b = template.apply(
            Operation::new("fetch", Effect::Read, "r"),
            Bounds::default(),
        );
        assert!(!b.cancel.is_cancelled(), "one call's flag reached another");
        assert_eq!(b.bounds, Profile::Round.bounds());
    }

    #[test]
    fn a_flag_set_per_call_stops_only_that_call() {
        let template = CallOptions::new();
        let flag = CancelFlag::new();
        let first = template.clone().cancel(&flag);
        let second = template.clone();
        flag.cancel();
        let op1 = first.apply(
            Operation::new("push", Effect::Write, "r"),
            Bounds::default(),
        );
        let op2 = second.apply(
            Operation::new("push", Effect::Write, "r"),
            Bounds::default(),
        );
        assert!(op1.cancel.is_cancelled());
        assert!(!op2.cancel.is_cancelled());
    }

    #[test]
    fn the_clients_bounds_apply_when_none_are_given() {
        let given = Profile::Wait.bounds();
        let op = CallOptions::new()
            .id("x")
            .apply(Operation::new("ls-refs", Effect::Read, "r"), given);
        assert_eq!(op.bounds, given);
        assert_eq!(op.id.as_deref(), Some("x"));
    }
}
