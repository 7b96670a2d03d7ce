//! The named fixture repositories of `fixtures/build.sh` (`small`,
//! `medium`), built on demand and cached.
//!
//! [`build`] runs the script into a directory of the caller's. [`cached`]
//! builds once per script version into a cache under the cargo target
//! directory (`<target>/sluice-fixtures/<name>-<hash of the script>`) and
//! returns that shared copy, which callers must not modify; [`copy_of`]
//! gives a private copy of it (for tests that push to it).
//!
//! The script is found relative to this crate's manifest
//! (`../../fixtures/build.sh`).

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The fixture names the script knows.
pub const NAMES: &[&str] = &["small", "medium"];

/// `main` of the `medium` fixture, the same on every machine.
pub const MEDIUM_MAIN: &str = "228f1de1fb2157d6dca7a1050b646f1e5461c699";

/// Serializes cache builds within one process.
static CACHE_LOCK: Mutex<()> = Mutex::new(());

/// The path of `fixtures/build.sh`.
pub fn script_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/build.sh")
}

/// Runs `fixtures/build.sh <name> <out_dir>`: `out_dir` (which must not
/// exist or be empty) becomes the bare fixture repository. Returns
/// `out_dir`.
pub fn build(name: &str, out_dir: &Path) -> io::Result<PathBuf> {
    if !NAMES.contains(&name) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("unknown fixture {name:?}; known: {NAMES:?}"),
        ));
    }
    let out = Command::new("bash")
        .arg(script_path())
        .arg(name)
        .arg(out_dir)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "fixtures/build.sh {name} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(out_dir.to_owned())
}

/// The cargo target directory this code runs under: `CARGO_TARGET_DIR`
/// when set, else the ancestor of the running executable that holds cargo's
/// `CACHEDIR.TAG`, else the workspace's `target`.
fn target_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        let t = PathBuf::from(t);
        return if t.is_absolute() {
            t
        } else {
            workspace.join(t)
        };
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()) {
            return dir.to_owned();
        }
    }
    workspace.join("target")
}

/// Where [`cached`] keeps its builds.
pub fn cache_dir() -> PathBuf {
    target_dir().join("sluice-fixtures")
}

/// The first 16 hex digits of the SHA-256 of the script.
pub fn script_hash() -> io::Result<String> {
    let bytes = std::fs::read(script_path())?;
    let digest = Sha256::digest(&bytes);
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// The fixture `name`, built once per script version and shared: do not
/// push to it or change it (use [`copy_of`]). Safe to call from several
/// threads and processes at once (a build goes to a temporary directory and
/// is renamed into place).
pub fn cached(name: &str) -> io::Result<PathBuf> {
    let _guard = CACHE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir();
    let path = dir.join(format!("{name}-{}.git", script_hash()?));
    if path.join("HEAD").is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(&dir)?;
    let built = build(name, &tmp.path().join("repo.git"))?;
    match std::fs::rename(&built, &path) {
        Ok(()) => Ok(path),
        // Another process renamed its build first.
        Err(_) if path.join("HEAD").is_file() => Ok(path),
        Err(e) => Err(e),
    }
}

/// A private copy of the cached fixture `name` at `dest` (which must not
/// exist); returns `dest`.
pub fn copy_of(name: &str, dest: &Path) -> io::Result<PathBuf> {
    let src = cached(name)?;
    copy_dir(&src, dest)?;
    Ok(dest.to_owned())
}

fn copy_dir(src: &Path, dest: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dest)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let to = dest.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            std::fs::copy(entry.path(), &to)?;
        }
    }
    Ok(())
}
