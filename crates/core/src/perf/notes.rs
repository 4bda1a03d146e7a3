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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::model::OpCost;
    use crate::perf::pattern::PatternOp;
    use crate::perf::result::Timing;
    use crate::perf::schedule::Algorithm;
    use crate::perf::BenchOp;

    fn cost(ranks: usize, class: LinkClass) -> OpCost {
        OpCost {
            class,
            op: BenchOp::AllReduce,
            algorithm: Algorithm::Ring,
            ranks,
            max_bytes: None,
            alpha_us: ranks as f64,
            beta_gbps: 1.0,
            knees: Vec::new(),
        }
    }

    #[test]
    fn per_op_costs_come_from_the_nearest_rank_count_of_the_class() {
        let model = ModelFile {
            ops: vec![
                cost(2, LinkClass::Intra),
                cost(8, LinkClass::Intra),
                cost(4, LinkClass::Host),
            ],
            ..ModelFile::default()
        };
        let notes = per_op_costs(&model, LinkClass::Intra, 4);
        assert_eq!(
            notes,
            vec![format!("per-op cost: {}", cost(2, LinkClass::Intra))]
        );
        let notes = per_op_costs(&model, LinkClass::Intra, 6);
        assert_eq!(
            notes,
            vec![format!("per-op cost: {}", cost(8, LinkClass::Intra))]
        );
        assert!(per_op_costs(&model, LinkClass::Inter, 4).is_empty());
    }

    #[test]
    fn pattern_notes_sum_each_op_over_a_step() {
        let p = Pattern {
            name: "cfg",
            ranks: 2,
            layers: 1,
            ops: vec![PatternOp {
                label: "bcast".into(),
                op: BenchOp::Broadcast,
                shape: vec![2, 3],
                size_bytes: 24,
                per_step: 4,
            }],
        };
        let t = Timing::of(BenchOp::Broadcast, 24, 2, 250.0);
        let row = BenchRow {
            op: BenchOp::Broadcast,
            size_bytes: 24,
            count: 6,
            dtype: "f32".into(),
            redop: "-".into(),
            hw: None,
            raw: None,
            sim: Some(t),
            hw_median_us: None,
            wrong: None,
            hw_repeats_us: Vec::new(),
        };
        assert_eq!(
            pattern_notes(&p, &[row]),
            vec![
                "sim: 1.000 ms of communication per denoise step (cfg on 2 ranks)".to_string(),
                "bcast x4 per step: 250.0 us per op, 1.000 ms per step, shape [2, 3]".into(),
            ]
        );
    }
}
