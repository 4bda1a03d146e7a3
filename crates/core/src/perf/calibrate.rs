//! `scen bench --calibrate` once the measurements are in: fit the measured link class and its
//! per-op costs ([`super::fit`]) to a report's rows, replace their predictions with the fitted
//! model's, and add the notes that say how well it fits, in sample and on sizes held out of the
//! fit. Pure; writing the model file is the caller's.

use super::fit::{self, GroupFit, Sample};
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

/// The median and largest of some relative errors or spreads (absolute values), and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub max: f64,
    pub count: usize,
}

impl Spread {
    /// `None` when there are no values.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let v: Vec<f64> = values.into_iter().map(f64::abs).collect();
        (!v.is_empty()).then(|| Spread {
            max: v.iter().copied().fold(0.0, f64::max),
            count: v.len(),
            median: median(v),
        })
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.1}%, max {:.1}% over {} sizes",
            self.median * 100.0,
            self.max * 100.0,
            self.count
        )
    }
}

/// The model's error beside the machine's noise (the spread of a sweep's repeats of one size),
/// and whether it is within it: median error at most the median noise, max error at most twice
/// the median noise.
pub fn versus_noise(what: &str, error: Spread, noise: Option<Spread>) -> String {
    let Some(n) = noise else {
        return format!(
            "model error vs machine noise: {what} {error}; noise not measured (--repeat 2 or more)"
        );
    };
    let yes = |b: bool| if b { "yes" } else { "no" };
    format!(
        "model error vs machine noise: {what} {error}; the repeats of a size differ by {n}; median error within the median noise: {}, max error within twice the median noise: {}",
        yes(error.median <= n.median),
        yes(error.max <= 2.0 * n.median)
    )
}

/// Fits `class` on top of `base` (run on `library`) to the report's measurements, sets every
/// row's prediction and the report's model to the fit's, adds the notes, and returns the model
/// and its held-out error (every interior size of each per-op fit predicted by a calibration
/// that did not see it).
pub fn apply(
    base: &ModelFile,
    report: &mut BenchReport,
    class: LinkClass,
    library: Library,
) -> Result<(ModelFile, Option<Spread>), CalibrateError> {
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
    for g in &cal.groups {
        report
            .notes
            .push(format!("per-op cost: {} ({})", g.cost, forms(g)));
    }
    let errors = error_notes(report);
    report.notes.extend(errors);
    report.notes.push(format!(
        "worst prediction error after calibration: {:.1}%",
        cal.worst * 100.0
    ));
    report.notes.extend(held_out_notes(&cal.groups, ranks));
    let held_out = Spread::of(
        cal.groups
            .iter()
            .flat_map(|g| g.held_out.iter().map(|e| e.1)),
    );
    Ok((cal.model, held_out))
}

/// How the group's form was chosen: the mean held-out error of the best line, 1-knee and 2-knee
/// forms.
fn forms(g: &GroupFit) -> String {
    let scores: Vec<String> = ["line", "1 knee", "2 knees"]
        .iter()
        .zip(&g.by_knees)
        .filter_map(|(name, s)| s.map(|s| format!("{name} {:.1}%", s * 100.0)))
        .collect();
    format!("chosen by mean held-out error: {}", scores.join(", "))
}

/// Per op: every interior size of its per-op fits predicted by a calibration without that size.
fn held_out_notes(groups: &[GroupFit], ranks: usize) -> Vec<String> {
    let mut ops: Vec<BenchOp> = groups.iter().map(|g| g.cost.op).collect();
    ops.dedup();
    ops.into_iter()
        .filter_map(|op| {
            let errs = groups
                .iter()
                .filter(|g| g.cost.op == op)
                .flat_map(|g| g.held_out.iter().map(|e| e.1));
            let s = Spread::of(errs)?;
            Some(format!(
                "held-out error, {op} on {ranks} ranks (each size predicted by a calibration that did not see it): {s}"
            ))
        })
        .collect()
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
        let (m, held_out) = apply(
            &ModelFile::default(),
            &mut r,
            LinkClass::Host,
            Library::Scen,
        )
        .unwrap();
        // One op, one algorithm, 4 sizes: the 2 interior ones held out, both predicted exactly.
        let h = held_out.expect("held out");
        assert_eq!((h.count, h.max < 1e-9), (2, true), "{h:?}");
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
        assert!(r
            .notes
            .contains(&"worst prediction error after calibration: 0.0%".to_string()));
        let last = r.notes.last().unwrap();
        assert!(last.starts_with("held-out error, all_reduce on 2 ranks (each size predicted by a calibration that did not see it): median 0.0%, max 0.0% over 2 sizes"), "{last}");
    }

    #[test]
    fn error_beside_noise_says_whether_it_is_within_it() {
        let e = Spread::of([0.1, -0.3, 0.05]).unwrap();
        assert_eq!((e.median, e.max, e.count), (0.1, 0.3, 3));
        assert_eq!(Spread::of([]), None);
        let n = Spread::of([0.2, 0.1, 0.5]);
        let v = versus_noise("held out", e, n);
        assert!(v.ends_with("median error within the median noise: yes, max error within twice the median noise: yes"), "{v}");
        let tight = Spread::of([0.12, 0.1]);
        assert!(versus_noise("x", e, tight)
            .ends_with("yes, max error within twice the median noise: no"));
        assert!(versus_noise("x", e, None).contains("noise not measured"));
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
