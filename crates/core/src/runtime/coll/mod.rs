//! One collective call as a rank runs it: the step's tensors laid out as one input buffer
//! (build.rs), the algorithm to run on it (here), how a step's `fill` becomes its contents
//! (fill.rs), the variables an `expect` formula sees for each output element (out_vars.rs),
//! and the probe an `async_op` call reports through (async_probe.rs).
//!
//! Adding a collective means a row in c10d/collective.rs and an arm here and in build.rs; the
//! rank interpreter (rank.rs) only resolves the group, checks the backend's rules and runs the
//! call.

mod async_probe;
mod build;
mod fill;
mod out_vars;

pub(crate) use async_probe::AsyncProbe;
pub(crate) use build::{build, eval_splits, CallShape};
pub(crate) use fill::{Done, Fill};
pub(crate) use out_vars::{out_vars, OutVars};

use crate::algo::{self, CollectiveError, Link};
use crate::c10d::ccl_env::AllReduceAlgo;
use crate::dtype::DType;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

/// What runs on the wire (roots are group ranks).
#[derive(Debug, Clone)]
pub(crate) enum Algo {
    AllReduce(ReduceOp),
    Reduce(ReduceOp, usize),
    Broadcast(usize),
    /// `count` inputs concatenated; output per input `k`, one chunk per member.
    AllGather {
        count: usize,
    },
    Gather(usize),
    Scatter {
        root: usize,
        out_shape: Vec<usize>,
    },
    /// `count` inputs of `members x out` elements each; output the `count` reduced chunks.
    /// `per_member`: the list form (`dist.reduce_scatter`), which ProcessGroupGloo runs as one
    /// all-reduce per member's input, each a call of its own (real torch 2.15: one
    /// reduce_scatter of 3 inputs moves the group's sequence number by 3).
    ReduceScatter {
        op: ReduceOp,
        count: usize,
        out_shape: Vec<usize>,
        per_member: bool,
    },
    /// Rows (of `row_elems` elements) sent to and received from each member.
    AllToAll {
        send_rows: Vec<usize>,
        recv_rows: Vec<usize>,
        row_elems: usize,
    },
    Barrier,
}

#[derive(Debug, Clone)]
pub(crate) struct Coll {
    pub name: &'static str,
    pub torch_op: &'static str,
    pub algo: Algo,
}

impl Coll {
    /// R28: an XCCL/NCCL barrier is an all-reduce of a 1-element tensor (its work's OpType).
    pub fn barrier() -> Coll {
        Coll {
            name: "barrier",
            torch_op: "ALLREDUCE",
            algo: Algo::Barrier,
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn torch_op(&self) -> &'static str {
        self.torch_op
    }

    /// The family of gloo algorithm that runs the call. gloo builds each message's slot from
    /// the algorithm's own prefix and the call's tag, so calls of two families at the same
    /// sequence number never take each other's messages: each waits for its own, until the
    /// timeout (real PyTorch 2.15: an extra all_gather on one rank meeting the others'
    /// all_reduce times out in recv and send, tests/torch/differential.rs).
    pub fn gloo_slot(&self) -> &'static str {
        match &self.algo {
            Algo::AllReduce(_) => "allreduce",
            Algo::Reduce(..) => "reduce",
            Algo::Broadcast(_) => "broadcast",
            Algo::AllGather { .. } => "allgather",
            Algo::Gather(_) => "gather",
            Algo::Scatter { .. } => "scatter",
            // ProcessGroupGloo's reduce_scatter is all-reduces (of a copy, then the chunk; the
            // list form one per member: `gloo_calls`).
            Algo::ReduceScatter { .. } => "allreduce",
            Algo::AllToAll { .. } => "alltoall",
            Algo::Barrier => "barrier",
        }
    }

    /// How many of gloo's calls (sequence numbers and tags) the call is on `members` members:
    /// the list form of reduce_scatter is one all-reduce per member, anything else one.
    pub fn gloo_calls(&self, members: usize) -> u64 {
        match &self.algo {
            Algo::ReduceScatter {
                per_member: true, ..
            } => members.max(1) as u64,
            _ => 1,
        }
    }

    /// Runs the call on `x`; `t` is the input (updated in place by in-place ops); returns the
    /// output when it is another tensor (`None` for in-place ops and non-roots of gather).
    pub async fn run<D: Payload, X: Exec<D>>(
        &self,
        x: &X,
        t: &mut Tensor<D>,
    ) -> Result<Option<Tensor<D>>, X::Error> {
        match &self.algo {
            Algo::AllReduce(op) => x.all_reduce(t, *op).await.map(|_| None),
            Algo::Reduce(op, root) => x.reduce(t, *op, *root).await.map(|_| None),
            Algo::Broadcast(root) => x.broadcast(t, *root).await.map(|_| None),
            Algo::AllGather { count } => {
                let parts = x.all_gather(t).await?;
                Ok(Some(regroup(&parts, *count, t)))
            }
            Algo::Gather(root) => Ok(x
                .gather(t, *root)
                .await?
                .map(|parts| Tensor::concat(&parts))),
            Algo::Scatter { root, out_shape } => scatter(x, t, *root, out_shape).await.map(Some),
            Algo::ReduceScatter {
                op,
                out_shape,
                per_member: true,
                ..
            } => x
                .reduce_scatter_per_member(t, *op, out_shape)
                .await
                .map(Some),
            Algo::ReduceScatter {
                op,
                count,
                out_shape,
                ..
            } => reduce_scatter(x, t, *op, *count, out_shape).await.map(Some),
            Algo::AllToAll {
                send_rows,
                recv_rows,
                row_elems,
            } => {
                let rows = (send_rows.as_slice(), recv_rows.as_slice());
                all_to_all(x, t, rows, *row_elems).await.map(Some)
            }
            Algo::Barrier => x.barrier().await.map(|_| None),
        }
    }
}

