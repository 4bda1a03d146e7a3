//! Device groups on real oneCCL: [`DeviceComms`] over the C API, one rank per process.
//!
//! oneCCL calls block (and never time out), so they run on one dedicated worker thread that owns
//! the library and every communicator; the rank's async side (its TCPStore server, gloo groups,
//! the probe) keeps running while a collective is in flight. Buffers are host memory with
//! `stream = NULL` (the CPU plugin); xpu tensors of the scenario stand in as host buffers unless
//! Level Zero finds devices (see [`Backing`]).

use oneccl_sys::{self as sys, Api, OnecclComm, OnecclUniqueId};
use scen_core::c10d::error::{self, C10dError};
use scen_core::dtype::DType;
use scen_core::reduce::{finish_avg, ReduceOp};
use scen_core::runtime::device::{CommRef, DeviceBusy, DeviceComms, DeviceFuture};
use scen_core::tensor::Tensor;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// What device memory is in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backing {
    /// No Level Zero device: host buffers through the CPU plugin stand in for xpu memory.
    HostForXpu { reason: String },
    /// Level Zero lists devices; this build still passes host buffers (no SYCL queue).
    /// `selected`: the device this rank would use (after ZE_AFFINITY_MASK, by LOCAL_RANK).
    HostWithDevices {
        devices: Vec<String>,
        selected: String,
    },
}

struct SendComm(OnecclComm);
// SAFETY: a oneCCL communicator is only ever used from the worker thread that created it.
unsafe impl Send for SendComm {}

struct Worker {
    api: Api,
    comms: BTreeMap<String, SendComm>,
    busy: Arc<Busy>,
}

/// Time inside the library's calls, measured on the worker around each C call.
#[derive(Default)]
struct Busy {
    ns: AtomicU64,
    calls: AtomicU64,
}

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// The rank process's oneCCL (or why there is none: then every device operation fails with it).
pub struct OneCcl {
    jobs: Option<mpsc::Sender<Job>>,
    busy: Arc<Busy>,
    started: Instant,
    pub unavailable: Option<String>,
    pub version: i32,
    pub path: String,
    pub backing: Backing,
}

fn to_c10d(e: sys::OnecclError) -> C10dError {
    error::runtime(format!("oneCCL: {e}"))
}

pub(crate) fn dtype(d: DType) -> sys::OnecclDataType {
    match d {
        DType::F32 => sys::ONECCL_FLOAT32,
        DType::BF16 => sys::ONECCL_BFLOAT16,
        DType::F16 => sys::ONECCL_FLOAT16,
        DType::F64 => sys::ONECCL_FLOAT64,
        DType::I64 => sys::ONECCL_INT64,
        DType::I32 => sys::ONECCL_INT32,
        DType::I8 => sys::ONECCL_INT8,
        DType::U8 | DType::Bool => sys::ONECCL_UINT8,
    }
}

/// The oneCCL op for `op` on `d`. Bools travel as uint8 0/1, where SUM/MAX is logical or and
/// PRODUCT/MIN logical and (torch's bool reduction; a uint8 SUM would give 2). oneCCL has no
/// bitwise ops (c10d's XCCL refuses them before they get here, R36).
pub(crate) fn red_op(d: DType, op: ReduceOp) -> Result<sys::OnecclRedOp, C10dError> {
    let bitwise = || error::runtime(format!("oneCCL has no {} reduction", op.name()));
    if d == DType::Bool {
        return match op {
            ReduceOp::Sum | ReduceOp::Max | ReduceOp::Avg => Ok(sys::ONECCL_MAX),
            ReduceOp::Product | ReduceOp::Min => Ok(sys::ONECCL_MIN),
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => Err(bitwise()),
        };
    }
    match op {
        ReduceOp::Sum | ReduceOp::Avg => Ok(sys::ONECCL_SUM),
        ReduceOp::Product => Ok(sys::ONECCL_PROD),
        ReduceOp::Max => Ok(sys::ONECCL_MAX),
        ReduceOp::Min => Ok(sys::ONECCL_MIN),
        ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => Err(bitwise()),
    }
}

