//! The textual forms of push updates and leases, as the CLI takes them:
//! `[+]<SRC>:<DST>` (`:<DST>` deletes; `<DST>` full or short) and
//! `<DST>=<OID>` / `<DST>=absent` / `<DST>=<abbreviated OID>` / `<DST>`.
//! Pure parsers (fuzzed); names and revisions are resolved later against a
//! repository ([`expand_destination`], [`LeaseSpec::resolve`]).

use gix::ObjectId;

use crate::input::InputError;
use crate::named_remote::NamedRemote;

/// `[+]<SRC>:<DST>` before its source is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushSpec {
    /// `+`: force.
    pub force: bool,
    /// The source revision; `None` deletes.
    pub src: Option<String>,
    /// The destination ref: a full name (`refs/heads/main`), or a short one
    /// (`main`) that [`expand_destination`] expands.
    pub dst: String,
}

/// Check a short ref name (`main`, `v1`, `team/topic`): valid as
/// `refs/heads/<name>` and not itself starting with `refs/`.
pub fn check_short_name(name: &str) -> Result<(), InputError> {
    if name.starts_with("refs/") {
        return check_ref_name(name);
    }
    let bad = |reason: String| InputError::RefName {
        name: name.to_string(),
        reason,
    };
    if name == "HEAD" || name.starts_with('-') {
        return Err(bad("not a ref name to push to".into()));
    }
    let full = format!("refs/heads/{name}");
    gix::validate::reference::name(full.as_bytes().into()).map_err(|e| bad(e.to_string()))?;
    Ok(())
}

/// The full destination of a push: `dst` as it is when it starts with
/// `refs/`; a short `dst` takes the kind of the source, as git guesses it —
/// a source that is (or whose `HEAD` points to) a branch makes
/// `refs/heads/<dst>`, a tag `refs/tags/<dst>`. A short destination with
/// no source (a deletion) or with a source that is no branch or tag (an
/// object id, `HEAD~1`) cannot be told apart here, and is refused: give
/// the full name. (git would also look at the remote's refs for a ref of
/// that name; this expansion is decided locally, before any call.) A
/// source naming more than one local ref is refused first
/// ([`check_unambiguous_source`]).
///
/// **A repository kept open.** This reads `repo` as it is: gix's handle
/// sizes its pack list when opened, and after about 32 more packs (a
/// pack per fetch) it no longer sees new objects. Pass
/// [`crate::fresh_view`]`(repo)` when `repo` was opened long ago.
pub fn expand_destination(
    dst: &str,
    src: Option<&str>,
    repo: &gix::Repository,
) -> Result<String, InputError> {
    if let Some(src) = src {
        check_unambiguous_source(src, repo)?;
    }
    if dst.starts_with("refs/") {
        check_ref_name(dst)?;
        return Ok(dst.to_string());
    }
    if dst != "HEAD" {
        check_short_name(dst)?;
    }
    let refuse = |why: &str| InputError::RefName {
        name: dst.to_string(),
        reason: format!("{why}; give the full name (refs/heads/{dst} or refs/tags/{dst})"),
    };
    let Some(src) = src else {
        return Err(refuse(
            "a short name to delete cannot be told a branch or a tag",
        ));
    };
    if dst == "HEAD" && src == "HEAD" {
        // `git push <url> HEAD`: the branch HEAD points to, of that name.
        return match repo.head_name() {
            Ok(Some(name)) if name.as_bstr().starts_with(b"refs/heads/") => {
                Ok(name.as_bstr().to_string())
            }
            _ => Err(InputError::RefName {
                name: dst.to_string(),
                reason: "HEAD is detached: give <SRC>:<DST>".into(),
            }),
        };
    }
    let found = repo.try_find_reference(src).ok().flatten().ok_or_else(|| {
        refuse(&format!(
            "the source {src:?} is not a branch or a tag, so the kind of {dst:?} is unknown"
        ))
    })?;
    let full = match found.target() {
        gix::refs::TargetRef::Symbolic(target) => target.as_bstr().to_string(),
        gix::refs::TargetRef::Object(_) => found.name().as_bstr().to_string(),
    };
    if full.starts_with("refs/heads/") {
        Ok(format!("refs/heads/{dst}"))
    } else if full.starts_with("refs/tags/") {
        Ok(format!("refs/tags/{dst}"))
    } else {
        Err(refuse(&format!(
            "the source {src:?} ({full}) is not a branch or a tag, so the kind of {dst:?} is unknown"
        )))
    }
}

