//! `scen bench --hw`: collectives timed on real oneCCL (or scen's gloo host path), one process
//! per rank, nccl-tests style. The launcher ([`launch`]) starts the ranks and gathers their
//! results over a side channel; each rank ([`rank`]) allocates its buffers once per size, warms
//! up, times a loop that calls oneCCL and nothing else ([`kernel`]), optionally interleaved with a
//! bare baseline loop (`--raw`), and checks the values after the timed region ([`values`]).
//! See docs/bench.md.

pub mod gloo;
pub mod kernel;
pub mod launch;
pub mod rank;
pub mod values;

use scen_core::perf::BenchOp;
use serde::{Deserialize, Serialize};

/// Which communication path the ranks time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchPath {
    /// Device groups: oneCCL's C API (CPU plugin here, XPU where present).
    Oneccl,
    /// Host groups: scen's gloo-like algorithms over TCP between the rank processes.
    Gloo,
    /// Real torch.distributed in Python rank processes: run by scen-torch (its bench module),
    /// not by this crate's launcher.
    Torch,
}

impl BenchPath {
    pub fn name(self) -> &'static str {
        match self {
            BenchPath::Oneccl => "oneccl",
            BenchPath::Gloo => "gloo",
            BenchPath::Torch => "torch",
        }
    }
}

/// One collective at one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchJob {
    pub op: BenchOp,
    pub size_bytes: usize,
}

/// What every rank process runs (passed to it as JSON in SCEN_BENCH_SPEC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchSpec {
    pub jobs: Vec<BenchJob>,
    pub dtype: String,
    pub redop: String,
    pub ranks: usize,
    pub warmup: usize,
    pub iters: usize,
    pub path: BenchPath,
    /// Also time the bare baseline loop, interleaved with scen's.
    pub raw: bool,
    /// Extra environment for the rank processes (`--env K=V`), on top of oneCCL's defaults.
    pub env: Vec<(String, String)>,
}

/// One job's result, averaged over ranks (nccl-tests' default) and summed for `wrong`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub job: BenchJob,
    /// Elements of each rank's send buffer.
    pub count: usize,
    pub time_us: f64,
    /// Median over the timed blocks of microseconds per call (robust to a shared machine's
    /// bursts of load; calibration fits it), averaged over ranks.
    #[serde(default)]
    pub median_us: Option<f64>,
    pub raw_us: Option<f64>,
    pub wrong: u64,
    /// With `--repeat` >= 2: how far the repeated sweeps' times for this job lie apart,
    /// (max - min) / median (the machine's drift and noise, not the model's).
    #[serde(default)]
    pub spread: Option<f64>,
}

/// A rank's report of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankJob {
    pub index: usize,
    pub count: usize,
    pub time_us: f64,
    #[serde(default)]
    pub median_us: Option<f64>,
    pub raw_us: Option<f64>,
    pub wrong: u64,
}

impl RankJob {
    /// A job's report before it is timed: `count` elements sent, nothing measured yet.
    pub fn new(index: usize, count: usize) -> Self {
        Self {
            index,
            count,
            time_us: 0.0,
            median_us: None,
            raw_us: None,
            wrong: 0,
        }
    }
}

/// The median of `v` (0 when empty).
pub use scen_core::perf::median;

pub use launch::run;

/// Messages between the bench launcher and its ranks, one JSON object per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    Hello {
        rank: usize,
    },
    /// Rank 0's oneCCL unique id (hex), relayed by the launcher to the others.
    Uid {
        hex: String,
    },
    /// A rank's gloo listener; the launcher relays every rank's once all are known.
    Addr {
        rank: usize,
        addr: String,
    },
    Addrs {
        addrs: Vec<String>,
    },
    Job {
        rank: usize,
        job: RankJob,
    },
    Failed {
        rank: usize,
        error: String,
    },
}

/// The oneCCL library's version (`2021.14.0`), if it loads here.
pub fn oneccl_version() -> Option<String> {
    let c = oneccl_sys::candidates_with_root(crate::launcher::oneccl_root());
    let v = oneccl_sys::Api::load_from(c).ok()?.version().ok()?;
    Some(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}
