//! The walk through `init_distributed_environment`'s world coordinator and
//! `initialize_model_parallel` that produces a [`Plan`]: every `new_group` call in order, the
//! coordinators, aliases and per-rank memberships (docs/rules/sglang.md §3, §4.22).

use std::collections::BTreeMap;

use super::super::rank_generator::{RankGenerator, SGLANG_ORDER};
use super::{
    membership_in, usp_groups_by_sp_groups, usp_groups_legacy_yunchang, BackendChoice,
    CoordinatorPlan, GroupKind, Membership, NewGroupCall, ParallelConfig, PipelineModel, Plan,
    PlanError, Purpose, UspAxis, Version,
};

/// Static description of one coordinator to construct.
struct CoordSpec {
    kind: &'static str,
    group_name: &'static str,
    use_device_communicator: bool,
    use_srt_custom_allreduce: bool,
}

impl CoordSpec {
    fn plain(kind: &'static str, group_name: &'static str) -> Self {
        Self {
            kind,
            group_name,
            use_device_communicator: true,
            use_srt_custom_allreduce: false,
        }
    }
}

/// Accumulates calls, coordinators and groups while walking the start-up.
struct Builder {
    version: Version,
    pipeline_model: PipelineModel,
    config: ParallelConfig,
    calls: Vec<NewGroupCall>,
    coordinators: Vec<CoordinatorPlan>,
    groups: BTreeMap<String, GroupKind>,
    name_counters: BTreeMap<&'static str, usize>,
}

impl Builder {
    fn new(config: ParallelConfig, version: Version, pipeline_model: PipelineModel) -> Self {
        Self {
            version,
            pipeline_model,
            config,
            calls: Vec::new(),
            coordinators: Vec::new(),
            groups: BTreeMap::new(),
            name_counters: BTreeMap::new(),
        }
    }

    fn fail(&self, err: PlanError) -> PlanError {
        err.with_issued_calls(&self.calls)
    }

    /// One `new_group`, with torch's rank sanity checks.
    fn call(
        &mut self,
        ranks: &[usize],
        backend: BackendChoice,
        coordinator: &'static str,
        purpose: Purpose,
    ) -> Result<(), PlanError> {
        let world = self.config.world_size;
        if ranks.len() > world {
            return Err(self.fail(PlanError::GroupLargerThanWorld {
                coordinator,
                ranks: ranks.to_vec(),
                issued_calls: Vec::new(),
            }));
        }
        if ranks.iter().any(|r| *r >= world) {
            return Err(self.fail(PlanError::RankOutsideWorld {
                coordinator,
                ranks: ranks.to_vec(),
                issued_calls: Vec::new(),
            }));
        }
        self.calls.push(NewGroupCall {
            ranks: ranks.to_vec(),
            backend,
            coordinator,
            purpose,
        });
        Ok(())
    }

    /// Backend of a coordinator device group / `new_device_group(ranks, backend)`.
    fn device_backend(&self, ranks: &[usize]) -> BackendChoice {
        if self.version.singleton_device_groups_on_gloo() && ranks.len() == 1 {
            BackendChoice::Gloo
        } else {
            BackendChoice::Device
        }
    }

    /// Backend of a USP sub-group (`backend=None`).
    fn usp_backend(&self, ranks: &[usize]) -> BackendChoice {
        if self.version.singleton_device_groups_on_gloo() && ranks.len() == 1 {
            BackendChoice::Gloo
        } else {
            BackendChoice::Default
        }
    }

    fn unique_name(&mut self, group_name: &'static str) -> String {
        let counter = self.name_counters.entry(group_name).or_insert(0);
        let name = format!("{group_name}:{counter}");
        *counter += 1;
        name
    }

    /// `GroupCoordinator.__init__`'s loop: (device, gloo) per list.
    fn coordinator_groups(
        &mut self,
        kind: &'static str,
        group_ranks: &[Vec<usize>],
        purposes: (Purpose, Purpose),
    ) -> Result<(), PlanError> {
        for ranks in group_ranks {
            self.call(ranks, self.device_backend(ranks), kind, purposes.0)?;
            self.call(ranks, BackendChoice::Gloo, kind, purposes.1)?;
        }
        Ok(())
    }

    /// `assert self.cpu_group is not None, f"{group_ranks=}, {local_rank=}"`.
    fn check_membership(
        &self,
        kind: &'static str,
        group_ranks: &[Vec<usize>],
    ) -> Result<(), PlanError> {
        let failing: Vec<usize> = (0..self.config.world_size)
            .filter(|r| membership_in(group_ranks, *r).is_none())
            .collect();
        match failing.first() {
            None => Ok(()),
            Some(first) => Err(self.fail(PlanError::RankInNoGroup {
                coordinator: kind,
                group_ranks: group_ranks.to_vec(),
                local_rank: *first,
                failing_ranks: failing.clone(),
                issued_calls: Vec::new(),
            })),
        }
    }

