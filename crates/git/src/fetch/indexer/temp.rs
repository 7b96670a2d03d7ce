//! The temporary files of a pack being stored: removed unless persisted,
//! listed process-wide so an exit that skips destructors can remove them
//! ([`remove_temporary_files`]), and the pack file as gix-pack writes and
//! reads it back, keeping its first failure.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::error::{disk, Result};

/// The temporary files of this process not yet persisted or removed, so an
/// exit that skips the destructors (a second Ctrl-C) can still remove them.
pub(super) static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Remove every temporary pack file this process still has open (for an
/// exit that will not run destructors); returns how many were removed.
pub fn remove_temporary_files() -> usize {
    let paths = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    paths
        .iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

pub(super) fn forget(path: &Path) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|p| p != path);
}

/// A temporary file in the pack directory, removed unless persisted.
pub(super) struct TempFile {
    path: PathBuf,
    /// The pack directory it is in.
    dir: PathBuf,
    file: Option<File>,
}

impl TempFile {
    pub(super) fn new(dir: &Path, kind: &str) -> Result<TempFile> {
        use std::sync::atomic::AtomicU64;
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for _ in 0..16 {
            let path = dir.join(format!(
                "tmp_{kind}_{}_{}_{nanos:x}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    LIVE.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(path.clone());
                    return Ok(TempFile {
                        path,
                        dir: dir.to_path_buf(),
                        file: Some(file),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(disk("create a temporary pack file", dir)(e)),
            }
        }
        Err(disk("create a temporary pack file", dir)(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name tried is taken",
        )))
    }

    pub(super) fn file(&self) -> &File {
        self.file.as_ref().expect("open until persisted")
    }

    pub(super) fn persist(mut self, to: &Path) -> Result<()> {
        let file = self.file.take().expect("persisted once");
        file.sync_all()
            .map_err(disk("sync the temporary pack", &self.dir))?;
        drop(file);
        let moved =
            std::fs::rename(&self.path, to).map_err(disk("move the pack into place", &self.dir));
        if moved.is_ok() {
            forget(&self.path);
        } else {
            let _ = std::fs::remove_file(&self.path);
            forget(&self.path);
        }
        moved
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
            forget(&self.path);
        }
    }
}

/// The first failure of a reader, writer or store the gix-pack iterators
/// call, kept beside their one opaque error.
pub(super) type Recorded<E> = std::rc::Rc<std::cell::RefCell<Option<E>>>;

/// The pack being written: `EntriesToBytesIter` writes it, rewinds, and reads
/// it back for the trailer. Its first failure is kept (a copy), so a full
/// disk is told from a bad pack in gix-pack's one error.
pub(super) struct PackOut<'a> {
    pub(super) w: BufWriter<&'a File>,
    pub(super) failed: Recorded<io::Error>,
}

impl PackOut<'_> {
    pub(super) fn note<T>(&self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            self.failed
                .borrow_mut()
                .get_or_insert_with(|| crate::local::copy_io(e));
        }
        r
    }
}

impl Write for PackOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.w.write(buf);
        self.note(r)
    }
    fn flush(&mut self) -> io::Result<()> {
        let r = self.w.flush();
        self.note(r)
    }
}

impl Seek for PackOut<'_> {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let r = self.w.seek(pos);
        self.note(r)
    }
}

impl Read for PackOut<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.w.flush().and_then(|()| self.w.get_mut().read(buf));
        self.note(r)
    }
}
