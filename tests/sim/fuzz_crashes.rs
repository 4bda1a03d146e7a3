//! Every input the fuzzer (fuzz/, docs/fuzzing.md) found crashing scen is kept in
//! tests/fuzz_crashes/ and must now give a clear error (exit 2) or a verdict (exit 0/1):
//! never a panic, an abort, an internal error or a hang.

use std::process::Command;

#[test]
fn every_fuzz_crash_gives_an_error_or_a_verdict() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_crashes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fuzz_crashes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut wrong = Vec::new();
    for f in &files {
        for args in [&["check"][..], &["run", "--format", "json"][..]] {
            let out = Command::new(env!("CARGO_BIN_EXE_scen"))
                .args(args)
                .arg(f)
                .output()
                .expect("scen runs");
            let code = out.status.code();
            let err = String::from_utf8_lossy(&out.stderr);
            if !matches!(code, Some(0..=2)) || err.contains("panicked") {
                wrong.push(format!("{} {args:?}: exit {code:?}: {err}", f.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
