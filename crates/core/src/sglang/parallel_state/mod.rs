//! Pure planner of sglang multimodal_gen start-up: which `new_group` calls
//! every rank makes, in which order and with which backend, per code lineage.
//!
//! The simulator needs this because torch names groups from a global counter:
//! any difference in the count, order, rank lists or backend class of
//! `new_group` calls between ranks is a rendezvous hang (spec R1). The planner
//! walks `init_distributed_environment`'s world coordinator and
//! `initialize_model_parallel` (docs/rules/sglang.md §2.11, §3, §4.22) for
//! [`Version::V0`] (`parallel_state@64ec4f88`, `group_coordinator@d5fc25da`
//! and yunchang), [`Version::V1`] (intermediate, after PR #16532/#17920) and
//! [`Version::V2`] (`parallel_state@00d56e2c`), plus the released [`Version::V0_5_23`] (V2 with
//! srt's MoE-EP groups, checked against real sglang in testdata/sglang_0.5.23_groups.json), and
//! reports the same failures
//! the Python raises, with their texts. It also lists the construction
//! collectives of each device communicator (docs/rules/sglang.md §4.23, sglang R5).
//!
//! Single-node assumption: the world coordinator's `local_rank` (used in the
//! `group_ranks=…, local_rank=…` assertion text) is taken to equal the rank.
//!
//! Split by concern: this file holds the plan's data types; `error.rs` the failures with their
//! Python texts, `usp.rs` the Ulysses/Ring split, `build.rs` the walk that makes a [`Plan`],
//! `communicator.rs` platforms and device-communicator construction.

use std::collections::BTreeMap;

mod build;
mod communicator;
mod error;
#[cfg(test)]
mod tests;
mod usp;

pub use build::{plan_initialize_model_parallel, plan_initialize_model_parallel_with};
pub use communicator::{
    device_communicator_collectives, torch_distributed_backend, CommGroup, CommunicatorGroup,
    ConstructionStep, Platform, UnsupportedPlatform,
};
pub use error::PlanError;
pub use usp::{usp_groups_by_sp_groups, usp_groups_legacy_yunchang, UspAxis, UspGroup};

/// Code lineage of `parallel_state.py` / `group_coordinator.py` (spec header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// Initial multimodal_gen: yunchang contiguous USP split, xDiT
    /// `PipelineGroupCoordinator`, no singleton→gloo.
    V0,
    /// Intermediate: USP split over the real SP groups (PR #16532),
    /// platform backend (PR #17920); still no singleton→gloo.
    V1,
    /// Newest seen: singleton device groups on gloo, replica / encoder-DP /
    /// VAE-decode groups, TP without device communicator.
    V2,
    /// The released sglang 0.5.23 (PyPI), read in its source and run for real: V2's groups
    /// plus `_sync_srt_tp_group()` -> `_init_srt_moe_ep_group()` right after TP (one srt
    /// `GroupCoordinator` "moe_ep" over W single-rank lists: a device-backend group, then a
    /// gloo one, per rank) and the `_CFG_SP` view (CFG's groups, no new group) when cfg > 1 and
    /// sp == 1. The scenario format spells it `version = "0.5.23"`.
    V0_5_23,
}

/// How the PP coordinator creates its groups (docs/rules/sglang.md#s3-21, `_meta.caveat_pp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PipelineModel {
    /// A plain `GroupCoordinator` (one device + one gloo group per list).
    Plain,
    /// xDiT `PipelineGroupCoordinator`: super groups, the same groups again
    /// (doubled for 2-rank lists), then one skip device group per list.
    XDiT,
}

impl Version {
    /// PP model used by [`plan_initialize_model_parallel`]: xDiT for V0 and V1
    /// (both import `PipelineGroupCoordinator`; the only snapshot defining it
    /// duplicates groups), plain for V2 (as the golden sequence models it).
    pub fn default_pipeline_model(self) -> PipelineModel {
        match self {
            Version::V0 | Version::V1 => PipelineModel::XDiT,
            Version::V2 | Version::V0_5_23 => PipelineModel::Plain,
        }
    }

    /// V2 and later: the newest lineage's groups, device binding and backends.
    pub fn is_v2_lineage(self) -> bool {
        matches!(self, Version::V2 | Version::V0_5_23)
    }

