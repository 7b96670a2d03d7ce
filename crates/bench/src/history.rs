//! Synthetic histories, written through `git fast-import`.
//!
//! A [`Generator`] keeps the content of every file of a branch in memory and
//! makes commits the way people do: most touch one to four files with a few
//! small hunks (a line replaced, a few lines inserted, a line or two
//! deleted), now and then a file is added or removed, and every hundred
//! commits or so a larger change touches a few dozen files. Edits favour
//! older ("hot") files. Everything comes from one seeded generator, so the
//! same parameters give the same object ids on every machine.
//!
//! * [`build_large`] makes the `--large` fixture: a bare repository with
//!   16,600 commits over 2,600 to about 3,500 files, fully repacked (`git
//!   repack -adf`, as a server's repository after `gc`).
//! * [`add_commits`] adds commits on top of an existing branch as **loose**
//!   objects (fast-import writes a pack, which is then exploded with `git
//!   unpack-objects`, the same loose objects `git commit` writes).

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use sluice_testkit::repo::{git, git_command};

/// The identity on every synthetic commit.
const IDENT: &str = "Sluice Bench <bench@example.invalid>";

/// Bumped whenever the generator's output changes (part of the cache key).
pub const GENERATOR_VERSION: u32 = 1;

/// A small deterministic PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// An index in `0..n` biased towards 0 (hot files).
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * n as f64) as usize).min(n - 1)
    }
}

const WORDS: &[&str] = &[
    "let",
    "fn",
    "self",
    "match",
    "return",
    "if",
    "else",
    "for",
    "in",
    "mut",
    "Some",
    "None",
    "Ok",
    "Err",
    "value",
    "count",
    "index",
    "buffer",
    "config",
    "state",
    "result",
    "error",
    "request",
    "response",
    "handle",
    "parse",
    "write",
    "read",
    "update",
    "remote",
    "object",
    "commit",
    "tree",
    "path",
    "name",
    "len",
    "push",
    "fetch",
    "into",
    "from",
    "new",
    "clone",
    "iter",
    "map",
    "filter",
    "collect",
    "unwrap_or",
    "as_ref",
    "=",
    "==",
    "+",
    "->",
    "=>",
    "{",
    "}",
    "(",
    ")",
    ";",
    "&",
    "::",
    "0",
    "1",
    "42",
    "true",
    "false",
    "pub",
    "struct",
    "impl",
    "where",
    "Vec",
    "String",
    "usize",
    "u64",
    "Option",
    "Result",
    "Self",
    "deadline",
    "retry",
];

const TOP_DIRS: &[&str] = &[
    "core", "net", "store", "ui", "api", "util", "proto", "cli", "server", "client", "tests",
    "docs",
];

fn words(rng: &mut Rng, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len())]);
    }
    s
}

fn code_line(rng: &mut Rng) -> String {
    match rng.below(20) {
        0 => String::new(),
        1 => {
            let n = rng.range(3, 10);
            format!("    // {}", words(rng, n))
        }
        _ => {
            let indent = " ".repeat(4 * rng.below(4));
            let n = rng.range(2, 11);
            format!("{indent}{}", words(rng, n))
        }
    }
}

/// One synthetic branch: its files and how it changes.
#[derive(Debug)]
pub struct Generator {
    rng: Rng,
    /// path → lines.
    files: BTreeMap<String, Vec<String>>,
    /// Paths in creation order (the first are the hot ones).
    order: Vec<String>,
    next_file: usize,
    time: u64,
    /// Every how many commits a new file appears (0: never).
    pub add_every: usize,
    /// Every how many commits a file is removed (0: never).
    pub delete_every: usize,
    /// Every how many commits a larger change comes (0: never).
    pub big_every: usize,
}

/// What one commit changed.
struct Change {
    message: String,
    modified: Vec<String>,
    deleted: Vec<String>,
}

impl Generator {
    /// A generator over `files` (path → content), commits dated from `time`.
    pub fn from_files(seed: u64, files: BTreeMap<String, String>, time: u64) -> Self {
        let order: Vec<String> = files.keys().cloned().collect();
        let next_file = order.len();
        Generator {
            rng: Rng::new(seed),
            files: files
                .into_iter()
                .map(|(p, c)| (p, c.lines().map(str::to_owned).collect()))
                .collect(),
            order,
            next_file,
            time,
            add_every: 0,
            delete_every: 0,
            big_every: 0,
        }
    }

    /// A generator with `nfiles` fresh files of 10 to ~500 lines (about 130
    /// on average) in `TOP_DIRS × 12` directories.
    pub fn fresh(seed: u64, nfiles: usize, time: u64) -> Self {
        let mut g = Generator::from_files(seed, BTreeMap::new(), time);
        for _ in 0..nfiles {
            g.new_file();
        }
        g
    }

