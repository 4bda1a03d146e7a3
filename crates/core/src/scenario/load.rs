//! From TOML text to a validated [`Scenario`], with every error naming file:line:col.
//!
//! The only place that knows which fields belong to which op, what the defaults are, and which
//! values are rejected before anything runs (unknown keys, wrong types, out-of-range ranks, bad
//! URLs). Run-time c10d errors (a missing env var, a bad port in the environment) are not
//! reported here: they belong to the model, exactly as PyTorch raises them.

use super::env::{build_rank_envs, EnvLayer};
use super::expr::{interpolate, Expr};
use super::limits::{self, human_bytes};
use super::model::*;
use super::raw::*;
use crate::c10d::collective::{CollOp, Layout};
use crate::dtype::DType;
use crate::reduce::ReduceOp;
use std::cell::RefCell;
use std::collections::BTreeMap;
use toml::Spanned;

mod faults;
mod sglang;

/// A scenario file problem, located.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Reads and validates a scenario file from disk.
pub fn load_file(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let cannot = |line, col, message: String| ScenarioError {
        file: file.clone(),
        line,
        col,
        message,
    };
    let bytes =
        std::fs::read(path).map_err(|e| cannot(0, 0, format!("cannot read the scenario: {e}")))?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            // Locate the first bad byte in the valid prefix.
            let at = e.utf8_error().valid_up_to();
            let valid = std::str::from_utf8(&e.as_bytes()[..at]).unwrap_or("");
            let loc = Locator::new(valid).loc(valid, at);
            return Err(cannot(
                loc.line,
                loc.col,
                format!("not valid UTF-8: byte offset {at} (0x{:02x}) does not start a UTF-8 character; scenario files are UTF-8 text", e.as_bytes()[at]),
            ));
        }
    };
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "scenario".into());
    parse(&text, &file, &name)
}

/// Byte offset -> line:col (columns count characters), in O(log lines) per lookup so loading is
/// linear in the file's size however many steps it has.
struct Locator {
    line_starts: Vec<usize>,
}

impl Locator {
    fn new(text: &str) -> Locator {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Locator { line_starts }
    }

    fn loc(&self, text: &str, offset: usize) -> Loc {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|s| *s <= offset).max(1);
        let start = self.line_starts[line - 1];
        Loc {
            line,
            col: text[start..offset].chars().count() + 1,
        }
    }
}

/// Parses scenario text; `file` names it in errors, `default_name` is used when it has none.
pub fn parse(text: &str, file: &str, default_name: &str) -> Result<Scenario, ScenarioError> {
    let cx = Cx {
        text,
        file,
        works: RefCell::new(Vec::new()),
        lines: Locator::new(text),
        denoise_work: std::cell::Cell::new(0),
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        cx.err(at, e.message().trim_end().to_string())
    })?;
    cx.scenario(raw, default_name)
}

struct Cx<'a> {
    text: &'a str,
    file: &'a str,
    /// Work handles named by `async_op = true` steps so far (for `wait`).
    works: RefCell<Vec<String>>,
    lines: Locator,
    /// denoise_step work so far (layers x elements), against [`limits::MAX_DENOISE_WORK`].
    denoise_work: std::cell::Cell<u64>,
}

type R<T> = Result<T, ScenarioError>;

const STEP_COMMON: [&str; 3] = ["op", "id", "on"];
const TENSOR_FIELDS: [&str; 4] = ["dtype", "shape", "device", "fill"];

fn op_fields(op: &str) -> Option<Vec<&'static str>> {
    let tensor = |extra: &[&'static str]| {
        let mut v = vec!["group"];
        v.extend(TENSOR_FIELDS);
        v.extend(extra);
        v
    };
    if let Some(c) = CollOp::parse(op) {
        let mut v = tensor(&[]);
        if c.reduces() {
            v.push("reduce_op");
        }
        v.extend(c.root_field());
        if c.coalesced() {
            v.push("count");
        }
        if c.splits() {
            v.extend(["input_split_sizes", "output_split_sizes"]);
        }
        v.extend(["expect", "expect_ulps", "async_op", "work"]);
        return Some(v);
    }
    Some(match op {
        "init_process_group" => vec![
            "backend",
            "init_method",
            "device_id",
            "timeout_s",
            "rank",
            "world_size",
        ],
        "new_group" => vec![
            "ranks",
            "backend",
            "use_local_synchronization",
            "device_id",
            "timeout_s",
            "as",
        ],
        "destroy_process_group" | "barrier" => vec!["group"],
        "set_device" => vec!["device"],
        "wait" => vec!["work"],
        "batch_isend_irecv" => tensor(&["ops", "expect", "expect_ulps"]),
        "send" => tensor(&["dst"]),
        "recv" => tensor(&["src", "expect", "expect_ulps"]),
        "log" => vec!["message"],
        "sleep" => vec!["ms"],
        other => return sglang::op_fields(other),
    })
}

const OPS: &str = "init_process_group, new_group, destroy_process_group, set_device, barrier, \
                   all_reduce, all_reduce_coalesced, reduce, broadcast, all_gather, \
                   all_gather_into_tensor, all_gather_coalesced, all_gather_into_tensor_coalesced, \
                   gather, scatter, reduce_scatter, reduce_scatter_tensor, \
                   reduce_scatter_tensor_coalesced, all_to_all_single, all_to_all, send, recv, \
                   batch_isend_irecv, wait, log, sleep, init_distributed_environment, \
                   initialize_model_parallel, all_to_all_4d, usp_all_to_all, broadcast_pyobj, \
                   denoise_step";

