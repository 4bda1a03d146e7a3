//! Calibration: fitting the timing model to measured collective times (`scen bench --hw
//! --calibrate`). Two levels, both weighted least squares on relative error (weights 1/t², so a
//! 64 KiB point counts as much as a 64 MiB one):
//!
//! * the link class: one alpha and beta over every measured op, plus a reduction rate when the
//!   sweep has both reducing and non-reducing ops (all_gather/all_to_all pin the link, the
//!   all_reduce residue is the CPU's reduction);
//! * per op and algorithm (the algorithm the library selects at each size, perf/schedule.rs):
//!   alpha and beta of that algorithm's schedule alone, where it was measured at
//!   [`MIN_GROUP_SIZES`] sizes or more. A library's algorithms differ in more than their
//!   message counts (oneCCL's nreduce posts all sends at once, its ring pipelines, its CPU
//!   reduction runs in the worker thread), so one (alpha, beta) per class cannot fit all of them.
//!   Within one algorithm the per-byte cost may change with the size (caches, a transport's
//!   protocol switch): the form, a line or one with knees where the slope changes without a
//!   jump, is chosen by held-out error (perf/holdout.rs).

use super::holdout::{self, Point};
use super::model::{rel_error, Knee, LinkClass, LinkCost, ModelFile, OpCost};
use super::schedule::{schedule, Algorithm, Library};
use super::{median, BenchOp};

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub op: BenchOp,
    pub bytes: usize,
    pub ranks: usize,
    pub time_us: f64,
}

/// An (op, algorithm) needs this many distinct sizes for its own fit (two unknowns; a third
/// point keeps the fit from being an interpolation).
pub const MIN_GROUP_SIZES: usize = 3;

/// [`holdout::least_squares`] for a fixed number of unknowns.
fn least_squares<const K: usize>(rows: &[([f64; K], f64)]) -> Option<[f64; K]> {
    let rows: Vec<(Vec<f64>, f64)> = rows.iter().map(|(x, t)| (x.to_vec(), *t)).collect();
    holdout::least_squares(&rows, K)?.try_into().ok()
}

/// `t ≈ alpha * x1 + c * x2` with alpha >= 0 (refit through the origin if it comes out
/// negative) and c > 0; returns (alpha, c).
fn fit_alpha_c(rows: &[([f64; 2], f64)]) -> Option<(f64, f64)> {
    let [a, c] = least_squares(rows)?;
    if a >= 0.0 && c > 0.0 {
        return Some((a, c));
    }
    let through_origin: Vec<([f64; 1], f64)> = rows.iter().map(|(x, t)| ([x[1]], *t)).collect();
    let [c] = least_squares(&through_origin)?;
    (c > 0.0).then_some((0.0, c))
}

fn gbps(c_us_per_byte: f64) -> f64 {
    1.0 / (c_us_per_byte * 1e3)
}

fn features(p: &Sample, library: Library) -> [f64; 3] {
    let alg = library.select(p.op, p.bytes, p.ranks);
    let s = schedule(p.op, alg, p.bytes, p.ranks);
    [s.messages as f64, s.wire_bytes, s.reduce_bytes]
}

/// One alpha and beta for the whole class (and a reduction rate where the sweep separates it
/// from the link). `None` with fewer than two distinct message shapes.
pub fn fit_class(samples: &[Sample], library: Library) -> Option<LinkCost> {
    let rows: Vec<([f64; 3], f64)> = samples
        .iter()
        .map(|p| (features(p, library), p.time_us))
        .collect();
    let reduces = rows.iter().any(|(x, _)| x[2] > 0.0);
    let plain = rows.iter().any(|(x, _)| x[2] == 0.0 && x[1] > 0.0);
    if reduces && plain {
        if let Some([a, c, g]) = least_squares(&rows) {
            if a >= 0.0 && c > 0.0 && g > 0.0 {
                return Some(LinkCost {
                    alpha_us: a,
                    beta_gbps: gbps(c),
                    reduce_gbps: Some(gbps(g)),
                });
            }
        }
    }
    let rows2: Vec<([f64; 2], f64)> = rows.iter().map(|(x, t)| ([x[0], x[1]], *t)).collect();
    let (a, c) = fit_alpha_c(&rows2)?;
    Some(LinkCost::new(a, gbps(c)))
}

