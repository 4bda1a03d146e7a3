//! One collective call as a rank runs it: the step's tensors laid out as one input buffer, the
//! algorithm to run on it, and the variables an `expect` formula sees for each output element.
//!
//! Adding a collective means a row in c10d/collective.rs and an arm here; the rank interpreter
//! (rank.rs) only resolves the group, checks the backend's rules and runs the call.

use crate::algo::{self, CollectiveError, Link};
use crate::c10d::ccl_env::AllReduceAlgo;
use crate::c10d::collective::{CollOp, Layout};
use crate::c10d::error::{self, C10dError};
use crate::dtype::DType;
use crate::payload::{Payload, Symbolic};
use crate::probe::Probe;
use crate::reduce::ReduceOp;
use crate::scenario::{CollStep, Splits, TensorSpec};
use crate::tensor::Tensor;
use crate::trace::{Event, Wait};
use std::cell::RefCell;
use std::rc::Rc;

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
    ReduceScatter {
        op: ReduceOp,
        count: usize,
        out_shape: Vec<usize>,
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
            // ProcessGroupGloo's reduce_scatter is an all-reduce of a copy, then the chunk.
            Algo::ReduceScatter { .. } => "allreduce",
            Algo::AllToAll { .. } => "alltoall",
            Algo::Barrier => "barrier",
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
            Algo::Scatter { root, out_shape } => {
                let n = x.members();
                let numel: usize = out_shape.iter().product();
                let bytes = numel * t.dtype.size_bytes();
                // The output passed: zeros on the root, elsewhere the program's own tensor
                // (bytes past a shorter chunk keep their values: gloo fills the posted buffer).
                let mine = x.me() != *root && t.data.len() >= bytes;
                let data = mine.then(|| t.data.slice(0..bytes));
                let data = data.unwrap_or_else(|| D::zeros(bytes));
                let (dtype, shape) = (t.dtype, out_shape.clone());
                let like = Tensor { dtype, shape, data };
                let parts = (x.me() == *root).then(|| split_even(t, n, out_shape));
                x.scatter(parts, &like, *root).await.map(Some)
            }
            Algo::ReduceScatter {
                op,
                count,
                out_shape,
            } => {
                let n = x.members();
                let m: usize = out_shape.iter().product();
                let w = t.dtype.size_bytes();
                let mut outs = Vec::with_capacity(*count);
                for k in 0..*count {
                    let input = Tensor {
                        dtype: t.dtype,
                        shape: vec![n * m],
                        data: t.data.slice(k * n * m * w..(k + 1) * n * m * w),
                    };
                    outs.push(x.reduce_scatter(&input, *op, out_shape).await?);
                }
                Ok(Some(if *count == 1 {
                    outs.pop().expect("one")
                } else {
                    Tensor::concat(&outs)
                }))
            }
            Algo::AllToAll {
                send_rows,
                recv_rows,
                row_elems,
            } => {
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
                Ok(Some(Tensor {
                    dtype: t.dtype,
                    shape,
                    data: D::concat(&got),
                }))
            }
            Algo::Barrier => x.barrier().await.map(|_| None),
        }
    }
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

/// `shape` with dim 0 multiplied by `n` (a scalar becomes `[n]`).
fn times(shape: &[usize], n: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    match s.first_mut() {
        Some(d) => *d *= n,
        None => s.push(n),
    }
    s
}

/// The shape of a step's input buffer on this rank and, for coalesced ops, how many tensors it
/// holds (the fill's `k`).
fn input_shape(
    op: CollOp,
    shape: &[usize],
    count: usize,
    members: usize,
    is_root: bool,
    send_rows: Option<usize>,
) -> Vec<usize> {
    let numel: usize = shape.iter().product();
    match op {
        CollOp::AllReduceCoalesced
        | CollOp::AllGatherCoalesced
        | CollOp::AllGatherIntoTensorCoalesced => {
            vec![count * numel]
        }
        CollOp::Scatter if is_root => times(shape, members),
        CollOp::ReduceScatter | CollOp::ReduceScatterTensor => times(shape, members),
        CollOp::ReduceScatterTensorCoalesced => vec![count * members * numel],
        CollOp::AllToAllSingle | CollOp::AllToAll => match send_rows {
            Some(rows) => {
                let mut s = vec![rows];
                s.extend_from_slice(shape);
                s
            }
            None => shape.to_vec(),
        },
        _ => shape.to_vec(),
    }
}

