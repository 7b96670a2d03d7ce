//! Storing a received pack: our own indexer, which streams the pack to
//! disk and reads it back with positioned reads (`read_at`) instead of
//! mapping it, so neither the pack's pages nor its largest object count in
//! the process's resident memory.
//!
//! 1. The stream is parsed entry by entry as it arrives ([`parse`]): each
//!    entry's bytes are hashed (the sender's trailer is checked against
//!    them), summed (its CRC32) and written to a temporary file in
//!    `objects/pack` as they pass, and its zlib stream is inflated into a
//!    fixed buffer only to check it ends where its declared size says. No
//!    entry is kept; 24 bytes an entry are.
//! 2. Each whole object is read back and hashed as it inflates, and the
//!    deltas on it are resolved base by base, depth first ([`resolve`]): a
//!    delta is applied as it inflates ([`delta`]), its result hashed as it
//!    is built and kept only when it is itself a base. The data held along
//!    the current chain is capped ([`CACHE_LIMIT`]); a dropped base is
//!    rebuilt from the nearest ancestor still held when it is needed again.
//!    With several threads, each takes whole objects in turn and holds at
//!    most its share of the cap.
//! 3. A thin pack's missing bases (REF deltas left without a base) are read
//!    from the local object database and appended to the pack as whole
//!    objects, as `git index-pack --fix-thin` does, the header's count and
//!    the trailer rewritten, and the deltas on them resolved.
//! 4. A version 2 `.idx` is written (fanout, sorted ids, CRC32s, 31-bit
//!    offsets with a table of 64-bit ones, pack checksum, own checksum), the
//!    pack is checked to end in its checksum, and the pair is moved into
//!    place as `pack-<hash>.pack` / `.idx` behind a `.keep`, which the
//!    caller removes once its refs point into the pack.
//!
//! # What memory is proportional to
//!
//! * The parse: nothing but the number of objects (the entry table, 24
//!   bytes an object and its id); its buffers are fixed (64 KiB each).
//! * An object no delta is built on (most blobs, however large): nothing;
//!   it is hashed as it inflates, in pieces of 64 KiB, whole or a delta's
//!   result alike.
//! * A delta: its base, held whole (a delta copies from anywhere in it),
//!   and its result only when it is itself a base; the delta's
//!   instructions are read in pieces. So the largest object that is a
//!   delta's base, plus the largest result built on it, bounds a thread;
//!   along a chain, data beyond [`CACHE_LIMIT`] is dropped and rebuilt
//!   (the top of the chain is always held).
//! * A thin pack's base from the local store: that object, while it is
//!   appended (the object database hands it whole).
//!
//! The caller's limits ([`crate::FetchOptions::max_pack_size`],
//! `max_object_size`) stop a pack as its bytes pass (the pack's size, a
//! whole object's declared size) or before a delta's result is built (its
//! declared size): [`StoreError::Limit`], kept typed in the guard.
//!
//! A failure is a `StoreError` that keeps the sides apart: the pack as the
//! server sent it (the wire's, classed from it), the local disk (a
//! temporary file that cannot be created, written, read back, synced or
//! moved; the `.keep`) and the local object store (a thin pack's base):
//! the last two are `local-error`, never tried again.
//!
//! The rooms: `temp` (temporary files), `guard` (the limits, a pack stopped
//! as it arrives), `parse` (the stream), `delta` (a delta applied in
//! pieces), `resolve` (the deltas), `thin` (a thin pack completed), `idx`
//! (the index); `error` what they fail with; this file the pass that runs
//! them ([`Store::store`]).

mod delta;
mod error;
mod guard;
mod idx;
mod parse;
mod resolve;
mod temp;
mod thin;

