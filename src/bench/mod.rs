//! `scen bench`'s work, for the CLI (src/cmd/bench.rs prints it) and the tests: plan a request
//! ([`plan`]), measure it on real oneCCL or gloo ([`hw`]), predict it with the timing model
//! ([`rows`]), calibrate the model ([`calibrate`]) and compare two reports ([`compare`]). What
//! needs no hardware lives in scen_core::perf.

pub mod baseline;
pub mod calibrate;
pub mod compare;
pub mod hw;
pub mod plan;
pub mod rows;

use plan::{BenchRequest, Plan};
use scen_core::perf::notes::{pattern_notes, per_op_costs};
use scen_core::perf::pattern::Pattern;
use scen_core::perf::result::{BenchReport, BenchRow, SCHEMA};

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
    let predict = req.predicts();
    let wall = std::time::Instant::now();
    let rows = rows::rows(&plan, measured.as_deref(), predict);
    let wall_us = wall.elapsed().as_secs_f64() * 1e6;
    let mut report = report(req, &plan, rows);
    if predict && req.wall_time_note {
        report.notes.push(wall_note(plan.spec.jobs.len(), wall_us));
    }
    if req.calibrate {
        calibrate::run(req, &plan, &mut report)?;
        report
            .notes
            .extend(calibrate::noise_notes(measured.as_deref(), req.repeat));
    } else if predict {
        report
            .notes
            .extend(calibrate::noise_notes(measured.as_deref(), req.repeat));
        let costs = per_op_costs(&plan.model, plan.class, plan.spec.ranks);
        report.notes.extend(costs);
    }
    if let Some(b) = &base {
        report.notes.extend(baseline::notes(&report.rows, b));
    }
    if let Some(p) = &plan.pattern {
        report.notes.extend(pattern_notes(p, &report.rows));
    }
    Ok(Bench {
        report,
        pattern: plan.pattern,
    })
}

fn report(req: &BenchRequest, plan: &Plan, rows: Vec<BenchRow>) -> BenchReport {
    let spec = &plan.spec;
    BenchReport {
        schema: SCHEMA,
        path: if req.hw {
            spec.path.name().to_string()
        } else {
            "sim".into()
        },
        ranks: spec.ranks,
        nodes: req.nnodes,
        warmup: spec.warmup,
        iters: spec.iters,
        env: spec.env.clone(),
        model: req.predicts().then(|| plan.model.links.to_string()),
        seed: 0,
        rows,
        notes: Vec::new(),
    }
}

fn wall_note(jobs: usize, wall_us: f64) -> String {
    format!(
        "prediction: {jobs} collectives in {wall_us:.1} us of wall time ({:.2} us each)",
        wall_us / jobs.max(1) as f64
    )
}
