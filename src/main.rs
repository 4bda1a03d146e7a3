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
        #[command(flatten)]
        hw_opts: HwArgs,
    },
    /// What this machine has for `run --hw`: Level Zero devices, oneCCL, the relevant env.
    Doctor,
    /// One rank process of `run --hw` (started by the launcher, not by users).
    #[command(name = "__hw-rank", hide = true)]
    HwRank { file: PathBuf },
    /// Validate a scenario file without running it.
    Check { file: PathBuf },
}

/// torchrun-style options of `run --hw`.
#[derive(clap::Args)]
struct HwArgs {
    /// Processes on this node (must equal the scenario's ranks_per_node).
    #[arg(long, requires = "hw")]
    nproc_per_node: Option<usize>,
    /// Machines in the job (must equal the scenario's node count).
    #[arg(long, requires = "hw")]
    nnodes: Option<usize>,
    /// This machine's index in 0..nnodes.
    #[arg(long, requires = "hw")]
    node_rank: Option<usize>,
    /// Where rank 0's TCPStore listens (default 127.0.0.1).
    #[arg(long, requires = "hw")]
    master_addr: Option<String>,
    /// Its port (default: a free port).
    #[arg(long, requires = "hw")]
    master_port: Option<u16>,
    /// Fail unless Level Zero finds an Intel GPU (no host-buffer stand-in for xpu tensors).
    #[arg(long, requires = "hw")]
    require_xpu: bool,
    /// Fault injection: SIGKILL rank R once it has started step S (1-based), as `R:S`.
    #[arg(long, requires = "hw", value_parser = parse_kill)]
    kill_rank: Option<(usize, usize)>,
    /// A hard limit on the run's wall time in seconds (the watchdog then kills every rank).
    #[arg(long, requires = "hw")]
    max_wall_s: Option<u64>,
}

fn parse_kill(s: &str) -> Result<(usize, usize), String> {
    let (r, st) = s
        .split_once(':')
        .ok_or_else(|| format!("expected RANK:STEP, got `{s}`"))?;
    let r = r.parse().map_err(|_| format!("`{r}` is not a rank"))?;
    let st: usize = st
        .parse()
        .map_err(|_| format!("`{st}` is not a step number"))?;
    if st == 0 {
        return Err("steps are numbered from 1".into());
    }
    Ok((r, st - 1))
}

impl HwArgs {
    fn options(&self) -> scen_hw::HwOptions {
        scen_hw::HwOptions {
            nproc_per_node: self.nproc_per_node,
            nnodes: self.nnodes,
            node_rank: self.node_rank,
            master_addr: self.master_addr.clone(),
            master_port: self.master_port,
            require_xpu: self.require_xpu,
            kill_rank_at: self.kill_rank,
            max_wall_ms: self.max_wall_s.map(|s| s * 1000),
            ..Default::default()
        }
    }
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
        Cmd::Doctor => {
            print!("{}", scen_hw::doctor::report());
            ExitCode::SUCCESS
        }
        Cmd::HwRank { file } => run_hw_rank(&file),
        Cmd::Run {
            file,
            seed,
            format,
            trace,
            hw,
            hw_opts,
        } => {
            let scenario = match load(&file) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let report = if hw {
                scen_hw::run(&scenario, &file, &hw_opts.options()).map_err(|e| e.to_string())
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

fn run_hw_rank(file: &std::path::Path) -> ExitCode {
    match load(file) {
        Ok(s) => ExitCode::from(scen_hw::rank_main(s).clamp(0, 255) as u8),
        Err(code) => code,
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