use std::io::{self, BufRead, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gix::hash::ObjectId;
use gix::progress::{Count, DynNestedProgress, Progress};

pub(crate) use error::StoreError;
use error::{disk, fail, Result};
pub(crate) use guard::{EntryGuard, Limits};
use idx::{verify_trailer, write_index};
use resolve::{resolve, Entries, Written};
pub use temp::remove_temporary_files;
use temp::TempFile;

/// What a stored pack is.
#[derive(Debug)]
pub(crate) struct Stored {
    /// Objects in the pack (with any bases a thin pack needed).
    pub objects: u32,
    /// The pack's size in bytes.
    pub bytes: u64,
    /// The pack's checksum (its name).
    pub hash: ObjectId,
    /// The `.pack`, `.idx` and `.keep` paths; `None` for an empty pack,
    /// which is not stored.
    pub paths: Option<Paths>,
}

/// Where a stored pack is.
#[derive(Debug)]
pub(crate) struct Paths {
    pub pack: PathBuf,
    pub index: PathBuf,
    /// `None` when the pack was already there.
    pub keep: Option<PathBuf>,
}

/// Counts the bytes read into a progress task, tells the guard (the pack
/// limit), and stops on interrupt.
struct Counted<'a, R> {
    inner: R,
    progress: &'a dyn Count,
    interrupt: &'a AtomicBool,
    guard: &'a EntryGuard,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(io::Error::other("interrupted"));
        }
        let n = self.inner.read(buf)?;
        self.progress.inc_by(n);
        self.guard.saw(n)?;
        Ok(n)
    }
}

/// Where and how a received pack is stored ([`Store::store`]).
pub(crate) struct Store<'a, F> {
    /// The pack directory (`objects/pack`).
    pub dir: &'a Path,
    /// Finds the bases a thin pack leaves out (the local object store).
    pub thin: Option<F>,
    /// The object format.
    pub object_hash: gix::hash::Kind,
    /// Threads resolving deltas, each holding at most its share of
    /// [`CACHE_LIMIT`].
    pub threads: usize,
    /// The caller's cancel.
    pub interrupt: &'a AtomicBool,
    /// Stops a pack no valid pack is, or one past the caller's limits, as
    /// it arrives.
    pub guard: &'a EntryGuard,
}

