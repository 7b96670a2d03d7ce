//! What one operation is ([`Operation`]: kind, effect, remote, id, bounds,
//! credentials, cancel flag); the host that keys its retry budget is
//! [`host_of`]'s.

use std::sync::Arc;

use crate::bounds::Bounds;
use crate::class::Effect;
use crate::clock::CancelFlag;
use crate::credential::CredentialSource;
use crate::host::host_of;

/// What one operation is, and its bounds.
#[derive(Clone)]
pub struct Operation {
    /// `ls-refs`, `fetch`, `push`, `http-get`, ...
    pub kind: String,
    /// Read or write.
    pub effect: Effect,
    /// The remote, without user info (shown in outcomes).
    pub remote: String,
    /// The refs the operation names, for the ledger's record of what ran
    /// (see [`ClaimRequest::refs`](crate::ClaimRequest::refs)); `None`
    /// when not given.
    pub refs: Option<Vec<String>>,
    /// The host whose retry budget the operation spends.
    pub host: String,
    /// The operation id; generated when `None`. One id names one logical
    /// operation, whatever the kind of call: a job's fetch and its push
    /// take two ids (the push under the fetch's id is `rejected`, its
    /// `previous.kind` saying `fetch`). Ids are global to the ledger, kept
    /// for its retention window. A read under a generated id is not
    /// written to a ledger (see [`OperationInfo::id`](crate::OperationInfo::id)).
    pub id: Option<String>,
    /// Deadline, attempt timeout, attempts, backoff.
    pub bounds: Bounds,
    /// Where credentials are bought, when the remote needs one.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    /// The caller's cancel flag.
    pub cancel: CancelFlag,
    /// Headers the caller gives every HTTP request of the operation
    /// (checked by [`CallOptions::header`](crate::CallOptions::header)):
    /// the layers read them from [`AttemptCtx::headers`](crate::AttemptCtx::headers)
    /// and [`ReconcileCtx::headers`](crate::ReconcileCtx::headers).
    pub headers: Vec<(String, String)>,
}

impl Operation {
    /// An operation of `kind` and `effect` against `remote` (no user info),
    /// with the default (`command`) bounds.
    pub fn new(kind: impl Into<String>, effect: Effect, remote: impl Into<String>) -> Self {
        let remote = remote.into();
        let host = host_of(&remote);
        Operation {
            kind: kind.into(),
            effect,
            remote,
            refs: None,
            host,
            id: None,
            bounds: Bounds::default(),
            credentials: None,
            cancel: CancelFlag::new(),
            headers: Vec::new(),
        }
    }

    /// Set the bounds.
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Set the refs the operation names, as the ledger records them.
    pub fn refs<S: Into<String>>(mut self, refs: impl IntoIterator<Item = S>) -> Self {
        self.refs = Some(refs.into_iter().map(Into::into).collect());
        self
    }

    /// Set the operation id (one id, one logical operation: see the
    /// field).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Set the credential source.
    pub fn credentials(mut self, source: Arc<dyn CredentialSource>) -> Self {
        self.credentials = Some(source);
        self
    }

    /// Set the cancel flag.
    pub fn cancel(mut self, flag: CancelFlag) -> Self {
        self.cancel = flag;
        self
    }
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operation")
            .field("kind", &self.kind)
            .field("effect", &self.effect)
            .field("remote", &self.remote)
            .field("refs", &self.refs)
            .field("id", &self.id)
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}
