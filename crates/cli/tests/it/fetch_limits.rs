//! `fetch --max-pack-size` and `--max-object-size` on the command line,
//! against a real `git daemon`: a pack or an object past its limit is exit 1
//! (`answered`) after one attempt, the JSON naming the limit (and the
//! object), nothing written — no ref, no pack, no temporary pack left —
//! and the same fetch under a larger limit lands.

use crate::common;

use std::path::Path;

use common::*;
use sluice_testkit::repo;

const SPEC: &str = "+refs/heads/*:refs/remotes/origin/*";

/// `size` bytes no compressor shrinks (xorshift from `seed`).
fn incompressible(size: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(size + 8);
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(size);
    data
}

/// A served repository `big.git` (beside the world's `small.git`) whose
/// `main` holds `content` as `path`.
fn served(w: &World, path: &str, content: &[u8]) -> String {
    let srv = w.path("srv/big.git");
    repo::init_bare(&srv).expect("init");
    repo::commit_file(&srv, "main", path, content);
    w.daemon.url("big.git")
}

fn fetch(url: &str, local: &Path, limit: (&str, u64)) -> Run {
    sluice(&[
        "fetch",
        url,
        SPEC,
        "--repo",
        &p(local),
        "--json",
        limit.0,
        &limit.1.to_string(),
        "--max-attempts",
        "4",
    ])
}

/// Exit 1, `answered` in one attempt whose cause names `flag`; no ref, and
/// nothing at all in `objects/pack` (no pack, no index, no `tmp_pack_*`).
fn answered_and_nothing_written(run: &Run, local: &Path, flag: &str) -> String {
    assert_eq!(run.code, 1, "{run:?}");
    let doc = run.json();
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["result"], "answered", "{doc}");
    let attempts = doc["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "one attempt of four allowed: {doc}");
    assert_eq!(attempts[0]["class"], "answered", "{doc}");
    let cause = attempts[0]["cause"].as_str().expect("a cause").to_owned();
    assert!(cause.contains(flag), "{cause}");
    assert!(repo::refs(local).is_empty(), "a ref written: {doc}");
    let left: Vec<String> = std::fs::read_dir(local.join("objects/pack"))
        .expect("pack dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "left in objects/pack: {left:?}");
    cause
}

fn lands(url: &str, local: &Path, limit: (&str, u64)) {
    let run = fetch(url, local, limit);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["result"], "succeeded");
    assert!(!repo::refs(local).is_empty());
    repo::fsck(local).expect("git fsck --full clean");
}

#[test]
fn fetch_max_pack_size_stops_a_larger_pack_with_exit_1_and_writes_nothing() {
    let w = World::new();
    // Two MiB no compressor shrinks: a pack of about that size.
    let url = served(&w, "noise.bin", &incompressible(2 << 20, 7));
    let local = w.empty("local.git");
    let run = fetch(&url, &local, ("--max-pack-size", 1 << 20));
    let cause = answered_and_nothing_written(&run, &local, "max-pack-size");
    assert!(
        cause.contains(&(1u64 << 20).to_string()),
        "the limit: {cause}"
    );
    lands(&url, &local, ("--max-pack-size", 3 << 20));
}

#[test]
fn fetch_max_object_size_stops_a_larger_object_with_exit_1_naming_it_and_writes_nothing() {
    let w = World::new();
    // Three MiB of zeros: a few KiB on the wire, three MiB inflated.
    let url = served(&w, "zeros.bin", &vec![0u8; 3 << 20]);
    let local = w.empty("local.git");
    let run = fetch(&url, &local, ("--max-object-size", 1 << 20));
    let cause = answered_and_nothing_written(&run, &local, "max-object-size");
    assert!(
        cause.contains(&(3u64 << 20).to_string()) && cause.contains("blob at pack offset"),
        "the object's size and place: {cause}"
    );
    lands(&url, &local, ("--max-object-size", 4 << 20));
}
