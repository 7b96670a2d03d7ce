//! Deterministic repositories and git CLI helpers for setting up scenarios
//! and checking the server side.
//!
//! Every git run here goes through [`git_command`]: fixed author and
//! committer (names, emails, dates), no system or global configuration, no
//! terminal prompts — so the same steps give the same object ids on every
//! machine. Repositories are built with `git fast-import`
//! ([`RepoBuilder`]), which makes thousands of commits in well under a second.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The fixed author and committer name.
pub const AUTHOR_NAME: &str = "Sluice Test";
/// The fixed author and committer email.
pub const AUTHOR_EMAIL: &str = "sluice-test@example.invalid";
/// The fixed date (raw format) of commits made by [`commit_on`] and
/// [`git_command`]; [`RepoBuilder`] counts up from it.
pub const FIXED_DATE: &str = "1700000000 +0000";
/// The fixed date as seconds since the epoch.
pub const FIXED_EPOCH: u64 = 1_700_000_000;

/// The all-zero object id (SHA-1).
pub const ZERO_OID: &str = "0000000000000000000000000000000000000000";

/// A `git -C <dir>` command with the deterministic environment applied.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir);
    deterministic_env(&mut cmd);
    cmd
}

/// Applies the deterministic environment to any git command: fixed identity
/// and dates, no system/global config, no prompts, `main` as the initial
/// branch.
pub fn deterministic_env(cmd: &mut Command) {
    cmd.env("GIT_AUTHOR_NAME", AUTHOR_NAME)
        .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
        .env("GIT_AUTHOR_DATE", FIXED_DATE)
        .env("GIT_COMMITTER_NAME", AUTHOR_NAME)
        .env("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL)
        .env("GIT_COMMITTER_DATE", FIXED_DATE)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "init.defaultBranch")
        .env("GIT_CONFIG_VALUE_0", "main")
        .env("GIT_CONFIG_KEY_1", "advice.detachedHead")
        .env("GIT_CONFIG_VALUE_1", "false")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS");
}

/// A git run that failed (or could not start).
#[derive(Debug, Clone)]
pub struct GitCommandError {
    /// The arguments after `git -C <dir>`.
    pub args: Vec<String>,
    /// The exit code, `None` when killed by a signal or not started.
    pub code: Option<i32>,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr (or why it could not start).
    pub stderr: String,
}

impl fmt::Display for GitCommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "git {} failed ({}): {}",
            self.args.join(" "),
            self.code
                .map_or("signal".to_owned(), |c| format!("exit {c}")),
            self.stderr.trim_end()
        )
    }
}

impl std::error::Error for GitCommandError {}

impl From<GitCommandError> for io::Error {
    fn from(e: GitCommandError) -> io::Error {
        io::Error::other(e.to_string())
    }
}