/// scatter: the root cuts its input into one `out_shape` part per member; every member gets
/// its part.
async fn scatter<D: Payload, X: Exec<D>>(
    x: &X,
    t: &Tensor<D>,
    root: usize,
    out_shape: &[usize],
) -> Result<Tensor<D>, X::Error> {
    let n = x.members();
    let numel: usize = out_shape.iter().product();
    let bytes = numel * t.dtype.size_bytes();
    // The output passed: zeros on the root, elsewhere the program's own tensor
    // (bytes past a shorter chunk keep their values: gloo fills the posted buffer).
    let mine = x.me() != root && t.data.len() >= bytes;
    let data = mine.then(|| t.data.slice(0..bytes));
    let data = data.unwrap_or_else(|| D::zeros(bytes));
    let (dtype, shape) = (t.dtype, out_shape.to_vec());
    let like = Tensor { dtype, shape, data };
    let parts = (x.me() == root).then(|| split_even(t, n, out_shape));
    x.scatter(parts, &like, root).await
}

/// reduce_scatter of `count` inputs of `members x out` elements each: the `count` reduced
/// chunks, concatenated.
async fn reduce_scatter<D: Payload, X: Exec<D>>(
    x: &X,
    t: &Tensor<D>,
    op: ReduceOp,
    count: usize,
    out_shape: &[usize],
) -> Result<Tensor<D>, X::Error> {
    let n = x.members();
    let m: usize = out_shape.iter().product();
    let w = t.dtype.size_bytes();
    let mut outs = Vec::with_capacity(count);
    for k in 0..count {
        let input = Tensor {
            dtype: t.dtype,
            shape: vec![n * m],
            data: t.data.slice(k * n * m * w..(k + 1) * n * m * w),
        };
        outs.push(x.reduce_scatter(&input, op, out_shape).await?);
    }
    Ok(if count == 1 {
        outs.pop().expect("one")
    } else {
        Tensor::concat(&outs)
    })
}

/// all_to_all: `rows.0[k]` rows (of `row_elems` elements) to member k, `rows.1[k]` from it.
async fn all_to_all<D: Payload, X: Exec<D>>(
    x: &X,
    t: &Tensor<D>,
    (send_rows, recv_rows): (&[usize], &[usize]),
    row_elems: usize,
) -> Result<Tensor<D>, X::Error> {
    let w = t.dtype.size_bytes() * row_elems;
    let mut sends = Vec::with_capacity(send_rows.len());
    let mut at = 0;
    for rows in send_rows {
        sends.push(t.data.slice(at..at + rows * w));
        at += rows * w;
    }
    let lens: Vec<usize> = recv_rows.iter().map(|r| r * w).collect();
    let got = x.all_to_all(t.dtype, sends, &lens).await?;
    let mut shape = t.shape.clone();
    shape[0] = recv_rows.iter().sum();
    Ok(Tensor {
        dtype: t.dtype,
        shape,
        data: D::concat(&got),
    })
}

