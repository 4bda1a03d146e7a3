//! The host path of an A/B: the same op through scen's gloo-like algorithms (core's ring, tree
//! and pairwise exchange) over core's rank-to-rank fabric on OS TCP, as `scen run --hw` runs
//! gloo groups. Core's algorithms allocate their outputs per call, as gloo's do.

use super::rank::{blocks, kinds, send_count, Parent};
use super::values::{count_wrong, fill};
use super::{BenchSpec, RankJob, Wire};
use crate::net::{TokioNet, WallClock};
use scen_core::algo::{self, Link, LinkError};
use scen_core::dtype::DType;
use scen_core::perf::BenchOp;
use scen_core::reduce::ReduceOp;
use scen_core::runtime::fabric::Fabric;
use scen_core::tensor::Tensor;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// One call's view of the fabric: group rank = global rank, one tag per call.
struct GlooLink<'a> {
    fabric: &'a Fabric<TokioNet>,
    me: usize,
    n: usize,
    tag: String,
}

impl Link for GlooLink<'_> {
    fn rank(&self) -> usize {
        self.me
    }
    fn size(&self) -> usize {
        self.n
    }
    async fn send(&self, to: usize, data: Vec<u8>, _bytes: usize) -> Result<(), LinkError> {
        self.fabric
            .send(to, &self.tag, &data)
            .await
            .map_err(|e| LinkError::Failed(e.to_string()))
    }
    async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
        let clock = WallClock { epoch_unix_ms: 0 };
        self.fabric
            .recv(&clock, from, &self.tag, None)
            .await
            .map_err(|e| LinkError::Failed(e.to_string()))
    }
}

struct Call<'a> {
    fabric: &'a Fabric<TokioNet>,
    me: usize,
    n: usize,
    seq: Cell<u64>,
    op: BenchOp,
    dtype: DType,
    rop: ReduceOp,
}

impl Call<'_> {
    /// One collective on `t` (updated in place for all_reduce / broadcast / reduce); returns
    /// the receive buffer's bytes.
    async fn once(&self, t: &mut Tensor) -> Result<Vec<u8>, String> {
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        let l = GlooLink {
            fabric: self.fabric,
            me: self.me,
            n: self.n,
            tag: format!("bench/{seq}"),
        };
        let e = |e: algo::CollectiveError| e.to_string();
        Ok(match self.op {
            BenchOp::AllReduce => {
                algo::all_reduce(&l, t, self.rop).await.map_err(e)?;
                Vec::new()
            }
            BenchOp::Broadcast => {
                algo::broadcast(&l, t, 0).await.map_err(e)?;
                Vec::new()
            }
            BenchOp::Reduce => {
                algo::reduce(&l, t, self.rop, 0).await.map_err(e)?;
                Vec::new()
            }
            BenchOp::AllGather => algo::all_gather(&l, t)
                .await
                .map_err(e)?
                .into_iter()
                .flat_map(|p| p.data)
                .collect(),
            BenchOp::ReduceScatter => {
                let out = [t.numel() / self.n];
                algo::reduce_scatter(&l, t, self.rop, &out)
                    .await
                    .map_err(e)?
                    .data
            }
            BenchOp::AllToAll => {
                let chunk = t.data.len() / self.n;
                let sends = t.data.chunks(chunk).map(<[u8]>::to_vec).collect();
                algo::all_to_all(&l, sends, &vec![chunk; self.n])
                    .await
                    .map_err(e)?
                    .concat()
            }
        })
    }

    fn input(&self, count: usize) -> Tensor {
        let mut t = Tensor {
            dtype: self.dtype,
            shape: vec![count],
            data: vec![0u8; count * self.dtype.size_bytes()],
        };
        fill(&mut t.data, self.dtype, self.me, self.rop);
        t
    }
}

/// Runs every job of `spec` on the host path.
pub fn run(parent: &mut Parent, rank: usize, world: usize, spec: &BenchSpec) -> Result<(), String> {
    let (dt, rop) = kinds(spec)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start tokio: {e}"))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let net = TokioNet {
            host: "127.0.0.1".into(),
            bind_ip: "127.0.0.1".into(),
            // The bench's host path exchanges fabric addresses over the launcher's pipe and
            // never opens a TCPStore, so there is no store handshake to carry a token.
            job_token: None,
            allow_torch_clients: false,
            agent_store_is_pytorch: false,
        };
        let fabric: Rc<Fabric<TokioNet>> = Fabric::start(net, rank, Default::default())
            .await
            .map_err(|e| e.to_string())?;
        parent.send(&Wire::Addr {
            rank,
            addr: fabric.address(),
        })?;
        let addrs = loop {
            if let Wire::Addrs { addrs } = parent.recv()? {
                break addrs;
            }
        };
        for (peer, a) in addrs.iter().enumerate() {
            fabric.learn(peer, a.as_bytes());
        }
        for (index, job) in spec.jobs.iter().enumerate() {
            let count = send_count(job.op, job.size_bytes, dt.size_bytes(), world);
            let mut report = RankJob::new(index, count);
            if count > 0 {
                let call = Call {
                    fabric: &fabric,
                    me: rank,
                    n: world,
                    seq: Cell::new(index as u64 * 1_000_000),
                    op: job.op,
                    dtype: dt,
                    rop,
                };
                let mut t = call.input(count);
                for _ in 0..spec.warmup {
                    call.once(&mut t).await?;
                }
                let t0 = Instant::now();
                let mut per_call_us = Vec::new();
                for b in blocks(spec.iters) {
                    let tb = Instant::now();
                    for _ in 0..b {
                        call.once(&mut t).await?;
                    }
                    per_call_us.push(tb.elapsed().as_secs_f64() * 1e6 / b as f64);
                }
                report.time_us = t0.elapsed().as_secs_f64() * 1e6 / spec.iters.max(1) as f64;
                report.median_us = Some(super::median(per_call_us));
                // Checked on a fresh input, outside the timed region.
                let mut t = call.input(count);
                let out = call.once(&mut t).await?;
                let recv = if out.is_empty() { &t.data } else { &out };
                report.wrong = count_wrong(recv, dt, job.op, world, rank, count, rop);
            }
            parent.send(&Wire::Job { rank, job: report })?;
        }
        fabric.shutdown();
        Ok(())
    })
}
