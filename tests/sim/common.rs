//! What the sim tests share: the repository root and the `scen` binary run from it.

use scen_core::report::Report;
use scen_core::trace::EventKind;
use std::path::Path;
use std::process::Command;

/// The repository root (scenario paths in tests are relative to it).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `scen ARGS` run in the repository root: (exit code, stdout, stderr).
pub fn scen(args: &[&str]) -> (i32, String, String) {
    scen_env(args, &[])
}

/// `scen ARGS` with extra environment variables.
pub fn scen_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scen"));
    cmd.args(args).current_dir(root());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("scen runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every event with its time, done texts blanked (the one place a run with values and one with symbolic payloads
/// differ).
pub fn events_without_results(r: &Report) -> Vec<String> {
    r.trace
        .events
        .iter()
        .map(|e| {
            let text = if e.kind == EventKind::Done && e.text.contains("digest ") {
                "<result>"
            } else {
                e.text.as_str()
            };
            format!("{} {:?} {:?} {:?} {text}", e.t_ms, e.rank, e.step, e.kind)
        })
        .collect()
}

/// Rank `rank`'s raise as `Type: text` when scenario text `src` is simulated with seed 0 (else
/// its verdict, printed).
pub fn raised_text(src: &str, rank: usize) -> String {
    let s = scen_core::scenario::parse(src, "t.toml", "t").expect("parses");
    let r = scen_sim::simulate(&s, Some(0)).expect("simulates");
    match &r.ranks[rank] {
        scen_core::verdict::RankVerdict::Failed {
            failure: scen_core::outcome::Failure::Raised { exception, message },
            ..
        } => format!("{exception}: {message}"),
        other => format!("{other:?}"),
    }
}
