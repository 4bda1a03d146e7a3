//! A `scen bench` request as plain data (what the CLI's flags say, with nothing parsed yet) and
//! the plan it becomes: the rank processes' [`BenchSpec`], the pattern, the timing model, and
//! the link class and library the prediction charges. Here rather than in core because the spec
//! is scen_hw's; the rules themselves are core's (perf/plan.rs).

use anyhow::bail;
use scen_core::dtype::DType;
use scen_core::perf::model::{LinkClass, ModelFile};
use scen_core::perf::pattern::Pattern;
use scen_core::perf::plan::{self, PatternRequest};
use scen_core::perf::schedule::Library;
use scen_core::perf::sweep::parse_sweep;
use scen_core::reduce::ReduceOp;
use scen_hw::bench::{BenchJob, BenchPath, BenchSpec};
use std::path::PathBuf;

/// What `scen bench` was asked to do (its flags, unparsed).
#[derive(Debug, Clone)]
pub struct BenchRequest {
    pub op: String,
    pub sizes: String,
    pub dtype: String,
    pub redop: String,
    pub ranks: Option<usize>,
    pub nproc_per_node: Option<usize>,
    pub nnodes: usize,
    pub warmup: usize,
    pub iters: usize,
    pub repeat: usize,
    pub hw: bool,
    pub sim: bool,
    pub raw: bool,
    /// Also run the independent baseline (scripts/bench-baseline.sh), interleaved by sweep.
    pub baseline: bool,
    pub path: BenchPath,
    pub env: Vec<String>,
    pub model: Option<PathBuf>,
    pub calibrate: bool,
    /// Where --calibrate writes the fitted model.
    pub model_out: Option<PathBuf>,
    pub pattern: Option<PatternRequest>,
    /// Note the prediction's wall time (human output only: the JSON report stays the same for
    /// the same input).
    pub wall_time_note: bool,
}

impl BenchRequest {
    /// Is anything predicted (no --hw, or --sim)?
    pub fn predicts(&self) -> bool {
        !self.hw || self.sim
    }
}

/// A checked request, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: BenchSpec,
    pub pattern: Option<Pattern>,
    pub model: ModelFile,
    pub class: LinkClass,
    pub library: Library,
}

/// Checks the request and plans it (the errors in the order the flags are checked).
pub fn plan(req: &BenchRequest) -> anyhow::Result<Plan> {
    let model = match &req.model {
        Some(p) => ModelFile::load(p)?,
        None => ModelFile::default(),
    };
    let dtype: DType = req.dtype.parse().map_err(anyhow::Error::msg)?;
    let _: ReduceOp = req.redop.parse().map_err(anyhow::Error::msg)?;
    let pattern = match &req.pattern {
        Some(p) => Some(p.build(dtype.size_bytes())?),
        None => None,
    };
    let pattern_ranks = pattern.as_ref().map(|p| p.ranks);
    let ranks = plan::ranks(pattern_ranks, req.ranks, req.nproc_per_node, req.nnodes)?;
    if req.hw && req.nnodes > 1 {
        bail!("scen bench --hw runs on one node (--nnodes 1); predictions take --nnodes");
    }
    if req.raw && req.path == BenchPath::Torch {
        bail!("--raw times a bare oneCCL loop; the torch path has none (use --ab oneccl,torch)");
    }
    let jobs = jobs(req, pattern.as_ref())?;
    // torch.distributed on CPU is gloo over the host's sockets, like scen's gloo path.
    let host = matches!(req.path, BenchPath::Gloo | BenchPath::Torch);
    let env = plan::parse_env(&req.env)?;
    let allreduce = env.iter().find(|(k, _)| k == "CCL_ALLREDUCE");
    let predicted = !req.hw || req.sim || req.calibrate;
    let library = plan::library(host, allreduce.map(|(_, v)| v.as_str()), predicted)?;
    let spec = BenchSpec {
        jobs,
        dtype: dtype.name().to_string(),
        redop: req.redop.to_ascii_lowercase(),
        ranks,
        warmup: req.warmup,
        iters: req.iters.max(1),
        path: req.path,
        raw: req.raw,
        env,
    };
    Ok(Plan {
        spec,
        pattern,
        model,
        class: plan::link_class(host, req.nnodes),
        library,
    })
}

/// The pattern's collectives, else every --op at every --sizes.
fn jobs(req: &BenchRequest, pattern: Option<&Pattern>) -> anyhow::Result<Vec<BenchJob>> {
    if let Some(p) = pattern {
        let job = |o: &scen_core::perf::pattern::PatternOp| BenchJob {
            op: o.op,
            size_bytes: o.size_bytes,
        };
        return Ok(p.ops.iter().map(job).collect());
    }
    let ops = plan::parse_ops(&req.op)?;
    let sizes = parse_sweep(&req.sizes)?;
    Ok(ops
        .iter()
        .flat_map(|op| {
            sizes.iter().map(move |s| BenchJob {
                op: *op,
                size_bytes: *s,
            })
        })
        .collect())
}