/// What a collective call's result check needs to know about the call.
#[derive(Clone)]
pub(crate) struct CallShape {
    pub members: usize,
    pub me: usize,
    pub root: Option<usize>,
    pub splits: Option<(Vec<usize>, Vec<usize>)>,
    /// An error the backend raises after the data moved (gloo's AVG division on bool).
    pub post_error: Option<C10dError>,
}

type Res<T> = Result<T, C10dError>;

/// all_to_all split sizes on this rank (rows per member), checked like c10d does.
pub(crate) fn eval_splits(
    c: &CollStep,
    members: usize,
    var: &dyn Fn(&str) -> f64,
) -> Res<Option<(Vec<usize>, Vec<usize>)>> {
    let Some((i, o)) = &c.splits else {
        return Ok(None);
    };
    let eval = |s: &Splits| -> Res<Vec<usize>> {
        match s {
            Splits::List(v) if v.len() == members => Ok(v.clone()),
            Splits::List(_) => Err(error::splits_not_group_size()),
            Splits::Expr(e) => Ok((0..members)
                .map(|j| {
                    e.eval(&|v| match v {
                        "j" => j as f64,
                        other => var(other),
                    })
                    .max(0.0) as usize
                })
                .collect()),
        }
    };
    let (i, o) = (eval(i)?, eval(o)?);
    let row: u64 = c.tensor.shape.iter().map(|d| *d as u64).product();
    let esz = c.tensor.dtype.size_bytes() as u64;
    for (what, s) in [("input_split_sizes", &i), ("output_split_sizes", &o)] {
        let rows = s.iter().fold(0u64, |a, x| a.saturating_add(*x as u64));
        let bytes = rows.saturating_mul(row).saturating_mul(esz);
        if bytes > crate::scenario::limits::MAX_TENSOR_BYTES_PER_RANK {
            return Err(error::limit(format!(
                "{what} {s:?} make a {} tensor on this rank, over scen's limit of {} per rank",
                crate::scenario::limits::human_bytes(bytes),
                crate::scenario::limits::human_bytes(
                    crate::scenario::limits::MAX_TENSOR_BYTES_PER_RANK
                )
            )));
        }
    }
    Ok(Some((i, o)))
}

