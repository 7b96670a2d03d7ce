//! ls-refs per call, in a loop in one process, against `git daemon` (and
//! lighttpd + `git http-backend`, when lighttpd is installed) on 127.0.0.1
//! serving the medium fixture: sluice-git next to libgit2.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_bench::ops;
use sluice_testkit::{GitDaemon, HttpBackend};

fn ls_refs(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let medium = sluice_testkit::fixtures::cached("medium").expect("the medium fixture");
    sluice_bench::history::link_copy(&medium, &dir.path().join("medium.git"))
        .expect("serving a copy");
    let daemon = GitDaemon::start(dir.path()).expect("git daemon");
    let http = match HttpBackend::start(dir.path()) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("no http rows: {e}");
            None
        }
    };
    let client = ops::client();
    let opts = ops::call_options();
    let mut g = c.benchmark_group("ls-refs");
    g.sample_size(30).measurement_time(Duration::from_secs(6));
    let mut urls = vec![("git", daemon.url("medium.git"))];
    if let Some(h) = &http {
        urls.push(("http", h.url("medium.git")));
    }
    for (scheme, url) in &urls {
        g.bench_function(format!("sluice, {scheme}://"), |b| {
            b.iter(|| black_box(ops::sluice_ls_refs(&client, url, &opts).expect("ls-refs")))
        });
        g.bench_function(format!("libgit2, {scheme}://"), |b| {
            b.iter(|| black_box(ops::libgit2_ls_refs(url).expect("ls-refs")))
        });
    }
    g.finish();
    drop(http);
    drop(daemon);
}

criterion_group!(benches, ls_refs);
criterion_main!(benches);
