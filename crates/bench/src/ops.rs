//! The measured operations, one function per implementation and call:
//! this project (`sluice-git`, in-process), libgit2 (the `git2` crate,
//! in-process) and `git` (a subprocess).
//!
//! Every function checks that the call did what it should (a success, the
//! refs it should list), so a fast failure never counts as a fast call.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use sluice_git::{CallOptions, GitClient, Lease, PackStats, PushOptions, RefUpdate};
use sluice_policy::{Bounds, OutcomeKind, Policy};

/// The implementations compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Impl {
    /// `git` 2.x as a subprocess.
    Git,
    /// This project, in-process.
    Sluice,
    /// libgit2 through the `git2` crate, in-process.
    Libgit2,
}

impl Impl {
    /// All three, in the order the table shows them.
    pub const ALL: [Impl; 3] = [Impl::Git, Impl::Sluice, Impl::Libgit2];

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Git => "git",
            Impl::Sluice => "sluice",
            Impl::Libgit2 => "libgit2",
        }
    }

    /// Parses [`Impl::name`].
    pub fn parse(s: &str) -> Option<Impl> {
        Impl::ALL.into_iter().find(|i| i.name() == s)
    }
}

/// The refspecs a bare clone fetches.
pub const CLONE_REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/// A client for the benchmark: one attempt (a failure shows, never a
/// retry), a deadline long enough for the large rows.
pub fn client() -> GitClient {
    GitClient::new(Arc::new(Policy::default()))
}

/// Call options with one attempt and a 10-minute deadline.
pub fn call_options() -> CallOptions {
    CallOptions::new().bounds(Bounds::new(
        Duration::from_secs(600),
        Duration::from_secs(600),
        1,
    ))
}

fn outcome_error<T>(what: &str, o: &sluice_policy::Outcome<T>) -> anyhow::Error {
    anyhow!(
        "sluice {what}: {:?}: {}",
        o.kind,
        o.error
            .as_ref()
            .map(|e| e.cause.clone())
            .unwrap_or_default()
    )
}

/// sluice: ls-refs (everything) of `url`; returns how many refs.
pub fn sluice_ls_refs(client: &GitClient, url: &str, opts: &CallOptions) -> Result<usize> {
    let o = client.ls_refs(url, &[], opts)?;
    if o.kind != OutcomeKind::Succeeded {
        return Err(outcome_error("ls-refs", &o));
    }
    Ok(o.value.map(|v| v.len()).unwrap_or(0))
}

/// sluice: a bare clone — a new bare repository at `dest`, then a fetch of
/// every branch and tag. An existing repository at `dest` is fetched into
/// as it is (to try configuration knobs such as `pack.threads` by hand).
pub fn sluice_fetch(client: &GitClient, url: &str, dest: &Path, opts: &CallOptions) -> Result<()> {
    let repo = if dest.join("HEAD").is_file() {
        gix::open(dest).context("gix::open")?
    } else {
        gix::init_bare(dest).context("gix::init_bare")?
    };
    let specs: Vec<String> = CLONE_REFSPECS.iter().map(|s| s.to_string()).collect();
    let o = client.fetch(url, &specs, &repo, opts)?;
    if o.kind != OutcomeKind::Succeeded {
        return Err(outcome_error("fetch", &o));
    }
    Ok(())
}

/// sluice: push local `refs/heads/<branch>` of `local` to `dst` at `url`
/// (a fast-forward or a creation); returns the pack's figures.
pub fn sluice_push(
    client: &GitClient,
    url: &str,
    local: &Path,
    branch: &str,
    dst: &str,
    opts: &CallOptions,
) -> Result<Option<PackStats>> {
    let repo = gix::open(local).context("gix::open")?;
    sluice_push_in(client, url, &repo, branch, dst, opts)
}

/// [`sluice_push`] from a repository the caller keeps open.
pub fn sluice_push_in(
    client: &GitClient,
    url: &str,
    repo: &gix::Repository,
    branch: &str,
    dst: &str,
    opts: &CallOptions,
) -> Result<Option<PackStats>> {
    sluice_push_leased(client, url, repo, branch, dst, Lease::Any, opts)
}

/// [`sluice_push_in`] with a lease: `dst` must hold what `expect` says.
pub fn sluice_push_leased(
    client: &GitClient,
    url: &str,
    repo: &gix::Repository,
    branch: &str,
    dst: &str,
    expect: Lease,
    opts: &CallOptions,
) -> Result<Option<PackStats>> {
    let src = repo
        .rev_parse_single(format!("refs/heads/{branch}").as_str())
        .context("resolving the branch")?
        .detach();
    let update = RefUpdate::fast_forward(src, dst).with_lease(expect);
    let o = client.push(url, &[update], &PushOptions::default(), repo, opts)?;
    if o.kind != OutcomeKind::Succeeded {
        return Err(outcome_error("push", &o));
    }
    Ok(o.value.and_then(|r| r.pack))
}