    fn new_file(&mut self) -> String {
        let rng = &mut self.rng;
        let top = TOP_DIRS[rng.below(TOP_DIRS.len())];
        let path = format!("{top}/m{:02}/f{:05}.rs", rng.below(12), self.next_file);
        self.next_file += 1;
        let n = 10 + rng.below(100) * rng.below(100) / 20;
        let lines = (0..n).map(|_| code_line(rng)).collect();
        self.files.insert(path.clone(), lines);
        self.order.push(path.clone());
        path
    }

    fn edit(&mut self, path: &str) {
        let rng = &mut self.rng;
        let lines = self.files.get_mut(path).expect("an existing file");
        for _ in 0..rng.range(1, 3) {
            let pos = rng.below(lines.len() + 1);
            match rng.below(10) {
                0..=4 => {
                    let n = rng.range(1, 3);
                    for i in pos..(pos + n).min(lines.len()) {
                        lines[i] = code_line(rng);
                    }
                    if pos >= lines.len() {
                        lines.push(code_line(rng));
                    }
                }
                5..=7 => {
                    let n = if rng.below(8) == 0 {
                        rng.range(10, 40)
                    } else {
                        rng.range(1, 8)
                    };
                    for _ in 0..n {
                        lines.insert(pos, code_line(rng));
                    }
                }
                _ => {
                    if lines.len() > 12 {
                        let n = rng.range(1, 3);
                        let end = (pos + n).min(lines.len());
                        lines.drain(pos.min(end)..end);
                    }
                }
            }
        }
    }

    fn step(&mut self, n: usize) -> Change {
        let mut modified = Vec::new();
        let mut deleted = Vec::new();
        let big = self.big_every > 0 && n.is_multiple_of(self.big_every);
        let touches = if big {
            self.rng.range(10, 40)
        } else {
            match self.rng.below(10) {
                0..=4 => 1,
                5..=7 => 2,
                8 => 3,
                _ => 4,
            }
        };
        for _ in 0..touches {
            let i = self.rng.skewed(self.order.len());
            let path = self.order[i].clone();
            if !modified.contains(&path) {
                self.edit(&path);
                modified.push(path);
            }
        }
        if self.add_every > 0 && n.is_multiple_of(self.add_every) {
            modified.push(self.new_file());
        }
        if self.delete_every > 0 && n.is_multiple_of(self.delete_every) && self.order.len() > 100 {
            let i = self.order.len() / 2 + self.rng.below(self.order.len() / 2);
            let path = self.order.remove(i);
            if !modified.contains(&path) {
                self.files.remove(&path);
                deleted.push(path);
            } else {
                self.order.insert(i, path);
            }
        }
        let nwords = self.rng.range(4, 10);
        let subject = words(&mut self.rng, nwords);
        let mut message = format!("{n}: {subject}\n");
        let body_lines = self.rng.below(6);
        if body_lines > 0 {
            message.push('\n');
            for _ in 0..body_lines {
                message.push_str(&words(&mut self.rng, 8));
                message.push('\n');
            }
        }
        Change {
            message,
            modified,
            deleted,
        }
    }

