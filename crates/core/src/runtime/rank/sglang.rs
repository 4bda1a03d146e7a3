//! sglang multimodal_gen's distributed start-up and traffic, run through the c10d model.
//!
//! The planner (crate::sglang) says which `new_group` calls every rank makes and what the
//! all-to-alls move where; this module makes a rank *do* it with the same machinery as the
//! generic steps (store, group counter, gloo meshes, lazy xccl communicators, collectives on
//! real data), so a rank-divergent start-up hangs exactly where real torch would (spec
//! docs/rules/sglang.md, sglang R1–R13). Handles: a coordinator's device group is named by its kind (`tp`, `sp`,
//! `cfg`, ...), its gloo group `<kind>_cpu`; the world coordinator's are `world_group` and
//! `world_group_cpu`.

use super::{barrier_after_init, Caller, Handle, Proc, Res};
use crate::c10d::backend::BackendConfig;
use crate::c10d::collective::CollOp;
use crate::c10d::error::{self, C10dError};
use crate::diagnose::{GroupRecord, PlannedCalls, PlannedRecord};
use crate::dtype::DType;
use crate::net::{Clock, Net};
use crate::probe::Probe;
use crate::reduce::ReduceOp;
use crate::scenario::expr::Expr;
use crate::scenario::{
    A2aOp, CollStep, DenoiseModel, Platform, SglangDegrees, SglangVersion, TensorSpec, RANK_VARS,
};
use crate::sglang::all_to_all_4d::A2aError;
use crate::sglang::parallel_state::{
    self as ps, BackendChoice, ConstructionStep, NewGroupCall, ParallelConfig, Plan, PlanError,
    Purpose,
};
use crate::trace::EventKind;
use std::rc::Rc;

mod a2a_layout;
mod shared_plan;
mod sp_a2a;
use a2a_layout::a2a_vars;
use shared_plan::{shared_plan, SharedPlan};

/// What `init_distributed_environment` decided, for the steps after it.
pub(super) struct SgState {
    version: SglangVersion,
    platform: ps::Platform,
    /// The platform backend behind `BackendChoice::Device` (docs/rules/sglang.md#s2-7).
    backend: String,
    plan: Option<Rc<Plan>>,
    /// Backend arguments (by [`BackendChoice`]) a planned `new_group` already passed with, as
    /// the backend string they stand for: later non-member calls with them take the short path.
    checked: [Option<String>; 3],
}

fn sg_platform(p: Platform) -> ps::Platform {
    match p {
        Platform::Xpu => ps::Platform::Xpu,
        Platform::Cuda => ps::Platform::Cuda,
        Platform::Cpu => ps::Platform::Cpu,
    }
}

fn version_name(v: SglangVersion) -> &'static str {
    v.name()
}

/// The handle a rank gives the group one planned call creates (`None`: not addressable).
fn handle_of(call: &NewGroupCall) -> Option<String> {
    let kind = if call.coordinator == "world" {
        "world_group"
    } else {
        call.coordinator
    };
    match call.purpose {
        Purpose::DeviceGroup | Purpose::PpSuperDevice => Some(kind.to_string()),
        Purpose::CpuGroup | Purpose::PpSuperCpu => Some(format!("{kind}_cpu")),
        Purpose::UlyssesPg | Purpose::RingPg | Purpose::ProcessGroup => Some(kind.to_string()),
        _ => None,
    }
}

fn plan_error(e: &PlanError) -> C10dError {
    error::sglang(e.python_exception(), e.to_string())
}

fn a2a_error(e: A2aError) -> C10dError {
    error::sglang(e.python_exception(), e.to_string())
}

/// A tensor spec built by the model (internal collectives of a step).
fn spec(dtype: DType, shape: Vec<usize>, device: &str, fill: &str) -> TensorSpec {
    let vars = [&RANK_VARS[..], &["i", "n"]].concat();
    TensorSpec {
        dtype,
        shape,
        device: Some(device.to_string()),
        fill: Expr::parse(fill, &vars).expect("model-built fill parses"),
        expect_ulps: 0,
    }
}

/// A collective of the model's own (construction traffic, fan-out, denoise step) on a handle.
fn step(
    op: CollOp,
    group: &str,
    tensor: TensorSpec,
    root: Option<usize>,
    expect: &str,
) -> CollStep {
    CollStep {
        op,
        group: Some(group.to_string()),
        tensor,
        reduce_op: ReduceOp::Sum,
        root,
        count: 1,
        splits: None,
        expect: (!expect.is_empty()).then(|| self::expr(expect)),
        work: None,
    }
}

