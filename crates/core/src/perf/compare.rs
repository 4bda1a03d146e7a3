//! `scen bench --compare A.json B.json`: speedup of B over A per size and per size bucket
//! (<1 MiB, 1-10 MiB, >10 MiB, as the users' compare_perf notes), and a verdict line.

use super::result::BenchReport;
use super::BenchOp;

/// The notes' size buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bucket {
    Small,
    Medium,
    Large,
}

impl Bucket {
    pub const ALL: [Bucket; 3] = [Bucket::Small, Bucket::Medium, Bucket::Large];

    /// < 1 MiB, 1 MiB..=10 MiB, > 10 MiB.
    pub fn of(bytes: usize) -> Bucket {
        const MIB: usize = 1 << 20;
        if bytes < MIB {
            Bucket::Small
        } else if bytes <= 10 * MIB {
            Bucket::Medium
        } else {
            Bucket::Large
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Bucket::Small => "<1 MiB",
            Bucket::Medium => "1-10 MiB",
            Bucket::Large => ">10 MiB",
        }
    }

    /// The gain the users' notes expect of the device communicator over torch.distributed in
    /// this bucket, in percent (seeds/002: 0-10%, 10-30%, 30-50%).
    pub fn expected_gain_pct(self) -> (f64, f64) {
        match self {
            Bucket::Small => (0.0, 10.0),
            Bucket::Medium => (10.0, 30.0),
            Bucket::Large => (30.0, 50.0),
        }
    }
}

/// The notes' expected end-to-end gain for a pattern's model, in percent, and what they call it.
pub fn model_expected_gain_pct(pattern: &str) -> Option<(&'static str, f64, f64)> {
    match pattern {
        "wan-ulysses" => Some(("Wan 2.1 with SP (ulysses_degree=2)", 5.0, 15.0)),
        "flux-tp" => Some(("Flux 2 with TP (tp_size=2)", 3.0, 10.0)),
        "cfg" => Some(("mixed parallel (CFG) configurations", 10.0, 25.0)),
        _ => None,
    }
}

/// One size both runs measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeCmp {
    pub op: BenchOp,
    pub size_bytes: usize,
    pub a_us: f64,
    pub b_us: f64,
    /// Each repeat's time (empty without --repeat).
    pub a_reps: Vec<f64>,
    pub b_reps: Vec<f64>,
}

impl SizeCmp {
    /// > 1 when B is faster.
    pub fn speedup(&self) -> f64 {
        self.a_us / self.b_us
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct BucketCmp {
    pub bucket: Bucket,
    pub sizes: usize,
    /// Geometric mean of the per-size speedups.
    pub speedup: f64,
}

/// A `--pattern` run on both sides: communication time per denoise step and per attention layer.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCmp {
    pub name: String,
    pub layers: usize,
    pub a_step_us: f64,
    pub b_step_us: f64,
    /// Per op (label, calls per step, A's and B's time per step).
    pub ops: Vec<(String, usize, f64, f64)>,
}

impl StepCmp {
    pub fn speedup(&self) -> f64 {
        self.a_step_us / self.b_step_us
    }
    /// Per attention layer (transformer block): the step's time over its layers.
    pub fn per_layer_us(&self) -> (f64, f64) {
        let l = self.layers.max(1) as f64;
        (self.a_step_us / l, self.b_step_us / l)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub sizes: Vec<SizeCmp>,
    pub buckets: Vec<BucketCmp>,
    /// Geometric mean over every size.
    pub overall: f64,
    /// Rows only one side has.
    pub unmatched: usize,
    /// Both reports timed the same pattern.
    pub step: Option<StepCmp>,
    /// The verdict's speed-up (per step for a pattern, else the geometric mean over sizes) and
    /// its noise band over the repeats, when both reports carry them.
    pub headline: f64,
    pub band: Option<(f64, f64)>,
}

/// Below this relative difference two runs count as equal (timing noise) when the reports carry
/// no repeats to measure the noise with.
pub const NOISE: f64 = 0.03;

fn geomean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs.filter(|x| *x > 0.0 && x.is_finite()) {
        sum += x.ln();
        n += 1;
    }
    (n > 0).then(|| (sum / n as f64).exp())
}

/// The headline's value in each repeat: repeat k of A against repeat k of B (an interleaved
/// `--ab` run alternates them, so repeat k of both saw the same load). None unless every size
/// has the same number (>1) of repeats on both sides.
fn per_repeat(sizes: &[SizeCmp], headline: &dyn Fn(&[f64], &[f64]) -> f64) -> Option<(f64, f64)> {
    let k = sizes.first()?.a_reps.len();
    if k < 2
        || sizes
            .iter()
            .any(|s| s.a_reps.len() != k || s.b_reps.len() != k)
    {
        return None;
    }
    let vals: Vec<f64> = (0..k)
        .map(|i| {
            let a: Vec<f64> = sizes.iter().map(|s| s.a_reps[i]).collect();
            let b: Vec<f64> = sizes.iter().map(|s| s.b_reps[i]).collect();
            headline(&a, &b)
        })
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, hi))
}