/// Refuse a push source that names more than one local ref, as git's
/// `count_refspec_match` does ("src refspec amb matches more than one"):
/// `src` is looked up by git's rules (`<src>`, `refs/<src>`,
/// `refs/tags/<src>`, `refs/heads/<src>`, `refs/remotes/<src>`,
/// `refs/remotes/<src>/HEAD`); two matches under `refs/heads/` or
/// `refs/tags/` (or spelled from `refs/`), or only weak matches elsewhere
/// and more than one, are ambiguous. One strong match with any weak ones
/// is not. A source matching no ref (an object id, `HEAD~1`) is not
/// checked here.
pub fn check_unambiguous_source(src: &str, repo: &gix::Repository) -> Result<(), InputError> {
    let rules = [
        src.to_string(),
        format!("refs/{src}"),
        format!("refs/tags/{src}"),
        format!("refs/heads/{src}"),
        format!("refs/remotes/{src}"),
        format!("refs/remotes/{src}/HEAD"),
    ];
    let (mut strong, mut weak) = (Vec::new(), Vec::new());
    for full in rules.iter().filter(|f| f.starts_with("refs/")) {
        if gix::validate::reference::name(full.as_bytes().into()).is_err() {
            continue;
        }
        let found = repo
            .try_find_reference(full.as_str())
            .ok()
            .flatten()
            .is_some_and(|r| r.name().as_bstr() == full.as_bytes());
        if !found || strong.contains(full) || weak.contains(full) {
            continue;
        }
        let spelled_out = full.len() == src.len() || full.len() == src.len() + 5;
        if spelled_out || full.starts_with("refs/heads/") || full.starts_with("refs/tags/") {
            strong.push(full.clone());
        } else {
            weak.push(full.clone());
        }
    }
    let matched = if strong.is_empty() { weak } else { strong };
    if matched.len() > 1 {
        return Err(InputError::Push(format!(
            "src refspec {src} matches more than one: {}; name the one meant in full",
            matched.join(" and ")
        )));
    }
    Ok(())
}

/// Check a full ref name (`refs/...`, valid per git's rules).
pub fn check_ref_name(name: &str) -> Result<(), InputError> {
    let bad = |reason: &str| InputError::RefName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if !name.starts_with("refs/") {
        return Err(bad("a full ref name starting with refs/ is needed"));
    }
    gix::validate::reference::name(name.as_bytes().into()).map_err(|e| bad(&e.to_string()))?;
    Ok(())
}

impl PushSpec {
    /// Parse `[+]<SRC>:<DST>` or `:<DST>`.
    pub fn parse(text: &str) -> Result<PushSpec, InputError> {
        let bad = |reason: &str| InputError::Refspec {
            spec: text.to_string(),
            reason: reason.to_string(),
        };
        let (force, rest) = match text.strip_prefix('+') {
            Some(r) => (true, r),
            None => (false, text),
        };
        // `<SRC>` alone pushes to the ref of the same name (`main`,
        // `HEAD`: the branch it points to), as git's `git push <url> main`.
        let (src, dst) = rest.rsplit_once(':').unwrap_or((rest, rest));
        if src == "HEAD" && dst == "HEAD" {
            return Ok(PushSpec {
                force,
                src: Some(src.to_string()),
                dst: dst.to_string(),
            });
        }
        if dst.is_empty() {
            return Err(bad("the destination is empty"));
        }
        if src.contains('*') || dst.contains('*') {
            return Err(bad("patterns are not supported in push specs"));
        }
        check_short_name(dst).map_err(|e| bad(&e.to_string()))?;
        if force && src.is_empty() {
            return Err(bad("'+' with a deletion makes no sense"));
        }
        Ok(PushSpec {
            force,
            src: (!src.is_empty()).then(|| src.to_string()),
            dst: dst.to_string(),
        })
    }
}

/// What a push expects the remote ref to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// No expectation beyond the first advertisement this operation read.
    Any,
    /// The ref must hold this object (force-with-lease; implies force).
    Oid(ObjectId),
    /// The ref must not exist.
    Absent,
}