/// sluice: ls-refs of the refs under `prefix` (sent to the server as a
/// v2 `ref-prefix`); returns how many.
pub fn sluice_ls_prefix(
    client: &GitClient,
    url: &str,
    prefix: &str,
    opts: &CallOptions,
) -> Result<usize> {
    let o = client.ls_refs(url, &[prefix.to_owned()], opts)?;
    if o.kind != OutcomeKind::Succeeded {
        return Err(outcome_error("ls-refs", &o));
    }
    Ok(o.value.map(|v| v.len()).unwrap_or(0))
}

/// sluice: fetch `refspec` from `url` into the existing repository `dest`.
pub fn sluice_fetch_into(
    client: &GitClient,
    url: &str,
    dest: &Path,
    refspec: &str,
    opts: &CallOptions,
) -> Result<()> {
    let repo = gix::open(dest).context("gix::open")?;
    let o = client.fetch(url, &[refspec.to_owned()], &repo, opts)?;
    if o.kind != OutcomeKind::Succeeded {
        return Err(outcome_error("fetch", &o));
    }
    Ok(())
}

/// libgit2: the refs of `url` under `prefix` (libgit2 speaks v0 only: it
/// reads the whole advertisement and the prefix is applied here).
pub fn libgit2_ls_prefix(url: &str, prefix: &str) -> Result<usize> {
    let mut remote = git2::Remote::create_detached(url)?;
    remote.connect(git2::Direction::Fetch)?;
    let n = remote
        .list()?
        .iter()
        .filter(|h| h.name().starts_with(prefix))
        .count();
    remote.disconnect()?;
    Ok(n)
}

/// libgit2: fetch `refspec` from `url` into the existing repository `dest`.
pub fn libgit2_fetch_into(url: &str, dest: &Path, refspec: &str) -> Result<()> {
    let repo = git2::Repository::open(dest)?;
    let mut remote = repo.remote_anonymous(url)?;
    remote.fetch(&[refspec], None, None)?;
    Ok(())
}

/// libgit2: push `refs/heads/<branch>:<dst>` with a lease — the push is
/// given up in libgit2's push-negotiation callback unless the remote's
/// `dst` holds `expect` (libgit2 has no force-with-lease of its own).
pub fn libgit2_push_leased(
    url: &str,
    local: &Path,
    branch: &str,
    dst: &str,
    expect: git2::Oid,
) -> Result<()> {
    let repo = git2::Repository::open(local)?;
    let mut remote = repo.remote_anonymous(url)?;
    let mut rejected: Option<String> = None;
    {
        let mut cbs = git2::RemoteCallbacks::new();
        cbs.push_negotiation(|updates| {
            for u in updates {
                if u.dst_refname_bytes() == dst.as_bytes() && u.src() != expect {
                    return Err(git2::Error::from_str("stale lease"));
                }
            }
            Ok(())
        });
        cbs.push_update_reference(|name, status| {
            if let Some(s) = status {
                rejected = Some(format!("{name}: {s}"));
            }
            Ok(())
        });
        let mut po = git2::PushOptions::new();
        po.remote_callbacks(cbs);
        remote.push(&[format!("+refs/heads/{branch}:{dst}")], Some(&mut po))?;
    }
    if let Some(r) = rejected {
        bail!("libgit2 push rejected: {r}");
    }
    Ok(())
}

/// libgit2: list `url`'s refs (its protocol is v0); returns how many.
pub fn libgit2_ls_refs(url: &str) -> Result<usize> {
    let mut remote = git2::Remote::create_detached(url)?;
    remote.connect(git2::Direction::Fetch)?;
    let n = remote.list()?.len();
    remote.disconnect()?;
    Ok(n)
}

/// libgit2: `RepoBuilder::new().bare(true).clone(url, dest)`.
pub fn libgit2_fetch(url: &str, dest: &Path) -> Result<()> {
    git2::build::RepoBuilder::new()
        .bare(true)
        .clone(url, dest)?;
    Ok(())
}

/// libgit2: push `refs/heads/<branch>:<dst>` from `local` to `url`.
pub fn libgit2_push(url: &str, local: &Path, branch: &str, dst: &str) -> Result<()> {
    libgit2_push_in(url, &git2::Repository::open(local)?, branch, dst)
}

/// [`libgit2_push`] from a repository the caller keeps open.
pub fn libgit2_push_in(url: &str, repo: &git2::Repository, branch: &str, dst: &str) -> Result<()> {
    let mut remote = repo.remote_anonymous(url)?;
    let mut rejected: Option<String> = None;
    {
        let mut cbs = git2::RemoteCallbacks::new();
        cbs.push_update_reference(|name, status| {
            if let Some(s) = status {
                rejected = Some(format!("{name}: {s}"));
            }
            Ok(())
        });
        let mut po = git2::PushOptions::new();
        po.remote_callbacks(cbs);
        remote.push(&[format!("refs/heads/{branch}:{dst}")], Some(&mut po))?;
    }
    if let Some(r) = rejected {
        bail!("libgit2 push rejected: {r}");
    }
    Ok(())
}

