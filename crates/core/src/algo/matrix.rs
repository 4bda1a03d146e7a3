//! The dtype x reduce-op x collective matrix (issue 4), against a reference written
//! independently of the algorithms: every result is recomputed directly from the per-rank
//! inputs (in rank order, in f64 for floats with a tolerance a ring/tree order implies, in
//! wrapping i64 for integers, exactly). Worlds 1-8, shapes and roots drawn from a small
//! deterministic PRNG so each run covers the same cases.
//!
//! Rules: R28 (every member joins the same collective), R35 (xccl dtypes, bool SUM runs as MAX),
//! R36 (reduce ops; the bitwise ones run on gloo's integral dtypes). The backend acceptance
//! checks themselves are tested in reduce.rs.

use super::testlink::run_world;
use super::*;
use crate::dtype::DType;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

/// splitmix64: small, deterministic, good enough to pick cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const DTYPES: [DType; 9] = DType::ALL;
const OPS: [ReduceOp; 8] = ReduceOp::ALL;

/// Element `i` of `rank`'s input: floats in [-2, 2] (so a product over 8 ranks stays finite in
/// f16), integers wide enough to overflow i8/u8 products (wrapping is part of the semantics).
fn value(dtype: DType, seed: u64, rank: usize, i: usize) -> f64 {
    let mut r = Rng(seed ^ ((rank as u64) << 32) ^ i as u64);
    r.next();
    match dtype {
        DType::Bool => (r.below(3) != 0) as u8 as f64,
        DType::U8 => r.below(20) as f64,
        DType::I8 => r.below(21) as f64 - 10.0,
        DType::I32 | DType::I64 => r.below(2001) as f64 - 1000.0,
        _ => (r.below(801) as f64 - 400.0) / 200.0,
    }
}

fn input(dtype: DType, shape: &[usize], seed: u64, rank: usize) -> Tensor {
    Tensor::from_fn(dtype, shape.to_vec(), |i| value(dtype, seed, rank, i))
}

/// An integer dtype's wrap-around, written out per width.
fn wrap(dtype: DType, v: i64) -> f64 {
    match dtype {
        DType::I32 => v as i32 as f64,
        DType::I8 => v as i8 as f64,
        DType::U8 => v as u8 as f64,
        _ => v as f64,
    }
}

/// Unit roundoff of a float dtype, doubled for safety.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::BF16 => 2f64.powi(-7),
        DType::F16 => 2f64.powi(-10),
        DType::F32 => 2f64.powi(-23),
        _ => 2f64.powi(-52),
    }
}

/// The reduction of `xs` (one value per rank, rank order) and the tolerance allowed for it.
fn reference(dtype: DType, op: ReduceOp, xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if dtype == DType::Bool {
        let any = xs.iter().any(|x| *x != 0.0);
        let all = xs.iter().all(|x| *x != 0.0);
        let v = match op {
            // R35: bool SUM runs as MAX (logical or).
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Bor => any,
            ReduceOp::Min | ReduceOp::Product | ReduceOp::Band => all,
            ReduceOp::Bxor => xs.iter().filter(|x| **x != 0.0).count() % 2 == 1,
            ReduceOp::Avg => unreachable!("R35: bool AVG is rejected"),
        };
        return (v as u8 as f64, 0.0);
    }
    if !dtype.is_float() {
        let ints = xs.iter().map(|x| *x as i64);
        let v = match op {
            ReduceOp::Sum => wrap(dtype, ints.fold(0i64, i64::wrapping_add)),
            ReduceOp::Avg => {
                let s = wrap(dtype, ints.fold(0i64, i64::wrapping_add));
                (s / n).trunc()
            }
            ReduceOp::Product => wrap(dtype, ints.fold(1i64, i64::wrapping_mul)),
            ReduceOp::Min => ints.min().expect("n >= 1") as f64,
            ReduceOp::Max => ints.max().expect("n >= 1") as f64,
            ReduceOp::Band => wrap(dtype, ints.fold(-1i64, |a, b| a & b)),
            ReduceOp::Bor => wrap(dtype, ints.fold(0i64, |a, b| a | b)),
            ReduceOp::Bxor => wrap(dtype, ints.fold(0i64, |a, b| a ^ b)),
        };
        return (v, 0.0);
    }
    let abs_sum: f64 = xs.iter().map(|x| x.abs()).sum();
    let e = eps(dtype);
    match op {
        ReduceOp::Sum => (xs.iter().sum(), n * e * abs_sum + e),
        ReduceOp::Avg => (xs.iter().sum::<f64>() / n, (n * e * abs_sum) / n + 2.0 * e),
        ReduceOp::Product => {
            let p: f64 = xs.iter().product();
            (p, (n + 1.0) * e * p.abs() + e)
        }
        ReduceOp::Min => (xs.iter().cloned().fold(f64::INFINITY, f64::min), 0.0),
        ReduceOp::Max => (xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max), 0.0),
        ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => unreachable!("integral dtypes only"),
    }
}