    fn record_coordinator(&mut self, spec: &CoordSpec, group_ranks: &[Vec<usize>], span: Span) {
        let unique_name = self.unique_name(spec.group_name);
        self.coordinators.push(CoordinatorPlan {
            coordinator: spec.kind,
            group_name: spec.group_name,
            unique_name,
            group_ranks: group_ranks.to_vec(),
            use_device_communicator: spec.use_device_communicator,
            use_srt_custom_allreduce: spec.use_srt_custom_allreduce,
            first_call: span.first,
            end_call: self.calls.len(),
            communicator_after_call: span.communicator_after,
        });
        self.groups.insert(
            spec.kind.to_string(),
            GroupKind::Created(group_ranks.to_vec()),
        );
    }

    /// A plain `GroupCoordinator` (or subclass without extra groups).
    fn plain_coordinator(
        &mut self,
        spec: CoordSpec,
        group_ranks: &[Vec<usize>],
    ) -> Result<(), PlanError> {
        let first = self.calls.len();
        let purposes = (Purpose::DeviceGroup, Purpose::CpuGroup);
        self.coordinator_groups(spec.kind, group_ranks, purposes)?;
        self.check_membership(spec.kind, group_ranks)?;
        let span = Span {
            first,
            communicator_after: self.calls.len(),
        };
        self.record_coordinator(&spec, group_ranks, span);
        Ok(())
    }

    /// xDiT `PipelineGroupCoordinator.__init__` (docs/rules/sglang.md#s3-21).
    fn xdit_pipeline_coordinator(
        &mut self,
        spec: CoordSpec,
        group_ranks: &[Vec<usize>],
    ) -> Result<(), PlanError> {
        let first = self.calls.len();
        let purposes = (Purpose::PpSuperDevice, Purpose::PpSuperCpu);
        self.coordinator_groups(spec.kind, group_ranks, purposes)?;
        self.check_membership(spec.kind, group_ranks)?;
        let communicator_after = self.calls.len();
        self.xdit_pipeline_again(spec.kind, group_ranks)?;
        for ranks in group_ranks {
            self.call(
                ranks,
                BackendChoice::Device,
                spec.kind,
                Purpose::PpSkipDevice,
            )?;
        }
        let span = Span {
            first,
            communicator_after,
        };
        self.record_coordinator(&spec, group_ranks, span);
        Ok(())
    }

    /// The second creation loop; 2-rank lists get `_0_1`/`_1_0` pairs.
    fn xdit_pipeline_again(
        &mut self,
        kind: &'static str,
        group_ranks: &[Vec<usize>],
    ) -> Result<(), PlanError> {
        let first_len = group_ranks.first().map_or(0, Vec::len);
        let dev = BackendChoice::Device;
        let gloo = BackendChoice::Gloo;
        for ranks in group_ranks {
            if first_len == 2 {
                self.call(ranks, dev, kind, Purpose::PpAgainDevice01)?;
                self.call(ranks, dev, kind, Purpose::PpAgainDevice10)?;
                self.call(ranks, gloo, kind, Purpose::PpAgainCpu01)?;
                self.call(ranks, gloo, kind, Purpose::PpAgainCpu10)?;
            } else {
                self.call(ranks, dev, kind, Purpose::PpAgainDevice)?;
                self.call(ranks, gloo, kind, Purpose::PpAgainCpu)?;
            }
        }
        Ok(())
    }

    fn usp_groups(&mut self, gen: &RankGenerator) -> Result<(), PlanError> {
        let cfg = self.config;
        let split = match self.version {
            Version::V0 => {
                usp_groups_legacy_yunchang(cfg.ulysses, cfg.ring, cfg.dit_parallel_size())
            }
            Version::V1 | Version::V2 | Version::V0_5_23 => {
                usp_groups_by_sp_groups(cfg.ulysses, cfg.ring, &gen.get_ranks("sp")?)
            }
        };
        let split = split.map_err(|e| self.fail(e))?;
        let (mut ulysses, mut ring) = (Vec::new(), Vec::new());
        for g in &split {
            let (kind, purpose, sink) = match g.axis {
                UspAxis::Ulysses => ("ulysses", Purpose::UlyssesPg, &mut ulysses),
                UspAxis::Ring => ("ring", Purpose::RingPg, &mut ring),
            };
            sink.push(g.ranks.clone());
            let backend = self.usp_backend(&g.ranks);
            self.call(&g.ranks, backend, kind, purpose)?;
        }
        self.groups
            .insert("ulysses".into(), GroupKind::Created(ulysses));
        self.groups.insert("ring".into(), GroupKind::Created(ring));
        Ok(())
    }