/// One (op, algorithm, ranks) group's fit: its cost, the mean held-out error of the best form
/// with 0, 1 and 2 knees (the form chosen among them), and how well the whole procedure
/// predicts each interior size it did not see (bytes, signed relative error).
#[derive(Debug, Clone, PartialEq)]
pub struct GroupFit {
    pub cost: OpCost,
    pub by_knees: Vec<Option<f64>>,
    pub held_out: Vec<(usize, f64)>,
}

/// The group's points, one per size (the median time where a size repeats), ascending.
fn points(group: &[&Sample], alg: Algorithm) -> Vec<Point> {
    let mut sizes: Vec<usize> = group.iter().map(|p| p.bytes).collect();
    sizes.sort();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|bytes| {
            let p = group
                .iter()
                .find(|p| p.bytes == bytes)
                .expect("a size of the group");
            let s = schedule(p.op, alg, bytes, p.ranks);
            let times = group.iter().filter(|q| q.bytes == bytes).map(|q| q.time_us);
            Point {
                bytes,
                messages: s.messages as f64,
                wire_bytes: s.wire_bytes,
                time_us: median(times.collect()),
            }
        })
        .collect()
}

/// Per (op, algorithm) costs for the groups measured at [`MIN_GROUP_SIZES`] sizes or more: a
/// line, or a line with one or two knees (perf/holdout.rs), whichever predicts the group's held
/// out sizes best. The time is continuous across a knee: a CPU's per-byte cost changes where the
/// buffers stop fitting its caches, a transport's at its protocol switch, but a size just past
/// either does not cost a jump.
pub fn fit_groups(samples: &[Sample], library: Library, class: LinkClass) -> Vec<GroupFit> {
    let mut keys: Vec<(BenchOp, Algorithm, usize)> = samples
        .iter()
        .map(|p| (p.op, library.select(p.op, p.bytes, p.ranks), p.ranks))
        .collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for (op, alg, ranks) in keys {
        let group: Vec<&Sample> = samples
            .iter()
            .filter(|p| {
                p.op == op && p.ranks == ranks && library.select(p.op, p.bytes, p.ranks) == alg
            })
            .collect();
        let pts = points(&group, alg);
        if pts.len() < MIN_GROUP_SIZES {
            continue;
        }
        let Some(choice) = holdout::choose(&pts) else {
            continue;
        };
        let Some(f) = holdout::fit(&pts, &choice.knees) else {
            continue;
        };
        let knees = f
            .knees
            .iter()
            .zip(&f.us_per_byte[1..])
            .map(|(k, c)| Knee {
                bytes: k.bytes,
                beta_gbps: gbps(*c),
            })
            .collect();
        out.push(GroupFit {
            cost: OpCost {
                class,
                op,
                algorithm: alg,
                ranks,
                max_bytes: None,
                alpha_us: f.alpha_us,
                beta_gbps: gbps(f.us_per_byte[0]),
                knees,
            },
            by_knees: choice.by_knees,
            held_out: holdout::procedure_errors(&pts),
        });
    }
    out
}

/// A calibrated model and what went into it.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// `base` with the class's link and this rank count's per-op costs replaced.
    pub model: ModelFile,
    /// The class-level fit alone.
    pub class_cost: LinkCost,
    /// The per-op fits (their costs are in `model.ops`) and their held-out errors.
    pub groups: Vec<GroupFit>,
    /// Worst |relative error| over the samples: with the class link only, and with the per-op
    /// costs.
    pub worst_class_only: f64,
    pub worst: f64,
}

