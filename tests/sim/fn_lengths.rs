//! The run paths stay readable (issue 33): no function over 100 lines in the code that starts,
//! drives and watches a run (crates/sim, crates/hw and crates/torch at their top level,
//! crates/procs). Counted by scripts/fn-lengths.py, signature to closing brace.

use std::path::Path;
use std::process::Command;

/// The longest a function of a run path may be.
const MAX_FN_LINES: usize = 100;

#[test]
fn no_function_in_the_run_paths_is_over_100_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "crates/sim/src",
        "crates/hw/src",
        "crates/torch/src",
        "crates/procs/src",
    ] {
        let entries = std::fs::read_dir(root.join(dir)).expect("a source directory");
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs")),
        );
    }
    files.sort();
    assert!(files.len() > 20, "the run paths' files: {files:?}");
    let out = Command::new("python3")
        .arg(root.join("scripts/fn-lengths.py"))
        .args(["--over", &MAX_FN_LINES.to_string()])
        .args(&files)
        .output()
        .expect("python3 runs scripts/fn-lengths.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let over = String::from_utf8_lossy(&out.stdout);
    assert!(
        over.trim().is_empty(),
        "functions over {MAX_FN_LINES} lines (lines, where, name): split them along their phases\n{over}"
    );
}
