//! The `scen` command line: run a scenario in the simulator (or on hardware), validate one.
//!
//! Exit codes: 0 when the scenario's expectations hold, 1 when they do not, 2 on invalid input
//! (a bad scenario file or argument) or when the requested mode cannot run, 3 on an internal
//! error (a panic or broken invariant inside scen: no verdict, the seed and a replay command).

mod explore;
mod output;
mod shrink;

use clap::{Parser, Subcommand, ValueEnum};
use scen_core::scenario::{load_file, Scenario};
use scen_core::verdict::{render_human, Report};
use std::path::PathBuf;
use std::process::ExitCode;

const EXIT_CODES: &str = "Exit codes:\n  0  the scenario's expectations hold\n  1  they do not (the verdict says why)\n  2  invalid input (file, argument) or the requested mode cannot run\n  3  internal error in scen: no verdict; the seed and a replay command are printed";

/// An internal error: a panic or a broken invariant inside scen, never a verdict.
const EXIT_INTERNAL: u8 = 3;

#[derive(Parser)]
#[command(
    name = "scen",
    version,
    about = "Reproduce and explain distributed-communication bugs (c10d, xccl/oneCCL) deterministically",
    after_help = EXIT_CODES
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
    /// Re-run one seed exactly and print its verdict and trace hash.
    Replay {
        file: PathBuf,
        #[arg(long)]
        seed: u64,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
        /// Also print the full trace (human format).
        #[arg(long)]
        trace: bool,
    },
    /// Run many seeds and group the outcomes into verdict classes.
    Explore {
        /// The scenario (or, with --merge, shard outputs in JSON).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// How many seeds: 0..N.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// Worker threads (each simulation is single-threaded).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Run only the seeds s with s % n == i.
        #[arg(long)]
        shard: Option<String>,
        /// Combine `--format json` outputs of shards.
        #[arg(long)]
        merge: bool,
        #[arg(long, value_enum, default_value = "human")]
        format: Format,
    },
    /// Remove faults, steps, nodes and ranks while a failing seed keeps its verdict class.
    Shrink {
        file: PathBuf,
        #[arg(long)]
        seed: u64,
        /// Where to write the shrunk scenario (default: print it).
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
    },
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
        Cmd::Replay {
            file,
            seed,
            format,
            trace,
        } => {
            let scenario = match load(&file) {
                Ok(s) => s,
                Err(code) => return code,
            };
            match scen_sim::simulate(&scenario, Some(seed)) {
                Ok(r) => {
                    let code = print_report(&scenario, &r, format, trace);
                    if let Format::Human = format {
                        println!(
                            "replay: seed {seed}, trace hash {}, class: {}",
                            r.trace_hash,
                            scen_core::class::class_key(&scenario, &r)
                        );
                    }
                    code
                }
                Err(e) => sim_failed(&file, &e, format),
            }
        }
        Cmd::Explore {
            files,
            seeds,
            jobs,
            shard,
            merge,
            format,
        } => run_explore(files, seeds, jobs, shard, merge, format),
        Cmd::Shrink { file, seed, out } => run_shrink(&file, seed, out),
        Cmd::Run {
            file,
            seed,
            format,
            trace,
            hw,
            hw_opts,
            graph,
            timeline,
        } => {
            let outs: Vec<(&str, &std::path::Path)> =
                [("--graph", &graph), ("--timeline", &timeline)]
                    .into_iter()
                    .filter_map(|(f, p)| p.as_deref().map(|p| (f, p)))
                    .collect();
            if let Err(e) = output::check_paths(&[&file], &outs) {
                return fail(e);
            }
            let scenario = match load(&file) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let report = if hw {
                scen_hw::run(&scenario, &file, &hw_opts.options()).map_err(|e| e.to_string())
            } else {
                match scen_sim::simulate(&scenario, seed) {
                    Ok(r) => Ok(r),
                    Err(e) => return sim_failed(&file, &e, format),
                }
            };
            match report {
                Ok(r) => {
                    // The verdict first: a failed export must not hide it.
                    let code = print_report(&scenario, &r, format, trace);
                    if let Err(e) = write_exports(&scenario, &r, &graph, &timeline) {
                        eprintln!("error: {e}");
                        return ExitCode::from(2);
                    }
                    code
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// A simulation that gave no report: an internal error (exit 3, with the seed and how to replay
/// it) or a simulator failure (exit 2).
fn sim_failed(file: &std::path::Path, e: &scen_sim::SimError, format: Format) -> ExitCode {
    match e {
        scen_sim::SimError::Internal { seed, detail } => {
            internal_error(&file.display().to_string(), *seed, detail, format)
        }
        other => {
            eprintln!("error: {other}");
            ExitCode::from(2)
        }
    }
}

/// Prints an internal error: never a verdict, always the seed and the replay command.
fn internal_error(file: &str, seed: u64, detail: &str, format: Format) -> ExitCode {
    let replay = format!("scen replay {file} --seed {seed}");
    match format {
        Format::Human => eprintln!(
            "internal error: {detail}\n  seed: {seed}\n  replay: {replay}\n  \
             This is a defect in scen (or a limit of its simulator), not a verdict about the \
             scenario; please report it with the scenario file."
        ),
        Format::Json => {
            let doc = serde_json::json!({
                "file": file,
                "seed": seed,
                "internal_error": { "detail": detail, "seed": seed, "replay": replay },
            });
            println!("{doc:#}");
        }
    }
    ExitCode::from(EXIT_INTERNAL)
}

fn run_hw_rank(file: &std::path::Path) -> ExitCode {
    match load(file) {
        Ok(s) => ExitCode::from(scen_hw::rank_main(s).clamp(0, 255) as u8),
        Err(code) => code,
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
    output::write_atomic(path, bytes).map_err(anyhow::Error::msg)
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

fn run_explore(
    files: Vec<PathBuf>,
    seeds: u64,
    jobs: usize,
    shard: Option<String>,
    merge: bool,
    format: Format,
) -> ExitCode {
    let result = if merge {
        let mut parts = Vec::new();
        for f in &files {
            let text = match std::fs::read_to_string(f) {
                Ok(t) => t,
                Err(e) => return fail(format!("{}: {e}", f.display())),
            };
            match serde_json::from_str::<explore::Exploration>(&text) {
                Ok(p) => parts.push(p),
                Err(e) => {
                    return fail(format!(
                        "{}: not an `scen explore --format json` output: {e}",
                        f.display()
                    ))
                }
            }
        }
        explore::merge(parts)
    } else {
        let [file] = files.as_slice() else {
            return fail("explore takes one scenario file (or --merge with shard outputs)".into());
        };
        let (i, n) = match shard.as_deref().map(explore::parse_shard).transpose() {
            Ok(s) => s.unwrap_or((0, 1)),
            Err(e) => return fail(e),
        };
        let list: Vec<u64> = (0..seeds).filter(|s| s % n == i).collect();
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => return fail(format!("{}: cannot read the scenario: {e}", file.display())),
        };
        let name = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "scenario".into());
        // indicatif draws only when stderr is a terminal.
        let bar = indicatif::ProgressBar::new(list.len() as u64);
        let r = explore::explore(
            &text,
            &file.display().to_string(),
            &name,
            &list,
            jobs,
            &|| bar.inc(1),
        );
        bar.finish_and_clear();
        r
    };
    match result {
        Ok(e) => {
            match format {
                Format::Human => print!("{}", explore::render(&e)),
                Format::Json => match serde_json::to_string_pretty(&e) {
                    Ok(j) => println!("{j}"),
                    Err(err) => return fail(err.to_string()),
                },
            }
            if e.internal_errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_INTERNAL)
            }
        }
        Err(e) => fail(e),
    }
}

fn run_shrink(file: &std::path::Path, seed: u64, out: Option<PathBuf>) -> ExitCode {
    if let Some(o) = &out {
        if let Err(e) = output::check_paths(&[file], &[("-o", o.as_path())]) {
            return fail(e);
        }
    }
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: cannot read the scenario: {e}", file.display())),
    };
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    match shrink::shrink(&text, &file.display().to_string(), &name, seed) {
        Ok(s) => {
            for r in &s.removed {
                eprintln!("removed: {r}");
            }
            eprintln!(
                "shrunk: {} -> {} steps, {} -> {} faults; class kept: {}",
                s.steps_before, s.steps_after, s.faults_before, s.faults_after, s.class
            );
            match out {
                Some(path) => {
                    if let Err(e) = output::write_atomic(&path, s.text.as_bytes()) {
                        return fail(e);
                    }
                    eprintln!("wrote {}", path.display());
                }
                None => print!("{}", s.text),
            }
            ExitCode::SUCCESS
        }
        Err(shrink::ShrinkError::Input(e)) => fail(e),
        Err(shrink::ShrinkError::Internal { seed, detail }) => {
            internal_error(&file.display().to_string(), seed, &detail, Format::Human)
        }
    }
}

fn fail(msg: String) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}
