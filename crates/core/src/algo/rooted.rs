//! Rooted collectives: a binomial tree for broadcast and reduce, a direct fan for gather and
//! scatter (the root exchanges one message with every other member, in group-rank order).

use super::{
    recv, recv_into, send_all, CollectiveError, Link, K_BCAST, K_REDUCE, K_ROOTGATHER, K_SCATTER, R,
};
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

/// Binomial-tree broadcast from group rank `root`. Where the link takes short messages (gloo),
/// a receiver with a larger buffer takes what its sender sends into its first elements.
pub async fn broadcast<L: Link, D: Payload>(l: &L, t: &mut Tensor<D>, root: usize) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let vr = (me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let src = (vr - mask + root) % n;
            if l.takes_short_broadcast() {
                recv_into(l, src, K_BCAST, &mut t.data).await?;
            } else {
                t.data = recv(l, src, K_BCAST, t.data.len()).await?;
            }
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            let dst = (vr + mask + root) % n;
            send_all(l, dst, K_BCAST, &t.data).await?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Binomial-tree reduce to group rank `root`: the root's tensor becomes the reduction of every
/// member's tensor; the other members' tensors are left as they were (as NCCL/oneCCL do).
pub async fn reduce<L: Link, D: Payload>(
    l: &L,
    t: &mut Tensor<D>,
    op: ReduceOp,
    root: usize,
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    let vr = (me + n - root) % n;
    let mut acc = t.data.clone();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            send_all(l, (vr - mask + root) % n, K_REDUCE, &acc).await?;
            return Ok(());
        }
        if vr + mask < n {
            let got: D = recv(l, (vr + mask + root) % n, K_REDUCE, acc.len()).await?;
            acc.reduce_in(0..acc.len(), &got, t.dtype, op);
        }
        mask <<= 1;
    }
    if op == ReduceOp::Avg {
        acc.finish_avg(t.dtype, n);
    }
    t.data = acc;
    Ok(())
}

/// Gather to group rank `root`: the root gets every member's tensor in group-rank order
/// (`Some`), the others `None`.
pub async fn gather<L: Link, D: Payload>(
    l: &L,
    t: &Tensor<D>,
    root: usize,
) -> R<Option<Vec<Tensor<D>>>> {
    let (n, me) = (l.size(), l.rank());
    if me != root {
        send_all(l, root, K_ROOTGATHER, &t.data).await?;
        return Ok(None);
    }
    let mut parts = Vec::with_capacity(n);
    for from in 0..n {
        let data = if from == me {
            t.data.clone()
        } else {
            recv(l, from, K_ROOTGATHER, t.data.len()).await?
        };
        parts.push(Tensor {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data,
        });
    }
    Ok(Some(parts))
}

/// Scatter from group rank `root`: the root passes one tensor per member (`parts`, group-rank
/// order); every member returns its part, whose dtype and shape `like` gives.
pub async fn scatter<L: Link, D: Payload>(
    l: &L,
    parts: Option<Vec<Tensor<D>>>,
    like: &Tensor<D>,
    root: usize,
) -> R<Tensor<D>> {
    let (n, me) = (l.size(), l.rank());
    let mut out = like.clone();
    if me != root {
        out.data = recv(l, root, K_SCATTER, like.data.len()).await?;
        return Ok(out);
    }
    let parts = parts.unwrap_or_default();
    if parts.len() != n {
        return Err(CollectiveError::Mismatch(format!(
            "scatter root has {} tensors for a group of {n}",
            parts.len()
        )));
    }
    for (to, p) in parts.iter().enumerate() {
        if to != me {
            send_all(l, to, K_SCATTER, &p.data).await?;
        }
    }
    if parts[me].data.len() != like.data.len() {
        return Err(CollectiveError::Mismatch(format!(
            "scatter root's own part has {} bytes, its output {}",
            parts[me].data.len(),
            like.data.len()
        )));
    }
    out.data = parts[me].data.clone();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::testlink::{run_world, GlooLike};

    use crate::dtype::DType;

    /// Rank 0 broadcasts 4 floats, rank 1 receives into 8 (tests/fixtures/fr/size_mismatch).
    fn short_broadcast(gloo: bool) -> Vec<R<Vec<f64>>> {
        run_world(2, move |l| async move {
            let n = if l.rank() == 1 { 8 } else { 4 };
            let mut t = Tensor::filled(DType::F32, vec![n], l.rank() as f64 + 1.0);
            let r = if gloo {
                broadcast(&GlooLike(l), &mut t, 0).await
            } else {
                broadcast(&l, &mut t, 0).await
            };
            r.map(|_| t.to_f64_vec())
        })
    }

    #[test]
    fn a_gloo_receiver_with_a_larger_buffer_takes_the_roots_elements_first() {
        let got = short_broadcast(true);
        assert_eq!(got[0].as_ref().expect("root"), &vec![1.0; 4]);
        let mut want = vec![1.0; 4];
        want.extend([2.0; 4]);
        assert_eq!(got[1].as_ref().expect("receiver"), &want);
    }

    #[test]
    fn other_links_see_the_size_difference() {
        let got = short_broadcast(false);
        let e = got[1].as_ref().expect_err("mismatch").to_string();
        assert!(
            e.contains("sent 16 bytes of broadcast while this rank expects 32"),
            "{e}"
        );
    }
}
