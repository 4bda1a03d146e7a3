//! gloo's ring algorithms: all-reduce (gloo/allreduce.cc, `ring`), reduce (gloo/reduce.cc)
//! and all-gather (gloo/allgather.cc), with their segment sizes, directions and pipelining.
//!
//! All-reduce and reduce receive from `rank + 1` and send to `rank - 1`, in segments of
//! `ceil(bytes / 2n)` rounded up to an element, two operations in flight; all-gather runs the
//! other way, in two half-chunks per member. What goes where matters when members disagree on
//! the size: each member posts its own segment lengths.

use super::Posted;
use crate::algo::{Link, K_GATHER, K_REDUCE, K_RS, R};
use crate::dtype::DType;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

fn round_up(x: usize, m: usize) -> usize {
    x.div_ceil(m) * m
}

/// gloo's segment plan for `total` bytes of `w`-byte elements over `n` members.
struct Plan {
    n: usize,
    me: usize,
    total: usize,
    seg: usize,
    segs: usize,
    per_rank: usize,
}

impl Plan {
    /// allreduce.cc: `numSegments` is `2n` (PyTorch sets no maximum segment size), each
    /// `ceil(total / numSegments)` rounded up to an element.
    fn all_reduce(n: usize, me: usize, total: usize, w: usize) -> Plan {
        let segs = 2 * n;
        let seg = round_up(total.div_ceil(segs), w);
        Plan {
            n,
            me,
            total,
            seg,
            segs,
            per_rank: 2,
        }
    }

    /// reduce.cc: the segment is `ceil(total / 2n)` rounded up to an element, and there are as
    /// many as cover `total`, at least `2n`, rounded up to a multiple of `n`.
    fn reduce(n: usize, me: usize, total: usize, w: usize) -> Plan {
        let seg = round_up(total.div_ceil(2 * n), w);
        let segs = round_up(total.div_ceil(seg).max(2 * n), n);
        Plan {
            n,
            me,
            total,
            seg,
            segs,
            per_rank: segs / n,
        }
    }

    /// The bytes of the segment at `offset`, if any are in range.
    fn len_at(&self, offset: usize) -> Option<usize> {
        (offset < self.total).then(|| self.seg.min(self.total - offset))
    }

    /// Offset `k` segments past member `m`'s first one, wrapped around the ring.
    fn offset(&self, m: usize, k: usize) -> usize {
        ((m * self.per_rank + k) * self.seg) % (self.segs * self.seg)
    }

    /// (send, receive) offsets of reduce-scatter iteration `i`.
    fn rs(&self, i: usize) -> (usize, usize) {
        (self.offset(self.me + 1, i), self.offset(self.me + 2, i))
    }

    /// (send, receive) offsets of all-gather iteration `i`.
    fn ag(&self, i: usize) -> (usize, usize) {
        (self.offset(self.me, i), self.offset(self.me + 1, i))
    }

    fn neighbours(&self) -> (usize, usize) {
        ((self.me + 1) % self.n, (self.me + self.n - 1) % self.n)
    }
}

/// gloo's all-reduce in place (the ring; a group of one has nothing to do).
pub async fn all_reduce<L: Link, D: Payload>(l: &L, t: &mut Tensor<D>, op: ReduceOp) -> R<()> {
    let n = l.size();
    if n > 1 && !t.data.is_empty() {
        let plan = Plan::all_reduce(n, l.rank(), t.data.len(), t.dtype.size_bytes());
        let mut p = Posted::new(l, K_RS);
        reduce_scatter(
            &mut p,
            &plan,
            &mut t.data,
            t.dtype,
            op,
            plan.segs - plan.per_rank,
        )
        .await?;
        // The all-gather loop receives into `out`, which it also sends from: one buffer.
        let mut p = Posted::shared(l, K_RS);
        all_gather_segments(&mut p, &plan, &mut t.data).await?;
    }
    if op == ReduceOp::Avg {
        t.data.finish_avg(t.dtype, n);
    }
    Ok(())
}

/// The reduce-scatter loop both rings share: `issued` iterations post a receive (into one of
/// two scratch segments) and a send; each is waited for two iterations later, and the received
/// segment is reduced into `data`.
async fn reduce_scatter<L: Link, D: Payload>(
    p: &mut Posted<'_, L>,
    plan: &Plan,
    data: &mut D,
    dtype: DType,
    op: ReduceOp,
    issued: usize,
) -> R<()> {
    let mut tmp = [D::zeros(plan.seg), D::zeros(plan.seg)];
    let fold = |data: &mut D, i: usize, at: std::ops::Range<usize>, got: D| {
        let slot = &mut tmp[i & 1];
        slot.copy_in(0..got.len(), &got);
        data.reduce_in(at.clone(), &slot.slice(0..at.len()), dtype, op);
    };
    ring_pass(p, plan, data, issued, Plan::rs, fold).await
}

/// allreduce.cc's second loop: the reduced segments go round the ring into `data`, received
/// into the buffer they are sent from (so a pair's error on a send fails a receive's wait:
/// 7/569, rank 0 read the reset of the rank it was sending to).
async fn all_gather_segments<L: Link, D: Payload>(
    p: &mut Posted<'_, L>,
    plan: &Plan,
    data: &mut D,
) -> R<()> {
    let issued = plan.segs - plan.per_rank;
    let fold = |data: &mut D, _: usize, at: std::ops::Range<usize>, got: D| {
        data.copy_in(at.start..at.start + got.len(), &got)
    };
    ring_pass(p, plan, data, issued, Plan::ag, fold).await
}