fn expr(src: &str) -> Expr {
    let vars = [&RANK_VARS[..], &["i", "n", "chunk", "j"]].concat();
    Expr::parse(src, &vars).expect("model-built formula parses")
}

impl<N: Net, C: Clock, P: Probe> Proc<N, C, P> {
    /// docs/rules/sglang.md §2: backend by platform, device binding order, `init_process_group`, world coordinator.
    pub(super) async fn init_distributed_environment(
        &mut self,
        version: SglangVersion,
        init_method: &Option<String>,
        timeout_ms: Option<u64>,
    ) -> Res<String> {
        let platform = sg_platform(self.platform);
        let backend = ps::torch_distributed_backend(platform, version)
            .map_err(|e| error::sglang("RuntimeError", e.to_string()))?;
        let local_rank = self.spec.local_rank;
        let accel = (self.platform != Platform::Cpu).then(|| self.accel());
        if version.is_v2_lineage() && accel.is_some() {
            self.current_device = local_rank;
            self.event(
                EventKind::Info,
                format!(
                    "current_platform.set_device({}:{local_rank}) before init (V2, PR #33054)",
                    self.accel()
                ),
            );
        }
        // docs/rules/sglang.md §2.8: device_id only where the platform supports it: CUDA in every lineage.
        let device_id = (self.platform == Platform::Cuda).then(|| format!("cuda:{local_rank}"));
        let url = init_method.clone().unwrap_or_else(|| match version {
            SglangVersion::V0 => "env://".into(),
            _ => "tcp://${MASTER_ADDR}:${MASTER_PORT}".into(),
        });
        let env_int = |k: &str| self.spec.env.get(k).and_then(|v| v.parse::<usize>().ok());
        let (rank, ws) = (env_int("RANK"), env_int("WORLD_SIZE"));
        let b = Some(backend.to_string());
        let how = super::init::Rdzv {
            init_method: &Some(url),
            rank,
            world_size: ws,
            store: &None,
        };
        self.init_process_group(&b, &device_id, timeout_ms, how)
            .await?;
        let ws = self.world()?.world_size;
        self.sgl = Some(SgState {
            version,
            platform,
            backend: backend.to_string(),
            plan: None,
            checked: Default::default(),
        });
        let world: Vec<usize> = (0..ws).collect();
        let calls = [
            (BackendChoice::Device, Purpose::DeviceGroup),
            (BackendChoice::Gloo, Purpose::CpuGroup),
        ]
        .map(|(backend, purpose)| NewGroupCall {
            ranks: world.clone(),
            backend,
            coordinator: "world",
            purpose,
        });
        for c in &calls {
            self.sg_new_group(c, None).await?;
        }
        let me = self.world()?.rank;
        let view = ps::CommunicatorGroup {
            coordinator: "world",
            unique_name: "world:0".into(),
            ranks: world,
            rank: me,
            rank_in_group: me,
            use_device_communicator: true,
        };
        self.build_device_communicator(&view).await?;
        let bound = self.bind_after_init(version);
        Ok(format!(
            "sglang {}: backend {backend}{} world coordinator [{ws} ranks]; {bound}",
            version_name(version),
            device_id
                .map(|d| format!(" device_id={d}"))
                .unwrap_or_else(|| " (no device_id)".into()),
        ))
    }

    /// docs/rules/sglang.md §2.12 / sglang R9: where the rank's current device ends up.
    fn bind_after_init(&mut self, version: SglangVersion) -> String {
        let local_rank = self.spec.local_rank;
        match (version.is_v2_lineage(), self.platform) {
            (true, Platform::Cpu) => "no device".into(),
            (true, _) => format!("current device {}:{local_rank}", self.accel()),
            (false, Platform::Cuda) => {
                self.current_device = local_rank;
                format!("torch.cuda.set_device({local_rank}) after init")
            }
            (false, Platform::Xpu) => format!(
                "nothing binds the device: current device stays xpu:{} (R9, #33031)",
                self.current_device
            ),
            (false, Platform::Cpu) => "no device".into(),
        }
    }

