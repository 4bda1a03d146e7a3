//! `scen bench`'s work, for the CLI (src/cmd/bench.rs prints it) and the tests: plan a request
//! ([`plan`]), measure it on real oneCCL or gloo ([`hw`]), predict it with the timing model
//! ([`rows`]), calibrate the model ([`calibrate`]) and compare two reports ([`compare`]). What
//! needs no hardware lives in scen_core::perf.

pub mod baseline;
pub mod calibrate;
pub mod compare;
pub mod hw;
pub mod plan;
pub mod plot;
pub mod rows;

use plan::{BenchRequest, Plan};
use scen_core::perf::notes::{pattern_notes, per_op_costs};
use scen_core::perf::pattern::Pattern;
use scen_core::perf::result::{BenchReport, BenchRow, ModelSource, PatternInfo};
use scen_hw::bench::BenchPath;

/// A finished run: the report and the pattern it timed, if any.
#[derive(Debug, Clone)]
pub struct Bench {
    pub report: BenchReport,
    pub pattern: Option<Pattern>,
}

/// Plans, measures (--hw), predicts, calibrates (--calibrate) and annotates a request.
pub fn run(req: &BenchRequest) -> anyhow::Result<Bench> {
    let plan = plan::plan(req)?;
    let (measured, base) = match (req.hw, req.baseline) {
        (true, true) => {
            let (m, b) = baseline::run(req, &plan, req.repeat.max(1))?;
            (Some(m), Some(b))
        }
        (true, false) => (Some(hw::run(&plan.spec, req.repeat.max(1))?), None),
        _ => (None, None),
    };
    finish(req, plan, measured, base)
}

/// `--ab A,B`: both paths measured in turns (hw::run_ab), each as its own report.
pub fn run_ab(req: &BenchRequest, a: BenchPath, b: BenchPath) -> anyhow::Result<[Bench; 2]> {
    if a == b {
        anyhow::bail!("--ab needs two different paths, got {} twice", a.name());
    }
    let plan_of = |p: BenchPath| {
        let mut r = req.clone();
        r.path = p;
        r.hw = true;
        plan::plan(&r).map(|pl| (r, pl))
    };
    let ((ra, pa), (rb, pb)) = (plan_of(a)?, plan_of(b)?);
    let [ma, mb] = hw::run_ab(&pa.spec, &pb.spec, req.repeat.max(1))?;
    Ok([
        finish(&ra, pa, Some(ma), None)?,
        finish(&rb, pb, Some(mb), None)?,
    ])
}

/// The report of a plan from its measurement (and the baseline's rows, `--baseline`).
fn finish(
    req: &BenchRequest,
    plan: Plan,
    measured: Option<hw::Run>,
    base: Option<Vec<BenchRow>>,
) -> anyhow::Result<Bench> {
    let predict = req.predicts();
    let wall = std::time::Instant::now();
    let rows = rows::rows(&plan, measured.as_ref().map(|m| m.jobs.as_slice()), predict);
    let wall_us = wall.elapsed().as_secs_f64() * 1e6;
    let mut report = report(req, &plan, rows);
    let results: Option<Vec<_>> = measured
        .as_ref()
        .map(|m| m.jobs.iter().map(|j| j.result.clone()).collect());
    if let Some(m) = measured {
        (report.backend, report.torch, report.oneccl) = (m.backend, m.torch, m.oneccl);
    }
    if predict && req.wall_time_note {
        report.notes.push(wall_note(plan.spec.jobs.len(), wall_us));
    }
    let noise = calibrate::noise(results.as_deref());
    if req.calibrate {
        let held_out = calibrate::run(req, &plan, &mut report)?;
        report.model_source = Some(ModelSource::Calibrated);
        report
            .notes
            .extend(calibrate::noise_notes(results.as_deref(), req.repeat));
        report
            .notes
            .extend(calibrate::versus_noise_note(&report, held_out, noise));
    } else if predict {
        report
            .notes
            .extend(calibrate::noise_notes(results.as_deref(), req.repeat));
        let costs = per_op_costs(&plan.model, plan.class, plan.spec.ranks);
        report.notes.extend(costs);
        if results.is_some() {
            let note = calibrate::versus_noise_note(&report, None, noise);
            report.notes.extend(note);
        }
    }
    if let Some(b) = &base {
        report.notes.extend(baseline::notes(&report.rows, b));
    }
    if let Some(p) = &plan.pattern {
        report.notes.extend(pattern_notes(p, &report.rows));
        report.pattern = Some(PatternInfo {
            name: p.name.to_string(),
            layers: p.layers,
            per_step: p.ops.iter().map(|o| o.per_step).collect(),
            labels: p.ops.iter().map(|o| o.label.clone()).collect(),
        });
    }
    Ok(Bench {
        report,
        pattern: plan.pattern,
    })
}

fn report(req: &BenchRequest, plan: &Plan, rows: Vec<BenchRow>) -> BenchReport {
    let spec = &plan.spec;
    let path = if req.hw { spec.path.name() } else { "sim" };
    BenchReport {
        nodes: req.nnodes,
        warmup: spec.warmup,
        iters: spec.iters,
        env: spec.env.clone(),
        model: req.predicts().then(|| plan.model.links.to_string()),
        model_source: req.predicts().then_some(if req.model.is_some() {
            ModelSource::File
        } else {
            ModelSource::Default
        }),
        rows,
        ..BenchReport::new(path, spec.ranks)
    }
}

fn wall_note(jobs: usize, wall_us: f64) -> String {
    format!(
        "prediction: {jobs} collectives in {wall_us:.1} us of wall time ({:.2} us each)",
        wall_us / jobs.max(1) as f64
    )
}
