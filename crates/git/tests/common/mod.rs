//! Shared helpers for the git crate's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sluice_git::{CallOptions, GitClient, PushOptions, PushReport, RefUpdate};
use sluice_policy::{BackoffShape, Bounds, Outcome, Policy};
use sluice_testkit::{GitDaemon, HttpBackend, RepoBuilder};

/// A temp dir with a daemon serving it and a small repository `small.git`.
pub struct World {
    pub dir: tempfile::TempDir,
    pub daemon: GitDaemon,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("srv")).expect("srv dir");
        let daemon = GitDaemon::start(&dir.path().join("srv")).expect("git daemon starts");
        World { dir, daemon }
    }

    pub fn srv(&self, name: &str) -> PathBuf {
        self.dir.path().join("srv").join(name)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A bare repo with main (5 commits), dev (3 from main), tags.
    pub fn small(&self, name: &str) -> PathBuf {
        RepoBuilder::new()
            .branch("main", 5)
            .branch_from("dev", "main", 3)
            .annotated_tag("v1.0", "main", "release 1.0")
            .lightweight_tag("light", "dev")
            .head("main")
            .build(&self.srv(name))
            .expect("fixture builds")
    }
}

pub fn client() -> GitClient {
    GitClient::new(Arc::new(Policy::default()))
}

pub fn quick(deadline_ms: u64, attempt_ms: u64, attempts: u32) -> CallOptions {
    CallOptions::new().bounds(
        Bounds::new(
            Duration::from_millis(deadline_ms),
            Duration::from_millis(attempt_ms),
            attempts,
        )
        .with_backoff(BackoffShape::constant(Duration::from_millis(50)))
        .with_reconcile_reserve(Duration::from_millis(500)),
    )
}

pub fn empty_repo(path: &Path) -> gix::Repository {
    sluice_testkit::repo::init_bare(path).expect("init");
    gix::open(path).expect("open")
}

/// A local clone (bare) of a served repository, to push from.
pub fn local_clone(from: &Path, to: &Path) -> PathBuf {
    sluice_testkit::repo::git(
        from.parent().expect("parent"),
        &[
            "clone",
            "-q",
            "--bare",
            &from.display().to_string(),
            &to.display().to_string(),
        ],
    );
    to.to_path_buf()
}

pub fn open(path: &Path) -> gix::Repository {
    gix::open(path).expect("open")
}

/// One update pushed from the repository at `local` with the default push
/// options: `client().push(url, &[update], &PushOptions::default(), …)`,
/// its input valid.
pub fn push(url: &str, update: RefUpdate, local: &Path, opts: &CallOptions) -> Outcome<PushReport> {
    push_by(&client(), url, update, local, opts)
}

/// [`push`] through a client of the test's own (one trusting the test's
/// CA, going through a proxy, or with a policy of its own; one shared by
/// several pushes).
pub fn push_by(
    c: &GitClient,
    url: &str,
    update: RefUpdate,
    local: &Path,
    opts: &CallOptions,
) -> Outcome<PushReport> {
    c.push(url, &[update], &PushOptions::default(), &open(local), opts)
        .expect("valid input")
}

/// [`push`] of several updates, with `options`.
pub fn push_with(
    url: &str,
    updates: &[RefUpdate],
    options: &PushOptions,
    local: &Path,
    opts: &CallOptions,
) -> Outcome<PushReport> {
    client()
        .push(url, updates, options, &open(local), opts)
        .expect("valid input")
}

/// How a test reaches the repositories under `srv/`: the [`World`]'s
/// `git daemon`, or git's http-backend behind lighttpd started for the
/// test.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    Daemon,
    Http,
}

/// A served repository's URL over one [`Transport`], and the server that
/// answers it (kept while the URL is used).
pub struct Served {
    pub url: String,
    _http: Option<HttpBackend>,
}

impl Transport {
    /// Both, for a case written once.
    pub const ALL: [Transport; 2] = [Transport::Daemon, Transport::Http];

    /// Serves `w.srv(name)` (anonymous pushes allowed over http).
    pub fn serve(self, w: &World, name: &str) -> Served {
        match self {
            Transport::Daemon => Served {
                url: w.daemon.url(name),
                _http: None,
            },
            Transport::Http => {
                HttpBackend::enable_anonymous_push(&w.srv(name)).expect("config");
                let http = HttpBackend::start(&w.dir.path().join("srv")).expect("http-backend");
                Served {
                    url: http.url(name),
                    _http: Some(http),
                }
            }
        }
    }
}

pub fn oid(hex: &str) -> gix::ObjectId {
    gix::ObjectId::from_hex(hex.as_bytes()).expect("hex")
}

pub fn update(src: Option<&str>, dst: &str) -> sluice_git::RefUpdate {
    match src {
        Some(s) => sluice_git::RefUpdate::fast_forward(oid(s), dst),
        // git's `push :dst`: deletes whatever the remote holds.
        None => sluice_git::RefUpdate::force(None, dst),
    }
}

/// A commit on `branch` (of bare `repo`) adding one incompressible file of
/// `size` bytes: a pack too large to sit in socket buffers, so a cut in the
/// middle of it reaches the writer.
pub fn big_commit(repo: &Path, branch: &str, size: usize, seed: u64) -> String {
    use sluice_testkit::repo::{git, try_git_with_input};
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(size);
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    let blob = try_git_with_input(repo, &["hash-object", "-w", "--stdin"], &data).expect("blob");
    let parent = sluice_testkit::repo::rev_parse(repo, &format!("refs/heads/{branch}"));
    let base_tree = parent
        .as_ref()
        .map(|p| git(repo, &["rev-parse", &format!("{p}^{{tree}}")]));
    let mut entries = match &base_tree {
        Some(t) => git(repo, &["ls-tree", t]),
        None => String::new(),
    };
    entries.push_str(&format!("\n100644 blob {}\tbig-{seed}.bin\n", blob.trim()));
    let entries: String = entries
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let tree = try_git_with_input(repo, &["mktree"], entries.as_bytes()).expect("tree");
    let mut args = vec!["commit-tree", tree.trim(), "-m", "big"];
    let p;
    if let Some(parent) = &parent {
        p = parent.clone();
        args.extend(["-p", p.as_str()]);
    }
    let commit = git(repo, &args);
    git(
        repo,
        &["update-ref", &format!("refs/heads/{branch}"), commit.trim()],
    );
    commit.trim().to_string()
}
