//! The timing model: a message of `b` bytes on a link costs `alpha + b / beta`, with one
//! (alpha, beta) per link class. The simulator charges it per message sent (crates/sim), and
//! `scen bench` predicts a collective's time from the schedule of the algorithm the library
//! would run (perf/schedule.rs): the busiest member's messages, the bytes it sends and, where a
//! class has a reduction rate, the bytes it reduces. A model file may also hold per-op and
//! per-algorithm costs fitted by `scen bench --calibrate` (perf/fit.rs) for predictions where one
//! (alpha, beta) per class is not enough. Defaults are documented in docs/bench.md; a scenario's
//! `[world.links]` or a model file overrides them.

use super::schedule::{schedule, Algorithm, Library, Schedule};
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

fn non_negative<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(
            "alpha_us must be a number >= 0 (microseconds per message)",
        ))
    }
}

fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom("must be a number > 0 (GB/s)"))
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
fn per_gbps_us(bytes: f64, gbps: f64) -> f64 {
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

/// A model file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// Not TOML, or not a model (unknown key, wrong type, a negative alpha, a zero beta).
    #[error("{file}:{line}:{col}: {message}")]
    Parse {
        file: String,
        line: usize,
        col: usize,
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: cannot read the model file: {message}")]
    Read { file: String, message: String },
}

/// A change of slope in a per-op cost: the schedule's bytes beyond those of a benchmark size of
/// `bytes` cost `beta_gbps` (up to the next knee). The time stays continuous at the knee.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knee {
    pub bytes: usize,
    #[serde(deserialize_with = "positive")]
    pub beta_gbps: f64,
}

fn increasing_knees<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Knee>, D::Error> {
    let knees = Vec::<Knee>::deserialize(d)?;
    if knees.windows(2).any(|w| w[0].bytes >= w[1].bytes) {
        return Err(serde::de::Error::custom(
            "knees must be in increasing `bytes`",
        ));
    }
    Ok(knees)
}

/// A per-op, per-algorithm cost fitted by `--calibrate`: for `op` run with `algorithm` over
/// `ranks` members on `class`, `alpha_us` per message and the schedule's bytes at `beta_gbps`
/// (the reduction, if any, folded in: within one algorithm it grows with the bytes). `knees`
/// (what `--calibrate` writes) change the per-byte cost above given sizes without a jump in time:
/// a CPU's copies slow down once the buffers leave its caches, a transport changes protocol at
/// some message size. `max_bytes` (files written before knees existed) bounds the entry to
/// benchmark sizes up to it; the entry with the smallest `max_bytes` at or above a size applies,
/// an unbounded one above all of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpCost {
    pub class: LinkClass,
    pub op: BenchOp,
    pub algorithm: Algorithm,
    pub ranks: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    #[serde(deserialize_with = "non_negative")]
    pub alpha_us: f64,
    #[serde(deserialize_with = "positive")]
    pub beta_gbps: f64,
    #[serde(
        default,
        deserialize_with = "increasing_knees",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub knees: Vec<Knee>,
}

impl OpCost {
    /// Microseconds of schedule `s` (of `op` run with `alg` over `ranks` members): `alpha_us` per
    /// message, the wire bytes at `beta_gbps`, and above each knee the bytes beyond the knee
    /// size's at that knee's rate instead of the previous one.
    pub fn schedule_us(&self, op: BenchOp, alg: Algorithm, ranks: usize, s: &Schedule) -> f64 {
        let mut t = s.messages as f64 * self.alpha_us + per_gbps_us(s.wire_bytes, self.beta_gbps);
        let mut below = self.beta_gbps;
        for k in &self.knees {
            let beyond = (s.wire_bytes - schedule(op, alg, k.bytes, ranks).wire_bytes).max(0.0);
            t += per_gbps_us(beyond, k.beta_gbps) - per_gbps_us(beyond, below);
            below = k.beta_gbps;
        }
        t
    }
}

