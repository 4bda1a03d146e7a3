//! Which algorithm a library runs a collective with, and that algorithm's message schedule.
//!
//! A prediction is only as good as the message pattern it charges. scen's own collectives
//! (crates/core/src/algo: ring, pairwise exchange, binomial tree, and the direct / recursive
//! doubling variants oneCCL uses) are one library; oneCCL 2022.2's CPU backend is another, with
//! a size-dependent selection table. That table was read from oneCCL itself
//! (`CCL_LOG_LEVEL=debug` prints it at init; docs/bench.md quotes it) and is reproduced by
//! [`Library::select`]. Each algorithm is implemented in crates/core/src/algo (ring.rs,
//! direct.rs, exchange.rs, rooted.rs); `model.rs`'s tests check every schedule against the
//! messages the implementation really sends.

use super::BenchOp;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A collective algorithm whose message pattern the model knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Ring: reduce-scatter + all-gather for all_reduce, n-1 steps of size/n for the others.
    Ring,
    /// oneCCL's `nreduce` all_reduce: every rank sends each peer its chunk (size/n), reduces the
    /// chunk it owns, then sends the reduced chunk to every peer (a direct reduce-scatter and a
    /// direct all-gather).
    Nreduce,
    /// Recursive doubling all_reduce: log2(n) exchanges of the whole buffer.
    RecursiveDoubling,
    /// Direct ("naive" in oneCCL): every rank sends its block straight to every peer
    /// (all_gather, reduce_scatter) or the root sends the whole buffer to each (broadcast).
    Direct,
    /// all_to_all where every rank posts all its sends at once (oneCCL's `scatter`) or in
    /// pairwise steps (scen's): n-1 messages of size/n either way.
    Pairwise,
    /// Binomial tree rooted at one rank (broadcast, reduce).
    BinomialTree,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::Nreduce => "nreduce",
            Algorithm::RecursiveDoubling => "recursive_doubling",
            Algorithm::Direct => "direct",
            Algorithm::Pairwise => "pairwise",
            Algorithm::BinomialTree => "binomial_tree",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose collectives run on a link class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// scen's own algorithms (core's algo module): gloo groups, and the simulator.
    Scen,
    /// oneCCL 2022.2's CPU backend over OFI (the selection table it prints at
    /// `CCL_LOG_LEVEL=debug`), for device groups measured with `scen bench --hw`.
    OnecclCpu,
    /// The same with `CCL_ALLREDUCE` set: its algorithms for the sizes it covers.
    OnecclCpuWith(AllReduceChoice),
}

/// `CCL_ALLREDUCE` as oneCCL reads it (`<algo>` or `<algo>:<lo>-<hi>;...`, c10d/ccl_env.rs):
/// Why a `CCL_ALLREDUCE` value cannot choose the model's all-reduce schedules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllReduceChoiceError {
    #[error(transparent)]
    Syntax(#[from] crate::c10d::ccl_env::RangesError),
    #[error("more than {max} size ranges")]
    TooManyRanges { max: usize },
    #[error(
        "the model has no schedule for all_reduce `{0}` (it has ring, nreduce, recursive_doubling)"
    )]
    NoSchedule(String),
}

/// the all-reduce algorithm for each size range it names, up to [`AllReduceChoice::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllReduceChoice {
    ranges: [(Algorithm, usize, usize); AllReduceChoice::MAX],
    len: usize,
}

impl AllReduceChoice {
    pub const MAX: usize = 8;

    /// Reads a `CCL_ALLREDUCE` value; `Err` says why (unreadable, or an algorithm the model
    /// has no schedule for).
    pub fn parse(value: &str) -> Result<AllReduceChoice, AllReduceChoiceError> {
        let entries = crate::c10d::ccl_env::ranges(value)?;
        if entries.len() > Self::MAX {
            return Err(AllReduceChoiceError::TooManyRanges { max: Self::MAX });
        }
        let mut c = AllReduceChoice {
            ranges: [(Algorithm::Ring, 0, 0); Self::MAX],
            len: entries.len(),
        };
        for (slot, (name, lo, hi)) in c.ranges.iter_mut().zip(entries) {
            let alg = match name {
                "ring" => Algorithm::Ring,
                "nreduce" => Algorithm::Nreduce,
                "recursive_doubling" => Algorithm::RecursiveDoubling,
                other => return Err(AllReduceChoiceError::NoSchedule(other.to_string())),
            };
            *slot = (alg, lo, hi);
        }
        Ok(c)
    }