    /// A bare `new_group` / `new_device_group` over `ranks` (dit, vae).
    fn process_group(&mut self, kind: &'static str, ranks: Vec<usize>) -> Result<(), PlanError> {
        let backend = self.device_backend(&ranks);
        self.call(&ranks, backend, kind, Purpose::ProcessGroup)?;
        self.groups
            .insert(kind.to_string(), GroupKind::Created(vec![ranks]));
        Ok(())
    }

    fn alias(&mut self, kind: &str, target: &str) {
        self.groups
            .insert(kind.to_string(), GroupKind::Alias(target.to_string()));
    }
}

/// Call-index bookkeeping of one coordinator.
struct Span {
    first: usize,
    communicator_after: usize,
}

/// Plans start-up with the version's default PP model
/// ([`Version::default_pipeline_model`]).
pub fn plan_initialize_model_parallel(
    config: ParallelConfig,
    version: Version,
) -> Result<Plan, PlanError> {
    plan_initialize_model_parallel_with(config, version, version.default_pipeline_model())
}

/// Plans the world coordinator plus `initialize_model_parallel` with an
/// explicit PP model.
pub fn plan_initialize_model_parallel_with(
    config: ParallelConfig,
    version: Version,
    pipeline_model: PipelineModel,
) -> Result<Plan, PlanError> {
    config.guard()?;
    let mut b = Builder::new(config, version, pipeline_model);
    let world: Vec<usize> = (0..config.world_size).collect();
    b.plain_coordinator(CoordSpec::plain("world", "world"), &[world])?;
    check_world_size(&b)?;
    let gen = RankGenerator::new(
        config.tp,
        config.sp,
        config.pp,
        config.cfg,
        config.dp,
        SGLANG_ORDER,
    )?;
    axis_coordinators(&mut b, &gen)?;
    if version.has_derived_groups() {
        derived_coordinators(&mut b, &gen)?;
    }
    bare_groups(&mut b)?;
    Ok(finish(b))
}

fn check_world_size(b: &Builder) -> Result<(), PlanError> {
    let c = b.config;
    if c.world_size >= c.dit_parallel_size() {
        return Ok(());
    }
    Err(b.fail(PlanError::WorldTooSmall {
        world_size: c.world_size,
        tp: c.tp,
        pp: c.pp,
        sp: c.sp,
        cfg: c.cfg,
        dp: c.dp,
        issued_calls: Vec::new(),
    }))
}

/// `_DP`, `_CFG`, `_PP`, USP sub-groups, `_SP`, `_TP` (docs/rules/sglang.md#s3-18).
fn axis_coordinators(b: &mut Builder, gen: &RankGenerator) -> Result<(), PlanError> {
    b.plain_coordinator(CoordSpec::plain("dp", "cfg_group"), &gen.get_ranks("dp")?)?;
    b.plain_coordinator(CoordSpec::plain("cfg", "cfg_group"), &gen.get_ranks("cfg")?)?;
    let pp_spec = CoordSpec::plain("pp", "pp_group");
    match b.pipeline_model {
        PipelineModel::Plain => b.plain_coordinator(pp_spec, &gen.get_ranks("pp")?)?,
        PipelineModel::XDiT => b.xdit_pipeline_coordinator(pp_spec, &gen.get_ranks("pp")?)?,
    }
    b.usp_groups(gen)?;
    b.plain_coordinator(CoordSpec::plain("sp", "sp_group"), &gen.get_ranks("sp")?)?;
    if b.version.has_cfg_sp_view() && b.config.cfg > 1 && b.config.sp == 1 {
        // `SequenceParallelGroupCoordinator.over_group(_CFG, ...)`: CFG's groups, no new one.
        b.alias("cfg_sp", "cfg");
    }
    let v2 = b.version.is_v2_lineage();
    let tp_spec = CoordSpec {
        kind: "tp",
        group_name: b.version.tp_group_name(),
        use_device_communicator: !v2,
        use_srt_custom_allreduce: v2,
    };
    b.plain_coordinator(tp_spec, &gen.get_ranks("tp")?)?;
    if b.version.has_srt_moe_ep_group() {
        srt_moe_ep_coordinator(b)?;
    }
    Ok(())
}

