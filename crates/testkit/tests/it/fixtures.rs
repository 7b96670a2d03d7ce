//! The fixture script, through the testkit's `fixtures` module.

use sluice_testkit::fixtures;
use sluice_testkit::repo::{self, git, rev_parse};

#[test]
fn the_small_fixture_builds_to_the_same_ids_twice() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixtures::build("small", &dir.path().join("a.git")).unwrap();
    let b = fixtures::build("small", &dir.path().join("b.git")).unwrap();
    let refs = repo::refs(&a);
    assert_eq!(refs, repo::refs(&b));
    let names: Vec<&str> = refs.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "refs/heads/feature",
            "refs/heads/main",
            "refs/heads/release",
            "refs/tags/light",
            "refs/tags/v1.0"
        ]
    );
    assert_eq!(git(&a, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(git(&a, &["cat-file", "-t", "v1.0"]), "tag");
    assert_eq!(git(&a, &["cat-file", "-t", "light"]), "commit");
    assert_eq!(rev_parse(&a, "light"), rev_parse(&a, "main"));
    assert!(repo::is_ancestor(&a, "main", "feature"));
    assert!(repo::fsck(&a).is_ok());
}

#[test]
fn an_unknown_fixture_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(fixtures::build("huge", &dir.path().join("x")).is_err());
}

#[test]
fn the_medium_fixture_is_cached_reproducible_and_copyable() {
    let first = fixtures::cached("medium").unwrap();
    // A build makes (and removes) a temporary directory in the cache
    // directory, which changes that directory's modification time; a
    // second call that finds the fixture cached changes nothing there.
    let cache_changed = || {
        std::fs::metadata(fixtures::cache_dir())
            .unwrap()
            .modified()
            .unwrap()
    };
    let before = cache_changed();
    let again = fixtures::cached("medium").unwrap();
    assert_eq!(
        cache_changed(),
        before,
        "the second call built the fixture again"
    );
    assert_eq!(first, again);
    assert_eq!(
        rev_parse(&first, "main").as_deref(),
        Some(fixtures::MEDIUM_MAIN)
    );
    assert_eq!(git(&first, &["rev-list", "--count", "main"]), "5000");
    assert_eq!(
        git(&first, &["ls-tree", "-r", "--name-only", "main"])
            .lines()
            .count(),
        500
    );
    let dir = tempfile::tempdir().unwrap();
    let copy = fixtures::copy_of("medium", &dir.path().join("m.git")).unwrap();
    assert_eq!(repo::refs(&copy), repo::refs(&first));
    repo::commit_on(&copy, "main", "only in the copy");
    assert_eq!(
        rev_parse(&first, "main").as_deref(),
        Some(fixtures::MEDIUM_MAIN)
    );
}