fn check_reduced(what: &str, got: &Tensor, inputs: &[Tensor], op: ReduceOp, offset: usize) {
    for i in 0..got.numel() {
        let xs: Vec<f64> = inputs.iter().map(|t| t.get_f64(offset + i)).collect();
        let (want, tol) = reference(got.dtype, op, &xs);
        let g = got.get_f64(i);
        assert!(
            (g - want).abs() <= tol,
            "{what} {} {}: element {i}: got {g}, reference {want} (tolerance {tol}, inputs {xs:?})",
            got.dtype.name(),
            op.name()
        );
    }
}

/// One drawn case: world size, dtype, op, shape (first dim a multiple of the world), root.
struct Case {
    n: usize,
    dtype: DType,
    op: ReduceOp,
    shape: Vec<usize>,
    root: usize,
    seed: u64,
}

/// Every dtype x op (bool AVG excluded: R35 rejects it before any data moves) on every world
/// size 1-8, with a drawn shape and root.
fn cases() -> Vec<Case> {
    let mut rng = Rng(0x5ce7);
    let mut out = Vec::new();
    for n in 1..=8 {
        for dtype in DTYPES {
            for op in OPS {
                // R35: bool AVG is refused; bitwise ops need an integral dtype (gloo).
                if (dtype == DType::Bool && op == ReduceOp::Avg)
                    || (op.is_bitwise() && dtype.is_float())
                {
                    continue;
                }
                let rows = n * (1 + rng.below(3));
                let shape = if rng.below(2) == 0 {
                    vec![rows]
                } else {
                    vec![rows, 1 + rng.below(3)]
                };
                out.push(Case {
                    n,
                    dtype,
                    op,
                    shape,
                    root: rng.below(n),
                    seed: rng.next(),
                });
            }
        }
    }
    out
}

#[test]
fn r36_all_reduce_matrix_worlds_1_to_8() {
    for c in cases() {
        let (dtype, shape, seed, op) = (c.dtype, c.shape.clone(), c.seed, c.op);
        let got = run_world(c.n, move |l| {
            let mut t = input(dtype, &shape, seed, l.rank());
            async move { all_reduce(&l, &mut t, op).await.map(|_| t) }
        });
        let inputs: Vec<Tensor> = (0..c.n).map(|r| input(dtype, &c.shape, seed, r)).collect();
        for (r, t) in got.into_iter().enumerate() {
            check_reduced(
                &format!("all_reduce n={} rank {r}", c.n),
                &t.expect("ok"),
                &inputs,
                op,
                0,
            );
        }
    }
}

#[test]
fn r36_reduce_to_root_matrix_worlds_1_to_8() {
    for c in cases() {
        let (dtype, shape, seed, op, root) = (c.dtype, c.shape.clone(), c.seed, c.op, c.root);
        let got = run_world(c.n, move |l| {
            let mut t = input(dtype, &shape, seed, l.rank());
            async move { reduce(&l, &mut t, op, root).await.map(|_| t) }
        });
        let inputs: Vec<Tensor> = (0..c.n).map(|r| input(dtype, &c.shape, seed, r)).collect();
        for (r, t) in got.into_iter().enumerate() {
            let t = t.expect("ok");
            if r == root {
                check_reduced(&format!("reduce n={} root {root}", c.n), &t, &inputs, op, 0);
            } else {
                assert_eq!(t, inputs[r], "reduce leaves a non-root's tensor unchanged");
            }
        }
    }
}

#[test]
fn r36_reduce_scatter_matrix_worlds_1_to_8() {
    for c in cases() {
        let (dtype, shape, seed, op, n) = (c.dtype, c.shape.clone(), c.seed, c.op, c.n);
        let mut out_shape = c.shape.clone();
        out_shape[0] /= n;
        let os = out_shape.clone();
        let got = run_world(n, move |l| {
            let t = input(dtype, &shape, seed, l.rank());
            let os = os.clone();
            async move { reduce_scatter(&l, &t, op, &os).await }
        });
        let inputs: Vec<Tensor> = (0..n).map(|r| input(dtype, &c.shape, seed, r)).collect();
        let m: usize = out_shape.iter().product();
        for (r, t) in got.into_iter().enumerate() {
            let t = t.expect("ok");
            assert_eq!(t.shape, out_shape);
            check_reduced(
                &format!("reduce_scatter n={n} rank {r}"),
                &t,
                &inputs,
                op,
                r * m,
            );
        }
    }
}

