//! `[[step]]` validation: which fields belong to which op, tensors, split sizes, peers, groups,
//! timeouts and backends, each error naming file:line:col like the rest of load.rs.

use super::{sglang, store, Cx, R};
use crate::c10d::collective::{CollOp, Layout};
use crate::dtype::DType;
use crate::reduce::ReduceOp;
use crate::scenario::expr::{interpolate, Expr};
use crate::scenario::limits;
use crate::scenario::model::*;
use crate::scenario::raw::*;
use toml::Spanned;

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
            "store",
        ],
        "new_group" => vec![
            "ranks",
            "backend",
            "use_local_synchronization",
            "sort_ranks",
            "device_id",
            "timeout_s",
            "as",
        ],
        "split_group" => vec!["group", "split_ranks", "timeout_s", "as"],
        "shrink_group" => vec!["group", "ranks_to_exclude", "shrink_flags", "as"],
        "destroy_process_group" => vec!["group"],
        "barrier" => vec!["group", "async_op", "work"],
        "monitored_barrier" => vec!["group", "timeout_s", "wait_all_ranks"],
        "set_device" => vec!["device"],
        "set_timeout" => vec!["group", "timeout_s"],
        "wait" => vec!["work", "timeout_s"],
        "batch_isend_irecv" => tensor(&["ops", "expect", "expect_ulps"]),
        "send" => tensor(&["dst", "tag"]),
        "recv" => tensor(&["src", "tag", "expect", "expect_ulps"]),
        "isend" => tensor(&["dst", "tag", "work"]),
        "irecv" => tensor(&["src", "tag", "expect", "expect_ulps", "work"]),
        "log" => vec!["message"],
        "sleep" => vec!["ms"],
        "raise" => vec!["error"],
        "exit" => vec!["code", "signal", "teardown"],
        other => return store::op_fields(other).or_else(|| sglang::op_fields(other)),
    })
}

