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

use super::model::{rel_error, LinkClass, LinkCost, ModelFile, OpCost};
use super::schedule::{schedule, Algorithm, Library};
use super::BenchOp;

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

/// Weighted least squares `t ≈ Σ coef_i x_i` with weights 1/t²; `None` when singular.
// Index loops read as the normal equations and the elimination they are.
#[allow(clippy::needless_range_loop)]
fn least_squares<const K: usize>(rows: &[([f64; K], f64)]) -> Option<[f64; K]> {
    let mut a = [[0.0f64; K]; K];
    let mut b = [0.0f64; K];
    for (x, t) in rows.iter().filter(|(_, t)| *t > 0.0) {
        let w = 1.0 / (t * t);
        for i in 0..K {
            b[i] += w * x[i] * t;
            for j in 0..K {
                a[i][j] += w * x[i] * x[j];
            }
        }
    }
    // Gaussian elimination with partial pivoting, scaled by each column's size.
    let scale: Vec<f64> = (0..K).map(|i| a[i][i].abs().sqrt().max(1e-300)).collect();
    for i in 0..K {
        for j in 0..K {
            a[i][j] /= scale[i] * scale[j];
        }
        b[i] /= scale[i];
    }
    for col in 0..K {
        let piv = (col..K).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[piv][col].abs() < 1e-9 {
            return None;
        }
        a.swap(col, piv);
        b.swap(col, piv);
        for r in 0..K {
            if r != col {
                let f = a[r][col] / a[col][col];
                for c in col..K {
                    a[r][c] -= f * a[col][c];
                }
                b[r] -= f * b[col];
            }
        }
    }
    let mut out = [0.0; K];
    for i in 0..K {
        out[i] = b[i] / a[i][i] / scale[i];
    }
    Some(out)
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

/// A single (alpha, beta) worse than this (worst relative error) may be split in two size
/// ranges.
pub const SPLIT_ABOVE_ERROR: f64 = 0.10;

/// One size range's fit: (alpha_us, c = us per byte) and its squared / worst relative errors.
struct Segment {
    alpha_us: f64,
    c: f64,
    sse: f64,
    worst: f64,
}

fn fit_segment(op: BenchOp, alg: Algorithm, ranks: usize, pts: &[&Sample]) -> Option<Segment> {
    let rows: Vec<([f64; 2], f64)> = pts
        .iter()
        .map(|p| {
            let s = schedule(op, alg, p.bytes, ranks);
            ([s.messages as f64, s.wire_bytes], p.time_us)
        })
        .collect();
    let (a, c) = fit_alpha_c(&rows)?;
    let errs: Vec<f64> = rows
        .iter()
        .map(|(x, t)| rel_error(a * x[0] + c * x[1], *t))
        .collect();
    Some(Segment {
        alpha_us: a,
        c,
        sse: errs.iter().map(|e| e * e).sum(),
        worst: errs.iter().map(|e| e.abs()).fold(0.0, f64::max),
    })
}

/// Distinct sizes of `pts`, ascending.
fn sizes_of(pts: &[&Sample]) -> Vec<usize> {
    let mut sizes: Vec<usize> = pts.iter().map(|p| p.bytes).collect();
    sizes.sort();
    sizes.dedup();
    sizes
}

/// Per (op, algorithm) costs for the groups measured at [`MIN_GROUP_SIZES`] sizes or more. A
/// group whose single fit misses some size by more than [`SPLIT_ABOVE_ERROR`] is split at the
/// size that best halves its squared error, when both sides keep [`MIN_GROUP_SIZES`] sizes: a
/// CPU's per-byte cost changes where the buffers stop fitting its caches.
pub fn fit_groups(samples: &[Sample], library: Library, class: LinkClass) -> Vec<OpCost> {
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
        let sizes = sizes_of(&group);
        if sizes.len() < MIN_GROUP_SIZES {
            continue;
        }
        let Some(whole) = fit_segment(op, alg, ranks, &group) else {
            continue;
        };
        let entry = |seg: &Segment, max_bytes| OpCost {
            class,
            op,
            algorithm: alg,
            ranks,
            max_bytes,
            alpha_us: seg.alpha_us,
            beta_gbps: gbps(seg.c),
        };
        let mut best: Option<(f64, usize, Segment, Segment)> = None;
        if whole.worst > SPLIT_ABOVE_ERROR {
            for cut in MIN_GROUP_SIZES..=sizes.len().saturating_sub(MIN_GROUP_SIZES) {
                let knee = sizes[cut - 1];
                let (lo, hi): (Vec<&Sample>, Vec<&Sample>) =
                    group.iter().partition(|p| p.bytes <= knee);
                if let (Some(l), Some(h)) = (
                    fit_segment(op, alg, ranks, &lo),
                    fit_segment(op, alg, ranks, &hi),
                ) {
                    let sse = l.sse + h.sse;
                    if best.as_ref().is_none_or(|b| sse < b.0) {
                        best = Some((sse, knee, l, h));
                    }
                }
            }
        }
        match best {
            Some((sse, knee, l, h)) if sse < 0.5 * whole.sse => {
                out.push(entry(&l, Some(knee)));
                out.push(entry(&h, None));
            }
            _ => out.push(entry(&whole, None)),
        }
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
    model.ops.extend(fit_groups(samples, library, class));
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
    fn a_cache_knee_splits_one_algorithm_in_two_size_ranges() {
        // all_to_all at 1.5 GB/s while the buffers fit the caches (<= 2 MiB), 0.4 GB/s above.
        let mut t = truth(20.0, 1.0, None);
        for (max_bytes, a, b) in [(Some(2 << 20), 30.0, 1.5), (None, 500.0, 0.4)] {
            t.ops.push(OpCost {
                class: LinkClass::Intra,
                op: BenchOp::AllToAll,
                algorithm: Algorithm::Pairwise,
                ranks: 2,
                max_bytes,
                alpha_us: a,
                beta_gbps: b,
            });
        }
        let samples: Vec<Sample> = sweep(&t, Library::OnecclCpu, &[2], &[1.0])
            .into_iter()
            .filter(|p| p.op == BenchOp::AllToAll)
            .collect();
        let groups = fit_groups(&samples, Library::OnecclCpu, LinkClass::Intra);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(groups[0].max_bytes, Some(2 << 20));
        for (g, w) in groups.iter().zip(&t.ops) {
            assert!((g.alpha_us - w.alpha_us).abs() < 1e-3, "{g}");
            assert!((g.beta_gbps - w.beta_gbps).abs() < 1e-6, "{g}");
        }
        // A straight line is not split.
        let straight: Vec<Sample> =
            sweep(&truth(20.0, 1.0, None), Library::OnecclCpu, &[2], &[1.0])
                .into_iter()
                .filter(|p| p.op == BenchOp::AllToAll)
                .collect();
        assert_eq!(
            fit_groups(&straight, Library::OnecclCpu, LinkClass::Intra).len(),
            1
        );
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
