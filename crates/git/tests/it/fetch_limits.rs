//! The limits a service sets on what a remote may send
//! (`FetchOptions::max_pack_size`, `max_object_size`), against a real
//! `git daemon`: a pack or an object past its limit is answered in one
//! attempt, typed, naming the limit and the object; nothing is written and
//! no temporary pack is left. Under the limit, the same fetch lands and
//! `git fsck --full` is clean.

use crate::common;

use std::io::Write;
use std::path::Path;

use common::*;
use sluice_git::{FetchOptions, GitError, LimitExceeded};
use sluice_policy::{Class, Outcome, OutcomeKind};
use sluice_testkit::repo;

const SPEC: &str = "+refs/heads/*:refs/remotes/origin/*";

fn fetch(url: &str, local: &Path, options: &FetchOptions) -> Outcome<Vec<sluice_git::FetchedRef>> {
    client()
        .fetch_with(
            url,
            &[SPEC.to_string()],
            &open(local),
            options,
            &quick(60_000, 30_000, 4),
        )
        .expect("valid input")
}

/// The outcome is answered after one attempt, its typed cause the limit
/// passed; the local repository holds no ref, no pack and no temporary
/// file.
fn answered_for_a_limit(out: &Outcome<Vec<sluice_git::FetchedRef>>, local: &Path) -> LimitExceeded {
    assert_eq!(out.kind, OutcomeKind::Answered, "{:?}", out.attempts);
    assert_eq!(out.attempts.len(), 1, "one attempt: {:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Answered));
    assert_eq!(out.attempts[0].phase, "negotiated");
    let e = out.error.as_ref().expect("an error");
    let exceeded = match e.source_as::<GitError>() {
        Some(GitError::TooLarge { exceeded, .. }) => exceeded.clone(),
        other => panic!("not a limit: {other:?} ({})", e.cause),
    };
    assert_eq!(
        e.cause,
        exceeded.to_string(),
        "the cause is the limit's words"
    );
    assert!(repo::refs(local).is_empty(), "no ref written");
    let left: Vec<String> = std::fs::read_dir(local.join("objects/pack"))
        .expect("pack dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "nothing left in objects/pack: {left:?}");
    exceeded
}

/// Under the limit the same fetch lands, and the repository is sound.
fn lands_under(url: &str, local: &Path, options: &FetchOptions) {
    let out = fetch(url, local, options);
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.attempts);
    assert!(!repo::refs(local).is_empty());
    repo::fsck(local).expect("git fsck --full clean");
}

#[test]
fn a_pack_past_max_pack_size_is_answered_in_one_attempt_and_leaves_nothing() {
    let w = World::new();
    let srv = w.small("s.git");
    // Two MiB of incompressible data: a pack of about that size.
    big_commit(&srv, "main", 2 << 20, 7);
    let url = w.daemon.url("s.git");
    let local = w.path("local.git");
    empty_repo(&local);
    let limit = 1 << 20;
    let out = fetch(
        &url,
        &local,
        &FetchOptions {
            max_pack_size: Some(limit),
            ..FetchOptions::default()
        },
    );
    match answered_for_a_limit(&out, &local) {
        LimitExceeded::PackSize { limit: l, received } => {
            assert_eq!(l, limit);
            assert!(received > limit, "{received}");
            // Stopped as the bytes past the limit arrived, not after the
            // whole pack.
            assert!(received < limit + (512 << 10), "read on to {received}");
        }
        other => panic!("{other:?}"),
    }
    assert!(out
        .error
        .as_ref()
        .expect("e")
        .cause
        .contains("max-pack-size"));
    lands_under(
        &url,
        &local,
        &FetchOptions {
            max_pack_size: Some(3 << 20),
            ..FetchOptions::default()
        },
    );
}

#[test]
fn a_whole_object_past_max_object_size_is_answered_in_one_attempt_naming_it() {
    let w = World::new();
    let srv = w.small("s.git");
    // Three MiB of zeros: a few KiB on the wire, three MiB inflated.
    repo::commit_file(&srv, "main", "zeros.bin", &vec![0u8; 3 << 20]);
    let url = w.daemon.url("s.git");
    let local = w.path("local.git");
    empty_repo(&local);
    let limit = 1 << 20;
    let out = fetch(
        &url,
        &local,
        &FetchOptions {
            max_object_size: Some(limit),
            ..FetchOptions::default()
        },
    );
    match answered_for_a_limit(&out, &local) {
        LimitExceeded::ObjectSize {
            limit: l,
            size,
            object,
        } => {
            assert_eq!(l, limit);
            assert_eq!(size, 3 << 20);
            assert_eq!(object.kind, Some(gix::objs::Kind::Blob));
            assert!(object.offset >= 12, "{object:?}");
            assert_eq!(object.base, None);
        }
        other => panic!("{other:?}"),
    }
    let cause = &out.error.as_ref().expect("e").cause;
    assert!(
        cause.contains("max-object-size") && cause.contains("blob at pack offset"),
        "{cause}"
    );
    lands_under(
        &url,
        &local,
        &FetchOptions {
            max_object_size: Some(4 << 20),
            ..FetchOptions::default()
        },
    );
}

/// A pack of two blobs written by hand: `base` whole, and a REF delta on
/// it whose result is `base` twice (two copy instructions: a few bytes of
/// delta for an object twice the base's size).
fn doubling_pack(base: &[u8]) -> (Vec<u8>, gix::ObjectId, gix::ObjectId) {
    let id = |d: &[u8]| {
        gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, d).expect("hash")
    };
    let varint = |out: &mut Vec<u8>, mut n: u64| loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    };
    let len = base.len() as u64;
    assert!(len < 1 << 24, "one copy instruction per half");
    let mut delta = Vec::new();
    varint(&mut delta, len);
    varint(&mut delta, 2 * len);
    for _ in 0..2 {
        // Copy from offset 0 (no offset bytes), three size bytes.
        delta.push(0x80 | 0x10 | 0x20 | 0x40);
        delta.extend_from_slice(&len.to_le_bytes()[..3]);
    }
    let deflate = |data: &[u8]| {
        let mut z =
            gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::DEFAULT);
        z.write_all(data).expect("deflate");
        z.flush().expect("deflate");
        z.into_inner()
    };
    let header = |out: &mut Vec<u8>, kind: u8, mut size: u64| {
        let mut b = (kind << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            out.push(b | 0x80);
            b = (size & 0x7f) as u8;
            size >>= 7;
        }
        out.push(b);
    };
    let mut pack = b"PACK".to_vec();
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&2u32.to_be_bytes());
    header(&mut pack, 3, len);
    pack.extend(deflate(base));
    header(&mut pack, 7, delta.len() as u64);
    let base_id = id(base);
    pack.extend_from_slice(base_id.as_slice());
    pack.extend(deflate(&delta));
    let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
    h.update(&pack);
    pack.extend_from_slice(h.try_finalize().expect("hash").as_slice());
    (pack, base_id, id(&[base, base].concat()))
}