impl<F: gix::objs::Find> Store<'_, F> {
    /// Read, check, index and store the pack in `pack` (a whole pack
    /// stream, header to trailer): written to a temporary file as it
    /// arrives ([`parse`]), its deltas resolved ([`resolve`]), a thin
    /// pack completed ([`thin`]), its index written ([`Store::index`]),
    /// both moved into place behind a `.keep` ([`Store::place`]).
    pub(crate) fn store(
        self,
        pack: &mut dyn BufRead,
        progress: &mut dyn DynNestedProgress,
    ) -> Result<Stored> {
        let guard = self.guard;
        let r = self.store_inner(pack, progress);
        if let Err(e) = &r {
            // A limit passed is the caller's to read, typed, from the
            // guard (gix-protocol carries errors as words).
            let exceeded = guard.exceeded.borrow().clone();
            match (e, exceeded) {
                (StoreError::Limit(l), None) => {
                    guard.exceeded.borrow_mut().replace(l.clone());
                }
                (_, Some(l)) => return Err(StoreError::Limit(l)),
                _ => {}
            }
        }
        r
    }

    fn store_inner(
        self,
        pack: &mut dyn BufRead,
        progress: &mut dyn DynNestedProgress,
    ) -> Result<Stored> {
        let tmp = TempFile::new(self.dir, "pack")?;
        let (mut entries, hash) = {
            let mut read_progress = progress.add_child_with_id(
                "read pack".into(),
                gix::progress::prodash::progress::UNKNOWN,
            );
            read_progress.init(None, gix::progress::bytes());
            let counted = Counted {
                inner: pack,
                progress: &read_progress,
                interrupt: self.interrupt,
                guard: self.guard,
            };
            let mut input = io::BufReader::with_capacity(64 << 10, counted);
            parse::parse(
                &mut input,
                tmp.file(),
                self.dir,
                self.object_hash,
                self.guard,
            )?
        };
        let Some(mut hash) = hash else {
            // An empty pack: nothing to store.
            return Ok(Stored {
                objects: 0,
                bytes: 0,
                hash: self.object_hash.null(),
                paths: None,
            });
        };
        let mut bytes = tmp
            .file()
            .metadata()
            .map_err(disk("read the temporary pack's size", self.dir))?
            .len();
        let mut index_progress = progress
            .add_child_with_id("indexing".into(), gix::progress::prodash::progress::UNKNOWN);
        index_progress.init(Some(entries.objs.len()), gix::progress::count("objects"));
        let hash_len = self.object_hash.len_in_bytes() as u64;
        let mut written = Written {
            file: tmp.file(),
            dir: self.dir,
            end: bytes - hash_len,
            object_hash: self.object_hash,
        };
        let limits = self.guard.limits;
        let mut resolved = resolve(
            &written,
            &mut entries,
            0,
            self.threads,
            limits,
            &index_progress,
            self.interrupt,
        )?;
        if resolved < entries.objs.len() {
            if let Some(find) = &self.thin {
                // Bases a thin pack left out, appended; then what is built
                // on them.
                let first = entries.objs.len();
                let completed = thin::complete(&written, &mut entries, find)?;
                if let Some((end, new_hash)) = completed {
                    written.end = end;
                    hash = new_hash;
                    bytes = end + hash_len;
                    resolved += resolve(
                        &written,
                        &mut entries,
                        first,
                        self.threads,
                        limits,
                        &index_progress,
                        self.interrupt,
                    )?;
                }
            }
        }
        if resolved < entries.objs.len() {
            return Err(fail(format!(
                "{} deltas have no base in the pack or the repository",
                entries.objs.len() - resolved
            )));
        }
        verify_trailer(&written, bytes, hash)?;
        let idx = self.index(&entries, hash)?;
        let objects = entries.objs.len() as u32;
        drop(entries);
        let paths = self.place(tmp, idx, hash)?;
        Ok(Stored {
            objects,
            bytes,
            hash,
            paths: Some(paths),
        })
    }

    /// The index of the resolved `entries`, written to a temporary file.
    fn index(&self, entries: &Entries, hash: ObjectId) -> Result<TempFile> {
        let idx = TempFile::new(self.dir, "idx")?;
        let mut w = BufWriter::with_capacity(64 << 10, idx.file());
        write_index(&mut w, entries, hash, self.object_hash)
            .and_then(|()| w.flush())
            .map_err(disk("write the temporary index", self.dir))?;
        drop(w);
        Ok(idx)
    }

    /// Move the pack and its index into place as `pack-<hash>.pack` /
    /// `.idx`, the pack behind a `.keep` (none when it was already there).
    fn place(&self, pack: TempFile, idx: TempFile, hash: ObjectId) -> Result<Paths> {
        let name = format!("pack-{}", hash.to_hex());
        let pack_path = self.dir.join(format!("{name}.pack"));
        let index_path = self.dir.join(format!("{name}.idx"));
        let keep = if pack_path.is_file() {
            None
        } else {
            let keep = self.dir.join(format!("{name}.keep"));
            std::fs::write(&keep, b"").map_err(disk("write the .keep", self.dir))?;
            pack.persist(&pack_path)?;
            Some(keep)
        };
        if !index_path.is_file() {
            idx.persist(&index_path)?;
        }
        Ok(Paths {
            pack: pack_path,
            index: index_path,
            keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::resolve::{CACHE_LIMIT, TEST_LIMIT};
    use super::*;
    use gix::objs::Kind;
    use gix_pack::data::entry::Header;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
        let mut c = Command::new("git");
        c.current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().expect("git runs");
        let input = stdin.map(|b| b.to_vec()).unwrap_or_default();
        let mut w = child.stdin.take().expect("stdin");
        let t = std::thread::spawn(move || w.write_all(&input));
        let out = child.wait_with_output().expect("git output");
        t.join().expect("writer").expect("stdin written");
        assert!(out.status.success(), "git {args:?} failed");
        out.stdout
    }

    /// A repository with a history of edits to a few files (so packs of it
    /// hold deltas, chains of them).
    fn history(dir: &Path, commits: usize) -> Vec<String> {
        git(dir, &["init", "-q", "-b", "main", "."], None);
        let mut tips = Vec::new();
        let mut lines: Vec<String> = (0..400)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        for c in 0..commits {
            lines[(c * 37) % 400] = format!("edited in commit {c}\n");
            lines.insert((c * 11) % 400, format!("inserted in {c}\n"));
            std::fs::write(dir.join("a.txt"), lines.concat()).expect("write");
            std::fs::write(dir.join("b.txt"), lines[..200].concat().repeat(2)).expect("write");
            git(dir, &["add", "."], None);
            git(dir, &["commit", "-q", "-m", &format!("c{c}")], None);
            tips.push(
                String::from_utf8(git(dir, &["rev-parse", "HEAD"], None))
                    .expect("utf8")
                    .trim()
                    .to_owned(),
            );
        }
        tips
    }

    fn index(pack: &[u8], dir: &Path, thin: Option<gix::OdbHandle>) -> Stored {
        std::fs::create_dir_all(dir).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        Store {
            dir,
            thin,
            object_hash: gix::hash::Kind::Sha1,
            threads: 2,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect("stored")
    }

    /// Our `.idx` and `git index-pack`'s for the stored pack are the same
    /// bytes.
    fn same_as_git(stored: &Stored, scratch: &Path) {
        let paths = stored.paths.as_ref().expect("stored");
        let theirs = scratch.join("git.idx");
        let _ = std::fs::remove_file(&theirs);
        git(
            scratch,
            &[
                "index-pack",
                "-o",
                theirs.to_str().expect("utf8"),
                paths.pack.to_str().expect("utf8"),
            ],
            None,
        );
        let ours = std::fs::read(&paths.index).expect("ours");
        assert_eq!(
            ours,
            std::fs::read(&theirs).expect("theirs"),
            "idx differs from git's"
        );
        assert!(paths.keep.as_ref().is_some_and(|k| k.is_file()));
    }

    fn deltas_in(scratch: &Path, stored: &Stored) -> usize {
        let idx = stored.paths.as_ref().expect("stored").index.clone();
        let out = git(
            scratch,
            &["verify-pack", "-v", idx.to_str().expect("utf8")],
            None,
        );
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| l.split_whitespace().count() == 7)
            .count()
    }

    #[test]
    fn ofs_and_ref_delta_packs_index_as_git_does() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 40);
        for (n, extra) in [("ofs", Some("--delta-base-offset")), ("ref", None)] {
            let mut args = vec!["pack-objects", "--revs", "--stdout"];
            args.extend(extra);
            let pack = git(&src, &args, Some(b"main\n"));
            let dir = t.path().join(n);
            let stored = index(&pack, &dir, None);
            assert_eq!(
                std::fs::read(&stored.paths.as_ref().expect("p").pack).expect("pack"),
                pack
            );
            same_as_git(&stored, t.path());
            assert!(
                deltas_in(t.path(), &stored) > 20,
                "{n}: too few deltas to prove anything"
            );
        }
    }

    #[test]
    fn a_tiny_base_cache_rebuilds_dropped_bases() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 30);
        let pack = git(
            &src,
            &["pack-objects", "--revs", "--stdout", "--delta-base-offset"],
            Some(b"main\n"),
        );
        TEST_LIMIT.with(|l| l.set(1));
        let stored = index(&pack, &t.path().join("p"), None);
        TEST_LIMIT.with(|l| l.set(CACHE_LIMIT));
        same_as_git(&stored, t.path());
    }

    /// A pack of our own making: a whole blob, an OFS delta on it, a REF
    /// delta on that delta's object, an OFS delta on the REF delta, and the
    /// REF delta's base placed after it.
    #[test]
    fn a_pack_mixing_ofs_and_ref_deltas_indexes_as_git_does() {
        use crate::push::delta::Index;
        let v: Vec<Vec<u8>> = (0..5)
            .map(|k| {
                (0..300)
                    .map(|i| {
                        if i % 50 == k * 7 {
                            format!("changed {k} {i}\n")
                        } else {
                            format!("row {i}\n")
                        }
                    })
                    .collect::<String>()
                    .into_bytes()
            })
            .collect();
        let id =
            |d: &[u8]| gix::objs::compute_hash(gix::hash::Kind::Sha1, Kind::Blob, d).expect("hash");
        let delta =
            |base: &[u8], target: &[u8]| Index::new(base).delta(target, usize::MAX).expect("delta");
        let mut body = Vec::new();
        let push = |body: &mut Vec<u8>, header: Header, data: &[u8]| {
            let at = 12 + body.len() as u64;
            header.write_to(data.len() as u64, body).expect("header");
            let mut z =
                gix::zlib::stream::deflate::Write::new(Vec::new(), gix::zlib::Compression::DEFAULT);
            z.write_all(data).expect("deflate");
            z.flush().expect("deflate");
            body.extend(z.into_inner());
            at
        };
        let o0 = push(&mut body, Header::Blob, &v[0]);
        let o1 = 12 + body.len() as u64;
        push(
            &mut body,
            Header::OfsDelta {
                base_distance: o1 - o0,
            },
            &delta(&v[0], &v[1]),
        );
        let o2 = push(
            &mut body,
            Header::RefDelta { base_id: id(&v[1]) },
            &delta(&v[1], &v[2]),
        );
        let o3 = 12 + body.len() as u64;
        push(
            &mut body,
            Header::OfsDelta {
                base_distance: o3 - o2,
            },
            &delta(&v[2], &v[3]),
        );
        push(
            &mut body,
            Header::RefDelta { base_id: id(&v[4]) },
            &delta(&v[4], &v[0][..100]),
        );
        push(&mut body, Header::Blob, &v[4]);
        let mut pack = gix_pack::data::header::encode(gix_pack::data::Version::V2, 6).to_vec();
        pack.extend(body);
        let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
        h.update(&pack);
        let trailer = h.try_finalize().expect("hash");
        pack.extend_from_slice(trailer.as_slice());

        let t = tempfile::tempdir().expect("tmp");
        git(t.path(), &["init", "-q", "--bare", "."], None);
        let stored = index(&pack, &t.path().join("p"), None);
        assert_eq!(stored.objects, 6);
        assert_eq!(stored.hash, trailer);
        same_as_git(&stored, t.path());
    }

    #[test]
    fn a_thin_pack_is_completed_from_the_repository() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        let tips = history(&src, 20);
        let old = &tips[14];
        let input = format!("main\n^{old}\n");
        let pack = git(
            &src,
            &[
                "pack-objects",
                "--revs",
                "--thin",
                "--stdout",
                "--delta-base-offset",
            ],
            Some(input.as_bytes()),
        );
        let sent = u32::from_be_bytes(pack[8..12].try_into().expect("4"));
        // Without the repository the bases are missing.
        std::fs::create_dir_all(t.path().join("q")).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        let err = Store {
            dir: &t.path().join("q"),
            thin: None::<gix::OdbHandle>,
            object_hash: gix::hash::Kind::Sha1,
            threads: 1,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect_err("bases missing");
        assert!(err.to_string().contains("no base"), "{err}");
        assert_eq!(
            std::fs::read_dir(t.path().join("q")).expect("dir").count(),
            0,
            "temporaries left"
        );

        let repo = gix::open(&src).expect("open");
        let stored = index(&pack, &t.path().join("p"), Some(repo.objects.clone()));
        assert!(
            stored.objects > sent,
            "bases were added: {} vs {sent}",
            stored.objects
        );
        same_as_git(&stored, t.path());
        // The completed pack stands alone: git lists each of its objects
        // once, and every delta's base is one of them.
        let idx = stored.paths.as_ref().expect("p").index.clone();
        let out = git(
            t.path(),
            &["verify-pack", "-v", idx.to_str().expect("utf8")],
            None,
        );
        let out = String::from_utf8(out).expect("utf8");
        let rows: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|c| c.len() >= 5 && c[0].len() == 40)
            .collect();
        let ids: std::collections::HashSet<&str> = rows.iter().map(|c| c[0]).collect();
        assert_eq!(ids.len(), rows.len(), "an object listed twice: {out}");
        assert_eq!(ids.len(), stored.objects as usize, "{out}");
        let bases: Vec<&str> = rows.iter().filter(|c| c.len() == 7).map(|c| c[6]).collect();
        assert!(!bases.is_empty(), "the completed pack holds deltas: {out}");
        for base in bases {
            assert!(ids.contains(base), "delta base {base} is not in the pack");
        }
    }

    #[test]
    fn a_corrupt_trailer_is_refused_and_leaves_nothing() {
        let t = tempfile::tempdir().expect("tmp");
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).expect("mkdir");
        history(&src, 3);
        let mut pack = git(
            &src,
            &["pack-objects", "--revs", "--stdout"],
            Some(b"main\n"),
        );
        let n = pack.len();
        pack[n - 1] ^= 1;
        let dir = t.path().join("p");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let interrupt = AtomicBool::new(false);
        let guard = EntryGuard::new();
        let err = Store {
            dir: &dir,
            thin: None::<gix::OdbHandle>,
            object_hash: gix::hash::Kind::Sha1,
            threads: 1,
            interrupt: &interrupt,
            guard: &guard,
        }
        .store(&mut &pack[..], &mut gix::progress::Discard)
        .expect_err("a corrupt trailer is refused");
        assert!(!err.is_local(), "the server's pack, not this side: {err}");
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
    }

    /// A pack whose one entry declares `declared` bytes and whose deflate
    /// stream is `blocks` stored blocks of 60,000 bytes that never end.
    fn endless_entry(declared: u64, blocks: usize) -> Vec<u8> {
        let mut p = b"PACK".to_vec();
        p.extend_from_slice(&2u32.to_be_bytes());
        p.extend_from_slice(&1u32.to_be_bytes());
        // Type 3 (blob), size in the 4 + 7·k bits varint.
        let mut size = declared;
        let mut b = 0x30 | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            p.push(b | 0x80);
            b = (size & 0x7f) as u8;
            size >>= 7;
        }
        p.push(b);
        p.extend_from_slice(&[0x78, 0x01]);
        for _ in 0..blocks {
            let len: u16 = 60_000;
            p.push(0x00);
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(&(!len).to_le_bytes());
            p.extend(std::iter::repeat_n(0x5a, len as usize));
        }
        p
    }

    #[test]
    fn an_entry_running_past_its_declared_size_is_stopped_as_it_arrives() {
        for (declared, why) in [(100, "runs past"), (1 << 40, "more than this client holds")] {
            let t = tempfile::tempdir().expect("tmp");
            // 60 MB of stream for a 100-byte object: stopped after ~256 KiB.
            let pack = endless_entry(declared, 1_000);
            let dir = t.path().join("p");
            std::fs::create_dir_all(&dir).expect("mkdir");
            let guard = EntryGuard::new();
            let mut read = 0usize;
            let mut counting = CountingRead {
                inner: &pack[..],
                read: &mut read,
            };
            let mut reader = io::BufReader::new(&mut counting);
            let interrupt = AtomicBool::new(false);
            let err = Store {
                dir: &dir,
                thin: None::<gix::OdbHandle>,
                object_hash: gix::hash::Kind::Sha1,
                threads: 1,
                interrupt: &interrupt,
                guard: &guard,
            }
            .store(&mut reader, &mut gix::progress::Discard);
            assert!(err.is_err());
            let tripped = guard
                .tripped
                .borrow()
                .clone()
                .expect("the guard stopped it");
            assert!(tripped.contains(why), "{tripped}");
            assert!(read < 2 << 20, "read {read} bytes before stopping");
            assert_eq!(
                std::fs::read_dir(&dir).expect("dir").count(),
                0,
                "no leftovers"
            );
        }
    }

    struct CountingRead<'a> {
        inner: &'a [u8],
        read: &'a mut usize,
    }

    impl Read for CountingRead<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            *self.read += n;
            Ok(n)
        }
    }
}
