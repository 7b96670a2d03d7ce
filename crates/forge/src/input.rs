//! What the typed calls check before anything is sent: each argument a
//! caller passes, refused as a [`ForgeInputError`] when it cannot name what
//! the call means (a path segment made of `..`, a commit id the settling
//! read could never match, a state the API ignores).

use crate::ci::CiQuery;
use crate::error::ForgeInputError;
use crate::types::RepoRef;

/// A commit id: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits. Lowercase
/// because the settling reads compare it with the forge's own (lowercase)
/// ids: an uppercase id would never be found, and a landed write would read
/// as moved.
pub(crate) fn sha(s: &str) -> Result<(), ForgeInputError> {
    let hex = s
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if (s.len() == 40 || s.len() == 64) && hex {
        Ok(())
    } else {
        Err(ForgeInputError::Sha(s.to_string()))
    }
}

/// A number the forge counts from 1 (pull requests, issues, check runs).
pub(crate) fn number(what: &'static str, n: u64) -> Result<(), ForgeInputError> {
    if n == 0 {
        Err(ForgeInputError::Number { what })
    } else {
        Ok(())
    }
}

/// A CI query: every name given not empty, the base branch a branch name
/// (`main`, never `refs/heads/main`), no name both required and excluded.
pub(crate) fn ci_query(q: &CiQuery) -> Result<(), ForgeInputError> {
    if let Some(n) = q
        .required_names()
        .iter()
        .chain(q.excluded_names())
        .find(|n| n.trim().is_empty())
    {
        return Err(ForgeInputError::CheckName(n.clone()));
    }
    if let Some(b) = q.base_branch() {
        ref_name(b, false)?;
    }
    match q
        .required_names()
        .iter()
        .find(|n| q.excluded_names().contains(n))
    {
        Some(n) => Err(ForgeInputError::RequiredAndExcluded { name: n.clone() }),
        None => Ok(()),
    }
}

/// A pull request state the list takes.
pub(crate) fn state(s: &str) -> Result<(), ForgeInputError> {
    match s {
        "open" | "closed" | "all" => Ok(()),
        _ => Err(ForgeInputError::State(s.to_string())),
    }
}

/// A ref name as the calls take it: `heads/main` (with `categorised`, a
/// name of at least two components), or `main`, `v1.0`, a sha (without).
/// Never empty, never with a leading `/` or `refs/`, and a valid git ref
/// name (the rules of `git check-ref-format`).
pub(crate) fn ref_name(name: &str, categorised: bool) -> Result<(), ForgeInputError> {
    let bad = |why: &str| {
        Err(ForgeInputError::RefName {
            name: name.to_string(),
            why: why.to_string(),
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.starts_with('/') {
        return bad("it starts with /");
    }
    if name.starts_with("refs/") {
        return bad("give it without its leading refs/");
    }
    if categorised && !name.contains('/') {
        return bad("it names no kind of ref (heads/, tags/)");
    }
    match git_ref_format(name) {
        Some(why) => bad(why),
        None => Ok(()),
    }
}

/// Why `name` is not a valid git ref name, if it is not: no `..`, no `@{`,
/// not `@`; no control character, space, `~`, `^`, `:`, `?`, `*`, `[` or
/// `\`; no empty component, none starting with `.` or ending with `.lock`;
/// not ending with `/` or `.`.
fn git_ref_format(name: &str) -> Option<&'static str> {
    if name.contains("..") {
        return Some("it holds ..");
    }
    if name.bytes().any(|b| b.is_ascii_control()) {
        return Some("it holds a control character");
    }
    if name
        .chars()
        .any(|c| matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Some("it holds a space or one of ~ ^ : ? * [ \\");
    }
    if name == "@" || name.contains("@{") {
        return Some("it is @ or holds @{");
    }
    if name.ends_with('/') || name.ends_with('.') {
        return Some("it ends with / or .");
    }
    for part in name.split('/') {
        if part.is_empty() {
            return Some("it holds an empty component (//)");
        }
        if part.starts_with('.') {
            return Some("a component starts with .");
        }
        if part.ends_with(".lock") {
            return Some("a component ends with .lock");
        }
    }
    None
}

/// An owner or repository name: ASCII letters, digits, `-`, `_` and `.`,
/// not empty, not `.` or `..` (each is one path segment of the API's URLs).
fn name_part(part: &str) -> Option<&'static str> {
    if part.is_empty() {
        return Some("an empty owner or name");
    }
    if part == "." || part == ".." {
        return Some("an owner or name of . or ..");
    }
    if !part
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Some("only ASCII letters, digits, -, _ and . make an owner or name");
    }
    None
}

