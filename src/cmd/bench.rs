//! `scen bench`: nccl-tests-style sweeps of collectives. Without --hw the timing model predicts
//! (the per-message rule the simulator charges, over each algorithm's schedule); with --hw real
//! oneCCL (or scen's gloo host path) runs in one process per rank; --sim with --hw prints both.
//! Also: --raw (baseline loop, same processes), --pattern (the notes' diffusion models),
//! --calibrate (fit the model, write it with -o), --compare A.json B.json. See docs/bench.md.
//!
//! Exit codes: 0 ok; 1 when a hw run got wrong values (#wrong > 0); 2 on invalid arguments or
//! files, or when --hw cannot run here (no oneCCL) or a rank fails.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use scen::exit::Exit;
use scen_core::perf::compare::{compare, verdict, Bucket};
use scen_core::perf::fit::{self, Sample};
use scen_core::perf::model::{self, LinkClass, ModelFile};
use scen_core::perf::pattern::{self, Pattern, PatternKind, PatternParams};
use scen_core::perf::result::{BenchReport, BenchRow, Timing, SCHEMA};
use scen_core::perf::schedule::{AllReduceChoice, Library};
use scen_core::perf::sweep::{human_size, parse_sweep};
use scen_core::perf::{bandwidths, BenchOp};
use scen_hw::bench::{median, BenchJob, BenchPath, BenchSpec, JobResult};
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
    if let Some(files) = &a.compare {
        return run_compare(&files[0], &files[1], a.format);
    }
    let model = match &a.model {
        Some(p) => ModelFile::load(p)?,
        None => ModelFile::default(),
    };
    let dtype: scen_core::dtype::DType = a.dtype.parse().map_err(anyhow::Error::msg)?;
    let _: scen_core::reduce::ReduceOp = a.redop.parse().map_err(anyhow::Error::msg)?;
    let pattern = match &a.pattern {
        Some(name) => Some(build_pattern(&a, name, dtype.size_bytes())?),
        None => None,
    };
    let ranks = match (&pattern, a.ranks, a.nproc_per_node) {
        (Some(p), _, _) => p.ranks,
        (None, Some(r), _) => r,
        (None, None, Some(n)) => n * a.nnodes,
        (None, None, None) => 2 * a.nnodes,
    };
    if ranks == 0 {
        bail!("--ranks must be at least 1");
    }
    if a.hw && a.nnodes > 1 {
        bail!("scen bench --hw runs on one node (--nnodes 1); predictions take --nnodes");
    }
    let jobs = match &pattern {
        Some(p) => p
            .ops
            .iter()
            .map(|o| BenchJob {
                op: o.op,
                size_bytes: o.size_bytes,
            })
            .collect(),
        None => {
            let ops = parse_ops(&a.op)?;
            let sizes = parse_sweep(&a.sizes)?;
            ops.iter()
                .flat_map(|op| {
                    sizes.iter().map(move |s| BenchJob {
                        op: *op,
                        size_bytes: *s,
                    })
                })
                .collect::<Vec<_>>()
        }
    };
    let path = match a.path {
        PathArg::Oneccl => BenchPath::Oneccl,
        PathArg::Gloo => BenchPath::Gloo,
    };
    let class = match (path, a.nnodes > 1) {
        (BenchPath::Gloo, _) => LinkClass::Host,
        (_, true) => LinkClass::Inter,
        _ => LinkClass::Intra,
    };
    let env = parse_env(&a.env)?;
    // Whose algorithms the prediction charges: oneCCL's selection table for its path, with the
    // all-reduce `--env CCL_ALLREDUCE=...` names (what the measured processes run).
    let library = match (path, env.iter().find(|(k, _)| k == "CCL_ALLREDUCE")) {
        (BenchPath::Gloo, _) => Library::Scen,
        (BenchPath::Oneccl, None) => Library::OnecclCpu,
        (BenchPath::Oneccl, Some((_, v))) => match AllReduceChoice::parse(v) {
            Ok(c) => Library::OnecclCpuWith(c),
            // Measured only: real oneCCL runs any algorithm and nothing is predicted.
            Err(_) if a.hw && !a.sim && !a.calibrate => Library::OnecclCpu,
            Err(why) => bail!("--env CCL_ALLREDUCE={v}: {why}"),
        },
    };
    let spec = BenchSpec {
        jobs: jobs.clone(),
        dtype: dtype.name().to_string(),
        redop: a.redop.to_ascii_lowercase(),
        ranks,
        warmup: a.warmup,
        iters: a.iters.max(1),
        path,
        raw: a.raw,
        env: env.clone(),
    };
    let measured = if a.hw {
        Some(run_hw(&spec, a.repeat.max(1))?)
    } else {
        None
    };
    let predict = !a.hw || a.sim;
    let wall = std::time::Instant::now();
    let rows: Vec<BenchRow> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            row(
                &spec,
                j,
                measured.as_ref().map(|m| &m[i]),
                predict.then_some((&model, class, library)),
            )
        })
        .collect();
    let predict_wall_us = wall.elapsed().as_secs_f64() * 1e6;
    let mut report = BenchReport {
        schema: SCHEMA,
        path: if a.hw {
            path.name().to_string()
        } else {
            "sim".into()
        },
        ranks,
        nodes: a.nnodes,
        warmup: spec.warmup,
        iters: spec.iters,
        env,
        model: predict.then(|| model.links.to_string()),
        seed: 0,
        rows,
        notes: Vec::new(),
    };
    // Wall time is not part of the JSON report, which stays the same for the same input.
    if predict && matches!(a.format, OutFormat::Human) {
        report.notes.push(format!(
            "prediction: {} collectives in {:.1} us of wall time ({:.2} us each)",
            jobs.len(),
            predict_wall_us,
            predict_wall_us / jobs.len().max(1) as f64
        ));
    }
    if a.calibrate {
        calibrate(&a, &model, &mut report, class, library)?;
    } else if predict {
        // The model file's per-op costs for the nearest rank count it has.
        let nearest = model
            .ops
            .iter()
            .filter(|o| o.class == class)
            .map(|o| o.ranks)
            .min_by_key(|r| (r.abs_diff(ranks), *r));
        for o in model
            .ops
            .iter()
            .filter(|o| o.class == class && Some(o.ranks) == nearest)
        {
            report.notes.push(format!("per-op cost: {o}"));
        }
    }
    if let Some(p) = &pattern {
        report.notes.extend(pattern_notes(p, &report.rows));
    }
    match a.format {
        OutFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        OutFormat::Human => print!("{}", render(&report, pattern.as_ref())),
    }
    let wrong: u64 = report.rows.iter().filter_map(|r| r.wrong).sum();
    Ok(if wrong > 0 { Exit::Failed } else { Exit::Ok })
}

