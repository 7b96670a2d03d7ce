//! The README is true: it starts with the two commands; its library quick
//! start is the example program `crates/cli/examples/quick_start.rs`
//! (compiled into this test binary and run here against a `git daemon` on
//! 127.0.0.1); its push example is `examples/push.rs` and its landing
//! loop `examples/integrator.rs`; the gix version and
//! MSRV it states are the workspace's; its JSON examples carry every key
//! the program prints; `<src>` alone works as its option table says; and
//! it names no file the repository does not hold.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first ```rust block after `heading`.
fn rust_block<'a>(readme: &'a str, heading: &str) -> &'a str {
    let section = &readme[readme
        .find(heading)
        .unwrap_or_else(|| panic!("a section {heading:?}"))..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    &section[start..start + section[start..].find("```").expect("closed")]
}

/// `file`'s code from its first `use` line on (its module doc aside).
fn code_of(file: &str) -> String {
    let text = read(file);
    text[text.find("\nuse ").expect("the example's code") + 1..].to_string()
}

#[test]
fn the_readme_starts_with_the_demo_and_test_commands() {
    let readme = read("../../README.md");
    let head: String = readme.lines().take(8).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("cargo run --release -p sluice-remote -- demo"),
        "{head}"
    );
    assert!(head.contains("bash scripts/test.sh"), "{head}");
    let quick = readme
        .find("## Quick start: the library")
        .expect("a quick start");
    let first_section = readme.find("\n## ").expect("sections");
    assert_eq!(quick, first_section + 1, "the quick start comes first");
}

#[test]
fn the_readme_library_examples_are_the_example_programs() {
    let readme = read("../../README.md");
    assert_eq!(
        rust_block(&readme, "## Quick start: the library"),
        code_of("examples/quick_start.rs"),
        "README and examples/quick_start.rs differ"
    );
    assert_eq!(
        rust_block(&readme, "## The library: every outcome"),
        code_of("examples/push.rs"),
        "README and examples/push.rs differ"
    );
    assert_eq!(
        rust_block(&readme, "## The library: a landing loop"),
        code_of("examples/integrator.rs"),
        "README and examples/integrator.rs differ"
    );
    assert_eq!(
        rust_block(&readme, "## The library: async (tokio)"),
        code_of("examples/async_service.rs"),
        "README and examples/async_service.rs differ"
    );
}

#[test]
fn the_quick_start_lists_fetches_and_pushes_against_a_real_server_with_a_persistent_ledger() {
    let w = World::new();
    let local = w.empty("local.git");
    let ledger = w.path("ops.db");
    let doc = crate::quick_start::quick_start(&w.url(), &local, &ledger).expect("runs");
    let doc: Value = serde_json::from_str(&doc).expect("a JSON document");
    check_document(&doc, "push", "write");
    assert_eq!(doc["result"], "succeeded", "{doc}");
    assert_eq!(doc["operation"]["id"], "quick-start-1", "{doc}");
    assert_eq!(doc["value"][0]["ref"], "refs/heads/quick-start", "{doc}");
    assert_eq!(doc["value"][0]["status"], "ok", "{doc}");
    let rev = |repo: &Path, name: &str| {
        let out = Command::new("git")
            .args(["rev-parse", "--verify", name])
            .current_dir(repo)
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let main = rev(&w.server(), "refs/heads/main");
    assert_eq!(rev(&local, "refs/remotes/origin/main"), main, "fetched");
    assert_eq!(rev(&w.server(), "refs/heads/quick-start"), main, "pushed");
    // The ledger outlives the process: the id is there, with what ran.
    let show = sluice(&[
        "ledger",
        "show",
        "quick-start-1",
        "--ledger",
        &p(&ledger),
        "--json",
    ]);
    assert_eq!(show.code, 0, "{show:?}");
    let doc = show.json();
    assert_eq!(doc["schema"], 1, "{doc}");
    let entry = &doc["entry"];
    assert_eq!(entry["kind"], "push", "{entry}");
    assert_eq!(
        entry["refs"],
        serde_json::json!([format!("{main}:refs/heads/quick-start")]),
        "{entry}"
    );
}

#[test]
fn the_readme_states_the_workspaces_gix_version_and_msrv() {
    let readme = read("../../README.md");
    let manifest = read("../../Cargo.toml");
    let value_of = |key: &str| {
        let line = manifest
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key} in Cargo.toml"));
        let start = line.find('"').expect("a quoted value") + 1;
        line[start..start + line[start..].find('"').expect("closed")].to_string()
    };
    let gix = value_of("gix = ");
    let msrv = value_of("rust-version = ");
    assert!(
        readme.contains(&format!("gix = {{ version = \"{gix}\"")),
        "the Cargo.toml snippet pins gix {gix}"
    );
    assert!(
        readme.contains(&format!("**gix {gix}")),
        "gix {gix} is named"
    );
    assert!(
        readme.contains(&format!("**Rust {msrv} or later**")),
        "the MSRV is {msrv}"
    );
}