/// The call's input buffer on this rank (real values or symbolic) and the algorithm to run on it.
pub(crate) fn build<D: Fill>(
    c: &CollStep,
    call: &CallShape,
    var: &dyn Fn(&str) -> f64,
) -> Res<(Tensor<D>, Coll)> {
    let n = call.members;
    let shape = input_shape(
        c.op,
        &c.tensor.shape,
        c.count,
        n,
        call.root == Some(call.me),
        call.splits.as_ref().map(|s| s.0.iter().sum()),
    );
    let per_tensor = if c.op.coalesced() {
        shape.iter().product::<usize>() / c.count
    } else {
        shape.iter().product()
    };
    let t = D::fill(&c.tensor, shape, per_tensor, var);
    let root = call.root.unwrap_or(0);
    let algo = match c.op {
        CollOp::AllReduce | CollOp::AllReduceCoalesced => Algo::AllReduce(c.reduce_op),
        CollOp::Reduce => Algo::Reduce(c.reduce_op, root),
        CollOp::Broadcast => Algo::Broadcast(root),
        CollOp::AllGather | CollOp::AllGatherIntoTensor => Algo::AllGather { count: 1 },
        CollOp::AllGatherCoalesced | CollOp::AllGatherIntoTensorCoalesced => {
            Algo::AllGather { count: c.count }
        }
        CollOp::Gather => Algo::Gather(root),
        CollOp::Scatter => Algo::Scatter {
            root,
            out_shape: c.tensor.shape.clone(),
        },
        CollOp::ReduceScatter | CollOp::ReduceScatterTensor => Algo::ReduceScatter {
            op: c.reduce_op,
            count: 1,
            out_shape: c.tensor.shape.clone(),
        },
        CollOp::ReduceScatterTensorCoalesced => Algo::ReduceScatter {
            op: c.reduce_op,
            count: c.count,
            out_shape: c.tensor.shape.clone(),
        },
        CollOp::AllToAllSingle | CollOp::AllToAll => match &call.splits {
            Some((send_rows, recv_rows)) => Algo::AllToAll {
                send_rows: send_rows.clone(),
                recv_rows: recv_rows.clone(),
                row_elems: c.tensor.shape.iter().product(),
            },
            None => {
                let rows = t.shape.first().copied().unwrap_or(1);
                if rows % n != 0 {
                    return Err(error::dim0_not_divisible());
                }
                Algo::AllToAll {
                    send_rows: vec![rows / n; n],
                    recv_rows: vec![rows / n; n],
                    row_elems: t.shape.iter().skip(1).product(),
                }
            }
        },
    };
    let coll = Coll {
        name: c.op.name(),
        torch_op: c.op.torch_op(),
        algo,
    };
    Ok((t, coll))
}

/// The variables `expect` sees for each of the `total` output elements.
pub(crate) fn out_vars(c: &CollStep, call: &CallShape, total: usize) -> OutVars {
    let elems: usize = c.tensor.shape.iter().product();
    match c.op.layout() {
        Layout::Flat => OutVars::flat(total),
        Layout::Tensors => OutVars::new(Layout::Tensors, &[], elems, total),
        Layout::TensorChunks => OutVars::new(
            Layout::TensorChunks,
            &even_chunks(call.members, elems),
            call.members * elems,
            total,
        ),
        Layout::Chunks => {
            let chunks = match (&call.splits, c.op.splits()) {
                (Some((_, recv_rows)), _) => recv_rows.iter().map(|r| r * elems).collect(),
                (None, true) => even_chunks(call.members, total / call.members),
                (None, false) => even_chunks(call.members, elems),
            };
            OutVars::new(Layout::Chunks, &chunks, total, total)
        }
    }
}

/// A finished call's input (as left by in-place ops) and output, by payload kind.
pub(crate) enum Done {
    Values(Tensor, Option<Tensor>),
    Symbolic(Tensor<Symbolic>, Option<Tensor<Symbolic>>),
}

/// How a step's `fill` becomes a tensor's contents, and how a result is kept.
pub(crate) trait Fill: Payload {
    fn done(t: Tensor<Self>, out: Option<Tensor<Self>>) -> Done;
    /// The tensor as real bytes, for a device library (`None` when symbolic).
    fn values(t: &mut Tensor<Self>) -> Option<&mut Tensor>;
    fn values_ref(t: &Tensor<Self>) -> Option<&Tensor>;
    /// A result of real bytes as this kind (symbolic: their digest).
    fn from_values(t: Tensor) -> Tensor<Self>;

    /// A tensor of `shape` filled by `spec.fill`, element `i` of list tensor `k` of
    /// `per_tensor` elements.
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor<Self>;
}

impl Fill for Vec<u8> {
    fn done(t: Tensor, out: Option<Tensor>) -> Done {
        Done::Values(t, out)
    }
    fn values(t: &mut Tensor) -> Option<&mut Tensor> {
        Some(t)
    }
    fn values_ref(t: &Tensor) -> Option<&Tensor> {
        Some(t)
    }
    fn from_values(t: Tensor) -> Tensor {
        t
    }
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor {
        fill_tensor(spec, shape, per_tensor, var)
    }
}

