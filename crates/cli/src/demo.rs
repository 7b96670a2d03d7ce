//! `sluice-remote demo`: the retry policy on loopback, with nothing but git.
//!
//! It builds the `small` fixture in a temporary directory, serves it with
//! `git daemon` behind the testkit's fault proxy, and runs four steps, each
//! narrated as it happens and checked against what it should show:
//!
//! 1. a fetch whose first connection is refused: unjudged, tried again,
//!    succeeds;
//! 2. a push whose report is cut after the pack reached the server: its
//!    answer is unknown, so it is not pushed again but settled by reading —
//!    landed;
//! 3. a push leased on a value somebody else has moved: answered (`stale
//!    info`), not tried again;
//! 4. a read of a dead remote under a 3 s deadline: unknown, with the
//!    attempt history.
//!
//! It prints where the temporary files were, removes them, and exits 0 only
//! if every step behaved as described.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sluice_cli::human;
use sluice_git::{CallOptions, GitClient, PushOptions, RefStatus, RefUpdate};
use sluice_policy::{BackoffShape, Bounds, Class, OutcomeKind, Policy, Stopped, Verdict};
use sluice_testkit::{fixtures, repo, Fault, FaultProxy, GitDaemon, Service};

/// Small backoff, so the demo takes seconds.
const BACKOFF: BackoffShape = BackoffShape {
    min_delay: Duration::from_millis(100),
    max_delay: Duration::from_millis(800),
    factor: 2.0,
    jitter: true,
};

fn say(text: &str) {
    crate::stdout::write(format!("{text}\n").as_bytes());
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

/// Collects the checks of one step.
struct Step {
    failures: Vec<String>,
}

impl Step {
    fn new() -> Self {
        Step {
            failures: Vec::new(),
        }
    }

    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.failures.push(what.into());
        }
    }

    /// Print the verdict; true when every check held.
    fn verdict(self) -> bool {
        if self.failures.is_empty() {
            say("  => as described.\n");
            true
        } else {
            for f in &self.failures {
                say(&format!("  => NOT as described: {f}"));
            }
            say("");
            false
        }
    }
}

fn oid(hex: &str) -> Result<gix::ObjectId, Box<dyn std::error::Error>> {
    Ok(gix::ObjectId::from_hex(hex.as_bytes())?)
}

fn receive_packs(proxy: &FaultProxy) -> usize {
    proxy
        .connections()
        .iter()
        .filter(|c| c.service == Some(Service::ReceivePack))
        .count()
}

/// Run the demo; the exit code.
pub fn run() -> u8 {
    let dir = match tempfile::Builder::new().prefix("sluice-demo-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot make a temporary directory: {e}");
            return 1;
        }
    };
    let where_ = dir.path().display().to_string();
    let ok = match steps(dir.path()) {
        Ok(ok) => ok,
        Err(e) => {
            eprintln!("error: the demo could not set up: {e}");
            false
        }
    };
    say(&format!(
        "The temporary files were in {where_}; removing them."
    ));
    if let Err(e) = dir.close() {
        eprintln!("error: could not remove {where_}: {e}");
        return 1;
    }
    if ok {
        say("Every step behaved as described.");
        0
    } else {
        say("Some step did not behave as described (see above).");
        1
    }
}

fn steps(dir: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let srv = dir.join("srv");
    std::fs::create_dir_all(&srv)?;
    let server = fixtures::build("small", &srv.join("small.git"))?;
    let daemon = GitDaemon::start(&srv)?;
    let proxy = FaultProxy::git(daemon.addr())?;
    let url = proxy.url("small.git");
    say(&format!(
        "sluice-remote demo: the `small` fixture is served by `git daemon` on {},\n\
         behind a fault proxy at {url}.\n\
         Every call below runs in-process through gitoxide under one retry policy\n\
         (real clock; backoff 100 ms doubling to 800 ms, jittered).\n",
        daemon.addr()
    ));
    let scene = Scene {
        dir,
        server,
        proxy,
        url,
        client: GitClient::new(Arc::new(Policy::default())),
        opts: CallOptions::new().bounds(
            Bounds::new(Duration::from_secs(10), Duration::from_secs(5), 4)
                .with_backoff(BACKOFF)
                .with_reconcile_reserve(Duration::from_secs(1)),
        ),
    };
    let mut all = refused_fetch(&scene)?;
    let (landed, work) = lost_report(&scene)?;
    all &= landed;
    all &= stale_lease(&scene, &work)?;
    all &= dead_remote(&scene)?;
    drop(scene);
    drop(daemon);
    Ok(all)
}