    /// One planned `new_group`; the rank takes the handle only where it is a member (R4: the
    /// last list containing it wins). `planned`: the call is this plan's call of that index
    /// (the plan's lists are sorted and in range, and no init barrier runs): its group record
    /// says so, O(1).
    async fn sg_new_group(
        &mut self,
        call: &NewGroupCall,
        planned: Option<(&Rc<dyn PlannedCalls>, usize)>,
    ) -> Res<String> {
        let (me, ws) = (self.world()?.rank, self.world()?.world_size);
        // A planned call's list is sorted (SharedPlan::sorted_max_rank): O(log n), not O(n),
        // for each of the O(W) calls every rank makes.
        let member = match planned {
            Some(_) => call.ranks.binary_search(&me).is_ok(),
            None => call.ranks.contains(&me),
        };
        if !member && self.planned_non_member(call, ws, planned).is_some() {
            return Ok(String::new());
        }
        let backend = match call.backend {
            BackendChoice::Device => self.sgl.as_ref().map(|s| s.backend.clone()),
            BackendChoice::Gloo => Some("gloo".to_string()),
            BackendChoice::Default => None,
        };
        let handle = handle_of(call).filter(|_| member);
        let done = self
            .new_group(
                Some(&call.ranks),
                &backend,
                (false, true),
                &None,
                None,
                &handle,
                Caller::Sglang(planned),
            )
            .await?;
        let original = match &backend {
            Some(b) => self.expand(b),
            None => self.world()?.config.original.clone(),
        };
        let original = BackendConfig::parse(&original, Some(self.accel()))?.original;
        if let Some(s) = self.sgl.as_mut() {
            s.checked[call.backend as usize] = Some(original);
        }
        Ok(done)
    }

    /// A planned `new_group` this rank is not in, where an earlier call with the same backend
    /// argument passed every check: what `new_group` does for a non-member (take the next
    /// name, record the call) without re-parsing and copying per call. `None`: take the full
    /// path (a barrier after init, an unsorted or out-of-range list, a backend not seen yet).
    fn planned_non_member(
        &mut self,
        call: &NewGroupCall,
        ws: usize,
        planned: Option<(&Rc<dyn PlannedCalls>, usize)>,
    ) -> Option<()> {
        let original = self.sgl.as_ref()?.checked[call.backend as usize].as_ref()?;
        let me = self.world().ok()?.rank;
        let name = (self.group_generation, self.group_count);
        let (step, line) = (self.step, self.env.scenario.steps[self.step].loc.line);
        match planned {
            Some((source, index)) => self.env.probe.planned_group(&PlannedRecord {
                rank: me,
                name,
                source,
                call: index,
                backend: original,
                step,
                line,
            }),
            None => {
                let sorted = call.ranks.windows(2).all(|w| w[0] < w[1]);
                let in_range = call.ranks.last().is_none_or(|r| *r < ws);
                if !sorted || !in_range || barrier_after_init(&self.spec) {
                    return None;
                }
                self.env.probe.group(&GroupRecord {
                    rank: me,
                    generation: name.0,
                    index: name.1,
                    ranks: crate::ranks::of(&call.ranks),
                    backend: original.clone(),
                    label: "unnamed".into(),
                    step,
                    line,
                    call: crate::diagnose::GroupCall::NewGroup,
                });
            }
        }
        self.group_count += 1;
        Some(())
    }

    /// Planned calls of a sorted plan this rank is in none of (`calls`, from call `first`):
    /// what [`Self::planned_non_member`] does for each, as one report. Takes the calls up to
    /// the first whose backend argument this rank has not passed yet (that one goes the full
    /// way); returns how many it took.
    fn planned_non_members(
        &mut self,
        source: &Rc<dyn PlannedCalls>,
        calls: &[NewGroupCall],
        first: usize,
    ) -> usize {
        let Some(sgl) = self.sgl.as_ref() else {
            return 0;
        };
        let checked = |c: &NewGroupCall| sgl.checked[c.backend as usize].is_some();
        let n = calls.iter().take_while(|c| checked(c)).count();
        let Some(me) = self.world().ok().map(|w| w.rank).filter(|_| n > 0) else {
            return 0;
        };
        let rec = PlannedRecord {
            rank: me,
            name: (self.group_generation, self.group_count),
            source,
            call: first,
            backend: sgl.checked[calls[0].backend as usize]
                .as_deref()
                .expect("checked"),
            step: self.step,
            line: self.env.scenario.steps[self.step].loc.line,
        };
        self.env.probe.planned_groups(&rec, n, &sgl.checked);
        self.group_count += n as u64;
        n
    }