fn run(mut cmd: Command, args: &[&str], input: Option<&[u8]>) -> Result<Output, GitCommandError> {
    cmd.args(args);
    let fail = |stderr: String| GitCommandError {
        args: args.iter().map(|s| s.to_string()).collect(),
        code: None,
        stdout: String::new(),
        stderr,
    };
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot run git: {e}")))?;
    let writer = match (input, child.stdin.take()) {
        (Some(input), Some(mut stdin)) => {
            let input = input.to_vec();
            Some(std::thread::spawn(move || stdin.write_all(&input)))
        }
        _ => None,
    };
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("waiting for git: {e}")))?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    if out.status.success() {
        Ok(out)
    } else {
        Err(GitCommandError {
            args: args.iter().map(|s| s.to_string()).collect(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Runs `git -C dir args...`; stdout (untrimmed) or the failure with stderr.
pub fn try_git(dir: &Path, args: &[&str]) -> Result<String, GitCommandError> {
    run(git_command(dir), args, None).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Runs `git -C dir args...` with `input` on stdin.
pub fn try_git_with_input(
    dir: &Path,
    args: &[&str],
    input: &[u8],
) -> Result<String, GitCommandError> {
    run(git_command(dir), args, Some(input))
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Runs `git -C dir args...` and returns its full output whatever the exit
/// status (for checking how the git client itself failed).
pub fn git_output(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = git_command(dir);
    cmd.args(args).stdin(Stdio::null());
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run git {}: {e}", args.join(" ")))
}

/// Runs `git -C dir args...`, returns stdout with surrounding whitespace
/// trimmed.
///
/// # Panics
/// When git fails; the message carries its stderr.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    match try_git(dir, args) {
        Ok(s) => s.trim().to_owned(),
        Err(e) => panic!("{e}"),
    }
}

/// Creates a bare repository at `path` (parents included) with `HEAD ->
/// refs/heads/main` and `core.logAllRefUpdates=true`, so the server side
/// keeps reflogs. Non-fast-forward pushes and deletions are accepted (git's
/// defaults for a bare repository).
pub fn init_bare(path: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(path)?;
    try_git(path, &["init", "--bare", "-q", "--initial-branch=main"])?;
    try_git(path, &["config", "core.logAllRefUpdates", "true"])?;
    Ok(path.to_owned())
}

/// Creates a non-bare repository at `path` (`main` as initial branch,
/// reflogs on).
pub fn init_work(path: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(path)?;
    try_git(path, &["init", "-q", "--initial-branch=main"])?;
    try_git(path, &["config", "core.logAllRefUpdates", "true"])?;
    Ok(path.to_owned())
}

/// A bare repository on disk; a thin handle over a path with the helpers of
/// this module as methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareRepo {
    path: PathBuf,
}

impl BareRepo {
    /// [`init_bare`] at `path`.
    pub fn create(path: &Path) -> io::Result<BareRepo> {
        init_bare(path).map(|path| BareRepo { path })
    }

    /// A handle on an existing repository.
    pub fn open(path: &Path) -> BareRepo {
        BareRepo {
            path: path.to_owned(),
        }
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`rev_parse`].
    pub fn rev_parse(&self, rev: &str) -> Option<String> {
        rev_parse(&self.path, rev)
    }

    /// [`refs`].
    pub fn refs(&self) -> BTreeMap<String, String> {
        refs(&self.path)
    }

    /// [`reflog`].
    pub fn reflog(&self, refname: &str) -> Vec<String> {
        reflog(&self.path, refname)
    }

    /// [`fsck`].
    pub fn fsck(&self) -> Result<(), String> {
        fsck(&self.path)
    }

    /// [`set_config`].
    pub fn set_config(&self, key: &str, value: &str) {
        set_config(&self.path, key, value)
    }

    /// [`install_hook`].
    pub fn install_hook(&self, name: &str, script: &str) -> io::Result<PathBuf> {
        install_hook(&self.path, name, script)
    }

    /// [`commit_on`].
    pub fn commit_on(&self, branch: &str, message: &str) -> String {
        commit_on(&self.path, branch, message)
    }
}

/// The object id `rev` names in `repo` (`git rev-parse --verify -q`), `None`
/// when it names nothing. A tag name gives the tag object, not the commit.
pub fn rev_parse(repo: &Path, rev: &str) -> Option<String> {
    try_git(
        repo,
        &["rev-parse", "--verify", "-q", "--end-of-options", rev],
    )
    .ok()
    .map(|s| s.trim().to_owned())
    .filter(|s| !s.is_empty())
}

/// Every ref of `repo` (`for-each-ref`, not HEAD) with the object it points
/// at.
pub fn refs(repo: &Path) -> BTreeMap<String, String> {
    git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(r, o)| (r.to_owned(), o.to_owned()))
        .collect()
}

/// Sets `key` to `value` in `repo`'s own config.
///
/// # Panics
/// When git fails.
#[track_caller]
pub fn set_config(repo: &Path, key: &str, value: &str) {
    git(repo, &["config", key, value]);
}

/// `git fsck --full --strict`, the failure carrying git's output.
pub fn fsck(repo: &Path) -> Result<(), String> {
    match try_git(repo, &["fsck", "--full", "--strict", "--no-progress"]) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("{}{}", e.stdout, e.stderr)),
    }
}

/// Writes an executable hook `name` (e.g. `pre-receive`) with `script` as
/// its whole content (start it with a `#!` line) into the repository's hooks
/// directory; returns its path.
pub fn install_hook(repo: &Path, name: &str, script: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let rel = try_git(repo, &["rev-parse", "--git-path", &format!("hooks/{name}")])?;
    let path = repo.join(rel.trim());
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// One reflog line: `<old> <new> <identity> <time> <tz>\t<message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReflogEntry {
    /// The value before.
    pub old: String,
    /// The value after.
    pub new: String,
    /// The message (`push`, `commit: ...`, ...).
    pub message: String,
}