/// Symbolic: no element is computed. The digest covers the dtype, the shape, the formula and
/// its value at the first and last element of the first and last list tensor, so ranks whose
/// fills differ (`rank + i`) start from different digests.
impl Fill for Symbolic {
    fn done(t: Tensor<Symbolic>, out: Option<Tensor<Symbolic>>) -> Done {
        Done::Symbolic(t, out)
    }
    fn values(_: &mut Tensor<Symbolic>) -> Option<&mut Tensor> {
        None
    }
    fn values_ref(_: &Tensor<Symbolic>) -> Option<&Tensor> {
        None
    }
    fn from_values(t: Tensor) -> Tensor<Symbolic> {
        let data = Symbolic::leaf(t.data.len(), t.digest());
        Tensor {
            dtype: t.dtype,
            shape: t.shape,
            data,
        }
    }
    fn fill(
        spec: &TensorSpec,
        shape: Vec<usize>,
        per_tensor: usize,
        var: &dyn Fn(&str) -> f64,
    ) -> Tensor<Symbolic> {
        let per = per_tensor.max(1);
        let numel: usize = shape.iter().product();
        let tensors = numel.div_ceil(per).max(1);
        let mut h = crate::trace::Fnv1a::default();
        h.write(spec.dtype.name().as_bytes());
        for d in &shape {
            h.write(&(*d as u64).to_le_bytes());
        }
        h.write(spec.fill.to_string().as_bytes());
        for k in [0, tensors - 1] {
            for i in [0, per - 1] {
                let v = spec.fill.eval(&|v| match v {
                    "i" => i as f64,
                    "n" => per as f64,
                    "k" => k as f64,
                    other => var(other),
                });
                h.write(&v.to_bits().to_le_bytes());
            }
        }
        let len = numel * spec.dtype.size_bytes();
        Tensor {
            dtype: spec.dtype,
            shape,
            data: Symbolic::leaf(len, h.0),
        }
    }
}

/// A tensor of `shape` filled by `spec.fill`, element `i` of list tensor `k` of
/// `per_tensor` elements.
fn fill_tensor(
    spec: &TensorSpec,
    shape: Vec<usize>,
    per_tensor: usize,
    var: &dyn Fn(&str) -> f64,
) -> Tensor {
    let per = per_tensor.max(1);
    if !spec.fill.uses("i") && !spec.fill.uses("k") {
        let v = spec.fill.eval(&|v| match v {
            "n" => per as f64,
            other => var(other),
        });
        return Tensor::filled(spec.dtype, shape, v);
    }
    Tensor::from_fn(spec.dtype, shape, |i| {
        spec.fill.eval(&|v| match v {
            "i" => (i % per) as f64,
            "n" => per as f64,
            "k" => (i / per) as f64,
            other => var(other),
        })
    })
}

/// Where output element `i` sits: the values of `k`, `chunk`, `j`, `i` and `n` for `expect`.
pub(crate) struct OutVars {
    layout: Layout,
    /// Element offsets where each member's chunk starts (Chunks/TensorChunks), plus the end.
    starts: Vec<usize>,
    /// Elements per tensor of a list (Tensors/TensorChunks).
    per_tensor: usize,
    total: usize,
    /// Further variables with one value for every element (batch_isend_irecv's `peer`, `k`).
    extra: Vec<(&'static str, f64)>,
}

impl OutVars {
    pub fn new(layout: Layout, chunk_elems: &[usize], per_tensor: usize, total: usize) -> OutVars {
        let mut starts = vec![0];
        for c in chunk_elems {
            starts.push(starts.last().expect("non-empty") + c);
        }
        OutVars {
            layout,
            starts,
            per_tensor: per_tensor.max(1),
            total,
            extra: Vec::new(),
        }
    }

    pub fn with(mut self, var: &'static str, v: f64) -> OutVars {
        self.extra.push((var, v));
        self
    }

