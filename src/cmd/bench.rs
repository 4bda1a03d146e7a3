//! `scen bench`: nccl-tests-style sweeps of collectives. Without --hw the timing model predicts
//! (the per-message rule the simulator charges, over each algorithm's schedule); with --hw real
//! oneCCL (or scen's gloo host path) runs in one process per rank; --sim with --hw prints both.
//! Also: --raw (baseline loop, same processes), --pattern (the notes' diffusion models),
//! --calibrate (fit the model, write it with --model-out), --compare A.json B.json (reports
//! written with -o or --format json). See docs/bench.md.
//!
//! Exit codes: 0 ok; 1 when a hw run got wrong values (#wrong > 0); 2 on invalid arguments or
//! files, or when --hw cannot run here (no oneCCL) or a rank fails.

use clap::{Args, ValueEnum};
use scen::bench::compare::load_report;
use scen::bench::plan::BenchRequest;
use scen::exit_code::Exit;
use scen_core::perf::plan::PatternRequest;
use scen_core::perf::render::render;
use scen_core::perf::result::BenchReport;
use scen_hw::bench::BenchPath;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, ValueEnum)]
pub enum PathArg {
    Oneccl,
    Gloo,
    Torch,
}

impl PathArg {
    fn path(self) -> BenchPath {
        match self {
            PathArg::Oneccl => BenchPath::Oneccl,
            PathArg::Gloo => BenchPath::Gloo,
            PathArg::Torch => BenchPath::Torch,
        }
    }
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
    /// With --hw: also run the bare-loop baseline (scripts/bench-baseline.sh: oneCCL's C API
    /// in its own processes), sweep by sweep with scen's, and print "% of baseline".
    #[arg(long, requires = "hw")]
    baseline: bool,
    /// Which communication path --hw times: oneCCL device groups, scen's gloo host path, or
    /// real torch.distributed (Python ranks; gloo on CPU, xccl/nccl where a device is).
    #[arg(long, value_enum, default_value = "oneccl")]
    path: PathArg,
    /// With --hw: measure two paths in turns (alternating per --repeat) and compare them, e.g.
    /// --ab oneccl,torch.
    #[arg(
        long,
        value_name = "A,B",
        requires = "hw",
        value_delimiter = ',',
        num_args = 1,
        value_enum
    )]
    ab: Vec<PathArg>,
    /// Environment for the rank processes, e.g. --env CCL_ATL_SHM=1 (repeatable).
    #[arg(long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// A timing model file (from --calibrate) for predictions.
    #[arg(long, value_name = "MODEL.toml")]
    model: Option<PathBuf>,
    /// Fit alpha/beta of the link class --hw measures (write the model with --model-out).
    #[arg(long, requires = "hw")]
    calibrate: bool,
    /// Where --calibrate writes the fitted model (a file --model reads).
    #[arg(long, value_name = "MODEL.toml", requires = "calibrate")]
    model_out: Option<PathBuf>,
    /// Also write the sweep's report as JSON (the `--format json` document, what --compare
    /// reads), whatever --format prints.
    #[arg(
        short = 'o',
        long = "out",
        value_name = "FILE.json",
        conflicts_with_all = ["compare", "ab"]
    )]
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
    /// Also draw an SVG: bus bandwidth against size (log axes, a colour per op, a line style per
    /// report, the notes' size buckets shaded, a calibrated or --model prediction thin); bars
    /// per op and step total, with --repeat's band, for a --pattern comparison.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

impl BenchArgs {
    /// What `bench` reads (--model, --compare's reports) and writes (-o).
    pub fn files(&self) -> (Vec<&Path>, Vec<(&'static str, &Path)>) {
        let mut inputs: Vec<&Path> = self.model.iter().map(PathBuf::as_path).collect();
        inputs.extend(self.compare.iter().flatten().map(PathBuf::as_path));
        let mut outputs: Vec<(&'static str, &Path)> =
            self.out.iter().map(|p| ("-o", p.as_path())).collect();
        outputs.extend(self.model_out.iter().map(|p| ("--model-out", p.as_path())));
        outputs.extend(self.plot.iter().map(|p| ("--plot", p.as_path())));
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
            path: self.path.path(),
            env: self.env,
            model: self.model,
            calibrate: self.calibrate,
            model_out: self.model_out,
            pattern,
            wall_time_note: matches!(self.format, OutFormat::Human),
        }
    }
}

/// `--plot FILE.svg`: the reports drawn (scen::bench::plot) and written atomically.
fn plot(to: Option<&Path>, reports: &[(&BenchReport, String)]) -> anyhow::Result<()> {
    let Some(to) = to else { return Ok(()) };
    let svg = scen::bench::plot::svg(reports)?;
    scen::output::write_atomic(to, svg.as_bytes()).map_err(anyhow::Error::msg)
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
    let plot_to = a.plot.clone();
    let out = a.out.clone();
    if let Some(files) = &a.compare {
        let (ra, rb) = (load_report(&files[0])?, load_report(&files[1])?);
        let (an, bn) = (
            files[0].display().to_string(),
            files[1].display().to_string(),
        );
        print!(
            "{}",
            scen::bench::compare::render((&ra, an.clone()), (&rb, bn.clone()), json)?
        );
        plot(a.plot.as_deref(), &[(&ra, an), (&rb, bn)])?;
        return Ok(Exit::Ok);
    }
    if !a.ab.is_empty() {
        let [x, y] = a.ab[..] else {
            anyhow::bail!("--ab takes two paths, e.g. --ab oneccl,torch");
        };
        let benches = scen::bench::run_ab(&a.request(), x.path(), y.path())?;
        let [ra, rb] = [&benches[0].report, &benches[1].report];
        let name = |r: &BenchReport| r.path.clone();
        let cmp = scen::bench::compare::render((ra, name(ra)), (rb, name(rb)), json)?;
        if json {
            let doc = serde_json::json!({
                "a": ra, "b": rb,
                "compare": serde_json::from_str::<serde_json::Value>(&cmp)?,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            for b in &benches {
                print!("{}", render(&b.report, b.pattern.as_ref()));
            }
            print!("{cmp}");
        }
        plot(plot_to.as_deref(), &[(ra, name(ra)), (rb, name(rb))])?;
        let wrong: u64 = [ra, rb]
            .iter()
            .flat_map(|r| &r.rows)
            .filter_map(|r| r.wrong)
            .sum();
        return Ok(if wrong > 0 { Exit::Failed } else { Exit::Ok });
    }
    let bench = scen::bench::run(&a.request())?;
    let report = &bench.report;
    let doc = serde_json::to_string_pretty(report)?;
    if let Some(to) = &out {
        scen::output::write_whole(to, format!("{doc}\n").as_bytes())?;
    }
    if json {
        println!("{doc}");
    } else {
        print!("{}", render(report, bench.pattern.as_ref()));
    }
    plot(plot_to.as_deref(), &[(report, report.path.clone())])?;
    let wrong: u64 = report.rows.iter().filter_map(|r| r.wrong).sum();
    Ok(if wrong > 0 { Exit::Failed } else { Exit::Ok })
}