    /// The algorithm named for an all-reduce of `bytes`, if a range covers it.
    fn pick(&self, bytes: usize) -> Option<Algorithm> {
        self.ranges[..self.len]
            .iter()
            .find(|(_, lo, hi)| (*lo..=*hi).contains(&bytes))
            .map(|(a, _, _)| *a)
    }
}

/// oneCCL 2022.2 CPU thresholds (bytes; inclusive upper bounds), from its selection table.
pub const ONECCL_ALLREDUCE_RD_MAX: usize = 8192;
pub const ONECCL_ALLREDUCE_NREDUCE_MAX: usize = 1 << 20;
/// all_gather(v): the bound applies to one rank's block.
pub const ONECCL_ALLGATHER_NAIVE_MAX: usize = 32768;
pub const ONECCL_BCAST_TREE_MAX: usize = 8192;

impl Library {
    /// The algorithm this library runs `op` on a benchmark size of `bytes` over `ranks` with.
    pub fn select(self, op: BenchOp, bytes: usize, ranks: usize) -> Algorithm {
        match self {
            Library::OnecclCpuWith(c) => match (op, c.pick(bytes)) {
                (BenchOp::AllReduce, Some(alg)) => alg,
                _ => Library::OnecclCpu.select(op, bytes, ranks),
            },
            Library::Scen => match op {
                BenchOp::AllReduce | BenchOp::AllGather | BenchOp::ReduceScatter => Algorithm::Ring,
                BenchOp::AllToAll => Algorithm::Pairwise,
                BenchOp::Broadcast | BenchOp::Reduce => Algorithm::BinomialTree,
            },
            Library::OnecclCpu => match op {
                BenchOp::AllReduce if bytes <= ONECCL_ALLREDUCE_RD_MAX => {
                    Algorithm::RecursiveDoubling
                }
                BenchOp::AllReduce if bytes <= ONECCL_ALLREDUCE_NREDUCE_MAX => Algorithm::Nreduce,
                BenchOp::AllReduce => Algorithm::Ring,
                BenchOp::AllGather if bytes / ranks.max(1) <= ONECCL_ALLGATHER_NAIVE_MAX => {
                    Algorithm::Direct
                }
                BenchOp::AllGather => Algorithm::Ring,
                BenchOp::ReduceScatter => Algorithm::Direct,
                BenchOp::AllToAll => Algorithm::Pairwise,
                BenchOp::Broadcast if bytes <= ONECCL_BCAST_TREE_MAX => Algorithm::BinomialTree,
                BenchOp::Broadcast => Algorithm::Direct,
                BenchOp::Reduce => Algorithm::BinomialTree,
            },
        }
    }
}

/// What the busiest member of a collective does: `messages` sends carrying `wire_bytes` in
/// all, and `reduce_bytes` of reduction (compute, not link).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub messages: usize,
    pub wire_bytes: f64,
    pub reduce_bytes: f64,
}

fn ceil_log2(n: usize) -> usize {
    (usize::BITS - (n.max(1) - 1).leading_zeros()) as usize
}

