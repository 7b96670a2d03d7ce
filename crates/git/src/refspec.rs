//! Refspec sides: a ref name mapped through a refspec as git maps it, for
//! the fetch's pruning and the push's remote-tracking leases alike.

use gix::bstr::ByteSlice;

/// `name` mapped from the refspec side `from` to the side `to`, as git maps
/// a ref through a refspec: with one `*` on each side, what it matches in
/// `from` replaces it in `to`; with none, `name` must be `from` and the
/// result is `to`. `None` when `name` does not match.
pub(crate) fn map_through(from: &[u8], to: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    match (from.split_once_str("*"), to.split_once_str("*")) {
        (Some((fp, fs)), Some((tp, ts))) => {
            let middle = name.strip_prefix(fp)?.strip_suffix(fs)?;
            Some([tp, middle, ts].concat())
        }
        (None, None) if name == from => Some(to.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_through_refspec_sides() {
        let m = |f: &str, t: &str, n: &str| {
            map_through(f.as_bytes(), t.as_bytes(), n.as_bytes())
                .map(|v| String::from_utf8(v).expect("utf-8"))
        };
        assert_eq!(
            m("refs/heads/*", "refs/remotes/origin/*", "refs/heads/a/b").as_deref(),
            Some("refs/remotes/origin/a/b")
        );
        assert_eq!(
            m(
                "refs/remotes/origin/*",
                "refs/heads/*",
                "refs/remotes/origin/x"
            )
            .as_deref(),
            Some("refs/heads/x")
        );
        assert_eq!(m("refs/heads/*", "refs/r/*", "refs/tags/x"), None);
        assert_eq!(
            m("refs/heads/main", "refs/r/main", "refs/heads/main").as_deref(),
            Some("refs/r/main")
        );
        assert_eq!(
            m("refs/heads/main", "refs/r/main", "refs/heads/other"),
            None
        );
        assert_eq!(m("refs/heads/*", "refs/r/main", "refs/heads/x"), None);
    }
}
