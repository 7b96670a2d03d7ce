//! Deleting as git deletes, beside git on twin remotes: `push --delete
//! <REF>...` and `:<short>` expanded by the remote's refs, a line for every
//! ref asked (a deletion of a ref the remote lacks, `Everything
//! up-to-date`), and fetch's ref lines on stderr as git's.

use std::path::{Path, PathBuf};

use crate::common;

use common::*;
use sluice_testkit::{fixtures, repo};

/// Twin remotes served by one daemon (`small.git` for git, `twin.git` for
/// sluice-remote, the same fixture) and a clone of each.
struct Twins {
    w: World,
    a: PathBuf,
    b: PathBuf,
}

impl Twins {
    fn new() -> Twins {
        let w = World::new();
        fixtures::copy_of("small", &w.path("srv/twin.git")).expect("the small fixture");
        let a = clone_of(&w.url(), &w.path("a"));
        let b = clone_of(&twin_url(&w), &w.path("b"));
        Twins { w, a, b }
    }

    fn servers(
        &self,
    ) -> (
        std::collections::BTreeMap<String, String>,
        std::collections::BTreeMap<String, String>,
    ) {
        (
            repo::refs(&self.w.server()),
            repo::refs(&self.w.path("srv/twin.git")),
        )
    }
}

fn twin_url(w: &World) -> String {
    w.url().replace("small.git", "twin.git")
}

/// The ref lines of a push's output (` - [deleted]  x`, ...), the `To`
/// line and git's own error lines aside, spaces collapsed.
fn ref_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(' ') || *l == "Everything up-to-date")
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn both(t: &Twins, git: &[&str], ours: &[&str]) -> (Run, Run) {
    (git_in(&t.a, git), sl_in(&t.b, ours))
}

fn same(t: &Twins, args: &[&str]) -> (Run, Run) {
    both(t, &[&["push"], args].concat(), &[&["push"], args].concat())
}

#[test]
fn delete_and_colon_short_names_delete_what_git_deletes_with_gits_lines() {
    let t = Twins::new();
    // --delete, a branch and a tag by their short names.
    let (g, s) = same(&t, &["origin", "--delete", "feature", "light"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout), ref_lines(&g.stderr), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout).len(), 2, "{s:?}");
    let (ga, sb) = t.servers();
    assert_eq!(ga, sb);
    assert!(!sb.contains_key("refs/heads/feature") && !sb.contains_key("refs/tags/light"));

    // `:release`, expanded by the remote's refs.
    let (g, s) = same(&t, &["origin", ":release"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout), ref_lines(&g.stderr), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout), ["- [deleted] release"], "{s:?}");
    let (ga, sb) = t.servers();
    assert_eq!(ga, sb);

    // A full name the remote lacks: git sends it and prints its line.
    let (g, s) = same(&t, &["origin", ":refs/heads/never-was"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout), ["- [deleted] never-was"], "{s:?}");
    assert_eq!(ref_lines(&s.stdout), ref_lines(&g.stderr), "{g:?}\n{s:?}");

    // A short name the remote lacks: git refuses before sending anything
    // (exit 1); it is bad input here (exit 2), nothing deleted either way.
    let before = t.servers();
    let (g, s) = same(&t, &["origin", "--delete", "main", "never-was"]);
    assert_eq!(g.code, 1, "{g:?}");
    assert!(g.stderr.contains("unable to delete 'never-was'"), "{g:?}");
    assert_eq!(s.code, 2, "{s:?}");
    assert_eq!(s.stdout, "");
    assert!(
        s.first_err_line().contains("never-was") && s.first_err_line().contains("does not exist"),
        "{s:?}"
    );
    assert_eq!(t.servers(), before);

    // --delete takes plain names: SRC:DST among them is refused (git: 128).
    let (g, s) = same(&t, &["origin", "--delete", "main:x"]);
    assert_eq!(g.code, 128, "{g:?}");
    assert_eq!(s.code, 2, "{s:?}");
    assert!(s.first_err_line().contains("--delete"), "{s:?}");
    assert_eq!(t.servers(), before);
}

#[test]
fn an_up_to_date_push_says_everything_up_to_date_as_git() {
    let t = Twins::new();
    let (g, s) = same(&t, &["origin", "main"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(g.stderr, "Everything up-to-date\n", "{g:?}");
    assert_eq!(s.stdout, "Everything up-to-date\n", "{s:?}");
    // -v: the ref's line, then the same words.
    let (g, s) = same(&t, &["-v", "origin", "main"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(ref_lines(&s.stdout), ref_lines(&g.stderr), "{g:?}\n{s:?}");
    assert_eq!(
        ref_lines(&s.stdout),
        ["= [up to date] main -> main", "Everything up-to-date"]
    );
    // -q: nothing, as git push -q.
    let (g, s) = same(&t, &["-q", "origin", "main"]);
    assert_eq!((g.stdout.as_str(), g.stderr.as_str()), ("", ""), "{g:?}");
    assert_eq!((s.stdout.as_str(), s.stderr.as_str()), ("", ""), "{s:?}");
}

#[test]
fn fetch_prints_its_ref_lines_on_stderr_as_git() {
    let t = Twins::new();
    for srv in [t.w.server(), t.w.path("srv/twin.git")] {
        new_branch(&srv);
    }
    let g = git_in(&t.a, &["fetch", "origin"]);
    let s = sl_in(&t.b, &["fetch", "origin"]);
    assert_eq!((g.code, s.code), (0, 0), "{g:?}\n{s:?}");
    assert_eq!(s.stdout, "", "{s:?}");
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(' '))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(lines(&s.stderr), lines(&g.stderr), "{g:?}\n{s:?}");
    assert_eq!(lines(&s.stderr), ["* [new branch] fresh -> origin/fresh"]);
    assert!(s.stderr.starts_with("From git://"), "{s:?}");
}

fn new_branch(srv: &Path) {
    let main = repo::rev_parse(srv, "refs/heads/main").expect("main");
    repo::git(srv, &["update-ref", "refs/heads/fresh", &main]);
}