/// The raw lines of `refname`'s reflog in `repo`, oldest first; empty when
/// it has none.
pub fn reflog(repo: &Path, refname: &str) -> Vec<String> {
    let Ok(rel) = try_git(
        repo,
        &["rev-parse", "--git-path", &format!("logs/{refname}")],
    ) else {
        return Vec::new();
    };
    std::fs::read_to_string(repo.join(rel.trim()))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// [`reflog`], parsed.
pub fn reflog_entries(repo: &Path, refname: &str) -> Vec<ReflogEntry> {
    reflog(repo, refname)
        .iter()
        .filter_map(|l| {
            let (head, message) = l.split_once('\t').unwrap_or((l, ""));
            let mut it = head.split(' ');
            Some(ReflogEntry {
                old: it.next()?.to_owned(),
                new: it.next()?.to_owned(),
                message: message.to_owned(),
            })
        })
        .collect()
}

/// Adds one commit on `branch` of `repo` (bare or not) and returns its id.
///
/// The commit's tree is the branch's tree (empty for a new branch) plus one
/// file `commits/<n>.txt` holding `message`; it is made with plumbing under
/// a private index, so the work tree and index of a non-bare repository are
/// not touched. A branch that does not exist yet starts from `HEAD` when
/// that resolves, else as a root commit. The dates are fixed, so the same
/// steps give the same ids.
///
/// # Panics
/// When git fails.
#[track_caller]
pub fn commit_on(repo: &Path, branch: &str, message: &str) -> String {
    let refname = full_branch(branch);
    let n = match branch_parent(repo, &refname) {
        Some(p) => git(repo, &["rev-list", "--count", &p])
            .parse::<u64>()
            .unwrap_or(0),
        None => 0,
    };
    commit_blob(
        repo,
        &refname,
        &format!("commits/{n}.txt"),
        format!("{message}\n").as_bytes(),
        message,
    )
}

fn full_branch(branch: &str) -> String {
    if branch.starts_with("refs/") {
        branch.to_owned()
    } else {
        format!("refs/heads/{branch}")
    }
}

/// The commit `refname` points at, else HEAD's.
fn branch_parent(repo: &Path, refname: &str) -> Option<String> {
    rev_parse(repo, &format!("{refname}^{{commit}}")).or_else(|| rev_parse(repo, "HEAD^{commit}"))
}

/// A commit on top of `refname` (or HEAD) whose tree is the parent's with
/// `content` at `path`, written with git's plumbing (loose objects), and
/// `refname` moved to it (reflog: `commit: <message>`).
#[track_caller]
fn commit_blob(repo: &Path, refname: &str, path: &str, content: &[u8], message: &str) -> String {
    let parent = branch_parent(repo, refname);
    let index = tempfile::NamedTempFile::new().expect("temporary index");
    let index_path = index.path().to_owned();
    drop(index);
    let with_index = |args: &[&str], input: Option<&[u8]>| -> String {
        let mut cmd = git_command(repo);
        cmd.env("GIT_INDEX_FILE", &index_path);
        match run(cmd, args, input) {
            Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            Err(e) => panic!("{e}"),
        }
    };
    match &parent {
        Some(p) => with_index(&["read-tree", p], None),
        None => with_index(&["read-tree", "--empty"], None),
    };
    let blob = with_index(&["hash-object", "-w", "--stdin"], Some(content));
    with_index(
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ],
        None,
    );
    let tree = with_index(&["write-tree"], None);
    let _ = std::fs::remove_file(&index_path);
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
    if let Some(p) = &parent {
        args.push("-p");
        args.push(p);
    }
    let oid = git(repo, &args);
    let old = rev_parse(repo, refname).unwrap_or_else(|| ZERO_OID.to_owned());
    git(
        repo,
        &[
            "update-ref",
            "-m",
            &format!("commit: {message}"),
            refname,
            &oid,
            &old,
        ],
    );
    oid
}

