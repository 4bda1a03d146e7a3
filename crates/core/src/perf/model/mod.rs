//! The timing model: a message of `b` bytes on a link costs `alpha + b / beta`, with one
//! (alpha, beta) per link class. `scen bench` predicts a collective's time from the schedule of
//! the algorithm the library would run (perf/schedule.rs): the busiest member's messages, the
//! bytes it sends and, where a class has a reduction rate, the bytes it reduces; the simulator
//! charges a collective that same prediction (runtime/cost.rs) and a send alpha + bytes/beta.
//! A model file (file.rs) may also hold per-op and per-algorithm costs fitted by `scen bench
//! --calibrate` (perf/fit.rs) where one (alpha, beta) per class is not enough. Defaults are
//! documented in docs/bench.md; a scenario's `[world.links]` or a model file overrides them.

mod file;

pub use file::{line_col, Knee, ModelError, ModelFile, ModelRef, OpCost};

use super::schedule::{schedule, Library, Schedule};
use super::BenchOp;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// Which kind of link a message crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkClass {
    /// Device groups (xccl/nccl) between ranks of one node: the device fabric.
    Intra,
    /// Device groups between nodes: the scale-out network.
    Inter,
    /// Host (gloo) groups: TCP between processes.
    Host,
    /// TCPStore requests.
    Store,
}

impl LinkClass {
    pub const ALL: [LinkClass; 4] = [
        LinkClass::Intra,
        LinkClass::Inter,
        LinkClass::Host,
        LinkClass::Store,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LinkClass::Intra => "intra",
            LinkClass::Inter => "inter",
            LinkClass::Host => "host",
            LinkClass::Store => "store",
        }
    }

    /// The class of a message: device or host group, between ranks on one node or not.
    pub fn of(device: bool, same_node: bool) -> LinkClass {
        match (device, same_node) {
            (true, true) => LinkClass::Intra,
            (true, false) => LinkClass::Inter,
            (false, _) => LinkClass::Host,
        }
    }
}

/// A link's latency scen can time: 0 up to scen's longest duration (30 days), in µs (a fuzzed
/// 2^63 µs overflowed the simulator's clock).
pub fn alpha_in_range(us: f64) -> bool {
    us.is_finite() && (0.0..=crate::scenario::limits::MAX_DURATION_MS as f64 * 1000.0).contains(&us)
}

/// The error of an `alpha_us` out of [`alpha_in_range`].
pub const ALPHA_RANGE: &str =
    "alpha_us must be a number from 0 to 2592000000000 (microseconds per message, at most 30 days)";

/// A link's bandwidth scen can time: 1 KB/s to 1 PB/s, in GB/s (a slower one makes a large
/// tensor's message outlast scen's longest duration).
pub fn beta_in_range(gbps: f64) -> bool {
    gbps.is_finite() && (1e-6..=1e6).contains(&gbps)
}

/// The error of a `beta_gbps` out of [`beta_in_range`].
pub const BETA_RANGE: &str = "beta_gbps must be a number from 0.000001 to 1000000 (GB/s)";

pub(super) fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if alpha_in_range(v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(ALPHA_RANGE))
    }
}

pub(super) fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if beta_in_range(v) {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(BETA_RANGE))
    }
}

fn positive_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    positive(d).map(Some)
}

/// One link class's cost: `alpha_us` per message plus bytes at `beta_gbps` (1e9 bytes/s);
/// `reduce_gbps`, when set, is the rate at which the class's ranks reduce (CPU reduction is
/// compute, not link; unset: reductions are free).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCost {
    #[serde(deserialize_with = "non_negative")]
    pub alpha_us: f64,
    #[serde(deserialize_with = "positive")]
    pub beta_gbps: f64,
    #[serde(
        default,
        deserialize_with = "positive_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub reduce_gbps: Option<f64>,
}

impl LinkCost {
    pub fn new(alpha_us: f64, beta_gbps: f64) -> LinkCost {
        LinkCost {
            alpha_us,
            beta_gbps,
            reduce_gbps: None,
        }
    }