/// A repository: its owner and name.
pub(crate) fn repo(r: &RepoRef) -> Result<(), ForgeInputError> {
    match name_part(&r.owner).or_else(|| name_part(&r.name)) {
        Some(why) => Err(ForgeInputError::Repo {
            repo: format!("{}/{}", r.owner, r.name),
            why: why.to_string(),
        }),
        None => Ok(()),
    }
}

/// A pull request's head: `branch`, or `owner:branch` for a fork's.
pub(crate) fn head(label: &str) -> Result<(), ForgeInputError> {
    let bad = |why: String| {
        Err(ForgeInputError::Head {
            label: label.to_string(),
            why,
        })
    };
    let branch = match label.split_once(':') {
        Some((owner, branch)) => {
            if let Some(why) = name_part(owner) {
                return bad(why.to_string());
            }
            branch
        }
        None => label,
    };
    match ref_name(branch, false) {
        Ok(()) => Ok(()),
        Err(ForgeInputError::RefName { why, .. }) => bad(format!("the branch: {why}")),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_ids_are_40_or_64_lowercase_hex_digits() {
        assert!(sha(&"a".repeat(40)).is_ok());
        assert!(sha(&"0".repeat(64)).is_ok());
        for bad in ["", "abc", &"A".repeat(40), &"g".repeat(40), &"a".repeat(41)] {
            assert_eq!(sha(bad), Err(ForgeInputError::Sha(bad.to_string())));
        }
    }

    #[test]
    fn ref_names_follow_git_and_the_calls_form() {
        for ok in ["heads/main", "tags/v1.0", "heads/feature/x-1"] {
            assert!(ref_name(ok, true).is_ok(), "{ok}");
        }
        for ok in ["main", "v1.0", "1111111111111111111111111111111111111111"] {
            assert!(ref_name(ok, false).is_ok(), "{ok}");
        }
        assert!(ref_name("main", true).is_err());
        for bad in [
            "",
            "/heads/main",
            "refs/heads/main",
            "heads/../main",
            "heads/ma\nin",
            "heads/ma in",
            "heads//main",
            "heads/main/",
            "heads/main.",
            "heads/.hidden",
            "heads/main.lock",
            "heads/a@{1}",
            "@",
            "heads/a:b",
        ] {
            assert!(
                matches!(ref_name(bad, false), Err(ForgeInputError::RefName { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn numbers_states_heads_and_repositories() {
        assert!(number("pull request", 1).is_ok());
        assert_eq!(
            number("issue", 0),
            Err(ForgeInputError::Number { what: "issue" })
        );
        for ok in ["open", "closed", "all"] {
            assert!(state(ok).is_ok());
        }
        assert!(state("merged").is_err());
        assert!(head("feature").is_ok());
        assert!(head("octo:feature/x").is_ok());
        for bad in ["", ":feature", "a:b:c", "octo/x:feature", "fea ture"] {
            assert!(
                matches!(head(bad), Err(ForgeInputError::Head { .. })),
                "{bad:?}"
            );
        }
        assert!(repo(&RepoRef::new("octo", "repo.rs")).is_ok());
        for (o, n) in [
            ("", "r"),
            ("o", ""),
            ("..", "r"),
            ("o", "a/b"),
            ("o", "r?x"),
        ] {
            assert!(
                matches!(repo(&RepoRef::new(o, n)), Err(ForgeInputError::Repo { .. })),
                "{o}/{n}"
            );
        }
    }
}
