//! One replica of the fleet soak (`tests/it/fleet_soak.rs`); not for use on
//! its own.
//!
//! `fleet-replica run <ledger-url> <git-url> <http-url> <local> <out> <replica> <threads> <ids>`:
//! opens the PostgreSQL ledger and its shared retry budget as the CLI does,
//! then `threads` threads each ask for every operation id `fleet-<n>`
//! (`n` below `ids`), in an order of their own: `n % 4` picks a read
//! (an ls-refs, or a fetch into `<local>.fetch`, by `n / 4`) over git://
//! or smart HTTP, or a leased push of a commit made for that id (its
//! message is the id) to `refs/heads/b<n % 8>` over git:// or smart HTTP. Every ended operation appends one line to `<out>`:
//! `<id> <kind> <result> <may_have_applied> <commit|-> <dst|-> <attempts>`.
//!
//! `fleet-replica outage <ledger-url> <git-url> <out> <threads> <ops>`:
//! each thread runs `ops` ls-refs (generated ids) against a remote that
//! refuses every connection; one line per operation: `<attempts>`.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_git::{CallOptions, GitClient, PushOptions, RefUpdate};
use sluice_ledger::Store;
use sluice_policy::{BackoffShape, Bounds, Outcome, OutcomeKind, Policy, RetryBudget};
use sluice_testkit::repo;

/// The retry budget every replica is given (the fleet's one bucket per
/// host lives in the database).
const BUDGET: RetryBudget = RetryBudget {
    capacity: 10.0,
    refill_per_sec: 2.0,
    success_credit: 0.1,
};

fn bounds() -> Bounds {
    Bounds::new(Duration::from_secs(6), Duration::from_secs(2), 4)
        .with_backoff(BackoffShape {
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(200),
            factor: 2.0,
            jitter: true,
        })
        .with_reconcile_reserve(Duration::from_secs(2))
}

fn client(ledger: &str) -> GitClient {
    // A replica started while the database restarts or its connections
    // are cut tries to open it again for up to 20 s (as a service manager
    // would restart it).
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let store = loop {
        match Store::open_within(Path::new(ledger), Duration::from_secs(5)) {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() < until => {
                eprintln!("fleet-replica: the ledger does not open yet: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the fleet's ledger does not open: {e}"),
        }
    };
    let mut b = Policy::builder().retry_budget(BUDGET);
    if let Some(budgets) = store.budget_store() {
        b = b.budget_store(budgets);
    }
    GitClient::new(Arc::new(b.ledger(Arc::new(store)).build()))
}

fn result(k: OutcomeKind) -> &'static str {
    match k {
        OutcomeKind::Succeeded => "succeeded",
        OutcomeKind::Answered => "answered",
        OutcomeKind::Unknown => "unknown",
        OutcomeKind::Rejected => "rejected",
        OutcomeKind::LocalError => "local-error",
    }
}

/// Appends whole lines to the replica's output, flushed one by one (a
/// replica may be killed at any moment).
struct Out(Mutex<std::fs::File>);

impl Out {
    fn open(path: &str) -> Out {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("the output file opens");
        Out(Mutex::new(f))
    }

    fn line(&self, line: &str) {
        let mut f = self.0.lock().expect("output lock");
        f.write_all(format!("{line}\n").as_bytes())
            .expect("output written");
    }
}

/// How an operation ended: its result, `may_have_applied`, its attempts.
fn ended<T>(o: &Outcome<T>) -> (OutcomeKind, Option<bool>, usize) {
    (o.kind, o.may_have_applied, o.attempts.len())
}

/// One operation of the mix, for the id `fleet-<n>`.
fn one(client: &GitClient, urls: [&str; 2], local: &Path, n: usize, out: &Out) {
    let id = format!("fleet-{n}");
    let url = urls[n % 2];
    let opts = CallOptions::new().bounds(bounds()).id(id.clone());
    let note = |kind: &str,
                (k, applied, n): (OutcomeKind, Option<bool>, usize),
                commit: &str,
                dst: &str| {
        let applied = applied.map_or("null", |b| if b { "true" } else { "false" });
        out.line(&format!(
            "{id} {kind} {} {applied} {commit} {dst} {n}",
            result(k)
        ));
    };
    if n % 4 < 2 && (n / 4).is_multiple_of(2) {
        let o = client.ls_refs(url, &[], &opts).expect("valid input");
        note("ls-refs", ended(&o), "-", "-");
        return;
    }
    if n % 4 < 2 {
        // Each id into refs of its own: threads do not queue on one lock.
        let into = gix::open(local.with_extension("git.fetch")).expect("the fetch repository");
        let spec = format!("+refs/heads/*:refs/remotes/{id}/*");
        let o = client
            .fetch(url, &[spec], &into, &opts)
            .expect("valid input");
        note("fetch", ended(&o), "-", "-");
        return;
    }
    let dst = format!("refs/heads/b{}", n % 8);
    let read_opts = CallOptions::new().bounds(bounds());
    let read = client
        .ls_refs(url, std::slice::from_ref(&dst), &read_opts)
        .expect("valid input");
    let Some(lease) = read
        .value
        .as_ref()
        .and_then(|refs| refs.iter().find(|r| r.name == dst))
        .and_then(|r| r.oid)
    else {
        return; // the lease read failed: this asker gives up the id
    };
    let lease = lease.to_string();
    let commit = repo::git(
        local,
        &[
            "commit-tree",
            &format!("{lease}^{{tree}}"),
            "-p",
            &lease,
            "-m",
            &id,
        ],
    )
    .trim()
    .to_string();
    let update = RefUpdate::leased(
        gix::ObjectId::from_hex(commit.as_bytes()).expect("hex"),
        dst.clone(),
        gix::ObjectId::from_hex(lease.as_bytes()).expect("hex"),
    );
    let repo = gix::open(local).expect("the local repository opens");
    let o = client
        .push(url, &[update], &PushOptions::default(), &repo, &opts)
        .expect("valid input");
    note("push", ended(&o), &commit, &dst);
}

fn run(args: &[String]) {
    let [ledger, git, http, local, out, replica, threads, ids] = args else {
        panic!("run <ledger> <git> <http> <local> <out> <replica> <threads> <ids>");
    };
    let client = client(ledger);
    let out = Out::open(out);
    let replica: usize = replica.parse().expect("replica");
    let threads: usize = threads.parse().expect("threads");
    let ids: usize = ids.parse().expect("ids");
    std::thread::scope(|s| {
        for t in 0..threads {
            let (client, out) = (&client, &out);
            let urls = [git.as_str(), http.as_str()];
            let local = Path::new(local);
            s.spawn(move || {
                let start = t * 5 + replica * 17;
                for i in 0..ids {
                    one(client, urls, local, (start + i * 7) % ids, out);
                }
            });
        }
    });
}

fn outage(args: &[String]) {
    let [ledger, git, out, threads, ops] = args else {
        panic!("outage <ledger> <git> <out> <threads> <ops>");
    };
    let client = client(ledger);
    let out = Out::open(out);
    let threads: usize = threads.parse().expect("threads");
    let ops: usize = ops.parse().expect("ops");
    let opts = CallOptions::new().bounds(
        Bounds::new(Duration::from_secs(3), Duration::from_secs(1), 6).with_backoff(BackoffShape {
            min_delay: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            factor: 2.0,
            jitter: true,
        }),
    );
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..ops {
                    let o = client.ls_refs(git, &[], &opts).expect("valid input");
                    out.line(&format!("{}", o.attempts.len()));
                }
            });
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("outage") => outage(&args[1..]),
        _ => panic!("fleet-replica run|outage …"),
    }
}
