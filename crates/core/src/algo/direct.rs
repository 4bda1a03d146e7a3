//! The algorithms oneCCL 2022.2's CPU backend selects besides the ring (perf/schedule.rs quotes
//! its selection table): `nreduce` all-reduce (every member reduces its own chunk from all
//! peers' copies, then sends the result to all peers), recursive-doubling all-reduce for small
//! buffers, and the direct ("naive") all-gather. Written over the same [`Link`] as scen's own
//! algorithms, so the timing model's schedules for them are checked against real messages.

use super::{chunks, recv, send, send_all, Link, K_AG, K_GATHER, K_RS, R};
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

/// nreduce all-reduce in place: direct reduce-scatter (chunk `c` is reduced by member `c` from
/// every peer's copy), then direct all-gather of the reduced chunks. Peers are visited in
/// pairwise order (`me + s` / `me - s`), so every pair meets once per phase.
pub async fn all_reduce_nreduce<L: Link, D: Payload>(
    l: &L,
    t: &mut Tensor<D>,
    op: ReduceOp,
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    if n > 1 {
        let w = t.dtype.size_bytes();
        let cs = chunks(t.numel(), n, w);
        let mine = cs[me].clone();
        for s in 1..n {
            let (to, from) = ((me + s) % n, (me + n - s) % n);
            send(l, to, K_RS, &t.data, cs[to].clone()).await?;
            let got: D = recv(l, from, K_RS, mine.len()).await?;
            t.data.reduce_in(mine.clone(), &got, t.dtype, op);
        }
        for s in 1..n {
            let (to, from) = ((me + s) % n, (me + n - s) % n);
            send(l, to, K_AG, &t.data, mine.clone()).await?;
            let got: D = recv(l, from, K_AG, cs[from].len()).await?;
            t.data.copy_in(cs[from].clone(), &got);
        }
    }
    if op == ReduceOp::Avg {
        t.data.finish_avg(t.dtype, n);
    }
    Ok(())
}