/// A model file: `[links.intra] alpha_us = .. beta_gbps = ..` (and inter, host, store), optional
/// `[[ops]]` per-op costs and notes the calibration wrote.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    #[serde(default)]
    pub links: TimingModel,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpCost>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// 1-based line and column of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

impl ModelFile {
    /// Parses a model file's text; errors name `file:line:col`.
    pub fn parse(file: &str, text: &str) -> Result<ModelFile, ModelError> {
        toml::from_str::<ModelFile>(text).map_err(|e| {
            let (line, col) = e.span().map_or((1, 1), |s| line_col(text, s.start));
            ModelError::Parse {
                file: file.to_string(),
                line,
                col,
                message: e.message().trim().to_string(),
            }
        })
    }

    /// Reads and parses a model file from disk.
    pub fn load(path: &std::path::Path) -> Result<ModelFile, ModelError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
        ModelFile::parse(&file, &text)
    }

    /// A view of the links and per-op costs (what predictions read).
    pub fn view(&self) -> ModelRef<'_> {
        ModelRef {
            links: &self.links,
            ops: &self.ops,
        }
    }

    /// [`ModelRef::op_cost`].
    pub fn op_cost(
        &self,
        class: LinkClass,
        op: BenchOp,
        alg: Algorithm,
        ranks: usize,
        bytes: usize,
    ) -> Option<&OpCost> {
        self.view().op_cost(class, op, alg, ranks, bytes)
    }

    /// [`ModelRef::predict_us`].
    pub fn predict_us(
        &self,
        op: BenchOp,
        bytes: usize,
        ranks: usize,
        class: LinkClass,
        library: Library,
    ) -> f64 {
        self.view().predict_us(op, bytes, ranks, class, library)
    }
}

/// A model's links and per-op costs, borrowed: `scen bench` predicts from a [`ModelFile`], the
/// simulator from a scenario's `[world.links]` (runtime/cost.rs), with the same rules.
#[derive(Debug, Clone, Copy)]
pub struct ModelRef<'a> {
    pub links: &'a TimingModel,
    pub ops: &'a [OpCost],
}

impl<'a> ModelRef<'a> {
    /// The fitted per-op cost for `op` with `alg` on a benchmark size of `bytes` on `class`,
    /// from the entries measured on the rank count nearest `ranks` (the smaller on a tie): the
    /// one whose size range holds `bytes` (past the last bound, the largest).
    pub fn op_cost(
        &self,
        class: LinkClass,
        op: BenchOp,
        alg: Algorithm,
        ranks: usize,
        bytes: usize,
    ) -> Option<&'a OpCost> {
        let mine = |o: &&OpCost| o.class == class && o.op == op && o.algorithm == alg;
        let nearest = self
            .ops
            .iter()
            .filter(mine)
            .map(|o| o.ranks)
            .min_by_key(|r| (r.abs_diff(ranks), *r))?;
        let at = |o: &&OpCost| mine(o) && o.ranks == nearest;
        let bound = |o: &OpCost| o.max_bytes.unwrap_or(usize::MAX);
        self.ops
            .iter()
            .filter(at)
            .filter(|o| bound(o) >= bytes)
            .min_by_key(|o| bound(o))
            .or_else(|| self.ops.iter().filter(at).max_by_key(|o| bound(o)))
    }

    /// Predicted microseconds of `op` on `bytes` (the benchmark size) over `ranks` members on
    /// `class`, run by `library`: a per-op cost where one was fitted for this algorithm, else
    /// one of another algorithm of the same op (a size the calibration saw too few of, such as
    /// oneCCL's direct all_gather below 32 KiB per rank), else the class's link.
    pub fn predict_us(
        &self,
        op: BenchOp,
        bytes: usize,
        ranks: usize,
        class: LinkClass,
        library: Library,
    ) -> f64 {
        let alg = library.select(op, bytes, ranks);
        let s = schedule(op, alg, bytes, ranks);
        let other = || {
            let mut algs: Vec<Algorithm> = self
                .ops
                .iter()
                .filter(|o| o.class == class && o.op == op)
                .map(|o| o.algorithm)
                .collect();
            algs.sort();
            algs.dedup();
            algs.into_iter()
                .find_map(|a| self.op_cost(class, op, a, ranks, bytes))
        };
        match self.op_cost(class, op, alg, ranks, bytes).or_else(other) {
            Some(o) => o.schedule_us(op, alg, ranks, &s),
            None => self.links.cost(class).schedule_us(&s),
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

impl fmt::Display for OpCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} on {} ranks{}: {:.1}us+{:.3}GB/s",
            self.class.name(),
            self.op,
            self.algorithm,
            self.ranks,
            self.max_bytes.map_or(String::new(), |m| format!(
                " up to {}",
                super::sweep::human_size(m)
            )),
            self.alpha_us,
            self.beta_gbps
        )?;
        for k in &self.knees {
            let at = super::sweep::human_size(k.bytes);
            write!(f, ", {:.3}GB/s above {at}", k.beta_gbps)?;
        }
        Ok(())
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
mod tests {
    use super::*;
    use crate::algo::testlink::{run_world, ChanLink};
    use crate::algo::{self, Link, LinkError};
    use crate::dtype::DType;
    use crate::reduce::ReduceOp;
    use crate::tensor::Tensor;
    use std::cell::RefCell;