    /// Microseconds to move one message of `bytes`.
    pub fn message_us(&self, bytes: usize) -> f64 {
        self.alpha_us.max(0.0) + per_gbps_us(bytes as f64, self.beta_gbps)
    }

    /// Microseconds of a schedule on this link.
    pub fn schedule_us(&self, s: &Schedule) -> f64 {
        s.messages as f64 * self.alpha_us.max(0.0)
            + per_gbps_us(s.wire_bytes, self.beta_gbps)
            + self
                .reduce_gbps
                .map_or(0.0, |r| per_gbps_us(s.reduce_bytes, r))
    }
}

/// Microseconds to handle `bytes` at `gbps` (1e9 bytes/s); 0 at a non-positive rate.
pub(super) fn per_gbps_us(bytes: f64, gbps: f64) -> f64 {
    if gbps > 0.0 {
        bytes / (gbps * 1e3)
    } else {
        0.0
    }
}

/// The cost of every link class. Defaults: a node of Intel GPUs on a device fabric (Xe Link
/// class, 10 us / 100 GB/s), a 100 Gb/s scale-out network (20 us / 12.5 GB/s), host TCP between
/// processes for gloo (50 us / 2 GB/s) and TCPStore round trips (100 us / 1 GB/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingModel {
    #[serde(default = "default_intra")]
    pub intra: LinkCost,
    #[serde(default = "default_inter")]
    pub inter: LinkCost,
    #[serde(default = "default_host")]
    pub host: LinkCost,
    #[serde(default = "default_store")]
    pub store: LinkCost,
}

fn default_intra() -> LinkCost {
    LinkCost::new(10.0, 100.0)
}
fn default_inter() -> LinkCost {
    LinkCost::new(20.0, 12.5)
}
fn default_host() -> LinkCost {
    LinkCost::new(50.0, 2.0)
}
fn default_store() -> LinkCost {
    LinkCost::new(100.0, 1.0)
}

impl Default for TimingModel {
    fn default() -> Self {
        TimingModel {
            intra: default_intra(),
            inter: default_inter(),
            host: default_host(),
            store: default_store(),
        }
    }
}

impl TimingModel {
    pub fn cost(&self, class: LinkClass) -> &LinkCost {
        match class {
            LinkClass::Intra => &self.intra,
            LinkClass::Inter => &self.inter,
            LinkClass::Host => &self.host,
            LinkClass::Store => &self.store,
        }
    }

    pub fn cost_mut(&mut self, class: LinkClass) -> &mut LinkCost {
        match class {
            LinkClass::Intra => &mut self.intra,
            LinkClass::Inter => &mut self.inter,
            LinkClass::Host => &mut self.host,
            LinkClass::Store => &mut self.store,
        }
    }

    /// Microseconds one message of `bytes` costs on `class`.
    pub fn message_us(&self, class: LinkClass, bytes: usize) -> f64 {
        self.cost(class).message_us(bytes)
    }

    /// Predicted microseconds of `op` on `bytes` over `ranks` members whose slowest link is
    /// `class`, with scen's own algorithms and no per-op costs (what the simulator charges).
    pub fn predict_us(&self, op: BenchOp, bytes: usize, ranks: usize, class: LinkClass) -> f64 {
        let alg = Library::Scen.select(op, bytes, ranks);
        self.cost(class)
            .schedule_us(&schedule(op, alg, bytes, ranks))
    }
}

impl fmt::Display for TimingModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = LinkClass::ALL
            .iter()
            .map(|c| {
                let l = self.cost(*c);
                let red = l
                    .reduce_gbps
                    .map_or(String::new(), |r| format!(" (reduce {r:.3}GB/s)"));
                format!(
                    "{} {:.1}us+{:.3}GB/s{red}",
                    c.name(),
                    l.alpha_us,
                    l.beta_gbps
                )
            })
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// Relative error of a prediction, signed: (predicted - measured) / measured.
pub fn rel_error(predicted_us: f64, measured_us: f64) -> f64 {
    if measured_us <= 0.0 {
        return 0.0;
    }
    (predicted_us - measured_us) / measured_us
}

#[cfg(test)]
mod tests;
