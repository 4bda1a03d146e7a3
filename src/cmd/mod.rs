//! One module per subcommand: argument handling, printing and exit codes. What the commands
//! compute lives in the library (src/lib.rs) and the crates.

pub mod bench;
pub mod check;
pub mod explore;
pub mod fr;
mod lifeline;
pub mod record;
mod records;
pub mod run;
pub mod shrink;
pub mod test;
pub mod torch;

use scen::exit_code::Exit;
use scen_core::scenario::{load_file, Scenario};
use std::path::Path;

/// Loads a scenario, printing the error (file:line:col) and giving exit code 2 when invalid.
pub fn load(file: &Path) -> Result<Scenario, Exit> {
    load_file(file).map_err(|e| {
        eprintln!("error: {e}");
        Exit::Invalid
    })
}

/// Prints an internal error: never a verdict, always the seed and the replay command
/// (`--format json`: an object with an `internal_error` field).
pub fn internal_error(file: &str, seed: u64, detail: &str, json: bool) -> Exit {
    let replay = format!("scen replay {file} --seed {seed}");
    if json {
        let doc = serde_json::json!({
            "schema_version": scen::render::json::SCHEMA_VERSION,
            "passed": false,
            "file": file,
            "seed": seed,
            "internal_error": { "detail": detail, "seed": seed, "replay": replay },
        });
        println!("{doc:#}");
    } else {
        eprintln!(
            "internal error: {detail}\n  seed: {seed}\n  replay: {replay}\n  \
             This is a defect in scen (or a limit of its simulator), not a verdict about the \
             scenario; please report it with the scenario file."
        );
    }
    Exit::Internal
}

/// A simulation that gave no report: an internal error (exit 3) or bad input found late (2).
pub fn sim_failed(file: &Path, e: &scen_sim::SimError, json: bool) -> Exit {
    match e {
        scen_sim::SimError::Internal { seed, detail } => {
            internal_error(&file.display().to_string(), *seed, detail, json)
        }
        other => fail(other.to_string()),
    }
}

/// Prints `error: msg` and gives exit code 2 (invalid input).
pub fn fail(msg: String) -> Exit {
    eprintln!("error: {msg}");
    Exit::Invalid
}

/// The file stem as a scenario name.
pub fn stem(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into())
}
