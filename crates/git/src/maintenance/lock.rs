//! One consolidation at a time per repository: `$GIT_DIR/gc.pid` in git's
//! own format (`<pid> <host>`, written through `gc.pid.lock`), so `git gc`
//! and this crate exclude each other. A holder is gone when the file is
//! older than 12 hours, or when it names this host and a process that no
//! longer runs (as git decides). Never waited for: held means skipped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// After this long a `gc.pid` is stale whoever wrote it (git's 12 hours).
const STALE_AFTER: Duration = Duration::from_secs(12 * 60 * 60);

/// `gc.pid` held by this process; removed when dropped.
#[derive(Debug)]
pub(crate) struct GcPid {
    path: PathBuf,
}

impl Drop for GcPid {
    fn drop(&mut self) {
        // As git does at its exit; a failure leaves a file that is stale
        // once this process is gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What taking `gc.pid` found.
#[derive(Debug)]
pub(crate) enum Taken {
    /// Ours until dropped.
    Held(GcPid),
    /// Another process holds it (or is taking it right now): its words as
    /// `gc.pid` has them (`<pid> <host>`), or `gc.pid.lock` when it was
    /// that file that stood in the way.
    Busy(String),
}

/// This host's name as git writes it into `gc.pid` (its `gethostname`:
/// the kernel's, as Linux shows it in `/proc/sys/kernel/hostname`).
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Take `gc.pid` in `git_dir`, without waiting.
pub(crate) fn take(git_dir: &Path) -> std::io::Result<Taken> {
    let path = git_dir.join("gc.pid");
    let lock_path = git_dir.join("gc.pid.lock");
    let mut lock = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock_path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Ok(Taken::Busy("gc.pid.lock".into()));
        }
        Err(e) => return Err(e),
    };
    // From here on `gc.pid.lock` is ours: removed on every way out but the
    // rename that commits it.
    let unlock = |e| {
        let _ = std::fs::remove_file(&lock_path);
        e
    };
    let me = host();
    if let Some(holder) = holder(&path, &me).map_err(unlock)? {
        let _ = std::fs::remove_file(&lock_path);
        return Ok(Taken::Busy(holder));
    }
    let line = format!("{} {me}", std::process::id());
    lock.write_all(line.as_bytes())
        .and_then(|()| lock.sync_all())
        .map_err(unlock)?;
    drop(lock);
    std::fs::rename(&lock_path, &path).map_err(unlock)?;
    Ok(Taken::Held(GcPid { path }))
}

/// Who holds `gc.pid` at `path`, if anyone still does: git's reading of it
/// (younger than 12 hours, and another host's or a live process of this
/// one's).
fn holder(path: &Path, me: &str) -> std::io::Result<Option<String>> {
    let (text, meta) = match std::fs::read(path).and_then(|t| Ok((t, std::fs::metadata(path)?))) {
        Ok(v) => v,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .unwrap_or_default();
    if age > STALE_AFTER {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let Some((pid, host)) = text.split_once(' ') else {
        // Not git's format: git's own reading fails too and goes ahead.
        return Ok(None);
    };
    let Ok(pid) = pid.parse::<i32>() else {
        return Ok(None);
    };
    if host != me {
        return Ok(Some(text));
    }
    let alive = match rustix::process::Pid::from_raw(pid) {
        Some(pid) => match rustix::process::test_kill_process(pid) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        },
        None => false,
    };
    Ok(alive.then_some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_pid_is_written_as_git_writes_it_and_removed_when_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let Taken::Held(held) = take(dir.path()).expect("take") else {
            panic!("an empty directory holds no gc.pid");
        };
        let text = std::fs::read_to_string(dir.path().join("gc.pid")).expect("gc.pid");
        assert_eq!(text, format!("{} {}", std::process::id(), host()));
        assert!(!dir.path().join("gc.pid.lock").exists());
        // Held by a live process of this host (this one): busy.
        assert!(matches!(take(dir.path()).expect("take"), Taken::Busy(_)));
        drop(held);
        assert!(!dir.path().join("gc.pid").exists());
    }

    #[test]
    fn a_gc_pid_of_a_process_gone_is_stale_and_another_hosts_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pid = dir.path().join("gc.pid");
        // A child that has exited and been reaped: its pid names no process.
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let gone = child.id();
        child.wait().expect("wait");
        std::fs::write(&pid, format!("{gone} {}", host())).expect("write");
        assert!(matches!(take(dir.path()).expect("take"), Taken::Held(_)));
        std::fs::write(&pid, format!("{gone} another-host.invalid")).expect("write");
        assert!(matches!(take(dir.path()).expect("take"), Taken::Busy(_)));
        // A lock file in the way: busy, and left to its owner.
        std::fs::remove_file(&pid).expect("rm");
        std::fs::write(dir.path().join("gc.pid.lock"), "").expect("write");
        assert!(matches!(take(dir.path()).expect("take"), Taken::Busy(_)));
        assert!(dir.path().join("gc.pid.lock").exists());
    }
}
