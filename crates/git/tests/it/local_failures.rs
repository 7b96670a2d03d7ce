//! Failures on this side — the disk, the object store — are `local-error`:
//! one attempt, never tried again, never blamed on the remote, and nothing
//! half-written left behind.
//!
//! The file-system faults are real: a small tmpfs that fills up, a file
//! bind-mounted over the `.keep` so it cannot be removed. Both need root
//! (the tests run as root); each mount is undone by a guard, lazily when
//! still busy, even when the test fails.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use sluice_git::{GitError, LocalCause};
use sluice_policy::{Class, OutcomeKind, Stopped};
use sluice_testkit::{repo, FaultProxy};

/// A mount made for one test, undone when dropped.
struct Mounted {
    at: PathBuf,
}

impl Mounted {
    /// A tmpfs of `size` (as `mount -o size=` takes it) at `at`.
    fn tmpfs(at: &Path, size: &str) -> Mounted {
        std::fs::create_dir_all(at).expect("mount point");
        let opts = format!("size={size}");
        mount(&["-t", "tmpfs", "-o", &opts, "tmpfs"], at);
        Mounted {
            at: at.to_path_buf(),
        }
    }

    /// `file` bind-mounted over `onto` (an existing file).
    fn bind(file: &Path, onto: &Path) -> Mounted {
        mount(&["--bind", &file.display().to_string()], onto);
        Mounted {
            at: onto.to_path_buf(),
        }
    }
}

#[track_caller]
fn mount(args: &[&str], at: &Path) {
    let status = Command::new("mount")
        .args(args)
        .arg(at)
        .status()
        .expect("mount runs");
    assert!(status.success(), "mount {args:?} {} failed", at.display());
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let done = Command::new("umount")
            .arg(&self.at)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        }
    }
}

/// Every file in `repo`'s pack directory.
fn pack_dir_files(repo: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.join("objects/pack"))
        .expect("the pack directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Upload-pack connections the proxy saw (each one a fetch's pack sent).
fn fetches(proxy: &FaultProxy) -> usize {
    proxy.wait_idle(Duration::from_secs(10));
    proxy.connections().len()
}

#[test]
fn a_fetch_into_a_full_filesystem_is_one_local_error_that_writes_no_ref_and_leaves_no_temporary_pack(
) {
    let w = World::new();
    let srv = w.small("s.git");
    // 6 MiB that do not compress, into a 4 MiB file system.
    big_commit(&srv, "main", 6 << 20, 5);
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let small_disk = Mounted::tmpfs(&w.path("small-disk"), "4m");
    let local_path = small_disk.at.join("local.git");
    let local = empty_repo(&local_path);
    let out = client()
        .fetch(
            &proxy.url("s.git"),
            &["+refs/heads/main:refs/remotes/origin/main".to_string()],
            &local,
            &quick(60_000, 20_000, 4),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Local));
    let e = out.error.as_ref().expect("error");
    // Typed to the caller: the disk, and its io error says the disk is
    // full, read without reading words.
    let Some(GitError::Local { cause, .. }) = e.source_as::<GitError>() else {
        panic!("not a local error: {e:?}");
    };
    assert!(matches!(&**cause, LocalCause::Disk { .. }), "{cause:?}");
    let io = std::error::Error::source(&**cause)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the disk's io error is the cause's source");
    assert_eq!(io.kind(), std::io::ErrorKind::StorageFull, "{io:?}");
    assert!(
        e.cause.contains("objects/pack") && e.cause.contains("No space left on device"),
        "the cause names the directory and the disk's answer: {}",
        e.cause
    );
    assert_eq!(fetches(&proxy), 1, "the pack was downloaded once");
    assert!(repo::refs(&local_path).is_empty(), "no ref was written");
    assert_eq!(
        pack_dir_files(&local_path),
        Vec::<String>::new(),
        "no temporary pack left"
    );
}

