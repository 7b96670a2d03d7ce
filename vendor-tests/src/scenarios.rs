//! The scenario suite, the same for every [`Row`].
//!
//! Every scenario makes its own repository on the server's disk (with the
//! git CLI), talks to the server only through sluice, and checks the result
//! on the server's disk and with the git CLI (`git ls-remote`, `git fsck
//! --full`). Each operation runs with one attempt, so a retry can never
//! hide an incompatibility. A scenario ends in a [`Cell`]: pass, fail (with
//! what was wrong), or not supported (with the server's own words or a
//! reference to its source or documentation).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::ObjectId;
use sluice_git::{
    CallOptions, FetchedRef, Lease, PushOptions, PushReport, RefStatus, RefUpdate, RemoteRef,
};
use sluice_policy::{BackoffShape, Bounds, Outcome, OutcomeKind};
use sluice_testkit::repo::{self, RepoBuilder};

use crate::probe::{self, Listing, LsRemote};
use crate::servers::{Implementation, Row};

/// One cell of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// The scenario passed.
    Pass,
    /// It failed; what was wrong.
    Fail(String),
    /// The server does not support it; its words or a reference.
    NotSupported(String),
}

impl Cell {
    /// Whether it failed.
    pub fn is_fail(&self) -> bool {
        matches!(self, Cell::Fail(_))
    }
}

/// A column of the table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Its header.
    pub title: &'static str,
    /// What it checks (for the README).
    pub what: &'static str,
}

/// The columns, in order.
pub const COLUMNS: &[Column] = &[
    Column {
        title: "ls-refs",
        what: "all refs, peeled tags (`^{}`) and the symref `HEAD -> refs/heads/main` equal \
               `git ls-remote --symref` on the same URL and the server's disk; a prefix \
               (`refs/tags/`) lists only what it names; an empty repository lists no ref; the \
               server's `agent` is the one meant",
    },
    Column {
        title: "fetch",
        what: "fetch into an empty repository, then again after new commits, a new branch \
               and a new tag (a smaller pack), then once more with nothing new; refs equal \
               the server's; `git fsck --full` clean after each",
    },
    Column {
        title: "push create",
        what: "a new branch and an annotated tag pointing at it, in one push; the server has \
               both, `git fsck --full` clean",
    },
    Column {
        title: "push fast-forward",
        what: "two new commits on `main`; then a third that edits one line of a 13 KB file \
               the server has, sent as a delta against the server's copy (a thin pack: \
               under 2 KB on the wire), `git fsck --full` clean",
    },
    Column {
        title: "push delete",
        what: "delete `refs/heads/dev` (a push without a pack); ls-refs no longer lists it",
    },
    Column {
        title: "non-ff rejected",
        what: "a push that is not a fast-forward, without force, is rejected \
               (`non-fast-forward`, judged from the server's advertisement, no pack sent); \
               the server is unchanged",
    },
    Column {
        title: "stale lease rejected",
        what: "a lease on an old value and an `absent` lease on an existing ref are rejected \
               (`stale info`), the server unchanged; a lease on the current value lands a \
               non-fast-forward",
    },
    Column {
        title: "atomic two-ref push",
        what: "`atomic`: a fast-forward and a new branch land together; with one stale ref \
               neither changes",
    },
    Column {
        title: "1,000-commit push",
        what: "a 1,000-commit history into an empty repository; `rev-list --count` 1000, \
               `git fsck --full` clean",
    },
    Column {
        title: "server rejects non-ff",
        what: "a forced non-fast-forward to a repository with `receive.denyNonFastForwards`: \
               the server's own `ng` report is parsed, the ref is rejected in the server's \
               words, the server unchanged",
    },
    Column {
        title: "reads v2",
        what: "the server answered `version=2` with protocol v2 (git's packet trace) and the \
               ls-refs and fetch cells passed over it",
    },
    Column {
        title: "reads v0",
        what: "over a route where the server speaks v0 (see the route per row): ls-refs equal \
               to `git -c protocol.version=0 ls-remote --symref`, fetch into an empty \
               repository, `git fsck --full` clean",
    },
];

/// Shared inputs, made once.
#[derive(Debug)]
pub struct Shared {
    /// A bare repository with a 1,000-commit `main`.
    pub thousand: PathBuf,
}

