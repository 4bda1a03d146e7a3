//! The command line's shape (clap derive): one variant per subcommand, each holding its own
//! argument struct, so adding a subcommand is one variant here and one match arm in main.rs.

use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(
    name = "scen",
    version,
    about = "Reproduce and explain distributed-communication bugs (c10d, xccl/oneCCL) deterministically",
    after_help = scen::exit_code::help()
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
    /// Log what every rank does to stderr: -v each step's start/done/error (rank and step
    /// spans), -vv also info events and each call (span with group and seq), -vvv trace.
    /// RUST_LOG (e.g. `scen_core=debug`) overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Also write the log to this file (at -v's level, info by default).
    #[arg(long, value_name = "FILE", global = true)]
    pub log_file: Option<PathBuf>,
}

// Parsed once per process: the size of `Run`'s options does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Cmd {
    /// Run a scenario and print its verdict.
    Run(RunArgs),
    /// Run every scenario under the paths and compare each with its expectations and snapshot.
    Test(TestArgs),
    /// nccl-tests-style collective benchmark: predicted by the timing model, or measured on real
    /// oneCCL with --hw; --pattern, --calibrate, --compare (docs/bench.md).
    Bench(crate::cmd::bench::BenchArgs),
    /// One rank process of `bench --hw` (started by the bench launcher, not by users).
    #[command(name = "__bench-rank", hide = true)]
    BenchRank,
    /// What this machine has for `run --hw` and `run --torch`: Level Zero devices, oneCCL,
    /// torch (version, backends), the relevant env.
    Doctor,
    /// One rank process of `run --hw` (started by the launcher, not by users).
    #[command(name = "__hw-rank", hide = true)]
    HwRank { file: PathBuf },
    /// The cleanup guard of `run --hw` (started by the launcher, not by users).
    #[command(name = "__hw-reaper", hide = true)]
    HwReaper,
    /// Validate a scenario file without running it.
    Check { file: PathBuf },
    /// Re-run one seed exactly and print its verdict and trace hash.
    Replay(ReplayArgs),
    /// Run many seeds and group the outcomes into verdict classes.
    Explore(ExploreArgs),
    /// Remove faults, steps, nodes and ranks while a failing seed keeps its verdict class.
    Shrink(ShrinkArgs),
    /// Read a job's PyTorch flight-recorder dumps: diagnose them, write a replay scenario.
    #[command(name = "import-fr")]
    ImportFr(ImportFrArgs),
    /// Write a scenario's program as a Python file for torchrun (`--torch`; docs/torch.md).
    Export(ExportArgs),
    /// Run a torch.distributed program (after --) and write what its ranks did as a scenario.
    Record(crate::cmd::record::RecordArgs),
}

/// What a command reads and what it writes (flag, path).
type Files<'a> = (Vec<&'a Path>, Vec<(&'static str, &'a Path)>);

/// An optional output as (flag, path).
fn opt<'a>(flag: &'static str, p: &'a Option<PathBuf>) -> Option<(&'static str, &'a Path)> {
    p.as_deref().map(|p| (flag, p))
}

impl Cli {
    /// Refuses, before the command starts, an output onto one of its inputs (a directory input
    /// counts for every file under it) or onto another output (src/output.rs).
    pub fn check_outputs(&self) -> Result<(), scen::output::OutputError> {
        let (inputs, mut outputs) = self.cmd.files();
        if let Some(log) = &self.log_file {
            outputs.push(("--log-file", log));
        }
        let inputs = scen::output::expand_dirs(&inputs);
        let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
        scen::output::check_paths(&inputs, &outputs)
    }
}

impl Cmd {
    /// Every file the command reads and every file or directory it writes.
    fn files(&self) -> Files<'_> {
        match self {
            Cmd::Run(a) => (
                [Some(a.file.as_path()), a.model.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect(),
                [
                    opt("--report", &a.report),
                    opt("--graph", &a.graph),
                    opt("--timeline", &a.timeline),
                    opt("--export-fr", &a.fr.export_fr),
                    opt("--keep", &a.torch_opts.keep),
                ]
                .into_iter()
                .flatten()
                .collect(),
            ),
            Cmd::Test(a) => {
                let paths = if a.paths.is_empty() {
                    vec![Path::new("scenarios")]
                } else {
                    a.paths.iter().map(PathBuf::as_path).collect()
                };
                (paths, opt("--junit", &a.junit).into_iter().collect())
            }
            Cmd::Bench(a) => a.files(),
            Cmd::Check { file } | Cmd::HwRank { file } => (vec![file], vec![]),
            Cmd::Replay(a) => (vec![&a.file], vec![]),
            Cmd::Explore(a) => (a.files.iter().map(PathBuf::as_path).collect(), vec![]),
            Cmd::Shrink(a) => (vec![&a.file], opt("-o", &a.out).into_iter().collect()),
            Cmd::ImportFr(a) => (vec![&a.dir], opt("-o", &a.out).into_iter().collect()),
            Cmd::Export(a) => (vec![&a.file], opt("-o", &a.out).into_iter().collect()),
            Cmd::Record(a) => (
                a.command
                    .iter()
                    .map(Path::new)
                    .filter(|p| p.is_file())
                    .collect(),
                vec![("-o", a.out.as_path())],
            ),
            Cmd::BenchRank | Cmd::Doctor | Cmd::HwReaper => (vec![], vec![]),
        }
    }
}