#[test]
fn a_keep_that_cannot_be_removed_after_a_fetch_is_a_local_error_not_unknown() {
    let w = World::new();
    let srv = w.small("s.git");
    // One thread packing: the server sends the same pack to the same request.
    repo::set_config(&srv, "pack.threads", "1");
    let url = w.daemon.url("s.git");
    let refspec = ["+refs/heads/*:refs/remotes/origin/*".to_string()];
    // The pack's name, from a first fetch of the same refs into another
    // repository.
    let first = w.path("first.git");
    let out = client()
        .fetch(
            &url,
            &refspec,
            &empty_repo(&first),
            &quick(30_000, 10_000, 1),
        )
        .expect("valid input");
    assert_eq!(out.kind, OutcomeKind::Succeeded, "{:?}", out.error);
    let packs: Vec<String> = pack_dir_files(&first)
        .into_iter()
        .filter(|n| n.ends_with(".pack"))
        .collect();
    let [pack] = packs.as_slice() else {
        panic!("one pack fetched: {packs:?}");
    };
    // That pack's `.keep` in the second repository is a mount point: it can
    // be written, never removed (EBUSY).
    let local_path = w.path("local.git");
    let local = empty_repo(&local_path);
    let keep = local_path
        .join("objects/pack")
        .join(pack.replace(".pack", ".keep"));
    std::fs::write(&keep, b"").expect("the .keep");
    let over = w.path("over-the-keep");
    std::fs::write(&over, b"").expect("a file to mount");
    let _pinned = Mounted::bind(&over, &keep);
    let out = client()
        .fetch(&url, &refspec, &local, &quick(30_000, 10_000, 4))
        .expect("valid input");
    assert!(
        pack_dir_files(&local_path).contains(pack),
        "the second fetch stored the same pack: {:?}",
        pack_dir_files(&local_path)
    );
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Local));
    let e = out.error.as_ref().expect("error");
    assert!(
        matches!(
            e.source_as::<GitError>(),
            Some(GitError::Local { cause, .. }) if matches!(&**cause, LocalCause::Disk { .. })
        ),
        "{e:?}"
    );
    assert!(
        e.cause.contains("cannot remove") && e.cause.contains(".keep"),
        "{}",
        e.cause
    );
}

#[test]
fn a_push_whose_pack_cannot_read_an_object_here_is_one_local_error_and_never_sent_again() {
    let w = World::new();
    let srv = w.small("s.git");
    let before = repo::rev_parse(&srv, "refs/heads/main");
    let local = local_clone(&srv, &w.path("local.git"));
    let content = b"a file only this commit has\n".repeat(40);
    let tip = repo::commit_file(&local, "main", "new.txt", &content);
    // The new blob goes: counting does not read it, writing the pack does.
    let blob = repo::git(&local, &["rev-parse", &format!("{tip}:new.txt")]);
    let blob = blob.trim();
    std::fs::remove_file(local.join("objects").join(&blob[..2]).join(&blob[2..]))
        .expect("the new blob is loose");
    let proxy = FaultProxy::git(w.daemon.addr()).expect("proxy");
    let out = push(
        &proxy.url("s.git"),
        update(Some(&tip), "refs/heads/main"),
        &local,
        &quick(30_000, 10_000, 3),
    );
    assert_eq!(out.kind, OutcomeKind::LocalError, "{:?}", out.attempts);
    assert_eq!(out.stopped, Some(Stopped::LocalError));
    assert_eq!(out.may_have_applied, Some(false));
    assert_eq!(out.attempts.len(), 1, "{:?}", out.attempts);
    assert_eq!(out.attempts[0].class, Some(Class::Local));
    assert_eq!(out.attempts[0].phase, "commands-sent");
    let e = out.error.as_ref().expect("error");
    assert!(
        matches!(
            e.source_as::<GitError>(),
            Some(GitError::Local { cause, .. })
                if matches!(&**cause, LocalCause::ObjectStore { .. })
        ),
        "{e:?}"
    );
    assert!(
        e.cause.contains(blob) && e.cause.contains("missing"),
        "{}",
        e.cause
    );
    proxy.wait_idle(Duration::from_secs(10));
    assert_eq!(proxy.connections().len(), 1, "one connection, never again");
    assert_eq!(repo::rev_parse(&srv, "refs/heads/main"), before);
}
