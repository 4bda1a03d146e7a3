//! Ring algorithms: every member talks to its two neighbours, so bandwidth per member is
//! independent of the group size. All-reduce is a reduce-scatter followed by an all-gather.

use super::{
    chunks, recv, recv_chunk, send, CollectiveError, Link, K_AG, K_GATHER, K_RS, K_RSCATTER, R,
};
use crate::dtype::DType;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;
use std::ops::Range;

/// Ring all-reduce in place: reduce-scatter, then all-gather of the reduced chunks.
pub async fn all_reduce<L: Link, D: Payload>(l: &L, t: &mut Tensor<D>, op: ReduceOp) -> R<()> {
    let n = l.size();
    if n > 1 {
        let cs = chunks(t.numel(), n, t.dtype.size_bytes());
        reduce_scatter_chunks(l, &mut t.data, &cs, t.dtype, op).await?;
        all_gather_chunks(l, &mut t.data, &cs).await?;
    }
    if op == ReduceOp::Avg {
        t.data.finish_avg(t.dtype, n);
    }
    Ok(())
}

/// The reduce-scatter half of the ring all-reduce over byte ranges `cs` (one per member) of
/// `data`: after it, member `me` holds chunk `(me + 1) % n` reduced over every member.
pub(crate) async fn reduce_scatter_chunks<L: Link, D: Payload>(
    l: &L,
    data: &mut D,
    cs: &[Range<usize>],
    dtype: DType,
    op: ReduceOp,
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let send_c = (me + n - s) % n;
        let recv_c = (me + n - s - 1) % n;
        send(l, next, K_RS, data, cs[send_c].clone()).await?;
        recv_chunk(l, prev, K_RS, cs[recv_c].clone(), data, |d, at, got| {
            d.reduce_in(at, got, dtype, op)
        })
        .await?;
    }
    Ok(())
}

/// The all-gather half of the ring all-reduce: member `me` starts from its reduced chunk
/// `(me + 1) % n` and ends with every chunk.
pub(crate) async fn all_gather_chunks<L: Link, D: Payload>(
    l: &L,
    data: &mut D,
    cs: &[Range<usize>],
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let send_c = (me + 1 + n - s) % n;
        let recv_c = (me + n - s) % n;
        send(l, next, K_AG, data, cs[send_c].clone()).await?;
        recv_chunk(l, prev, K_AG, cs[recv_c].clone(), data, |d, at, got| {
            d.copy_in(at, got)
        })
        .await?;
    }
    Ok(())
}

/// Ring all-gather: every rank ends with every rank's input, in group-rank order.
pub async fn all_gather<L: Link, D: Payload>(l: &L, input: &Tensor<D>) -> R<Vec<Tensor<D>>> {
    let (n, me) = (l.size(), l.rank());
    let mut parts: Vec<Option<D>> = vec![None; n];
    parts[me] = Some(input.data.clone());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let send_i = (me + n - s) % n;
        let recv_i = (me + n - s - 1) % n;
        let body = parts[send_i].as_ref().expect("filled in an earlier round");
        send(l, next, K_GATHER, body, 0..body.len()).await?;
        parts[recv_i] = Some(recv(l, prev, K_GATHER, input.data.len()).await?);
    }
    Ok(parts
        .into_iter()
        .map(|d| Tensor {
            dtype: input.dtype,
            shape: input.shape.clone(),
            data: d.expect("every part received"),
        })
        .collect())
}

/// Ring reduce-scatter: `input` holds one equal chunk per member (in group-rank order); returns
/// this member's chunk reduced over all members, shaped `out_shape`.
///
/// In round `s` a member sends chunk `me - s - 1` and folds the chunk `me - s - 2` it receives
/// from its predecessor into its own copy, so after `n - 1` rounds chunk `me` is complete.
pub async fn reduce_scatter<L: Link, D: Payload>(
    l: &L,
    input: &Tensor<D>,
    op: ReduceOp,
    out_shape: &[usize],
) -> R<Tensor<D>> {
    let (n, me) = (l.size(), l.rank());
    let m: usize = out_shape.iter().product();
    if input.numel() != n * m {
        return Err(CollectiveError::Mismatch(format!(
            "reduce_scatter input has {} elements, the group of {n} needs {n} x {m}",
            input.numel()
        )));
    }
    let w = input.dtype.size_bytes();
    let cs: Vec<std::ops::Range<usize>> = (0..n).map(|c| c * m * w..(c + 1) * m * w).collect();
    let mut acc = input.data.clone();
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    for s in 0..n.saturating_sub(1) {
        let send_c = (me + 2 * n - s - 1) % n;
        let recv_c = (me + 2 * n - s - 2) % n;
        send(l, next, K_RSCATTER, &acc, cs[send_c].clone()).await?;
        let got: D = recv(l, prev, K_RSCATTER, cs[recv_c].len()).await?;
        acc.reduce_in(cs[recv_c].clone(), &got, input.dtype, op);
    }
    let mut data = acc.slice(cs[me].clone());
    if op == ReduceOp::Avg {
        data.finish_avg(input.dtype, n);
    }
    Ok(Tensor {
        dtype: input.dtype,
        shape: out_shape.to_vec(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testlink::{run_world, GlooLike};
    use super::*;

    /// Rank 0 all_reduces 4 floats, rank 1 8 (scenarios/mismatch_shape_gloo.toml), over gloo.
    #[test]
    fn a_gloo_ring_member_sent_a_larger_chunk_aborts_and_a_smaller_one_is_taken() {
        let got = run_world(2, |l| async move {
            let n = if l.rank() == 1 { 8 } else { 4 };
            let mut t = Tensor::filled(DType::F32, vec![n], 1.0);
            // Rank 0 aborts on its first receive: its peer's later receive then fails.
            all_reduce(&GlooLike(l), &mut t, ReduceOp::Sum).await
        });
        // Rank 1's 16-byte chunk into rank 0's 8-byte one: the process aborts.
        assert_eq!(
            got[0],
            Err(CollectiveError::TooLarge {
                from: 1,
                got: 16,
                posted: 8
            })
        );
        // Rank 1 took rank 0's 8 bytes into its 16-byte chunk and waited on for the gather.
        assert!(
            matches!(got[1], Err(CollectiveError::Link(_))),
            "{:?}",
            got[1]
        );
    }
}
