//! A `scen bench` report's rows: each job's size and count as the rank processes used them
//! (or would have), its measured columns and the model's prediction.

use super::hw::Measured;
use super::plan::Plan;
use scen_core::dtype::DType;
use scen_core::perf::result::{BenchRow, Timing};
use scen_core::perf::BenchOp;
use scen_hw::bench::{BenchJob, JobResult};

/// One row per job; `measured` (when --hw ran) in job order; predicted when `predict`.
pub fn rows(plan: &Plan, measured: Option<&[Measured]>, predict: bool) -> Vec<BenchRow> {
    plan.spec
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let m = measured.map(|m| &m[i]);
            let mut r = row(plan, j, m.map(|m| &m.result), predict);
            r.hw_repeats_us = m.map(|m| m.repeats_us.clone()).unwrap_or_default();
            r
        })
        .collect()
}

fn row(plan: &Plan, j: &BenchJob, m: Option<&JobResult>, predict: bool) -> BenchRow {
    let spec = &plan.spec;
    let elem = spec.dtype.parse::<DType>().map_or(4, |d| d.size_bytes());
    let count = m.map_or_else(
        || scen_hw::bench::rank::send_count(j.op, j.size_bytes, elem, spec.ranks),
        |m| m.count,
    );
    let bytes = j.op.size_bytes(count, elem, spec.ranks);
    let timing = |us| Timing::of(j.op, bytes, spec.ranks, us);
    BenchRow {
        op: j.op,
        size_bytes: bytes,
        count,
        dtype: spec.dtype.clone(),
        redop: if j.op.reduces() {
            spec.redop.clone()
        } else {
            "-".into()
        },
        hw: m.map(|m| timing(m.time_us)),
        hw_median_us: m.and_then(|m| m.median_us),
        raw: m.and_then(|m| m.raw_us).map(timing),
        sim: predict.then(|| timing(predicted_us(plan, j.op, bytes))),
        wrong: m.map(|m| m.wrong),
        hw_repeats_us: Vec::new(),
    }
}

/// The timing model's microseconds for `op` on `bytes` over the plan's link and library.
fn predicted_us(plan: &Plan, op: BenchOp, bytes: usize) -> f64 {
    let ranks = plan.spec.ranks;
    plan.model
        .predict_us(op, bytes, ranks, plan.class, plan.library)
}
