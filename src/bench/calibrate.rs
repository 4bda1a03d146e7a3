//! `scen bench --calibrate`'s side effect: the fit (core's perf/calibrate.rs) applied to the
//! report, and the calibrated model written to `--model-out` with a note of how it was measured.

use super::plan::{BenchRequest, Plan};
use scen_core::perf::calibrate::apply;
use scen_core::perf::result::BenchReport;

/// Calibrates the plan's class on the report's measurements and writes the model to --model-out.
pub fn run(req: &BenchRequest, plan: &Plan, report: &mut BenchReport) -> anyhow::Result<()> {
    let mut file = apply(&plan.model, report, plan.class, plan.library)?;
    let Some(out) = &req.model_out else {
        return Ok(());
    };
    file.notes.push(format!(
        "calibrated by scen bench --calibrate --hw on {} ranks ({}), ops {}, sizes {}, iters {}, repeat {}",
        report.ranks, report.path, req.op, req.sizes, req.iters, req.repeat
    ));
    let text = toml::to_string(&file)?;
    crate::output::write_whole(out, text.as_bytes())?;
    report
        .notes
        .push(format!("model written to {}", out.display()));
    Ok(())
}

/// The machine's own drift and noise beside the model's error: per op, how far `--repeat`'s
/// sweeps of the same size lie apart ((max - min) / median), median and worst over sizes. A
/// model error within that spread is noise, not the model.
pub fn noise_notes(measured: Option<&[scen_hw::bench::JobResult]>, repeat: usize) -> Vec<String> {
    let Some(m) = measured else {
        return Vec::new();
    };
    if repeat < 2 {
        return vec!["machine noise: not measured (use --repeat 2 or more to separate it from the model's error)".into()];
    }
    let mut ops: Vec<_> = m.iter().map(|j| j.job.op).collect();
    ops.dedup();
    ops.iter()
        .filter_map(|op| {
            let s: Vec<f64> = m.iter().filter(|j| j.job.op == *op).filter_map(|j| j.spread).collect();
            let worst = s.iter().copied().fold(0.0, f64::max);
            (!s.is_empty()).then(|| format!(
                "machine noise, {op}: the {repeat} sweeps of a size differ by median {:.1}%, worst {:.1}% over {} sizes (drift and noise, not the model)",
                scen_core::perf::median(s.clone()) * 100.0,
                worst * 100.0,
                s.len()
            ))
        })
        .collect()
}
