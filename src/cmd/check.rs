//! `scen check` (validate a scenario without running it) and `scen doctor` (what this machine
//! has for hardware mode).

use std::path::Path;
use std::process::ExitCode;

pub fn check(file: &Path) -> ExitCode {
    match super::load(file) {
        Ok(s) => {
            println!(
                "{}: ok ({} nodes, {} ranks, {} steps, {} expectations)",
                file.display(),
                s.world.nodes.len(),
                s.world.size(),
                s.steps.len(),
                s.expect.len()
            );
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

pub fn doctor() -> ExitCode {
    print!("{}", scen_hw::doctor::report());
    print!("{}", crate::torch_cmd::doctor());
    ExitCode::SUCCESS
}
