//! Text about remotes for messages: the one way URLs lose their user info
//! and the one way an error and its sources become a line.
//!
//! Every crate that writes a URL or an error chain into a message, a
//! tracing field or the JSON document goes through these two functions, so
//! a secret is removed the same way everywhere.

use crate::credential::user_info_span;

/// `text` (a URL, or a message quoting one) without the user info of its
/// first URL: `https://user:secret@host/r.git` → `https://host/r.git`.
///
/// Where the user info is follows [`user_info_span`], which is cautious on
/// purpose (a password holding a raw `/` still counts as user info).
pub fn redact(text: &str) -> String {
    match user_info_span(text) {
        Some(span) => format!("{}{}", &text[..span.start], &text[span.end..]),
        None => text.to_string(),
    }
}

/// An error and its sources joined with `: `, a source whose words the line
/// already holds skipped (many errors repeat their source in their own
/// message), and user info removed with [`redact`].
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    redact(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn user_info_is_removed_and_the_rest_kept() {
        assert_eq!(redact("https://u:s3cret@h/r.git"), "https://h/r.git");
        assert_eq!(
            redact("cannot reach https://tok@h:8443/r (refused)"),
            "cannot reach https://h:8443/r (refused)"
        );
        assert_eq!(redact("git://h/r.git"), "git://h/r.git");
    }

    #[test]
    fn a_chain_is_joined_once_each_and_redacted() {
        let inner = E("connection refused", None);
        let mid = E(
            "connect to https://u:p@h/r: connection refused",
            Some(Box::new(inner)),
        );
        let top = E("request failed", Some(Box::new(mid)));
        assert_eq!(
            error_chain(&top),
            "request failed: connect to https://h/r: connection refused"
        );
    }
}
