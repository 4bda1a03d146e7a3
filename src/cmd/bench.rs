//! `scen bench`: nccl-tests-style sweeps of collectives. Without --hw the timing model predicts
//! (the per-message rule the simulator charges, over each algorithm's schedule); with --hw real
//! oneCCL (or scen's gloo host path) runs in one process per rank; --sim with --hw prints both.
//! Also: --raw (baseline loop, same processes), --pattern (the notes' diffusion models),
//! --calibrate (fit the model, write it with -o), --compare A.json B.json. See docs/bench.md.
//!
//! Exit codes: 0 ok; 1 when a hw run got wrong values (#wrong > 0); 2 on invalid arguments or
//! files, or when --hw cannot run here (no oneCCL) or a rank fails.

use clap::{Args, ValueEnum};
use scen::bench::plan::BenchRequest;
use scen::exit::Exit;
use scen_core::perf::plan::PatternRequest;
use scen_core::perf::render::render;
use scen_hw::bench::BenchPath;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, ValueEnum)]
pub enum PathArg {
    Oneccl,
    Gloo,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OutFormat {
    Human,
    Json,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Collective(s): all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce
    /// (comma-separated, or `all`).
    #[arg(long, default_value = "all_reduce")]
    op: String,
    /// Sizes: `4K:64M` (doubling), `1K:1M:4` (x4) or a list `1M,16M,64M` (nccl-tests' size).
    #[arg(long, default_value = "4K:64M")]
    sizes: String,
    #[arg(long, default_value = "f32")]
    dtype: String,
    #[arg(long, default_value = "sum")]
    redop: String,
    /// Ranks in all (default: --nproc-per-node x --nnodes, else 2).
    #[arg(long)]
    ranks: Option<usize>,
    /// Ranks per node.
    #[arg(long)]
    nproc_per_node: Option<usize>,
    /// Nodes (the prediction then uses the inter-node link; --hw runs one node only).
    #[arg(long, default_value_t = 1)]
    nnodes: usize,
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    #[arg(long, default_value_t = 100)]
    iters: usize,
    /// With --hw: run the whole sweep this many times in the same processes and report each
    /// size's median (a shared machine's load comes and goes).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Measure on real oneCCL (or --path gloo) instead of predicting.
    #[arg(long)]
    hw: bool,
    /// With --hw: also print the model's prediction next to the measurement.
    #[arg(long)]
    sim: bool,
    /// With --hw: also time a bare oneCCL loop, interleaved in the same processes.
    #[arg(long, requires = "hw")]
    raw: bool,
    /// With --hw: also run the independent baseline (scripts/bench-baseline.sh: oneCCL's C++
    /// API in its own processes), sweep by sweep with scen's, and print "% of baseline".
    #[arg(long, requires = "hw")]
    baseline: bool,
    /// Which communication path --hw times: oneCCL device groups or scen's gloo host path.
    #[arg(long, value_enum, default_value = "oneccl")]
    path: PathArg,
    /// Environment for the rank processes, e.g. --env CCL_ATL_SHM=1 (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// A timing model file (from --calibrate) for predictions.
    #[arg(long, value_name = "MODEL.toml")]
    model: Option<PathBuf>,
    /// Fit alpha/beta of the link class --hw measures and write the model to -o.
    #[arg(long, requires = "hw")]
    calibrate: bool,
    /// Where --calibrate writes the model.
    #[arg(short = 'o', long = "out", value_name = "MODEL.toml")]
    out: Option<PathBuf>,
    /// A model's communication per denoise step: wan-ulysses, flux-tp, cfg.
    #[arg(long)]
    pattern: Option<String>,
    /// Pattern: tokens per rank.
    #[arg(long, default_value_t = 4096)]
    seq: usize,
    #[arg(long, default_value_t = 16)]
    heads: usize,
    #[arg(long, default_value_t = 64)]
    head_dim: usize,
    #[arg(long, default_value_t = 3072)]
    hidden: usize,
    /// Pattern: transformer blocks per denoise step (Wan 2.1 1.3B: 30, Flux: 57).
    #[arg(long)]
    layers: Option<usize>,
    #[arg(long, default_value_t = 512)]
    text_len: usize,
    #[arg(long)]
    ulysses: Option<usize>,
    #[arg(long)]
    tp: Option<usize>,
    #[arg(long)]
    cfg: Option<usize>,
    /// Compare two `--format json` outputs: speedup of B over A per size and bucket.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"])]
    compare: Option<Vec<PathBuf>>,
    #[arg(long, value_enum, default_value = "human")]
    format: OutFormat,
}

impl BenchArgs {
    /// What `bench` reads (--model, --compare's reports) and writes (-o).
    pub fn files(&self) -> (Vec<&Path>, Vec<(&'static str, &Path)>) {
        let mut inputs: Vec<&Path> = self.model.iter().map(PathBuf::as_path).collect();
        inputs.extend(self.compare.iter().flatten().map(PathBuf::as_path));
        let outputs = self.out.iter().map(|p| ("-o", p.as_path())).collect();
        (inputs, outputs)
    }

    /// The library's request: the flags as they are (the library checks them).
    fn request(self) -> BenchRequest {
        let pattern = self.pattern.map(|name| PatternRequest {
            name,
            seq: self.seq,
            heads: self.heads,
            head_dim: self.head_dim,
            hidden: self.hidden,
            layers: self.layers,
            text_len: self.text_len,
            ulysses: self.ulysses,
            tp: self.tp,
            cfg: self.cfg,
        });
        BenchRequest {
            op: self.op,
            sizes: self.sizes,
            dtype: self.dtype,
            redop: self.redop,
            ranks: self.ranks,
            nproc_per_node: self.nproc_per_node,
            nnodes: self.nnodes,
            warmup: self.warmup,
            iters: self.iters,
            repeat: self.repeat,
            hw: self.hw,
            sim: self.sim,
            raw: self.raw,
            baseline: self.baseline,
            path: match self.path {
                PathArg::Oneccl => BenchPath::Oneccl,
                PathArg::Gloo => BenchPath::Gloo,
            },
            env: self.env,
            model: self.model,
            calibrate: self.calibrate,
            out: self.out,
            pattern,
            wall_time_note: matches!(self.format, OutFormat::Human),
        }
    }
}

/// The `bench` subcommand.
pub fn run(a: BenchArgs) -> Exit {
    match run_inner(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            Exit::Invalid
        }
    }
}

fn run_inner(a: BenchArgs) -> anyhow::Result<Exit> {
    let json = matches!(a.format, OutFormat::Json);
    if let Some(files) = &a.compare {
        print!("{}", scen::bench::compare::run(&files[0], &files[1], json)?);
        return Ok(Exit::Ok);
    }
    let bench = scen::bench::run(&a.request())?;
    let report = &bench.report;
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", render(report, bench.pattern.as_ref()));
    }
    let wrong: u64 = report.rows.iter().filter_map(|r| r.wrong).sum();
    Ok(if wrong > 0 { Exit::Failed } else { Exit::Ok })
}