    /// The scenario format's spelling: `v0`, `v1`, `v2`, `0.5.23`.
    pub fn name(self) -> &'static str {
        match self {
            Version::V0 => "v0",
            Version::V1 => "v1",
            Version::V2 => "v2",
            Version::V0_5_23 => "0.5.23",
        }
    }

    /// V2's `new_device_group` puts single-rank lists on gloo (spec R3).
    fn singleton_device_groups_on_gloo(self) -> bool {
        self.is_v2_lineage()
    }

    /// V2 creates `_REPLICA`, `_ENCODER_DP`, `_VAE_DECODE`.
    fn has_derived_groups(self) -> bool {
        self.is_v2_lineage()
    }

    /// 0.5.23's `_sync_srt_tp_group()` builds srt's single-rank MoE-EP coordinator after TP.
    fn has_srt_moe_ep_group(self) -> bool {
        self == Version::V0_5_23
    }

    /// 0.5.23 keeps a `_CFG_SP` view over CFG's groups when cfg > 1 and sp == 1.
    fn has_cfg_sp_view(self) -> bool {
        self == Version::V0_5_23
    }

    /// `init_parallel_group_coordinator`'s name for the TP coordinator
    /// (V0/V1 fall through to `"cfg_group"`).
    fn tp_group_name(self) -> &'static str {
        match self {
            Version::V0 | Version::V1 => "cfg_group",
            Version::V2 | Version::V0_5_23 => "tp_group",
        }
    }
}

/// Simulator guard: the largest world a plan is made for (the plan is shared by all ranks and
/// memberships are computed when asked, so its size is O(world)). The scenario's world limit
/// (scenario/limits.rs) is checked at compile time to fit within it.
pub const MAX_WORLD_SIZE: usize = 4096;

/// `initialize_model_parallel`'s degrees as a scenario step names them; `sp` defaults to
/// `ulysses * ring` (the scenario re-exports this as `SglangDegrees`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Degrees {
    pub tp: usize,
    pub ulysses: usize,
    pub ring: usize,
    pub sp: usize,
    pub cfg: usize,
    pub dp: usize,
    pub pp: usize,
    pub vae: usize,
}

/// Parallel degrees as passed to `initialize_model_parallel`, plus the real
/// world size from `init_process_group`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ParallelConfig {
    /// `torch.distributed.get_world_size()`.
    pub world_size: usize,
    /// `tensor_parallel_degree`.
    pub tp: usize,
    /// `ulysses_degree`.
    pub ulysses: usize,
    /// `ring_degree`.
    pub ring: usize,
    /// `sequence_parallel_degree` (not derived from ulysses×ring, docs/rules/sglang.md §3.14).
    pub sp: usize,
    /// `classifier_free_guidance_degree`.
    pub cfg: usize,
    /// `data_parallel_size`.
    pub dp: usize,
    /// `pipeline_parallel_degree`.
    pub pp: usize,
    /// `vae_parallel_size` (0 = no `_VAE` group).
    pub vae_parallel_size: usize,
}

impl ParallelConfig {
    /// The degrees a scenario's `initialize_model_parallel` step names, in a world of
    /// `world_size` ranks.
    pub fn from_degrees(world_size: usize, d: &Degrees) -> Self {
        Self {
            world_size,
            tp: d.tp,
            ulysses: d.ulysses,
            ring: d.ring,
            sp: d.sp,
            cfg: d.cfg,
            dp: d.dp,
            pp: d.pp,
            vae_parallel_size: d.vae,
        }
    }

    /// All degrees 1, no VAE group.
    pub fn new(world_size: usize) -> Self {
        Self {
            world_size,
            tp: 1,
            ulysses: 1,
            ring: 1,
            sp: 1,
            cfg: 1,
            dp: 1,
            pp: 1,
            vae_parallel_size: 0,
        }
    }

    /// `dit_parallel_size = dp*cfg*sp*pp*tp` (saturating).
    pub fn dit_parallel_size(&self) -> usize {
        [self.dp, self.cfg, self.sp, self.pp, self.tp]
            .iter()
            .fold(1usize, |acc, d| acc.saturating_mul(*d))
    }

    /// Simulator guards: no zero degree, world within [`MAX_WORLD_SIZE`].
    fn guard(&self) -> Result<(), PlanError> {
        if let Some(name) = self.first_zero_degree() {
            return Err(PlanError::ZeroDegree { name });
        }
        if self.world_size > MAX_WORLD_SIZE {
            return Err(PlanError::WorldTooLarge {
                world_size: self.world_size,
            });
        }
        Ok(())
    }

