//! The device collectives: what a runner supplies for xccl/nccl groups' communicators.
//!
//! The rank model (rank.rs) decides *when* a device communicator exists (lazily at a group's
//! first collective, R24/R38, its unique id published through the store under the group's key)
//! and *which* collective runs with which tensors; a [`DeviceComms`] only executes them. The
//! simulator passes none and gets core's own algorithms over the fabric (the library's
//! behaviour modelled: no peer-exit detection, no timeouts); the hardware mode passes real
//! oneCCL. One method per operation, so new collectives add a method here and one dispatch arm
//! in rank.rs.

use crate::c10d::error::C10dError;
use crate::dtype::DType;
use crate::reduce::ReduceOp;
use crate::tensor::Tensor;
use std::future::Future;
use std::pin::Pin;

/// A device operation's future (single-threaded: ranks run on a LocalSet).
pub type DeviceFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, C10dError>> + 'a>>;

/// One communicator as the rank model names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommRef {
    /// Unique within the rank process: `"<group name>/<device>"` or `"<group>/<device>:<a>:<b>"`
    /// for a p2p pair.
    pub id: String,
    /// Number of members.
    pub size: usize,
    /// This process's rank in the communicator (its position among the members).
    pub rank: usize,
}

/// How long a rank's process spent inside the device library (hardware mode's report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceBusy {
    /// The library's name (`oneCCL`).
    pub library: String,
    /// Microseconds inside the library's calls (communicator creation included).
    pub inside_us: u64,
    /// Microseconds since the library was loaded (about the process's life so far).
    pub of_us: u64,
    /// Calls made.
    pub calls: u64,
}

/// Device collectives for one rank process. Peers are communicator ranks.
pub trait DeviceComms {
    /// What the runner puts in the verdict's notes (e.g. "xpu tensors are host buffers on
    /// oneCCL's CPU plugin").
    fn describe(&self) -> String;
    /// Called on the communicator's first member only; the bytes go to the store.
    fn unique_id(&self) -> Result<Vec<u8>, C10dError>;
    /// Joins the communicator: every member with the same id (blocks until all have joined).
    fn init<'a>(&'a self, comm: &'a CommRef, unique_id: &'a [u8]) -> DeviceFuture<'a, ()>;
    fn all_reduce<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        op: ReduceOp,
    ) -> DeviceFuture<'a, ()>;
    /// all_reduce out of place: `out` (as long as `input`) gets the result and `input` is left
    /// as it was (a buffer the rank keeps across steps); both come back. By default a copy,
    /// then [`DeviceComms::all_reduce`] in place.
    fn all_reduce_out<'a>(
        &'a self,
        comm: &'a CommRef,
        dtype: DType,
        input: Vec<u8>,
        mut out: Vec<u8>,
        op: ReduceOp,
    ) -> DeviceFuture<'a, (Vec<u8>, Vec<u8>)> {
        Box::pin(async move {
            out.clear();
            out.extend_from_slice(&input);
            let n = out.len() / dtype.size_bytes().max(1);
            let mut t = Tensor {
                dtype,
                shape: vec![n],
                data: out,
            };
            self.all_reduce(comm, &mut t, op).await?;
            Ok((input, t.data))
        })
    }
    fn broadcast<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        root: usize,
    ) -> DeviceFuture<'a, ()>;
    /// Returns one part per member, in communicator-rank order.
    fn all_gather<'a>(&'a self, comm: &'a CommRef, t: &'a Tensor) -> DeviceFuture<'a, Vec<Tensor>>;
    fn send<'a>(&'a self, comm: &'a CommRef, t: &'a Tensor, peer: usize) -> DeviceFuture<'a, ()>;
    fn recv<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        peer: usize,
    ) -> DeviceFuture<'a, ()>;
    fn barrier<'a>(&'a self, comm: &'a CommRef) -> DeviceFuture<'a, ()>;
    /// Reduce to `root`: `t` holds the result on the root, is unchanged elsewhere.
    fn reduce<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        op: ReduceOp,
        root: usize,
    ) -> DeviceFuture<'a, ()> {
        let _ = (t, op, root);
        unbound(comm, "reduce")
    }
    /// Reduce-scatter of `input` (members x out elements): this member's reduced chunk.
    fn reduce_scatter<'a>(
        &'a self,
        comm: &'a CommRef,
        input: &'a Tensor,
        op: ReduceOp,
        out_shape: &'a [usize],
    ) -> DeviceFuture<'a, Tensor> {
        let _ = (input, op, out_shape);
        unbound(comm, "reduce_scatter")
    }
    /// All-to-all with per-member byte counts: `sends[k]` goes to member k; returns what each
    /// member sent here (`recv_lens[k]` bytes from member k).
    fn all_to_all<'a>(
        &'a self,
        comm: &'a CommRef,
        dtype: crate::dtype::DType,
        sends: Vec<Vec<u8>>,
        recv_lens: &'a [usize],
    ) -> DeviceFuture<'a, Vec<Vec<u8>>> {
        let _ = (dtype, sends, recv_lens);
        unbound(comm, "all_to_all")
    }
    /// The rank's program has ended and its process is about to exit (its store server and
    /// sockets still up): release every communicator. A runner may also take the time a real
    /// process's teardown takes here.
    fn shutdown(&self) -> DeviceFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    /// The time spent inside the library so far, where the runner measures it.
    fn busy(&self) -> Option<DeviceBusy> {
        None
    }
}

/// The error of an operation a [`DeviceComms`] has no binding for.
fn unbound<'a, T: 'a>(comm: &CommRef, op: &str) -> DeviceFuture<'a, T> {
    let e = crate::c10d::error::no_device_binding(&format!("{op} on communicator {}", comm.id));
    Box::pin(async move { Err(e) })
}