fn parse_ops(s: &str) -> anyhow::Result<Vec<BenchOp>> {
    if s == "all" {
        return Ok(BenchOp::ALL.to_vec());
    }
    s.split(',')
        .map(|o| o.trim().parse::<BenchOp>().map_err(anyhow::Error::msg))
        .collect()
}

fn parse_env(env: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    env.iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("--env `{kv}`: expected KEY=VALUE"),
        })
        .collect()
}

fn build_pattern(a: &BenchArgs, name: &str, elem_bytes: usize) -> anyhow::Result<Pattern> {
    let degree = match name {
        "wan-ulysses" | "ulysses" => a.ulysses.unwrap_or(2),
        "flux-tp" | "tp" => a.tp.unwrap_or(2),
        _ => a.cfg.unwrap_or(2),
    };
    let kind = PatternKind::parse(name, degree)?;
    let layers = a.layers.unwrap_or(match kind {
        PatternKind::WanUlysses { .. } => 30,
        PatternKind::FluxTp { .. } => 57,
        PatternKind::Cfg { .. } => 1,
    });
    let p = PatternParams {
        seq: a.seq,
        heads: a.heads,
        head_dim: a.head_dim,
        hidden: a.hidden,
        layers,
        text_len: a.text_len,
        elem_bytes,
    };
    Ok(pattern::build(kind, &p)?)
}

