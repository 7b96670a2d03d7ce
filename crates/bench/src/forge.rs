//! The forge-scale rows (issue 23): the everyday calls against a remote
//! with 20,000 or 100,000 refs (`fixtures/build.sh forge-20k`,
//! `forge-100k`): push of one commit, push of a new branch, a leased push,
//! ls-refs with a prefix, and a fetch of one branch with 10 new commits
//! into a repository that has the rest.
//!
//! Every call runs in a process of its own under `/usr/bin/time` (peak
//! memory), as the fetch rows do: `git` as a command, sluice and libgit2
//! as `sluice-bench child …`, which opens the local repository inside the
//! timed call. Each row also times its floor ([`crate::floor`]): a raw
//! client replaying the request in one write.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sluice_testkit::repo::{git, rev_parse};

use crate::floor;
use crate::history;
use crate::measure::{self, Measured};
use crate::ops::{self, Impl};
use crate::rows::{idx, Env, ForgeSetup, Row, RowResult, Series, Settings};

/// The ref counts the fixtures come in.
pub const SIZES: [usize; 2] = [20_000, 100_000];

/// The prefix the ls-refs row asks for (one ref of the many).
pub const LS_PREFIX: &str = "refs/heads/main";

/// The branch the fetch row fetches (10 commits the local side lacks).
const TOPIC_SPEC: &str = "+refs/heads/topic:refs/heads/topic";

/// The fixture's name in `fixtures/build.sh` for `refs` extra refs.
pub fn fixture_name(refs: usize) -> Result<String> {
    if !SIZES.contains(&refs) {
        bail!("no forge fixture with {refs} refs (known: {SIZES:?})");
    }
    Ok(format!("forge-{}k", refs / 1000))
}

/// The forge fixture with `refs` extra refs, built once per script version
/// and cached beside the testkit's fixtures; do not modify it.
pub fn fixture(refs: usize) -> Result<PathBuf> {
    let name = fixture_name(refs)?;
    let dir = sluice_testkit::fixtures::cache_dir();
    let path = dir.join(format!(
        "{name}-{}.git",
        sluice_testkit::fixtures::script_hash()?
    ));
    if path.join("HEAD").is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}-"))
        .tempdir_in(&dir)?;
    eprintln!("building the {name} fixture (fixtures/build.sh) ...");
    let t = Instant::now();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(sluice_testkit::fixtures::script_path())
        .arg(&name)
        .arg(tmp.path().join("repo.git"));
    history::run_checked(&mut cmd)?;
    eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
    match std::fs::rename(tmp.path().join("repo.git"), &path) {
        Ok(()) => Ok(path),
        Err(_) if path.join("HEAD").is_file() => Ok(path),
        Err(e) => Err(e.into()),
    }
}

impl ForgeSetup {
    fn title(&self, what: &str) -> String {
        let total = self.refs + 3;
        let name = fixture_name(self.refs).unwrap_or_default();
        format!("{what}, {name} ({} refs)", fmt_count(total))
    }
}