/// Pairs rows by (op, size) and summarises.
pub fn compare(a: &BenchReport, b: &BenchReport) -> Comparison {
    let mut sizes = Vec::new();
    let mut unmatched = 0;
    for ra in &a.rows {
        let rb = b
            .rows
            .iter()
            .find(|r| r.op == ra.op && r.size_bytes == ra.size_bytes);
        match (ra.time_us(), rb.and_then(|r| r.time_us())) {
            (Some(a_us), Some(b_us)) if a_us > 0.0 && b_us > 0.0 => sizes.push(SizeCmp {
                op: ra.op,
                size_bytes: ra.size_bytes,
                a_us,
                b_us,
                a_reps: ra.hw_repeats_us.clone(),
                b_reps: rb.map(|r| r.hw_repeats_us.clone()).unwrap_or_default(),
            }),
            _ => unmatched += 1,
        }
    }
    unmatched += b
        .rows
        .iter()
        .filter(|rb| {
            !a.rows
                .iter()
                .any(|r| r.op == rb.op && r.size_bytes == rb.size_bytes)
        })
        .count();
    let buckets = Bucket::ALL
        .iter()
        .filter_map(|bk| {
            let in_b: Vec<f64> = sizes
                .iter()
                .filter(|s| Bucket::of(s.size_bytes) == *bk)
                .map(SizeCmp::speedup)
                .collect();
            geomean(in_b.iter().copied()).map(|g| BucketCmp {
                bucket: *bk,
                sizes: in_b.len(),
                speedup: g,
            })
        })
        .collect();
    let overall = geomean(sizes.iter().map(SizeCmp::speedup)).unwrap_or(1.0);
    let step = step(a, b, &sizes, unmatched);
    let (headline, band) = match &step {
        Some(st) => {
            let w: Vec<f64> = st.ops.iter().map(|o| o.1 as f64).collect();
            let weighted = move |x: &[f64], y: &[f64]| {
                let dot = |v: &[f64]| v.iter().zip(&w).map(|(t, k)| t * k).sum::<f64>();
                dot(x) / dot(y)
            };
            (st.speedup(), per_repeat(&sizes, &weighted))
        }
        None => {
            let g =
                |x: &[f64], y: &[f64]| geomean(x.iter().zip(y).map(|(p, q)| p / q)).unwrap_or(1.0);
            (overall, per_repeat(&sizes, &g))
        }
    };
    Comparison {
        sizes,
        buckets,
        overall,
        unmatched,
        step,
        headline,
        band,
    }
}