/// Commits `content` at `path` on `branch` in a bare `repo`, on top of the
/// branch (or HEAD), with git's plumbing: the blob, trees and commit are
/// loose objects, as `git commit` writes them. Returns the commit's id.
///
/// # Panics
/// When git fails.
#[track_caller]
pub fn commit_file(repo: &Path, branch: &str, path: &str, content: &[u8]) -> String {
    commit_blob(
        repo,
        &full_branch(branch),
        path,
        content,
        &format!("edit {path}"),
    )
}

/// `git ls-remote <url>` run in `dir`: ref name → object id (HEAD and
/// peeled `^{}` entries included as git prints them).
pub fn ls_remote(dir: &Path, url: &str) -> Result<BTreeMap<String, String>, GitCommandError> {
    Ok(try_git(dir, &["ls-remote", url])?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(o, r)| (r.to_owned(), o.to_owned()))
        .collect())
}

/// Whether `ancestor` is an ancestor of (or equal to) `descendant`.
pub fn is_ancestor(repo: &Path, ancestor: &str, descendant: &str) -> bool {
    try_git(repo, &["merge-base", "--is-ancestor", ancestor, descendant]).is_ok()
}

#[derive(Debug, Clone)]
enum Step {
    Commits {
        branch: String,
        from: Option<String>,
        count: usize,
    },
    LightTag {
        name: String,
        target: String,
    },
    AnnotatedTag {
        name: String,
        target: String,
        message: String,
    },
}

/// Builds a repository with `git fast-import`: commits on named branches,
/// lightweight and annotated tags, a symbolic HEAD. Steps run in the order
/// they were declared; a tag points at its target branch's tip at that
/// moment. Deterministic: commit `k` (counted over the whole build from 0)
/// is dated [`FIXED_EPOCH`]` + 60·k` and writes `<branch>/<k mod 8>.txt`.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// use sluice_testkit::RepoBuilder;
/// let dir = tempfile::tempdir()?;
/// let repo = RepoBuilder::new()
///     .branch("main", 1000)
///     .branch_from("feature", "main", 3)
///     .annotated_tag("v1.0", "main", "release 1.0")
///     .lightweight_tag("light", "feature")
///     .build(&dir.path().join("r.git"))?;
/// # let _ = repo; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RepoBuilder {
    bare: bool,
    head: String,
    steps: Vec<Step>,
}

impl Default for RepoBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RepoBuilder {
    /// A bare repository with `HEAD -> refs/heads/main` and nothing else yet.
    pub fn new() -> Self {
        RepoBuilder {
            bare: true,
            head: "main".to_owned(),
            steps: Vec::new(),
        }
    }

    /// Bare (the default) or with a work tree checked out at HEAD.
    pub fn bare(mut self, bare: bool) -> Self {
        self.bare = bare;
        self
    }

    /// `count` commits on `branch`: continuing it when it already has
    /// commits, else as a new root history.
    pub fn branch(mut self, branch: &str, count: usize) -> Self {
        self.steps.push(Step::Commits {
            branch: branch.to_owned(),
            from: None,
            count,
        });
        self
    }

    /// `count` commits on a new `branch` forked from `from`'s tip (with
    /// `count == 0` the branch points at that tip).
    pub fn branch_from(mut self, branch: &str, from: &str, count: usize) -> Self {
        self.steps.push(Step::Commits {
            branch: branch.to_owned(),
            from: Some(from.to_owned()),
            count,
        });
        self
    }

    /// A lightweight tag at `target` branch's current tip.
    pub fn lightweight_tag(mut self, name: &str, target: &str) -> Self {
        self.steps.push(Step::LightTag {
            name: name.to_owned(),
            target: target.to_owned(),
        });
        self
    }

    /// An annotated tag at `target` branch's current tip.
    pub fn annotated_tag(mut self, name: &str, target: &str, message: &str) -> Self {
        self.steps.push(Step::AnnotatedTag {
            name: name.to_owned(),
            target: target.to_owned(),
            message: message.to_owned(),
        });
        self
    }

    /// Which branch HEAD points at (`main` by default; it may be unborn).
    pub fn head(mut self, branch: &str) -> Self {
        self.head = branch.to_owned();
        self
    }

