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
    headers: Vec<(String, String)>,
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

    /// Send the header `name: value` on every HTTP request of the call —
    /// its attempts, its settling reads and its token purchases — to the
    /// operation's host only (never to another host a request is
    /// redirected to), never to a proxy: a W3C `traceparent`, the caller's
    /// own request id. Added after the client's own headers (see the
    /// clients' builders); a name given twice is sent twice. Transports
    /// that are not HTTP (git://, ssh://, file://) send none.
    ///
    /// # Errors
    ///
    /// [`HeaderRefused`] for a name the client sets itself
    /// ([`RESERVED_HEADERS`]: `Authorization`, `Host`, `Content-Length`,
    /// `Transfer-Encoding`, `X-GitHub-Api-Version`), a name that is not an
    /// HTTP token, or a value with a control character.
    ///
    /// ```
    /// use sluice_policy::{CallOptions, HeaderRefused};
    ///
    /// let opts = CallOptions::new()
    ///     .header("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    ///     .expect("a header a caller may give");
    /// assert_eq!(opts.headers().len(), 1);
    /// assert!(matches!(
    ///     CallOptions::new().header("Authorization", "Bearer x"),
    ///     Err(HeaderRefused::Reserved { .. })
    /// ));
    /// ```
    pub fn header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, HeaderRefused> {
        let (name, value) = (name.into(), value.into());
        check_header(&name, &value)?;
        self.headers.push((name, value));
        Ok(self)
    }

    /// The headers given with [`CallOptions::header`], in order.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
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
        op.headers.extend(self.headers.iter().cloned());
        op
    }
}

/// Header names a caller may not give ([`CallOptions::header`], the
/// clients' builders): the client sets them itself.
pub const RESERVED_HEADERS: [&str; 5] = [
    "authorization",
    "host",
    "content-length",
    "transfer-encoding",
    "x-github-api-version",
];

/// A header a caller gave that cannot go on a request: bad input, refused
/// before anything is sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderRefused {
    /// A name the client sets itself ([`RESERVED_HEADERS`]).
    #[error("header {name:?} is set by the client itself and may not be given")]
    Reserved {
        /// The name given.
        name: String,
    },
    /// Not an HTTP header name (empty, or a character that is not a token's).
    #[error("{name:?} is not an HTTP header name")]
    Name {
        /// The name given.
        name: String,
    },
    /// A value with a control character (a line break would end the header).
    #[error("the value of header {name:?} holds a control character")]
    Value {
        /// The header's name.
        name: String,
    },
}

/// Whether `name: value` may go on a request as a caller's header (see
/// [`CallOptions::header`]).
pub fn check_header(name: &str, value: &str) -> Result<(), HeaderRefused> {
    let token = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(HeaderRefused::Name {
            name: name.to_string(),
        });
    }
    if RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(HeaderRefused::Reserved {
            name: name.to_string(),
        });
    }
    if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(HeaderRefused::Value {
            name: name.to_string(),
        });
    }
    Ok(())
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("id", &self.id)
            .field("headers", &self.headers)
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
    fn reserved_names_bad_names_and_bad_values_are_refused_as_input() {
        for name in [
            "Authorization",
            "host",
            "Content-Length",
            "TRANSFER-ENCODING",
            "X-GitHub-Api-Version",
        ] {
            assert_eq!(
                CallOptions::new().header(name, "x").unwrap_err(),
                HeaderRefused::Reserved { name: name.into() }
            );
        }
        for name in ["", "two words", "colon:", "é"] {
            assert!(matches!(
                CallOptions::new().header(name, "x"),
                Err(HeaderRefused::Name { .. })
            ));
        }
        assert!(matches!(
            CallOptions::new().header("x-request-id", "a\r\nInjected: 1"),
            Err(HeaderRefused::Value { .. })
        ));
        let opts = CallOptions::new()
            .header("X-Request-Id", "job-7\tpart 2")
            .expect("a caller's own request id");
        let op = opts.apply(
            Operation::new("ls-refs", Effect::Read, "r"),
            Bounds::default(),
        );
        assert_eq!(
            op.headers,
            vec![("X-Request-Id".to_string(), "job-7\tpart 2".to_string())]
        );
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