/// Both reports timed the same pattern, row for row.
fn step(a: &BenchReport, b: &BenchReport, sizes: &[SizeCmp], unmatched: usize) -> Option<StepCmp> {
    let (pa, pb) = (a.pattern.as_ref()?, b.pattern.as_ref()?);
    if pa != pb || unmatched > 0 || sizes.len() != pa.per_step.len() {
        return None;
    }
    let ops: Vec<(String, usize, f64, f64)> = sizes
        .iter()
        .zip(pa.per_step.iter().zip(&pa.labels))
        .map(|(s, (k, l))| (l.clone(), *k, s.a_us * *k as f64, s.b_us * *k as f64))
        .collect();
    Some(StepCmp {
        name: pa.name.clone(),
        layers: pa.layers,
        a_step_us: ops.iter().map(|o| o.2).sum(),
        b_step_us: ops.iter().map(|o| o.3).sum(),
        ops,
    })
}

/// "B is 1.32x faster than A per denoise step (noise band 1.20x-1.41x over 5 repeats)".
pub fn verdict(c: &Comparison, a_name: &str, b_name: &str) -> String {
    if c.sizes.is_empty() {
        return "no size appears in both runs: nothing to compare".into();
    }
    let x = c.headline;
    let pct = (x - 1.0) * 100.0;
    let within = match c.band {
        Some((lo, hi)) => lo <= 1.0 && 1.0 <= hi,
        None => pct.abs() < NOISE * 100.0,
    };
    let head = if within {
        format!("no significant difference: {b_name} vs {a_name} {pct:+.1}%")
    } else if x > 1.0 {
        format!("{b_name} is {x:.2}x faster than {a_name}")
    } else {
        format!("{b_name} is {:.2}x slower than {a_name}", 1.0 / x)
    };
    let basis = match &c.step {
        Some(st) => format!(
            " per denoise step of {} (weighted by time per step; the unweighted geometric mean over its {} sizes is {:.2}x)",
            st.name,
            c.sizes.len(),
            c.overall
        ),
        None => format!(" overall (geometric mean of {} sizes)", c.sizes.len()),
    };
    let noise = match c.band {
        Some((lo, hi)) => format!("; noise band {lo:.2}x-{hi:.2}x over the repeats"),
        None => format!(
            "; no noise band: run with --repeat N (a {:.0}% threshold stands in)",
            NOISE * 100.0
        ),
    };
    let best = c
        .buckets
        .iter()
        .max_by(|x, y| x.speedup.total_cmp(&y.speedup))
        .map(|b| format!("; best bucket {} ({:.2}x)", b.bucket.label(), b.speedup))
        .unwrap_or_default();
    format!("{head}{basis}{noise}{best}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::result::{BenchRow, Timing, SCHEMA};

    fn report(times: &[(usize, f64)]) -> BenchReport {
        BenchReport {
            schema: SCHEMA,
            path: "oneccl".into(),
            ranks: 2,
            nodes: 1,
            warmup: 1,
            iters: 1,
            env: vec![],
            model: None,
            model_source: None,
            seed: 0,
            notes: vec![],
            backend: None,
            torch: None,
            oneccl: None,
            pattern: None,
            rows: times
                .iter()
                .map(|(s, t)| BenchRow {
                    op: BenchOp::AllReduce,
                    size_bytes: *s,
                    count: s / 4,
                    dtype: "f32".into(),
                    redop: "sum".into(),
                    hw_median_us: None,
                    hw: Some(Timing {
                        time_us: *t,
                        algbw_gbps: 0.0,
                        busbw_gbps: 0.0,
                    }),
                    raw: None,
                    sim: None,
                    wrong: Some(0),
                    hw_repeats_us: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn buckets_split_at_one_and_ten_mib() {
        assert_eq!(Bucket::of(0), Bucket::Small);
        assert_eq!(Bucket::of((1 << 20) - 1), Bucket::Small);
        assert_eq!(Bucket::of(1 << 20), Bucket::Medium);
        assert_eq!(Bucket::of(10 << 20), Bucket::Medium);
        assert_eq!(Bucket::of((10 << 20) + 1), Bucket::Large);
    }

    #[test]
    fn bucket_speedups_are_geometric_means_of_their_sizes() {
        let a = report(&[
            (4096, 100.0),
            (65536, 200.0),
            (2 << 20, 1000.0),
            (64 << 20, 8000.0),
        ]);
        let b = report(&[
            (4096, 50.0),
            (65536, 400.0),
            (2 << 20, 500.0),
            (16 << 20, 1.0),
        ]);
        let c = compare(&a, &b);
        assert_eq!(c.sizes.len(), 3);
        assert_eq!(c.unmatched, 2); // 64M only in A, 16M only in B
        assert_eq!(c.buckets.len(), 2);
        // small: speedups 2.0 and 0.5 -> geomean 1.0
        assert!((c.buckets[0].speedup - 1.0).abs() < 1e-12);
        assert_eq!(c.buckets[0].sizes, 2);
        assert!((c.buckets[1].speedup - 2.0).abs() < 1e-12);
        assert!((c.overall - 2f64.powf(1.0 / 3.0)).abs() < 1e-12);
        let v = verdict(&c, "A", "B");
        assert!(v.starts_with("B is 1.26x faster than A"), "{v}");
        assert!(v.contains("best bucket 1-10 MiB (2.00x)"), "{v}");
    }

    #[test]
    fn equal_runs_are_within_noise() {
        let a = report(&[(4096, 100.0), (1 << 20, 1000.0)]);
        let b = report(&[(4096, 101.0), (1 << 20, 990.0)]);
        let v = verdict(&compare(&a, &b), "A", "B");
        assert!(v.starts_with("no significant difference"), "{v}");
        let none = compare(&a, &report(&[(8, 1.0)]));
        assert!(verdict(&none, "A", "B").starts_with("no size appears"));
    }

    #[test]
    fn a_pattern_verdict_is_weighted_by_time_per_step_with_the_repeats_noise_band() {
        use crate::perf::result::PatternInfo;
        let mut a = report(&[(1 << 20, 1000.0), (64 << 10, 100.0)]);
        let mut b = report(&[(1 << 20, 500.0), (64 << 10, 1.0)]);
        let info = PatternInfo {
            name: "flux-tp".into(),
            layers: 30,
            per_step: vec![60, 1],
            labels: vec!["all_reduce".into(), "all_gather".into()],
        };
        a.pattern = Some(info.clone());
        b.pattern = Some(info);
        a.rows[0].hw_repeats_us = vec![900.0, 1100.0];
        a.rows[1].hw_repeats_us = vec![100.0, 100.0];
        b.rows[0].hw_repeats_us = vec![500.0, 500.0];
        b.rows[1].hw_repeats_us = vec![1.0, 1.0];
        let c = compare(&a, &b);
        // geomean of 2x and 100x is 14.1x; per step (60 x 1000 + 100) / (60 x 500 + 1) = 2.0x.
        assert!((c.overall - 200f64.sqrt()).abs() < 1e-9);
        let st = c.step.as_ref().expect("both timed flux-tp");
        assert_eq!(st.a_step_us, 60_100.0);
        assert!((c.headline - 60_100.0 / 30_001.0).abs() < 1e-12);
        assert_eq!(st.per_layer_us().0, 60_100.0 / 30.0);
        let (lo, hi) = c.band.expect("two repeats on both sides");
        assert!((lo - 54_100.0 / 30_001.0).abs() < 1e-9 && (hi - 66_100.0 / 30_001.0).abs() < 1e-9);
        let v = verdict(&c, "torch", "oneccl");
        assert!(
            v.starts_with("oneccl is 2.00x faster than torch per denoise step"),
            "{v}"
        );
        assert!(v.contains("noise band 1.80x-2.20x"), "{v}");
        b.rows[0].hw_repeats_us.clear();
        let v = verdict(&compare(&a, &b), "torch", "oneccl");
        assert!(v.contains("no noise band: run with --repeat N"), "{v}");
    }
}