impl OneCcl {
    /// Loads libccl.so.2 on a new worker thread.
    pub fn start(backing: Backing) -> OneCcl {
        let started = Instant::now();
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let busy = Arc::new(Busy::default());
        let worker_busy = busy.clone();
        let spawned = std::thread::Builder::new()
            .name("oneccl".into())
            .spawn(move || {
                let api = match Api::load() {
                    Ok(a) => a,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((api.version().unwrap_or(0), api.path.clone())));
                let mut w = Worker {
                    api,
                    comms: BTreeMap::new(),
                    busy: worker_busy,
                };
                while let Ok(job) = rx.recv() {
                    job(&mut w);
                }
            });
        let ready = match spawned {
            Ok(_) => ready_rx
                .recv()
                .unwrap_or_else(|_| Err("the oneCCL worker thread died".into())),
            Err(e) => Err(format!("cannot start the oneCCL worker thread: {e}")),
        };
        match ready {
            Ok((version, path)) => OneCcl {
                jobs: Some(jobs),
                busy,
                started,
                unavailable: None,
                version,
                path,
                backing,
            },
            Err(e) => Self::unavailable(e, backing),
        }
    }

    /// No oneCCL: device operations fail with `why`.
    pub fn unavailable(why: String, backing: Backing) -> OneCcl {
        OneCcl {
            jobs: None,
            busy: Arc::default(),
            started: Instant::now(),
            unavailable: Some(why),
            version: 0,
            path: String::new(),
            backing,
        }
    }

    fn sender(&self) -> Result<&mpsc::Sender<Job>, C10dError> {
        match (&self.jobs, &self.unavailable) {
            (Some(j), _) => Ok(j),
            (None, why) => Err(error::runtime(why.clone().unwrap_or_default())),
        }
    }

    /// Runs `f` on the worker and waits for it without blocking the rank's other tasks.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, C10dError> + Send + 'static,
    ) -> Result<T, C10dError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |w| {
            let _ = tx.send(f(w));
        });
        self.sender()?
            .send(job)
            .map_err(|_| error::runtime("the oneCCL worker thread is gone"))?;
        rx.await
            .map_err(|_| error::runtime("the oneCCL worker thread is gone"))?
    }

    fn call_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> Result<T, C10dError> + Send + 'static,
    ) -> Result<T, C10dError> {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |w| {
            let _ = tx.send(f(w));
        });
        self.sender()?
            .send(job)
            .map_err(|_| error::runtime("the oneCCL worker thread is gone"))?;
        rx.recv()
            .map_err(|_| error::runtime("the oneCCL worker thread is gone"))?
    }
}

impl Worker {
    /// Runs one C call, counting its time as inside the library.
    fn timed<T>(&self, f: impl FnOnce() -> T) -> T {
        let t0 = Instant::now();
        let r = f();
        let ns = t0.elapsed().as_nanos() as u64;
        self.busy.ns.fetch_add(ns, Ordering::Relaxed);
        self.busy.calls.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn comm(&self, id: &str) -> Result<OnecclComm, C10dError> {
        self.comms
            .get(id)
            .map(|c| c.0)
            .ok_or_else(|| error::runtime(format!("oneCCL communicator {id} was never created")))
    }
}

impl DeviceComms for OneCcl {
    fn describe(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("device groups had no oneCCL: {why}");
        }
        let v = self.version;
        let lib = format!(
            "oneCCL {}.{}.{} ({})",
            v / 10000,
            (v / 100) % 100,
            v % 100,
            self.path
        );
        match &self.backing {
            Backing::HostForXpu { reason } => format!(
                "device groups ran on {lib} with its CPU plugin: the scenario's device (xpu) tensors were host buffers ({reason})"
            ),
            Backing::HostWithDevices { devices, selected } => format!(
                "device groups ran on {lib} with host buffers, not device memory (this build has no SYCL queue); Level Zero devices: {}; this rank's device: {selected}",
                devices.join(", ")
            ),
        }
    }

    fn unique_id(&self) -> Result<Vec<u8>, C10dError> {
        self.call_blocking(|w| {
            let mut id = OnecclUniqueId::zeroed();
            // SAFETY: a valid out pointer to a 4096-byte id.
            let rc = w.timed(|| unsafe { (w.api.get_unique_id)(&mut id) });
            w.api
                .check("onecclGetUniqueId", rc, std::ptr::null_mut())
                .map_err(to_c10d)?;
            if id.data[0] == 0 {
                return Err(error::runtime(
                    "oneCCL: onecclGetUniqueId returned an empty id (no usable interface for its KVS; set CCL_KVS_IFACE=lo)",
                ));
            }
            Ok(id.data.to_vec())
        })
    }