#[test]
fn a_delta_whose_result_passes_max_object_size_is_answered_naming_its_base() {
    let w = World::new();
    let srv = w.srv("d.git");
    repo::init_bare(&srv).expect("init");
    // 700 KiB of text; the server stores its doubling as a delta on it,
    // which upload-pack sends as it is.
    let base: Vec<u8> = (0..700 << 10)
        .map(|i: u32| b"abcdefghijklmnopqrstuvwxyz\n"[(i % 27) as usize])
        .collect();
    let (pack, base_id, doubled) = doubling_pack(&base);
    repo::try_git_with_input(&srv, &["index-pack", "--stdin"], &pack).expect("index-pack");
    let tree = repo::try_git_with_input(
        &srv,
        &["mktree"],
        format!("100644 blob {base_id}\tbase.txt\n100644 blob {doubled}\tdoubled.txt\n").as_bytes(),
    )
    .expect("tree");
    let commit = repo::git(&srv, &["commit-tree", tree.trim(), "-m", "doubled"]);
    repo::git(&srv, &["update-ref", "refs/heads/main", commit.trim()]);
    let url = w.daemon.url("d.git");
    let local = w.path("local.git");
    empty_repo(&local);
    let limit = 1 << 20;
    let out = fetch(
        &url,
        &local,
        &FetchOptions {
            max_object_size: Some(limit),
            ..FetchOptions::default()
        },
    );
    match answered_for_a_limit(&out, &local) {
        LimitExceeded::ObjectSize {
            limit: l,
            size,
            object,
        } => {
            assert_eq!(l, limit);
            assert_eq!(size, 2 * (700 << 10));
            assert_eq!(object.base, Some(base_id), "{object:?}");
            assert_eq!(object.kind, Some(gix::objs::Kind::Blob));
        }
        other => panic!("{other:?}"),
    }
    lands_under(
        &url,
        &local,
        &FetchOptions {
            max_object_size: Some(2 << 20),
            ..FetchOptions::default()
        },
    );
}
