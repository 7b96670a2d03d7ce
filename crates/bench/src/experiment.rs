//! `count-experiment`: the push's counting step (what `crates/git`'s
//! `push::pack::count` does: a commit walk, then gix-pack's object
//! expansion) timed with and without a delta-base cache and with threads,
//! to size the change recommended in BENCHMARKS.md.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, Result};
use gix::ObjectId;
use gix_pack::data::output::count::{self, objects::ObjectExpansion};

/// `count-experiment <repo> <rev> [<hidden rev>]`.
pub fn main(args: &[String]) -> Result<()> {
    let usage = "usage: sluice-bench count-experiment <repo> <rev> [<hidden rev>]";
    let repo = gix::open(args.first().context(usage)?)?;
    let tip = repo
        .rev_parse_single(args.get(1).context(usage)?.as_str())?
        .detach();
    let hidden: Vec<ObjectId> = match args.get(2) {
        Some(h) => vec![repo.rev_parse_single(h.as_str())?.detach()],
        None => Vec::new(),
    };
    let t = Instant::now();
    let mut ids = Vec::new();
    for info in repo.rev_walk([tip]).with_hidden(hidden.clone()).all()? {
        ids.push(info?.id);
    }
    println!("walk: {} commits in {:.0} ms", ids.len(), ms(t));
    let expansion = if hidden.is_empty() {
        ObjectExpansion::TreeContents
    } else {
        ObjectExpansion::TreeAdditionsComparedToAncestor
    };
    let interrupt = AtomicBool::new(false);
    for variant in 0..5 {
        let mut db = repo.clone().into_sync().objects.to_cache_arc();
        db.prevent_pack_unload();
        db.ignore_replacements = true;
        let name = match variant {
            0 => "unthreaded, no delta-base cache (as crates/git today)",
            1 => {
                db.set_pack_cache(|| {
                    Box::new(gix_pack::cache::lru::StaticLinkedList::<64>::default())
                });
                "unthreaded, StaticLinkedList<64> delta-base cache"
            }
            2 => {
                db.set_pack_cache(|| {
                    Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(64 << 20))
                });
                "unthreaded, MemoryCappedHashmap 64 MiB delta-base cache"
            }
            3 => {
                db.set_pack_cache(|| {
                    Box::new(gix_pack::cache::lru::StaticLinkedList::<64>::default())
                });
                "count::objects (all cores), StaticLinkedList<64> per thread"
            }
            _ => {
                db.set_pack_cache(|| {
                    Box::new(gix_pack::cache::lru::MemoryCappedHashmap::new(64 << 20))
                });
                "count::objects (all cores), MemoryCappedHashmap 64 MiB per thread"
            }
        };
        let t = Instant::now();
        let n = if variant < 3 {
            let mut it = ids.iter().copied().map(Ok);
            count::objects_unthreaded(&db, &mut it, &gix::progress::Discard, &interrupt, expansion)?
                .0
                .len()
        } else {
            let it = ids.clone().into_iter().map(Ok);
            count::objects(
                db,
                Box::new(it),
                &gix::progress::Discard,
                &interrupt,
                count::objects::Options {
                    thread_limit: None,
                    chunk_size: 50,
                    input_object_expansion: expansion,
                },
            )?
            .0
            .len()
        };
        println!("{name}: {n} objects in {:.0} ms", ms(t));
    }
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