/// A row's results.
#[derive(Debug)]
pub struct RowResult {
    /// The row's server and transport.
    pub server: String,
    /// Its transport as written in the table.
    pub transport: String,
    /// How its reads are made v0.
    pub v0_route: String,
    /// One cell per column.
    pub cells: Vec<Cell>,
    /// What the servers said (rejection reasons, advertisements), for the
    /// notes.
    pub notes: Vec<String>,
    /// Per scenario: how long it took.
    pub timings: Vec<(String, Duration)>,
    /// The server's log, when something failed.
    pub server_log: Option<String>,
}

struct Ctx<'a> {
    row: &'a Row,
    shared: &'a Shared,
    work: tempfile::TempDir,
    notes: Vec<String>,
    v2_probe: Option<LsRemote>,
}

/// Runs every scenario against `row`.
pub fn run(row: &Row, shared: &Shared) -> RowResult {
    let mut ctx = Ctx {
        row,
        shared,
        work: tempfile::Builder::new()
            .prefix("sluice-vendor-work-")
            .tempdir()
            .expect("a temporary directory"),
        notes: Vec::new(),
        v2_probe: None,
    };
    type Scenario = fn(&mut Ctx<'_>) -> Result<Cell, String>;
    let scenarios: [Scenario; 10] = [
        ls_refs,
        fetch,
        push_create,
        push_fast_forward,
        push_delete,
        non_ff_rejected,
        stale_lease_rejected,
        atomic_two_refs,
        thousand_commits,
        server_rejects_non_ff,
    ];
    let mut cells = Vec::new();
    let mut timings = Vec::new();
    for (i, s) in scenarios.iter().enumerate() {
        let t = Instant::now();
        cells.push(guarded(&mut ctx, *s));
        timings.push((COLUMNS[i].title.to_owned(), t.elapsed()));
    }
    let v2 = reads_v2(&mut ctx, &cells[0], &cells[1]);
    cells.push(v2);
    let t = Instant::now();
    cells.push(guarded(&mut ctx, reads_v0));
    timings.push(("reads v0".to_owned(), t.elapsed()));
    let failed = cells.iter().any(Cell::is_fail);
    RowResult {
        server: row.server.clone(),
        transport: row.transport.as_str().to_owned(),
        v0_route: row.v0_route.clone(),
        cells,
        notes: ctx.notes,
        timings,
        server_log: failed.then(|| row.server_log()),
    }
}

fn guarded(ctx: &mut Ctx<'_>, f: fn(&mut Ctx<'_>) -> Result<Cell, String>) -> Cell {
    match std::panic::catch_unwind(AssertUnwindSafe(|| f(ctx))) {
        Ok(Ok(cell)) => cell,
        Ok(Err(why)) => Cell::Fail(why),
        Err(panic) => Cell::Fail(format!(
            "panicked: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

// ---- helpers ----

impl Ctx<'_> {
    fn opts(&self) -> CallOptions {
        let opts = CallOptions::new().bounds(
            Bounds::new(Duration::from_secs(90), Duration::from_secs(60), 1)
                .with_backoff(BackoffShape::constant(Duration::from_millis(100)))
                .with_reconcile_reserve(Duration::from_secs(5)),
        );
        match &self.row.credentials {
            Some(c) => opts.credentials(c.clone()),
            None => opts,
        }
    }

    /// The standard repository at `rel` on the server: `main` (5 commits),
    /// `dev` (3 more, from main), annotated `v1.0` on main, lightweight
    /// `light` on dev, `HEAD -> main`.
    fn standard(&self, rel: &str) -> Result<PathBuf, String> {
        RepoBuilder::new()
            .branch("main", 5)
            .branch_from("dev", "main", 3)
            .annotated_tag("v1.0", "main", "release 1.0")
            .lightweight_tag("light", "dev")
            .head("main")
            .build(&self.row.path(rel))
            .map_err(|e| format!("building {rel}: {e}"))
    }

    /// A bare clone of the server's repository `srv`, to push from.
    fn local_clone(&self, srv: &Path) -> PathBuf {
        let name = srv
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to = self.work.path().join(format!("local-{name}"));
        repo::git(
            self.work.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &srv.display().to_string(),
                &to.display().to_string(),
            ],
        );
        to
    }

    fn push(
        &self,
        rel: &str,
        local: &Path,
        updates: &[RefUpdate],
        atomic: bool,
    ) -> Result<Outcome<PushReport>, String> {
        let repo = gix::open(local).map_err(|e| format!("opening {}: {e}", local.display()))?;
        self.row
            .client
            .push(
                &self.row.url(rel),
                updates,
                &PushOptions {
                    atomic,
                    ..PushOptions::default()
                },
                &repo,
                &self.opts(),
            )
            .map_err(|e| format!("push refused as input: {e}"))
    }

    fn ls_refs(&self, url: &str, prefixes: &[String], v0: bool) -> Result<Vec<RemoteRef>, String> {
        let client = if v0 {
            &self.row.v0_client
        } else {
            &self.row.client
        };
        let out = client
            .ls_refs(url, prefixes, &self.opts())
            .map_err(|e| format!("ls-refs refused as input: {e}"))?;
        succeeded(&out, "ls-refs")?;
        Ok(out.value.unwrap_or_default())
    }

    /// Fetches `specs` from `url` into `local`; the refs fetched and the
    /// number of objects in the pack received (0 when none).
    fn fetch(&self, url: &str, local: &Path, v0: bool) -> Result<(Vec<FetchedRef>, u64), String> {
        let repo = gix::open(local).map_err(|e| format!("opening {}: {e}", local.display()))?;
        let received = Arc::new(Mutex::new(0u64));
        let mut opts = self.opts();
        let r = Arc::clone(&received);
        opts = opts.progress(Arc::new(move |p: &sluice_git::Progress| {
            if p.stage == "received" {
                *r.lock().unwrap_or_else(|e| e.into_inner()) = p.objects;
            }
        }));
        let client = if v0 {
            &self.row.v0_client
        } else {
            &self.row.client
        };
        let specs = [
            "+refs/heads/*:refs/remotes/origin/*".to_owned(),
            "+refs/tags/*:refs/tags/*".to_owned(),
        ];
        let out = client
            .fetch(url, &specs, &repo, &opts)
            .map_err(|e| format!("fetch refused as input: {e}"))?;
        succeeded(&out, "fetch")?;
        let n = *received.lock().unwrap_or_else(|e| e.into_inner());
        Ok((out.value.unwrap_or_default(), n))
    }

    fn note(&mut self, text: String) {
        if !self.notes.contains(&text) {
            self.notes.push(text);
        }
    }
}

fn describe<T>(out: &Outcome<T>) -> String {
    let attempts: Vec<String> = out
        .attempts
        .iter()
        .map(|a| {
            format!(
                "#{} {} {:?} {}",
                a.n,
                a.phase,
                a.class,
                a.cause.as_deref().unwrap_or("")
            )
        })
        .collect();
    format!(
        "{:?}: {} [attempts: {}]",
        out.kind,
        out.error
            .as_ref()
            .map(|e| e.cause.as_str())
            .unwrap_or("no error"),
        attempts.join("; ")
    )
}

fn succeeded<T>(out: &Outcome<T>, what: &str) -> Result<(), String> {
    if out.kind != OutcomeKind::Succeeded {
        return Err(format!("{what}: {}", describe(out)));
    }
    if out.attempts.len() != 1 {
        return Err(format!(
            "{what} succeeded only after {} attempts: {}",
            out.attempts.len(),
            describe(out)
        ));
    }
    Ok(())
}

fn oid(hex: &str) -> ObjectId {
    ObjectId::from_hex(hex.as_bytes()).expect("an object id from git")
}

fn rev(repo: &Path, r: &str) -> Result<String, String> {
    repo::rev_parse(repo, r).ok_or_else(|| format!("{r} does not resolve in {}", repo.display()))
}

fn update(src: Option<&str>, dst: &str) -> RefUpdate {
    match src {
        Some(s) => RefUpdate::fast_forward(oid(s), dst),
        // git's `push :dst`: deletes whatever the remote holds.
        None => RefUpdate::force(None, dst),
    }
}

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn fsck(repo: &Path, whose: &str) -> Result<(), String> {
    repo::fsck(repo).map_err(|e| format!("git fsck --full on the {whose}: {e}"))
}

/// The report's only result, checked to be ok.
fn all_ok(out: &Outcome<PushReport>, what: &str) -> Result<(), String> {
    succeeded(out, what)?;
    let report = out.value.as_ref().ok_or("a success without a report")?;
    for r in &report.refs {
        ensure(r.status == RefStatus::Ok, || {
            format!("{what}: {} {:?} {:?}", r.name, r.status, r.reason)
        })?;
    }
    Ok(())
}

/// The push was answered with `dst` rejected; returns the reason.
fn rejected(out: &Outcome<PushReport>, dst: &str, what: &str) -> Result<String, String> {
    ensure(out.kind == OutcomeKind::Answered, || {
        format!(
            "{what}: expected an answered rejection, got {}",
            describe(out)
        )
    })?;
    ensure(out.attempts.len() == 1, || {
        format!("{what}: {} attempts", out.attempts.len())
    })?;
    let report = out
        .value
        .as_ref()
        .ok_or_else(|| format!("{what}: no per-ref results: {}", describe(out)))?;
    let r = report
        .refs
        .iter()
        .find(|r| r.name == dst)
        .ok_or_else(|| format!("{what}: no result for {dst}"))?;
    ensure(r.status == RefStatus::Rejected, || {
        format!("{what}: {dst} was not rejected: {r:?}")
    })?;
    // The remote's words when it gave them, else the typed reason as git says it.
    Ok(r.message
        .clone()
        .unwrap_or_else(|| r.reason.map_or("rejected", |x| x.git_words()).to_string()))
}

fn unchanged(srv: &Path, r: &str, before: Option<&str>, what: &str) -> Result<(), String> {
    let now = repo::rev_parse(srv, r);
    ensure(now.as_deref() == before, || {
        format!("{what}: the server's {r} moved from {before:?} to {now:?}")
    })
}

/// Fetched refs equal the server's: `refs/heads/X` as
/// `refs/remotes/origin/X`, tags as tags.
fn same_refs(srv: &Path, local: &Path) -> Result<(), String> {
    let theirs = repo::refs(srv);
    let mine = repo::refs(local);
    let mut wrong = Vec::new();
    for (name, oid) in &theirs {
        let local_name = match name.strip_prefix("refs/heads/") {
            Some(b) => format!("refs/remotes/origin/{b}"),
            None => name.clone(),
        };
        if mine.get(&local_name) != Some(oid) {
            wrong.push(format!(
                "{name} is {oid} on the server, {local_name} is {:?} here",
                mine.get(&local_name)
            ));
        }
    }
    ensure(wrong.is_empty(), || wrong.join("; "))
}

// ---- scenarios ----

fn check_listing(
    ctx: &Ctx<'_>,
    srv: &Path,
    mine: &Listing,
    cli: &LsRemote,
    against: &str,
) -> Result<(), String> {
    let diff = mine.diff(&cli.listing, "sluice", against);
    ensure(diff.is_empty(), || {
        format!("ls-refs differs from {against}: {}", diff.join("; "))
    })?;
    ensure(
        mine.symrefs.get("HEAD").map(String::as_str) == Some("refs/heads/main"),
        || format!("no symref HEAD -> refs/heads/main: {:?}", mine.symrefs),
    )?;
    let peeled = rev(srv, "refs/tags/v1.0^{commit}")?;
    ensure(mine.refs.get("refs/tags/v1.0^{}") == Some(&peeled), || {
        format!("v1.0 is not peeled to {peeled}: {:?}", mine.refs)
    })?;
    for (name, oid) in repo::refs(srv) {
        ensure(mine.refs.get(&name) == Some(&oid), || {
            format!(
                "{name} is {oid} on the server's disk, {:?} in ls-refs",
                mine.refs.get(&name)
            )
        })?;
    }
    if let (Some(expect), Some(got)) = (&ctx.row.agent, cli.agent()) {
        ensure(got.starts_with(expect.as_str()), || {
            format!("the server's agent is {got}, not {expect}: the wrong installation answered")
        })?;
    } else if ctx.row.implementation == Implementation::Git {
        return Err(format!("git sent no agent: {:?}", cli.received));
    }
    Ok(())
}

fn ls_refs(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("ls.git")?;
    let url = ctx.row.url("ls.git");
    let refs = ctx.ls_refs(&url, &[], false)?;
    let mine = Listing::of(&refs);
    let cli = probe::ls_remote(ctx.work.path(), &url, false)?;
    check_listing(ctx, &srv, &mine, &cli, "git ls-remote")?;
    let tags = ctx.ls_refs(&url, &["refs/tags/".to_owned()], false)?;
    let names: Vec<&str> = tags.iter().map(|r| r.name.as_str()).collect();
    ensure(names == ["refs/tags/light", "refs/tags/v1.0"], || {
        format!("prefix refs/tags/ listed {names:?}")
    })?;
    ctx.v2_probe = Some(cli);
    // An empty repository: nothing but (at most) an unborn HEAD.
    repo::init_bare(&ctx.row.path("empty.git")).map_err(|e| format!("init: {e}"))?;
    let url = ctx.row.url("empty.git");
    let empty = ctx.ls_refs(&url, &[], false)?;
    let born: Vec<&RemoteRef> = empty.iter().filter(|r| r.oid.is_some()).collect();
    ensure(born.is_empty(), || {
        format!("ls-refs of an empty repository listed {born:?}")
    })?;
    let cli = probe::ls_remote(ctx.work.path(), &url, false)?;
    ensure(cli.listing.refs.is_empty(), || {
        format!(
            "git ls-remote of an empty repository listed {:?}",
            cli.listing
        )
    })?;
    Ok(Cell::Pass)
}

fn fetch(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = RepoBuilder::new()
        .branch("main", 20)
        .branch_from("dev", "main", 5)
        .annotated_tag("v1.0", "main", "release 1.0")
        .lightweight_tag("light", "dev")
        .build(&ctx.row.path("fetch.git"))
        .map_err(|e| format!("building fetch.git: {e}"))?;
    let url = ctx.row.url("fetch.git");
    let local =
        repo::init_bare(&ctx.work.path().join("fetched.git")).map_err(|e| format!("init: {e}"))?;
    let (got, first) = ctx.fetch(&url, &local, false)?;
    same_refs(&srv, &local)?;
    fsck(&local, "fetched repository")?;
    ensure(first > 0, || "the first fetch received no pack".into())?;
    ensure(
        got.iter().any(|f| {
            f.remote_ref == "refs/heads/main"
                && f.local_ref.as_deref() == Some("refs/remotes/origin/main")
        }),
        || format!("main was not mapped: {got:?}"),
    )?;
    // Incrementally: new commits, a new branch, a new annotated tag.
    for i in 0..3 {
        repo::commit_on(&srv, "main", &format!("more {i}"));
    }
    repo::commit_on(&srv, "topic", "topic work");
    repo::git(&srv, &["tag", "-a", "v1.1", "-m", "release 1.1", "main"]);
    let (got, second) = ctx.fetch(&url, &local, false)?;
    same_refs(&srv, &local)?;
    fsck(&local, "fetched repository")?;
    ensure(second > 0 && second < first, || {
        format!("the incremental fetch received {second} objects (the first {first})")
    })?;
    ensure(
        got.iter().any(|f| f.remote_ref == "refs/heads/topic"),
        || format!("topic was not fetched: {got:?}"),
    )?;
    let (_, third) = ctx.fetch(&url, &local, false)?;
    ensure(third == 0, || {
        format!("a fetch with nothing new received {third} objects")
    })?;
    same_refs(&srv, &local)?;
    Ok(Cell::Pass)
}

fn push_create(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("create.git")?;
    let local = ctx.local_clone(&srv);
    let tip = repo::commit_on(&local, "feature", "new work");
    repo::git(&local, &["tag", "-a", "v2.0", "-m", "release 2.0", &tip]);
    let tag = rev(&local, "refs/tags/v2.0")?;
    let out = ctx.push(
        "create.git",
        &local,
        &[
            update(Some(&tip), "refs/heads/feature"),
            update(Some(&tag), "refs/tags/v2.0"),
        ],
        false,
    )?;
    all_ok(&out, "push create")?;
    unchanged(&srv, "refs/heads/feature", Some(&tip), "push create")?;
    unchanged(&srv, "refs/tags/v2.0", Some(&tag), "push create")?;
    fsck(&srv, "server")?;
    Ok(Cell::Pass)
}

fn push_fast_forward(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("ff.git")?;
    let local = ctx.local_clone(&srv);
    repo::commit_on(&local, "main", "next 1");
    let tip = repo::commit_on(&local, "main", "next 2");
    let out = ctx.push(
        "ff.git",
        &local,
        &[update(Some(&tip), "refs/heads/main")],
        false,
    )?;
    all_ok(&out, "push fast-forward")?;
    unchanged(&srv, "refs/heads/main", Some(&tip), "push fast-forward")?;
    fsck(&srv, "server")?;
    // A file the server then has, and one line of it changed: the second
    // push carries the new version as a delta against the server's.
    let mut lines: Vec<String> = (0..200u64)
        .map(|i| format!("{:064x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    let text = |lines: &[String]| lines.join("\n").into_bytes();
    let tip = repo::commit_file(&local, "main", "data/big.txt", &text(&lines));
    let out = ctx.push(
        "ff.git",
        &local,
        &[update(Some(&tip), "refs/heads/main")],
        false,
    )?;
    all_ok(&out, "push fast-forward (a new file)")?;
    lines[100] = "one line changed".into();
    let tip = repo::commit_file(&local, "main", "data/big.txt", &text(&lines));
    let out = ctx.push(
        "ff.git",
        &local,
        &[update(Some(&tip), "refs/heads/main")],
        false,
    )?;
    all_ok(&out, "push fast-forward (a one-line edit)")?;
    unchanged(&srv, "refs/heads/main", Some(&tip), "push fast-forward")?;
    fsck(&srv, "server")?;
    let sent = out
        .value
        .as_ref()
        .and_then(|r| r.pack.as_ref())
        .map(|p| p.bytes);
    ensure(sent.is_some_and(|b| b < 2_000), || {
        format!("the one-line edit of a 13 KB file sent {sent:?} bytes: not a delta")
    })?;
    Ok(Cell::Pass)
}

fn push_delete(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("delete.git")?;
    let local = ctx.local_clone(&srv);
    let out = ctx.push(
        "delete.git",
        &local,
        &[update(None, "refs/heads/dev")],
        false,
    )?;
    all_ok(&out, "push delete")?;
    unchanged(&srv, "refs/heads/dev", None, "push delete")?;
    let after = ctx.ls_refs(&ctx.row.url("delete.git"), &[], false)?;
    ensure(!after.iter().any(|r| r.name == "refs/heads/dev"), || {
        "ls-refs still lists refs/heads/dev".into()
    })?;
    fsck(&srv, "server")?;
    Ok(Cell::Pass)
}

/// A commit on `local` whose parent is `main~1`: not a fast-forward of
/// main.
fn diverging(local: &Path) -> Result<String, String> {
    let parent = rev(local, "refs/heads/main~1")?;
    repo::git(local, &["update-ref", "refs/heads/side", &parent]);
    Ok(repo::commit_on(local, "side", "diverge"))
}

fn non_ff_rejected(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("nonff.git")?;
    let local = ctx.local_clone(&srv);
    let before = rev(&srv, "refs/heads/main")?;
    let side = diverging(&local)?;
    let out = ctx.push(
        "nonff.git",
        &local,
        &[update(Some(&side), "refs/heads/main")],
        false,
    )?;
    let reason = rejected(&out, "refs/heads/main", "non-fast-forward push")?;
    ensure(reason.contains("non-fast-forward"), || {
        format!("rejected as {reason:?}, not non-fast-forward")
    })?;
    ensure(out.value.as_ref().is_some_and(|r| r.pack.is_none()), || {
        "a pack was sent for a push rejected locally".into()
    })?;
    unchanged(
        &srv,
        "refs/heads/main",
        Some(&before),
        "non-fast-forward push",
    )?;
    Ok(Cell::Pass)
}

fn stale_lease_rejected(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("lease.git")?;
    let local = ctx.local_clone(&srv);
    let main = rev(&srv, "refs/heads/main")?;
    let dev = rev(&srv, "refs/heads/dev")?;
    let old = rev(&srv, "refs/heads/main~1")?;
    let next = repo::commit_on(&local, "main", "next");
    let u = update(Some(&next), "refs/heads/main").with_lease(Lease::Oid(oid(&old)));
    let out = ctx.push("lease.git", &local, &[u], false)?;
    let reason = rejected(&out, "refs/heads/main", "stale lease")?;
    ensure(reason.contains("stale"), || {
        format!("stale lease rejected as {reason:?}")
    })?;
    unchanged(&srv, "refs/heads/main", Some(&main), "stale lease")?;
    let u = update(Some(&next), "refs/heads/dev").with_lease(Lease::Absent);
    let out = ctx.push("lease.git", &local, &[u], false)?;
    rejected(&out, "refs/heads/dev", "absent lease on an existing ref")?;
    unchanged(&srv, "refs/heads/dev", Some(&dev), "absent lease")?;
    // The current value as the lease: a non-fast-forward lands.
    let side = diverging(&local)?;
    let u = update(Some(&side), "refs/heads/main").with_lease(Lease::Oid(oid(&main)));
    let out = ctx.push("lease.git", &local, &[u], false)?;
    all_ok(&out, "a lease on the current value")?;
    unchanged(
        &srv,
        "refs/heads/main",
        Some(&side),
        "a lease on the current value",
    )?;
    fsck(&srv, "server")?;
    Ok(Cell::Pass)
}

fn atomic_two_refs(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("atomic.git")?;
    let local = ctx.local_clone(&srv);
    let main = rev(&srv, "refs/heads/main")?;
    let a = repo::commit_on(&local, "main", "atomic a");
    let b = repo::commit_on(&local, "atomic-new", "atomic b");
    let updates = [
        update(Some(&a), "refs/heads/main"),
        update(Some(&b), "refs/heads/atomic-new"),
    ];
    let out = ctx.push("atomic.git", &local, &updates, true)?;
    if out.kind != OutcomeKind::Succeeded {
        let cause = out
            .error
            .as_ref()
            .map(|e| e.cause.clone())
            .unwrap_or_default();
        unchanged(&srv, "refs/heads/main", Some(&main), "atomic push")?;
        unchanged(&srv, "refs/heads/atomic-new", None, "atomic push")?;
        if cause.contains("atomic") {
            if let Some(addr) = ctx.row.daemon {
                let caps = probe::receive_pack_capabilities(addr, "/atomic.git")?;
                if !caps.split_whitespace().any(|c| c == "atomic") {
                    return Ok(Cell::NotSupported(format!(
                        "its receive-pack advertises no `atomic`: `{caps}` \
                         (sluice: \"{cause}\", nothing sent)"
                    )));
                }
            }
        }
        return Err(format!("atomic push: {}", describe(&out)));
    }
    all_ok(&out, "atomic push")?;
    unchanged(&srv, "refs/heads/main", Some(&a), "atomic push")?;
    unchanged(&srv, "refs/heads/atomic-new", Some(&b), "atomic push")?;
    // One stale ref: neither changes.
    let c = repo::commit_on(&local, "main", "atomic c");
    let d = repo::commit_on(&local, "atomic-new", "atomic d");
    let stale = update(Some(&d), "refs/heads/atomic-new").with_lease(Lease::Oid(oid(&main)));
    let out = ctx.push(
        "atomic.git",
        &local,
        &[update(Some(&c), "refs/heads/main"), stale],
        true,
    )?;
    ensure(out.kind == OutcomeKind::Answered, || {
        format!("atomic push with a stale ref: {}", describe(&out))
    })?;
    unchanged(
        &srv,
        "refs/heads/main",
        Some(&a),
        "atomic push with a stale ref",
    )?;
    unchanged(
        &srv,
        "refs/heads/atomic-new",
        Some(&b),
        "atomic push with a stale ref",
    )?;
    fsck(&srv, "server")?;
    Ok(Cell::Pass)
}

fn thousand_commits(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = repo::init_bare(&ctx.row.path("thousand.git")).map_err(|e| format!("init: {e}"))?;
    let tip = rev(&ctx.shared.thousand, "refs/heads/main")?;
    let t = Instant::now();
    let out = ctx.push(
        "thousand.git",
        &ctx.shared.thousand,
        &[update(Some(&tip), "refs/heads/main")],
        false,
    )?;
    let took = t.elapsed();
    all_ok(&out, "1,000-commit push")?;
    unchanged(&srv, "refs/heads/main", Some(&tip), "1,000-commit push")?;
    let count = repo::git(&srv, &["rev-list", "--count", "refs/heads/main"]);
    ensure(count == "1000", || {
        format!("the server has {count} commits")
    })?;
    fsck(&srv, "server")?;
    if let Some(p) = out.value.as_ref().and_then(|r| r.pack.as_ref()) {
        let server = ctx.row.server.clone();
        ctx.note(format!(
            "{server}: the 1,000-commit push sent {} objects, {} bytes, in {} ms",
            p.objects,
            p.bytes,
            took.as_millis()
        ));
    }
    Ok(Cell::Pass)
}

fn server_rejects_non_ff(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("deny.git")?;
    repo::set_config(&srv, "receive.denyNonFastForwards", "true");
    let local = ctx.local_clone(&srv);
    let before = rev(&srv, "refs/heads/main")?;
    let side = diverging(&local)?;
    let u = RefUpdate::force(Some(oid(&side)), "refs/heads/main");
    let out = ctx.push("deny.git", &local, &[u], false)?;
    if out.kind == OutcomeKind::Succeeded
        && ctx.row.implementation == Implementation::Dulwich
        && repo::rev_parse(&srv, "refs/heads/main").as_deref() == Some(side.as_str())
    {
        return Ok(Cell::NotSupported(
            "dulwich accepted the forced non-fast-forward: its receive-pack has no \
             `receive.denyNonFastForwards` (`ReceivePackHandler._apply_pack` in \
             `dulwich/server.py` updates each ref with `set_if_equals` and checks no \
             ancestry)"
                .into(),
        ));
    }
    let reason = rejected(&out, "refs/heads/main", "forced non-fast-forward")?;
    ensure(!reason.is_empty(), || "rejected without a reason".into())?;
    ensure(
        out.value.as_ref().is_some_and(|r| r.pack.is_some())
            || out.attempts.last().is_some_and(|a| a.phase == "reported"),
        || "the rejection did not come from the server's report".into(),
    )?;
    unchanged(
        &srv,
        "refs/heads/main",
        Some(&before),
        "forced non-fast-forward",
    )?;
    let server = ctx.row.server.clone();
    ctx.note(format!(
        "{server}: rejected the forced non-fast-forward as \"{reason}\""
    ));
    Ok(Cell::Pass)
}

fn reads_v2(ctx: &mut Ctx<'_>, ls: &Cell, fetch: &Cell) -> Cell {
    let probe = match ctx.v2_probe.take() {
        Some(p) => p,
        None => match probe::ls_remote(ctx.work.path(), &ctx.row.url("ls.git"), false) {
            Ok(p) => p,
            Err(e) => return Cell::Fail(format!("probing the protocol: {e}")),
        },
    };
    if !probe.spoke_v2() {
        return Cell::NotSupported(format!(
            "asked for `version=2`, it answered with a v0 advertisement: `{}`",
            probe.first_line()
        ));
    }
    if ls.is_fail() || fetch.is_fail() {
        return Cell::Fail("the server speaks v2, and the ls-refs or fetch cell failed".into());
    }
    Cell::Pass
}

fn reads_v0(ctx: &mut Ctx<'_>) -> Result<Cell, String> {
    let srv = ctx.standard("v0/reads.git")?;
    let url = ctx.row.v0_url("v0/reads.git");
    if ctx.row.v0_probe {
        let p = probe::ls_remote(ctx.work.path(), &url, false)?;
        ensure(!p.spoke_v2(), || {
            format!(
                "the v0 route answered a v2 request with v2: {:?}",
                p.received
            )
        })?;
    }
    let refs = ctx.ls_refs(&url, &[], true)?;
    let mine = Listing::of(&refs);
    let cli = probe::ls_remote(ctx.work.path(), &url, true)?;
    check_listing(
        ctx,
        &srv,
        &mine,
        &cli,
        "git -c protocol.version=0 ls-remote",
    )?;
    let local = repo::init_bare(&ctx.work.path().join("fetched-v0.git"))
        .map_err(|e| format!("init: {e}"))?;
    let (_, n) = ctx.fetch(&url, &local, true)?;
    ensure(n > 0, || "the v0 fetch received no pack".into())?;
    same_refs(&srv, &local)?;
    fsck(&local, "fetched repository")?;
    Ok(Cell::Pass)
}
