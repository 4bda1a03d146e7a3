//! The `# ...` notes under a `scen bench` table that follow from the report alone: the timing
//! model file's per-op costs for the run's rank count, and a diffusion pattern's communication
//! per denoise step. Pure, so the human and JSON outputs carry the same notes.

use super::model::{LinkClass, ModelFile};
use super::pattern::{self, Pattern};
use super::result::BenchRow;

/// The model file's per-op costs of `class` for the rank count nearest `ranks` it has (the
/// smaller one on a tie).
pub fn per_op_costs(model: &ModelFile, class: LinkClass, ranks: usize) -> Vec<String> {
    let nearest = model
        .ops
        .iter()
        .filter(|o| o.class == class)
        .map(|o| o.ranks)
        .min_by_key(|r| (r.abs_diff(ranks), *r));
    model
        .ops
        .iter()
        .filter(|o| o.class == class && Some(o.ranks) == nearest)
        .map(|o| format!("per-op cost: {o}"))
        .collect()
}

/// A pattern's time per denoise step (measured and predicted, for the columns every row has)
/// and each of its collectives' share; `rows` are the pattern's ops, in order.
pub fn pattern_notes(p: &Pattern, rows: &[BenchRow]) -> Vec<String> {
    let mut notes = Vec::new();
    for (label, pick) in [("hw", 0), ("sim", 1)] {
        let times: Option<Vec<f64>> = rows
            .iter()
            .map(|r| if pick == 0 { r.hw } else { r.sim }.map(|t| t.time_us))
            .collect();
        if let Some(t) = times {
            let step = pattern::step_us(p, &t);
            notes.push(format!(
                "{label}: {:.3} ms of communication per denoise step ({p})",
                step / 1e3
            ));
        }
    }
    for (o, r) in p.ops.iter().zip(rows) {
        let t = r.hw.or(r.sim).map_or(0.0, |t| t.time_us);
        notes.push(format!(
            "{} x{} per step: {:.1} us per op, {:.3} ms per step, shape {:?}",
            o.label,
            o.per_step,
            t,
            t * o.per_step as f64 / 1e3,
            o.shape
        ));
    }
    notes
}