/// Runs the sweep `repeat` times in one launch (same processes and communicator) and keeps each
/// job's median time.
fn run_hw(spec: &BenchSpec, repeat: usize) -> anyhow::Result<Vec<JobResult>> {
    let n = spec.jobs.len();
    let mut all = spec.clone();
    all.jobs = (0..repeat)
        .flat_map(|_| spec.jobs.iter().copied())
        .collect();
    let results = run_hw_once(&all)?;
    Ok((0..n)
        .map(|i| {
            let runs: Vec<&JobResult> = results.iter().skip(i).step_by(n).collect();
            let mut r = runs[0].clone();
            r.time_us = median(runs.iter().map(|x| x.time_us).collect());
            r.median_us = runs
                .iter()
                .map(|x| x.median_us)
                .collect::<Option<Vec<f64>>>()
                .map(median);
            r.raw_us = runs
                .iter()
                .map(|x| x.raw_us)
                .collect::<Option<Vec<f64>>>()
                .map(median);
            r.wrong = runs.iter().map(|x| x.wrong).sum();
            r
        })
        .collect())
}

fn run_hw_once(spec: &BenchSpec) -> anyhow::Result<Vec<JobResult>> {
    // indicatif draws only when stderr is a terminal.
    let bar = indicatif::ProgressBar::new(spec.jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{} ranks on {}", spec.ranks, spec.path.name()));
    let r = scen_hw::bench::run(spec, None, &mut |done, res| {
        bar.set_position(done as u64);
        bar.set_message(format!(
            "{} {} done",
            res.job.op,
            human_size(res.job.size_bytes)
        ));
    });
    bar.finish_and_clear();
    Ok(r?)
}

fn timing(op: BenchOp, bytes: usize, ranks: usize, us: f64) -> Timing {
    let (algbw_gbps, busbw_gbps) = bandwidths(op, bytes, ranks, us);
    Timing {
        time_us: us,
        algbw_gbps,
        busbw_gbps,
    }
}

fn row(
    spec: &BenchSpec,
    j: &BenchJob,
    m: Option<&JobResult>,
    predict: Option<(&ModelFile, LinkClass, Library)>,
) -> BenchRow {
    let elem = spec
        .dtype
        .parse::<scen_core::dtype::DType>()
        .map_or(4, |d| d.size_bytes());
    let count = m.map_or_else(
        || scen_hw::bench::rank::send_count(j.op, j.size_bytes, elem, spec.ranks),
        |m| m.count,
    );
    let bytes = j.op.size_bytes(count, elem, spec.ranks);
    BenchRow {
        op: j.op,
        size_bytes: bytes,
        count,
        dtype: spec.dtype.clone(),
        redop: if j.op.reduces() {
            spec.redop.clone()
        } else {
            "-".into()
        },
        hw: m.map(|m| timing(j.op, bytes, spec.ranks, m.time_us)),
        hw_median_us: m.and_then(|m| m.median_us),
        raw: m
            .and_then(|m| m.raw_us)
            .map(|t| timing(j.op, bytes, spec.ranks, t)),
        sim: predict.map(|(model, class, library)| {
            timing(
                j.op,
                bytes,
                spec.ranks,
                model.predict_us(j.op, bytes, spec.ranks, class, library),
            )
        }),
        wrong: m.map(|m| m.wrong),
    }
}

/// Fits the measured class and its per-op costs (perf/fit.rs) on top of `base` (--model),
/// writes the model, adds the fitted prediction and each op's error.
fn calibrate(
    a: &BenchArgs,
    base: &ModelFile,
    report: &mut BenchReport,
    class: LinkClass,
    library: Library,
) -> anyhow::Result<()> {
    let samples: Vec<Sample> = report
        .rows
        .iter()
        .filter_map(|r| {
            r.measured_us().map(|t| Sample {
                op: r.op,
                bytes: r.size_bytes,
                ranks: report.ranks,
                time_us: t,
            })
        })
        .collect();
    let Some(cal) = fit::calibrate(base, &samples, class, library) else {
        bail!(
            "--calibrate needs at least two sizes with positive times (got {})",
            samples.len()
        );
    };
    for r in &mut report.rows {
        let p = cal
            .model
            .predict_us(r.op, r.size_bytes, report.ranks, class, library);
        r.sim = Some(timing(r.op, r.size_bytes, report.ranks, p));
    }
    report.model = Some(cal.model.links.to_string());
    let c = cal.class_cost;
    report.notes.push(format!(
        "calibrated {}: alpha {:.2} us, beta {:.3} GB/s{} from {} points; worst error with the class link alone {:.1}%",
        class.name(),
        c.alpha_us,
        c.beta_gbps,
        c.reduce_gbps.map_or(String::new(), |g| format!(", reduction {g:.3} GB/s")),
        samples.len(),
        cal.worst_class_only * 100.0
    ));
    for o in cal
        .model
        .ops
        .iter()
        .filter(|o| o.class == class && o.ranks == report.ranks)
    {
        report.notes.push(format!("per-op cost: {o}"));
    }
    let mut ops: Vec<scen_core::perf::BenchOp> = report.rows.iter().map(|r| r.op).collect();
    ops.dedup();
    for op in ops {
        let errs: Vec<f64> = report
            .rows
            .iter()
            .filter(|r| r.op == op)
            .filter_map(|r| Some(model::rel_error(r.sim?.time_us, r.measured_us()?).abs()))
            .collect();
        let worst = errs.iter().copied().fold(0.0, f64::max);
        report.notes.push(format!(
            "error after calibration, {op} on {} ranks: worst {:.1}%, median {:.1}% over {} sizes",
            report.ranks,
            worst * 100.0,
            median(errs.clone()) * 100.0,
            errs.len()
        ));
    }
    report.notes.push(format!(
        "worst prediction error after calibration: {:.1}%",
        cal.worst * 100.0
    ));
    if let Some(out) = &a.out {
        let mut file = cal.model.clone();
        file.notes.push(format!(
            "calibrated by scen bench --calibrate --hw on {} ranks ({}), ops {}, sizes {}, iters {}, repeat {}",
            report.ranks, report.path, a.op, a.sizes, a.iters, a.repeat
        ));
        let text = toml::to_string(&file)?;
        scen::output::write_whole(out, text.as_bytes())?;
        report
            .notes
            .push(format!("model written to {}", out.display()));
    }
    Ok(())
}

fn pattern_notes(p: &Pattern, rows: &[BenchRow]) -> Vec<String> {
    let mut notes = Vec::new();
    for (label, pick) in [("hw", 0), ("sim", 1)] {
        let times: Option<Vec<f64>> = rows
            .iter()
            .map(|r| if pick == 0 { r.hw } else { r.sim }.map(|t| t.time_us))
            .collect();
        if let Some(t) = times {
            let step = pattern::step_us(p, &t);
            notes.push(format!(
                "{label}: {:.3} ms of communication per denoise step ({p})",
                step / 1e3
            ));
        }
    }
    for (o, r) in p.ops.iter().zip(rows) {
        let t = r.hw.or(r.sim).map_or(0.0, |t| t.time_us);
        notes.push(format!(
            "{} x{} per step: {:.1} us per op, {:.3} ms per step, shape {:?}",
            o.label,
            o.per_step,
            t,
            t * o.per_step as f64 / 1e3,
            o.shape
        ));
    }
    notes
}

fn render(r: &BenchReport, p: Option<&Pattern>) -> String {
    let mut s = String::new();
    let env: Vec<String> = r.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    s.push_str(&format!(
        "# scen bench: {} ranks on {} node(s), path {}, warmup {}, iters {}{}\n",
        r.ranks,
        r.nodes,
        r.path,
        r.warmup,
        r.iters,
        if env.is_empty() {
            String::new()
        } else {
            format!(", env {}", env.join(" "))
        }
    ));
    if let Some(m) = &r.model {
        s.push_str(&format!("# model: {m}\n"));
    }
    if let Some(p) = p {
        s.push_str(&format!("# pattern: {p}\n"));
    }
    let any = |f: fn(&BenchRow) -> bool| r.rows.iter().any(f);
    let (has_hw, has_raw, has_sim, has_med) = (
        any(|x| x.hw.is_some()),
        any(|x| x.raw.is_some()),
        any(|x| x.sim.is_some()),
        any(|x| x.hw_median_us.is_some()),
    );
    let mut head = format!(
        "{:>14} {:>10} {:>10} {:>5} {:>5}",
        "op", "size", "count", "type", "redop"
    );
    if has_hw {
        head += &format!(
            " {:>10} {:>8} {:>8} {:>6}",
            "time_us", "algbw", "busbw", "#wrong"
        );
    }
    if has_raw {
        head += &format!(" {:>10} {:>8} {:>7}", "raw_us", "raw_bus", "%raw");
    }
    if has_sim {
        head += &format!(" {:>10} {:>8}", "sim_us", "sim_bus");
        if has_hw {
            if has_med {
                head += &format!(" {:>10}", "med_us");
            }
            head += &format!(" {:>7}", "err%");
        }
    }
    s.push_str(&format!("#{}\n", &head[1..]));
    for x in &r.rows {
        let mut line = format!(
            "{:>14} {:>10} {:>10} {:>5} {:>5}",
            x.op.name(),
            x.size_bytes,
            x.count,
            x.dtype,
            x.redop
        );
        if let Some(h) = x.hw {
            line += &format!(
                " {:>10.1} {:>8.3} {:>8.3} {:>6}",
                h.time_us,
                h.algbw_gbps,
                h.busbw_gbps,
                x.wrong.unwrap_or(0)
            );
        }
        if let (Some(w), Some(h)) = (x.raw, x.hw) {
            line += &format!(
                " {:>10.1} {:>8.3} {:>6.1}%",
                w.time_us,
                w.busbw_gbps,
                100.0 * h.busbw_gbps / w.busbw_gbps.max(f64::MIN_POSITIVE)
            );
        }
        if let Some(m) = x.sim {
            line += &format!(" {:>10.1} {:>8.3}", m.time_us, m.busbw_gbps);
            if let Some(t) = x.measured_us() {
                if has_med {
                    line += &format!(" {:>10.1}", x.hw_median_us.unwrap_or(t));
                }
                line += &format!(" {:>+6.1}%", model::rel_error(m.time_us, t) * 100.0);
            }
        }
        s.push_str(&line);
        s.push('\n');
    }
    for n in &r.notes {
        s.push_str(&format!("# {n}\n"));
    }
    s
}

fn load_report(p: &PathBuf) -> anyhow::Result<BenchReport> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not a `scen bench --format json` report: {e}",
            p.display(),
            e.line(),
            e.column()
        )
    })
}