    fn init<'a>(&'a self, comm: &'a CommRef, unique_id: &'a [u8]) -> DeviceFuture<'a, ()> {
        let (id_s, size, rank) = (comm.id.clone(), comm.size, comm.rank);
        let mut id = OnecclUniqueId::zeroed();
        let n = unique_id.len().min(sys::UNIQUE_ID_BYTES);
        id.data[..n].copy_from_slice(&unique_id[..n]);
        Box::pin(self.call(move |w| {
            let mut c: OnecclComm = std::ptr::null_mut();
            // SAFETY: valid out pointer; the id is passed by value as the C API wants.
            let rc = w.timed(|| unsafe { (w.api.comm_init_rank)(&mut c, size, id, rank as i32) });
            w.api
                .check("onecclCommInitRank", rc, std::ptr::null_mut())
                .map_err(to_c10d)?;
            w.comms.insert(id_s, SendComm(c));
            Ok(())
        }))
    }

    fn all_reduce<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        op: ReduceOp,
    ) -> DeviceFuture<'a, ()> {
        let (id, size) = (comm.id.clone(), comm.size);
        Box::pin(async move {
            let rop = red_op(t.dtype, op)?;
            let (dt, n, mut buf) = (t.dtype, t.numel(), std::mem::take(&mut t.data));
            let r = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let p = buf.as_mut_ptr() as *mut c_void;
                    // SAFETY: in-place on a live buffer of n elements; host memory, NULL stream.
                    let rc = w.timed(|| unsafe {
                        (w.api.all_reduce)(p, p, n, dtype(dt), rop, c, std::ptr::null_mut())
                    });
                    w.api.check("onecclAllReduce", rc, c).map_err(to_c10d)?;
                    Ok(buf)
                })
                .await;
            let mut buf = r?;
            if op == ReduceOp::Avg {
                // The CPU plugin rejects onecclAvg: sum, then divide (what c10d's xccl does too).
                finish_avg(dt, &mut buf, size);
            }
            t.data = buf;
            Ok(())
        })
    }

    /// Out of place, as a bare loop calls it: `input` is only read.
    fn all_reduce_out<'a>(
        &'a self,
        comm: &'a CommRef,
        dt: DType,
        input: Vec<u8>,
        mut out: Vec<u8>,
        op: ReduceOp,
    ) -> DeviceFuture<'a, (Vec<u8>, Vec<u8>)> {
        let (id, size) = (comm.id.clone(), comm.size);
        Box::pin(async move {
            let rop = red_op(dt, op)?;
            let n = input.len() / dt.size_bytes();
            out.resize(input.len(), 0);
            let (input, mut out) = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let (s, r) = (
                        input.as_ptr() as *mut c_void,
                        out.as_mut_ptr() as *mut c_void,
                    );
                    // SAFETY: both buffers hold n elements and live through the blocking call;
                    // oneCCL only reads the send buffer. Host memory, NULL stream.
                    let rc = w.timed(|| unsafe {
                        (w.api.all_reduce)(s, r, n, dtype(dt), rop, c, std::ptr::null_mut())
                    });
                    w.api.check("onecclAllReduce", rc, c).map_err(to_c10d)?;
                    Ok((input, out))
                })
                .await?;
            if op == ReduceOp::Avg {
                finish_avg(dt, &mut out, size);
            }
            Ok((input, out))
        })
    }

    fn busy(&self) -> Option<DeviceBusy> {
        self.jobs.as_ref()?;
        Some(DeviceBusy {
            library: "oneCCL".into(),
            inside_us: self.busy.ns.load(Ordering::Relaxed) / 1000,
            of_us: self.started.elapsed().as_micros() as u64,
            calls: self.busy.calls.load(Ordering::Relaxed),
        })
    }

    fn broadcast<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        root: usize,
    ) -> DeviceFuture<'a, ()> {
        let id = comm.id.clone();
        Box::pin(async move {
            let (dt, n, mut buf) = (t.dtype, t.numel(), std::mem::take(&mut t.data));
            t.data = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let p = buf.as_mut_ptr() as *mut c_void;
                    // SAFETY: in-place broadcast of n elements of a live host buffer.
                    let rc = w.timed(|| unsafe {
                        (w.api.broadcast)(p, p, n, dtype(dt), root as i32, c, std::ptr::null_mut())
                    });
                    w.api.check("onecclBroadcast", rc, c).map_err(to_c10d)?;
                    Ok(buf)
                })
                .await?;
            Ok(())
        })
    }

    fn all_gather<'a>(&'a self, comm: &'a CommRef, t: &'a Tensor) -> DeviceFuture<'a, Vec<Tensor>> {
        let (id, size) = (comm.id.clone(), comm.size);
        Box::pin(async move {
            let (dt, n, send) = (t.dtype, t.numel(), t.data.clone());
            let out = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let mut recv = vec![0u8; send.len() * size];
                    // SAFETY: recv holds size * n elements; both buffers live through the call.
                    let rc = w.timed(|| unsafe {
                        (w.api.all_gather)(
                            send.as_ptr() as *const c_void,
                            recv.as_mut_ptr() as *mut c_void,
                            n,
                            dtype(dt),
                            c,
                            std::ptr::null_mut(),
                        )
                    });
                    w.api.check("onecclAllGather", rc, c).map_err(to_c10d)?;
                    Ok(recv)
                })
                .await?;
            let part = t.data.len();
            Ok((0..size)
                .map(|i| Tensor {
                    dtype: dt,
                    shape: t.shape.clone(),
                    data: out[i * part..(i + 1) * part].to_vec(),
                })
                .collect())
        })
    }

    fn send<'a>(&'a self, comm: &'a CommRef, t: &'a Tensor, peer: usize) -> DeviceFuture<'a, ()> {
        let id = comm.id.clone();
        let (dt, n, buf) = (t.dtype, t.numel(), t.data.clone());
        Box::pin(self.call(move |w| {
            let c = w.comm(&id)?;
            // SAFETY: n elements of a live host buffer.
            let rc = w.timed(|| unsafe {
                (w.api.send)(
                    buf.as_ptr() as *const c_void,
                    n,
                    dtype(dt),
                    peer as i32,
                    c,
                    std::ptr::null_mut(),
                )
            });
            w.api.check("onecclSend", rc, c).map_err(to_c10d)
        }))
    }

    fn recv<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        peer: usize,
    ) -> DeviceFuture<'a, ()> {
        let id = comm.id.clone();
        Box::pin(async move {
            let (dt, n, mut buf) = (t.dtype, t.numel(), std::mem::take(&mut t.data));
            t.data = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    // SAFETY: room for n elements.
                    let rc = w.timed(|| unsafe {
                        (w.api.recv)(
                            buf.as_mut_ptr() as *mut c_void,
                            n,
                            dtype(dt),
                            peer as i32,
                            c,
                            std::ptr::null_mut(),
                        )
                    });
                    w.api.check("onecclRecv", rc, c).map_err(to_c10d)?;
                    Ok(buf)
                })
                .await?;
            Ok(())
        })
    }

    fn barrier<'a>(&'a self, comm: &'a CommRef) -> DeviceFuture<'a, ()> {
        // c10d's xccl barrier is a one-element all_reduce on the device communicator.
        let id = comm.id.clone();
        Box::pin(self.call(move |w| {
            let c = w.comm(&id)?;
            let mut one = [0f32; 1];
            let p = one.as_mut_ptr() as *mut c_void;
            // SAFETY: one float, in place.
            let rc = w.timed(|| unsafe {
                (w.api.all_reduce)(
                    p,
                    p,
                    1,
                    sys::ONECCL_FLOAT32,
                    sys::ONECCL_SUM,
                    c,
                    std::ptr::null_mut(),
                )
            });
            w.api.check("onecclAllReduce", rc, c).map_err(to_c10d)
        }))
    }

    fn reduce<'a>(
        &'a self,
        comm: &'a CommRef,
        t: &'a mut Tensor,
        op: ReduceOp,
        root: usize,
    ) -> DeviceFuture<'a, ()> {
        let (id, size, me) = (comm.id.clone(), comm.size, comm.rank);
        Box::pin(async move {
            let rop = red_op(t.dtype, op)?;
            let (dt, n, send) = (t.dtype, t.numel(), t.data.clone());
            let mut out = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let mut recv = vec![0u8; send.len()];
                    // SAFETY: both buffers hold n elements and live through the call.
                    let rc = w.timed(|| unsafe {
                        (w.api.reduce)(
                            send.as_ptr() as *const c_void,
                            recv.as_mut_ptr() as *mut c_void,
                            n,
                            dtype(dt),
                            rop,
                            root as i32,
                            c,
                            std::ptr::null_mut(),
                        )
                    });
                    w.api.check("onecclReduce", rc, c).map_err(to_c10d)?;
                    Ok(recv)
                })
                .await?;
            if me == root {
                if op == ReduceOp::Avg {
                    finish_avg(dt, &mut out, size);
                }
                t.data = out;
            }
            Ok(())
        })
    }

    fn reduce_scatter<'a>(
        &'a self,
        comm: &'a CommRef,
        input: &'a Tensor,
        op: ReduceOp,
        out_shape: &'a [usize],
    ) -> DeviceFuture<'a, Tensor> {
        let (id, size) = (comm.id.clone(), comm.size);
        Box::pin(async move {
            let rop = red_op(input.dtype, op)?;
            let dt = input.dtype;
            let m: usize = out_shape.iter().product();
            let send = input.data.clone();
            let mut out = self
                .call(move |w| {
                    let c = w.comm(&id)?;
                    let mut recv = vec![0u8; m * dt.size_bytes()];
                    // SAFETY: send holds size * m elements, recv m; both live through the call.
                    let rc = w.timed(|| unsafe {
                        (w.api.reduce_scatter)(
                            send.as_ptr() as *const c_void,
                            recv.as_mut_ptr() as *mut c_void,
                            m,
                            dtype(dt),
                            rop,
                            c,
                            std::ptr::null_mut(),
                        )
                    });
                    w.api.check("onecclReduceScatter", rc, c).map_err(to_c10d)?;
                    Ok(recv)
                })
                .await?;
            if op == ReduceOp::Avg {
                finish_avg(dt, &mut out, size);
            }
            Ok(Tensor {
                dtype: dt,
                shape: out_shape.to_vec(),
                data: out,
            })
        })
    }

    fn all_to_all<'a>(
        &'a self,
        comm: &'a CommRef,
        dt: DType,
        sends: Vec<Vec<u8>>,
        recv_lens: &'a [usize],
    ) -> DeviceFuture<'a, Vec<Vec<u8>>> {
        let id = comm.id.clone();
        let recv_lens = recv_lens.to_vec();
        Box::pin(self.call(move |w| {
            let c = w.comm(&id)?;
            let width = dt.size_bytes();
            let send_counts: Vec<usize> = sends.iter().map(|s| s.len() / width).collect();
            let recv_counts: Vec<usize> = recv_lens.iter().map(|l| l / width).collect();
            let send = sends.concat();
            let mut recv = vec![0u8; recv_lens.iter().sum()];
            // SAFETY: the count arrays have one entry per member and match the buffers' sizes.
            let rc = w.timed(|| unsafe {
                (w.api.all_to_all_v)(
                    send.as_ptr() as *const c_void,
                    send_counts.as_ptr(),
                    recv.as_mut_ptr() as *mut c_void,
                    recv_counts.as_ptr(),
                    dtype(dt),
                    c,
                    std::ptr::null_mut(),
                )
            });
            w.api.check("onecclAllToAllV", rc, c).map_err(to_c10d)?;
            let mut out = Vec::with_capacity(recv_lens.len());
            let mut at = 0;
            for l in &recv_lens {
                out.push(recv[at..at + l].to_vec());
                at += l;
            }
            Ok(out)
        }))
    }

    fn shutdown(&self) -> DeviceFuture<'_, ()> {
        Box::pin(async move {
            // No onecclCommFinalize here: with a dead peer it blocks forever, and the process
            // exits next anyway (the launcher removes the /dev/shm files oneCCL leaves). The
            // teardown a Python process takes is core's rule (`[world] exit_ms`, run_rank).
            Ok(())
        })
    }
}
