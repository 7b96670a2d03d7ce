//! The policy's own cost per call: `Policy::run` (and `run_write`) with a
//! closure that succeeds at once — no I/O, one attempt. Target: < 1 µs.
//!
//! The operation is built inside the timed loop (every real call builds
//! one). The in-memory ledger keeps every claimed id, so the policy is
//! replaced (untimed) every 10,000 calls to keep the ledger's size, and the
//! figure, from drifting with the iteration count.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_policy::{AttemptError, Effect, Operation, Policy};

const BATCH: u64 = 10_000;
const REMOTE: &str = "git://127.0.0.1:9418/repo.git";

/// Runs `iters` calls of `call` in batches, each batch on a fresh policy.
fn batched(iters: u64, mut call: impl FnMut(&Policy, u64)) -> Duration {
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = BATCH.min(iters - done);
        let policy = Policy::default();
        let t = Instant::now();
        for i in 0..n {
            call(&policy, done + i);
        }
        total += t.elapsed();
        done += n;
    }
    total
}

fn policy(c: &mut Criterion) {
    let mut g = c.benchmark_group("policy");
    g.bench_function("run, read, generated id", |b| {
        b.iter_custom(|iters| {
            batched(iters, |p, _| {
                let op = Operation::new("ls-refs", Effect::Read, REMOTE);
                let o = p.run(op, |ctx| {
                    ctx.reached("done");
                    Ok::<_, AttemptError>(black_box(1u32))
                });
                let _ = black_box(o);
            })
        })
    });
    g.bench_function("run, read, caller's unique id", |b| {
        b.iter_custom(|iters| {
            // Ids made before the clock starts; moving one in is timed.
            let mut ids: Vec<String> = (0..iters).rev().map(|i| format!("bench-{i}")).collect();
            batched(iters, |p, _| {
                let id = ids.pop().expect("one id per call");
                let op = Operation::new("ls-refs", Effect::Read, REMOTE).id(id);
                let o = p.run(op, |ctx| {
                    ctx.reached("done");
                    Ok::<_, AttemptError>(black_box(1u32))
                });
                let _ = black_box(o);
            })
        })
    });
    g.bench_function("run_write, generated id", |b| {
        b.iter_custom(|iters| {
            batched(iters, |p, _| {
                let op = Operation::new("push", Effect::Write, REMOTE);
                let o = p.run_write(
                    op,
                    |ctx| {
                        ctx.reached("reported");
                        Ok::<_, AttemptError>(black_box(1u32))
                    },
                    |_| unreachable!("a first-try success is never settled"),
                );
                let _ = black_box(o);
            })
        })
    });
    g.finish();
}

criterion_group!(benches, policy);
criterion_main!(benches);
