//! `scen bench --calibrate` once the measurements are in: fit the measured link class and its
//! per-op costs ([`super::fit`]) to a report's rows, replace their predictions with the fitted
//! model's, and add the notes that say how well it fits. Pure; writing the model file is the
//! caller's.

use super::fit::{self, Sample};
use super::model::{self, LinkClass, ModelFile};
use super::result::{BenchReport, Timing};
use super::schedule::Library;
use super::{median, BenchOp};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrateError {
    #[error("--calibrate needs at least two sizes with positive times (got {0})")]
    TooFewPoints(usize),
}

/// The report's measured rows as fit samples.
fn samples(report: &BenchReport) -> Vec<Sample> {
    report
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
        .collect()
}

/// Fits `class` on top of `base` (run on `library`) to the report's measurements, sets every
/// row's prediction and the report's model to the fit's, adds the notes, and returns the model.
pub fn apply(
    base: &ModelFile,
    report: &mut BenchReport,
    class: LinkClass,
    library: Library,
) -> Result<ModelFile, CalibrateError> {
    let samples = samples(report);
    let cal = fit::calibrate(base, &samples, class, library)
        .ok_or(CalibrateError::TooFewPoints(samples.len()))?;
    let ranks = report.ranks;
    for r in &mut report.rows {
        let p = cal
            .model
            .predict_us(r.op, r.size_bytes, ranks, class, library);
        r.sim = Some(Timing::of(r.op, r.size_bytes, ranks, p));
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
        .filter(|o| o.class == class && o.ranks == ranks)
    {
        report.notes.push(format!("per-op cost: {o}"));
    }
    let errors = error_notes(report);
    report.notes.extend(errors);
    report.notes.push(format!(
        "worst prediction error after calibration: {:.1}%",
        cal.worst * 100.0
    ));
    Ok(cal.model)
}

/// Each op's worst and median prediction error against the measurement (ops in row order,
/// consecutive repeats once).
fn error_notes(report: &BenchReport) -> Vec<String> {
    let mut ops: Vec<BenchOp> = report.rows.iter().map(|r| r.op).collect();
    ops.dedup();
    ops.into_iter()
        .map(|op| {
            let errs: Vec<f64> = report
                .rows
                .iter()
                .filter(|r| r.op == op)
                .filter_map(|r| Some(model::rel_error(r.sim?.time_us, r.measured_us()?).abs()))
                .collect();
            let worst = errs.iter().copied().fold(0.0, f64::max);
            format!(
                "error after calibration, {op} on {} ranks: worst {:.1}%, median {:.1}% over {} sizes",
                report.ranks,
                worst * 100.0,
                median(errs.clone()) * 100.0,
                errs.len()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::result::{BenchRow, SCHEMA};

    /// A measured report whose times the model `truth` predicts exactly.
    fn measured(truth: &ModelFile, sizes: &[usize]) -> BenchReport {
        let rows = sizes
            .iter()
            .map(|&s| {
                let t = truth.predict_us(BenchOp::AllReduce, s, 2, LinkClass::Host, Library::Scen);
                BenchRow {
                    op: BenchOp::AllReduce,
                    size_bytes: s,
                    count: s / 4,
                    dtype: "f32".into(),
                    redop: "sum".into(),
                    hw: Some(Timing::of(BenchOp::AllReduce, s, 2, t)),
                    raw: None,
                    sim: None,
                    hw_median_us: None,
                    wrong: Some(0),
                    hw_repeats_us: Vec::new(),
                }
            })
            .collect();
        BenchReport {
            schema: SCHEMA,
            path: "gloo".into(),
            ranks: 2,
            nodes: 1,
            warmup: 1,
            iters: 1,
            env: vec![],
            model: None,
            model_source: None,
            seed: 0,
            rows,
            notes: vec![],
            backend: None,
            torch: None,
            oneccl: None,
            pattern: None,
        }
    }

    #[test]
    fn calibration_recovers_the_measured_link_and_notes_its_error() {
        let mut truth = ModelFile::default();
        truth.links.cost_mut(LinkClass::Host).alpha_us = 80.0;
        let mut r = measured(&truth, &[4096, 65536, 1 << 20, 16 << 20]);
        let m = apply(
            &ModelFile::default(),
            &mut r,
            LinkClass::Host,
            Library::Scen,
        )
        .unwrap();
        assert_eq!(r.model, Some(m.links.to_string()));
        assert!(r.rows.iter().all(|x| x.sim.is_some()));
        assert!(
            r.notes[0].starts_with("calibrated host: alpha "),
            "{:?}",
            r.notes
        );
        let errors = r
            .notes
            .iter()
            .find(|n| n.starts_with("error after calibration"));
        assert!(
            errors.unwrap().contains("all_reduce on 2 ranks"),
            "{:?}",
            r.notes
        );
        let last = r.notes.last().unwrap();
        assert_eq!(last, "worst prediction error after calibration: 0.0%");
    }

    #[test]
    fn calibration_needs_two_measured_sizes() {
        let mut r = measured(&ModelFile::default(), &[4096]);
        let e = apply(
            &ModelFile::default(),
            &mut r,
            LinkClass::Host,
            Library::Scen,
        );
        assert_eq!(e.unwrap_err(), CalibrateError::TooFewPoints(1));
        assert!(r.notes.is_empty() && r.rows[0].sim.is_none());
    }
}