/// 0.5.23 `_sync_srt_tp_group()` -> `_init_srt_moe_ep_group()`: srt's
/// `init_model_parallel_group([[r] for r in range(world_size)], backend=<world device group's>,
/// use_pynccl=False, group_name="moe_ep")`. srt's `GroupCoordinator` passes the backend even
/// for single-rank lists (no gloo shortcut), then a gloo group, per list; no communicator is
/// built for a single rank.
fn srt_moe_ep_coordinator(b: &mut Builder) -> Result<(), PlanError> {
    let singletons: Vec<Vec<usize>> = (0..b.config.world_size).map(|r| vec![r]).collect();
    let first = b.calls.len();
    for ranks in &singletons {
        b.call(ranks, BackendChoice::Device, "moe_ep", Purpose::DeviceGroup)?;
        b.call(ranks, BackendChoice::Gloo, "moe_ep", Purpose::CpuGroup)?;
    }
    let spec = CoordSpec {
        kind: "moe_ep",
        group_name: "moe_ep",
        use_device_communicator: false,
        use_srt_custom_allreduce: false,
    };
    let span = Span {
        first,
        communicator_after: b.calls.len(),
    };
    b.record_coordinator(&spec, &singletons, span);
    Ok(())
}

/// V2's `_REPLICA`, `_ENCODER_DP`, `_VAE_DECODE`.
fn derived_coordinators(b: &mut Builder, gen: &RankGenerator) -> Result<(), PlanError> {
    let c = b.config;
    let replica_axes = nontrivial(&[("tp", c.tp), ("sp", c.sp), ("pp", c.pp), ("cfg", c.cfg)]);
    if c.dp == 1 {
        b.alias("replica", "world");
    } else if replica_axes.len() <= 1 {
        b.alias("replica", replica_axes.first().copied().unwrap_or("tp"));
    } else {
        let spec = CoordSpec::plain("replica", "replica_group");
        b.plain_coordinator(spec, &gen.get_ranks("tp-sp-pp-cfg")?)?;
    }
    let encoder_axes = nontrivial(&[("sp", c.sp), ("pp", c.pp), ("cfg", c.cfg)]);
    if c.tp == 1 {
        b.alias("encoder_dp", "replica");
    } else if encoder_axes.len() == 1 {
        b.alias("encoder_dp", encoder_axes[0]);
    } else if encoder_axes.len() > 1 {
        let spec = CoordSpec::plain("encoder_dp", "encoder_dp_group");
        b.plain_coordinator(spec, &gen.get_ranks("sp-pp-cfg")?)?;
    } else {
        b.groups.insert("encoder_dp".into(), GroupKind::Absent);
    }
    let spec = CoordSpec::plain("vae_decode", "vae_decode_group");
    b.plain_coordinator(spec, &gen.get_ranks("tp-sp-pp-cfg")?)
}

fn nontrivial(axes: &[(&'static str, usize)]) -> Vec<&'static str> {
    axes.iter()
        .filter(|(_, d)| *d > 1)
        .map(|(n, _)| *n)
        .collect()
}

/// `init_vae_group` (if `vae_parallel_size > 0`) then `init_dit_group`.
fn bare_groups(b: &mut Builder) -> Result<(), PlanError> {
    let dit = b.config.dit_parallel_size();
    let vae = b.config.vae_parallel_size;
    if vae > 0 {
        b.process_group("vae", (dit..dit.saturating_add(vae)).collect())?;
    }
    b.process_group("dit", (0..dit).collect())
}

fn finish(b: Builder) -> Plan {
    Plan {
        version: b.version,
        pipeline_model: b.pipeline_model,
        config: b.config,
        calls: b.calls,
        groups: b.groups,
        coordinators: b.coordinators,
    }
}

/// Kind → membership of `rank`, following alias chains.
pub(super) fn rank_memberships(
    groups: &BTreeMap<String, GroupKind>,
    rank: usize,
) -> BTreeMap<String, Membership> {
    groups
        .keys()
        .filter_map(|kind| {
            let lists = resolve_alias(groups, kind)?;
            membership_in(lists, rank).map(|m| (kind.clone(), m))
        })
        .collect()
}

pub(super) fn resolve_alias<'a>(
    groups: &'a BTreeMap<String, GroupKind>,
    kind: &str,
) -> Option<&'a [Vec<usize>]> {
    let mut current = kind;
    for _ in 0..=groups.len() {
        match groups.get(current)? {
            GroupKind::Created(lists) => return Some(lists),
            GroupKind::Alias(target) => current = target,
            GroupKind::Absent => return None,
        }
    }
    None
}
