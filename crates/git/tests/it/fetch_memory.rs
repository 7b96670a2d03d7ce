//! A fetch's memory does not grow with the largest object: a pack holding
//! one blob of 512 MiB of zeros (about half a MiB on the wire) is fetched
//! from a real `git daemon` by a child process (this test binary, running
//! only [`fetch_of_the_zeros_in_a_child`]), which reports its own peak
//! resident size (`VmHWM`); the parent checks it and runs
//! `git fsck --full` on what was fetched.
//!
//! An indexer that inflates an object whole to hash it peaks above 512
//! MiB here; the bound is several times below that, and far above what
//! the streaming indexer needs (a few tens of MiB, the test harness
//! included), so a loaded machine does not make it flake: memory does not
//! depend on speed.

use crate::common;

use std::path::Path;

use common::*;
use sluice_policy::OutcomeKind;
use sluice_testkit::repo;

const ZEROS: u64 = 512 << 20;
/// The child's peak resident size may not pass this.
const BOUND_KIB: u64 = 128 << 10;

const CHILD_URL: &str = "SLUICE_TEST_ZEROS_URL";
const CHILD_REPO: &str = "SLUICE_TEST_ZEROS_REPO";
const CHILD_PEAK: &str = "SLUICE_TEST_ZEROS_PEAK";

/// A bare repository whose `main` holds one file: `ZEROS` bytes of zeros,
/// stored by git as a streamed blob in a pack of its own (its
/// `core.bigFileThreshold` lowered, so neither `hash-object` nor the
/// daemon's `pack-objects` holds it whole).
fn zeros_repo(w: &World, name: &str) -> std::path::PathBuf {
    let srv = w.srv(name);
    repo::init_bare(&srv).expect("init");
    repo::set_config(&srv, "core.bigFileThreshold", "1m");
    let file = w.path("zeros.bin");
    std::fs::File::create(&file)
        .and_then(|f| f.set_len(ZEROS))
        .expect("a sparse file of zeros");
    let blob = repo::git(&srv, &["hash-object", "-w", &file.display().to_string()]);
    std::fs::remove_file(&file).expect("remove the zeros");
    let tree = repo::try_git_with_input(
        &srv,
        &["mktree"],
        format!("100644 blob {}\tzeros.bin\n", blob.trim()).as_bytes(),
    )
    .expect("tree");
    let commit = repo::git(&srv, &["commit-tree", tree.trim(), "-m", "zeros"]);
    repo::git(&srv, &["update-ref", "refs/heads/main", commit.trim()]);
    srv
}

/// This process's peak resident size, in KiB (`VmHWM`).
fn own_peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in kB")
}

/// Run by [`a_fetch_of_a_512_mib_blob_of_zeros_peaks_far_below_its_size`]
/// in a child process (alone there, so the peak is the fetch's).
#[test]
#[ignore = "run by a_fetch_of_a_512_mib_blob_of_zeros_peaks_far_below_its_size in a child process"]
fn fetch_of_the_zeros_in_a_child() {
    let url = std::env::var(CHILD_URL).expect("run by the memory test");
    let local = std::env::var(CHILD_REPO).expect("run by the memory test");
    let peak = std::env::var(CHILD_PEAK).expect("run by the memory test");
    let out = client()
        .fetch(
            &url,
            &["+refs/heads/*:refs/remotes/origin/*".to_string()],
            &open(Path::new(&local)),
            &quick(300_000, 120_000, 1),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    std::fs::write(peak, own_peak_kib().to_string()).expect("write the peak");
}

#[test]
fn a_fetch_of_a_512_mib_blob_of_zeros_peaks_far_below_its_size() {
    let w = World::new();
    let srv = zeros_repo(&w, "z.git");
    let local = w.path("local.git");
    empty_repo(&local);
    let peak_file = w.path("peak");
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "fetch_memory::fetch_of_the_zeros_in_a_child",
            "--ignored",
            "--test-threads",
            "1",
            "--quiet",
        ])
        .env(CHILD_URL, w.daemon.url("z.git"))
        .env(CHILD_REPO, &local)
        .env(CHILD_PEAK, &peak_file)
        .output()
        .expect("the child runs");
    assert!(
        out.status.success(),
        "the child's fetch: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let peak: u64 = std::fs::read_to_string(&peak_file)
        .expect("the child wrote its peak")
        .parse()
        .expect("a number");
    assert!(
        peak < BOUND_KIB,
        "the fetch peaked at {peak} KiB, over {BOUND_KIB} KiB, for a blob of {} KiB",
        ZEROS >> 10
    );
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main"),
        repo::rev_parse(&srv, "refs/heads/main"),
        "the fetch landed"
    );
    let size = repo::git(&local, &["cat-file", "-s", "origin/main:zeros.bin"]);
    assert_eq!(size.trim(), ZEROS.to_string());
    repo::fsck(&local).expect("git fsck --full clean");
    eprintln!("peak {peak} KiB for a blob of {} KiB", ZEROS >> 10);
}