/// Parse `<DST>=<OID>` or `<DST>=absent`.
pub fn parse_lease(text: &str) -> Result<(String, Lease), InputError> {
    let bad = |reason: &str| InputError::Refspec {
        spec: text.to_string(),
        reason: reason.to_string(),
    };
    let (dst, value) = text
        .split_once('=')
        .ok_or_else(|| bad("expected <DST>=<OID> or <DST>=absent"))?;
    check_ref_name(dst).map_err(|e| bad(&e.to_string()))?;
    let lease = if value == "absent" {
        Lease::Absent
    } else {
        Lease::Oid(parse_oid(value).map_err(|e| bad(&e.to_string()))?)
    };
    Ok((dst.to_string(), lease))
}

/// A lease as written, before it is resolved against the local repository.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseSpec {
    /// `<DST>=<OID>`: 40 hex digits.
    Oid(ObjectId),
    /// `<DST>=<HEX>`: 4 to 39 hex digits, resolved locally.
    Abbreviated(String),
    /// `<DST>=absent`.
    Absent,
    /// `<DST>` alone: what the remote-tracking ref of `<DST>` holds, for
    /// the configured remote whose URL is the push's (git's
    /// `--force-with-lease=<ref>`).
    Tracking,
}

/// Parse `<DST>`, `<DST>=<OID>`, `<DST>=<abbreviated OID>` or
/// `<DST>=absent`; `<DST>` full or short.
pub fn parse_lease_spec(text: &str) -> Result<(String, LeaseSpec), InputError> {
    let bad = |reason: &str| InputError::Refspec {
        spec: text.to_string(),
        reason: reason.to_string(),
    };
    let (dst, value) = match text.split_once('=') {
        Some((d, v)) => (d, Some(v)),
        None => (text, None),
    };
    check_short_name(dst).map_err(|e| bad(&e.to_string()))?;
    let spec = match value {
        None => LeaseSpec::Tracking,
        Some("absent") => LeaseSpec::Absent,
        Some(v) if v.len() == 40 => LeaseSpec::Oid(parse_oid(v).map_err(|e| bad(&e.to_string()))?),
        Some(v) if (4..40).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()) => {
            LeaseSpec::Abbreviated(v.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(bad(
                "expected <DST>, <DST>=<OID> (4 to 40 hex digits) or <DST>=absent",
            ))
        }
    };
    Ok((dst.to_string(), spec))
}

impl LeaseSpec {
    /// The lease on the full destination `dst` of a push to `remote` (a
    /// configured remote's name, or a URL): an abbreviated id is resolved
    /// in `repo` (ambiguous or unknown: an error); `Tracking` reads the
    /// remote-tracking ref of `dst` of the remote named, or of the remote
    /// configured with a URL naming the same repository as git normalises
    /// it (none: an error; no tracking ref: the ref is expected absent, as
    /// git does).
    pub fn resolve(
        &self,
        dst: &str,
        remote: &str,
        repo: &gix::Repository,
    ) -> Result<Lease, InputError> {
        match self {
            LeaseSpec::Oid(o) => Ok(Lease::Oid(*o)),
            LeaseSpec::Absent => Ok(Lease::Absent),
            LeaseSpec::Abbreviated(hex) => {
                let prefix =
                    gix::hash::Prefix::from_hex(hex).map_err(|e| InputError::Revision {
                        rev: hex.clone(),
                        reason: e.to_string(),
                    })?;
                match repo.objects.lookup_prefix(prefix, None) {
                    Ok(Some(Ok(id))) => Ok(Lease::Oid(id)),
                    Ok(Some(Err(()))) => Err(InputError::Revision {
                        rev: hex.clone(),
                        reason: "ambiguous: more than one object starts with it".into(),
                    }),
                    Ok(None) => Err(InputError::Revision {
                        rev: hex.clone(),
                        reason: "no object in the local repository starts with it".into(),
                    }),
                    Err(e) => Err(InputError::Revision {
                        rev: hex.clone(),
                        reason: e.to_string(),
                    }),
                }
            }
            LeaseSpec::Tracking => tracking_value(dst, remote, repo),
        }
    }
}

