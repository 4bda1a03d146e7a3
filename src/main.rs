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
                Ok(r) => print_report(&scenario, &r, format, trace),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
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