#[derive(clap::Args)]
pub struct ExportArgs {
    pub file: PathBuf,
    /// The torch.distributed program (the only export there is).
    #[arg(long, required = true)]
    pub torch: bool,
    /// Where to write it (default: print it).
    #[arg(short = 'o', long = "out")]
    pub out: Option<PathBuf>,
    /// Scale every timeout and delay by N/D.
    #[arg(long, value_name = "N/D", value_parser = scen_core::scenario::TimeScale::parse)]
    pub time_scale: Option<scen_core::scenario::TimeScale>,
}

#[derive(clap::Args)]
pub struct ImportFrArgs {
    /// The directory of per-rank dumps (pickle or JSON, one file per rank).
    pub dir: PathBuf,
    /// Where to write the replay scenario.
    #[arg(short = 'o', long = "out")]
    pub out: Option<PathBuf>,
    /// Import even when some ranks of the job have no dump (or an empty one).
    #[arg(long)]
    pub allow_incomplete_ranks: bool,
    /// The members of a group the dumps do not list (gloo's): `--group 1=0,1` (repeatable).
    #[arg(long = "group", value_name = "NAME=RANKS")]
    pub groups: Vec<String>,
}

/// `run --export-fr DIR [--fr-format pickle|json]`.
#[derive(clap::Args)]
pub struct FrArgs {
    /// Write one PyTorch flight-recorder dump per rank into DIR (in hw mode the watchdog
    /// writes them at a hang).
    #[arg(long, value_name = "DIR")]
    pub export_fr: Option<PathBuf>,
    /// The dumps' encoding (torchfrtrace reads pickle).
    #[arg(long, value_enum, default_value = "pickle", requires = "export_fr")]
    pub fr_format: crate::cmd::fr::FrFormat,
}

#[derive(clap::Args)]
pub struct RunArgs {
    pub file: PathBuf,
    /// A timing model file (`scen bench --calibrate --model-out`): its links replace the scenario's
    /// `[world.links]` (file and keys alike) for the simulator's virtual time.
    #[arg(long, value_name = "MODEL.toml")]
    pub model: Option<PathBuf>,
    /// Simulation seed (default: the scenario's `[sim] seed`, else 0). The simulator's only:
    /// no seed decides the schedule of real processes, so `--hw` and `--torch` refuse it.
    #[arg(long, conflicts_with_all = ["hw", "torch"])]
    pub seed: Option<u64>,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Also print the full trace (human format).
    #[arg(long)]
    pub trace: bool,
    /// Run on real hardware (oneCCL) instead of the simulator.
    #[arg(long)]
    pub hw: bool,
    /// Start the job as `processes` (rank 0 hosts the TCPStore) or `torchrun` (its agent hosts
    /// it and stops the workers after one fails), whatever the scenario's `[world] launcher`;
    /// with --hw, scen's launcher starts the ranks so (a process torchrun, srun or mpirun
    /// started has what that launcher gives it).
    #[arg(long, value_enum)]
    pub launcher: Option<scen::launcher::One>,
    /// Write the wait-for graph of the first stall as Graphviz DOT to this file.
    #[arg(long, value_name = "OUT.dot")]
    pub graph: Option<PathBuf>,
    /// Write the run as a Chrome/Perfetto trace (Trace Event Format JSON) to this file.
    #[arg(long, value_name = "OUT.json")]
    pub timeline: Option<PathBuf>,
    /// Also write the JSON report (schema v2, docs/report.md) to this file; the terminal gets
    /// the `--format` output as usual.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub fr: FrArgs,
    #[command(flatten)]
    pub hw_opts: HwArgs,
    #[command(flatten)]
    pub torch_opts: crate::cmd::torch::TorchArgs,
}