    fn content(&self, path: &str) -> String {
        let lines = &self.files[path];
        let mut s = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for l in lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    fn write_commit(
        &mut self,
        out: &mut dyn Write,
        refname: &str,
        mark: usize,
        from: Option<&str>,
        change: &Change,
    ) -> io::Result<()> {
        self.time += 300 + self.rng.below(3000) as u64;
        writeln!(out, "commit {refname}\nmark :{mark}")?;
        writeln!(out, "author {IDENT} {} +0000", self.time)?;
        writeln!(out, "committer {IDENT} {} +0000", self.time)?;
        writeln!(out, "data {}\n{}", change.message.len(), change.message)?;
        if let Some(from) = from {
            writeln!(out, "from {from}")?;
        }
        for p in &change.deleted {
            writeln!(out, "D {p}")?;
        }
        for p in &change.modified {
            let c = self.content(p);
            writeln!(out, "M 100644 inline {p}\ndata {}\n{c}", c.len())?;
        }
        Ok(())
    }

    /// Writes the initial commit holding every file.
    fn write_initial(&mut self, out: &mut dyn Write, refname: &str, mark: usize) -> io::Result<()> {
        let change = Change {
            message: format!("Initial import of {} files\n", self.order.len()),
            modified: self.order.clone(),
            deleted: Vec::new(),
        };
        self.write_commit(out, refname, mark, None, &change)
    }

    /// Writes `n` commits on `refname` (marks `first_mark..`), the first
    /// with `from` as its parent.
    pub fn write_commits(
        &mut self,
        out: &mut dyn Write,
        refname: &str,
        first_mark: usize,
        from: Option<&str>,
        n: usize,
    ) -> io::Result<()> {
        for k in 0..n {
            let change = self.step(first_mark + k);
            let from = if k == 0 { from } else { None };
            self.write_commit(out, refname, first_mark + k, from, &change)?;
        }
        Ok(())
    }
}

/// Runs `git fast-import` in `repo`, feeding it what `feed` writes; returns
/// the marks (mark number → object id).
fn fast_import(
    repo: &Path,
    feed: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<BTreeMap<usize, String>> {
    let marks = tempfile::NamedTempFile::new()?;
    let stderr = tempfile::tempfile()?;
    let mut child = git_command(repo)
        .args(["fast-import", "--quiet", "--done", "--date-format=raw"])
        .arg(format!("--export-marks={}", marks.path().display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(stderr.try_clone()?)
        .spawn()
        .context("running git fast-import")?;
    {
        let stdin = child.stdin.take().expect("piped stdin");
        let mut w = io::BufWriter::with_capacity(1 << 20, stdin);
        feed(&mut w)?;
        writeln!(w, "done")?;
        w.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        let mut s = String::new();
        let mut f = stderr;
        use std::io::Seek;
        f.rewind()?;
        f.read_to_string(&mut s)?;
        bail!("git fast-import failed ({status}): {s}");
    }
    let mut out = BTreeMap::new();
    for line in BufReader::new(std::fs::File::open(marks.path())?).lines() {
        let line = line?;
        if let Some((m, oid)) = line.split_once(' ') {
            out.insert(m.trim_start_matches(':').parse()?, oid.to_owned());
        }
    }
    Ok(out)
}

/// The cache path of the large fixture for `commits` commits.
pub fn large_cache_path(commits: usize) -> PathBuf {
    sluice_testkit::fixtures::cache_dir().join(format!("large-v{GENERATOR_VERSION}-{commits}.git"))
}

/// The large fixture with `commits` commits: built once (a few minutes) and
/// cached under the cargo target directory; do not modify it.
pub fn build_large(commits: usize) -> Result<PathBuf> {
    let path = large_cache_path(commits);
    if path.join("HEAD").is_file() {
        return Ok(path);
    }
    let dir = path.parent().expect("a cache dir").to_owned();
    std::fs::create_dir_all(&dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".large-")
        .tempdir_in(&dir)?;
    let repo = tmp.path().join("repo.git");
    sluice_testkit::repo::init_bare(&repo)?;
    eprintln!("building the large fixture ({commits} commits) with git fast-import ...");
    let t = std::time::Instant::now();
    let mut g = Generator::fresh(0x5eed_1a26e, 2600, 1_600_000_000);
    g.add_every = 18;
    g.delete_every = 150;
    g.big_every = 97;
    fast_import(&repo, |w| {
        g.write_initial(w, "refs/heads/main", 1)?;
        g.write_commits(w, "refs/heads/main", 2, None, commits - 1)?;
        for k in (1000..=commits).step_by(1000) {
            writeln!(w, "reset refs/tags/v{}.0\nfrom :{k}\n", k / 1000)?;
        }
        Ok(())
    })?;
    eprintln!(
        "  fast-import: {:.1} s; repacking (git repack -adf) ...",
        t.elapsed().as_secs_f64()
    );
    let t = std::time::Instant::now();
    git(&repo, &["repack", "-adfq"]);
    git(&repo, &["pack-refs", "--all"]);
    git(&repo, &["prune-packed"]);
    eprintln!("  repack: {:.1} s", t.elapsed().as_secs_f64());
    match std::fs::rename(&repo, &path) {
        Ok(()) => Ok(path),
        Err(_) if path.join("HEAD").is_file() => Ok(path),
        Err(e) => Err(e.into()),
    }
}

/// Reads every file of `rev`'s tree in `repo` (path → content).
pub fn read_tree(repo: &Path, rev: &str) -> Result<BTreeMap<String, String>> {
    let listing = git(repo, &["ls-tree", "-r", "--full-tree", rev]);
    let mut paths = Vec::new();
    let mut input = String::new();
    for line in listing.lines() {
        let (meta, path) = line.split_once('\t').context("ls-tree line")?;
        let oid = meta.split_whitespace().nth(2).context("ls-tree oid")?;
        if meta.split_whitespace().nth(1) == Some("blob") {
            paths.push(path.to_owned());
            input.push_str(oid);
            input.push('\n');
        }
    }
    let mut child = git_command(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut r = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut files = BTreeMap::new();
    for path in paths {
        let mut header = String::new();
        r.read_line(&mut header)?;
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .context("cat-file header")?
            .parse()?;
        let mut buf = vec![0; size + 1];
        r.read_exact(&mut buf)?;
        buf.pop();
        files.insert(path, String::from_utf8_lossy(&buf).into_owned());
    }
    let _ = writer.join();
    child.wait()?;
    Ok(files)
}

/// Adds `n` commits on `refs/heads/<branch>` of `repo` (a branch that
/// exists), edited the way [`Generator`] edits, as loose objects; returns
/// the new commits' ids, oldest first. `seed` picks the edits.
pub fn add_commits(repo: &Path, branch: &str, n: usize, seed: u64) -> Result<Vec<String>> {
    let refname = format!("refs/heads/{branch}");
    let tip = git(repo, &["rev-parse", &refname]);
    let time: u64 = git(repo, &["log", "-1", "--format=%ct", &tip]).parse()?;
    let mut g = Generator::from_files(seed, read_tree(repo, &tip)?, time);
    let pack_dir = repo.join(if repo.join("objects").is_dir() {
        "objects/pack"
    } else {
        ".git/objects/pack"
    });
    let before = packs(&pack_dir)?;
    let marks = fast_import(repo, |w| g.write_commits(w, &refname, 1, Some(&tip), n))?;
    explode_new_packs(repo, &pack_dir, &before)?;
    Ok((1..=n).map(|m| marks[&m].clone()).collect())
}

/// Adds `per` commits on each of `branches` (created at `base`'s tip,
/// which must exist) of `repo` in one `git fast-import`, as loose objects;
/// returns each branch's commits, oldest first.
pub fn add_branches(
    repo: &Path,
    base: &str,
    branches: &[String],
    per: usize,
    seed: u64,
) -> Result<Vec<Vec<String>>> {
    let tip = git(repo, &["rev-parse", &format!("refs/heads/{base}")]);
    let time: u64 = git(repo, &["log", "-1", "--format=%ct", &tip]).parse()?;
    let mut g = Generator::from_files(seed, read_tree(repo, &tip)?, time);
    let pack_dir = repo.join("objects/pack");
    let before = packs(&pack_dir)?;
    let marks = fast_import(repo, |w| {
        for (b, name) in branches.iter().enumerate() {
            g.write_commits(
                w,
                &format!("refs/heads/{name}"),
                1 + b * per,
                Some(&tip),
                per,
            )?;
        }
        Ok(())
    })?;
    explode_new_packs(repo, &pack_dir, &before)?;
    Ok((0..branches.len())
        .map(|b| (1..=per).map(|k| marks[&(b * per + k)].clone()).collect())
        .collect())
}

/// Turns the packs in `pack_dir` that are not in `before` into loose
/// objects (what `git commit` would have written).
fn explode_new_packs(
    repo: &Path,
    pack_dir: &Path,
    before: &std::collections::BTreeSet<PathBuf>,
) -> Result<()> {
    for pack in packs(pack_dir)?.difference(before) {
        let moved = tempfile::NamedTempFile::new()?;
        std::fs::rename(pack, moved.path()).or_else(|_| {
            std::fs::copy(pack, moved.path()).and_then(|_| std::fs::remove_file(pack))
        })?;
        for ext in ["idx", "rev"] {
            let _ = std::fs::remove_file(pack.with_extension(ext));
        }
        let status = git_command(repo)
            .args(["unpack-objects", "-q"])
            .stdin(std::fs::File::open(moved.path())?)
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            bail!("git unpack-objects failed ({status})");
        }
    }
    Ok(())
}

fn packs(dir: &Path) -> io::Result<std::collections::BTreeSet<PathBuf>> {
    let mut out = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "pack") {
            out.insert(p);
        }
    }
    Ok(out)
}

/// Copies the repository `src` to `dest` (which must not exist),
/// hard-linking the immutable pack files and copying everything else.
pub fn link_copy(src: &Path, dest: &Path) -> io::Result<()> {
    fn walk(src: &Path, dest: &Path, in_pack: bool) -> io::Result<()> {
        std::fs::create_dir_all(dest)?;
        for e in std::fs::read_dir(src)? {
            let e = e?;
            let to = dest.join(e.file_name());
            if e.file_type()?.is_dir() {
                let pack = in_pack || (e.file_name() == "pack" && src.ends_with("objects"));
                walk(&e.path(), &to, pack)?;
            } else if in_pack {
                std::fs::hard_link(e.path(), &to)
                    .or_else(|_| std::fs::copy(e.path(), &to).map(|_| ()))?;
            } else {
                std::fs::copy(e.path(), &to)?;
            }
        }
        Ok(())
    }
    walk(src, dest, false)
}

/// Counts the commits reachable from `rev`.
pub fn count_commits(repo: &Path, rev: &str) -> usize {
    git(repo, &["rev-list", "--count", rev])
        .parse()
        .unwrap_or(0)
}

/// Runs `cmd` and fails with its stderr when it fails.
pub fn run_checked(cmd: &mut Command) -> Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(())
}
