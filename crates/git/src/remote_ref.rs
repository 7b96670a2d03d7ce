//! A ref as a remote advertised it: the value ls-refs returns and a push's
//! settling read compares, whichever way it was listed (gix-protocol's
//! handshake and `ls-refs`, or the one-request listing).

use gix::protocol::handshake::Ref;
use gix::ObjectId;

/// A ref as the remote advertised it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteRef {
    /// The full name (`HEAD`, `refs/heads/main`).
    pub name: String,
    /// The object it points to; `None` when unborn.
    pub oid: Option<ObjectId>,
    /// For an annotated tag, the object the tag points to.
    pub peeled: Option<ObjectId>,
    /// For a symbolic ref, its target.
    pub symref_target: Option<String>,
}

impl RemoteRef {
    /// The ref as gix-protocol read it from an advertisement or `ls-refs`.
    pub(crate) fn from_gix(r: Ref) -> RemoteRef {
        match r {
            Ref::Peeled {
                full_ref_name,
                tag,
                object,
            } => RemoteRef {
                name: full_ref_name.to_string(),
                oid: Some(tag),
                peeled: Some(object),
                symref_target: None,
            },
            Ref::Direct {
                full_ref_name,
                object,
            } => RemoteRef {
                name: full_ref_name.to_string(),
                oid: Some(object),
                peeled: None,
                symref_target: None,
            },
            Ref::Symbolic {
                full_ref_name,
                target,
                tag,
                object,
            } => RemoteRef {
                name: full_ref_name.to_string(),
                oid: Some(tag.unwrap_or(object)),
                peeled: tag.map(|_| object),
                symref_target: Some(target.to_string()),
            },
            Ref::Unborn {
                full_ref_name,
                target,
            } => RemoteRef {
                name: full_ref_name.to_string(),
                oid: None,
                peeled: None,
                symref_target: Some(target.to_string()),
            },
        }
    }
}