/// One pass round gloo's ring: iteration `i` < `issued` posts the receive and the send of the
/// segments `offsets(i)` names; two iterations later both are waited for, and `fold` takes the
/// received bytes into the segment (with the iteration, for the scratch slot it used).
async fn ring_pass<L: Link, D: Payload>(
    p: &mut Posted<'_, L>,
    plan: &Plan,
    data: &mut D,
    issued: usize,
    offsets: fn(&Plan, usize) -> (usize, usize),
    mut fold: impl FnMut(&mut D, usize, std::ops::Range<usize>, D),
) -> R<()> {
    let (from, to) = plan.neighbours();
    for i in 0..issued + 2 {
        if i >= 2 {
            let (so, ro) = offsets(plan, i - 2);
            if let Some(rl) = plan.len_at(ro) {
                let (_, got): (_, D) = p.wait_recv().await?;
                fold(data, i, ro..ro + rl, got);
            }
            if plan.len_at(so).is_some() {
                p.wait_send().await?;
            }
        }
        if i < issued {
            let (so, ro) = offsets(plan, i);
            if let Some(rl) = plan.len_at(ro) {
                p.recv(from, rl, 0).await?;
            }
            if let Some(sl) = plan.len_at(so) {
                p.send(to, data, so..so + sl).await?;
            }
        }
    }
    Ok(())
}

/// gloo's reduce to group rank `root`: the reduce-scatter ring, then every member sends its
/// reduced chunk to the root. The other members' tensors are left holding partial sums, as
/// real gloo leaves them (it reduces in place).
pub async fn reduce<L: Link, D: Payload>(
    l: &L,
    t: &mut Tensor<D>,
    op: ReduceOp,
    root: usize,
) -> R<()> {
    let (n, me) = (l.size(), l.rank());
    if n > 1 && !t.data.is_empty() {
        let plan = Plan::reduce(n, me, t.data.len(), t.dtype.size_bytes());
        let mut p = Posted::new(l, K_REDUCE);
        reduce_scatter(&mut p, &plan, &mut t.data, t.dtype, op, plan.segs - 2).await?;
        let chunk = plan.per_rank * plan.seg;
        let chunk_at = |m: usize| {
            let off = m * chunk;
            (off < plan.total).then(|| (off, chunk.min(plan.total - off)))
        };
        if me == root {
            let mut waits = 0;
            for m in (0..n).filter(|&m| m != me) {
                if let Some((off, len)) = chunk_at(m) {
                    p.recv(m, len, off).await?;
                    waits += 1;
                }
            }
            for _ in 0..waits {
                let (off, got): (_, D) = p.wait_recv().await?;
                t.data.copy_in(off..off + got.len(), &got);
            }
        } else if let Some((off, len)) = chunk_at(me) {
            p.send(root, &t.data, off..off + len).await?;
            p.wait_send().await?;
        }
    }
    if op == ReduceOp::Avg && me == root {
        t.data.finish_avg(t.dtype, n);
    }
    Ok(())
}

/// gloo/allgather.cc: member `me` sends to `me + 1` and receives from `me - 1`, each member's
/// part in two halves, two operations in flight. Every member ends with every part, in
/// group-rank order.
pub async fn all_gather<L: Link, D: Payload>(l: &L, input: &Tensor<D>) -> R<Vec<Tensor<D>>> {
    let (n, me) = (l.size(), l.rank());
    let inb = input.data.len();
    let outb = inb * n;
    let mut out = D::zeros(outb);
    out.copy_in(me * inb..(me + 1) * inb, &input.data);
    if outb > 0 && n > 1 {
        let half = [inb / 2, inb - inb / 2];
        let at = [0, inb / 2];
        let (to, from) = ((me + 1) % n, (me + n - 1) % n);
        let mut p = Posted::shared(l, K_GATHER);
        for i in 0..2 * (n - 1) {
            let send_seg = n + me - i / 2;
            let so = (send_seg * inb + at[i & 1]) % outb;
            let ro = ((send_seg - 1) * inb + at[i & 1]) % outb;
            if i >= 2 {
                wait_pair(&mut p, &mut out).await?;
            }
            p.send(to, &out, so..so + half[i & 1]).await?;
            p.recv(from, half[i & 1], ro).await?;
        }
        for _ in 0..2 {
            wait_pair(&mut p, &mut out).await?;
        }
    }
    Ok((0..n)
        .map(|k| Tensor {
            dtype: input.dtype,
            shape: input.shape.clone(),
            data: out.slice(k * inb..(k + 1) * inb),
        })
        .collect())
}

/// allgather.cc's wait: the next-to-last send, then the next-to-last receive into `out`.
async fn wait_pair<L: Link, D: Payload>(p: &mut Posted<'_, L>, out: &mut D) -> R<()> {
    p.wait_send().await?;
    let (at, got): (_, D) = p.wait_recv().await?;
    out.copy_in(at..at + got.len(), &got);
    Ok(())
}