    fn first_zero_degree(&self) -> Option<&'static str> {
        [
            ("world_size", self.world_size),
            ("tp", self.tp),
            ("ulysses", self.ulysses),
            ("ring", self.ring),
            ("sp", self.sp),
            ("cfg", self.cfg),
            ("dp", self.dp),
            ("pp", self.pp),
        ]
        .iter()
        .find(|(_, v)| *v == 0)
        .map(|(n, _)| *n)
    }
}

/// Backend argument of a `new_group` call, in the golden JSON's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BackendChoice {
    /// The platform backend passed down (`"DEVICE"`: nccl/xccl/…, gloo on
    /// V0 non-CUDA).
    Device,
    /// Explicit `"gloo"`.
    Gloo,
    /// `backend=None`: the default PG's backend (`"DEFAULT(None)"`).
    Default,
}

impl BackendChoice {
    /// The JSON spelling: `"DEVICE"`, `"gloo"`, `"DEFAULT(None)"`.
    pub fn golden_name(self) -> &'static str {
        match self {
            BackendChoice::Device => "DEVICE",
            BackendChoice::Gloo => "gloo",
            BackendChoice::Default => "DEFAULT(None)",
        }
    }
}

/// Why a `new_group` call is made; with the coordinator it forms the JSON tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// `GroupCoordinator` device group (`<c>.device`).
    DeviceGroup,
    /// `GroupCoordinator` gloo group (`<c>.cpu`).
    CpuGroup,
    /// Ulysses sub-group of USP (`ulysses`).
    UlyssesPg,
    /// Ring sub-group of USP (`ring`).
    RingPg,
    /// A bare process group (`dit`, `vae`).
    ProcessGroup,
    /// xDiT PP: `super().__init__` device group (`pp.super.device`).
    PpSuperDevice,
    /// xDiT PP: `super().__init__` gloo group (`pp.super.cpu`).
    PpSuperCpu,
    /// xDiT PP: re-created device group, list length 1 or > 2.
    PpAgainDevice,
    /// xDiT PP: re-created gloo group, list length 1 or > 2.
    PpAgainCpu,
    /// xDiT PP: `device_group_0_1` for 2-rank lists.
    PpAgainDevice01,
    /// xDiT PP: `device_group_1_0` for 2-rank lists.
    PpAgainDevice10,
    /// xDiT PP: `cpu_group_0_1` for 2-rank lists.
    PpAgainCpu01,
    /// xDiT PP: `cpu_group_1_0` for 2-rank lists.
    PpAgainCpu10,
    /// xDiT PP: `skip_device_group` (`pp.skip_device`).
    PpSkipDevice,
}

impl Purpose {
    fn tag_suffix(self) -> &'static str {
        match self {
            Purpose::DeviceGroup => ".device",
            Purpose::CpuGroup => ".cpu",
            Purpose::UlyssesPg | Purpose::RingPg | Purpose::ProcessGroup => "",
            Purpose::PpSuperDevice => ".super.device",
            Purpose::PpSuperCpu => ".super.cpu",
            Purpose::PpAgainDevice => ".again.device",
            Purpose::PpAgainCpu => ".again.cpu",
            Purpose::PpAgainDevice01 => ".again.device_0_1",
            Purpose::PpAgainDevice10 => ".again.device_1_0",
            Purpose::PpAgainCpu01 => ".again.cpu_0_1",
            Purpose::PpAgainCpu10 => ".again.cpu_1_0",
            Purpose::PpSkipDevice => ".skip_device",
        }
    }
}

/// One `torch.distributed.new_group` call; every rank makes the same list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NewGroupCall {
    /// Global ranks passed to `new_group`.
    pub ranks: Vec<usize>,
    /// Backend argument.
    pub backend: BackendChoice,
    /// Owning coordinator / group kind: `world`, `dp`, `cfg`, `pp`,
    /// `ulysses`, `ring`, `sp`, `tp`, `replica`, `encoder_dp`, `vae_decode`,
    /// `vae`, `dit`.
    pub coordinator: &'static str,
    /// Role of the group inside its coordinator.
    pub purpose: Purpose,
}

impl NewGroupCall {
    /// The golden JSON tag, e.g. `cfg.device`, `ring`, `pp.super.cpu`.
    pub fn tag(&self) -> String {
        format!("{}{}", self.coordinator, self.purpose.tag_suffix())
    }
}

/// What a group kind resolved to, matching the JSON `groups` entries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKind {
    /// New groups were created from these rank lists, in creation order.
    Created(Vec<Vec<usize>>),
    /// No group created; the named kind's coordinator is reused (`alias:X`).
    Alias(String),
    /// The coordinator is `None` (V2 `_ENCODER_DP` for pure-TP replicas).
    Absent,
}

