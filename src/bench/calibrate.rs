//! `scen bench --calibrate`'s side effect: the fit (core's perf/calibrate.rs) applied to the
//! report, and the calibrated model written to `-o` with a note of how it was measured.

use super::plan::{BenchRequest, Plan};
use scen_core::perf::calibrate::apply;
use scen_core::perf::result::BenchReport;

/// Calibrates the plan's class on the report's measurements and writes the model to --out.
pub fn run(req: &BenchRequest, plan: &Plan, report: &mut BenchReport) -> anyhow::Result<()> {
    let mut file = apply(&plan.model, report, plan.class, plan.library)?;
    let Some(out) = &req.out else {
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