/// Data-movement collectives carry bytes unchanged: every dtype, every world size.
#[test]
fn r34_broadcast_gather_scatter_all_gather_every_dtype_worlds_1_to_8() {
    for c in cases().into_iter().filter(|c| c.op == ReduceOp::Sum) {
        let (dtype, shape, seed, root, n) = (c.dtype, c.shape.clone(), c.seed, c.root, c.n);
        let inputs: Vec<Tensor> = (0..n).map(|r| input(dtype, &shape, seed, r)).collect();

        let s = shape.clone();
        let got = run_world(n, move |l| {
            let mut t = input(dtype, &s, seed, l.rank());
            async move { broadcast(&l, &mut t, root).await.map(|_| t) }
        });
        for t in got {
            assert_eq!(t.expect("ok"), inputs[root], "broadcast n={n} root {root}");
        }

        let s = shape.clone();
        let got = run_world(n, move |l| {
            let t = input(dtype, &s, seed, l.rank());
            async move { all_gather(&l, &t).await }
        });
        for parts in got {
            assert_eq!(parts.expect("ok"), inputs, "all_gather n={n}");
        }

        let s = shape.clone();
        let got = run_world(n, move |l| {
            let t = input(dtype, &s, seed, l.rank());
            async move { gather(&l, &t, root).await }
        });
        for (r, parts) in got.into_iter().enumerate() {
            let want = (r == root).then(|| inputs.clone());
            assert_eq!(parts.expect("ok"), want, "gather n={n} root {root}");
        }

        // The root scatters rank-r-seeded tensors; member r must get exactly that one.
        let s = shape.clone();
        let got = run_world(n, move |l| {
            let me = l.rank();
            let parts = (me == root).then(|| (0..n).map(|r| input(dtype, &s, seed, r)).collect());
            let like = Tensor::from_fn(dtype, s.clone(), |_| 0.0);
            async move { scatter(&l, parts, &like, root).await }
        });
        for (r, t) in got.into_iter().enumerate() {
            assert_eq!(t.expect("ok"), inputs[r], "scatter n={n} root {root}");
        }
    }
}

/// all_to_all_single with drawn uneven split sizes (rows per destination), every dtype.
#[test]
fn all_to_all_single_uneven_splits_every_dtype_worlds_1_to_8() {
    let mut rng = Rng(0xa2a);
    for n in 1..=8 {
        for dtype in DTYPES {
            // splits[src][dst]: rows src sends to dst (0 allowed, as in PyTorch).
            let splits: Vec<Vec<usize>> = (0..n)
                .map(|_| (0..n).map(|_| rng.below(4)).collect())
                .collect();
            let row = 1 + rng.below(3);
            let seed = rng.next();
            let w = dtype.size_bytes();
            let sp = splits.clone();
            let got = run_world(n, move |l| {
                let me = l.rank();
                let rows: usize = sp[me].iter().sum();
                let t = input(dtype, &[rows, row], seed, me);
                let mut sends = Vec::new();
                let mut at = 0;
                for k in &sp[me] {
                    sends.push(t.data[at..at + k * row * w].to_vec());
                    at += k * row * w;
                }
                let lens: Vec<usize> = (0..n).map(|src| sp[src][me] * row * w).collect();
                async move { all_to_all(&l, sends, &lens).await }
            });
            for (me, chunks) in got.into_iter().enumerate() {
                let chunks = chunks.expect("ok");
                for (src, chunk) in chunks.iter().enumerate() {
                    let rows: usize = splits[src].iter().sum();
                    let t = input(dtype, &[rows, row], seed, src);
                    let before: usize = splits[src][..me].iter().sum();
                    let want = &t.data[before * row * w..(before + splits[src][me]) * row * w];
                    assert_eq!(chunk.as_slice(), want, "n={n} {} {src}->{me}", dtype.name());
                }
            }
        }
    }
}

#[test]
fn r28_barrier_completes_on_worlds_1_to_8() {
    for n in 1..=8 {
        let got = run_world(n, |l| async move { barrier(&l).await });
        assert!(got.iter().all(|r| r.is_ok()), "barrier n={n}");
    }
}

/// R28: a member running another collective is detected, not mis-read.
#[test]
fn r28_a_member_in_another_collective_is_a_mismatch() {
    let got = run_world(2, |l| async move {
        let mut t = input(DType::F32, &[4], 1, l.rank());
        if l.rank() == 0 {
            all_reduce(&l, &mut t, ReduceOp::Sum).await
        } else {
            broadcast(&l, &mut t, 1).await
        }
    });
    let e = got[0].clone().unwrap_err().to_string();
    assert!(e.contains("broadcast") && e.contains("all_reduce"), "{e}");
}
