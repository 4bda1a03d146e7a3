//! `scen bench --calibrate`'s side effect: the fit (core's perf/calibrate.rs) applied to the
//! report, and the calibrated model written to `--model-out` with a note of how it was measured.

use super::plan::{BenchRequest, Plan};
use scen_core::perf::calibrate::{apply, versus_noise, Spread};
use scen_core::perf::model::rel_error;
use scen_core::perf::result::BenchReport;

/// Calibrates the plan's class on the report's measurements and writes the model to --model-out;
/// returns the calibration's held-out error.
pub fn run(
    req: &BenchRequest,
    plan: &Plan,
    report: &mut BenchReport,
) -> anyhow::Result<Option<Spread>> {
    let (mut file, held_out) = apply(&plan.model, report, plan.class, plan.library)?;
    let Some(out) = &req.model_out else {
        return Ok(held_out);
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
    Ok(held_out)
}

/// The spread of `--repeat`'s sweeps over every measured size ((max - min) / median of a size's
/// repeats); `None` with fewer than 2 repeats.
pub fn noise(measured: Option<&[scen_hw::bench::JobResult]>) -> Option<Spread> {
    Spread::of(measured?.iter().filter_map(|j| j.spread))
}

/// The model's error beside the noise: the calibration's held-out error (`held_out`), else this
/// sweep's prediction error against its measurement (a model given with --model: sizes the
/// calibration may not have seen). `None` without measured and predicted rows.
pub fn versus_noise_note(
    report: &BenchReport,
    held_out: Option<Spread>,
    noise: Option<Spread>,
) -> Option<String> {
    if let Some(h) = held_out {
        let what = "held out (each size predicted by a calibration that did not see it)";
        return Some(versus_noise(what, h, noise));
    }
    let errs = report
        .rows
        .iter()
        .filter_map(|r| Some(rel_error(r.sim?.time_us, r.measured_us()?)));
    let e = Spread::of(errs)?;
    Some(versus_noise("this sweep's prediction error", e, noise))
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