/// What the remote-tracking ref of `dst` holds, for the remote of `repo`
/// named `remote`, or else the one whose URL names the same repository as
/// `remote` (compared as git normalises URLs: [`NamedRemote::for_url`]).
fn tracking_value(dst: &str, remote: &str, repo: &gix::Repository) -> Result<Lease, InputError> {
    let refuse = |reason: String| InputError::RefName {
        name: dst.to_string(),
        reason,
    };
    let shown = sluice_policy::text::redact(remote);
    let found = match NamedRemote::find(repo, remote)? {
        Some(r) => r,
        None => NamedRemote::for_url(repo, remote).ok_or_else(|| InputError::Remote {
            name: shown.clone(),
            reason: format!(
                "a lease without a value ({dst}) reads the remote-tracking ref of the remote \
                 pushed to, and no remote is configured with this URL: name the remote, or \
                 give {dst}=<OID>"
            ),
        })?,
    };
    let tracking = found.tracking_ref(dst).ok_or_else(|| {
        refuse(format!(
            "no fetch refspec of remote {:?} maps {dst} to a remote-tracking ref; give {dst}=<OID>",
            found.name
        ))
    })?;
    match repo.try_find_reference(tracking.as_str()) {
        Ok(Some(mut r)) => r
            .peel_to_id()
            .map(|id| Lease::Oid(id.detach()))
            .map_err(|e| refuse(format!("cannot read {tracking}: {e}"))),
        Ok(None) => Ok(Lease::Absent),
        Err(e) => Err(refuse(format!("cannot read {tracking}: {e}"))),
    }
}

/// Parse a full 40-hex object id.
pub fn parse_oid(text: &str) -> Result<ObjectId, InputError> {
    if text.len() != 40 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(InputError::Revision {
            rev: text.to_string(),
            reason: "an object id is 40 hex digits".into(),
        });
    }
    ObjectId::from_hex(text.to_ascii_lowercase().as_bytes()).map_err(|e| InputError::Revision {
        rev: text.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_specs_parse_and_bad_ones_are_refused() {
        let s = PushSpec::parse("+main:refs/heads/main").expect("valid");
        assert!(s.force);
        assert_eq!(s.src.as_deref(), Some("main"));
        let d = PushSpec::parse(":refs/heads/gone").expect("valid");
        assert_eq!(d.src, None);
        let alone = PushSpec::parse("main").expect("src alone");
        assert_eq!(
            (alone.src.as_deref(), alone.dst.as_str()),
            (Some("main"), "main")
        );
        assert_eq!(PushSpec::parse("HEAD").expect("HEAD alone").dst, "HEAD");
        assert!(PushSpec::parse("+HEAD~1").is_err());
        assert_eq!(PushSpec::parse("HEAD:main").expect("short").dst, "main");
        assert!(PushSpec::parse("main:HEAD").is_err());
        assert!(PushSpec::parse("main:-x").is_err());
        assert!(PushSpec::parse("main:").is_err());
        assert!(PushSpec::parse("a:refs/heads/*").is_err());
        assert!(PushSpec::parse("+:refs/heads/x").is_err());
        assert!(PushSpec::parse("main:refs/heads/a..b").is_err());
    }

    #[test]
    fn leases_parse() {
        let oid = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            parse_lease(&format!("refs/heads/main={oid}"))
                .expect("valid")
                .1,
            Lease::Oid(ObjectId::from_hex(oid.as_bytes()).expect("hex"))
        );
        assert_eq!(
            parse_lease("refs/heads/x=absent").expect("valid").1,
            Lease::Absent
        );
        assert!(parse_lease("refs/heads/x=12").is_err());
        assert!(parse_lease("refs/heads/x").is_err());
        assert!(parse_lease("main=absent").is_err());
        assert_eq!(
            parse_lease_spec("main").expect("valid"),
            ("main".into(), LeaseSpec::Tracking)
        );
        assert_eq!(
            parse_lease_spec("refs/heads/x=ABCD12").expect("valid").1,
            LeaseSpec::Abbreviated("abcd12".into())
        );
        assert!(parse_lease_spec("x=abc").is_err());
        assert!(parse_lease_spec("x=zzzz").is_err());
        assert!(parse_lease_spec("x=").is_err());
    }
}