    /// docs/rules/sglang.md §3–§4: every coordinator's `new_group` calls, their device communicators, aliases.
    pub(super) async fn initialize_model_parallel(
        &mut self,
        d: &SglangDegrees,
        version: Option<SglangVersion>,
        usp_fallback: bool,
    ) -> Res<String> {
        let (me, ws) = (self.world()?.rank, self.world()?.world_size);
        if self.sgl.is_none() {
            let original = self.world()?.config.original.clone();
            self.sgl = Some(SgState {
                version: SglangVersion::V2,
                platform: sg_platform(self.platform),
                backend: original,
                plan: None,
                checked: Default::default(),
            });
        }
        let version = version.unwrap_or(self.sgl.as_ref().expect("set").version);
        let config = ParallelConfig::from_degrees(ws, d);
        let plan = match shared_plan(config, version) {
            Ok(p) => p,
            // R4/R15: ranks past dp*cfg*sp*pp*tp die in the DP coordinator's assertion; the
            // others pass it and go on creating groups among themselves.
            Err(PlanError::RankInNoGroup { failing_ranks, .. }) if !failing_ranks.contains(&me) => {
                let inner = ParallelConfig {
                    world_size: config.dit_parallel_size(),
                    ..config
                };
                shared_plan(inner, version).map_err(|e| plan_error(&e))?
            }
            Err(e) => {
                for call in e.issued_calls().iter().filter(|c| c.coordinator != "world") {
                    self.sg_new_group(call, None).await?;
                }
                return Err(plan_error(&e));
            }
        };
        let issued = self.issue_plan(&plan, usp_fallback).await?;
        let plan = plan.plan;
        self.alias_handles(&plan, usp_fallback);
        let summary = self.membership_summary(&plan, me, usp_fallback);
        self.sgl.as_mut().expect("set").plan = Some(plan);
        Ok(format!(
            "sglang {}: {issued} new_group calls; groups {summary}",
            version_name(version)
        ))
    }

    async fn issue_plan(&mut self, shared: &SharedPlan, usp_fallback: bool) -> Res<usize> {
        let (plan, ws) = (&shared.plan, self.world()?.world_size);
        let in_range = shared.sorted_max_rank.is_some_and(|r| r < ws);
        let source = (in_range && !barrier_after_init(&self.spec)).then_some(&shared.calls);
        let mut issued = 0;
        // Coordinators by the call their communicator follows, in plan order: looked up once,
        // not by scanning every coordinator after each of the O(W) calls.
        let mut after: Vec<(usize, usize)> = (plan.coordinators.iter().enumerate())
            .map(|(k, c)| (c.communicator_after_call, k))
            .collect();
        after.sort();
        let me = self.world()?.rank;
        let triggers: Vec<usize> = after.iter().map(|(a, _)| *a).collect();
        let stops = source.map(|_| shared.stops(me, usp_fallback, &triggers));
        let mut i = 0;
        while i < plan.calls.len() {
            if let (Some(src), Some(stops)) = (source, &stops) {
                // Calls up to this rank's next own (or special) call: one run.
                let next = stops.get(stops.partition_point(|s| *s < i));
                let end = next.copied().unwrap_or(plan.calls.len());
                let n = self.planned_non_members(src, &plan.calls[i..end], i);
                if n > 0 {
                    (issued, i) = (issued + n, i + n);
                    continue;
                }
            }
            let call = &plan.calls[i];
            i += 1;
            let usp = matches!(call.coordinator, "ulysses" | "ring");
            if call.coordinator == "world" || (usp && usp_fallback) {
                continue;
            }
            let i = i - 1;
            self.sg_new_group(call, source.map(|s| (s, i))).await?;
            issued += 1;
            let from = after.partition_point(|(a, _)| *a < i + 1);
            let to = after.partition_point(|(a, _)| *a <= i + 1);
            for c in after[from..to].iter().map(|(_, k)| &plan.coordinators[*k]) {
                let me = self.world()?.rank;
                if let Some(view) = plan.communicator_group(c.coordinator, me) {
                    self.build_device_communicator(&view).await?;
                }
            }
        }
        if usp_fallback {
            self.event(
                EventKind::Warn,
                "parallel_groups failed to import: Ulysses and Ring groups fall back to group.WORLD",
            );
        }
        Ok(issued)
    }