/// A rank's group of one kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Membership {
    /// The group's global ranks.
    pub ranks: Vec<usize>,
    /// `ranks.index(rank)`.
    pub rank_in_group: usize,
}

/// One `GroupCoordinator` construction inside the plan.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoordinatorPlan {
    /// Kind key (`world`, `dp`, …).
    pub coordinator: &'static str,
    /// `group_name` passed to the coordinator.
    pub group_name: &'static str,
    /// `unique_name` (`name:counter`), e.g. `cfg_group:1` for CFG.
    pub unique_name: String,
    /// `group_ranks`.
    pub group_ranks: Vec<Vec<usize>>,
    /// Whether a device communicator is built when the rank's group has > 1
    /// rank.
    pub use_device_communicator: bool,
    /// V2 TP: srt custom all-reduce over the cpu group (docs/rules/sglang.md §4.24, its
    /// construction traffic is inferred, not listed here).
    pub use_srt_custom_allreduce: bool,
    /// Index in [`Plan::calls`] of this coordinator's first `new_group`.
    pub first_call: usize,
    /// One past its last `new_group`.
    pub end_call: usize,
    /// The device communicator is built once this many calls were issued
    /// (== `end_call`, except xDiT PP which builds it after its super groups).
    pub communicator_after_call: usize,
}

impl CoordinatorPlan {
    /// The list a rank ends up in (the last list containing it, R4).
    pub fn membership(&self, rank: usize) -> Option<Membership> {
        membership_in(&self.group_ranks, rank)
    }
}

/// The complete start-up plan; identical on every rank (R1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Lineage planned.
    pub version: Version,
    /// PP model used.
    pub pipeline_model: PipelineModel,
    /// Input configuration.
    pub config: ParallelConfig,
    /// Every `new_group` call, world coordinator first, in order.
    pub calls: Vec<NewGroupCall>,
    /// Kind → created lists / alias / absent.
    pub groups: BTreeMap<String, GroupKind>,
    /// Coordinators in construction order.
    pub coordinators: Vec<CoordinatorPlan>,
}

impl Plan {
    /// Kind → `rank`'s group (aliases resolved). Computed when asked, not stored per rank: a
    /// table of every rank's groups is W x W (the world kind alone) and every rank held one,
    /// which made a 1024-rank start-up need more than 16 GB (issue 11).
    pub fn memberships(&self, rank: usize) -> BTreeMap<String, Membership> {
        build::rank_memberships(&self.groups, rank)
    }

    /// [`Plan::memberships`]' lists, borrowed from the plan (kinds in the same order).
    pub fn member_lists(&self, rank: usize) -> Vec<(&str, &[usize])> {
        (self.groups.keys())
            .filter_map(|kind| {
                let lists = build::resolve_alias(&self.groups, kind)?;
                let list = lists.iter().rev().find(|r| r.contains(&rank))?;
                Some((kind.as_str(), &list[..]))
            })
            .collect()
    }

    /// `rank`'s group of one kind (aliases resolved).
    pub fn membership(&self, kind: &str, rank: usize) -> Option<Membership> {
        build::resolve_alias(&self.groups, kind).and_then(|lists| membership_in(lists, rank))
    }

    /// The coordinator plan of a kind, if one was constructed.
    pub fn coordinator(&self, kind: &str) -> Option<&CoordinatorPlan> {
        self.coordinators.iter().find(|c| c.coordinator == kind)
    }

    /// The communicator view of `rank` in coordinator `kind`.
    pub fn communicator_group(&self, kind: &str, rank: usize) -> Option<CommunicatorGroup> {
        let coord = self.coordinator(kind)?;
        let m = coord.membership(rank)?;
        Some(CommunicatorGroup {
            coordinator: coord.coordinator,
            unique_name: coord.unique_name.clone(),
            ranks: m.ranks,
            rank,
            rank_in_group: m.rank_in_group,
            use_device_communicator: coord.use_device_communicator,
        })
    }
}

/// The last list containing `rank` (R4: a rank in several lists keeps the
/// last one).
fn membership_in(group_ranks: &[Vec<usize>], rank: usize) -> Option<Membership> {
    group_ranks.iter().rev().find_map(|ranks| {
        ranks.iter().position(|r| *r == rank).map(|i| Membership {
            ranks: ranks.clone(),
            rank_in_group: i,
        })
    })
}
