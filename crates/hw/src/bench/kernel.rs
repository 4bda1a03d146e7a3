//! The timed loops on oneCCL. [`Kernel::run`] is scen's: buffers allocated once, one oneCCL call
//! per iteration, each result code checked through `Api::check`, nothing else. [`raw_loop`] is
//! the baseline the overhead is measured against: the bare C call in a loop, the op chosen
//! outside it, result codes OR-ed and looked at once at the end.

use oneccl_sys::{Api, OnecclComm, OnecclDataType, OnecclError, OnecclRedOp};
use scen_core::perf::BenchOp;
use std::ffi::c_void;
use std::ptr::null_mut;

/// One op at one size with its buffers.
pub struct Kernel<'a> {
    pub api: &'a Api,
    pub comm: OnecclComm,
    pub op: BenchOp,
    pub dtype: OnecclDataType,
    pub redop: OnecclRedOp,
    pub send: Vec<u8>,
    pub recv: Vec<u8>,
    pub send_count: usize,
    /// all_to_all's per-peer counts (onecclAllToAllV).
    pub a2a_counts: Vec<usize>,
}

impl<'a> Kernel<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        api: &'a Api,
        comm: OnecclComm,
        op: BenchOp,
        dtype: OnecclDataType,
        redop: OnecclRedOp,
        elem_bytes: usize,
        send_count: usize,
        ranks: usize,
    ) -> Kernel<'a> {
        let recv_count = op.recv_count(send_count, ranks);
        Kernel {
            api,
            comm,
            op,
            dtype,
            redop,
            send: vec![0u8; send_count * elem_bytes],
            recv: vec![0u8; recv_count * elem_bytes],
            send_count,
            a2a_counts: vec![send_count / ranks.max(1); ranks],
        }
    }

    /// `iters` calls, each checked.
    pub fn run(&mut self, iters: usize) -> Result<(), OnecclError> {
        for _ in 0..iters {
            let rc = self.call();
            self.api.check(self.op_call(), rc, self.comm)?;
        }
        Ok(())
    }

    fn op_call(&self) -> &'static str {
        match self.op {
            BenchOp::AllReduce => "onecclAllReduce",
            BenchOp::AllGather => "onecclAllGather",
            BenchOp::ReduceScatter => "onecclReduceScatter",
            BenchOp::AllToAll => "onecclAllToAllV",
            BenchOp::Broadcast => "onecclBroadcast",
            BenchOp::Reduce => "onecclReduce",
        }
    }

    fn call(&mut self) -> i32 {
        let (s, r) = (
            self.send.as_ptr() as *const c_void,
            self.recv.as_mut_ptr() as *mut c_void,
        );
        let (a, c, dt, n) = (self.api, self.comm, self.dtype, self.send_count);
        // SAFETY: the buffers hold send_count / recv_count elements of dt (sized in `new`) and
        // live across the blocking call; host memory with a NULL stream (the CPU plugin).
        unsafe {
            match self.op {
                BenchOp::AllReduce => {
                    (a.all_reduce)(s as *mut c_void, r, n, dt, self.redop, c, null_mut())
                }
                BenchOp::AllGather => (a.all_gather)(s, r, n, dt, c, null_mut()),
                BenchOp::ReduceScatter => {
                    let out = self.op.recv_count(n, self.a2a_counts.len());
                    (a.reduce_scatter)(s, r, out, dt, self.redop, c, null_mut())
                }
                BenchOp::AllToAll => (a.all_to_all_v)(
                    s,
                    self.a2a_counts.as_ptr(),
                    r,
                    self.a2a_counts.as_ptr(),
                    dt,
                    c,
                    null_mut(),
                ),
                BenchOp::Broadcast => (a.broadcast)(s, r, n, dt, 0, c, null_mut()),
                BenchOp::Reduce => (a.reduce)(s, r, n, dt, self.redop, 0, c, null_mut()),
            }
        }
    }
}

/// The baseline: `iters` bare calls of the kernel's op on its buffers. Returns the OR of the
/// result codes (0 when every call succeeded).
pub fn raw_loop(k: &mut Kernel<'_>, iters: usize) -> i32 {
    let (s, r) = (
        k.send.as_ptr() as *const c_void,
        k.recv.as_mut_ptr() as *mut c_void,
    );
    let (a, c, dt, n, rop) = (k.api, k.comm, k.dtype, k.send_count, k.redop);
    let counts = k.a2a_counts.as_ptr();
    let rs_out = k.op.recv_count(n, k.a2a_counts.len());
    let mut rc = 0;
    // SAFETY: as in Kernel::call.
    unsafe {
        match k.op {
            BenchOp::AllReduce => {
                for _ in 0..iters {
                    rc |= (a.all_reduce)(s as *mut c_void, r, n, dt, rop, c, null_mut());
                }
            }
            BenchOp::AllGather => {
                for _ in 0..iters {
                    rc |= (a.all_gather)(s, r, n, dt, c, null_mut());
                }
            }
            BenchOp::ReduceScatter => {
                for _ in 0..iters {
                    rc |= (a.reduce_scatter)(s, r, rs_out, dt, rop, c, null_mut());
                }
            }
            BenchOp::AllToAll => {
                for _ in 0..iters {
                    rc |= (a.all_to_all_v)(s, counts, r, counts, dt, c, null_mut());
                }
            }
            BenchOp::Broadcast => {
                for _ in 0..iters {
                    rc |= (a.broadcast)(s, r, n, dt, 0, c, null_mut());
                }
            }
            BenchOp::Reduce => {
                for _ in 0..iters {
                    rc |= (a.reduce)(s, r, n, dt, rop, 0, c, null_mut());
                }
            }
        }
    }
    rc
}