    /// V2's reused coordinators (`_REPLICA`, `_ENCODER_DP`) take their target's handles.
    fn alias_handles(&mut self, plan: &Plan, usp_fallback: bool) {
        for _ in 0..plan.groups.len() {
            for (kind, g) in &plan.groups {
                let ps::GroupKind::Alias(target) = g else {
                    continue;
                };
                let target = if target == "world" {
                    "world_group"
                } else {
                    target
                };
                for suffix in ["", "_cpu"] {
                    if let Some(h) = self.handles.get(&format!("{target}{suffix}")).cloned() {
                        self.handles.insert(format!("{kind}{suffix}"), h);
                    }
                }
            }
        }
        if usp_fallback {
            for h in ["ulysses", "ring"] {
                self.handles.insert(h.into(), Handle::Member("0".into()));
            }
        }
    }

    /// `cfg=[0, 4] sp=[0, 1, 2, 3] ...`: the rank's group of every kind (lists borrowed from
    /// the plan, their text made once per thread: every rank names the world's W members).
    fn membership_summary(&self, plan: &Plan, me: usize, usp_fallback: bool) -> String {
        let mut out = String::new();
        for (i, (kind, ranks)) in plan.member_lists(me).into_iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(kind);
            out.push('=');
            if matches!(kind, "ulysses" | "ring") && usp_fallback {
                out.push_str("WORLD");
            } else {
                out.push_str(&crate::ranks::listed(ranks));
            }
        }
        out
    }

    /// docs/rules/sglang.md §4.23 / sglang R5: the construction collectives of a coordinator's device communicator.
    async fn build_device_communicator(&mut self, view: &ps::CommunicatorGroup) -> Res<()> {
        let Some(state) = &self.sgl else {
            return Ok(());
        };
        let steps = ps::device_communicator_collectives(state.platform, state.version, view);
        let base = if view.coordinator == "world" {
            "world_group".to_string()
        } else {
            view.coordinator.to_string()
        };
        let accel = self.accel();
        for cstep in steps {
            match cstep {
                ConstructionStep::Broadcast { src, bytes, .. } => {
                    let fill = format!("(rank == {src}) * (i % 251 + 1)");
                    let t = spec(DType::U8, vec![bytes], "cpu", &fill);
                    let g = format!("{base}_cpu");
                    let c = step(CollOp::Broadcast, &g, t, Some(src), "i % 251 + 1");
                    let r = self.collective(&c).await?;
                    self.event(
                        EventKind::Info,
                        format!("PyNcclCommunicator for {base}: {bytes}-byte unique id broadcast on {base}_cpu from rank {src}: {r}"),
                    );
                }
                ConstructionStep::AllReduce { elements, .. } => {
                    let t = spec(DType::F32, vec![elements], accel, "0");
                    let r = self
                        .collective(&step(CollOp::AllReduce, &base, t, None, ""))
                        .await?;
                    self.event(
                        EventKind::Info,
                        format!("PyNcclCommunicator for {base}: warm-up all_reduce of {elements} element(s): {r}"),
                    );
                }
                ConstructionStep::Barrier { .. } => {
                    self.barrier(&Some(base.clone()), &None).await?;
                }
                ConstructionStep::NcclCommInitRank { nranks, rank } => {
                    self.event(
                        EventKind::Info,
                        format!("PyNcclCommunicator for {base}: ncclCommInitRank(nranks={nranks}, rank={rank})"),
                    );
                }
                ConstructionStep::NcclGetUniqueId | ConstructionStep::StreamSynchronize => {}
            }
        }
        Ok(())
    }

    fn plan(&self) -> Res<&Plan> {
        self.sgl
            .as_ref()
            .and_then(|s| s.plan.as_deref())
            .ok_or_else(error::sglang_groups_uninitialized)
    }

    /// R12: `broadcast_pyobj` over the SP, CFG and TP cpu groups (size, then payload).
    pub(super) async fn broadcast_pyobj(&mut self, payload_bytes: usize) -> Res<String> {
        let me = self.world()?.rank;
        let plan = self.plan()?;
        let c = plan.config;
        let mut groups = Vec::new();
        for (kind, on) in [("sp", c.sp != 1), ("cfg", c.cfg > 1), ("tp", c.tp > 1)] {
            if let (true, Some(m)) = (on, plan.membership(kind, me)) {
                groups.push((kind, m.ranks[0]));
            }
        }
        for (kind, src) in &groups {
            let g = format!("{kind}_cpu");
            let n = payload_bytes.to_string();
            let size = spec(DType::I64, vec![1], "cpu", &n);
            self.collective(&step(CollOp::Broadcast, &g, size, Some(*src), &n))
                .await?;
            if payload_bytes > 0 {
                let fill = format!("(rank == {src}) * ((i * 7 + 1) % 251)");
                let body = spec(DType::U8, vec![payload_bytes], "cpu", &fill);
                let c = step(CollOp::Broadcast, &g, body, Some(*src), "(i * 7 + 1) % 251");
                self.collective(&c).await?;
            }
        }
        let names: Vec<String> = groups
            .iter()
            .map(|(k, s)| format!("{k}_cpu from {s}"))
            .collect();
        Ok(format!(
            "broadcast_pyobj of {payload_bytes} bytes over [{}]",
            names.join(", ")
        ))
    }

    /// docs/rules/sglang.md §5.36: one diffusion step: scheduler fan-out, per layer the USP input/output
    /// all-to-alls (q, k, v concatenated) and TP all-reduces, then the CFG all-gather.
    pub(super) async fn denoise_step(
        &mut self,
        m: &DenoiseModel,
        dtype: DType,
        payload_bytes: usize,
    ) -> Res<String> {
        let me = self.world()?.rank;
        let c = self.plan()?.config;
        let rank_in = |kind: &str| self.plan().ok().and_then(|p| p.membership(kind, me));
        let (tp_group, cfg_m) = (rank_in("tp"), rank_in("cfg"));
        self.broadcast_pyobj(payload_bytes).await?;
        let heads_local = m.heads / c.tp.max(1);
        if c.sp == 0 || !m.seq.is_multiple_of(c.sp) {
            return Err(error::seq_not_divisible(m.seq, c.sp));
        }
        let s_local = m.seq / c.sp;
        let fill =
            Expr::parse("b * 1000000 + s * 1000 + h * 10 + d % 10", &a2a_vars()).expect("parses");
        let mut a2a_calls = 0;
        for _ in 0..m.layers {
            if c.ulysses > 1 {
                let qkv = [3 * m.batch, s_local, heads_local, m.head_dim];
                let g = Some("ulysses".to_string());
                self.sp_all_to_all(
                    A2aOp::UspInput { head_dim: 2 },
                    &g,
                    qkv,
                    dtype,
                    &fill,
                    false,
                )
                .await?;
                let attn = [
                    m.batch,
                    s_local * c.ulysses,
                    heads_local / c.ulysses,
                    m.head_dim,
                ];
                self.sp_all_to_all(
                    A2aOp::UspOutput { head_dim: 2 },
                    &g,
                    attn,
                    dtype,
                    &fill,
                    false,
                )
                .await?;
                a2a_calls += 2;
            }
            if let Some(tp) = tp_group.as_ref().filter(|g| g.ranks.len() > 1) {
                let (fill, sum) = tp_fill(dtype, c.world_size, &tp.ranks);
                let hidden = m.heads * m.head_dim;
                for _ in 0..2 {
                    let t = spec(dtype, vec![m.batch, s_local, hidden], self.accel(), &fill);
                    let c = step(CollOp::AllReduce, "tp", t, None, &sum.to_string());
                    self.collective(&c).await?;
                }
            }
        }
        if let Some(cfg) = cfg_m.as_ref().filter(|g| g.ranks.len() > 1) {
            let fill = format!("{} * 100000 + i", cfg.rank_in_group);
            let t = spec(DType::F32, vec![m.batch, 16, s_local], self.accel(), &fill);
            let c = step(CollOp::AllGather, "cfg", t, None, "chunk * 100000 + j");
            self.collective(&c).await?;
        }
        Ok(format!(
            "denoise step: {} layers, {a2a_calls} Ulysses all-to-alls, TP {}, CFG gather {}: values as expected",
            m.layers,
            tp_group.map_or(1, |g| g.ranks.len()),
            cfg_m.map_or(1, |g| g.ranks.len()),
        ))
    }
}

/// The TP all-reduce's fill and expected sum: the rank number while every sum stays an integer
/// the dtype holds exactly, else the rank modulo a bound that keeps it so (bf16 holds integers
/// up to 256 exactly: with raw rank numbers a world of 512 ranks failed its own check).
fn tp_fill(dtype: DType, world_size: usize, tp_ranks: &[usize]) -> (String, usize) {
    let exact = dtype
        .float_format()
        .map_or(usize::MAX, |(mantissa_bits, _)| {
            1usize << (mantissa_bits + 1)
        });
    let bound = (exact / tp_ranks.len().max(1)).max(1);
    if world_size <= bound {
        ("rank".to_string(), tp_ranks.iter().sum())
    } else {
        (
            format!("rank % {bound}"),
            tp_ranks.iter().map(|r| r % bound).sum(),
        )
    }
}
