//! How a collective step becomes a call on this rank: the shape of its input buffer, its
//! all_to_all split sizes (checked as c10d checks them) and the algorithm it runs.

use super::fill::Fill;
use super::{Algo, Coll};
use crate::c10d::collective::CollOp;
use crate::c10d::error::{self, C10dError};
use crate::payload::Payload;
use crate::runtime::reuse::{Lent, Reuse};
use crate::scenario::{limits, CollStep, Splits};
use crate::tensor::Tensor;
use std::cell::RefCell;

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

/// all_to_all split sizes on this rank (rows per member), checked like c10d does, and against
/// scen's limits: this rank's tensors per rank, and, with real payloads (`room_bytes`), the
/// same held by each of the `world` ranks against the room scen's memory budget leaves for
/// tensors (formulas are not bounded when the scenario loads, and an uneven exchange at 4096
/// ranks exhausted the memory `scen check` had accepted).
pub(crate) fn eval_splits(
    c: &CollStep,
    members: usize,
    world: usize,
    room_bytes: Option<u64>,
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
    let mut held = 0u64;
    for (what, s) in [("input_split_sizes", &i), ("output_split_sizes", &o)] {
        let rows = s.iter().fold(0u64, |a, x| a.saturating_add(*x as u64));
        let bytes = rows.saturating_mul(row).saturating_mul(esz);
        if bytes > limits::MAX_TENSOR_BYTES_PER_RANK {
            return Err(error::limit(format!(
                "{what} make a {} tensor on this rank, over scen's limit of {} per rank",
                limits::human_bytes(bytes),
                limits::human_bytes(limits::MAX_TENSOR_BYTES_PER_RANK)
            )));
        }
        held = held.saturating_add(bytes);
    }
    let total = held.saturating_mul(world as u64);
    if let Some(room) = room_bytes.filter(|r| total > *r) {
        return Err(error::limit(format!(
            "input_split_sizes and output_split_sizes make {} of tensors on this rank: {} if each \
             of the {world} ranks holds as much, over the {} over all ranks scen's memory budget \
             leaves for tensors in this world (`[sim] payloads = \"symbolic\"` lifts it when \
             no step checks values)",
            limits::human_bytes(held),
            limits::human_bytes(total),
            limits::human_bytes(room)
        )));
    }
    Ok(Some((i, o)))
}

/// The call's input buffer on this rank (real values or symbolic), the algorithm to run on it
/// and, when the buffer is one the rank keeps (`reuse`), the token to give it back with.
pub(crate) fn build<D: Fill>(
    c: &CollStep,
    call: &CallShape,
    var: &dyn Fn(&str) -> f64,
    reuse: Option<&RefCell<Reuse>>,
) -> Res<(Tensor<D>, Coll, Option<Lent>)> {
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
    let (t, lent) = D::fill_reusing(&c.tensor, shape, per_tensor, var, reuse);
    let algo = algo_for(c, call, &t)?;
    let coll = Coll {
        name: c.op.name(),
        torch_op: c.op.torch_op(),
        algo,
    };
    Ok((t, coll, lent))
}

/// The algorithm a step's op runs on this rank's input `t`.
fn algo_for<D: Payload>(c: &CollStep, call: &CallShape, t: &Tensor<D>) -> Res<Algo> {
    let n = call.members;
    let root = call.root.unwrap_or(0);
    Ok(match c.op {
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
            per_member: c.op == CollOp::ReduceScatter,
        },
        CollOp::ReduceScatterTensorCoalesced => Algo::ReduceScatter {
            op: c.reduce_op,
            count: c.count,
            out_shape: c.tensor.shape.clone(),
            per_member: false,
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
    })
}