    pub fn flat(total: usize) -> OutVars {
        OutVars::new(Layout::Flat, &[], total, total)
    }

    pub fn get(&self, i: usize, var: &str) -> Option<f64> {
        let (k, local, n) = match self.layout {
            Layout::Flat | Layout::Chunks => (0, i, self.total),
            Layout::Tensors | Layout::TensorChunks => {
                (i / self.per_tensor, i % self.per_tensor, self.per_tensor)
            }
        };
        let chunk_of = |x: usize| {
            let c = self.starts.partition_point(|s| *s <= x).saturating_sub(1);
            (c, x - self.starts[c.min(self.starts.len() - 1)])
        };
        if let Some((_, v)) = self.extra.iter().find(|(n, _)| *n == var) {
            return Some(*v);
        }
        Some(match var {
            "i" => local as f64,
            "n" => n as f64,
            "k" => k as f64,
            "chunk" => chunk_of(local).0 as f64,
            "j" => chunk_of(local).1 as f64,
            _ => return None,
        })
    }
}

/// `layout`'s chunk sizes for a gather-like output of `members` equal chunks of `elems`.
fn even_chunks(members: usize, elems: usize) -> Vec<usize> {
    vec![elems; members]
}

/// The probe an `async_op` call's task reports through: while the program runs on, the call's
/// blocked receives are not the rank's wait (the rank is busy elsewhere); once the program
/// reaches the `wait` step, they are, attributed to that step.
#[derive(Clone)]
pub(crate) struct AsyncProbe<P: Probe> {
    pub inner: P,
    pub state: Rc<RefCell<AsyncWait>>,
}

#[derive(Default)]
pub(crate) struct AsyncWait {
    /// The `wait` step the program is blocked in, if it is.
    pub waiting_step: Option<usize>,
    /// The call's latest wait record.
    pub last: Option<Wait>,
}

impl<P: Probe> AsyncProbe<P> {
    /// The program reached `wait` at `step`: the call's current wait becomes the rank's.
    pub fn start_waiting(&self, rank: usize, step: usize) {
        let mut s = self.state.borrow_mut();
        s.waiting_step = Some(step);
        let w = s.last.clone().map(|mut w| {
            w.step = step;
            w
        });
        drop(s);
        self.inner.set_wait(rank, w);
    }
}

impl<P: Probe> Probe for AsyncProbe<P> {
    fn event(&self, e: Event) {
        self.inner.event(e);
    }

    fn set_wait(&self, rank: usize, w: Option<Wait>) {
        let mut s = self.state.borrow_mut();
        s.last = w.clone();
        let Some(step) = s.waiting_step else { return };
        drop(s);
        self.inner.set_wait(
            rank,
            w.map(|mut w| {
                w.step = step;
                w
            }),
        );
    }

    fn call(&self, rec: &crate::diagnose::CallRecord) {
        self.inner.call(rec);
    }

    fn group(&self, rec: &crate::diagnose::GroupRecord) {
        self.inner.group(rec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_vars_locate_uneven_chunks_and_tensors() {
        let v = OutVars::new(Layout::Chunks, &[2, 0, 3], 5, 5);
        let at = |i, var| v.get(i, var).expect("known");
        assert_eq!((at(1, "chunk"), at(1, "j")), (0.0, 1.0));
        assert_eq!((at(2, "chunk"), at(2, "j")), (2.0, 0.0));
        assert_eq!((at(4, "chunk"), at(4, "j")), (2.0, 2.0));
        let v = OutVars::new(Layout::TensorChunks, &[2, 2], 4, 8);
        let at = |i, var| v.get(i, var).expect("known");
        assert_eq!(
            (at(5, "k"), at(5, "i"), at(5, "chunk"), at(5, "j")),
            (1.0, 1.0, 0.0, 1.0)
        );
        assert_eq!(at(7, "chunk"), 1.0);
    }
}
