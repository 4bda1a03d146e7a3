//! One module per subcommand: argument handling, printing and exit codes. What the commands
//! compute lives in the library (src/lib.rs) and the crates.

pub mod bench;
pub mod check;
pub mod explore;
pub mod fr;
pub mod run;
pub mod shrink;
pub mod test;

use scen_core::scenario::{load_file, Scenario};
use std::path::Path;
use std::process::ExitCode;

/// Loads a scenario, printing the error (file:line:col) and giving exit code 2 when invalid.
pub fn load(file: &Path) -> Result<Scenario, ExitCode> {
    load_file(file).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// Prints `error: msg` and gives exit code 2 (invalid input).
pub fn fail(msg: String) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// The file stem as a scenario name.
pub fn stem(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into())
}