#[derive(clap::Args)]
pub struct TestArgs {
    /// Scenario files or directories (searched recursively for *.toml); default: scenarios/.
    pub paths: Vec<PathBuf>,
    /// Run only the scenarios whose name contains this text.
    #[arg(short = 'k', long = "filter", value_name = "PATTERN")]
    pub pattern: Option<String>,
    /// Write the new snapshot of every scenario whose snapshot differs or is missing.
    #[arg(long, conflicts_with = "review")]
    pub update: bool,
    /// Show each changed snapshot as a diff and ask accept/reject/skip (needs a terminal).
    #[arg(long)]
    pub review: bool,
    /// Also write the results as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Scenarios run in parallel (each simulation is single-threaded).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Where snapshots live: a directory, or `beside` (NAME.snap next to NAME.toml).
    /// Default: `[test] snapshots` of the nearest scen.toml above the first path (then above the
    /// current directory), else ./snapshots.
    #[arg(long, value_name = "DIR|beside")]
    pub snapshots: Option<String>,
    /// Check every scenario under this launcher instead of its `[world] launcher`; `both`
    /// checks it under its own and also simulates it under the other, with a note where the
    /// verdict class differs.
    #[arg(long, value_enum)]
    pub launcher: Option<scen::launcher::Choice>,
}

#[derive(clap::Args)]
pub struct ReplayArgs {
    pub file: PathBuf,
    #[arg(long)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Also print the full trace (human format).
    #[arg(long)]
    pub trace: bool,
}

#[derive(clap::Args)]
pub struct ExploreArgs {
    /// The scenario (or, with --merge, shard outputs in JSON).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// How many seeds: 0..N.
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// Worker threads (each simulation is single-threaded).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Run only the seeds s with s % n == i.
    #[arg(long)]
    pub shard: Option<String>,
    /// Combine `--format json` outputs of shards.
    #[arg(long)]
    pub merge: bool,
    #[arg(long, value_enum, default_value = "human")]
    pub format: Format,
    /// Explore under this launcher instead of the scenario's `[world] launcher`; `both`
    /// explores under each and says whether their verdict classes differ.
    #[arg(long, value_enum, conflicts_with = "merge")]
    pub launcher: Option<scen::launcher::Choice>,
}

#[derive(clap::Args)]
pub struct ShrinkArgs {
    pub file: PathBuf,
    #[arg(long)]
    pub seed: u64,
    /// Where to write the shrunk scenario (default: print it).
    #[arg(short = 'o', long = "out")]
    pub out: Option<PathBuf>,
}

/// torchrun-style options of `run --hw`.
#[derive(clap::Args)]
pub struct HwArgs {
    /// Processes on this node (must equal the scenario's ranks_per_node).
    #[arg(long, requires = "hw")]
    pub nproc_per_node: Option<usize>,
    /// Machines in the job (must equal the scenario's node count).
    #[arg(long, requires = "hw")]
    pub nnodes: Option<usize>,
    /// This machine's index in 0..nnodes.
    #[arg(long, requires = "hw")]
    pub node_rank: Option<usize>,
    /// Where rank 0's TCPStore listens (default 127.0.0.1).
    #[arg(long, requires = "hw")]
    pub master_addr: Option<String>,
    /// Its port (default: a free port; required with --nnodes > 1). Node 0's launcher serves
    /// the launchers' rendezvous on the next port (docs/hw.md).
    #[arg(long, requires = "hw")]
    pub master_port: Option<u16>,
    /// The job's name at the launchers' rendezvous (default: $SCEN_HW_JOB_ID, else none):
    /// every node of one job gives the same, like torchrun's --rdzv-id.
    #[arg(long, requires = "hw")]
    pub job_id: Option<String>,
    /// How long the launchers' rendezvous waits for every node, in seconds (default 600, as
    /// torchrun's join timeout).
    #[arg(long, requires = "hw")]
    pub rdzv_timeout_s: Option<u64>,
    /// Fail unless Level Zero finds an Intel GPU (no host-buffer stand-in for xpu tensors).
    #[arg(long, requires = "hw")]
    pub require_xpu: bool,
    /// Fault injection: SIGKILL rank R once it has started step S (1-based), as `R:S`.
    #[arg(long, requires = "hw", value_parser = parse_kill)]
    pub kill_rank: Option<(usize, usize)>,
    /// A hard limit on the run's wall time in seconds (the watchdog then kills every rank).
    #[arg(long, requires = "hw")]
    pub max_wall_s: Option<u64>,
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
    pub fn options(&self) -> scen_hw::HwOptions {
        scen_hw::HwOptions {
            nproc_per_node: self.nproc_per_node,
            nnodes: self.nnodes,
            node_rank: self.node_rank,
            master_addr: self.master_addr.clone(),
            master_port: self.master_port,
            require_xpu: self.require_xpu,
            kill_rank_at: self.kill_rank,
            max_wall_ms: self.max_wall_s.map(|s| s * 1000),
            job_id: self.job_id.clone(),
            rdzv_timeout_ms: self.rdzv_timeout_s.unwrap_or(600).saturating_mul(1000),
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Human,
    Json,
}
