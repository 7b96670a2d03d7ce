//! The user's side, side by side with git 2.47 on twin repositories: a
//! configured remote's name in place of the URL, the repository found from
//! the working directory, FETCH_HEAD, followed tags, an ambiguous source,
//! the remote-tracking ref after a push and the leases that read it, and a
//! repository owned by another user (`safe.directory`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common;

use common::*;
use sluice_testkit::repo;

/// `program args` run in `dir` with the tests' deterministic git
/// environment (no system or global config, fixed identity and dates) and
/// `env` on top.
fn run_in(program: &str, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(program);
    repo::deterministic_env(&mut cmd);
    cmd.current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    let out = cmd.output().expect("the program runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn git_in(dir: &Path, args: &[&str]) -> Run {
    run_in("git", dir, args, &[])
}

fn sl_in(dir: &Path, args: &[&str]) -> Run {
    run_in(env!("CARGO_BIN_EXE_sluice-remote"), dir, args, &[])
}

/// Two clones of the served repository (`origin` is the daemon's URL),
/// `a` for git and `b` for sluice-remote.
fn twins(w: &World) -> (PathBuf, PathBuf) {
    let clone = |name: &str| {
        let to = w.path(name);
        repo::git(w.dir.path(), &["clone", "-q", &w.url(), &p(&to)]);
        to
    };
    (clone("a"), clone("b"))
}

/// Every ref of `dir` with its value (symbolic refs as their target).
fn refs_of(dir: &Path) -> String {
    repo::git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname) %(symref)",
        ],
    )
}

fn fetch_head(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(".git/FETCH_HEAD")).unwrap_or_default()
}

/// The URL of the served repository with `tail` in place of `small.git`.
fn url_with(w: &World, tail: &str) -> String {
    w.url()
        .strip_suffix("small.git")
        .map(|base| format!("{base}{tail}"))
        .expect("the daemon's URL ends in small.git")
}

