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
}

/// One size both runs measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeCmp {
    pub op: BenchOp,
    pub size_bytes: usize,
    pub a_us: f64,
    pub b_us: f64,
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

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub sizes: Vec<SizeCmp>,
    pub buckets: Vec<BucketCmp>,
    /// Geometric mean over every size.
    pub overall: f64,
    /// Rows only one side has.
    pub unmatched: usize,
}

/// Below this relative difference two runs count as equal (timing noise).
pub const NOISE: f64 = 0.03;

fn geomean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs.filter(|x| *x > 0.0 && x.is_finite()) {
        sum += x.ln();
        n += 1;
    }
    (n > 0).then(|| (sum / n as f64).exp())
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
    Comparison {
        sizes,
        buckets,
        overall,
        unmatched,
    }
}

/// "B is 1.32x faster than A overall (geomean of 12 sizes); biggest gain >10 MiB (1.80x)".
pub fn verdict(c: &Comparison, a_name: &str, b_name: &str) -> String {
    if c.sizes.is_empty() {
        return "no size appears in both runs: nothing to compare".into();
    }
    let pct = (c.overall - 1.0) * 100.0;
    let head = if pct.abs() < NOISE * 100.0 {
        format!(
            "no significant difference: {b_name} vs {a_name} {:+.1}% (within the {:.0}% noise band)",
            pct,
            NOISE * 100.0
        )
    } else if c.overall > 1.0 {
        format!("{b_name} is {:.2}x faster than {a_name}", c.overall)
    } else {
        format!("{b_name} is {:.2}x slower than {a_name}", 1.0 / c.overall)
    };
    let best = c
        .buckets
        .iter()
        .max_by(|x, y| x.speedup.total_cmp(&y.speedup))
        .map(|b| format!("; best bucket {} ({:.2}x)", b.bucket.label(), b.speedup))
        .unwrap_or_default();
    format!(
        "{head} overall (geometric mean of {} sizes){best}",
        c.sizes.len()
    )
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
            seed: 0,
            notes: vec![],
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
}
