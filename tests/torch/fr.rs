//! Replays of real flight-recorder dumps on real PyTorch: `scen import-fr` turns the fixtures
//! under tests/fixtures/fr (real PyTorch 2.15 gloo jobs) into scenarios, and torch mode must
//! reproduce what the dumped jobs did, the replay's own expectations holding. Only the
//! situations whose timeouts are short enough to run here: gloo_timeout (2 s) and
//! size_mismatch (completes at once); the 120 s and 1800 s stalls are replayed by the
//! simulator in tests/sim/fr.rs.

use std::path::Path;
use std::process::Command;

/// `(case, each rank's outcome as the JSON report gives it: "completes", or "fails #STEP" and,
/// after a `|`, a part of its error text)`. Read from the report, not the human summary, which
/// merges ranks whose outcome and time are equal.
const CASES: [(&str, &[&str]); 2] = [
    (
        "gloo_timeout",
        &[
            "fails #3|Timed out waiting 2000ms for",
            "fails #3|Timed out waiting 2000ms for",
            "completes",
        ],
    ),
    ("size_mismatch", &["completes", "completes"]),
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
        "--format".as_ref(),
        "json".as_ref(),
    ])?;
    let out = String::from_utf8_lossy(&o.stdout);
    if o.status.code() != Some(0) {
        return Err(format!(
            "{case}: the replay's expectations fail on real torch:\n{out}"
        ));
    }
    let report: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("{case}: report: {e}\n{out}"))?;
    let got: Vec<String> = report["ranks"]
        .as_array()
        .map(|rs| rs.iter().map(outcome).collect())
        .unwrap_or_default();
    let matches = |g: &String, w: &&str| match w.split_once('|') {
        Some((head, part)) => g.starts_with(head) && g.contains(part),
        None => g.starts_with(w),
    };
    let holds = got.len() == want.len() && got.iter().zip(want).all(|(g, w)| matches(g, w));
    if holds {
        Ok(())
    } else {
        Err(format!("{case}: real run's ranks {got:?}, want {want:?}"))
    }
}

/// One rank of the JSON report as CASES spells it.
fn outcome(r: &serde_json::Value) -> String {
    match r["outcome"].as_str() {
        Some("fails") => format!(
            "fails #{} {}",
            r["at"]["step"].as_u64().unwrap_or(0),
            r["error"].as_str().unwrap_or("")
        ),
        Some(o) => o.to_string(),
        None => "?".into(),
    }
}
