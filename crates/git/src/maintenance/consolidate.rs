//! Rolling packs up into one: every object of every pack taken, listed from
//! its `.idx` (never by reachability: nothing is dropped), written by
//! gix-pack's `data::output` (stored entries copied as they are, a delta
//! kept only when its base is in the new pack, never thin), indexed by
//! gix-pack's `Bundle::write_to_directory`; the new pack and its index in
//! place before anything is removed, a `multi-pack-index` naming a pack
//! about to go rewritten first (gix-pack's `multi_index` writer: the packs
//! it named less those, plus the new one), each old pack's `.idx` removed
//! before its `.pack` (readers find packs by their index).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix_pack::data::output;

use super::error::MaintenanceError;
use super::select::Pack;

/// What one consolidation did.
#[derive(Debug)]
pub(crate) struct Rolled {
    /// Objects in the new pack.
    pub objects: u64,
    /// The new pack's index (`None`: the packs taken held no object).
    pub index: Option<PathBuf>,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> MaintenanceError {
    let what = what.into();
    move |source| MaintenanceError::Io { what, source }
}

fn pack_err(what: impl Into<String>, e: &(dyn std::error::Error + 'static)) -> MaintenanceError {
    MaintenanceError::Pack {
        what: what.into(),
        detail: sluice_policy::text::error_chain(e),
    }
}

/// The object store handle gix-pack's writer reads through: a cache over a
/// view of the repository, its packs kept mapped while the writer runs.
type Db = gix::odb::Cache<gix::odb::store::Handle<std::sync::Arc<gix::odb::Store>>>;

/// Roll `taken` up into one pack in `repo`'s pack directory, then remove
/// them. `repo` is a view opened after `taken` was listed.
pub(crate) fn roll_up(
    repo: &gix::Repository,
    taken: &[Pack],
    threads: usize,
) -> Result<Rolled, MaintenanceError> {
    let hash = repo.object_hash();
    let pack_dir = repo.objects.store_ref().path().join("pack");
    let ids = object_ids(taken, hash)?;
    let objects = ids.len() as u64;
    let index = if ids.is_empty() {
        None
    } else {
        Some(write_pack(repo, &pack_dir, ids, threads)?)
    };
    // Not the new pack itself (the packs taken may have been one pack
    // written again under its own name), nor a pack given a `.keep` since
    // it was listed (its objects are in the new pack too, which is
    // harmless).
    let going: Vec<&Pack> = taken
        .iter()
        .filter(|p| index.as_deref() != Some(p.file("idx").as_path()))
        .filter(|p| !p.file("keep").exists())
        .collect();
    // The new pack is in place; a multi-pack-index that names a pack about
    // to go would send readers to a missing file.
    mend_multi_index(&pack_dir, &going, index.as_deref(), hash)?;
    for pack in going {
        remove_pack(pack)?;
    }
    Ok(Rolled { objects, index })
}

/// Every object of every pack in `taken`, each once, from their indexes.
fn object_ids(taken: &[Pack], hash: gix::hash::Kind) -> Result<Vec<ObjectId>, MaintenanceError> {
    let mut seen = gix::hashtable::HashSet::default();
    let mut ids = Vec::new();
    for pack in taken {
        let idx_path = pack.file("idx");
        let idx = gix_pack::index::File::at(&idx_path, hash)
            .map_err(|e| pack_err(format!("reading {}", idx_path.display()), &e))?;
        for entry in idx.iter() {
            if seen.insert(entry.oid) {
                ids.push(entry.oid);
            }
        }
    }
    Ok(ids)
}

/// A temporary pack file in the pack directory, named as git names its own
/// (`tmp_pack_*`: `git gc` clears one a crash left), removed when dropped.
struct TempPack {
    path: PathBuf,
}

impl TempPack {
    fn create(dir: &Path) -> Result<(TempPack, std::fs::File), MaintenanceError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let path = dir.join(format!(
            "tmp_pack_sluice_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io(format!("creating {}", path.display())))?;
        Ok((TempPack { path }, file))
    }
}

impl Drop for TempPack {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// git's `pack.depth`: the longest delta chain a consolidated pack holds.
const MAX_DEPTH: u16 = 50;

/// Object `id` as a whole (undeltified) pack entry.
fn whole(db: &Db, id: ObjectId, buf: &mut Vec<u8>) -> Result<output::Entry, gix::Error> {
    use gix_pack::Find;
    let (data, _) = db.try_find(&id, buf)?.ok_or_else(|| {
        gix::Error::from_error(std::io::Error::other(format!(
            "object {id} is in no pack any more"
        )))
    })?;
    output::Entry::from_data(
        &output::Count {
            id,
            entry_pack_location: output::count::PackLocation::LookedUp(None),
        },
        &data,
        Default::default(),
    )
}

/// Write `ids` as one pack with its index into `pack_dir`; the index's path.
fn write_pack(
    repo: &gix::Repository,
    pack_dir: &Path,
    ids: Vec<ObjectId>,
    threads: usize,
) -> Result<PathBuf, MaintenanceError> {
    let expected = ids.len();
    let num = u32::try_from(expected).map_err(|_| MaintenanceError::Pack {
        what: "counting the objects".into(),
        detail: format!("{expected} objects are more than a pack holds"),
    })?;
    let mut db: Db = repo.clone().into_sync().objects.to_cache_arc();
    db.prevent_pack_unload();
    db.ignore_replacements = true;
    db.set_pack_cache(|| Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(32 << 20)));
    let counts: Vec<output::Count> = ids
        .into_iter()
        .map(|id| output::Count {
            id,
            entry_pack_location: output::count::PackLocation::NotLookedUp,
        })
        .collect();
    let entries = output::entry::iter_from_counts(
        counts,
        db.clone(),
        Box::new(gix::progress::Discard),
        output::entry::iter_from_counts::Options {
            thread_limit: Some(threads),
            mode: output::entry::iter_from_counts::Mode::PackCopyAndBaseObjects,
            allow_thin_pack: false,
            chunk_size: 64,
            version: gix_pack::data::Version::V2,
            compression: Default::default(),
        },
    )
    .map_err(|e| pack_err("resolving the objects to copy", &e))?;
    // An object no pack holds any more is never left out: the whole
    // consolidation stops, nothing removed. A delta deeper than git's
    // `pack.depth` (50) in its chain is written whole: copied deltas keep
    // their bases, and packs rolled up again and again would otherwise
    // chain every version of a tree behind the last (each fetch then
    // reads the whole chain to resolve its thin pack's base).
    let mut depth: Vec<u16> = Vec::with_capacity(expected);
    let mut buf = Vec::new();
    let entries = gix::parallel::InOrderIter::from(entries).map(move |chunk| {
        let mut chunk = chunk?;
        for e in &mut chunk {
            if e.is_invalid() {
                return Err(gix::Error::from_error(std::io::Error::other(format!(
                    "object {} is in no pack any more",
                    e.id
                ))));
            }
            let d = match e.kind {
                output::entry::Kind::DeltaRef { object_index } => {
                    depth.get(object_index).copied().unwrap_or(0) + 1
                }
                _ => 0,
            };
            let d = if d > MAX_DEPTH {
                *e = whole(&db, e.id, &mut buf)?;
                0
            } else {
                d
            };
            depth.push(d);
        }
        Ok(chunk)
    });
    let (temp, file) = TempPack::create(pack_dir)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    let mut writer = output::bytes::FromEntriesIter::new(
        entries,
        &mut out,
        num,
        gix_pack::data::Version::V2,
        repo.object_hash(),
    );
    for written in &mut writer {
        written.map_err(|e| pack_err("writing the consolidated pack", &e))?;
    }
    drop(writer);
    let file = out
        .into_inner()
        .map_err(|e| io(format!("writing {}", temp.path.display()))(e.into_error()))?;
    file.sync_all()
        .map_err(io(format!("writing {}", temp.path.display())))?;
    drop(file);
    // Indexed (every delta resolved again, so the index is the pack's own
    // reading), then both renamed into place under the pack's checksum.
    let mut reader = std::io::BufReader::with_capacity(
        1 << 16,
        std::fs::File::open(&temp.path).map_err(io(format!("reading {}", temp.path.display())))?,
    );
    let written = gix_pack::Bundle::write_to_directory(
        &mut reader,
        Some(pack_dir),
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        None::<gix::OdbHandle>,
        repo.object_hash(),
        gix_pack::bundle::write::Options {
            thread_limit: Some(threads),
            ..Default::default()
        },
    )
    .map_err(|e| pack_err("indexing the consolidated pack", &e))?;
    drop(temp);
    if let Some(keep) = &written.keep_path {
        std::fs::remove_file(keep).map_err(io(format!("removing {}", keep.display())))?;
    }
    let index = written.index_path.ok_or_else(|| MaintenanceError::Pack {
        what: "indexing the consolidated pack".into(),
        detail: "no index was written".into(),
    })?;
    if written.index.num_objects as usize != expected {
        return Err(MaintenanceError::Pack {
            what: "checking the consolidated pack".into(),
            detail: format!(
                "{} objects in the new pack, {expected} in the packs taken; nothing removed",
                written.index.num_objects
            ),
        });
    }
    sync_dir(pack_dir)?;
    Ok(index)
}

/// git's lock file for writing the `multi-pack-index` (its lockfile API's
/// name): taken without waiting, so a `git multi-pack-index write` and a
/// consolidation never write it at once.
const MIDX_LOCK: &str = "multi-pack-index.lock";

/// A `multi-pack-index` that names a pack of `going` rewritten, before any
/// of them is removed: the packs it named, less `going` (and less any pack
/// no longer there), plus `new` (the consolidated pack's index; `None`
/// when the packs taken held no object), written by gix-pack's `multi_index` writer
/// through git's lock file and renamed over the old one. Its
/// `multi-pack-index-<checksum>.bitmap` and `.rev` (gix writes neither)
/// named the old file's checksum and are removed: git then reads the
/// objects without the bitmap until it writes one again. A
/// `multi-pack-index` that cannot be read, or that cannot be written again
/// (the writer's failure is logged), is removed instead, as git's `repack
/// -d` does with one it cannot keep; one that names none of `going` is
/// left alone, and one that would name no pack is removed. The lock held (a `git multi-pack-index write` running) is
/// an error: the consolidation stops with the old packs still in place.
fn mend_multi_index(
    pack_dir: &Path,
    going: &[&Pack],
    new: Option<&Path>,
    hash: gix::hash::Kind,
) -> Result<(), MaintenanceError> {
    let path = pack_dir.join("multi-pack-index");
    if !path.exists() {
        return Ok(());
    }
    let gone: Vec<PathBuf> = going
        .iter()
        .filter_map(|p| p.file("idx").file_name().map(PathBuf::from))
        .collect();
    let named = match gix_pack::multi_index::File::at(&path, None) {
        Ok(midx) => {
            let names = midx.index_names().to_vec();
            if !names.iter().any(|n| gone.contains(n)) {
                return Ok(());
            }
            Some(names)
        }
        Err(_) => None,
    };
    let lock = pack_dir.join(MIDX_LOCK);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(io(format!("taking {}", lock.display())))?;
    let lock = LockFile(lock);
    let written = match named {
        Some(names) => {
            let mut keep: Vec<PathBuf> = names
                .into_iter()
                .filter(|n| !gone.contains(n))
                .map(|n| pack_dir.join(n))
                .filter(|p| p.exists())
                .collect();
            if let Some(new) = new.filter(|n| !keep.iter().any(|p| p == n)) {
                keep.push(new.to_owned());
            }
            if keep.is_empty() {
                false
            } else {
                match write_multi_index(file, keep, hash) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(
                            error = %e,
                            "the multi-pack-index could not be written again: removed instead"
                        );
                        false
                    }
                }
            }
        }
        None => false,
    };
    if written {
        std::fs::rename(&lock.0, &path).map_err(io(format!("renaming {}", lock.0.display())))?;
        std::mem::forget(lock);
    } else {
        remove_if_there(&path)?;
    }
    let entries =
        std::fs::read_dir(pack_dir).map_err(io(format!("listing {}", pack_dir.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("multi-pack-index-")
            && (name.ends_with(".bitmap") || name.ends_with(".rev"))
        {
            remove_if_there(&entry.path())?;
        }
    }
    sync_dir(pack_dir)
}

/// A lock file removed when dropped (forgotten once renamed into place).
struct LockFile(PathBuf);

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A multi-pack-index of the packs whose indexes are `indexes`, written
/// into `file` and synced.
fn write_multi_index(
    file: std::fs::File,
    indexes: Vec<PathBuf>,
    hash: gix::hash::Kind,
) -> Result<(), MaintenanceError> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
    gix_pack::multi_index::write_from_index_paths(
        indexes,
        &mut out,
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        gix_pack::multi_index::write::Options { object_hash: hash },
    )
    .map_err(|e| pack_err("writing the multi-pack-index", &e))?;
    let file = out
        .into_inner()
        .map_err(|e| io("writing the multi-pack-index")(e.into_error()))?;
    file.sync_all().map_err(io("writing the multi-pack-index"))
}

/// A pack's files removed, its index first (a reader that lists the
/// directory then never finds an index without its pack).
fn remove_pack(pack: &Pack) -> Result<(), MaintenanceError> {
    for ext in ["idx", "pack", "rev", "bitmap"] {
        remove_if_there(&pack.file(ext))?;
    }
    Ok(())
}

fn remove_if_there(path: &Path) -> Result<(), MaintenanceError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("removing {}", path.display()))(e))
        }
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<(), MaintenanceError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("syncing {}", dir.display())))
}
