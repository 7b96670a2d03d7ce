//! The demo runs to exit 0 from a clean checkout, with nothing but git; a
//! build without the `demo` feature (the service's) says it has none.

use crate::common;

#[cfg(feature = "demo")]
#[test]
fn the_demo_runs_every_step_as_described_and_exits_0() {
    let run = common::sluice(&["demo"]);
    assert_eq!(run.code, 0, "{run:?}");
    for step in ["1. Fetch", "2. Push", "3. Push", "4. ls-refs"] {
        assert!(run.stdout.contains(step), "{step} missing: {}", run.stdout);
    }
    assert_eq!(
        run.stdout.matches("=> as described.").count(),
        4,
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("settled by reading: landed"),
        "{}",
        run.stdout
    );
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("The temporary files were in "))
        .expect("where the files were");
    let dir = line
        .trim_start_matches("The temporary files were in ")
        .trim_end_matches("; removing them.");
    assert!(!std::path::Path::new(dir).exists(), "{dir} was not removed");
}

#[cfg(not(feature = "demo"))]
#[test]
fn a_build_without_the_demo_feature_says_so_and_exits_2() {
    let run = common::sluice(&["demo"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.contains("built without its demo"),
        "{}",
        run.stderr
    );
}
