//! `scen bench --hw`'s measurement: the whole sweep `--repeat` times in one launch of the rank
//! processes (scen_hw::bench), each job's median over the repeats, and a progress bar on a
//! terminal's stderr.

use scen_core::perf::sweep::human_size;
use scen_hw::bench::{median, BenchSpec, JobResult};

/// Runs the sweep `repeat` times in one launch (same processes and communicator) and keeps each
/// job's median time.
pub fn run(spec: &BenchSpec, repeat: usize) -> anyhow::Result<Vec<JobResult>> {
    let n = spec.jobs.len();
    let mut all = spec.clone();
    all.jobs = (0..repeat)
        .flat_map(|_| spec.jobs.iter().copied())
        .collect();
    let results = run_once(&all)?;
    Ok((0..n)
        .map(|i| merge(results.iter().skip(i).step_by(n).collect()))
        .collect())
}

/// One job's repeats as one result: median times, summed wrong values.
fn merge(runs: Vec<&JobResult>) -> JobResult {
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
    r
}

/// (max - min) / median of one job's repeated sweeps (None for fewer than 2).
pub fn spread(t: Vec<f64>) -> Option<f64> {
    let (lo, hi) = t
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    let m = median(t.clone());
    (t.len() >= 2 && m > 0.0).then(|| (hi - lo) / m)
}

fn run_once(spec: &BenchSpec) -> anyhow::Result<Vec<JobResult>> {
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