const OPS: &str = "init_process_group, new_group, split_group, shrink_group, destroy_process_group, set_device, \
                   set_timeout, barrier, monitored_barrier, \
                   get_default_store, tcp_store, prefix_store, store_set, store_get, store_add, store_check, store_wait, \
                   store_compare_set, store_delete_key, store_num_keys, \
                   all_reduce, all_reduce_coalesced, reduce, broadcast, all_gather, \
                   all_gather_into_tensor, all_gather_coalesced, all_gather_into_tensor_coalesced, \
                   gather, scatter, reduce_scatter, reduce_scatter_tensor, \
                   reduce_scatter_tensor_coalesced, all_to_all_single, all_to_all, send, recv, \
                   isend, irecv, batch_isend_irecv, wait, log, sleep, raise, exit, \
                   init_distributed_environment, \
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
    pub(super) fn present_fields(r: &RawStep) -> Vec<(&'static str, usize)> {
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
            f("wait_all_ranks", &r.wait_all_ranks),
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
            f("expect_ulps", &r.expect_ulps),
            f("count", &r.count),
            f("input_split_sizes", &r.input_split_sizes),
            f("output_split_sizes", &r.output_split_sizes),
            f("async_op", &r.async_op),
            f("tag", &r.tag),
            f("work", &r.work),
            f("ops", &r.ops),
            f("key", &r.key),
            f("keys", &r.keys),
            f("value", &r.value),
            f("amount", &r.amount),
            f("expected_value", &r.expected_value),
            f("desired_value", &r.desired_value),
            f("host", &r.host),
            f("port", &r.port),
            f("is_master", &r.is_master),
            f("wait_for_workers", &r.wait_for_workers),
            f("prefix", &r.prefix),
            f("store", &r.store),
            f("message", &r.message),
            f("ms", &r.ms),
            f("error", &r.error),
        ]
        .into_iter()
        .flatten()
        .chain(sglang::present_fields(r))
        .collect()
    }

    pub(super) fn step(
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
        if let Some(e) = &r.expect {
            if self.payloads_key.get() == Some(true) {
                return Err(self.at(
                    e,
                    "`expect` checks values, which `[sim] payloads = \"symbolic\"` does not compute (remove the expect, or use payloads = \"values\")",
                ));
            }
            if self.first_expect.get().is_none() {
                self.first_expect.set(Some(e.span().start));
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

    pub(super) fn step_kind(
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
            let members = self.group_members(&group, ws);
            return Ok(StepKind::Collective(
                self.coll_step(c, r, group, ws, members, op_at)?,
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
                store: self.store_ref(&r.store)?,
            },
            "new_group" => {
                let ranks = match &r.ranks {
                    Some(list) => Some(
                        list.get_ref()
                            .iter()
                            .map(|v| self.group_rank(*v, list.span().start))
                            .collect::<R<Vec<_>>>()?,
                    ),
                    None => None,
                };
                let handle = r.as_name.as_ref().map(|h| h.get_ref().clone());
                if let Some(h) = &handle {
                    if !handles.contains(h) {
                        handles.push(h.clone());
                    }
                    let members = match &ranks {
                        Some(list) => list.iter().collect::<std::collections::BTreeSet<_>>().len(),
                        None => ws,
                    };
                    self.note_group_size(h, members);
                }
                StepKind::NewGroup {
                    ranks,
                    backend: self.backend(&r.backend)?,
                    use_local_synchronization: r
                        .use_local_synchronization
                        .as_ref()
                        .map(|b| *b.get_ref())
                        .unwrap_or(false),
                    sort_ranks: r.sort_ranks.as_ref().is_none_or(|b| *b.get_ref()),
                    device_id: self.device_id(&r.device_id)?,
                    timeout_ms: self.timeout(&r.timeout_s)?,
                    handle,
                }
            }
            "split_group" => self.split_group_step(r, group, handles)?,
            "shrink_group" => self.shrink_group_step(r, group, handles, op_at)?,
            "destroy_process_group" => StepKind::DestroyProcessGroup { group },
            "set_device" => StepKind::SetDevice {
                device: self
                    .device_id(&r.device)?
                    .unwrap_or_else(|| "xpu:{local_rank}".into()),
            },
            "set_timeout" => StepKind::SetTimeout {
                group,
                timeout_ms: self.timeout(&r.timeout_s)?.ok_or_else(|| {
                    self.err(
                        op_at,
                        "set_timeout needs `timeout_s` (the new timeout, in seconds)",
                    )
                })?,
            },
            "barrier" => StepKind::Barrier {
                group,
                work: self.async_work(r)?,
            },
            "monitored_barrier" => StepKind::MonitoredBarrier {
                group,
                timeout_ms: self.timeout(&r.timeout_s)?,
                wait_all_ranks: r.wait_all_ranks.as_ref().is_some_and(|b| *b.get_ref()),
            },
            "wait" => StepKind::Wait {
                work: self.wait_work(r, op_at)?,
                timeout_ms: self.timeout(&r.timeout_s)?,
            },
            "batch_isend_irecv" => {
                let (tensor, ops) = (self.tensor(r)?, self.p2p_ops(r, ws, op_at)?);
                self.check_p2p_bytes(op, &tensor, ops.len(), ws, op_at)?;
                StepKind::BatchP2p {
                    group,
                    tensor,
                    ops,
                    expect: self.opt_expr(&r.expect, &BATCH_VARS)?,
                }
            }
            "send" | "isend" => {
                let tensor = self.tensor(r)?;
                self.check_p2p_bytes(op, &tensor, 1, ws, op_at)?;
                StepKind::Send {
                    group,
                    tensor,
                    dst: self.peer(&r.dst, "dst", ws, op_at)?,
                    tag: self.p2p_tag(&r.tag)?,
                    work: self.p2p_work(r, op, op_at)?,
                }
            }
            "recv" | "irecv" => {
                let tensor = self.tensor(r)?;
                self.check_p2p_bytes(op, &tensor, 1, ws, op_at)?;
                StepKind::Recv {
                    group,
                    tensor,
                    src: self.peer(&r.src, "src", ws, op_at)?,
                    expect: self.opt_expr(&r.expect, &ELEM_VARS)?,
                    tag: self.p2p_tag(&r.tag)?,
                    work: self.p2p_work(r, op, op_at)?,
                }
            }
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
            op if store::op_fields(op).is_some() => self.store_step(op, r, op_at)?,
            "raise" => self.raise_step(r, op_at)?,
            "exit" => self.exit_step(r, op_at)?,
            other => self.sglang_step_kind(other, r, handles)?,
        })
    }

    /// A collective step: fields by [`CollOp`]'s table, located errors for each. `members` is
    /// the size of its group (for the tensor-size estimate), `ws` the world's.
    pub(super) fn coll_step(
        &self,
        op: CollOp,
        r: &RawStep,
        group: Option<String>,
        ws: usize,
        members: usize,
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
        self.check_coll_bytes(op, &tensor, count, &splits, ws, members, op_at)?;
        let expect_vars: &[&str] = match op.layout() {
            Layout::Flat => &ELEM_VARS,
            Layout::Tensors => &TENSORS_VARS,
            Layout::Chunks => &GATHER_VARS,
            Layout::TensorChunks => &TENSOR_CHUNKS_VARS,
        };
        let work = self.async_work(r)?;
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

    pub(super) fn required_rank(
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

    pub(super) fn splits(&self, s: &Spanned<RawSplits>) -> R<Splits> {
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

    pub(super) fn group_ref(
        &self,
        g: &Option<Spanned<String>>,
        handles: &[String],
    ) -> R<Option<String>> {
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

    pub(super) fn opt_expr(&self, s: &Option<Spanned<String>>, vars: &[&str]) -> R<Option<Expr>> {
        s.as_ref().map(|s| self.expr(s, vars)).transpose()
    }

    pub(super) fn tensor(&self, r: &RawStep) -> R<TensorSpec> {
        self.tensor_with(r, &ELEM_VARS)
    }

    pub(super) fn tensor_with(&self, r: &RawStep, fill_vars: &[&str]) -> R<TensorSpec> {
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

    pub(super) fn timeout(&self, t: &Option<Spanned<f64>>) -> R<Option<u64>> {
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

    pub(super) fn int_arg(&self, v: &Option<Spanned<RawIntOrExpr>>) -> R<Option<IntArg>> {
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

    pub(super) fn backend(&self, b: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(b) = b else { return Ok(None) };
        let s = b.get_ref();
        if s.contains("${") {
            return Ok(Some(s.clone()));
        }
        crate::c10d::backend::BackendConfig::parse(s, None)
            .map_err(|e| self.at(b, e.to_string()))?;
        Ok(Some(s.clone()))
    }

    pub(super) fn device_id(&self, d: &Option<Spanned<String>>) -> R<Option<String>> {
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

    pub(super) fn init_method(&self, m: &Option<Spanned<String>>) -> R<Option<String>> {
        let Some(m) = m else { return Ok(None) };
        let url = m.get_ref();
        if !url.contains("${") && !url.contains('{') {
            crate::c10d::rendezvous::Url::parse(url)
                .map_err(|e| self.at(m, format!("bad init_method: {e}")))?;
        }
        Ok(Some(url.clone()))
    }
}
