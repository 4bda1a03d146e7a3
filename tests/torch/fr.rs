//! Replays of real flight-recorder dumps on real PyTorch: `scen import-fr` turns the fixtures
//! under tests/fixtures/fr (real PyTorch 2.15 gloo jobs) into scenarios, and torch mode must
//! reproduce what the dumped jobs did, the replay's own expectations holding. Only the
//! situations whose timeouts are short enough to run here: gloo_timeout (2 s) and
//! size_mismatch (completes at once); the 120 s and 1800 s stalls are replayed by the
//! simulator in tests/sim/fr.rs.

use std::path::Path;
use std::process::Command;

/// `(case, what each rank's outcome line must say)`.
const CASES: [(&str, &[&str]); 2] = [
    (
        "gloo_timeout",
        &[
            "rank   0: fails in #3 all_reduce",
            "rank   1: fails in #3 all_reduce",
            "Timed out waiting 2000ms for",
            "rank   2: completes",
        ],
    ),
    // Each rank's own line: equal outcomes share a line only when their times are equal too.
    (
        "size_mismatch",
        &["rank   0: completes", "rank   1: completes"],
    ),
];

pub fn replays_do_what_the_dumped_jobs_did(root: &Path, python: &Path) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("scen-torch-fr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let r = CASES
        .iter()
        .try_for_each(|(case, want)| one(root, python, &dir, case, want));
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn one(root: &Path, python: &Path, dir: &Path, case: &str, want: &[&str]) -> Result<(), String> {
    let scenario = dir.join(format!("{case}.toml"));
    let scen = |args: &[&std::ffi::OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_scen"))
            .current_dir(root)
            .args(args)
            .output()
            .map_err(|e| e.to_string())
    };
    let dumps = format!("tests/fixtures/fr/{case}/pickle");
    let o = scen(&[
        "import-fr".as_ref(),
        dumps.as_ref(),
        "-o".as_ref(),
        scenario.as_os_str(),
    ])?;
    if !o.status.success() {
        return Err(format!(
            "{case}: import-fr: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let o = scen(&[
        "run".as_ref(),
        "--torch".as_ref(),
        scenario.as_os_str(),
        "--python".as_ref(),
        python.as_os_str(),
    ])?;
    let out = String::from_utf8_lossy(&o.stdout);
    if o.status.code() != Some(0) {
        return Err(format!(
            "{case}: the replay's expectations fail on real torch:\n{out}"
        ));
    }
    match want.iter().find(|w| !out.contains(**w)) {
        Some(w) => Err(format!("{case}: no `{w}` in the real run:\n{out}")),
        None => Ok(()),
    }
}