    /// The fast-import stream for the steps.
    pub fn fast_import_stream(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut tips: BTreeMap<String, usize> = BTreeMap::new();
        let mut mark = 0usize;
        let mut k = 0u64;
        let ident = format!("{AUTHOR_NAME} <{AUTHOR_EMAIL}>");
        let data = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(format!("data {}\n{s}\n", s.len()).as_bytes());
        };
        for step in &self.steps {
            match step {
                Step::Commits {
                    branch,
                    from,
                    count,
                } => {
                    let mut base = match from {
                        Some(f) => Some(
                            *tips
                                .get(f)
                                .ok_or_else(|| format!("branch {f} has no commits yet"))?,
                        ),
                        None => tips.get(branch).copied(),
                    };
                    if *count == 0 {
                        if let Some(b) = base {
                            out.extend_from_slice(
                                format!("reset refs/heads/{branch}\nfrom :{b}\n\n").as_bytes(),
                            );
                            tips.insert(branch.clone(), b);
                        }
                        continue;
                    }
                    for i in 0..*count {
                        mark += 1;
                        let when = FIXED_EPOCH + 60 * k;
                        out.extend_from_slice(
                            format!(
                                "commit refs/heads/{branch}\nmark :{mark}\nauthor {ident} {when} +0000\ncommitter {ident} {when} +0000\n"
                            )
                            .as_bytes(),
                        );
                        data(&mut out, &format!("{branch}: commit {i}"));
                        // Without `from`, fast-import continues the branch (or,
                        // for a branch it has not seen, makes a root commit).
                        if let Some(b) = base.take() {
                            out.extend_from_slice(format!("from :{b}\n").as_bytes());
                        }
                        out.extend_from_slice(
                            format!("M 100644 inline {branch}/{}.txt\n", k % 8).as_bytes(),
                        );
                        data(&mut out, &format!("commit {k} on {branch}\n"));
                        out.push(b'\n');
                        tips.insert(branch.clone(), mark);
                        k += 1;
                    }
                }
                Step::LightTag { name, target } => {
                    let t = tips
                        .get(target)
                        .ok_or_else(|| format!("branch {target} has no commits yet"))?;
                    out.extend_from_slice(
                        format!("reset refs/tags/{name}\nfrom :{t}\n\n").as_bytes(),
                    );
                }
                Step::AnnotatedTag {
                    name,
                    target,
                    message,
                } => {
                    let t = tips
                        .get(target)
                        .ok_or_else(|| format!("branch {target} has no commits yet"))?;
                    let when = FIXED_EPOCH + 60 * k;
                    out.extend_from_slice(
                        format!("tag {name}\nfrom :{t}\ntagger {ident} {when} +0000\n").as_bytes(),
                    );
                    data(&mut out, message);
                }
            }
        }
        out.extend_from_slice(b"done\n");
        Ok(out)
    }

    /// Creates the repository at `path` (which must not exist or be empty)
    /// and returns its path. Reflogs are on (`core.logAllRefUpdates`).
    pub fn build(&self, path: &Path) -> io::Result<PathBuf> {
        if self.bare {
            init_bare(path)?;
        } else {
            init_work(path)?;
        }
        let stream = self.fast_import_stream().map_err(io::Error::other)?;
        try_git_with_input(
            path,
            &["fast-import", "--quiet", "--done", "--date-format=raw"],
            &stream,
        )?;
        try_git(
            path,
            &["symbolic-ref", "HEAD", &format!("refs/heads/{}", self.head)],
        )?;
        if !self.bare && rev_parse(path, "HEAD").is_some() {
            try_git(path, &["reset", "-q", "--hard"])?;
        }
        Ok(path.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_on_a_branch_without_commits_is_refused() {
        let err = RepoBuilder::new()
            .lightweight_tag("t", "main")
            .fast_import_stream()
            .unwrap_err();
        assert!(err.contains("main"));
    }

    #[test]
    fn the_stream_ends_with_done() {
        let s = RepoBuilder::new()
            .branch("main", 2)
            .fast_import_stream()
            .unwrap();
        assert!(s.ends_with(b"done\n"));
        assert!(s.windows(7).filter(|w| w == b"commit ").count() >= 2);
    }
}
