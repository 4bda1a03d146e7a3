//! One benchmark rank process (`scen __bench-rank`, started by [`super::launch`]): rendezvous
//! through the launcher, then every job of the spec in order, each reported as it finishes.

use super::kernel::{raw_loop, Kernel};
use super::values::{count_wrong, fill};
use super::{gloo, BenchPath, BenchSpec, RankJob, Wire};
use oneccl_sys::{Api, OnecclComm, OnecclUniqueId};
use scen_core::dtype::{DType, UnknownDType};
use scen_core::perf::BenchOp;
use scen_core::reduce::{ReduceOp, UnknownReduceOp};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Instant;

/// The line-based channel to the launcher.
pub struct Parent {
    out: TcpStream,
    input: BufReader<TcpStream>,
}

impl Parent {
    fn connect(addr: &str) -> std::io::Result<Parent> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(Parent {
            out: s.try_clone()?,
            input: BufReader::new(s),
        })
    }

    pub fn send(&mut self, m: &Wire) -> Result<(), String> {
        let mut line = serde_json::to_string(m).map_err(|e| e.to_string())?;
        line.push('\n');
        self.out
            .write_all(line.as_bytes())
            .map_err(|e| format!("the launcher went away: {e}"))
    }

    pub fn recv(&mut self) -> Result<Wire, String> {
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) => Err("the launcher closed the connection".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("bad launcher message: {e}")),
            Err(e) => Err(format!("the launcher went away: {e}")),
        }
    }
}

/// The spec's dtype and reduction, parsed (as text: a rank's error goes to the launcher as
/// text, `Wire::Failed`).
pub fn kinds(spec: &BenchSpec) -> Result<(DType, ReduceOp), String> {
    let dt: DType = spec
        .dtype
        .parse()
        .map_err(|e: UnknownDType| e.to_string())?;
    let op: ReduceOp = spec
        .redop
        .parse()
        .map_err(|e: UnknownReduceOp| e.to_string())?;
    Ok((dt, op))
}

/// Elements per rank's send buffer for a job: rounded down so every rank gets equal chunks.
pub fn send_count(op: BenchOp, size_bytes: usize, elem: usize, n: usize) -> usize {
    let c = op.send_count(size_bytes, elem, n);
    match op {
        BenchOp::ReduceScatter | BenchOp::AllToAll => c / n * n,
        _ => c,
    }
}

/// Splits `iters` into alternating blocks (scen, raw, raw, scen, ...) so that load changes on a
/// shared machine hit both loops alike; returns each loop's share of every block.
pub fn blocks(iters: usize) -> Vec<usize> {
    let b = (iters / 8).max(1);
    let mut left = iters;
    let mut out = Vec::new();
    while left > 0 {
        let k = b.min(left);
        out.push(k);
        left -= k;
    }
    out
}

/// `scen __bench-rank`: returns the process exit code.
pub fn rank_main() -> i32 {
    let var = |k: &str| {
        std::env::var(k).map_err(|_| {
            format!("{k} is not set (this subcommand is started by `scen bench --hw`)")
        })
    };
    let setup = || -> Result<(usize, usize, BenchSpec, String), String> {
        let rank = var("RANK")?
            .parse()
            .map_err(|_| "RANK is not a number".to_string())?;
        let world = var("WORLD_SIZE")?
            .parse()
            .map_err(|_| "WORLD_SIZE is not a number".to_string())?;
        let spec: BenchSpec = serde_json::from_str(&var("SCEN_BENCH_SPEC")?)
            .map_err(|e| format!("SCEN_BENCH_SPEC: {e}"))?;
        Ok((rank, world, spec, var("SCEN_BENCH_ADDR")?))
    };
    let (rank, world, spec, addr) = match setup() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("scen __bench-rank: {e}");
            return 2;
        }
    };
    let mut parent = match Parent::connect(&addr) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("scen bench rank {rank}: cannot reach the launcher at {addr}: {e}");
            return 2;
        }
    };
    let r = parent
        .send(&Wire::Hello { rank })
        .and_then(|_| match spec.path {
            BenchPath::Oneccl => run_oneccl(&mut parent, rank, world, &spec),
            BenchPath::Gloo => gloo::run(&mut parent, rank, world, &spec),
            BenchPath::Torch => Err("the torch path runs Python ranks, not scen's".into()),
        });
    match r {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("scen bench rank {rank}: {error}");
            let _ = parent.send(&Wire::Failed { rank, error });
            1
        }
    }
}