#[test]
fn a_remote_by_name_from_the_working_directory_fetches_and_writes_fetch_head_as_git() {
    let w = World::new();
    let srv = w.server();
    let (a, b) = twins(&w);
    let main = repo::commit_on(&srv, "main", "one more");
    repo::git(&srv, &["branch", "dev", "main~1"]);
    repo::git(&srv, &["tag", "t1", "main"]);
    for d in [&a, &b] {
        std::fs::create_dir_all(d.join("sub/deeper")).expect("subdirectory");
    }
    // `fetch origin`, no refspec, no --repo: the remote's fetch line, the
    // repository found upwards from a subdirectory.
    let g = git_in(&a.join("sub/deeper"), &["fetch", "-q", "origin"]);
    let s = sl_in(&b.join("sub/deeper"), &["fetch", "origin"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(refs_of(&a), refs_of(&b));
    assert!(refs_of(&b).contains(&format!("refs/remotes/origin/main {main}")));
    assert!(refs_of(&b).contains("refs/tags/t1 "), "a followed tag");
    // FETCH_HEAD: main (branch.main.merge) for merge, the rest not.
    assert!(fetch_head(&b).starts_with(&format!("{main}\t\tbranch 'main' of ")));
    assert_eq!(fetch_head(&a), fetch_head(&b));

    // A source alone: nothing but FETCH_HEAD is written, as git writes it,
    // and said as git says it.
    let url = w.url();
    let url = url.as_str();
    let g = git_in(&a, &["fetch", url, "refs/heads/dev"]);
    let s = sl_in(&b, &["fetch", url, "refs/heads/dev"]);
    let line = |r: &Run| {
        let out = format!("{}{}", r.stdout, r.stderr);
        out.lines()
            .find(|l| l.contains("-> FETCH_HEAD"))
            .map(str::to_string)
    };
    assert_eq!(line(&g), line(&s), "{g:?}\n{s:?}");
    assert!(line(&s).is_some(), "{s:?}");
    for args in [
        vec!["fetch", "-q", url, "refs/heads/dev"],
        vec!["fetch", "-q", url],
        vec!["fetch", "-q", url, "refs/heads/*:refs/x/*", "refs/tags/t1"],
        vec![
            "fetch",
            "-q",
            url,
            "+refs/heads/*:refs/y/*",
            "refs/heads/main:refs/z/main",
        ],
    ] {
        let g = git_in(&a, &args);
        let s = sl_in(&b, &[&args[..1], &args[2..]].concat());
        assert_eq!((g.code, s.code), (0, 0), "{args:?}: {g:?}\n{s:?}");
        assert_eq!(fetch_head(&a), fetch_head(&b), "{args:?}");
        assert_eq!(refs_of(&a), refs_of(&b), "{args:?}");
    }

    // A remote read as git reads it: url rewritten by insteadOf, tagOpt.
    let base = url_with(&w, "");
    for d in [&a, &b] {
        repo::git(d, &["config", &format!("url.{base}.insteadOf"), "short:"]);
        repo::git(d, &["config", "remote.other.url", "short:small.git"]);
        repo::git(
            d,
            &[
                "config",
                "remote.other.fetch",
                "+refs/heads/*:refs/remotes/other/*",
            ],
        );
        repo::git(
            d,
            &[
                "config",
                "--add",
                "remote.other.fetch",
                "refs/tags/t1:refs/kept/t1",
            ],
        );
        repo::git(d, &["config", "remote.other.tagOpt", "--no-tags"]);
    }
    let tip = repo::commit_on(&srv, "main", "tagged, not followed");
    repo::git(&srv, &["tag", "t2", &tip]);
    let g = git_in(&a, &["fetch", "-q", "other"]);
    let s = sl_in(&b, &["fetch", "other", "--json"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(refs_of(&a), refs_of(&b));
    assert!(!refs_of(&b).contains("refs/tags/t2"), "tagOpt --no-tags");
    assert!(refs_of(&b).contains("refs/kept/t1"), "every fetch line");
    assert_eq!(fetch_head(&a), fetch_head(&b));
    let doc = s.json();
    assert_eq!(doc["operation"]["remote"], w.url(), "the resolved URL");

    // Refspecs given to a named remote: its fetch lines still move the
    // remote-tracking refs of what was fetched (git's opportunistic
    // update), and FETCH_HEAD holds only what was asked.
    let dev = repo::commit_on(&srv, "dev", "dev moves");
    let g = git_in(&a, &["fetch", "-q", "origin", "dev"]);
    let s = sl_in(&b, &["fetch", "origin", "dev"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(repo::rev_parse(&b, "refs/remotes/origin/dev"), Some(dev));
    assert_eq!(refs_of(&a), refs_of(&b));
    assert_eq!(fetch_head(&a), fetch_head(&b));
}

#[test]
fn a_followed_tag_never_clobbers_and_an_explicit_tag_refspec_keeps_gits_rule() {
    let w = World::new();
    let srv = w.server();
    repo::git(&srv, &["tag", "v1", "main"]);
    let (a, b) = twins(&w);
    let old = repo::rev_parse(&a, "refs/tags/v1").expect("v1 cloned");
    // The server moves v1 into history the fetch of main brings.
    let new = repo::commit_on(&srv, "main", "v1 moves here");
    repo::git(&srv, &["tag", "-f", "v1", &new]);
    let spec = "refs/heads/main:refs/remotes/origin/main";
    let g = git_in(&a, &["fetch", "-q", &w.url(), spec]);
    let s = sl_in(&b, &["fetch", &w.url(), spec]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert!(!s.stdout.contains("clobber"), "{s:?}");
    assert_eq!(repo::rev_parse(&b, "refs/tags/v1"), Some(old.clone()));
    assert_eq!(refs_of(&a), refs_of(&b));
    assert_eq!(fetch_head(&a), fetch_head(&b));
    // Every later fetch too.
    let again = sl_in(&b, &["fetch", &w.url(), spec]);
    assert_eq!(again.code, 0, "{again:?}");

    // A refspec naming the tag, or --tags: git's rule stands.
    let url = w.url();
    let url = url.as_str();
    for args in [
        vec!["fetch", url, "refs/tags/v1:refs/tags/v1"],
        vec!["fetch", "--tags", url, spec],
    ] {
        let g = git_in(&a, &args);
        let s = sl_in(&b, &args);
        assert_eq!((g.code, s.code), (1, 1), "{args:?}: {g:?}\n{s:?}");
        assert!(s.stderr.contains("(would clobber existing tag)"), "{s:?}");
        assert_eq!(repo::rev_parse(&b, "refs/tags/v1"), Some(old.clone()));
        assert_eq!(refs_of(&a), refs_of(&b));
    }
}

#[test]
fn an_ambiguous_source_is_refused_naming_both_refs() {
    let w = World::new();
    let (a, b) = twins(&w);
    for d in [&a, &b] {
        repo::git(d, &["branch", "amb", "main~1"]);
        repo::git(d, &["tag", "amb", "main"]);
    }
    let g = git_in(&a, &["push", &w.url(), "amb:amb"]);
    let s = sl_in(&b, &["push", &w.url(), "amb:amb"]);
    assert_eq!(g.code, 1, "{g:?}");
    assert!(g.stderr.contains("src refspec amb matches more than one"));
    assert_eq!(s.code, 2, "{s:?}");
    assert_eq!(s.stdout, "");
    let first = s.first_err_line();
    assert!(
        first.contains("matches more than one")
            && first.contains("refs/heads/amb")
            && first.contains("refs/tags/amb"),
        "{s:?}"
    );
    let on_server = repo::refs(&w.server());
    assert!(
        !on_server.keys().any(|r| r.ends_with("/amb")),
        "{on_server:?}"
    );
    // Named in full, it is pushed.
    let full = sl_in(&b, &["push", &w.url(), "refs/heads/amb:refs/heads/amb"]);
    assert_eq!(full.code, 0, "{full:?}");
}

#[test]
fn a_push_by_remote_name_updates_the_tracking_ref_that_a_later_lease_reads() {
    let w = World::new();
    let (a, b) = twins(&w);
    let commit = |d: &Path, m: &str| {
        repo::git(d, &["commit", "-q", "--allow-empty", "-m", m]);
        repo::git(d, &["rev-parse", "HEAD"])
    };
    let (ga, gb) = (commit(&a, "first"), commit(&b, "first"));
    assert_eq!(ga, gb, "twins");
    let g = git_in(&a, &["push", "origin", "main:refs/heads/ta"]);
    let s = sl_in(&b, &["push", "origin", "main:refs/heads/tb", "--json"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(s.json()["operation"]["remote"], w.url());
    assert_eq!(
        repo::rev_parse(&a, "refs/remotes/origin/ta"),
        Some(ga.clone())
    );
    assert_eq!(
        repo::rev_parse(&b, "refs/remotes/origin/tb"),
        Some(gb.clone())
    );

    // A lease without a value reads that tracking ref: not stale.
    let (ga, gb) = (commit(&a, "second"), commit(&b, "second"));
    let g = git_in(&a, &["push", "origin", "main:ta", "--force-with-lease=ta"]);
    let s = sl_in(&b, &["push", "origin", "main:tb", "--lease", "tb"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/ta"),
        Some(ga.clone())
    );
    assert_eq!(
        repo::rev_parse(&w.server(), "refs/heads/tb"),
        Some(gb.clone())
    );
    assert_eq!(repo::rev_parse(&b, "refs/remotes/origin/tb"), Some(gb));

    // By URL: the remote whose URL names the same repository (no `.git`).
    let gb = commit(&b, "third");
    let s = sl_in(
        &b,
        &["push", &url_with(&w, "small"), "main:tb", "--lease", "tb"],
    );
    assert_eq!(s.code, 0, "{s:?}");
    assert_eq!(repo::rev_parse(&b, "refs/remotes/origin/tb"), Some(gb));
    // A URL no remote has: exit 2, saying so (not "invalid ref name").
    let other = format!("git://127.0.0.1:{}/elsewhere.git", dead_port());
    let s = sl_in(&b, &["push", &other, "main:tb", "--lease", "tb"]);
    assert_eq!(s.code, 2, "{s:?}");
    assert!(
        s.first_err_line()
            .contains("no remote is configured with this URL")
            && !s.stderr.contains("invalid ref name"),
        "{s:?}"
    );
    // Refused by the remote: the tracking ref stays.
    let before = repo::rev_parse(&b, "refs/remotes/origin/tb");
    repo::git(&b, &["reset", "-q", "--hard", "HEAD~2"]);
    let s = sl_in(&b, &["push", "origin", "main:tb"]);
    assert_eq!(s.code, 1, "{s:?}");
    assert_eq!(repo::rev_parse(&b, "refs/remotes/origin/tb"), before);
}

/// Whether this process runs as root (`id -u`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
fn a_repository_owned_by_another_user_is_refused_unless_safe_directory_allows_it() {
    assert!(
        is_root(),
        "this test runs the CLI as another user through runuser, which needs root (as CI has)"
    );
    let w = World::new();
    // Readable by others: the repository stays root's.
    let dir = tempfile::tempdir().expect("tempdir");
    let top = dir.path();
    std::fs::set_permissions(top, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let repo_dir = top.join("r");
    repo::git(top, &["clone", "-q", "--bare", &w.url(), &p(&repo_dir)]);
    let marker = top.join("ssh-command-ran");
    repo::git(
        &repo_dir,
        &[
            "config",
            "core.sshCommand",
            &format!("touch {}", p(&marker)),
        ],
    );
    // The repository's own safe.directory counts for nothing.
    repo::git(&repo_dir, &["config", "safe.directory", "*"]);
    let global = top.join("global.gitconfig");
    std::fs::write(&global, format!("[safe]\n\tdirectory = {}\n", p(&repo_dir))).expect("write");
    let shown = p(&global);

    let as_nobody = |program: &str, args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["-u", "nobody", "--", program];
        all.extend_from_slice(args);
        let mut env = env.to_vec();
        env.push(("HOME", "/nonexistent"));
        run_in("runuser", top, &all, &env)
    };
    // `nobody` runs a copy of the binary in the 0755 directory: the build's
    // own directory may sit under a private (0700) one.
    let bin = top.join("sluice-remote");
    std::fs::copy(env!("CARGO_BIN_EXE_sluice-remote"), &bin).expect("copy the binary");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let sl = &p(&bin);
    let ssh = "ssh://127.0.0.1:1/x.git";
    let r = p(&repo_dir);

    // Refused, before its core.sshCommand could run; git refuses too.
    let s = as_nobody(sl, &["push", ssh, "main:refs/heads/n", "--repo", &r], &[]);
    assert_eq!(s.code, 5, "{s:?}");
    assert_eq!(s.stdout, "");
    assert!(
        s.stderr.contains("owned by another user") && s.stderr.contains("safe.directory"),
        "{s:?}"
    );
    assert!(!marker.exists(), "the repository's ssh command ran");
    let j = as_nobody(
        sl,
        &["fetch", &w.url(), "refs/heads/main", "--repo", &r, "--json"],
        &[],
    );
    assert_eq!(j.code, 5, "{j:?}");
    let doc = j.json();
    check_document(&doc, "fetch", "read");
    assert_eq!(doc["result"], "local-error");
    assert_eq!(doc["stopped"], "local-error");
    assert!(j.stderr.contains("safe.directory"), "{j:?}");
    let g = as_nobody("git", &["-C", &r, "push", ssh, "main:refs/heads/n"], &[]);
    assert_eq!(g.code, 128, "{g:?}");
    assert!(g.stderr.contains("dubious ownership"), "{g:?}");
    let s = as_nobody(sl, &["fetch", &w.url(), "refs/heads/main"], &[]);
    assert_eq!(s.code, 2, "the working directory is no repository: {s:?}");
    let s = as_nobody(sl, &["ls-refs", &w.url()], &[]);
    assert_eq!(s.code, 0, "ls-refs needs no repository: {s:?}");

    // Allowed by the global config, or by the command line's (`*`): both
    // push, as git does.
    let allowed: [(&str, Vec<(&str, &str)>); 2] = [
        ("global", vec![("GIT_CONFIG_GLOBAL", shown.as_str())]),
        (
            "cli",
            vec![
                ("GIT_CONFIG_COUNT", "1"),
                ("GIT_CONFIG_KEY_0", "safe.directory"),
                ("GIT_CONFIG_VALUE_0", "*"),
            ],
        ),
    ];
    for (how, env) in &allowed {
        let dst = format!("refs/heads/sl-{how}");
        let s = as_nobody(
            sl,
            &["push", &w.url(), &format!("main:{dst}"), "--repo", &r],
            env,
        );
        assert_eq!(s.code, 0, "{how}: {s:?}");
        let gdst = format!("refs/heads/git-{how}");
        let g = as_nobody(
            "git",
            &["-C", &r, "push", &w.url(), &format!("main:{gdst}")],
            env,
        );
        assert_eq!(g.code, 0, "{how}: {g:?}");
        assert_eq!(
            repo::rev_parse(&w.server(), &dst),
            repo::rev_parse(&w.server(), &gdst)
        );
    }
    assert!(!marker.exists());
}
