//! `scen shrink`: the smallest scenario whose failing seed keeps its verdict class.

use super::{fail, stem};
use crate::cli::ShrinkArgs;
use scen::exit_code::Exit;
use scen::output::write_whole;

pub fn shrink(args: ShrinkArgs) -> Exit {
    let file = &args.file;
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: cannot read the scenario: {e}", file.display())),
    };
    let s = match scen::shrink::shrink(&text, &file.display().to_string(), &stem(file), args.seed) {
        Ok(s) => s,
        Err(scen::shrink::ShrinkError::Input(e)) => return fail(e),
        Err(scen::shrink::ShrinkError::Internal { seed, detail }) => {
            return super::internal_error(&file.display().to_string(), seed, &detail, false)
        }
    };
    for r in &s.removed {
        eprintln!("removed: {r}");
    }
    eprintln!(
        "shrunk: {} -> {} steps, {} -> {} faults; class kept: {}",
        s.steps_before, s.steps_after, s.faults_before, s.faults_after, s.class
    );
    match args.out {
        Some(path) => {
            if let Err(e) = write_whole(&path, s.text.as_bytes()) {
                return fail(format!("{e:#}"));
            }
            eprintln!("wrote {}", path.display());
        }
        None => print!("{}", s.text),
    }
    Exit::Ok
}
