//! The run paths stay readable (issue 33): no function over 100 lines in the code that starts,
//! drives and watches a run (crates/sim, crates/hw with its bench, crates/torch with its
//! translation, crates/procs) or runs a rank's program (crates/core/src/runtime). Counted by
//! scripts/fn-lengths.py, signature to closing brace.

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
        "crates/core/src/runtime",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 60, "the run paths' files: {files:?}");
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

/// The `.rs` files under `dir`, at any depth.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("a source directory")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
