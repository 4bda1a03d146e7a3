//! `scen run` (simulator or `--hw`), `scen replay` (one seed exactly) and the hidden rank
//! process of hardware mode: run, write the requested exports, print the report.

use crate::cli::{Format, ReplayArgs, RunArgs};
use scen::exit_code::Exit;
use scen::output::write_whole;
use scen::render::human::render as render_human;
use scen_core::report::Report;
use scen_core::scenario::{load_file, Scenario, ScenarioError};
use std::path::Path;

pub fn run(args: RunArgs) -> Exit {
    let mut scenario = match load(&args.file, args.format) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Some(m) = &args.model {
        match scen_core::perf::model::ModelFile::load(m) {
            Ok(f) => {
                scenario.world.links = f.links;
                scenario.world.op_costs = f.ops;
            }
            Err(e) => {
                match args.format {
                    Format::Human => eprintln!("error: {e}"),
                    Format::Json => println!("{}", invalid_input_json(&model_error(e))),
                }
                return Exit::Invalid;
            }
        }
    }
    if let Some(l) = args.launcher {
        scenario.world.launcher = l.into();
    }
    args.torch_opts.scale(&mut scenario);
    let report = if args.torch_opts.torch {
        args.torch_opts.run(&scenario, &args.file)
    } else if args.hw {
        let mut opts = args.hw_opts.options();
        opts.fr_dump_dir = args.fr.export_fr.clone();
        scen_hw::run(&scenario, &args.file, &opts).map_err(|e| e.to_string())
    } else {
        match scen_sim::simulate(&scenario, args.seed) {
            Ok(r) => Ok(r),
            Err(e) => {
                return super::sim_failed(&args.file, &e, matches!(args.format, Format::Json))
            }
        }
    };
    match report {
        Ok(r) => {
            // The verdict first: a failed export must not hide it.
            let code = print_report(&scenario, &r, args.format, args.trace);
            if let Err(e) = write_exports(&scenario, &r, &args) {
                eprintln!("error: {e:#}");
                return Exit::Invalid;
            }
            // In hw mode the watchdog already wrote the dumps at the hang.
            let fr_dir = args.fr.export_fr.as_deref();
            if let Some(dir) = fr_dir.filter(|_| !args.hw || r.first_stall.is_none()) {
                let world = scenario.world.size();
                if let Err(e) = super::fr::export_run(dir, args.fr.fr_format, world, &r.calls) {
                    eprintln!("error: {e:#}");
                    return Exit::Invalid;
                }
            }
            // A signal ended the hardware or torch run: 128 + its number (docs/hw.md).
            let real = args.hw || args.torch_opts.torch;
            match scen_procs::signals::interrupted_by().filter(|_| real) {
                Some(sig) => Exit::Signal(sig),
                None => code,
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            Exit::Invalid
        }
    }
}

pub fn replay(args: ReplayArgs) -> Exit {
    let scenario = match load(&args.file, args.format) {
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
        Err(e) => super::sim_failed(&args.file, &e, matches!(args.format, Format::Json)),
    }
}

pub fn hw_rank(file: &Path) -> Exit {
    match super::load(file) {
        Ok(s) => Exit::Rank(scen_hw::rank_main(s)),
        Err(code) => code,
    }
}

/// Loads the scenario; on invalid input prints the error (as JSON with `--format json`) and
/// gives exit code 2.
fn load(file: &Path, format: Format) -> Result<Scenario, Exit> {
    load_file(file).map_err(|e| {
        match format {
            Format::Human => eprintln!("error: {e}"),
            Format::Json => println!("{}", invalid_input_json(&e)),
        }
        Exit::Invalid
    })
}

/// A model file's error as an invalid-input error naming its file:line:col.
fn model_error(e: scen_core::perf::model::ModelError) -> ScenarioError {
    use scen_core::perf::model::ModelError;
    match e {
        ModelError::Parse {
            file,
            line,
            col,
            message,
        } => ScenarioError {
            file,
            line,
            col,
            message,
        },
        ModelError::Read { file, message } => ScenarioError {
            file,
            line: 0,
            col: 0,
            message: format!("cannot read the model file: {message}"),
        },
    }
}

/// `{"schema_version": 2, "passed": false, "error": {...}}` for invalid input.
fn invalid_input_json(e: &ScenarioError) -> String {
    let doc = serde_json::json!({
        "schema_version": scen::render::json::SCHEMA_VERSION,
        "passed": false,
        "error": {
            "kind": "invalid_input",
            "file": e.file,
            "line": e.line,
            "column": e.col,
            "message": e.message,
            "text": e.to_string(),
        }
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// Writes `--graph`, `--timeline` and `--report` files (each whole or not at all).
fn write_exports(s: &Scenario, r: &Report, args: &RunArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&scen::render::json::build(s, r))?;
        write_whole(path, format!("{json}\n").as_bytes())?;
    }
    let (graph, timeline) = (&args.graph, &args.timeline);
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

fn print_report(s: &Scenario, r: &Report, format: Format, trace: bool) -> Exit {
    match format {
        Format::Human => {
            if trace {
                print!("{}", r.trace.render());
            }
            print!("{}", render_human(s, r));
        }
        Format::Json => match serde_json::to_string_pretty(&scen::render::json::build(s, r)) {
            Ok(j) => println!("{j}"),
            Err(e) => {
                eprintln!("error: cannot encode the report: {e}");
                return Exit::Invalid;
            }
        },
    }
    if r.expectations_hold() {
        Exit::Ok
    } else {
        Exit::Failed
    }
}