    #[test]
    fn a_message_costs_alpha_plus_bytes_over_beta() {
        let l = LinkCost::new(10.0, 2.0);
        assert_eq!(l.message_us(0), 10.0);
        assert_eq!(l.message_us(2_000_000), 1010.0);
        let m = TimingModel::default();
        // Ring all_reduce of 4 MB on 4 ranks: 6 messages of 1 MB.
        let p = m.predict_us(BenchOp::AllReduce, 4_000_000, 4, LinkClass::Host);
        assert!((p - 6.0 * (50.0 + 500.0)).abs() < 1e-6, "{p}");
        assert_eq!(
            m.predict_us(BenchOp::AllReduce, 1 << 20, 1, LinkClass::Intra),
            0.0
        );
        // A reduction rate adds the reduced bytes: 3 MB at 1 GB/s = 3000 us more.
        let mut r = m;
        r.host.reduce_gbps = Some(1.0);
        let q = r.predict_us(BenchOp::AllReduce, 4_000_000, 4, LinkClass::Host);
        assert!((q - p - 3000.0).abs() < 1e-6, "{q}");
    }

    #[test]
    fn predictions_use_the_library_algorithm_and_per_op_costs() {
        let mut f = ModelFile::default();
        f.links.intra = LinkCost::new(10.0, 1.0);
        // 16 KiB all_reduce on 4 ranks: oneCCL's nreduce, 6 messages of 4 KiB = 60 + 24.576 us.
        let p = f.predict_us(
            BenchOp::AllReduce,
            16384,
            4,
            LinkClass::Intra,
            Library::OnecclCpu,
        );
        assert!((p - 84.576).abs() < 1e-9, "{p}");
        // 8 KiB: recursive doubling, 2 exchanges of the whole buffer.
        let p = f.predict_us(
            BenchOp::AllReduce,
            8192,
            4,
            LinkClass::Intra,
            Library::OnecclCpu,
        );
        assert!((p - (20.0 + 16.384)).abs() < 1e-9, "{p}");
        f.ops.push(OpCost {
            class: LinkClass::Intra,
            op: BenchOp::AllReduce,
            algorithm: Algorithm::Nreduce,
            ranks: 2,
            max_bytes: None,
            alpha_us: 100.0,
            beta_gbps: 2.0,
            knees: Vec::new(),
        });
        // The 2-rank entry is the nearest for 4 ranks too.
        let p = f.predict_us(
            BenchOp::AllReduce,
            16384,
            4,
            LinkClass::Intra,
            Library::OnecclCpu,
        );
        assert!((p - (600.0 + 12.288)).abs() < 1e-9, "{p}");
        // The ring has no entry: the op's other algorithm's applies (same messages here); another
        // op falls back to the class link.
        let ring = f.predict_us(
            BenchOp::AllReduce,
            16384,
            4,
            LinkClass::Intra,
            Library::Scen,
        );
        assert!((ring - 612.288).abs() < 1e-9, "{ring}");
        let ag = f.predict_us(
            BenchOp::AllGather,
            16384,
            4,
            LinkClass::Intra,
            Library::Scen,
        );
        assert!((ag - (30.0 + 12.288)).abs() < 1e-9, "{ag}");
        // Size ranges: the bounded entry up to its bound, the unbounded one above.
        f.ops[0].max_bytes = Some(65536);
        f.ops.push(OpCost {
            max_bytes: None,
            alpha_us: 0.0,
            beta_gbps: 1.0,
            ..f.ops[0].clone()
        });
        let alpha = |f: &ModelFile, b| {
            f.op_cost(
                LinkClass::Intra,
                BenchOp::AllReduce,
                Algorithm::Nreduce,
                2,
                b,
            )
            .unwrap()
            .alpha_us
        };
        assert_eq!(alpha(&f, 65536), 100.0);
        assert_eq!(alpha(&f, 65537), 0.0);
        f.ops.pop();
        // Past the last bound, the largest range extrapolates.
        assert_eq!(alpha(&f, 1 << 20), 100.0);
    }

