//! The executor of gloo groups: a collective call's primitive operations run by gloo's own
//! algorithms (algo/gloo), so a gloo group sends, receives and waits in gloo's order. Kept
//! apart from coll.rs, whose executor runs core's generic algorithms for the other backends.

use super::coll::Exec;
use crate::algo::{self, CollectiveError, Link};
use crate::dtype::DType;
use crate::payload::Payload;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;

/// gloo's own algorithms over a transport (algo/gloo): what a gloo group runs, in gloo's
/// order of sends, receives and waits.
pub(crate) struct OnGloo<'a, L>(pub &'a L);

impl<L: Link, D: Payload> Exec<D> for OnGloo<'_, L> {
    type Error = CollectiveError;
    fn members(&self) -> usize {
        self.0.size()
    }
    fn me(&self) -> usize {
        self.0.rank()
    }
    async fn all_reduce(&self, t: &mut Tensor<D>, op: ReduceOp) -> Result<(), CollectiveError> {
        algo::gloo::all_reduce(self.0, t, op).await
    }
    async fn reduce(
        &self,
        t: &mut Tensor<D>,
        op: ReduceOp,
        root: usize,
    ) -> Result<(), CollectiveError> {
        algo::gloo::reduce(self.0, t, op, root).await
    }
    async fn broadcast(&self, t: &mut Tensor<D>, root: usize) -> Result<(), CollectiveError> {
        algo::gloo::broadcast(self.0, t, root).await
    }
    async fn all_gather(&self, t: &Tensor<D>) -> Result<Vec<Tensor<D>>, CollectiveError> {
        algo::gloo::all_gather(self.0, t).await
    }
    async fn gather(
        &self,
        t: &Tensor<D>,
        root: usize,
    ) -> Result<Option<Vec<Tensor<D>>>, CollectiveError> {
        algo::gloo::gather(self.0, t, root).await
    }
    async fn scatter(
        &self,
        parts: Option<Vec<Tensor<D>>>,
        like: &Tensor<D>,
        root: usize,
    ) -> Result<Tensor<D>, CollectiveError> {
        algo::gloo::scatter(self.0, parts, like, root).await
    }
    /// ProcessGroupGloo::reduce_scatter_tensor_coalesced: an all-reduce of a copy of the
    /// input, then this member's chunk of it.
    async fn reduce_scatter(
        &self,
        input: &Tensor<D>,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor<D>, CollectiveError> {
        let mut all = input.clone();
        algo::gloo::all_reduce(self.0, &mut all, op).await?;
        let bytes = out_shape.iter().product::<usize>() * input.dtype.size_bytes();
        let end = ((self.0.rank() + 1) * bytes).min(all.data.len());
        Ok(Tensor {
            dtype: input.dtype,
            shape: out_shape.to_vec(),
            data: all.data.slice((self.0.rank() * bytes).min(end)..end),
        })
    }
    /// ProcessGroupGloo::reduce_scatter (the list form): each member's input all-reduced as a
    /// call of its own, in member order; this member keeps its own.
    async fn reduce_scatter_per_member(
        &self,
        input: &Tensor<D>,
        op: ReduceOp,
        out_shape: &[usize],
    ) -> Result<Tensor<D>, CollectiveError> {
        let (n, me) = (self.0.size(), self.0.rank());
        let bytes = out_shape.iter().product::<usize>() * input.dtype.size_bytes();
        let mut mine = None;
        for k in 0..n {
            if k > 0 {
                self.0.next_call();
            }
            let at = (k * bytes).min(input.data.len())..((k + 1) * bytes).min(input.data.len());
            let mut part = Tensor {
                dtype: input.dtype,
                shape: out_shape.to_vec(),
                data: input.data.slice(at),
            };
            algo::gloo::all_reduce(self.0, &mut part, op).await?;
            if k == me {
                mine = Some(part);
            }
        }
        Ok(mine.expect("a member keeps its part"))
    }
    async fn all_to_all(
        &self,
        _dtype: DType,
        sends: Vec<D>,
        recv_lens: &[usize],
    ) -> Result<Vec<D>, CollectiveError> {
        algo::gloo::all_to_all(self.0, sends, recv_lens).await
    }
    async fn barrier(&self) -> Result<(), CollectiveError> {
        algo::gloo::barrier(self.0).await
    }
}
