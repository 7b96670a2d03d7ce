//! A fetch's memory does not grow with the largest object: a pack holding
//! one blob of 512 MiB of zeros (about half a MiB on the wire) is fetched
//! from a real `git daemon` by a child process (this test binary, running
//! only [`fetch_in_a_child`]), which reports its own peak resident size
//! (`VmHWM`); the parent checks it and runs `git fsck --full` on what was
//! fetched. A delta on a large incompressible base is resolved holding
//! the base and no more than the result.
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

/// Run by the tests below in a child process (alone there, so the peak is
/// the fetch's).
#[test]
#[ignore = "run by the fetch_memory tests in a child process"]
fn fetch_in_a_child() {
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

/// Fetch `name` of `w` into a new repository `local` in a child process:
/// the child's peak resident size, in KiB.
fn peak_of_a_fetch_in_a_child(w: &World, name: &str, local: &Path) -> u64 {
    empty_repo(local);
    let peak_file = w.path("peak");
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "fetch_memory::fetch_in_a_child",
            "--ignored",
            "--test-threads",
            "1",
            "--quiet",
        ])
        .env(CHILD_URL, w.daemon.url(name))
        .env(CHILD_REPO, local)
        .env(CHILD_PEAK, &peak_file)
        .output()
        .expect("the child runs");
    assert!(
        out.status.success(),
        "the child's fetch: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&peak_file)
        .expect("the child wrote its peak")
        .parse()
        .expect("a number")
}

#[test]
fn a_fetch_of_a_512_mib_blob_of_zeros_peaks_far_below_its_size() {
    let w = World::new();
    let srv = zeros_repo(&w, "z.git");
    let local = w.path("local.git");
    let peak = peak_of_a_fetch_in_a_child(&w, "z.git", &local);
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

/// `n` bytes no compressor shrinks (xorshift), from `seed`.
fn incompressible(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(n + 8);
    while data.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(n);
    data
}

const BIG: usize = 48 << 20;

#[test]
fn a_delta_on_a_large_base_is_resolved_holding_the_base_and_not_the_result() {
    let w = World::new();
    let srv = w.srv("d.git");
    repo::init_bare(&srv).expect("init");
    // Two versions of one incompressible file, a few bytes apart: git
    // stores one as a delta on the other (repacked, so the daemon sends
    // the delta as it is).
    let mut data = incompressible(BIG, 44);
    repo::commit_file(&srv, "main", "big.bin", &data);
    for at in [1_000, BIG / 2, BIG - 1_000] {
        data[at] ^= 0xff;
    }
    repo::commit_file(&srv, "main", "big.bin", &data);
    repo::git(&srv, &["repack", "-adq"]);
    let listed = repo::git(&srv, &["count-objects", "-v"]);
    assert!(listed.contains("packs: 1"), "{listed}");
    let local = w.path("local.git");
    let peak = peak_of_a_fetch_in_a_child(&w, "d.git", &local);
    // Base and result together are twice BIG; the base, the harness and
    // the buffers are well under one and a half.
    let bound = (BIG as u64 >> 10) * 3 / 2;
    assert!(
        peak < bound,
        "the fetch peaked at {peak} KiB, over {bound} KiB, for a base and a result of {} KiB each",
        BIG >> 10
    );
    let pack = std::fs::read_dir(local.join("objects/pack"))
        .expect("pack dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "idx"))
        .expect("a pack");
    let verified = repo::git(&local, &["verify-pack", "-v", &pack.display().to_string()]);
    let delta_blobs = verified
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.len() == 7 && c[1] == "blob")
        .count();
    assert_eq!(
        delta_blobs, 1,
        "the pack holds the blob's delta: {verified}"
    );
    assert_eq!(
        repo::rev_parse(&local, "refs/remotes/origin/main"),
        repo::rev_parse(&srv, "refs/heads/main"),
        "the fetch landed"
    );
    repo::fsck(&local).expect("git fsck --full clean");
    eprintln!(
        "peak {peak} KiB for a base and a result of {} KiB each",
        BIG >> 10
    );
}
