//! The `scen` command line: run a scenario in the simulator (or on hardware), validate one.
//!
//! Exit codes: 0 when the scenario's expectations hold, 1 when they do not, 2 on invalid input
//! (a bad scenario file or argument) or when the requested mode cannot run.

use clap::{Parser, Subcommand, ValueEnum};
use scen_core::scenario::{load_file, Scenario};
use scen_core::verdict::{render_human, Report};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "scen",
    version,
    about = "Reproduce and explain distributed-communication bugs (c10d, xccl/oneCCL) deterministically"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and print its verdict.
    Run {
        file: PathBuf,
        /// Simulation seed (default: the scenario's `[sim] seed`, else 0).
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        /// Also print the full trace (human format).
        #[arg(long)]
        trace: bool,
        /// Run on real hardware (oneCCL) instead of the simulator.
        #[arg(long)]
        hw: bool,
        /// Write the wait-for graph of the first stall as Graphviz DOT to this file.
        #[arg(long, value_name = "OUT.dot")]
        graph: Option<PathBuf>,
        /// Write the run as a Chrome/Perfetto trace (Trace Event Format JSON) to this file.
        #[arg(long, value_name = "OUT.json")]
        timeline: Option<PathBuf>,
    },
    /// Validate a scenario file without running it.
    Check { file: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Human,
    Json,
}

fn load(file: &std::path::Path) -> Result<Scenario, ExitCode> {
    load_file(file).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Check { file } => match load(&file) {
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
        },
        Cmd::Run {
            file,
            seed,
            format,
            trace,
            hw,
            graph,
            timeline,
        } => {
            let scenario = match load(&file) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let report = if hw {
                scen_hw::run(&scenario, &scen_hw::HwOptions::default()).map_err(|e| e.to_string())
            } else {
                scen_sim::simulate(&scenario, seed).map_err(|e| e.to_string())
            };
            match report {
                Ok(r) => {
                    if let Err(e) = write_exports(&scenario, &r, &graph, &timeline) {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                    print_report(&scenario, &r, format, trace)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// Writes `--graph` and `--timeline` files (each whole or not at all: temp file, then rename).
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

fn write_whole(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context;
    let tmp = path.with_extension("scen-tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
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