    #[test]
    fn model_files_parse_and_name_the_file_line_and_column_on_error() {
        let m =
            ModelFile::parse("m.toml", "[links.intra]\nalpha_us = 5.0\nbeta_gbps = 7.0\n").unwrap();
        assert_eq!(m.links.intra.beta_gbps, 7.0);
        assert_eq!(m.links.host, TimingModel::default().host);
        let e = ModelFile::parse("m.toml", "[links.intra]\nalpha = 5\n").unwrap_err();
        assert!(e.to_string().starts_with("m.toml:2:1: "), "{e}");
        let e =
            ModelFile::parse("m.toml", "[links.intra]\nalpha_us = 5\nbeta_gbps = 0\n").unwrap_err();
        assert!(e.to_string().starts_with("m.toml:3:13: "), "{e}");
        assert!(e.to_string().contains("> 0"), "{e}");
        let e = ModelFile::parse("m.toml", "[links.intra\n").unwrap_err();
        assert!(e.to_string().starts_with("m.toml:1:"), "{e}");
        let e = ModelFile::parse(
            "m.toml",
            "[[ops]]\nclass = \"intra\"\nop = \"all_reduce\"\nalgorithm = \"magic\"\nranks = 2\nalpha_us = 1\nbeta_gbps = 1\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("m.toml:4:13: "), "{e}");
        // The shape --calibrate writes (tests/hw/bench.rs round-trips a real one).
        let text = "notes = [\"n\"]\n[links.intra]\nalpha_us = 10.0\nbeta_gbps = 100.0\nreduce_gbps = 2.5\n\n[[ops]]\nclass = \"intra\"\nop = \"all_to_all\"\nalgorithm = \"pairwise\"\nranks = 4\nalpha_us = 12.5\nbeta_gbps = 0.75\n";
        let f = ModelFile::parse("x", text).unwrap();
        assert_eq!(f.links.intra.reduce_gbps, Some(2.5));
        assert_eq!(
            f.ops,
            vec![OpCost {
                class: LinkClass::Intra,
                op: BenchOp::AllToAll,
                algorithm: Algorithm::Pairwise,
                ranks: 4,
                max_bytes: None,
                alpha_us: 12.5,
                beta_gbps: 0.75,
                knees: Vec::new(),
            }]
        );
        let missing = ModelFile::load(std::path::Path::new("/nonexistent/m.toml")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("/nonexistent/m.toml: cannot read"),
            "{missing}"
        );
    }

    /// An `[[ops]]` entry of an all_to_all pairwise cost on 2 ranks, with `extra` lines.
    fn pairwise_entry(extra: &str) -> String {
        format!("[[ops]]\nclass = \"intra\"\nop = \"all_to_all\"\nalgorithm = \"pairwise\"\nranks = 2\nalpha_us = 50.0\nbeta_gbps = 1.0\n{extra}")
    }

    fn a2a_us(f: &ModelFile, bytes: usize) -> f64 {
        f.predict_us(
            BenchOp::AllToAll,
            bytes,
            2,
            LinkClass::Intra,
            Library::OnecclCpu,
        )
    }

    #[test]
    fn files_with_max_bytes_ranges_still_load_and_predict_as_before() {
        // What --calibrate wrote before knees: two ranges, a jump at the bound.
        let text = format!(
            "{}max_bytes = 1048576\n\n{}",
            pairwise_entry(""),
            pairwise_entry("")
                .replace("alpha_us = 50.0", "alpha_us = 0.0")
                .replace("beta_gbps = 1.0", "beta_gbps = 0.25")
        );
        let f = ModelFile::parse("old.toml", &text).unwrap();
        assert_eq!(f.ops.len(), 2);
        assert!(f.ops.iter().all(|o| o.knees.is_empty()));
        // 2 ranks pairwise: one message of half the size. Up to 1 MiB the first range's cost,
        // above it the second's.
        assert!((a2a_us(&f, 1 << 20) - (50.0 + 524.288)).abs() < 1e-9);
        assert!((a2a_us(&f, 2 << 20) - 4194.304).abs() < 1e-9);
    }

    #[test]
    fn knees_change_the_slope_without_a_jump_and_round_trip() {
        let text = pairwise_entry("knees = [{ bytes = 1048576, beta_gbps = 0.25 }]\n");
        let f = ModelFile::parse("new.toml", &text).unwrap();
        assert_eq!(
            f.ops[0].knees,
            vec![Knee {
                bytes: 1 << 20,
                beta_gbps: 0.25
            }]
        );
        let at = a2a_us(&f, 1 << 20);
        assert!((at - (50.0 + 524.288)).abs() < 1e-9, "{at}");
        // 1 MiB more: half of it on the wire, at 0.25 GB/s instead of 1.
        assert!((a2a_us(&f, 2 << 20) - (at + 2097.152)).abs() < 1e-9);
        assert!((a2a_us(&f, (1 << 20) + 2) - at).abs() < 1e-2);
        // (core writes no TOML; the same serde derive through JSON, src writes the file.)
        let back: ModelFile = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        assert!(
            f.ops[0].to_string().ends_with(", 0.250GB/s above 1M"),
            "{}",
            f.ops[0]
        );
        // Knees out of order, an unknown key in one, a zero rate: refused with their place.
        let e = ModelFile::parse(
            "m.toml",
            &pairwise_entry(
                "knees = [{ bytes = 2, beta_gbps = 1 }, { bytes = 1, beta_gbps = 1 }]\n",
            ),
        )
        .unwrap_err();
        assert!(e.to_string().contains("increasing"), "{e}");
        let e = ModelFile::parse(
            "m.toml",
            &pairwise_entry("knees = [{ bytes = 2, gbps = 1 }]\n"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("m.toml:8:"), "{e}");
        let e = ModelFile::parse(
            "m.toml",
            &pairwise_entry("knees = [{ bytes = 2, beta_gbps = 0 }]\n"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("> 0"), "{e}");
    }

    /// Counts rank 0's messages and their largest payload.
    struct Counting {
        inner: ChanLink,
        sent: RefCell<(usize, usize)>,
    }

    impl Link for Counting {
        fn rank(&self) -> usize {
            self.inner.rank()
        }
        fn size(&self) -> usize {
            self.inner.size()
        }
        async fn send(&self, to: usize, data: Vec<u8>, bytes: usize) -> Result<(), LinkError> {
            {
                let mut s = self.sent.borrow_mut();
                s.0 += 1;
                s.1 = s.1.max(bytes - 9);
            }
            self.inner.send(to, data, bytes).await
        }
        async fn recv(&self, from: usize) -> Result<Vec<u8>, LinkError> {
            self.inner.recv(from).await
        }
    }

    /// (messages, largest payload) of the member that sends most, running core's
    /// implementation of `alg`.
    fn measured(op: BenchOp, alg: Algorithm, n: usize, bytes: usize) -> (usize, usize) {
        let per_rank = run_world(n, move |l| async move {
            let c = Counting {
                inner: l,
                sent: RefCell::new((0, 0)),
            };
            let count = op.send_count(bytes, 4, n);
            let mut t = Tensor::from_fn(DType::F32, vec![count], |i| i as f64);
            match (op, alg) {
                (BenchOp::AllReduce, Algorithm::Nreduce) => {
                    algo::all_reduce_nreduce(&c, &mut t, ReduceOp::Sum).await
                }
                (BenchOp::AllReduce, Algorithm::RecursiveDoubling) => {
                    algo::all_reduce_recursive_doubling(&c, &mut t, ReduceOp::Sum).await
                }
                (BenchOp::AllReduce, _) => algo::all_reduce(&c, &mut t, ReduceOp::Sum)
                    .await
                    .map(|_| ()),
                (BenchOp::AllGather, Algorithm::Direct) => {
                    algo::all_gather_direct(&c, &t).await.map(|_| ())
                }
                (BenchOp::AllGather, _) => algo::all_gather(&c, &t).await.map(|_| ()),
                (BenchOp::ReduceScatter, _) => {
                    algo::reduce_scatter(&c, &t, ReduceOp::Sum, &[count / n])
                        .await
                        .map(|_| ())
                }
                (BenchOp::AllToAll, _) => {
                    let chunk = bytes / n;
                    let sends = vec![vec![0u8; chunk]; n];
                    algo::all_to_all(&c, sends, &vec![chunk; n])
                        .await
                        .map(|_| ())
                }
                (BenchOp::Broadcast, _) => algo::broadcast(&c, &mut t, 0).await,
                (BenchOp::Reduce, _) => algo::reduce(&c, &mut t, ReduceOp::Sum, 0).await,
            }
            .expect("collective");
            c.sent.into_inner()
        });
        // The critical path: the most messages any member sends or (trees) the depth.
        let msgs = per_rank.iter().map(|p| p.0).max().unwrap_or(0);
        let big = per_rank.iter().map(|p| p.1).max().unwrap_or(0);
        (msgs, big)
    }

    #[test]
    fn schedules_match_the_algorithms_real_messages() {
        for n in [2usize, 3, 4, 5, 8] {
            let bytes = 4 * 8 * 9 * 7 * 5; // divisible by every n and by the f32 width
            let mut algs: Vec<(BenchOp, Algorithm)> = BenchOp::ALL
                .iter()
                .map(|&op| (op, Library::Scen.select(op, bytes, n)))
                .collect();
            algs.extend([
                (BenchOp::AllReduce, Algorithm::Nreduce),
                (BenchOp::AllReduce, Algorithm::RecursiveDoubling),
                (BenchOp::AllGather, Algorithm::Direct),
            ]);
            for (op, alg) in algs {
                let s = schedule(op, alg, bytes, n);
                let (msgs, big) = measured(op, alg, n, bytes);
                let want_big = (s.wire_bytes / s.messages as f64).round() as usize;
                match op {
                    // Reduce: every member sends once; the root receives log2(n) in sequence.
                    BenchOp::Reduce => assert_eq!(msgs, 1, "{op} {alg} n={n}"),
                    // A binomial tree's root sends log2(n) messages (its critical path).
                    _ => assert_eq!(msgs, s.messages, "{op} {alg} n={n}"),
                }
                assert_eq!(big, want_big, "{op} {alg} n={n}");
            }
        }
    }
}
