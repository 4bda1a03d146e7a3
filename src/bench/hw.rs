//! `scen bench --hw`'s measurement: the whole sweep `--repeat` times in one launch of the rank
//! processes (scen_hw::bench for oneCCL and gloo, scen_torch::bench for torch.distributed),
//! each job's median over the repeats, and a progress bar on a terminal's stderr. `--ab` runs
//! two paths in turns, one launch per repeat and path, alternating which goes first.

use scen_core::dtype::DType;
use scen_core::perf::sweep::human_size;
use scen_hw::bench::{median, BenchPath, BenchSpec, JobResult};
use scen_torch::bench::{TorchBenchSpec, TorchJob};

/// One job measured: its result (median over repeats) and each repeat's time (when > 1).
#[derive(Debug, Clone)]
pub struct Measured {
    pub result: JobResult,
    pub repeats_us: Vec<f64>,
}

/// A path's measurement and what measured it.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub jobs: Vec<Measured>,
    pub backend: Option<String>,
    pub torch: Option<String>,
    pub oneccl: Option<String>,
}

/// Runs the sweep `repeat` times in one launch (same processes and communicator) and keeps each
/// job's median time.
pub fn run(spec: &BenchSpec, repeat: usize) -> anyhow::Result<Run> {
    let n = spec.jobs.len();
    let mut all = spec.clone();
    all.jobs = (0..repeat)
        .flat_map(|_| spec.jobs.iter().copied())
        .collect();
    let (results, mut run) = run_once(&all)?;
    run.jobs = (0..n)
        .map(|i| merge(results.iter().skip(i).step_by(n).collect()))
        .collect();
    Ok(run)
}

/// `--ab`: each spec `repeat` times, one launch per repeat and spec, A then B in even repeats
/// and B then A in odd ones, so that a shared machine's load changes hit both alike.
pub fn run_ab(a: &BenchSpec, b: &BenchSpec, repeat: usize) -> anyhow::Result<[Run; 2]> {
    let mut got: [Vec<Vec<JobResult>>; 2] = [Vec::new(), Vec::new()];
    let mut info = [Run::default(), Run::default()];
    for i in 0..repeat {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let (res, r) = run_once(if k == 0 { a } else { b })?;
            got[k].push(res);
            info[k] = r;
        }
    }
    for k in 0..2 {
        let n = got[k].first().map_or(0, Vec::len);
        info[k].jobs = (0..n)
            .map(|j| merge(got[k].iter().map(|rep| &rep[j]).collect()))
            .collect();
    }
    Ok(info)
}

/// One job's repeats as one result: median times, summed wrong values, each repeat's time.
fn merge(runs: Vec<&JobResult>) -> Measured {
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
    r.spread = spread(
        runs.iter()
            .map(|x| x.median_us.unwrap_or(x.time_us))
            .collect(),
    );
    let repeats_us = if runs.len() > 1 {
        runs.iter().map(|x| x.time_us).collect()
    } else {
        Vec::new()
    };
    Measured {
        result: r,
        repeats_us,
    }
}

/// (max - min) / median of one job's repeated sweeps (None for fewer than 2).
pub fn spread(t: Vec<f64>) -> Option<f64> {
    let (lo, hi) = t
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    let m = median(t.clone());
    (t.len() >= 2 && m > 0.0).then(|| (hi - lo) / m)
}

fn bar(spec: &BenchSpec) -> indicatif::ProgressBar {
    // indicatif draws only when stderr is a terminal.
    let bar = indicatif::ProgressBar::new(spec.jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{} ranks on {}", spec.ranks, spec.path.name()));
    bar
}

fn run_once(spec: &BenchSpec) -> anyhow::Result<(Vec<JobResult>, Run)> {
    if spec.path == BenchPath::Torch {
        return run_torch(spec);
    }
    let bar = bar(spec);
    let r = scen_hw::bench::run(spec, None, &mut |done, res| {
        bar.set_position(done as u64);
        bar.set_message(format!(
            "{} {} done",
            res.job.op,
            human_size(res.job.size_bytes)
        ));
    });
    bar.finish_and_clear();
    let info = Run {
        oneccl: (spec.path == BenchPath::Oneccl)
            .then(scen_hw::bench::oneccl_version)
            .flatten(),
        ..Run::default()
    };
    Ok((r?, info))
}

/// The same jobs (same per-rank element counts as the oneCCL ranks use) through torch.distributed.
fn run_torch(spec: &BenchSpec) -> anyhow::Result<(Vec<JobResult>, Run)> {
    let elem = spec.dtype.parse::<DType>().map_or(4, |d| d.size_bytes());
    let tspec = TorchBenchSpec {
        jobs: spec
            .jobs
            .iter()
            .map(|j| {
                let c = scen_hw::bench::rank::send_count(j.op, j.size_bytes, elem, spec.ranks);
                (j.op, c)
            })
            .collect(),
        dtype: spec.dtype.clone(),
        redop: spec.redop.clone(),
        ranks: spec.ranks,
        warmup: spec.warmup,
        iters: spec.iters,
        env: spec.env.clone(),
        python: None,
    };
    let bar = bar(spec);
    let r = scen_torch::bench::run(&tspec, &mut |done, j: &TorchJob| {
        bar.set_position(done as u64);
        let job = spec.jobs[j.index];
        bar.set_message(format!("{} {} done", job.op, human_size(job.size_bytes)));
    });
    bar.finish_and_clear();
    let t = r?;
    let results = t
        .jobs
        .iter()
        .map(|j| JobResult {
            job: spec.jobs[j.index],
            count: j.count,
            time_us: j.time_us,
            median_us: j.median_us,
            raw_us: None,
            wrong: j.wrong,
            spread: None,
        })
        .collect();
    Ok((
        results,
        Run {
            jobs: Vec::new(),
            backend: Some(t.backend),
            torch: Some(t.torch),
            oneccl: None,
        },
    ))
}
