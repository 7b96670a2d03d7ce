//! Which packs a consolidation takes: the packs of the object directory as
//! git counts them, and git's geometric split (`git repack --geometric=2`)
//! over them. Reads only file names and each index's header.

use std::io::Read;
use std::path::{Path, PathBuf};

/// One pack of the pack directory, with what decides whether it is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pack {
    /// Its path without an extension (`…/pack/pack-<hash>`).
    pub stem: PathBuf,
    /// Objects in it, read from its index's fan-out table.
    pub objects: u64,
    /// It has a `.keep`: never counted, never taken.
    pub keep: bool,
    /// It has a `.promisor` or a `.mtimes` (a cruft pack): counted, never
    /// taken.
    pub pinned: bool,
}

impl Pack {
    /// Its file with `ext` (`"idx"`, `"pack"`, …).
    pub fn file(&self, ext: &str) -> PathBuf {
        self.stem.with_extension(ext)
    }

    /// Whether a consolidation may take it.
    pub fn takeable(&self) -> bool {
        !self.keep && !self.pinned
    }
}

/// Every pack in `dir` that has both its `.pack` and its `.idx` (a pack
/// being written has neither name yet), in name order. A missing directory
/// holds none.
pub(crate) fn list(dir: &Path) -> std::io::Result<Vec<Pack>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = std::collections::BTreeSet::new();
    for entry in entries {
        let name = entry?.file_name();
        if let Some(name) = name.to_str() {
            names.insert(name.to_owned());
        }
    }
    let mut packs = Vec::new();
    for name in &names {
        let Some(base) = name.strip_suffix(".idx") else {
            continue;
        };
        if !base.starts_with("pack-") || !names.contains(&format!("{base}.pack")) {
            continue;
        }
        let stem = dir.join(base);
        let objects = match index_objects(&stem.with_extension("idx")) {
            Ok(n) => n,
            // Removed since the listing (a consolidation elsewhere, `git
            // gc`): not a pack any more.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let has = |ext: &str| names.contains(&format!("{base}.{ext}"));
        packs.push(Pack {
            stem,
            objects,
            keep: has("keep"),
            pinned: has("promisor") || has("mtimes"),
        });
    }
    Ok(packs)
}

/// Packs as git's `gc --auto` counts them: those without a `.keep`.
pub(crate) fn counted(packs: &[Pack]) -> usize {
    packs.iter().filter(|p| !p.keep).count()
}

/// The object count of a pack index (version 1 or 2): the last entry of
/// its fan-out table.
fn index_objects(idx: &Path) -> std::io::Result<u64> {
    let mut head = [0u8; 8 + 256 * 4];
    std::fs::File::open(idx)?.read_exact(&mut head)?;
    let fanout = if head[..4] == *b"\xfftOc" { 8 } else { 0 };
    let last = fanout + 255 * 4;
    let n = u32::from_be_bytes(head[last..last + 4].try_into().expect("four bytes"));
    Ok(u64::from(n))
}

/// git's geometric split with factor 2 over the packs a consolidation may
/// take: sorted by object count, packs are kept from the largest down while
/// each holds at least twice the objects of all smaller packs together;
/// the rest are rolled up into one. Returns the packs to roll up, smallest
/// first; empty when fewer than two would be (one pack rolled into itself
/// changes nothing).
pub(crate) fn geometric(packs: &[Pack]) -> Vec<Pack> {
    let mut takeable: Vec<Pack> = packs.iter().filter(|p| p.takeable()).cloned().collect();
    takeable.sort_by(|a, b| a.objects.cmp(&b.objects).then(a.stem.cmp(&b.stem)));
    let weights: Vec<u64> = takeable.iter().map(|p| p.objects).collect();
    let rolled = rolled_up(&weights);
    if rolled < 2 {
        return Vec::new();
    }
    takeable.truncate(rolled);
    takeable
}

/// How many of `ascending` (object counts, smallest first) are rolled up:
/// everything below the last pack, going down from the largest, that holds
/// at least twice the objects of all smaller ones together.
pub(crate) fn rolled_up(ascending: &[u64]) -> usize {
    let mut below: Vec<u64> = Vec::with_capacity(ascending.len());
    let mut sum = 0u64;
    for w in ascending {
        below.push(sum);
        sum = sum.saturating_add(*w);
    }
    let mut kept_from = ascending.len();
    while kept_from > 0 {
        let i = kept_from - 1;
        if ascending[i] >= below[i].saturating_mul(2) {
            kept_from = i;
        } else {
            break;
        }
    }
    kept_from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_packs_are_all_rolled_up() {
        assert_eq!(rolled_up(&[3, 3, 3, 3]), 4);
    }

    #[test]
    fn a_geometric_progression_is_left_alone() {
        assert_eq!(rolled_up(&[1, 2, 6, 18]), 0);
        assert_eq!(rolled_up(&[]), 0);
        assert_eq!(rolled_up(&[5]), 0);
    }

    #[test]
    fn a_large_base_pack_is_kept_and_the_small_ones_rolled_up() {
        // 1000 ≥ 2 × 12: kept; 3 < 2 × 9: rolled with everything below.
        assert_eq!(rolled_up(&[3, 3, 3, 3, 1000]), 4);
        // Two large ones in progression above the small ones.
        assert_eq!(rolled_up(&[3, 3, 3, 50, 1000]), 3);
    }

    #[test]
    fn the_split_stops_at_the_first_pack_too_small_for_its_place() {
        // 10 < 2 × 9: rolled, and so is everything below it, even the 6
        // that would hold on its own.
        assert_eq!(rolled_up(&[1, 2, 6, 10, 100]), 4);
    }

    #[test]
    fn kept_packs_are_neither_counted_nor_taken_and_pinned_ones_are_counted_only() {
        let p = |n: &str, objects, keep, pinned| Pack {
            stem: PathBuf::from(n),
            objects,
            keep,
            pinned,
        };
        let packs = vec![
            p("a", 3, false, false),
            p("b", 3, true, false),
            p("c", 3, false, true),
            p("d", 3, false, false),
        ];
        assert_eq!(counted(&packs), 3);
        let taken: Vec<_> = geometric(&packs).into_iter().map(|p| p.stem).collect();
        assert_eq!(taken, vec![PathBuf::from("a"), PathBuf::from("d")]);
    }
}
