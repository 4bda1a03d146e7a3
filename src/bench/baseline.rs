//! `scen bench --hw --baseline`: the bare-loop baseline (scripts/bench-baseline.sh, which
//! builds scripts/baseline/oneccl_bench.c against oneCCL's C API on libccl.so.2, the API and
//! library scen uses, and starts its own rank processes) run in turn with scen's measurement, sweep by sweep (scen, baseline, scen, ...
//! `--repeat` times), so load changes on a shared machine hit both. Unlike `--raw` (a bare loop
//! in scen's own processes, on its communicator), nothing of scen's is in the baseline's
//! processes. Each row's result is a note: the baseline's time and scen's busbw as % of it.

use super::hw::Run;
use super::plan::{BenchRequest, Plan};
use scen_core::perf::median;
use scen_core::perf::result::{BenchReport, BenchRow};
use scen_core::perf::sweep::human_size;
use scen_hw::bench::JobResult;
use std::path::PathBuf;
use std::process::Command;

/// The baseline's launcher: $SCEN_BASELINE_SCRIPT, else this checkout's script.
pub fn script() -> PathBuf {
    std::env::var_os("SCEN_BASELINE_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/bench-baseline.sh"
            ))
        })
}

/// One sweep of the baseline over the plan's jobs (every op at every size of the plan).
fn run_once(req: &BenchRequest, plan: &Plan) -> anyhow::Result<BenchReport> {
    let spec = &plan.spec;
    let mut ops: Vec<&str> = spec.jobs.iter().map(|j| j.op.name()).collect();
    ops.dedup();
    let mut sizes: Vec<usize> = spec.jobs.iter().map(|j| j.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
    let script = script();
    let out = Command::new("bash")
        .arg(&script)
        .args(["--ranks", &spec.ranks.to_string()])
        .args(["--op", &ops.join(",")])
        .args(["--sizes", &sizes.join(",")])
        .args(["--dtype", &spec.dtype, "--redop", &req.redop])
        .args(["--warmup", &spec.warmup.to_string()])
        .args(["--iters", &spec.iters.to_string()])
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "the baseline ({}) failed with {}: {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("the baseline's output is not a bench report: {e}"))
}

/// Runs scen's sweep and the baseline's in turn `repeat` times; scen's results as
/// [`super::hw::run`] gives them (each job's median over the sweeps) and the baseline's
/// median microseconds per call by (op, size).
pub fn run(req: &BenchRequest, plan: &Plan, repeat: usize) -> anyhow::Result<(Run, Vec<BenchRow>)> {
    let mut scen_runs = Vec::new();
    let mut base_runs = Vec::new();
    for _ in 0..repeat {
        scen_runs.push(super::hw::run(&plan.spec, 1)?);
        base_runs.push(run_once(req, plan)?);
    }
    let mut scen = scen_runs[0].clone();
    let job = |s: &Run, i: usize| s.jobs[i].result.clone();
    for (i, m) in scen.jobs.iter_mut().enumerate() {
        let pick = |f: &dyn Fn(&JobResult) -> Option<f64>| {
            scen_runs
                .iter()
                .map(|s| f(&job(s, i)))
                .collect::<Option<Vec<_>>>()
                .map(median)
        };
        let r = &mut m.result;
        r.time_us = pick(&|j| Some(j.time_us)).unwrap_or(r.time_us);
        r.median_us = pick(&|j| j.median_us);
        r.raw_us = pick(&|j| j.raw_us);
        r.wrong = scen_runs.iter().map(|s| job(s, i).wrong).sum();
        r.spread = super::hw::spread(
            scen_runs
                .iter()
                .map(|s| {
                    let j = job(s, i);
                    j.median_us.unwrap_or(j.time_us)
                })
                .collect(),
        );
        if repeat > 1 {
            m.repeats_us = scen_runs.iter().map(|s| job(s, i).time_us).collect();
        }
    }
    let mut base = base_runs[0].rows.clone();
    for (i, row) in base.iter_mut().enumerate() {
        let times: Vec<f64> = base_runs
            .iter()
            .filter_map(|b| b.rows.get(i).and_then(|r| r.hw.map(|t| t.time_us)))
            .collect();
        if let Some(t) = row.hw.as_mut() {
            *t = scen_core::perf::result::Timing::of(
                row.op,
                row.size_bytes,
                plan.spec.ranks,
                median(times.clone()),
            );
        }
        row.wrong = Some(base_runs.iter().filter_map(|b| b.rows.get(i)?.wrong).sum());
        if repeat > 1 {
            row.hw_repeats_us = times;
        }
    }
    Ok((scen, base))
}

/// One note per measured row: the baseline's time and busbw, scen's busbw as % of it, and
/// `--raw`'s % beside it when it ran.
pub fn notes(rows: &[BenchRow], base: &[BenchRow]) -> Vec<String> {
    let mut out = vec![
        "baseline: scripts/bench-baseline.sh (a bare loop of oneCCL C API calls on libccl.so.2 in its own processes, no scen code), sweeps interleaved with scen's; % of baseline = scen's busbw / the baseline's".to_string(),
    ];
    for r in rows {
        let Some(hw) = r.hw else { continue };
        let Some(b) = base
            .iter()
            .find(|b| b.op == r.op && b.size_bytes == r.size_bytes)
            .and_then(|b| b.hw)
        else {
            continue;
        };
        let raw = r.raw.map_or(String::new(), |raw| {
            format!(", {:.0}% of raw", 100.0 * raw.time_us / hw.time_us)
        });
        let (base_band, pct_band) = bands(r, base);
        out.push(format!(
            "baseline {} {}: {:.1} us{base_band}, busbw {:.3} GB/s; scen {:.1} us: {:.0}% of baseline{pct_band}{raw}",
            r.op,
            human_size(r.size_bytes),
            b.time_us,
            b.busbw_gbps,
            hw.time_us,
            100.0 * b.time_us / hw.time_us
        ));
    }
    out
}

/// With `--repeat`: the baseline's min-max time over its sweeps and the min-max of scen's % of
/// it, sweep k against sweep k (the noise band beside each figure); empty strings otherwise.
fn bands(r: &BenchRow, base: &[BenchRow]) -> (String, String) {
    let Some(b) = base
        .iter()
        .find(|b| b.op == r.op && b.size_bytes == r.size_bytes)
    else {
        return (String::new(), String::new());
    };
    let (bt, st) = (&b.hw_repeats_us, &r.hw_repeats_us);
    if bt.len() < 2 || bt.len() != st.len() {
        return (String::new(), String::new());
    }
    let range = |v: Vec<f64>, unit: &str| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(" [{lo:.1}-{hi:.1}{unit} over {} sweeps]", v.len())
    };
    let pct = bt.iter().zip(st).map(|(b, s)| 100.0 * b / s).collect();
    (range(bt.clone(), " us"), range(pct, "%"))
}