/// A `git` command with the testkit's deterministic environment (no system
/// or global configuration).
pub fn git_cmd(dir: &Path) -> Command {
    let mut c = sluice_testkit::repo::git_command(dir);
    c.stdin(Stdio::null()).stdout(Stdio::null());
    c
}

/// `git ls-remote <url>`.
pub fn git_ls_remote(dir: &Path, url: &str) -> Command {
    let mut c = git_cmd(dir);
    c.args(["ls-remote", url]);
    c
}

/// `git clone --bare -q <url> <dest>`.
pub fn git_clone_bare(dir: &Path, url: &str, dest: &Path) -> Command {
    let mut c = git_cmd(dir);
    c.args(["clone", "--bare", "-q", url]).arg(dest);
    c
}

/// `git -C <local> push -q <url> refs/heads/<branch>:<dst>`.
pub fn git_push(local: &Path, url: &str, branch: &str, dst: &str) -> Command {
    let mut c = git_cmd(local);
    c.args(["push", "-q", url, &format!("refs/heads/{branch}:{dst}")]);
    c
}

/// `git -C <local> push -q --force-with-lease=<dst>:<expect> <url>
/// refs/heads/<branch>:<dst>`.
pub fn git_push_leased(local: &Path, url: &str, branch: &str, dst: &str, expect: &str) -> Command {
    let mut c = git_cmd(local);
    c.args([
        "push",
        "-q",
        &format!("--force-with-lease={dst}:{expect}"),
        url,
        &format!("refs/heads/{branch}:{dst}"),
    ]);
    c
}

/// `git ls-remote <url> <prefix>`.
pub fn git_ls_prefix(dir: &Path, url: &str, prefix: &str) -> Command {
    let mut c = git_cmd(dir);
    c.args(["ls-remote", url, prefix]);
    c
}

/// `git -C <dest> fetch -q <url> <refspec>`.
pub fn git_fetch_into(dest: &Path, url: &str, refspec: &str) -> Command {
    let mut c = git_cmd(dest);
    c.args(["fetch", "-q", url, refspec]);
    c
}

/// Runs `cmd`, failing with its stderr.
pub fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.stderr(Stdio::piped()).output()?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(())
}

/// A pack of the objects `new` has and `old` lacks, made by `git
/// pack-objects --thin` (untimed input of [`raw_push`]).
pub fn git_thin_pack(local: &Path, old: &str, new: &str) -> Result<Vec<u8>> {
    use std::io::Write as _;
    let mut child = git_cmd(local)
        .args(["pack-objects", "--stdout", "--thin", "-q", "--revs"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .context("pack-objects' stdin")?
        .write_all(format!("{new}\n^{old}\n").as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "git pack-objects failed: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(out.stdout)
}

/// The server's floor for a one-commit push: the least a client can do over
/// git://. Connects, reads the advertisement, writes one command and a pack
/// made beforehand, and reads the report to the end (no parsing beyond
/// checking it says `ok`). What this takes is the daemon's and
/// receive-pack's own time, for any client.
pub fn raw_push(
    addr: std::net::SocketAddr,
    repo: &str,
    old: &str,
    new: &str,
    dst: &str,
    pack: &[u8],
) -> Result<()> {
    use std::io::{BufReader, Write as _};
    fn pkt(out: &mut Vec<u8>, payload: &[u8]) {
        out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
        out.extend_from_slice(payload);
    }
    fn read_pkt(r: &mut impl std::io::BufRead) -> Result<Option<Vec<u8>>> {
        let mut len = [0u8; 4];
        r.read_exact(&mut len)?;
        let n = usize::from_str_radix(std::str::from_utf8(&len)?, 16)?;
        if n == 0 {
            return Ok(None);
        }
        let mut data = vec![0; n.checked_sub(4).context("a bad pkt-line length")?];
        r.read_exact(&mut data)?;
        Ok(Some(data))
    }
    let stream = std::net::TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut req = Vec::new();
    pkt(
        &mut req,
        format!(
            "git-receive-pack /{}\0host=127.0.0.1\0",
            repo.trim_start_matches('/')
        )
        .as_bytes(),
    );
    w.write_all(&req)?;
    while read_pkt(&mut r)?.is_some() {}
    let mut req = Vec::new();
    pkt(
        &mut req,
        format!("{old} {new} {dst}\0report-status side-band-64k quiet agent=bench-raw\n")
            .as_bytes(),
    );
    req.extend_from_slice(b"0000");
    req.extend_from_slice(pack);
    w.write_all(&req)?;
    let mut report = Vec::new();
    while let Some(p) = read_pkt(&mut r)? {
        if p.first() == Some(&1) {
            report.extend_from_slice(&p[1..]);
        }
    }
    let text = String::from_utf8_lossy(&report);
    if !text.contains("unpack ok") || !text.contains(&format!("ok {dst}")) {
        bail!("the raw push was not accepted: {text:?}");
    }
    Ok(())
}