/// Variables of `fill` and `expect` formulas.
const ELEM_VARS: [&str; 7] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "i",
    "n",
];
const GATHER_VARS: [&str; 9] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "i",
    "n",
    "chunk",
    "j",
];
/// Coalesced ops add `k`, the tensor's index in the list.
const TENSORS_VARS: [&str; 8] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "i",
    "n",
    "k",
];
const TENSOR_CHUNKS_VARS: [&str; 10] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "i",
    "n",
    "chunk",
    "j",
    "k",
];
/// Split-size formulas: the rank variables and `j`, the member the split is for.
const SPLIT_VARS: [&str; 6] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "j",
];
/// batch_isend_irecv's received tensors: `peer` (the sender) and `k` (the op's index).
const BATCH_VARS: [&str; 9] = [
    "rank",
    "local_rank",
    "node",
    "world_size",
    "local_world_size",
    "i",
    "n",
    "peer",
    "k",
];

impl Cx<'_> {
    fn loc(&self, offset: usize) -> Loc {
        self.lines.loc(self.text, offset)
    }

    /// The source offset of byte `inner` of the string value whose literal starts at `start`.
    /// Exact for plain one-line strings; for strings with escapes or multi-line strings (whose
    /// value differs from the source) the literal's first character.
    fn in_str(&self, start: usize, inner: usize) -> usize {
        let src = self.text.get(start..).unwrap_or("");
        let (open, quote) = if src.starts_with("\"\"\"") || src.starts_with("'''") {
            (3, &src[..3])
        } else if src.starts_with('"') || src.starts_with('\'') {
            (1, &src[..1])
        } else {
            return start;
        };
        let body = &src[open..];
        let Some(end) = body.find(quote) else {
            return start + open;
        };
        // Literal strings ('...') have no escapes; basic ones are exact without a backslash.
        let exact = quote.starts_with('\'') || !body[..end].contains('\\');
        match (exact, open) {
            (true, 1) if !body[..end].contains('\n') => start + open + inner,
            // A newline right after the opening delimiter is not part of the value.
            (true, 3) => start + open + usize::from(body.starts_with('\n')) + inner,
            _ => start + open,
        }
    }

    fn err(&self, offset: usize, message: impl Into<String>) -> ScenarioError {
        let loc = self.loc(offset);
        ScenarioError {
            file: self.file.to_string(),
            line: loc.line,
            col: loc.col,
            message: message.into(),
        }
    }

    fn at<T>(&self, s: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        self.err(s.span().start, message)
    }

    fn scenario(&self, raw: RawScenario, default_name: &str) -> R<Scenario> {
        let world = self.world(raw.world)?;
        if raw.step.len() > limits::MAX_STEPS {
            let at = raw.step[limits::MAX_STEPS].span().start;
            return Err(self.err(
                at,
                format!(
                    "too many steps: {} (scen's limit is {} steps per scenario)",
                    raw.step.len(),
                    limits::MAX_STEPS
                ),
            ));
        }
        let mut steps = Vec::new();
        let mut handles: Vec<String> = Vec::new();
        for (index, s) in raw.step.into_iter().enumerate() {
            let step = self.step(index, s, &world, &mut handles)?;
            steps.push(step);
        }
        let expect = raw
            .expect
            .into_iter()
            .map(|e| self.expectation(e, &world, &steps))
            .collect::<R<Vec<_>>>()?;
        let sim = self.sim(raw.sim)?;
        let faults = raw
            .faults
            .into_iter()
            .enumerate()
            .map(|(i, f)| self.fault(i, f, &world, &steps))
            .collect::<R<Vec<_>>>()?;
        Ok(Scenario {
            name: raw
                .scenario
                .name
                .unwrap_or_else(|| default_name.to_string()),
            file: self.file.to_string(),
            description: raw.scenario.description,
            world,
            steps,
            expect,
            sim,
            faults,
            time_scale: Default::default(),
        })
    }

    fn sim(&self, raw: RawSim) -> R<SimSettings> {
        let (lo, hi) = match raw.latency_ms {
            Some(l) => {
                let [lo, hi] = *l.get_ref();
                if lo > hi {
                    return Err(self.at(&l, "latency_ms = [min, max] needs min <= max"));
                }
                if hi > limits::MAX_DURATION_MS {
                    return Err(self.at(
                        &l,
                        format!(
                            "latency_ms {hi} is over scen's limit for a duration ({} ms, 30 days)",
                            limits::MAX_DURATION_MS
                        ),
                    ));
                }
                (lo, hi)
            }
            None => (0, 1),
        };
        Ok(SimSettings {
            seed: raw.seed.unwrap_or(0),
            latency_min_ms: lo,
            latency_max_ms: hi,
            random_order: raw.random_order.unwrap_or(false),
        })
    }

    fn positive(&self, v: &Option<Spanned<i64>>, default: usize, what: &str) -> R<usize> {
        match v {
            None => Ok(default),
            Some(s) if *s.get_ref() >= 1 && *s.get_ref() <= 4096 => Ok(*s.get_ref() as usize),
            Some(s) => Err(self.at(s, format!("{what} must be between 1 and 4096"))),
        }
    }

    fn platform(&self, s: &Spanned<String>) -> R<Platform> {
        Platform::parse(s.get_ref()).ok_or_else(|| {
            self.at(
                s,
                format!("unknown platform `{}` (xpu, cuda, cpu)", s.get_ref()),
            )
        })
    }

    fn world(&self, sw: Spanned<RawWorld>) -> R<World> {
        let w = sw.into_inner();
        let n_nodes = self.positive(&w.nodes, 1, "nodes")?;
        let per_node = self.positive(&w.ranks_per_node, 1, "ranks_per_node")?;
        let platform = match &w.platform {
            Some(p) => self.platform(p)?,
            None => Platform::Xpu,
        };
        let devices = match &w.devices_per_node {
            Some(d) if *d.get_ref() >= 0 => *d.get_ref() as usize,
            Some(d) => return Err(self.at(d, "devices_per_node must be >= 0")),
            None if platform == Platform::Cpu => 0,
            None => per_node,
        };
        let mut nodes: Vec<Node> = (0..n_nodes)
            .map(|index| Node {
                index,
                name: format!("node{index}"),
                platform,
                devices,
            })
            .collect();
        let mut node_env: BTreeMap<usize, Vec<EnvLayer>> = BTreeMap::new();
        for rn in &w.node {
            let rn = rn.get_ref();
            let idx = *rn.node.get_ref();
            if idx < 0 || idx as usize >= n_nodes {
                return Err(self.at(
                    &rn.node,
                    format!("node {idx} is out of range (nodes = {n_nodes})"),
                ));
            }
            let node = &mut nodes[idx as usize];
            if let Some(p) = &rn.platform {
                node.platform = self.platform(p)?;
            }
            if let Some(d) = &rn.devices {
                if *d.get_ref() < 0 {
                    return Err(self.at(d, "devices must be >= 0"));
                }
                node.devices = *d.get_ref() as usize;
            }
            node_env
                .entry(idx as usize)
                .or_default()
                .push(self.env_layer(&rn.env, Selector::All)?);
        }
        let master_addr = match &w.master_addr {
            Some(a) => self.host(a, n_nodes)?,
            None if n_nodes == 1 => "127.0.0.1".to_string(),
            None => "node0".to_string(),
        };
        let master_port = match &w.master_port {
            Some(p) if (0..=65535).contains(p.get_ref()) => *p.get_ref() as u16,
            Some(p) => {
                return Err(self.at(
                    p,
                    format!("master_port must be 0..65535, got {}", p.get_ref()),
                ))
            }
            None => 29500,
        };
        let world_size = n_nodes * per_node;
        if world_size > limits::MAX_WORLD_SIZE {
            let at = w
                .ranks_per_node
                .as_ref()
                .or(w.nodes.as_ref())
                .map_or(0, |v| v.span().start);
            return Err(self.err(
                at,
                format!(
                    "world too large: {n_nodes} nodes x {per_node} ranks = {world_size} ranks (scen's limit is {} ranks)",
                    limits::MAX_WORLD_SIZE
                ),
            ));
        }
        let global = self.env_layer(&w.env, Selector::All)?;
        let mut rank_layers = Vec::new();
        for re in &w.rank {
            let re = re.get_ref();
            let on = self.selector(&re.on, world_size)?;
            rank_layers.push(self.env_layer(&re.env, on)?);
        }
        let ranks = build_rank_envs(
            n_nodes,
            per_node,
            &master_addr,
            master_port,
            &global,
            &node_env,
            &rank_layers,
        )
        .map_err(|(layer_offset, msg)| self.err(layer_offset, msg))?;
        let services = w
            .service
            .iter()
            .map(|s| self.service(s.get_ref(), n_nodes))
            .collect::<R<Vec<_>>>()?;
        let launcher = match &w.launcher {
            None => Launcher::Processes,
            Some(l) => Launcher::parse(l.get_ref()).ok_or_else(|| {
                self.at(
                    l,
                    format!(
                        "unknown launcher `{}` (known: processes, torchrun)",
                        l.get_ref()
                    ),
                )
            })?,
        };
        let links = match &w.links {
            Some(l) => self.link_costs(l.get_ref())?,
            None => Default::default(),
        };
        Ok(World {
            nodes,
            ranks_per_node: per_node,
            ranks,
            services,
            launcher,
            links,
        })
    }

    /// `[world.links]`: per class `alpha_us` (>= 0) and `beta_gbps` (> 0), defaults elsewhere.
    fn link_costs(&self, raw: &super::raw::RawLinks) -> R<crate::perf::model::TimingModel> {
        use crate::perf::model::{LinkClass, TimingModel};
        let mut m = TimingModel::default();
        let classes = [
            (LinkClass::Intra, &raw.intra),
            (LinkClass::Inter, &raw.inter),
            (LinkClass::Host, &raw.host),
            (LinkClass::Store, &raw.store),
        ];
        for (class, c) in classes {
            let Some(c) = c else { continue };
            let cost = m.cost_mut(class);
            if let Some(a) = &c.get_ref().alpha_us {
                if !(a.get_ref().is_finite() && *a.get_ref() >= 0.0) {
                    return Err(self.at(
                        a,
                        "alpha_us must be a number >= 0 (microseconds per message)",
                    ));
                }
                cost.alpha_us = *a.get_ref();
            }
            if let Some(b) = &c.get_ref().beta_gbps {
                if !(b.get_ref().is_finite() && *b.get_ref() > 0.0) {
                    return Err(self.at(b, "beta_gbps must be a number > 0 (GB/s)"));
                }
                cost.beta_gbps = *b.get_ref();
            }
        }
        Ok(m)
    }

    fn host(&self, a: &Spanned<String>, n_nodes: usize) -> R<String> {
        let h = a.get_ref();
        let known = h == "localhost"
            || h == "127.0.0.1"
            || h.strip_prefix("node")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n < n_nodes);
        if known {
            Ok(h.clone())
        } else {
            Err(self.at(
                a,
                format!(
                    "unknown host `{h}`: use node0..node{}, localhost or 127.0.0.1",
                    n_nodes - 1
                ),
            ))
        }
    }

    fn service(&self, s: &RawService, n_nodes: usize) -> R<Service> {
        if s.kind.get_ref() != "tcp_store" {
            return Err(self.at(&s.kind, "unknown service kind (only `tcp_store`)"));
        }
        let node = *s.node.get_ref();
        if node < 0 || node as usize >= n_nodes {
            return Err(self.at(&s.node, format!("node {node} is out of range")));
        }
        let port = *s.port.get_ref();
        if !(1..=65535).contains(&port) {
            return Err(self.at(&s.port, "port must be 1..65535"));
        }
        let ws = *s.world_size.get_ref();
        if ws < 1 {
            return Err(self.at(&s.world_size, "world_size must be >= 1"));
        }
        Ok(Service {
            node: node as usize,
            port: port as u16,
            world_size: ws as usize,
            label: s.label.clone().unwrap_or_else(|| "another job".into()),
            keys: s.keys.clone(),
        })
    }

    fn env_layer(&self, env: &BTreeMap<String, Spanned<String>>, on: Selector) -> R<EnvLayer> {
        let mut vars = Vec::new();
        for (k, v) in env {
            // Check templates now so a typo is reported at its place, not per rank later.
            interpolate(v.get_ref(), &RANK_VARS, &|_| 0.0).map_err(|e| {
                self.err(
                    self.in_str(v.span().start, e.offset),
                    format!("in `{k}`: {e}"),
                )
            })?;
            vars.push((k.clone(), v.get_ref().clone(), v.span().start));
        }
        Ok(EnvLayer { on, vars })
    }

    fn rank_in_range(&self, v: i64, at: usize, world_size: usize) -> R<usize> {
        if v < 0 || v as usize >= world_size {
            Err(self.err(
                at,
                format!(
                    "rank {v} is out of range: the world has ranks 0..{} (world_size={world_size})",
                    world_size - 1
                ),
            ))
        } else {
            Ok(v as usize)
        }
    }

    fn selector(&self, s: &Spanned<RawSelector>, world_size: usize) -> R<Selector> {
        let at = s.span().start;
        match s.get_ref() {
            RawSelector::Rank(r) => Ok(Selector::Ranks(vec![
                self.rank_in_range(*r, at, world_size)?
            ])),
            RawSelector::Ranks(list) => Ok(Selector::Ranks(
                list.iter()
                    .map(|r| self.rank_in_range(*r, at, world_size))
                    .collect::<R<_>>()?,
            )),
            RawSelector::Expr(src) => Expr::parse(src, &RANK_VARS)
                .map(Selector::Expr)
                .map_err(|e| self.err(self.in_str(at, e.offset), e.message)),
        }
    }

    fn expr(&self, s: &Spanned<String>, vars: &[&str]) -> R<Expr> {
        Expr::parse(s.get_ref(), vars)
            .map_err(|e| self.err(self.in_str(s.span().start, e.offset), e.message))
    }

    fn present_fields(r: &RawStep) -> Vec<(&'static str, usize)> {
        fn f<T>(name: &'static str, v: &Option<Spanned<T>>) -> Option<(&'static str, usize)> {
            v.as_ref().map(|s| (name, s.span().start))
        }
        [
            f("backend", &r.backend),
            f("init_method", &r.init_method),
            f("device_id", &r.device_id),
            f("timeout_s", &r.timeout_s),
            f("rank", &r.rank),
            f("world_size", &r.world_size),
            f("ranks", &r.ranks),
            f("use_local_synchronization", &r.use_local_synchronization),
            f("as", &r.as_name),
            f("group", &r.group),
            f("dtype", &r.dtype),
            f("shape", &r.shape),
            f("device", &r.device),
            f("fill", &r.fill),
            f("reduce_op", &r.reduce_op),
            f("src", &r.src),
            f("dst", &r.dst),
            f("expect", &r.expect),
            f("count", &r.count),
            f("input_split_sizes", &r.input_split_sizes),
            f("output_split_sizes", &r.output_split_sizes),
            f("async_op", &r.async_op),
            f("work", &r.work),
            f("ops", &r.ops),
            f("message", &r.message),
            f("ms", &r.ms),
        ]
        .into_iter()
        .flatten()
        .chain(sglang::present_fields(r))
        .collect()
    }

    fn step(
        &self,
        index: usize,
        s: Spanned<RawStep>,
        world: &World,
        handles: &mut Vec<String>,
    ) -> R<Step> {
        let start = s.span().start;
        let r = s.into_inner();
        let Some(op) = &r.op else {
            return Err(self.err(
                start,
                format!("step {} has no `op` (one of: {OPS})", index + 1),
            ));
        };
        let Some(allowed) = op_fields(op.get_ref()) else {
            return Err(self.at(op, format!("unknown op `{}` (one of: {OPS})", op.get_ref())));
        };
        for (name, at) in Self::present_fields(&r) {
            if !allowed.contains(&name) && !STEP_COMMON.contains(&name) {
                return Err(self.err(
                    at,
                    format!(
                        "`{name}` does not apply to {} (its fields: {})",
                        op.get_ref(),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let on = match &r.on {
            Some(sel) => self.selector(sel, world.size())?,
            None => Selector::All,
        };
        let kind = self.step_kind(op.get_ref(), &r, world, handles)?;
        Ok(Step {
            index,
            loc: self.loc(op.span().start),
            id: r.id.map(|i| i.into_inner()),
            on,
            kind,
        })
    }

    fn step_kind(
        &self,
        op: &str,
        r: &RawStep,
        world: &World,
        handles: &mut Vec<String>,
    ) -> R<StepKind> {
        let ws = world.size();
        let group = self.group_ref(&r.group, handles)?;
        let op_at = r.op.as_ref().map(|o| o.span().start).unwrap_or(0);
        if let Some(c) = CollOp::parse(op) {
            return Ok(StepKind::Collective(
                self.coll_step(c, r, group, ws, op_at)?,
            ));
        }
        Ok(match op {
            "init_process_group" => StepKind::InitProcessGroup {
                backend: self.backend(&r.backend)?,
                init_method: self.init_method(&r.init_method)?,
                device_id: self.device_id(&r.device_id)?,
                timeout_ms: self.timeout(&r.timeout_s)?,
                rank: self.int_arg(&r.rank)?,
                world_size: self.int_arg(&r.world_size)?,
            },
            "new_group" => {
                let ranks = match &r.ranks {
                    Some(list) => Some(
                        list.get_ref()
                            .iter()
                            .map(|v| self.rank_in_range(*v, list.span().start, ws))
                            .collect::<R<Vec<_>>>()?,
                    ),
                    None => None,
                };
                let handle = r.as_name.as_ref().map(|h| h.get_ref().clone());
                if let Some(h) = &handle {
                    if !handles.contains(h) {
                        handles.push(h.clone());
                    }
                }
                StepKind::NewGroup {
                    ranks,
                    backend: self.backend(&r.backend)?,
                    use_local_synchronization: r
                        .use_local_synchronization
                        .as_ref()
                        .map(|b| *b.get_ref())
                        .unwrap_or(false),
                    device_id: self.device_id(&r.device_id)?,
                    timeout_ms: self.timeout(&r.timeout_s)?,
                    handle,
                }
            }
            "destroy_process_group" => StepKind::DestroyProcessGroup { group },
            "set_device" => StepKind::SetDevice {
                device: self
                    .device_id(&r.device)?
                    .unwrap_or_else(|| "xpu:{local_rank}".into()),
            },
            "barrier" => StepKind::Barrier { group },
            "wait" => StepKind::Wait {
                work: self.wait_work(r, op_at)?,
            },
            "batch_isend_irecv" => StepKind::BatchP2p {
                group,
                tensor: self.tensor(r)?,
                ops: self.p2p_ops(r, ws, op_at)?,
                expect: self.opt_expr(&r.expect, &BATCH_VARS)?,
            },
            "send" => StepKind::Send {
                group,
                tensor: self.tensor(r)?,
                dst: self.peer(&r.dst, "dst", ws, op_at)?,
            },
            "recv" => StepKind::Recv {
                group,
                tensor: self.tensor(r)?,
                src: self.peer(&r.src, "src", ws, op_at)?,
                expect: self.opt_expr(&r.expect, &ELEM_VARS)?,
            },
            "log" => StepKind::Log {
                message: match &r.message {
                    Some(m) => {
                        interpolate(m.get_ref(), &RANK_VARS, &|_| 0.0).map_err(|e| {
                            self.err(self.in_str(m.span().start, e.offset), e.message)
                        })?;
                        m.get_ref().clone()
                    }
                    None => String::new(),
                },
            },
            "sleep" => StepKind::Sleep {
                ms: match &r.ms {
                    Some(ms) if (0..=limits::MAX_DURATION_MS as i64).contains(ms.get_ref()) => {
                        *ms.get_ref() as u64
                    }
                    Some(ms) => {
                        return Err(self.at(
                            ms,
                            format!(
                            "ms must be between 0 and {} (scen's limit for a duration, 30 days)",
                            limits::MAX_DURATION_MS
                        ),
                        ))
                    }
                    None => 0,
                },
            },
            other => self.sglang_step_kind(other, r, handles)?,
        })
    }

    /// A collective step: fields by [`CollOp`]'s table, located errors for each.
    fn coll_step(
        &self,
        op: CollOp,
        r: &RawStep,
        group: Option<String>,
        ws: usize,
        op_at: usize,
    ) -> R<CollStep> {
        let fill_vars: &[&str] = if op.coalesced() {
            &TENSORS_VARS
        } else {
            &ELEM_VARS
        };
        let mut tensor = self.tensor_with(r, fill_vars)?;
        let reduce_op = match &r.reduce_op {
            Some(o) => o.get_ref().parse::<ReduceOp>().map_err(|_| {
                self.at(
                    o,
                    format!(
                        "unknown reduce_op `{}` (sum, min, max, product, avg, band, bor, bxor)",
                        o.get_ref()
                    ),
                )
            })?,
            None => ReduceOp::Sum,
        };
        let root = match op.root_field() {
            Some("src") => Some(self.required_rank(&r.src, "src", op, ws, op_at)?),
            Some(_) => Some(self.required_rank(&r.dst, "dst", op, ws, op_at)?),
            None => None,
        };
        let count = match &r.count {
            Some(c) if (1..=64).contains(c.get_ref()) => *c.get_ref() as usize,
            Some(c) => return Err(self.at(c, "count must be between 1 and 64")),
            None if op.coalesced() => 2,
            None => 1,
        };
        let splits = match (&r.input_split_sizes, &r.output_split_sizes) {
            (None, None) => None,
            (Some(i), Some(o)) => Some((self.splits(i)?, self.splits(o)?)),
            (Some(s), None) | (None, Some(s)) => {
                return Err(self.at(
                    s,
                    "input_split_sizes and output_split_sizes go together (give both)",
                ))
            }
        };
        if splits.is_some() && r.shape.is_none() {
            // With split sizes, `shape` is one row's shape: scalar rows unless given.
            tensor.shape = vec![];
        }
        self.check_coll_bytes(op, &tensor, count, &splits, ws, op_at)?;
        let expect_vars: &[&str] = match op.layout() {
            Layout::Flat => &ELEM_VARS,
            Layout::Tensors => &TENSORS_VARS,
            Layout::Chunks => &GATHER_VARS,
            Layout::TensorChunks => &TENSOR_CHUNKS_VARS,
        };
        let work = match (&r.async_op, &r.work) {
            (Some(a), None) if *a.get_ref() => {
                return Err(self.at(
                    a,
                    "async_op = true needs `work = \"<name>\"` to wait on later",
                ))
            }
            (a, Some(w)) if !a.as_ref().is_some_and(|a| *a.get_ref()) => {
                return Err(self.at(w, "`work` names the handle of an async_op = true call"))
            }
            (_, Some(w)) => {
                self.works.borrow_mut().push(w.get_ref().clone());
                Some(w.get_ref().clone())
            }
            _ => None,
        };
        Ok(CollStep {
            op,
            group,
            tensor,
            reduce_op,
            root,
            count,
            splits,
            expect: self.opt_expr(&r.expect, expect_vars)?,
            work,
        })
    }

    /// Refuses a collective whose tensors exceed [`limits::MAX_TENSOR_BYTES_PER_RANK`] or
    /// [`limits::MAX_TENSOR_BYTES_TOTAL`] (split-size formulas are checked when they run).
    fn check_coll_bytes(
        &self,
        op: CollOp,
        tensor: &TensorSpec,
        count: usize,
        splits: &Option<(Splits, Splits)>,
        ws: usize,
        op_at: usize,
    ) -> R<()> {
        let row: u64 = tensor.shape.iter().map(|d| *d as u64).product();
        let elements = match splits {
            Some((Splits::List(i), Splits::List(o))) => {
                let rows = i.iter().sum::<usize>().max(o.iter().sum::<usize>()) as u64;
                // Input and output are each one list: the fan below counts ws chunks.
                rows.saturating_mul(row) / (ws as u64).max(1)
            }
            _ => row,
        };
        let esz = tensor.dtype.size_bytes() as u64;
        let per_rank = limits::coll_bytes_per_rank(op, elements, esz, count as u64, ws as u64);
        let total = per_rank.saturating_mul(ws as u64);
        let (what, value, limit) = if per_rank > limits::MAX_TENSOR_BYTES_PER_RANK {
            ("per rank", per_rank, limits::MAX_TENSOR_BYTES_PER_RANK)
        } else if total > limits::MAX_TENSOR_BYTES_TOTAL {
            ("over all ranks", total, limits::MAX_TENSOR_BYTES_TOTAL)
        } else {
            return Ok(());
        };
        Err(self.err(
            op_at,
            format!(
                "{} needs about {} of tensors {what} ({count} x {:?} {}, world {ws}): over scen's limit of {} {what}",
                op.name(),
                human_bytes(value),
                tensor.shape,
                tensor.dtype.name(),
                human_bytes(limit)
            ),
        ))
    }

    fn required_rank(
        &self,
        v: &Option<Spanned<i64>>,
        what: &str,
        op: CollOp,
        ws: usize,
        op_at: usize,
    ) -> R<usize> {
        match v {
            Some(s) => self.rank_in_range(*s.get_ref(), s.span().start, ws),
            None => Err(self.err(op_at, format!("{} needs `{what}`", op.name()))),
        }
    }

    fn splits(&self, s: &Spanned<RawSplits>) -> R<Splits> {
        match s.get_ref() {
            RawSplits::List(v) => v
                .iter()
                .map(|x| {
                    if (0..=1 << 24).contains(x) {
                        Ok(*x as usize)
                    } else {
                        Err(self.at(s, format!("bad split size {x}")))
                    }
                })
                .collect::<R<Vec<_>>>()
                .map(Splits::List),
            RawSplits::Expr(src) => Expr::parse(src, &SPLIT_VARS)
                .map(Splits::Expr)
                .map_err(|e| self.err(self.in_str(s.span().start, e.offset), e.message)),
        }
    }

    fn wait_work(&self, r: &RawStep, op_at: usize) -> R<String> {
        let Some(w) = &r.work else {
            return Err(self.err(op_at, "wait needs `work` (the handle of an async_op call)"));
        };
        if self.works.borrow().contains(w.get_ref()) {
            Ok(w.get_ref().clone())
        } else {
            Err(self.at(
                w,
                format!(
                    "unknown work `{}`: name it with `work` on an earlier async_op = true step",
                    w.get_ref()
                ),
            ))
        }
    }

    fn p2p_ops(&self, r: &RawStep, ws: usize, op_at: usize) -> R<Vec<P2pOp>> {
        let Some(ops) = &r.ops else {
            return Err(self.err(
                op_at,
                "batch_isend_irecv needs `ops = [{ op = \"isend\", peer = 1 }, ...]`",
            ));
        };
        if ops.get_ref().is_empty() {
            return Err(self.at(
                ops,
                "ops is empty (batch_isend_irecv needs at least one op)",
            ));
        }
        ops.get_ref()
            .iter()
            .map(|o| {
                let o = o.get_ref();
                let send = match o.op.get_ref().as_str() {
                    "isend" => true,
                    "irecv" => false,
                    other => {
                        return Err(
                            self.at(&o.op, format!("unknown p2p op `{other}` (isend, irecv)"))
                        )
                    }
                };
                let peer = match o.peer.get_ref() {
                    RawIntOrExpr::Int(i) => {
                        IntArg::Int(self.rank_in_range(*i, o.peer.span().start, ws)? as i64)
                    }
                    RawIntOrExpr::Expr(src) => {
                        IntArg::Expr(Expr::parse(src, &RANK_VARS).map_err(|e| {
                            self.err(self.in_str(o.peer.span().start, e.offset), e.message)
                        })?)
                    }
                };
                Ok(P2pOp { send, peer })
            })
            .collect()
    }

    fn group_ref(&self, g: &Option<Spanned<String>>, handles: &[String]) -> R<Option<String>> {
        let Some(g) = g else { return Ok(None) };
        let name = g.get_ref();
        if name == "WORLD" || name == "world" {
            return Ok(None);
        }
        if handles.contains(name) {
            Ok(Some(name.clone()))
        } else {
            Err(self.at(
                g,
                format!("unknown group `{name}`: name it with `as = \"{name}\"` on an earlier new_group, or use WORLD"),
            ))
        }
    }

    fn peer(&self, v: &Option<Spanned<i64>>, what: &str, ws: usize, op_at: usize) -> R<usize> {
        match v {
            Some(s) => self.rank_in_range(*s.get_ref(), s.span().start, ws),
            None => Err(self.err(op_at, format!("`{what}` is required"))),
        }
    }

    fn opt_expr(&self, s: &Option<Spanned<String>>, vars: &[&str]) -> R<Option<Expr>> {
        s.as_ref().map(|s| self.expr(s, vars)).transpose()
    }

    fn tensor(&self, r: &RawStep) -> R<TensorSpec> {
        self.tensor_with(r, &ELEM_VARS)
    }

    fn tensor_with(&self, r: &RawStep, fill_vars: &[&str]) -> R<TensorSpec> {
        let dtype = match &r.dtype {
            Some(d) => d.get_ref().parse::<DType>().map_err(|_| {
                self.at(
                    d,
                    format!(
                        "unknown dtype `{}` (f32, bf16, f16, f64, i64, i32, i8, u8, bool)",
                        d.get_ref()
                    ),
                )
            })?,
            None => DType::F32,
        };
        let shape = match &r.shape {
            Some(s) => s
                .get_ref()
                .iter()
                .map(|d| {
                    if (0..=1 << 28).contains(d) {
                        Ok(*d as usize)
                    } else {
                        Err(self.at(s, format!("bad dimension {d} in shape")))
                    }
                })
                .collect::<R<Vec<_>>>()?,
            None => vec![4],
        };
        let numel = shape
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(*d as u64))
            .filter(|n| *n <= limits::MAX_TENSOR_ELEMENTS);
        if numel.is_none() {
            if let Some(s) = &r.shape {
                return Err(self.at(
                    s,
                    format!(
                        "tensor too large: {:?} has more than 2^28 elements (scen's limit is {} elements per tensor)",
                        s.get_ref(),
                        limits::MAX_TENSOR_ELEMENTS
                    ),
                ));
            }
        }
        let device = match &r.device {
            Some(d) if ["xpu", "cuda", "cpu"].contains(&d.get_ref().as_str()) => {
                Some(d.get_ref().clone())
            }
            Some(d) => {
                return Err(self.at(
                    d,
                    format!("unknown device `{}` (xpu, cuda, cpu)", d.get_ref()),
                ))
            }
            None => None,
        };
        let fill = match &r.fill {
            Some(f) => self.expr(f, fill_vars)?,
            None => Expr::parse("rank", &ELEM_VARS).expect("default fill parses"),
        };
        let expect_ulps = match &r.expect_ulps {
            Some(u) if (0..=1 << 20).contains(u.get_ref()) => *u.get_ref() as u32,
            Some(u) => {
                return Err(self.at(
                    u,
                    format!("expect_ulps {} out of range (0 to 2^20)", u.get_ref()),
                ))
            }
            None => 0,
        };
        Ok(TensorSpec {
            dtype,
            shape,
            device,
            fill,
            expect_ulps,
        })
    }

    fn timeout(&self, t: &Option<Spanned<f64>>) -> R<Option<u64>> {
        match t {
            Some(s)
                if *s.get_ref() > 0.0
                    && *s.get_ref() * 1000.0 <= limits::MAX_DURATION_MS as f64 =>
            {
                Ok(Some((*s.get_ref() * 1000.0).round() as u64))
            }
            Some(s) => Err(self.at(
                s,
                format!(
                    "timeout_s must be a positive number of seconds up to {} (scen's limit for a duration, 30 days)",
                    limits::MAX_DURATION_MS / 1000
                ),
            )),
            None => Ok(None),
        }
    }

    fn int_arg(&self, v: &Option<Spanned<RawIntOrExpr>>) -> R<Option<IntArg>> {
        let Some(v) = v else { return Ok(None) };
        Ok(Some(match v.get_ref() {
            RawIntOrExpr::Int(i) => IntArg::Int(*i),
            RawIntOrExpr::Expr(src) => {
                let inner = src.trim().trim_start_matches('{').trim_end_matches('}');
                IntArg::Expr(
                    Expr::parse(inner, &RANK_VARS)
                        .map_err(|e| self.err(self.in_str(v.span().start, e.offset), e.message))?,
                )
            }
        }))
    }

    fn backend(&self, b: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(b) = b else { return Ok(None) };
        let s = b.get_ref();
        if s.contains("${") {
            return Ok(Some(s.clone()));
        }
        crate::c10d::backend::BackendConfig::parse(s, None)
            .map_err(|e| self.at(b, e.to_string()))?;
        Ok(Some(s.clone()))
    }

    fn device_id(&self, d: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(d) = d else { return Ok(None) };
        let s = d.get_ref();
        let ty = s.split(':').next().unwrap_or("");
        if !["xpu", "cuda", "cpu", "mps"].contains(&ty) {
            return Err(self.at(
                d,
                format!("device `{s}`: the type must be xpu, cuda, cpu or mps"),
            ));
        }
        interpolate(s, &RANK_VARS, &|_| 0.0)
            .map_err(|e| self.err(self.in_str(d.span().start, e.offset), e.message))?;
        Ok(Some(s.clone()))
    }

    fn init_method(&self, m: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(m) = m else { return Ok(None) };
        let url = m.get_ref();
        if !url.contains("${") && !url.contains('{') {
            crate::c10d::rendezvous::Url::parse(url)
                .map_err(|e| self.at(m, format!("bad init_method: {e}")))?;
        }
        Ok(Some(url.clone()))
    }

    fn expectation(&self, s: Spanned<RawExpect>, world: &World, steps: &[Step]) -> R<Expectation> {
        let loc = self.loc(s.span().start);
        let e = s.into_inner();
        let on = match &e.on {
            Some(sel) => self.selector(sel, world.size())?,
            None => Selector::All,
        };
        let outcome = match e.outcome.get_ref().as_str() {
            "completes" => ExpectedOutcome::Completes,
            "fails" => ExpectedOutcome::Fails,
            "hangs" => ExpectedOutcome::Hangs,
            other => {
                return Err(self.at(
                    &e.outcome,
                    format!("unknown outcome `{other}` (completes, fails, hangs)"),
                ))
            }
        };
        if let Some(err) = e
            .error
            .as_ref()
            .filter(|_| outcome != ExpectedOutcome::Fails)
        {
            return Err(self.at(err, "`error` goes with outcome = \"fails\""));
        }
        let step = match &e.step {
            None => None,
            Some(sr) => Some(self.step_ref(sr, steps)?),
        };
        Ok(Expectation {
            loc,
            on,
            outcome,
            error: e.error.map(|x| x.into_inner()),
            step,
        })
    }

    fn step_ref(&self, sr: &Spanned<RawStepRef>, steps: &[Step]) -> R<usize> {
        match sr.get_ref() {
            RawStepRef::Index(i) if *i >= 1 && (*i as usize) <= steps.len() => Ok(*i as usize - 1),
            RawStepRef::Index(i) => Err(self.at(
                sr,
                format!(
                    "step {i} does not exist (the program has {} steps)",
                    steps.len()
                ),
            )),
            RawStepRef::Id(id) => steps
                .iter()
                .position(|s| s.id.as_deref() == Some(id))
                .ok_or_else(|| self.at(sr, format!("no step has id \"{id}\""))),
        }
    }
}
