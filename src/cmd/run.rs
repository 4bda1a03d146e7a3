//! `scen run` (simulator or `--hw`), `scen replay` (one seed exactly) and the hidden rank
//! process of hardware mode: run, write the requested exports, print the report.

use crate::cli::{Format, ReplayArgs, RunArgs};
use scen::output::write_whole;
use scen_core::scenario::Scenario;
use scen_core::verdict::{render_human, Report};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(args: RunArgs) -> ExitCode {
    let scenario = match super::load(&args.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let report = if args.hw {
        scen_hw::run(&scenario, &args.file, &args.hw_opts.options()).map_err(|e| e.to_string())
    } else {
        scen_sim::simulate(&scenario, args.seed).map_err(|e| e.to_string())
    };
    match report {
        Ok(r) => {
            if let Err(e) = write_exports(&scenario, &r, &args.graph, &args.timeline) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            print_report(&scenario, &r, args.format, args.trace)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

pub fn replay(args: ReplayArgs) -> ExitCode {
    let scenario = match super::load(&args.file) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match scen_sim::simulate(&scenario, Some(args.seed)) {
        Ok(r) => {
            let code = print_report(&scenario, &r, args.format, args.trace);
            if let Format::Human = args.format {
                println!(
                    "replay: seed {}, trace hash {}, class: {}",
                    args.seed,
                    r.trace_hash,
                    scen_core::class::class_key(&scenario, &r)
                );
            }
            code
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

pub fn hw_rank(file: &Path) -> ExitCode {
    match super::load(file) {
        Ok(s) => ExitCode::from(scen_hw::rank_main(s).clamp(0, 255) as u8),
        Err(code) => code,
    }
}

/// Writes `--graph` and `--timeline` files (each whole or not at all).
fn write_exports(
    s: &Scenario,
    r: &Report,
    graph: &Option<PathBuf>,
    timeline: &Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Some(path) = graph {
        let dot = scen_core::diagnose::dot::render(&r.diagnosis, s.world.size(), &s.file);
        write_whole(path, dot.as_bytes())?;
    }
    if let Some(path) = timeline {
        let doc =
            scen_core::diagnose::timeline::render(s, &r.trace, &r.calls, &r.diagnosis, r.end_ms);
        write_whole(path, serde_json::to_string(&doc)?.as_bytes())?;
    }
    Ok(())
}

fn print_report(s: &Scenario, r: &Report, format: Format, trace: bool) -> ExitCode {
    match format {
        Format::Human => {
            if trace {
                print!("{}", r.trace.render());
            }
            print!("{}", render_human(s, r));
        }
        Format::Json => match serde_json::to_string_pretty(r) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("error: cannot encode the report: {e}");
                return ExitCode::from(2);
            }
        },
    }
    if r.expectations_hold() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