/// What every step uses: the temporary directory, the served fixture, the
/// fault proxy in front of its daemon, and the client with its options.
struct Scene<'a> {
    dir: &'a Path,
    server: PathBuf,
    proxy: FaultProxy,
    url: String,
    client: GitClient,
    opts: CallOptions,
}

/// The working clone steps 2 and 3 push from, and the commit step 2 pushed.
struct Work {
    path: PathBuf,
    repo: gix::Repository,
    tip: String,
}

type Demo<T> = Result<T, Box<dyn std::error::Error>>;

/// Step 1: a fetch whose first connection is refused.
fn refused_fetch(scene: &Scene<'_>) -> Demo<bool> {
    // 1. A refused connection is never judged: tried again.
    say(
        "1. Fetch, with the first connection refused. The proxy accepts and drops the\n   \
         first connection before the server says a word: the remote never judged the\n   \
         call, so it is tried again after a short backoff, and the second attempt fetches.",
    );
    let local = scene.dir.join("local.git");
    repo::init_bare(&local)?;
    let local_repo = gix::open(&local)?;
    scene.proxy.set_fault(Fault::Refuse, 1);
    let out = scene.client.fetch(
        &scene.url,
        &["+refs/heads/*:refs/remotes/origin/*".to_string()],
        &local_repo,
        &scene.opts,
    )?;
    say(&indent(&human::summary(&out)));
    let mut s = Step::new();
    s.check(
        out.kind == OutcomeKind::Succeeded,
        format!("result {}", out.kind.as_str()),
    );
    s.check(
        out.attempts.len() == 2,
        format!("{} attempts, not 2", out.attempts.len()),
    );
    s.check(
        out.attempts
            .first()
            .is_some_and(|a| a.class == Some(Class::Unjudged) && a.phase == "connect"),
        "the first attempt is not unjudged at connect",
    );
    s.check(
        repo::rev_parse(&local, "refs/remotes/origin/main")
            == repo::rev_parse(&scene.server, "refs/heads/main"),
        "origin/main is not the server's main",
    );

    Ok(s.verdict())
}

/// Step 2: a push whose report is lost, settled by reading.
fn lost_report(scene: &Scene<'_>) -> Demo<(bool, Work)> {
    // 2. A push whose report is lost: settled by reading.
    say(
        "2. Push, with the report cut after the pack reached the server. The request was\n   \
         complete but its answer never came back: the outcome is unknown, and a write\n   \
         is never sent again blind. The client reads the ref instead (ls-refs): it holds\n   \
         the new commit, so the push landed, with one push attempt.",
    );
    let work = scene.dir.join("work.git");
    repo::git(
        scene.dir,
        &[
            "clone",
            "-q",
            "--bare",
            &scene.server.display().to_string(),
            &work.display().to_string(),
        ],
    );
    let tip = repo::commit_on(&work, "main", "Demo: a change whose report is lost");
    let work_repo = gix::open(&work)?;
    let before = receive_packs(&scene.proxy);
    scene.proxy.set_fault(Fault::CutBeforeReport, 1);
    let update = RefUpdate::fast_forward(oid(&tip)?, "refs/heads/main");
    let out = scene.client.push(
        &scene.url,
        &[update],
        &PushOptions::default(),
        &work_repo,
        &scene.opts,
    )?;
    say(&indent(&human::summary(&out)));
    let mut s = Step::new();
    s.check(
        out.kind == OutcomeKind::Succeeded,
        format!("result {}", out.kind.as_str()),
    );
    s.check(
        out.attempts.len() == 1,
        format!("{} push attempts, not 1", out.attempts.len()),
    );
    s.check(
        out.attempts
            .first()
            .is_some_and(|a| a.class == Some(Class::Unknown)),
        "the attempt is not unknown",
    );
    s.check(
        out.reconciled
            .as_ref()
            .is_some_and(|r| r.verdict == Some(Verdict::Landed)),
        "not settled by reading as landed",
    );
    s.check(
        receive_packs(&scene.proxy) - before == 1,
        format!(
            "{} receive-pack connections, not 1",
            receive_packs(&scene.proxy) - before
        ),
    );
    s.check(
        repo::rev_parse(&scene.server, "refs/heads/main").as_deref() == Some(tip.as_str()),
        "the server's main is not the pushed commit",
    );

    Ok((
        s.verdict(),
        Work {
            path: work,
            repo: work_repo,
            tip,
        },
    ))
}

