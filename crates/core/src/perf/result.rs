//! What `scen bench --format json` writes and `scen bench --compare` reads: one row per op and
//! size, with the measured (hw), raw-baseline and predicted (sim) columns that were asked for.

use super::BenchOp;
use serde::{Deserialize, Serialize};

/// One measured or predicted column of a row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Mean microseconds per call over the timed iterations (or the prediction).
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
}

impl Timing {
    /// `op` moving `bytes` on `ranks` ranks in `time_us`, with its bandwidths.
    pub fn of(op: BenchOp, bytes: usize, ranks: usize, time_us: f64) -> Timing {
        let (algbw_gbps, busbw_gbps) = super::bandwidths(op, bytes, ranks, time_us);
        Timing {
            time_us,
            algbw_gbps,
            busbw_gbps,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    pub op: BenchOp,
    /// nccl-tests' size: bytes of the larger buffer.
    pub size_bytes: usize,
    /// Elements of each rank's send buffer.
    pub count: usize,
    pub dtype: String,
    /// The reduction (`sum`), or `-` for ops without one.
    pub redop: String,
    /// Measured through scen's hw path (`scen bench --hw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw: Option<Timing>,
    /// Measured by the raw loop in the same processes (`--raw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Timing>,
    /// The timing model's prediction (`scen bench` without --hw, or with --sim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<Timing>,
    /// Median over the timed blocks of the hw path's microseconds per call (robust to load
    /// bursts; what calibration fits and `err%` compares against).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_median_us: Option<f64>,
    /// Elements that differed from the expected result, summed over ranks (hw only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong: Option<u64>,
    /// With `--repeat N` (N > 1): the hw time of each repeat (`hw` holds their median); what
    /// `--compare` takes its noise band from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hw_repeats_us: Vec<f64>,
}

impl BenchRow {
    /// The measured time a prediction is compared with: the median over blocks where the run
    /// recorded it, else the mean.
    pub fn measured_us(&self) -> Option<f64> {
        self.hw_median_us.or(self.hw.map(|t| t.time_us))
    }

    /// The time `--compare` uses: measured if there is one, else the prediction.
    pub fn time_us(&self) -> Option<f64> {
        self.hw.or(self.sim).map(|t| t.time_us)
    }
}

/// Where a report's timing model came from. The built-in default is a placeholder (its links
/// are not this machine's: 100 GB/s on a CPU host), so `--plot` draws a model line only for a
/// model fitted here or given by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// scen's built-in defaults.
    Default,
    /// A model file given with `--model`.
    File,
    /// Fitted to this run's measurements (`--calibrate`).
    Calibrated,
}

impl ModelSource {
    /// A model fitted here or named by the user: worth drawing beside measurements.
    pub fn is_chosen(self) -> bool {
        !matches!(self, ModelSource::Default)
    }
}

/// One `scen bench` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// `scen bench` schema version.
    pub schema: u32,
    /// What ran: `oneccl` (device path), `gloo` (scen's host path), or `sim`.
    pub path: String,
    pub ranks: usize,
    pub nodes: usize,
    pub warmup: usize,
    pub iters: usize,
    /// Environment given with --env (and the oneCCL settings in effect).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The timing model the sim column used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Where that model came from (absent in reports written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_source: Option<ModelSource>,
    /// The simulator is deterministic; the seed is printed for the record.
    pub seed: u64,
    pub rows: Vec<BenchRow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What measured it: the torch.distributed backend (`gloo`, `nccl`, `xccl`) of the torch
    /// path, and the library versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oneccl: Option<String>,
    /// A `--pattern` run: how often each row's collective runs per denoise step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<PatternInfo>,
}

/// A pattern's shape in a report, so that `--compare` can weigh by time per denoise step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternInfo {
    pub name: String,
    /// Transformer blocks per denoise step.
    pub layers: usize,
    /// Calls per denoise step of each row's collective, in row order.
    pub per_step: Vec<usize>,
    /// Each row's label (`all_to_all_4D qkv ...`).
    pub labels: Vec<String>,
}

impl BenchReport {
    /// A report with no rows or notes (the fields a test or a run fills next).
    pub fn new(path: &str, ranks: usize) -> BenchReport {
        BenchReport {
            schema: SCHEMA,
            path: path.into(),
            ranks,
            nodes: 1,
            warmup: 0,
            iters: 0,
            env: Vec::new(),
            model: None,
            model_source: None,
            seed: 0,
            rows: Vec::new(),
            notes: Vec::new(),
            backend: None,
            torch: None,
            oneccl: None,
            pattern: None,
        }
    }
}

pub const SCHEMA: u32 = 1;