/// Recursive-doubling all-reduce in place: log2(p) exchanges of the whole buffer among the
/// largest power of two p <= n; the first 2(n - p) members pair up first (the even one folds
/// its buffer into the odd one and receives the result at the end).
pub async fn all_reduce_recursive_doubling<L: Link, D: Payload>(
    l: &L,
    t: &mut Tensor<D>,
    op: ReduceOp,
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    if n > 1 {
        let len = t.data.len();
        let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - pof2;
        // Members below 2*rem pair up: even ones fold in and sit out.
        let new_rank = if me < 2 * rem {
            if me % 2 == 0 {
                send_all(l, me + 1, K_RS, &t.data).await?;
                None
            } else {
                let got: D = recv(l, me - 1, K_RS, len).await?;
                t.data.reduce_in(0..len, &got, t.dtype, op);
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(nr) = new_rank {
            let mut mask = 1;
            while mask < pof2 {
                let peer_new = nr ^ mask;
                let peer = if peer_new < rem {
                    peer_new * 2 + 1
                } else {
                    peer_new + rem
                };
                send_all(l, peer, K_RS, &t.data).await?;
                let got: D = recv(l, peer, K_RS, len).await?;
                // The lower member's data first, so every member reduces in the same order.
                if peer < me {
                    let mine = std::mem::replace(&mut t.data, got);
                    t.data.reduce_in(0..len, &mine, t.dtype, op);
                } else {
                    t.data.reduce_in(0..len, &got, t.dtype, op);
                }
                mask <<= 1;
            }
        }
        if me < 2 * rem {
            if me % 2 == 1 {
                send_all(l, me - 1, K_AG, &t.data).await?;
            } else {
                t.data = recv(l, me + 1, K_AG, len).await?;
            }
        }
    }
    if op == ReduceOp::Avg {
        t.data.finish_avg(t.dtype, n);
    }
    Ok(())
}

/// Direct all-gather: every member sends its input to every peer (pairwise order).
pub async fn all_gather_direct<L: Link, D: Payload>(l: &L, input: &Tensor<D>) -> R<Vec<Tensor<D>>> {
    let (n, me) = (l.size(), l.rank());
    let mut parts: Vec<Option<D>> = vec![None; n];
    parts[me] = Some(input.data.clone());
    for s in 1..n {
        let (to, from) = ((me + s) % n, (me + n - s) % n);
        send_all(l, to, K_GATHER, &input.data).await?;
        parts[from] = Some(recv(l, from, K_GATHER, input.data.len()).await?);
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

#[cfg(test)]
mod tests {
    use super::super::testlink::run_world;
    use super::*;
    use crate::dtype::DType;

    fn input(me: usize, numel: usize) -> Tensor {
        Tensor::from_fn(DType::F32, vec![numel], move |i| (me * 10 + i % 7) as f64)
    }

    #[test]
    fn nreduce_and_recursive_doubling_equal_the_ring_worlds_1_to_8() {
        for n in 1..=8 {
            for numel in [1usize, 5, 24] {
                let want = run_world(n, move |l| async move {
                    let mut t = input(l.rank(), numel);
                    super::super::all_reduce(&l, &mut t, ReduceOp::Sum)
                        .await
                        .map(|_| t)
                });
                for which in 0..2 {
                    let got = run_world(n, move |l| async move {
                        let mut t = input(l.rank(), numel);
                        if which == 0 {
                            all_reduce_nreduce(&l, &mut t, ReduceOp::Sum).await?;
                        } else {
                            all_reduce_recursive_doubling(&l, &mut t, ReduceOp::Sum).await?;
                        }
                        Ok::<_, super::super::CollectiveError>(t)
                    });
                    for (r, (g, w)) in got.into_iter().zip(&want).enumerate() {
                        let (g, w) = (g.expect("ok"), w.clone().expect("ok"));
                        assert_eq!(g.data, w.data, "n={n} numel={numel} which={which} rank {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn symbolic_all_reduces_give_every_member_one_digest_worlds_1_to_8() {
        use crate::payload::{Payload, Symbolic};
        for n in 1..=8 {
            for numel in [1usize, 5, 24] {
                for which in 0..3 {
                    let got = run_world(n, move |l| async move {
                        let mut t = Tensor {
                            dtype: DType::F32,
                            shape: vec![numel],
                            data: Symbolic::leaf(numel * 4, 100 + l.rank() as u64),
                        };
                        match which {
                            0 => super::super::all_reduce(&l, &mut t, ReduceOp::Sum).await?,
                            1 => all_reduce_nreduce(&l, &mut t, ReduceOp::Sum).await?,
                            _ => all_reduce_recursive_doubling(&l, &mut t, ReduceOp::Sum).await?,
                        }
                        assert_eq!(t.data.len(), numel * 4);
                        Ok::<_, super::super::CollectiveError>(t.data.digest())
                    });
                    let got: Vec<u64> = got.into_iter().map(|g| g.expect("ok")).collect();
                    assert!(
                        got.iter().all(|d| *d == got[0]),
                        "n={n} numel={numel} which={which}: {got:x?}"
                    );
                    let input = Symbolic::leaf(numel * 4, 100).digest();
                    assert_eq!(got[0] == input, n == 1, "n={n} which={which}");
                }
            }
        }
    }

    #[test]
    fn direct_all_gather_equals_the_ring() {
        for n in 1..=6 {
            let want = run_world(n, |l| async move {
                super::super::all_gather(&l, &input(l.rank(), 3)).await
            });
            let got = run_world(n, |l| async move {
                all_gather_direct(&l, &input(l.rank(), 3)).await
            });
            for (g, w) in got.into_iter().zip(want) {
                let (g, w) = (g.expect("ok"), w.expect("ok"));
                let gd: Vec<&Vec<u8>> = g.iter().map(|t| &t.data).collect();
                let wd: Vec<&Vec<u8>> = w.iter().map(|t| &t.data).collect();
                assert_eq!(gd, wd, "n={n}");
            }
        }
    }
}
