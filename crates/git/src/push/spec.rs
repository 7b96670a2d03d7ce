//! The textual forms of push updates and leases, as the CLI takes them:
//! `[+]<SRC>:<DST>` (`:<DST>` deletes) and `<DST>=<OID>` / `<DST>=absent`.
//! Pure parsers (fuzzed); revisions are resolved later against a repository.

use gix::ObjectId;

use crate::client::InputError;

/// `[+]<SRC>:<DST>` before its source is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushSpec {
    /// `+`: force.
    pub force: bool,
    /// The source revision; `None` deletes.
    pub src: Option<String>,
    /// The full destination ref name.
    pub dst: String,
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
        let (src, dst) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("expected <SRC>:<DST> or :<DST>"))?;
        if dst.is_empty() {
            return Err(bad("the destination is empty"));
        }
        if src.contains('*') || dst.contains('*') {
            return Err(bad("patterns are not supported in push specs"));
        }
        check_ref_name(dst).map_err(|e| bad(&e.to_string()))?;
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
        assert!(PushSpec::parse("main").is_err());
        assert!(PushSpec::parse("main:main").is_err());
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
    }
}