fn unique_id(api: &Api, parent: &mut Parent, rank: usize) -> Result<OnecclUniqueId, String> {
    let mut id = OnecclUniqueId::zeroed();
    if rank == 0 {
        // SAFETY: a valid out pointer to a 4096-byte id.
        let rc = unsafe { (api.get_unique_id)(&mut id) };
        api.check("onecclGetUniqueId", rc, std::ptr::null_mut())
            .map_err(|e| e.to_string())?;
        let used = id.data.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
        let hex: String = id.data[..used].iter().map(|b| format!("{b:02x}")).collect();
        parent.send(&Wire::Uid { hex })?;
        return Ok(id);
    }
    loop {
        if let Wire::Uid { hex } = parent.recv()? {
            for (i, pair) in hex.as_bytes().chunks(2).enumerate().take(id.data.len()) {
                let s = std::str::from_utf8(pair).map_err(|e| e.to_string())?;
                id.data[i] = u8::from_str_radix(s, 16).map_err(|e| e.to_string())?;
            }
            return Ok(id);
        }
    }
}

fn run_oneccl(
    parent: &mut Parent,
    rank: usize,
    world: usize,
    spec: &BenchSpec,
) -> Result<(), String> {
    let (dt, rop) = kinds(spec)?;
    let api = Api::load().map_err(|e| e.to_string())?;
    let id = unique_id(&api, parent, rank)?;
    let mut comm: OnecclComm = std::ptr::null_mut();
    // SAFETY: valid out pointer; the id is passed by value as the C API wants.
    let rc = unsafe { (api.comm_init_rank)(&mut comm, world, id, rank as i32) };
    api.check("onecclCommInitRank", rc, std::ptr::null_mut())
        .map_err(|e| e.to_string())?;
    let (cdt, crop) = (
        crate::oneccl::dtype(dt),
        crate::oneccl::red_op(dt, rop).map_err(|e| e.to_string())?,
    );
    for (index, job) in spec.jobs.iter().enumerate() {
        let count = send_count(job.op, job.size_bytes, dt.size_bytes(), world);
        let mut report = RankJob::new(index, count);
        if count > 0 {
            let mut k = Kernel::new(&api, comm, job.op, cdt, crop, dt.size_bytes(), count, world);
            fill(&mut k.send, dt, rank, rop);
            k.run(spec.warmup).map_err(|e| e.to_string())?;
            let (mut scen_s, mut raw_s) = (0.0f64, 0.0f64);
            let mut per_call_us = Vec::new();
            for (i, b) in blocks(spec.iters).into_iter().enumerate() {
                // ABBA order: scen first in even pairs, raw first in odd ones.
                let scen_first = !spec.raw || i % 2 == 0;
                for pass in 0..if spec.raw { 2 } else { 1 } {
                    let t0 = Instant::now();
                    if (pass == 0) == scen_first {
                        k.run(b).map_err(|e| e.to_string())?;
                        let s = t0.elapsed().as_secs_f64();
                        scen_s += s;
                        per_call_us.push(s * 1e6 / b as f64);
                    } else {
                        let rc = raw_loop(&mut k, b);
                        raw_s += t0.elapsed().as_secs_f64();
                        api.check("raw loop", rc, comm).map_err(|e| e.to_string())?;
                    }
                }
            }
            let iters = spec.iters.max(1) as f64;
            report.time_us = scen_s * 1e6 / iters;
            report.raw_us = spec.raw.then(|| raw_s * 1e6 / iters);
            report.median_us = Some(super::median(per_call_us));
            report.wrong = count_wrong(&k.recv, dt, job.op, world, rank, count, rop);
        }
        parent.send(&Wire::Job { rank, job: report })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_iteration() {
        assert_eq!(blocks(100).iter().sum::<usize>(), 100);
        assert_eq!(blocks(100).len(), 9);
        assert_eq!(blocks(3), vec![1, 1, 1]);
        assert!(blocks(0).is_empty());
        assert_eq!(send_count(BenchOp::AllToAll, 40, 4, 4), 8);
        assert_eq!(send_count(BenchOp::AllToAll, 36, 4, 4), 8);
    }
}