/// `20003` → `20,003`.
fn fmt_count(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Env {
    /// The setup for `refs`, made on first use.
    fn forge_setup(&mut self, refs: usize, s: &Settings) -> Result<ForgeSetup> {
        if let Some(f) = self.forge.iter().find(|f| f.refs == refs) {
            return Ok(f.clone());
        }
        let fixture = fixture(refs)?;
        let name = fixture_name(refs)?;
        let main = git(&fixture, &["rev-parse", "refs/heads/main"]);
        let ls_name = format!("{name}.git");
        history::link_copy(&fixture, &self.srv.join(&ls_name))?;
        let fetch_name = format!("{name}-fetch.git");
        let fetch_repo = self.srv.join(&fetch_name);
        history::link_copy(&fixture, &fetch_repo)?;
        git(&fetch_repo, &["branch", "topic", "main"]);
        let topic = history::add_commits(&fetch_repo, "topic", 10, 23)?
            .pop()
            .context("10 commits")?;
        let local = self.work().join(format!("{name}-local.git"));
        history::link_copy(&fixture, &local)?;
        git(&local, &["branch", "chain", "main"]);
        // Three implementations and the floor per round, the warm-up too.
        let chain = history::add_commits(&local, "chain", 4 * (s.runs + 1), 1)?;
        let f = ForgeSetup {
            refs,
            fixture,
            main,
            local,
            chain,
            ls_name,
            fetch_name,
            topic,
        };
        self.forge.push(f.clone());
        Ok(f)
    }

    /// The served name of the forge fixture with `refs` extra refs.
    pub(crate) fn forge_ls_name(&mut self, refs: usize, s: &Settings) -> Result<String> {
        Ok(self.forge_setup(refs, s)?.ls_name)
    }

    /// Runs the forge row `row` on the fixture with `refs` extra refs.
    pub fn run_forge(&mut self, row: Row, refs: usize, s: &Settings) -> Result<RowResult> {
        eprintln!("running {} on {} refs ...", row.name(), refs);
        let f = self.forge_setup(refs, s)?;
        match row {
            Row::ForgePush1 => self.forge_push(row, &f, Push::OneCommit, s),
            Row::ForgePushBranch => self.forge_push(row, &f, Push::NewBranch, s),
            Row::ForgePushLease => self.forge_push(row, &f, Push::Leased, s),
            Row::ForgeLsRefsPrefix => self.forge_ls_refs(row, &f, s),
            Row::ForgeFetch10 => self.forge_fetch(row, &f, s),
            _ => bail!("{} is not a forge row", row.name()),
        }
    }

    fn forge_push(
        &mut self,
        row: Row,
        f: &ForgeSetup,
        kind: Push,
        s: &Settings,
    ) -> Result<RowResult> {
        let title = f.title(match kind {
            Push::OneCommit => "push 1 commit",
            Push::NewBranch => "push a new branch (1 new commit)",
            Push::Leased => "leased push of 1 commit (force-with-lease)",
        });
        let mut res = Env::result(row, &title);
        res.floor_note = FLOOR_PUSH;
        let (name, remote) = self.new_remote(Some(&f.fixture))?;
        let mut chain = f.chain.iter();
        // The commit the remote has that the next one sits on.
        let mut base = f.main.clone();
        let mut k = 0usize;
        let zeros = "0".repeat(40);
        for round in 0..=s.runs {
            let mut order: Vec<Option<Impl>> = impls(round, s).into_iter().map(Some).collect();
            if round > 0 {
                order.push(None);
            }
            for imp in order {
                let oid = chain.next().context("enough commits")?.clone();
                k += 1;
                let dst = match kind {
                    Push::NewBranch => format!("refs/heads/new/b{k}"),
                    _ => "refs/heads/main".to_owned(),
                };
                let old = rev_parse(&remote, &dst);
                let Some(imp) = imp else {
                    let pack = ops::git_thin_pack(&f.local, &base, &oid)?;
                    let req = floor::push_request(
                        &name,
                        old.as_deref().unwrap_or(&zeros),
                        &oid,
                        &dst,
                        &pack,
                    );
                    let t = Instant::now();
                    let answer = floor::replay(self.daemon.addr(), &req)?;
                    let wall = t.elapsed();
                    if !floor::push_accepted(&answer, &dst) {
                        bail!("the raw push to {dst} was not accepted");
                    }
                    check_ref(&remote, &dst, &oid, "the floor")?;
                    res.floor
                        .get_or_insert_with(Series::default)
                        .add(&Measured {
                            wall,
                            max_rss_kib: None,
                        });
                    base = oid;
                    continue;
                };
                git(&f.local, &["update-ref", "refs/heads/bench", &oid]);
                let url = if round == 0 {
                    self.proxy.url(&name)
                } else {
                    self.daemon.url(&name)
                };
                let m = match (imp, kind) {
                    (Impl::Git, Push::Leased) => measure::measure_command(&ops::git_push_leased(
                        &f.local,
                        &url,
                        "bench",
                        &dst,
                        old.as_deref().context("main")?,
                    ))?,
                    (Impl::Git, _) => {
                        measure::measure_command(&ops::git_push(&f.local, &url, "bench", &dst))?
                    }
                    (_, Push::Leased) => measure::measure_child(
                        imp,
                        &measure::push_lease_args(
                            &url,
                            &f.local,
                            "bench",
                            &dst,
                            old.as_deref().context("main")?,
                        ),
                    )?,
                    _ => measure::measure_child(
                        imp,
                        &measure::push_args(&url, &f.local, "bench", &dst),
                    )?,
                };
                check_ref(&remote, &dst, &oid, imp.name())?;
                base = oid;
                if round == 0 {
                    let (sent, pack) = self.proxied_bytes()?;
                    let se = &mut res.series[idx(imp)].1;
                    se.sent = Some(sent);
                    se.pack_sent = Some(pack);
                } else {
                    res.series[idx(imp)].1.add(&m);
                }
            }
        }
        std::fs::remove_dir_all(&remote)?;
        Ok(res)
    }

    fn forge_ls_refs(&mut self, row: Row, f: &ForgeSetup, s: &Settings) -> Result<RowResult> {
        let title = f.title(&format!("ls-refs with a prefix ({LS_PREFIX}), git://"));
        let mut res = Env::result(row, &title);
        res.floor_note = FLOOR_LS;
        let url = self.daemon.url(&f.ls_name);
        let dir = self.work().to_owned();
        let req = floor::ls_refs_request(&f.ls_name, LS_PREFIX);
        let want = format!("{} {LS_PREFIX}", f.main);
        let calls = s.calls.min(10);
        for round in 0..=s.runs {
            for imp in impls(round, s) {
                for _ in 0..if round == 0 { 1 } else { calls } {
                    let m = match imp {
                        Impl::Git => {
                            measure::measure_command(&ops::git_ls_prefix(&dir, &url, LS_PREFIX))?
                        }
                        _ => {
                            measure::measure_child(imp, &measure::ls_prefix_args(&url, LS_PREFIX))?
                        }
                    };
                    if round > 0 {
                        res.series[idx(imp)].1.add(&m);
                    }
                }
            }
            for _ in 0..if round == 0 { 1 } else { calls } {
                let t = Instant::now();
                let answer = floor::replay(self.daemon.addr(), &req)?;
                let wall = t.elapsed();
                if !answer.windows(want.len()).any(|w| w == want.as_bytes()) {
                    bail!("the raw ls-refs did not list {LS_PREFIX}");
                }
                if round > 0 {
                    res.floor
                        .get_or_insert_with(Series::default)
                        .add(&Measured {
                            wall,
                            max_rss_kib: None,
                        });
                }
            }
        }
        Ok(res)
    }

    fn forge_fetch(&mut self, row: Row, f: &ForgeSetup, s: &Settings) -> Result<RowResult> {
        let title = f.title("fetch 1 branch with 10 new commits into a repository with the rest");
        let mut res = Env::result(row, &title);
        res.floor_note = FLOOR_FETCH;
        let url = self.daemon.url(&f.fetch_name);
        let req = floor::fetch_request(&f.fetch_name, &f.topic, &f.main);
        for round in 0..=s.runs {
            for imp in impls(round, s) {
                let (_, dest) = self.fresh_local("fetch-local");
                history::link_copy(&f.fixture, &dest)?;
                let m = match imp {
                    Impl::Git => {
                        measure::measure_command(&ops::git_fetch_into(&dest, &url, TOPIC_SPEC))?
                    }
                    _ => measure::measure_child(
                        imp,
                        &measure::fetch_into_args(&url, &dest, TOPIC_SPEC),
                    )?,
                };
                check_ref(&dest, "refs/heads/topic", &f.topic, imp.name())?;
                std::fs::remove_dir_all(&dest)?;
                if round > 0 {
                    res.series[idx(imp)].1.add(&m);
                }
            }
            let t = Instant::now();
            let answer = floor::replay(self.daemon.addr(), &req)?;
            let wall = t.elapsed();
            if !answer.windows(9).any(|w| w == b"packfile\n") {
                bail!("the raw fetch got no packfile section");
            }
            if round > 0 {
                res.floor
                    .get_or_insert_with(Series::default)
                    .add(&Measured {
                        wall,
                        max_rss_kib: None,
                    });
            }
        }
        Ok(res)
    }
}

/// The three push rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Push {
    OneCommit,
    NewBranch,
    Leased,
}

const FLOOR_PUSH: &str = "a raw client writing the connect line, one command and a pack made beforehand (git pack-objects --thin) in one write, reading to the end";
const FLOOR_LS: &str = "a raw client writing the connect line and a v2 ls-refs with the prefix in one write, reading to the end";
const FLOOR_FETCH: &str = "a raw client writing the connect line and a v2 fetch (one want, one have, done) in one write, reading the pack to the end";

/// The implementations of a round, in its rotating order (libgit2 left
/// out with `--no-libgit2`).
fn impls(round: usize, s: &Settings) -> Vec<Impl> {
    Env::order(round)
        .into_iter()
        .filter(|i| !(s.no_libgit2 && *i == Impl::Libgit2))
        .collect()
}

fn check_ref(repo: &Path, name: &str, want: &str, who: &str) -> Result<()> {
    let got = rev_parse(repo, name);
    if got.as_deref() != Some(want) {
        bail!("after {who}: {name} = {got:?}, expected {want}");
    }
    Ok(())
}