/// The primitive operations a call is built from, by whoever executes them: core's algorithms
/// over a [`Link`] ([`OnLink`]: the simulator, gloo groups in hardware mode) or a device library
/// (hardware mode's oneCCL). How a step's tensors split into primitive calls and reassemble is
/// written once, in [`Coll::run`]. Roots and ranks are group ranks.
#[allow(async_fn_in_trait)]
pub(crate) trait Exec<D: Payload = Vec<u8>> {
    type Error;
    fn members(&self) -> usize;
    fn me(&self) -> usize;
    async fn all_reduce(&self, t: &mut Tensor<D>, op: ReduceOp) -> Result<(), Self::Error>;
    async fn reduce(&self, t: &mut Tensor<D>, op: ReduceOp, root: usize)
        -> Result<(), Self::Error>;
    async fn broadcast(&self, t: &mut Tensor<D>, root: usize) -> Result<(), Self::Error>;
    /// One part per member, in group-rank order.
    async fn all_gather(&self, t: &Tensor<D>) -> Result<Vec<Tensor<D>>, Self::Error>;
    /// The parts on the root, `None` elsewhere.
    #[allow(clippy::type_complexity)]
    async fn gather(
        &self,
        t: &Tensor<D>,
        root: usize,
    ) -> Result<Option<Vec<Tensor<D>>>, Self::Error>;
    async fn scatter(
        &self,
        parts: Option<Vec<Tensor<D>>>,
        like: &Tensor<D>,
        root: usize,
    ) -> Result<Tensor<D>, Self::Error>;
    async fn reduce_scatter(
        &self,
        input: &Tensor<D>,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor<D>, Self::Error>;
    /// The list form's reduce-scatter: as [`Exec::reduce_scatter`], except where the backend
    /// runs it otherwise (gloo: an all-reduce per member's input, `OnGloo`).
    async fn reduce_scatter_per_member(
        &self,
        input: &Tensor<D>,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor<D>, Self::Error> {
        self.reduce_scatter(input, op, out_shape).await
    }
    /// `sends[k]` to member k; returns `recv_lens[k]` bytes from each member k.
    async fn all_to_all(
        &self,
        dtype: DType,
        sends: Vec<D>,
        recv_lens: &[usize],
    ) -> Result<Vec<D>, Self::Error>;
    async fn barrier(&self) -> Result<(), Self::Error>;
}

/// Core's algorithms over a transport; `all_reduce` picks the all-reduce (c10d/ccl_env.rs:
/// the ring for gloo, oneCCL's selection for xccl).
pub(crate) struct OnLink<'a, L> {
    pub link: &'a L,
    pub all_reduce: AllReduceAlgo,
}

impl<L: Link, D: Payload> Exec<D> for OnLink<'_, L> {
    type Error = CollectiveError;
    fn members(&self) -> usize {
        self.link.size()
    }
    fn me(&self) -> usize {
        self.link.rank()
    }
    async fn all_reduce(&self, t: &mut Tensor<D>, op: ReduceOp) -> Result<(), CollectiveError> {
        let l = self.link;
        match &self.all_reduce {
            AllReduceAlgo::Ring => algo::all_reduce(l, t, op).await,
            AllReduceAlgo::Nreduce => algo::all_reduce_nreduce(l, t, op).await,
            AllReduceAlgo::RecursiveDoubling => algo::all_reduce_recursive_doubling(l, t, op).await,
            AllReduceAlgo::Topo(layout, scale_out) => {
                algo::all_reduce_topo(l, t, op, layout, *scale_out).await
            }
        }
    }
    async fn reduce(
        &self,
        t: &mut Tensor<D>,
        op: ReduceOp,
        root: usize,
    ) -> Result<(), CollectiveError> {
        algo::reduce(self.link, t, op, root).await
    }
    async fn broadcast(&self, t: &mut Tensor<D>, root: usize) -> Result<(), CollectiveError> {
        algo::broadcast(self.link, t, root).await
    }
    async fn all_gather(&self, t: &Tensor<D>) -> Result<Vec<Tensor<D>>, CollectiveError> {
        algo::all_gather(self.link, t).await
    }
    async fn gather(
        &self,
        t: &Tensor<D>,
        root: usize,
    ) -> Result<Option<Vec<Tensor<D>>>, CollectiveError> {
        algo::gather(self.link, t, root).await
    }
    async fn scatter(
        &self,
        parts: Option<Vec<Tensor<D>>>,
        like: &Tensor<D>,
        root: usize,
    ) -> Result<Tensor<D>, CollectiveError> {
        algo::scatter(self.link, parts, like, root).await
    }
    async fn reduce_scatter(
        &self,
        input: &Tensor<D>,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor<D>, CollectiveError> {
        algo::reduce_scatter(self.link, input, op, out_shape).await
    }
    async fn all_to_all(
        &self,
        _dtype: DType,
        sends: Vec<D>,
        recv_lens: &[usize],
    ) -> Result<Vec<D>, CollectiveError> {
        algo::all_to_all(self.link, sends, recv_lens).await
    }
    async fn barrier(&self) -> Result<(), CollectiveError> {
        algo::barrier(self.link).await
    }
}

/// all_gather of `count` concatenated inputs: reorder member-major parts to input-major
/// (`[k][member][element]`), the layout of the coalesced ops' output lists.
fn regroup<D: Payload>(parts: &[Tensor<D>], count: usize, input: &Tensor<D>) -> Tensor<D> {
    if count == 1 {
        return Tensor::concat(parts);
    }
    let per = input.data.len() / count;
    let pieces: Vec<D> = (0..count)
        .flat_map(|k| {
            parts
                .iter()
                .map(move |p| p.data.slice(k * per..(k + 1) * per))
        })
        .collect();
    let data = D::concat(&pieces);
    Tensor {
        dtype: input.dtype,
        shape: vec![data.len() / input.dtype.size_bytes()],
        data,
    }
}

/// `t` cut into `n` tensors of `shape`.
fn split_even<D: Payload>(t: &Tensor<D>, n: usize, shape: &[usize]) -> Vec<Tensor<D>> {
    let len = t.data.len() / n.max(1);
    (0..n)
        .map(|r| Tensor {
            dtype: t.dtype,
            shape: shape.to_vec(),
            data: t.data.slice(r * len..(r + 1) * len),
        })
        .collect()
}
