//! Helpers shared by the testkit's own integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice_testkit::repo::{self, RepoBuilder};

/// Generous bound for waits that normally take milliseconds.
pub const WAIT: Duration = Duration::from_secs(10);

/// A served base directory with a bare `r.git` (main: 3 commits, feature:
/// 1 more, tag v1) and a non-bare client `work` with the same history.
pub struct Scene {
    pub dir: tempfile::TempDir,
    pub base: PathBuf,
    pub server: PathBuf,
    pub work: PathBuf,
}

pub fn builder() -> RepoBuilder {
    RepoBuilder::new()
        .branch("main", 3)
        .branch_from("feature", "main", 1)
        .annotated_tag("v1", "main", "version 1")
}

pub fn scene() -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("srv");
    std::fs::create_dir_all(&base).unwrap();
    let server = builder().build(&base.join("r.git")).unwrap();
    let work = builder()
        .bare(false)
        .build(&dir.path().join("work"))
        .unwrap();
    Scene {
        dir,
        base,
        server,
        work,
    }
}

/// Runs git in `dir` and returns (success, stderr).
pub fn git_status(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = repo::git_output(dir, args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
