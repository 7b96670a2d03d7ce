//! The README starts with the two commands, and its library example is the
//! example program the tests build (so it compiles).

use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
}

#[test]
fn the_readme_library_example_is_the_push_example_program() {
    let readme = read("../../README.md");
    let section = &readme[readme.find("## The library").expect("a library section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &section[start..start + section[start..].find("```").expect("closed")];
    let example = read("examples/push.rs");
    let body = &example[example
        .find("use std::sync::Arc;")
        .expect("the example's code")..];
    assert_eq!(block, body, "README and examples/push.rs differ");
}
