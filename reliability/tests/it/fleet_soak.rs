//! The fleet soak, CI-sized: three replica processes (`fleet-replica`) ×
//! eight threads share one PostgreSQL ledger and retry budget, each asking
//! for the same operation ids — ls-refs, fetches and leased pushes over
//! git:// and smart HTTP, through fault proxies setting a random fault every 100 ms —
//! while PostgreSQL is restarted twice, its connections are cut twice
//! through the plain TCP fault proxy, and two replicas are SIGKILLed and
//! started again. Then, from the servers' truth (a pre-receive hook's log
//! of every pack that reached it, the branches' reflogs) and the ledger's
//! rows:
//!
//! * no operation id ran twice (one replica's outcome other than
//!   `rejected` per id);
//! * no second pack: no id's commit reached the server twice;
//! * every finished outcome is the ledger's row, and equals the server's
//!   state (a succeeded push is in its branch's reflog, an answered one in
//!   none).
//!
//! Then the git server is out (the proxy refuses every connection): the
//! three replicas' retries together stay within the one shared budget.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_ledger::PostgresLedger;
use sluice_testkit::proxy::TcpFaultProxy;
use sluice_testkit::{repo, Fault, FaultProxy, GitDaemon, HttpBackend, Postgres, RepoBuilder};

const REPLICAS: usize = 3;
const THREADS: usize = 8;
const IDS: usize = 120;

/// What befalls the fleet while it runs, in this order, one every
/// [`CHAOS_STEP`].
enum Chaos {
    Restart,
    Cut,
    Kill,
}

const CHAOS: [Chaos; 6] = [
    Chaos::Restart,
    Chaos::Cut,
    Chaos::Kill,
    Chaos::Restart,
    Chaos::Cut,
    Chaos::Kill,
];

const CHAOS_STEP: Duration = Duration::from_millis(700);

/// The hook that logs every pack that reached the server to `log`: the
/// new value, the ref and the commit's message (the operation id).
fn hook(log: &Path) -> String {
    format!(
        "#!/bin/sh\nwhile read old new ref; do\n  \
         echo \"$new $ref $(git log -1 --format=%s $new)\" >> '{}'\ndone\n",
        log.display()
    )
}

fn replica(dir: &Path, ledger: &str, git: &str, http: &str, k: usize, gen: usize) -> Child {
    let local = dir.join(format!("local-{k}.git"));
    Command::new(env!("CARGO_BIN_EXE_fleet-replica"))
        .args([
            "run",
            ledger,
            git,
            http,
            local.to_str().expect("UTF-8"),
            dir.join(format!("out-{k}-{gen}")).to_str().expect("UTF-8"),
            &k.to_string(),
            &THREADS.to_string(),
            &IDS.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("a replica starts")
}

/// A bare repository reading the served one's objects.
fn borrowing(path: &Path, srv: &Path) {
    repo::init_bare(path).expect("init");
    std::fs::write(
        path.join("objects/info/alternates"),
        format!("{}\n", srv.join("objects").display()),
    )
    .expect("alternates");
}

#[derive(Debug)]
struct Line {
    id: String,
    attempts: usize,
    kind: String,
    result: String,
    commit: String,
    dst: String,
}

fn lines(dir: &Path) -> Vec<Line> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir") {
        let p: PathBuf = e.expect("entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with("out-") {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("out");
        for l in text.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 7 {
                continue; // a line cut by a SIGKILL
            }
            all.push(Line {
                id: f[0].into(),
                kind: f[1].into(),
                result: f[2].into(),
                commit: f[4].into(),
                dst: f[5].into(),
                attempts: f[6].parse().unwrap_or(0),
            });
        }
    }
    all
}

fn fault(n: u64) -> (Fault, Fault) {
    let git = match n % 6 {
        0 => Fault::CutAfterAdvert,
        1 => Fault::CutBeforeReport,
        2 => Fault::CutInPushPack,
        3 => Fault::ResetBeforeAdvert,
        _ => Fault::PassThrough,
    };
    let http = match n % 5 {
        0 => Fault::http_status(503, "git-"),
        1 => Fault::http_cut_response("git-receive-pack"),
        _ => Fault::PassThrough,
    };
    (git, http)
}

