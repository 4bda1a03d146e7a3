//! Communication performance, written once: the collectives a benchmark times and their
//! nccl-tests bus-bandwidth factors, size sweeps, the per-link timing model the simulator charges
//! and `scen bench` predicts with (and its least-squares calibration), the A/B comparison by size
//! bucket, and the diffusion models' communication patterns (docs/bench.md).

pub mod calibrate;
pub mod compare;
pub mod fit;
pub mod holdout;
pub mod model;
pub mod notes;
pub mod pattern;
pub mod plan;
pub mod render;
pub mod result;
pub mod schedule;
pub mod sweep;

use std::fmt;
use std::str::FromStr;

/// A collective `scen bench` times.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum BenchOp {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
}

impl BenchOp {
    pub const ALL: [BenchOp; 6] = [
        BenchOp::AllReduce,
        BenchOp::AllGather,
        BenchOp::ReduceScatter,
        BenchOp::AllToAll,
        BenchOp::Broadcast,
        BenchOp::Reduce,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BenchOp::AllReduce => "all_reduce",
            BenchOp::AllGather => "all_gather",
            BenchOp::ReduceScatter => "reduce_scatter",
            BenchOp::AllToAll => "all_to_all",
            BenchOp::Broadcast => "broadcast",
            BenchOp::Reduce => "reduce",
        }
    }

    /// Does the op reduce (has a redop column)?
    pub fn reduces(self) -> bool {
        matches!(
            self,
            BenchOp::AllReduce | BenchOp::ReduceScatter | BenchOp::Reduce
        )
    }

    /// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw x factor, so that
    /// busbw is comparable to the hardware's link speed whatever the rank count.
    pub fn busbw_factor(self, ranks: usize) -> f64 {
        let n = ranks.max(1) as f64;
        match self {
            BenchOp::AllReduce => 2.0 * (n - 1.0) / n,
            BenchOp::AllGather | BenchOp::ReduceScatter | BenchOp::AllToAll => (n - 1.0) / n,
            BenchOp::Broadcast | BenchOp::Reduce => 1.0,
        }
    }

    /// Elements per rank's send buffer for a benchmark size of `bytes` (nccl-tests' convention:
    /// the size is the larger buffer, all ranks' data for all_gather / reduce_scatter /
    /// all_to_all). 0 when the size is too small to give every rank one element.
    pub fn send_count(self, bytes: usize, elem_bytes: usize, ranks: usize) -> usize {
        let total = bytes / elem_bytes.max(1);
        match self {
            BenchOp::AllGather => total / ranks.max(1),
            _ => total,
        }
    }

    /// Elements of the receive buffer for a send buffer of `send_count` elements.
    pub fn recv_count(self, send_count: usize, ranks: usize) -> usize {
        match self {
            BenchOp::AllGather => send_count * ranks,
            BenchOp::ReduceScatter => send_count / ranks.max(1),
            _ => send_count,
        }
    }

    /// The bytes the benchmark reports for a send buffer of `send_count` elements.
    pub fn size_bytes(self, send_count: usize, elem_bytes: usize, ranks: usize) -> usize {
        match self {
            BenchOp::AllGather => send_count * ranks * elem_bytes,
            _ => send_count * elem_bytes,
        }
    }
}

impl fmt::Display for BenchOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An op name `scen bench` does not know (the name as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown op `{0}` (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce)")]
pub struct UnknownBenchOp(pub String);

impl FromStr for BenchOp {
    type Err = UnknownBenchOp;
    fn from_str(s: &str) -> Result<Self, UnknownBenchOp> {
        let k = s.to_ascii_lowercase().replace('-', "_");
        Ok(match k.as_str() {
            "all_reduce" | "allreduce" => BenchOp::AllReduce,
            "all_gather" | "allgather" => BenchOp::AllGather,
            "reduce_scatter" | "reducescatter" => BenchOp::ReduceScatter,
            "all_to_all" | "alltoall" | "all_to_all_single" => BenchOp::AllToAll,
            "broadcast" | "bcast" => BenchOp::Broadcast,
            "reduce" => BenchOp::Reduce,
            _ => return Err(UnknownBenchOp(s.to_string())),
        })
    }
}

/// algbw and busbw in GB/s (1e9 bytes/s, as nccl-tests) of `bytes` moved in `time_us`.
pub fn bandwidths(op: BenchOp, bytes: usize, ranks: usize, time_us: f64) -> (f64, f64) {
    if time_us <= 0.0 {
        return (0.0, 0.0);
    }
    let alg = bytes as f64 / (time_us * 1e3);
    (alg, alg * op.busbw_factor(ranks))
}

/// The median of `v` (0 when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busbw_factors_are_nccl_tests_ones() {
        assert_eq!(BenchOp::AllReduce.busbw_factor(2), 1.0);
        assert_eq!(BenchOp::AllReduce.busbw_factor(4), 1.5);
        assert_eq!(BenchOp::AllReduce.busbw_factor(8), 1.75);
        assert_eq!(BenchOp::AllGather.busbw_factor(4), 0.75);
        assert_eq!(BenchOp::ReduceScatter.busbw_factor(2), 0.5);
        assert_eq!(BenchOp::AllToAll.busbw_factor(8), 0.875);
        assert_eq!(BenchOp::Broadcast.busbw_factor(8), 1.0);
        assert_eq!(BenchOp::Reduce.busbw_factor(3), 1.0);
        assert_eq!(BenchOp::AllReduce.busbw_factor(1), 0.0);
    }

    #[test]
    fn bandwidth_of_the_shared_oneccl_run_matches_its_table() {
        // bench_4ranks_shm.txt: allreduce 1048576 B in 964.4 us -> algbw 1.087, busbw 1.631.
        let (a, b) = bandwidths(BenchOp::AllReduce, 1_048_576, 4, 964.4);
        assert!(
            (a - 1.087).abs() < 1e-3 && (b - 1.631).abs() < 1e-3,
            "{a} {b}"
        );
        // allgather 65536 B with 4 ranks: per-rank count 4096 f32.
        assert_eq!(BenchOp::AllGather.send_count(65536, 4, 4), 4096);
        assert_eq!(BenchOp::AllGather.size_bytes(4096, 4, 4), 65536);
        assert_eq!(BenchOp::ReduceScatter.recv_count(16384, 4), 4096);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn op_names_parse() {
        for op in BenchOp::ALL {
            assert_eq!(op.name().parse::<BenchOp>(), Ok(op));
        }
        assert_eq!("allreduce".parse::<BenchOp>(), Ok(BenchOp::AllReduce));
        assert!("gossip".parse::<BenchOp>().is_err());
    }
}
