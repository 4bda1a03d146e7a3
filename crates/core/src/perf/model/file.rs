//! A model file (`scen bench --calibrate --model-out`, `[world.links] model = ...`): the link
//! classes' costs and the per-op, per-algorithm costs a calibration fitted (continuous across
//! sizes through knees), read with file:line:col errors, and the one prediction rule both `scen
//! bench` and the simulator use ([`ModelRef::predict_us`]).

use super::{non_negative, per_gbps_us, positive, LinkClass, TimingModel};
use crate::perf::schedule::{schedule, Algorithm, Library, Schedule};
use crate::perf::BenchOp;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

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
                crate::perf::sweep::human_size(m)
            )),
            self.alpha_us,
            self.beta_gbps
        )?;
        for k in &self.knees {
            let at = crate::perf::sweep::human_size(k.bytes);
            write!(f, ", {:.3}GB/s above {at}", k.beta_gbps)?;
        }
        Ok(())
    }
}
