//! `scen check` (validate a scenario without running it) and `scen doctor` (what this machine
//! has for hardware mode).

use scen::exit_code::Exit;
use std::path::Path;

pub fn check(file: &Path) -> Exit {
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
            Exit::Ok
        }
        Err(code) => code,
    }
}

pub fn doctor() -> Exit {
    print!("{}", scen_hw::doctor::report());
    print!("{}", super::torch::doctor());
    Exit::Ok
}