/// Step 3: a push leased on a value somebody else moved.
fn stale_lease(scene: &Scene<'_>, work: &Work) -> Demo<bool> {
    // 3. A stale lease is the remote's answer: not tried again.
    say(
        "3. Push leased on a stale value. Somebody else moves main on the server; we push\n   \
         a new commit leased on the value we last saw. The lease does not hold: that is an\n   \
         answer (`stale info`), never tried again, and the other commit stays.",
    );
    let theirs = repo::commit_on(&scene.server, "main", "Somebody else's change");
    let ours = repo::commit_on(&work.path, "main", "Demo: a change leased on a stale value");
    let before = receive_packs(&scene.proxy);
    let update = RefUpdate::leased(oid(&ours)?, "refs/heads/main", oid(&work.tip)?);
    let out = scene.client.push(
        &scene.url,
        &[update],
        &PushOptions::default(),
        &work.repo,
        &scene.opts,
    )?;
    if let Some(report) = &out.value {
        let specs = [sluice_git::PushSpec {
            force: false,
            src: Some("main".into()),
            dst: "refs/heads/main".into(),
        }];
        let lines = human::push_lines(
            &specs,
            report,
            &|id| id.to_hex_with_len(7).to_string(),
            &|_, _| true,
            &|src| format!("refs/heads/{src}"),
        );
        say(&indent(&human::push(
            &out.operation.remote,
            &lines,
            false,
            false,
        )));
    }
    say(&indent(&human::summary(&out)));
    let mut s = Step::new();
    s.check(
        out.kind == OutcomeKind::Answered,
        format!("result {}", out.kind.as_str()),
    );
    s.check(
        out.attempts.len() == 1,
        format!("{} attempts, not 1", out.attempts.len()),
    );
    s.check(
        out.value.as_ref().is_some_and(|r| {
            r.refs.first().is_some_and(|x| {
                x.status == RefStatus::Rejected
                    && x.reason == Some(sluice_git::RejectReason::StaleInfo)
            })
        }),
        "main was not rejected as stale info",
    );
    s.check(
        receive_packs(&scene.proxy) - before == 1,
        format!(
            "{} receive-pack connections, not 1",
            receive_packs(&scene.proxy) - before
        ),
    );
    s.check(
        repo::rev_parse(&scene.server, "refs/heads/main").as_deref() == Some(theirs.as_str()),
        "the other commit was overwritten",
    );

    Ok(s.verdict())
}

/// Step 4: a read of a dead remote under a 3 s deadline.
fn dead_remote(scene: &Scene<'_>) -> Demo<bool> {
    // 4. A dead remote: unknown, never a claim that it failed.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let dead_url = format!("git://127.0.0.1:{dead}/small.git");
    say(&format!(
        "4. ls-refs of a dead remote ({dead_url}: nobody listens) under a 3 s deadline.\n   \
         Every connection is refused, so every attempt is unjudged and tried again, the\n   \
         backoff growing, until the deadline leaves no room for another: the outcome is\n   \
         unknown — no answer within the bounds, not a claim that anything failed."
    ));
    let dead_opts = CallOptions::new().bounds(
        Bounds::new(Duration::from_secs(3), Duration::from_secs(1), 50).with_backoff(BACKOFF),
    );
    let out = scene.client.ls_refs(&dead_url, &[], &dead_opts)?;
    say(&indent(&human::summary(&out)));
    let mut s = Step::new();
    s.check(
        out.kind == OutcomeKind::Unknown,
        format!("result {}", out.kind.as_str()),
    );
    s.check(
        out.stopped == Some(Stopped::Deadline),
        format!("stopped {:?}", out.stopped),
    );
    s.check(
        out.attempts.len() >= 2,
        format!("only {} attempt(s)", out.attempts.len()),
    );
    s.check(
        out.attempts
            .iter()
            .all(|a| a.class == Some(Class::Unjudged)),
        "an attempt was not unjudged",
    );
    s.check(
        out.elapsed_ms <= 3_500,
        format!("took {} ms", out.elapsed_ms),
    );

    Ok(s.verdict())
}