fn run_compare(a: &PathBuf, b: &PathBuf, format: OutFormat) -> anyhow::Result<Exit> {
    let (ra, rb) = (load_report(a)?, load_report(b)?);
    let c = compare(&ra, &rb);
    let (an, bn) = (a.display().to_string(), b.display().to_string());
    let v = verdict(&c, &an, &bn);
    if let OutFormat::Json = format {
        let doc = serde_json::json!({
            "a": an, "b": bn,
            "sizes": c.sizes.iter().map(|s| serde_json::json!({
                "op": s.op, "size_bytes": s.size_bytes, "a_us": s.a_us, "b_us": s.b_us, "speedup": s.speedup()
            })).collect::<Vec<_>>(),
            "buckets": c.buckets.iter().map(|b| serde_json::json!({
                "bucket": b.bucket.label(), "sizes": b.sizes, "speedup": b.speedup
            })).collect::<Vec<_>>(),
            "overall": c.overall,
            "unmatched": c.unmatched,
            "verdict": v,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(Exit::Ok);
    }
    println!("# A = {an} ({} ranks, path {})", ra.ranks, ra.path);
    println!("# B = {bn} ({} ranks, path {})", rb.ranks, rb.path);
    println!(
        "{:>14} {:>10} {:>12} {:>12} {:>9} {:>9}",
        "op", "size", "A_us", "B_us", "speedup", "bucket"
    );
    for s in &c.sizes {
        println!(
            "{:>14} {:>10} {:>12.1} {:>12.1} {:>8.2}x {:>9}",
            s.op.name(),
            human_size(s.size_bytes),
            s.a_us,
            s.b_us,
            s.speedup(),
            Bucket::of(s.size_bytes).label()
        );
    }
    println!("# by bucket (geometric mean of B's speedup over A):");
    for b in &c.buckets {
        println!(
            "{:>10}: {:.2}x over {} sizes ({:+.1}%)",
            b.bucket.label(),
            b.speedup,
            b.sizes,
            (b.speedup - 1.0) * 100.0
        );
    }
    if c.unmatched > 0 {
        println!(
            "# {} rows appear in only one file and are not compared",
            c.unmatched
        );
    }
    println!("verdict: {v}");
    Ok(Exit::Ok)
}