/// Fits `class` (and per-op costs) to `samples` measured on `library`, on top of `base`.
/// `None` when the samples cannot determine a class fit.
pub fn calibrate(
    base: &ModelFile,
    samples: &[Sample],
    class: LinkClass,
    library: Library,
) -> Option<Calibration> {
    let class_cost = fit_class(samples, library)?;
    let mut model = base.clone();
    *model.links.cost_mut(class) = class_cost;
    let ranks: Vec<usize> = samples.iter().map(|p| p.ranks).collect();
    model
        .ops
        .retain(|o| !(o.class == class && ranks.contains(&o.ranks)));
    let class_only = model.clone();
    let groups = fit_groups(samples, library, class);
    model.ops.extend(groups.iter().map(|g| g.cost.clone()));
    let worst_of = |m: &ModelFile| {
        samples
            .iter()
            .map(|p| {
                rel_error(
                    m.predict_us(p.op, p.bytes, p.ranks, class, library),
                    p.time_us,
                )
                .abs()
            })
            .fold(0.0, f64::max)
    };
    Some(Calibration {
        worst_class_only: worst_of(&class_only),
        worst: worst_of(&model),
        model,
        class_cost,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(m: &ModelFile, library: Library, ranks: &[usize], noise: &[f64]) -> Vec<Sample> {
        let mut out = Vec::new();
        for op in [BenchOp::AllReduce, BenchOp::AllGather, BenchOp::AllToAll] {
            for &n in ranks {
                for k in 16..=26 {
                    let bytes = 1usize << k;
                    let t = m.predict_us(op, bytes, n, LinkClass::Intra, library);
                    out.push(Sample {
                        op,
                        bytes,
                        ranks: n,
                        time_us: t * noise[out.len() % noise.len()],
                    });
                }
            }
        }
        out
    }

    fn truth(alpha_us: f64, beta_gbps: f64, reduce_gbps: Option<f64>) -> ModelFile {
        let mut m = ModelFile::default();
        m.links.intra = LinkCost {
            alpha_us,
            beta_gbps,
            reduce_gbps,
        };
        m
    }

    #[test]
    fn class_fit_recovers_alpha_beta_and_the_reduction_rate() {
        let t = truth(37.0, 4.5, Some(3.0));
        let got = fit_class(
            &sweep(&t, Library::OnecclCpu, &[2, 4], &[1.0]),
            Library::OnecclCpu,
        )
        .expect("fit");
        assert!((got.alpha_us - 37.0).abs() < 1e-3, "{got:?}");
        assert!((got.beta_gbps - 4.5).abs() < 1e-6, "{got:?}");
        assert!((got.reduce_gbps.unwrap() - 3.0).abs() < 1e-6, "{got:?}");
        // Without a non-reducing op the reduction cannot be told from the link: none is fitted.
        let only_ar: Vec<Sample> = sweep(&t, Library::Scen, &[2, 4], &[1.0])
            .into_iter()
            .filter(|p| p.op == BenchOp::AllReduce)
            .collect();
        assert_eq!(
            fit_class(&only_ar, Library::Scen).unwrap().reduce_gbps,
            None
        );
    }

    #[test]
    fn class_fit_on_noisy_points_stays_close_and_degenerate_input_is_refused() {
        let t = truth(100.0, 2.0, None);
        let samples = sweep(&t, Library::Scen, &[2], &[1.05, 0.95]);
        let got = fit_class(&samples, Library::Scen).expect("fit");
        assert!((got.alpha_us - 100.0).abs() < 15.0, "{got:?}");
        assert!((got.beta_gbps - 2.0).abs() < 0.2, "{got:?}");
        assert_eq!(fit_class(&samples[..1], Library::Scen), None);
        assert_eq!(fit_class(&[], Library::Scen), None);
    }

    #[test]
    fn per_op_fit_recovers_each_algorithms_own_costs() {
        // A library whose nreduce and ring all_reduce cost differently from its all_gather.
        let mut t = truth(20.0, 1.0, None);
        for (op, alg, a, b) in [
            (BenchOp::AllReduce, Algorithm::Nreduce, 80.0, 0.7),
            (BenchOp::AllReduce, Algorithm::Ring, 300.0, 0.4),
        ] {
            t.ops.push(OpCost {
                class: LinkClass::Intra,
                op,
                algorithm: alg,
                ranks: 2,
                max_bytes: None,
                alpha_us: a,
                beta_gbps: b,
                knees: Vec::new(),
            });
        }
        let samples = sweep(&t, Library::OnecclCpu, &[2], &[1.0]);
        let cal = calibrate(
            &ModelFile::default(),
            &samples,
            LinkClass::Intra,
            Library::OnecclCpu,
        )
        .expect("calibrate");
        for want in &t.ops {
            let got = cal
                .model
                .op_cost(LinkClass::Intra, want.op, want.algorithm, 2, 1 << 22)
                .expect("fitted");
            assert!((got.alpha_us - want.alpha_us).abs() < 1e-3, "{got}");
            assert!((got.beta_gbps - want.beta_gbps).abs() < 1e-6, "{got}");
        }
        // Every group with its own fit is exact; all_gather's 64 KiB point (direct, one size)
        // falls back to the class fit.
        for p in &samples {
            let alg = Library::OnecclCpu.select(p.op, p.bytes, 2);
            let got = cal
                .model
                .predict_us(p.op, p.bytes, 2, LinkClass::Intra, Library::OnecclCpu);
            let err = rel_error(got, p.time_us).abs();
            if alg != Algorithm::Direct {
                assert!(err < 1e-6, "{p:?} {err}");
            }
        }
        assert!(cal.worst < 0.05, "{}", cal.worst);
        assert!(cal.worst_class_only > 0.1, "{}", cal.worst_class_only);
        // all_gather's direct algorithm ran at one size only (64 KiB on 2 ranks): no own fit.
        assert!(cal
            .model
            .op_cost(
                LinkClass::Intra,
                BenchOp::AllGather,
                Algorithm::Direct,
                2,
                65536
            )
            .is_none());
        // Recalibrating 4 ranks keeps the 2-rank entries; recalibrating 2 ranks replaces them.
        let four = sweep(&t, Library::OnecclCpu, &[4], &[1.0]);
        let again = calibrate(&cal.model, &four, LinkClass::Intra, Library::OnecclCpu).unwrap();
        assert!(again.model.ops.iter().any(|o| o.ranks == 2));
        assert!(again.model.ops.iter().any(|o| o.ranks == 4));
        let twice = calibrate(&cal.model, &samples, LinkClass::Intra, Library::OnecclCpu).unwrap();
        assert_eq!(twice.model.ops.len(), cal.model.ops.len());
    }

    #[test]
    fn a_cache_knee_becomes_a_knee_of_one_algorithms_cost() {
        // all_to_all at 1.5 GB/s while the buffers fit the caches (<= 2 MiB), 0.4 GB/s above,
        // continuous at 2 MiB.
        let mut t = truth(20.0, 1.0, None);
        t.ops.push(OpCost {
            class: LinkClass::Intra,
            op: BenchOp::AllToAll,
            algorithm: Algorithm::Pairwise,
            ranks: 2,
            max_bytes: None,
            alpha_us: 30.0,
            beta_gbps: 1.5,
            knees: vec![Knee {
                bytes: 2 << 20,
                beta_gbps: 0.4,
            }],
        });
        let samples: Vec<Sample> = sweep(&t, Library::OnecclCpu, &[2], &[1.0])
            .into_iter()
            .filter(|p| p.op == BenchOp::AllToAll)
            .collect();
        let groups = fit_groups(&samples, Library::OnecclCpu, LinkClass::Intra);
        assert_eq!(groups.len(), 1, "{groups:?}");
        let g = &groups[0].cost;
        assert_eq!(g.max_bytes, None);
        assert_eq!(g.knees.len(), 1, "{g}");
        assert_eq!(g.knees[0].bytes, 2 << 20);
        assert!((g.alpha_us - 30.0).abs() < 1e-3, "{g}");
        assert!((g.beta_gbps - 1.5).abs() < 1e-6, "{g}");
        assert!((g.knees[0].beta_gbps - 0.4).abs() < 1e-6, "{g}");
        // The held-out sizes are predicted too (each by a calibration without it).
        let worst = groups[0]
            .held_out
            .iter()
            .map(|e| e.1.abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-6, "{:?}", groups[0].held_out);
        assert_eq!(groups[0].held_out.len(), 9);
        // A straight line gets no knee.
        let straight: Vec<Sample> =
            sweep(&truth(20.0, 1.0, None), Library::OnecclCpu, &[2], &[1.0])
                .into_iter()
                .filter(|p| p.op == BenchOp::AllToAll)
                .collect();
        let g = fit_groups(&straight, Library::OnecclCpu, LinkClass::Intra);
        assert_eq!(g.len(), 1);
        assert!(g[0].cost.knees.is_empty(), "{}", g[0].cost);
        assert!(g[0].held_out.iter().all(|e| e.1.abs() < 1e-9));
    }

    #[test]
    fn a_negative_intercept_is_refit_through_the_origin() {
        // Pure bandwidth with a slight downward bend: alpha clamps at 0, beta stays positive.
        let samples: Vec<Sample> = (16..=20)
            .map(|k| Sample {
                op: BenchOp::AllGather,
                bytes: 1 << k,
                ranks: 2,
                time_us: (1u64 << k) as f64 / 2e3 * (1.0 + 0.01 * (k - 16) as f64),
            })
            .collect();
        let got = fit_class(&samples, Library::Scen).unwrap();
        assert!(got.alpha_us >= 0.0 && got.beta_gbps > 0.0, "{got:?}");
    }
}
