//! What [`sluice_git::fresh_view`] is for: a repository handle kept open
//! while packs keep landing (a pack per fetch) stops seeing the new ones
//! once gix's pack slots, sized when it was opened, are used up; a view
//! of it opened now sees them all.

use crate::common;

use common::*;
use sluice_testkit::repo;

/// One new blob in a pack of its own (as a fetch lands its objects),
/// the loose copy removed; its id.
fn blob_in_a_pack_of_its_own(repo_dir: &std::path::Path, n: usize) -> sluice_git::gix::ObjectId {
    let blob = repo::try_git_with_input(
        repo_dir,
        &["hash-object", "-w", "--stdin"],
        format!("blob {n}\n").as_bytes(),
    )
    .expect("blob");
    let blob = blob.trim().to_string();
    repo::try_git_with_input(
        repo_dir,
        &["pack-objects", "-q", "objects/pack/pack"],
        format!("{blob}\n").as_bytes(),
    )
    .expect("pack");
    oid(&blob)
}

#[test]
fn a_handle_kept_open_misses_objects_of_new_packs_that_a_fresh_view_sees() {
    let w = World::new();
    let path = w.path("kept.git");
    let kept = empty_repo(&path);
    let first = blob_in_a_pack_of_its_own(&path, 0);
    repo::git(&path, &["prune-packed"]);
    assert!(kept.has_object(first), "the handle sees its first pack");
    // More packs than the handle has slots (at least 32).
    let blobs: Vec<sluice_git::gix::ObjectId> = (1..=40)
        .map(|n| blob_in_a_pack_of_its_own(&path, n))
        .collect();
    repo::git(&path, &["prune-packed"]);
    let missed = blobs.iter().filter(|b| !kept.has_object(**b)).count();
    assert!(missed > 0, "the kept handle saw all 40 new packs");
    let view = sluice_git::fresh_view(&kept).expect("a view");
    assert!(
        blobs.iter().all(|b| view.has_object(*b)),
        "a fresh view sees every pack"
    );
}
