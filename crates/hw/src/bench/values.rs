//! The values a benchmark rank sends and the result it must get back: small integers, exact in
//! every dtype (bf16 included) for up to 64 ranks, so `#wrong` counts real corruption only.

use scen_core::dtype::DType;
use scen_core::perf::BenchOp;
use scen_core::reduce::ReduceOp;

/// Element `i` of rank `r`'s send buffer.
pub fn input(r: usize, i: usize, op: ReduceOp) -> f64 {
    match op {
        // A product of many ranks' values would overflow: only rank 0 contributes a factor.
        ReduceOp::Product => {
            if r == 0 {
                (i % 4 + 1) as f64
            } else {
                1.0
            }
        }
        _ => ((r + i) % 4) as f64,
    }
}

fn reduced(n: usize, i: usize, op: ReduceOp) -> f64 {
    let vals = (0..n).map(|r| input(r, i, op));
    match op {
        ReduceOp::Max => vals.fold(f64::MIN, f64::max),
        ReduceOp::Min => vals.fold(f64::MAX, f64::min),
        ReduceOp::Product => vals.product(),
        _ => vals.sum(),
    }
}

/// Fills a send buffer of `count` elements for rank `r`.
pub fn fill(buf: &mut [u8], dtype: DType, r: usize, op: ReduceOp) {
    let w = dtype.size_bytes();
    for (i, e) in buf.chunks_exact_mut(w).enumerate() {
        dtype.encode(input(r, i, op), e);
    }
}

/// Element `j` of rank `me`'s receive buffer, or `None` where the op leaves it undefined.
pub fn expected(
    bop: BenchOp,
    n: usize,
    me: usize,
    send_count: usize,
    j: usize,
    op: ReduceOp,
) -> Option<f64> {
    Some(match bop {
        BenchOp::AllReduce => reduced(n, j, op),
        BenchOp::Reduce if me == 0 => reduced(n, j, op),
        BenchOp::Reduce => return None,
        BenchOp::Broadcast => input(0, j, op),
        BenchOp::AllGather => input(j / send_count, j % send_count, op),
        BenchOp::ReduceScatter => reduced(n, me * (send_count / n) + j, op),
        BenchOp::AllToAll => {
            let c = send_count / n;
            input(j / c, me * c + j % c, op)
        }
    })
}

/// How many elements of `recv` differ from what `me` must hold.
pub fn count_wrong(
    recv: &[u8],
    dtype: DType,
    bop: BenchOp,
    n: usize,
    me: usize,
    send_count: usize,
    op: ReduceOp,
) -> u64 {
    let w = dtype.size_bytes();
    let as_dtype = |v: f64| {
        let mut b = vec![0u8; w];
        dtype.encode(v, &mut b);
        dtype.decode(&b)
    };
    recv.chunks_exact(w)
        .enumerate()
        .filter(|(j, e)| match expected(bop, n, me, send_count, *j, op) {
            Some(v) => dtype.decode(e) != as_dtype(v),
            None => false,
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_values_are_exact_in_bf16_for_64_ranks() {
        let v = reduced(64, 3, ReduceOp::Sum);
        let mut b = [0u8; 2];
        DType::BF16.encode(v, &mut b);
        assert_eq!(DType::BF16.decode(&b), v);
        assert_eq!(reduced(4, 0, ReduceOp::Sum), 6.0); // 0+1+2+3
        assert_eq!(reduced(4, 1, ReduceOp::Product), 2.0);
    }

    #[test]
    fn a_correct_all_gather_has_no_wrong_elements_and_a_flipped_one_is_counted() {
        let (n, count) = (3usize, 5usize);
        let mut recv = vec![0u8; n * count * 4];
        for r in 0..n {
            fill(
                &mut recv[r * count * 4..(r + 1) * count * 4],
                DType::F32,
                r,
                ReduceOp::Sum,
            );
        }
        let wrong = |b: &[u8]| {
            count_wrong(
                b,
                DType::F32,
                BenchOp::AllGather,
                n,
                1,
                count,
                ReduceOp::Sum,
            )
        };
        assert_eq!(wrong(&recv), 0);
        recv[4..8].copy_from_slice(&99f32.to_le_bytes());
        assert_eq!(wrong(&recv), 1);
    }
}
