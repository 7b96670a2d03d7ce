//! The temporary files of a pack being stored: removed unless persisted,
//! listed process-wide so an exit that skips destructors can remove them
//! ([`remove_temporary_files`]).

use std::fs::File;
use std::io;
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