/// The schedule of `op` run with `alg` on a benchmark size of `bytes` over `ranks` members.
pub fn schedule(op: BenchOp, alg: Algorithm, bytes: usize, ranks: usize) -> Schedule {
    let n = ranks.max(1);
    let s = bytes as f64;
    let chunk = s / n as f64;
    let (messages, wire_bytes, reduce_bytes) = if n == 1 {
        (0, 0.0, 0.0)
    } else {
        match (op, alg) {
            (BenchOp::AllReduce, Algorithm::RecursiveDoubling) => {
                // Beyond the largest power of two, a paired member also reduces the fold-in and
                // sends the result back (algo/direct.rs).
                let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
                let k = ceil_log2(pof2) + usize::from(pof2 != n);
                (k, k as f64 * s, k as f64 * s)
            }
            // Ring and nreduce move the same bytes; they differ in how the sends overlap.
            (BenchOp::AllReduce, _) => (
                2 * (n - 1),
                2.0 * (n - 1) as f64 * chunk,
                (n - 1) as f64 * chunk,
            ),
            (BenchOp::ReduceScatter, _) => (n - 1, (n - 1) as f64 * chunk, (n - 1) as f64 * chunk),
            (BenchOp::AllGather | BenchOp::AllToAll, _) => (n - 1, (n - 1) as f64 * chunk, 0.0),
            (BenchOp::Broadcast, Algorithm::Direct) => (n - 1, (n - 1) as f64 * s, 0.0),
            (BenchOp::Broadcast, _) => (ceil_log2(n), ceil_log2(n) as f64 * s, 0.0),
            (BenchOp::Reduce, _) => (
                ceil_log2(n),
                ceil_log2(n) as f64 * s,
                ceil_log2(n) as f64 * s,
            ),
        }
    };
    Schedule {
        messages,
        wire_bytes,
        reduce_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oneccl_selection_follows_its_printed_table() {
        let l = Library::OnecclCpu;
        assert_eq!(
            l.select(BenchOp::AllReduce, 8192, 2),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(l.select(BenchOp::AllReduce, 8193, 2), Algorithm::Nreduce);
        assert_eq!(l.select(BenchOp::AllReduce, 1 << 20, 4), Algorithm::Nreduce);
        assert_eq!(
            l.select(BenchOp::AllReduce, (1 << 20) + 4, 4),
            Algorithm::Ring
        );
        // all_gather: the bound is one rank's block (64 KiB over 2 ranks = 32 KiB each).
        assert_eq!(l.select(BenchOp::AllGather, 65536, 2), Algorithm::Direct);
        assert_eq!(l.select(BenchOp::AllGather, 131072, 2), Algorithm::Ring);
        assert_eq!(l.select(BenchOp::AllGather, 131072, 4), Algorithm::Direct);
        assert_eq!(
            l.select(BenchOp::AllToAll, 64 << 20, 4),
            Algorithm::Pairwise
        );
        assert_eq!(l.select(BenchOp::Broadcast, 1 << 20, 4), Algorithm::Direct);
        assert_eq!(
            Library::Scen.select(BenchOp::AllReduce, 64, 2),
            Algorithm::Ring
        );
    }

    #[test]
    fn schedules_count_messages_bytes_and_reductions() {
        let s = schedule(BenchOp::AllReduce, Algorithm::Ring, 4096, 4);
        assert_eq!(
            (s.messages, s.wire_bytes, s.reduce_bytes),
            (6, 6144.0, 3072.0)
        );
        let s = schedule(BenchOp::AllReduce, Algorithm::RecursiveDoubling, 4096, 4);
        assert_eq!(
            (s.messages, s.wire_bytes, s.reduce_bytes),
            (2, 8192.0, 8192.0)
        );
        // 3 ranks: rank 1 reduces rank 0's fold-in, exchanges with rank 2, copies out.
        let s = schedule(BenchOp::AllReduce, Algorithm::RecursiveDoubling, 4096, 3);
        assert_eq!((s.messages, s.reduce_bytes), (2, 8192.0));
        let s = schedule(BenchOp::AllToAll, Algorithm::Pairwise, 4096, 4);
        assert_eq!((s.messages, s.wire_bytes, s.reduce_bytes), (3, 3072.0, 0.0));
        let s = schedule(BenchOp::Broadcast, Algorithm::Direct, 4096, 4);
        assert_eq!((s.messages, s.wire_bytes), (3, 12288.0));
        assert_eq!(
            schedule(BenchOp::AllReduce, Algorithm::Ring, 4096, 1).messages,
            0
        );
    }
}