/// Every key path of a JSON value (`operation.kind`, `value[].status`),
/// arrays' elements merged.
fn key_paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(path.clone());
                key_paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

fn paths(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    key_paths(v, "", &mut out);
    out
}

/// The one-line JSON document the README shows after `$ <command>`.
fn readme_document(readme: &str, command: &str) -> Value {
    let at = readme
        .lines()
        .position(|l| {
            l.starts_with("$ sluice-remote ") && l.contains(command) && l.ends_with("--json")
        })
        .unwrap_or_else(|| panic!("a `{command} … --json` example"));
    let line = readme.lines().nth(at + 1).expect("its output");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{command}: not JSON ({e}): {line}"))
}

#[test]
fn the_readme_json_examples_carry_every_key_the_program_prints() {
    let readme = read("../../README.md");
    let w = World::new();
    let local = w.empty("local.git");
    let work = w.clone_bare("work.git");
    let fetch = sluice(&[
        "fetch",
        &w.url(),
        "refs/heads/*:refs/remotes/origin/*",
        "--repo",
        &p(&local),
        "--json",
    ]);
    assert_eq!(fetch.code, 0, "{fetch:?}");
    let push = sluice(&[
        "push",
        &w.url(),
        "main:refs/heads/topic2",
        "--repo",
        &p(&work),
        "--json",
    ]);
    assert_eq!(push.code, 0, "{push:?}");
    let http = TinyHttp::start(200, "hello\n");
    let get = sluice(&["http", "get", &http.url("/hello.txt"), "--json"]);
    assert_eq!(get.code, 0, "{get:?}");
    for (command, run) in [("fetch", &fetch), ("push", &push), ("http get", &get)] {
        assert_eq!(
            paths(&readme_document(&readme, command)),
            paths(&run.json()),
            "the README's {command} document and the program's"
        );
    }
    // The pretty-printed ls-refs document of "The JSON document".
    let section = &readme[readme.find("### The JSON document").expect("a section")..];
    let start = section.find("\n{\n").expect("a document") + 1;
    let end = start + section[start..].find("\n}\n").expect("closed") + 2;
    let shown: Value = serde_json::from_str(&section[start..end]).expect("JSON");
    let ls = sluice(&[
        "ls-refs",
        &w.url(),
        "--prefix",
        "HEAD",
        "--prefix",
        "refs/tags/v",
        "--json",
    ]);
    assert_eq!(ls.code, 0, "{ls:?}");
    assert_eq!(paths(&shown), paths(&ls.json()), "the ls-refs document");
}

#[test]
fn a_source_alone_pushes_to_the_same_name_as_the_option_table_says() {
    let readme = read("../../README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `<src>` alone"))
        .expect("the table's row");
    assert!(!row.contains("| no |"), "{row}");
    let w = World::new();
    let work = w.clone_bare("work.git");
    Command::new("git")
        .args(["branch", "solo", "main"])
        .current_dir(&work)
        .status()
        .expect("git runs");
    let run = sluice(&["push", &w.url(), "solo", "--repo", &p(&work)]);
    assert_eq!(run.code, 0, "{run:?}");
    let out = Command::new("git")
        .args(["rev-parse", "--verify", "refs/heads/solo"])
        .current_dir(w.server())
        .output()
        .expect("git runs");
    assert!(out.status.success(), "refs/heads/solo was pushed: {run:?}");
}

#[test]
fn the_readme_names_no_file_the_repository_does_not_hold() {
    let readme = read("../../README.md");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for word in readme.split(|c: char| c.is_whitespace() || "`()[],;:\"'".contains(c)) {
        if word.ends_with(".md") || word.ends_with(".sh") {
            assert!(root.join(word).exists(), "{word} is not in the repository");
        }
    }
}

/// Every command `sluice-remote forge --help` lists is in the README's
/// command-line section: in its synopsis and with an example.
#[test]
fn the_readme_lists_every_forge_command_with_an_example() {
    let readme = read("../../README.md");
    let start = readme.find("## The command line").expect("the section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let help = sluice(&["forge", "--help"]);
    assert_eq!(help.code, 0, "{help:?}");
    let commands: Vec<&str> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 7, "{commands:?}\n{help:?}");
    for c in commands {
        let synopsis = format!("sluice-remote forge {c} <OWNER>/<REPO>");
        let example = format!("$ sluice-remote forge {c} octo/repo");
        assert!(section.contains(&synopsis), "no synopsis of {c}");
        assert!(section.contains(&example), "no example of {c}");
    }
}