#[test]
fn a_fleet_of_three_replicas_runs_no_id_twice_through_restarts_cuts_and_kills() {
    let _alone = crate::alone();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let srv = RepoBuilder::new()
        .branch("main", 2)
        .build(&root.join("srv/fleet.git"))
        .expect("served repository");
    repo::set_config(&srv, "core.logAllRefUpdates", "true");
    let main = repo::rev_parse(&srv, "refs/heads/main").expect("main");
    for b in 0..8 {
        repo::git(&srv, &["update-ref", &format!("refs/heads/b{b}"), &main]);
    }
    let log = root.join("packs.log");
    std::fs::write(&log, "").expect("log");
    repo::install_hook(&srv, "pre-receive", &hook(&log)).expect("hook");
    HttpBackend::enable_anonymous_push(&srv).expect("http push");
    let daemon = GitDaemon::start(&root.join("srv")).expect("git daemon");
    let http = HttpBackend::start(&root.join("srv")).expect("http backend");
    let gproxy = FaultProxy::git(daemon.addr()).expect("git proxy");
    let hproxy = FaultProxy::http(http.addr()).expect("http proxy");
    let (git_url, http_url) = (gproxy.url("fleet.git"), hproxy.http_url("git/fleet.git"));

    let mut pg = Postgres::start().expect("PostgreSQL");
    let dbproxy = TcpFaultProxy::start(pg.addr()).expect("db proxy");
    let ledger_url = format!(
        "postgres://sluice:{}@{}/postgres",
        pg.password(),
        dbproxy.addr()
    );
    let ledger = PostgresLedger::open(&ledger_url).expect("the schema is made");
    for k in 0..REPLICAS {
        borrowing(&root.join(format!("local-{k}.git")), &srv);
        repo::init_bare(&root.join(format!("local-{k}.git.fetch"))).expect("init");
    }
    let mut running: Vec<Child> = (0..REPLICAS)
        .map(|k| replica(root, &ledger_url, &git_url, &http_url, k, 0))
        .collect();

    // The chaos, on a schedule, while replicas run.
    let started = Instant::now();
    let (mut restarts, mut cuts, mut kills, mut n, mut done) = (0, 0, 0, 0u64, 0usize);
    let alive = |r: &mut Vec<Child>| r.iter_mut().any(|c| c.try_wait().expect("wait").is_none());
    while alive(&mut running) {
        n += 1;
        let (g, h) = fault(n);
        gproxy.set_fault(g, 1);
        hproxy.set_fault(h, 1);
        // The next event of the schedule, once its time has come: each
        // happens, in order, however late the one before it ran.
        if let Some(event) = CHAOS.get(done) {
            if started.elapsed() >= CHAOS_STEP * (done as u32 + 1) {
                match event {
                    Chaos::Restart => {
                        pg.restart().expect("PostgreSQL restarts");
                        restarts += 1;
                    }
                    Chaos::Cut => {
                        assert!(dbproxy.cut_all() > 0);
                        cuts += 1;
                    }
                    Chaos::Kill => {
                        let k = kills;
                        running[k].kill().expect("SIGKILL");
                        running[k].wait().expect("reaped");
                        running[k] = replica(root, &ledger_url, &git_url, &http_url, k, 1);
                        kills += 1;
                    }
                }
                done += 1;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(75),
            "the fleet ran too long"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for c in &mut running {
        assert!(c.wait().expect("wait").success(), "a replica failed");
    }
    assert!(
        restarts >= 2 && cuts >= 2 && kills >= 2,
        "{restarts} {cuts} {kills}: the fleet ended before its chaos"
    );

    let summary = check(root, &srv, &log, &ledger);
    eprintln!(
        "fleet: {summary}; {restarts} restarts, {cuts} cuts, {kills} kills; {:?}",
        started.elapsed()
    );
    outage_stays_within_one_budget(root, &gproxy, &ledger_url, &git_url);
    drop(ledger);
}

/// The checker, from the outcome lines, the hook's pack log, the reflogs
/// and the ledger's rows; what it counted, as a line for the log.
fn check(root: &Path, srv: &Path, log: &Path, ledger: &PostgresLedger) -> String {
    let ran = lines(root);
    let mut by_id: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    // Rejected, or a claim that could not be made (local-error with no
    // attempt): nothing ran.
    for l in ran
        .iter()
        .filter(|l| l.result != "rejected" && !(l.result == "local-error" && l.attempts == 0))
    {
        by_id.entry(&l.id).or_default().push(l);
    }
    let twice: Vec<_> = by_id.values().filter(|v| v.len() > 1).collect();
    assert!(twice.is_empty(), "an id ran twice: {twice:?}");
    let packs = std::fs::read_to_string(log).expect("pack log");
    let mut pack_ids: BTreeMap<String, usize> = BTreeMap::new();
    for l in packs.lines() {
        if let Some(id) = l.split(' ').nth(2) {
            *pack_ids.entry(id.to_string()).or_default() += 1;
        }
    }
    assert!(
        pack_ids.values().all(|n| *n == 1),
        "a second pack: {pack_ids:?}"
    );
    let rows = ledger.list(std::time::UNIX_EPOCH).expect("rows");
    let row_of: BTreeMap<&str, _> = rows.iter().map(|r| (r.id.as_str(), r)).collect();
    let (mut succeeded, mut answered, mut unknown, mut not_recorded) = (0, 0, 0, 0);
    let mut fetched = 0;
    for (id, l) in by_id.iter().map(|(id, v)| (id, v[0])) {
        // A claim that failed (local-error) may have left no row; a finish
        // the database could not take leaves the row running
        // (`recorded: false`); any run recorded is the replica's outcome.
        match row_of.get(id).and_then(|r| r.run.as_ref()) {
            Some(run) => {
                let recorded = format!("{:?}", run.result).to_lowercase();
                let said = l.result.replace('-', "");
                assert_eq!(recorded, said, "{id}: the ledger's row is the outcome");
            }
            None => not_recorded += 1,
        }
        if l.kind == "fetch" && l.result == "succeeded" {
            fetched += 1;
        }
        if l.kind != "push" {
            continue;
        }
        let on_server = repo::reflog(srv, &l.dst)
            .iter()
            .any(|e| e.contains(&l.commit));
        match l.result.as_str() {
            "succeeded" => {
                succeeded += 1;
                assert!(on_server, "{id}: succeeded but not on the server");
            }
            "answered" => {
                answered += 1;
                assert!(!on_server, "{id}: answered but on the server");
            }
            _ => unknown += 1,
        }
    }
    let ids_ran: BTreeSet<&str> = by_id.keys().copied().collect();
    assert!(succeeded > 0 && fetched > 0, "pushes landed, fetches ran");
    format!(
        "{} ids ran of {IDS}, {} outcomes, {fetched} fetches succeeded, pushes {succeeded} \
         succeeded, {answered} answered, {unknown} other; {not_recorded} not recorded; {} packs",
        ids_ran.len(),
        ran.len(),
        packs.lines().count(),
    )
}

/// The git server out (its proxy refuses every connection): the three
/// replicas' retries together stay within the one shared bucket
/// (capacity 10, 2 a second).
fn outage_stays_within_one_budget(
    root: &Path,
    gproxy: &FaultProxy,
    ledger_url: &str,
    git_url: &str,
) {
    gproxy.set_fault_always(Fault::Refuse);
    let before = gproxy.connections().len();
    let out_started = Instant::now();
    let outage: Vec<Child> = (0..REPLICAS)
        .map(|k| {
            Command::new(env!("CARGO_BIN_EXE_fleet-replica"))
                .args([
                    "outage",
                    ledger_url,
                    git_url,
                    root.join(format!("outage-{k}")).to_str().expect("UTF-8"),
                    &THREADS.to_string(),
                    "2",
                ])
                .stdin(Stdio::null())
                .spawn()
                .expect("a replica starts")
        })
        .collect();
    for mut c in outage {
        assert!(c.wait().expect("wait").success());
    }
    let took = out_started.elapsed().as_secs_f64();
    let conns = gproxy.connections().len() - before;
    let ops = REPLICAS * THREADS * 2;
    let bound = ops as f64 + 10.0 + 2.0 * took;
    eprintln!("outage: {ops} operations, {conns} connections in {took:.1}s (bound {bound:.0})");
    assert!(conns > ops, "retries happened: {conns}");
    assert!((conns as f64) <= bound, "{conns} connections > {bound}");
}
