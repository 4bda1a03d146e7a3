//! Pure planner of sglang multimodal_gen start-up: which `new_group` calls
//! every rank makes, in which order and with which backend, per code lineage.
//!
//! The simulator needs this because torch names groups from a global counter:
//! any difference in the count, order, rank lists or backend class of
//! `new_group` calls between ranks is a rendezvous hang (spec R1). The planner
//! walks `init_distributed_environment`'s world coordinator and
//! `initialize_model_parallel` (spec §2.11, §3, §4.22) for
//! [`Version::V0`] (`parallel_state@64ec4f88`, `group_coordinator@d5fc25da`
//! and yunchang), [`Version::V1`] (intermediate, after PR #16532/#17920) and
//! [`Version::V2`] (`parallel_state@00d56e2c`), and reports the same failures
//! the Python raises, with their texts. It also lists the construction
//! collectives of each device communicator (spec §4.23, R5).
//!
//! Single-node assumption: the world coordinator's `local_rank` (used in the
//! `group_ranks=…, local_rank=…` assertion text) is taken to equal the rank.

use std::collections::BTreeMap;

use thiserror::Error;

use super::rank_generator::{
    py_list, py_nested_list, RankGenerator, RankGeneratorError, SGLANG_ORDER,
};

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
}

/// How the PP coordinator creates its groups (spec §3.21, `_meta.caveat_pp`).
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
            Version::V2 => PipelineModel::Plain,
        }
    }

    /// V2's `new_device_group` puts single-rank lists on gloo (spec R3).
    fn singleton_device_groups_on_gloo(self) -> bool {
        self == Version::V2
    }

    /// V2 creates `_REPLICA`, `_ENCODER_DP`, `_VAE_DECODE`.
    fn has_derived_groups(self) -> bool {
        self == Version::V2
    }

    /// `init_parallel_group_coordinator`'s name for the TP coordinator
    /// (V0/V1 fall through to `"cfg_group"`).
    fn tp_group_name(self) -> &'static str {
        match self {
            Version::V0 | Version::V1 => "cfg_group",
            Version::V2 => "tp_group",
        }
    }
}

/// Simulator guard: per-rank memberships are O(world²), so plans stop here.
pub const MAX_WORLD_SIZE: usize = 1024;

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
    /// `sequence_parallel_degree` (not derived from ulysses×ring, §3.14).
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
    /// V2 TP: srt custom all-reduce over the cpu group (spec §4.24, its
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
        rank_memberships(&self.groups, rank)
    }

    /// `rank`'s group of one kind (aliases resolved).
    pub fn membership(&self, kind: &str, rank: usize) -> Option<Membership> {
        resolve_alias(&self.groups, kind).and_then(|lists| membership_in(lists, rank))
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

/// Failures of start-up, each with the Python text. Variants raised after
/// some `new_group` calls carry `issued_calls`: the calls every rank made
/// before the failure (members then die; the others run on into a hang).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    /// Simulator guard (not Python behaviour): a degree or the world is 0.
    #[error("{name} must be at least 1, got 0")]
    ZeroDegree {
        /// Field name.
        name: &'static str,
    },
    /// Simulator guard (not Python behaviour): world above [`MAX_WORLD_SIZE`].
    #[error("world_size {world_size} exceeds the simulator limit of {MAX_WORLD_SIZE}")]
    WorldTooLarge {
        /// Requested world size.
        world_size: usize,
    },
    /// `initialize_model_parallel`'s `RuntimeError` (spec §3.15, R10); the
    /// missing spaces after `x` are in the original f-string.
    #[error(
        "world_size ({world_size}) is less than tensor_parallel_degree ({tp}) x \
         pipeline_parallel_degree ({pp}) xsequence_parallel_degree ({sp}) \
         xclassifier_free_guidance_degree ({cfg}) xdata_parallel_degree ({dp})"
    )]
    WorldTooSmall {
        /// Real world size.
        world_size: usize,
        /// TP degree.
        tp: usize,
        /// PP degree.
        pp: usize,
        /// SP degree.
        sp: usize,
        /// CFG degree.
        cfg: usize,
        /// DP size.
        dp: usize,
        /// Calls made before (the world coordinator's).
        issued_calls: Vec<NewGroupCall>,
    },
    /// `GroupCoordinator.__init__`'s `AssertionError` for a rank in no list
    /// (spec §4.22, R4): ranks ≥ dit when `world_size > dit` fail in `_DP`.
    #[error("group_ranks={}, local_rank={}", py_nested_list(.group_ranks), .local_rank)]
    RankInNoGroup {
        /// Coordinator kind.
        coordinator: &'static str,
        /// Its `group_ranks`.
        group_ranks: Vec<Vec<usize>>,
        /// `local_rank` of the lowest failing rank (single node: its rank).
        local_rank: usize,
        /// Every rank that raises.
        failing_ranks: Vec<usize>,
        /// Calls made before the assertion (including the coordinator's).
        issued_calls: Vec<NewGroupCall>,
    },
    /// `set_seq_parallel_pg_by_sp_groups`'s `AssertionError` when
    /// `sp != ulysses*ring` (V1/V2, R10).
    #[error("Each SP group must have size {sp_degree}, got sizes {}", py_list(.sizes))]
    SpGroupSizeMismatch {
        /// `ulysses*ring`.
        sp_degree: usize,
        /// `[len(g) for g in sp_groups]`.
        sizes: Vec<usize>,
        /// Calls made before.
        issued_calls: Vec<NewGroupCall>,
    },
    /// yunchang `set_seq_parallel_pg`'s `AssertionError` (V0) when
    /// `dit % (ulysses*ring) != 0`; the text prints the Ulysses degree.
    #[error("world_size {world_size} % sp_degree {ulysses} == 0")]
    LegacyWorldNotDivisible {
        /// `dit_parallel_size` passed as yunchang's world size.
        world_size: usize,
        /// Ulysses degree (what the message prints as "sp_degree").
        ulysses: usize,
        /// Calls made before.
        issued_calls: Vec<NewGroupCall>,
    },
    /// torch `new_group`'s `ValueError` for a rank ≥ world size (text from
    /// current torch, inferred; hit by `_VAE` ranks `dit..dit+vae` when
    /// `world == dit`).
    #[error("The new group's rank should be within the world_size set by init_process_group")]
    RankOutsideWorld {
        /// Kind whose call failed.
        coordinator: &'static str,
        /// The rejected rank list.
        ranks: Vec<usize>,
        /// Calls made before.
        issued_calls: Vec<NewGroupCall>,
    },
    /// torch `new_group`'s `ValueError` for a list longer than the world.
    #[error(
        "the new group's world size should be less or equal to the world size set by \
         init_process_group"
    )]
    GroupLargerThanWorld {
        /// Kind whose call failed.
        coordinator: &'static str,
        /// The rejected rank list.
        ranks: Vec<usize>,
        /// Calls made before.
        issued_calls: Vec<NewGroupCall>,
    },
    /// A `RankGenerator` failure (not reachable with sglang's fixed order).
    #[error(transparent)]
    RankGenerator(#[from] RankGeneratorError),
}

impl PlanError {
    /// The Python exception class raised.
    pub fn python_exception(&self) -> &'static str {
        match self {
            PlanError::ZeroDegree { .. } | PlanError::WorldTooLarge { .. } => "SimulatorGuard",
            PlanError::WorldTooSmall { .. } => "RuntimeError",
            PlanError::RankInNoGroup { .. }
            | PlanError::SpGroupSizeMismatch { .. }
            | PlanError::LegacyWorldNotDivisible { .. } => "AssertionError",
            PlanError::RankOutsideWorld { .. } | PlanError::GroupLargerThanWorld { .. } => {
                "ValueError"
            }
            PlanError::RankGenerator(e) => e.python_exception(),
        }
    }

    /// Calls every rank issued before the failure (empty when none / n.a.).
    pub fn issued_calls(&self) -> &[NewGroupCall] {
        match self {
            PlanError::WorldTooSmall { issued_calls, .. }
            | PlanError::RankInNoGroup { issued_calls, .. }
            | PlanError::SpGroupSizeMismatch { issued_calls, .. }
            | PlanError::LegacyWorldNotDivisible { issued_calls, .. }
            | PlanError::RankOutsideWorld { issued_calls, .. }
            | PlanError::GroupLargerThanWorld { issued_calls, .. } => issued_calls,
            PlanError::ZeroDegree { .. }
            | PlanError::WorldTooLarge { .. }
            | PlanError::RankGenerator(_) => &[],
        }
    }

    fn with_issued_calls(mut self, calls: &[NewGroupCall]) -> Self {
        match &mut self {
            PlanError::WorldTooSmall { issued_calls, .. }
            | PlanError::RankInNoGroup { issued_calls, .. }
            | PlanError::SpGroupSizeMismatch { issued_calls, .. }
            | PlanError::LegacyWorldNotDivisible { issued_calls, .. }
            | PlanError::RankOutsideWorld { issued_calls, .. }
            | PlanError::GroupLargerThanWorld { issued_calls, .. } => {
                *issued_calls = calls.to_vec()
            }
            PlanError::ZeroDegree { .. }
            | PlanError::WorldTooLarge { .. }
            | PlanError::RankGenerator(_) => {}
        }
        self
    }
}

/// Which USP axis a sub-group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UspAxis {
    /// Ulysses (all-to-all) group.
    Ulysses,
    /// Ring (ring-attention) group.
    Ring,
}

/// One USP sub-group in creation order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UspGroup {
    /// Axis.
    pub axis: UspAxis,
    /// Global ranks.
    pub ranks: Vec<usize>,
}

/// V1/V2 `set_seq_parallel_pg_by_sp_groups(u, r, sp_groups,
/// use_ulysses_low=True)`: per SP group, `r` contiguous Ulysses slices then
/// `u` strided Ring slices (spec §3.19).
pub fn usp_groups_by_sp_groups(
    ulysses: usize,
    ring: usize,
    sp_groups: &[Vec<usize>],
) -> Result<Vec<UspGroup>, PlanError> {
    let sp_degree = ulysses * ring;
    if sp_degree == 0 {
        return Err(PlanError::ZeroDegree {
            name: if ulysses == 0 { "ulysses" } else { "ring" },
        });
    }
    if sp_groups.iter().any(|g| g.len() != sp_degree) {
        return Err(PlanError::SpGroupSizeMismatch {
            sp_degree,
            sizes: sp_groups.iter().map(Vec::len).collect(),
            issued_calls: Vec::new(),
        });
    }
    let mut out = Vec::new();
    for sp in sp_groups {
        out.extend(usp_block(ulysses, ring, |i| sp[i]));
    }
    Ok(out)
}

/// V0 yunchang `set_seq_parallel_pg(u, r, rank, world_size=dit)`: the same
/// pattern over contiguous blocks `offset = dp_rank*u*r` (the pre-#16532 bug,
/// R11).
pub fn usp_groups_legacy_yunchang(
    ulysses: usize,
    ring: usize,
    world_size: usize,
) -> Result<Vec<UspGroup>, PlanError> {
    let sp_degree = ulysses * ring;
    if sp_degree == 0 {
        return Err(PlanError::ZeroDegree {
            name: if ulysses == 0 { "ulysses" } else { "ring" },
        });
    }
    if !world_size.is_multiple_of(sp_degree) {
        return Err(PlanError::LegacyWorldNotDivisible {
            world_size,
            ulysses,
            issued_calls: Vec::new(),
        });
    }
    let mut out = Vec::new();
    for dp_rank in 0..world_size / sp_degree {
        let offset = dp_rank * sp_degree;
        out.extend(usp_block(ulysses, ring, |i| i + offset));
    }
    Ok(out)
}

/// Ulysses-low layout of one SP block whose i-th member is `member(i)`.
fn usp_block(ulysses: usize, ring: usize, member: impl Fn(usize) -> usize) -> Vec<UspGroup> {
    let sp_degree = ulysses * ring;
    let ulysses_groups = (0..ring).map(|i| UspGroup {
        axis: UspAxis::Ulysses,
        ranks: (i * ulysses..(i + 1) * ulysses).map(&member).collect(),
    });
    let ring_groups = (0..ulysses).map(|i| UspGroup {
        axis: UspAxis::Ring,
        ranks: (i..sp_degree).step_by(ulysses).map(&member).collect(),
    });
    ulysses_groups.chain(ring_groups).collect()
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

    /// xDiT `PipelineGroupCoordinator.__init__` (spec §3.21).
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
            Version::V1 | Version::V2 => {
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

/// `_DP`, `_CFG`, `_PP`, USP sub-groups, `_SP`, `_TP` (spec §3.18).
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
    let v2 = b.version == Version::V2;
    let tp_spec = CoordSpec {
        kind: "tp",
        group_name: b.version.tp_group_name(),
        use_device_communicator: !v2,
        use_srt_custom_allreduce: v2,
    };
    b.plain_coordinator(tp_spec, &gen.get_ranks("tp")?)
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
fn rank_memberships(
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

fn resolve_alias<'a>(
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

/// Platform as seen by `current_platform` (spec §2.7, §4.23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    /// NVIDIA CUDA (cuda-alike).
    Cuda,
    /// AMD ROCm (cuda-alike).
    Rocm,
    /// Moore Threads MUSA (cuda-alike).
    Musa,
    /// Ascend NPU.
    Npu,
    /// Intel XPU.
    Xpu,
    /// Apple MPS.
    Mps,
    /// Plain CPU.
    Cpu,
    /// CPU on x86 with `torch.ops._C.init_shm_manager` available.
    CpuX86Shm,
    /// Anything else (out-of-tree).
    Other,
}

impl Platform {
    /// `is_cuda_alike()`: CUDA, ROCm, MUSA.
    pub fn is_cuda_alike(self) -> bool {
        matches!(self, Platform::Cuda | Platform::Rocm | Platform::Musa)
    }
}

/// `get_torch_distributed_backend_str()` has no entry for the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("NotImplementedError: no torch.distributed backend for platform {platform:?}")]
pub struct UnsupportedPlatform {
    /// The platform.
    pub platform: Platform,
}

/// The concrete backend behind [`BackendChoice::Device`] (spec §2.7): V0 is
/// nccl on cuda-alike and gloo elsewhere; V1/V2 use the platform table.
pub fn torch_distributed_backend(
    platform: Platform,
    version: Version,
) -> Result<&'static str, UnsupportedPlatform> {
    if platform.is_cuda_alike() {
        return Ok("nccl");
    }
    if version == Version::V0 {
        return Ok("gloo");
    }
    match platform {
        Platform::Npu => Ok("hccl"),
        Platform::Mps | Platform::Cpu | Platform::CpuX86Shm => Ok("gloo"),
        Platform::Xpu => Ok("xccl"),
        _ => Err(UnsupportedPlatform { platform }),
    }
}

/// A rank's view of one coordinator, input of
/// [`device_communicator_collectives`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommunicatorGroup {
    /// Coordinator kind.
    pub coordinator: &'static str,
    /// `unique_name` (the CPU-SHM rule tests its `"tp"` prefix).
    pub unique_name: String,
    /// Global ranks of the rank's group.
    pub ranks: Vec<usize>,
    /// The global rank.
    pub rank: usize,
    /// Its index in `ranks`.
    pub rank_in_group: usize,
    /// Whether the coordinator builds a device communicator.
    pub use_device_communicator: bool,
}

/// Which process group / communicator a construction step runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommGroup {
    /// The coordinator's gloo `cpu_group`.
    Cpu,
    /// The coordinator's `device_group`.
    Device,
    /// The freshly built PyNccl communicator.
    PyNccl,
}

/// One step of device-communicator construction (spec §4.23).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConstructionStep {
    /// Local: group rank 0 calls `ncclGetUniqueId`.
    NcclGetUniqueId,
    /// `dist.broadcast` of `bytes` from global rank `src`.
    Broadcast {
        /// Group used.
        group: CommGroup,
        /// Global source rank (`ranks[0]`).
        src: usize,
        /// Payload size.
        bytes: usize,
    },
    /// `ncclCommInitRank(nranks, id, rank)`; blocks across members.
    NcclCommInitRank {
        /// Group size.
        nranks: usize,
        /// Rank in group.
        rank: usize,
    },
    /// Warm-up all-reduce.
    AllReduce {
        /// Group used.
        group: CommGroup,
        /// Element count.
        elements: usize,
        /// Payload size.
        bytes: usize,
    },
    /// Local: `stream.synchronize()`.
    StreamSynchronize,
    /// `barrier` on a group.
    Barrier {
        /// Group used.
        group: CommGroup,
    },
}

impl ConstructionStep {
    /// Whether the step needs the other members (vs. purely local).
    pub fn is_collective(self) -> bool {
        !matches!(
            self,
            ConstructionStep::NcclGetUniqueId | ConstructionStep::StreamSynchronize
        )
    }
}

/// Construction steps of the device communicator a rank builds for `group`
/// (spec §4.23, R5): none unless the coordinator uses one and the group has
/// more than one rank; CUDA-alike → PyNccl (128-byte gloo broadcast of the unique id,
/// `ncclCommInitRank`, 1-element fp32 all-reduce); CPU-SHM with a `tp*` name →
/// two device-group barriers; everything else, XPU included → none. The three
/// lineages build the same communicators, so `version` does not change the
/// result today.
pub fn device_communicator_collectives(
    platform: Platform,
    version: Version,
    group: &CommunicatorGroup,
) -> Vec<ConstructionStep> {
    match version {
        // Every lineage builds the same communicators (V0 on XPU also lands
        // on CpuCommunicator); matched so a new lineage must decide.
        Version::V0 | Version::V1 | Version::V2 => {}
    }
    if !group.use_device_communicator || group.ranks.len() <= 1 {
        return Vec::new();
    }
    if platform.is_cuda_alike() {
        return pynccl_construction(group);
    }
    if platform == Platform::CpuX86Shm && group.unique_name.starts_with("tp") {
        let barrier = ConstructionStep::Barrier {
            group: CommGroup::Device,
        };
        return vec![barrier, barrier];
    }
    Vec::new()
}

const NCCL_UNIQUE_ID_BYTES: usize = 128;
const WARMUP_ALL_REDUCE_BYTES: usize = 4;

fn pynccl_construction(group: &CommunicatorGroup) -> Vec<ConstructionStep> {
    let mut steps = Vec::with_capacity(5);
    if group.rank_in_group == 0 {
        steps.push(ConstructionStep::NcclGetUniqueId);
    }
    steps.push(ConstructionStep::Broadcast {
        group: CommGroup::Cpu,
        src: group.ranks[0],
        bytes: NCCL_UNIQUE_ID_BYTES,
    });
    steps.push(ConstructionStep::NcclCommInitRank {
        nranks: group.ranks.len(),
        rank: group.rank_in_group,
    });
    steps.push(ConstructionStep::AllReduce {
        group: CommGroup::PyNccl,
        elements: 1,
        bytes: WARMUP_ALL_REDUCE_BYTES,
    });
    steps.push(ConstructionStep::StreamSynchronize);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(world: usize, tp: usize, u: usize, r: usize, cfg_deg: usize) -> ParallelConfig {
        ParallelConfig {
            tp,
            ulysses: u,
            ring: r,
            sp: u * r,
            cfg: cfg_deg,
            ..ParallelConfig::new(world)
        }
    }

    #[test]
    fn unique_names_follow_group_name_counters() {
        let plan = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V2).unwrap();
        let names: Vec<&str> = plan
            .coordinators
            .iter()
            .map(|c| c.unique_name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "world:0",
                "cfg_group:0",
                "cfg_group:1",
                "pp_group:0",
                "sp_group:0",
                "tp_group:0",
                "vae_decode_group:0"
            ]
        );
        let v0 = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V0).unwrap();
        assert_eq!(v0.coordinator("tp").unwrap().unique_name, "cfg_group:2");
    }

    #[test]
    fn world_too_small_uses_python_text() {
        let err = plan_initialize_model_parallel(cfg(4, 2, 2, 1, 2), Version::V2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "world_size (4) is less than tensor_parallel_degree (2) x pipeline_parallel_degree (1) \
             xsequence_parallel_degree (2) xclassifier_free_guidance_degree (2) xdata_parallel_degree (1)"
        );
        assert_eq!(err.python_exception(), "RuntimeError");
        assert_eq!(err.issued_calls().len(), 2);
    }

    #[test]
    fn extra_ranks_fail_the_dp_assertion() {
        let err = plan_initialize_model_parallel(cfg(3, 1, 1, 1, 2), Version::V2).unwrap_err();
        assert_eq!(err.to_string(), "group_ranks=[[0], [1]], local_rank=2");
        assert_eq!(err.python_exception(), "AssertionError");
        // world (2 calls) + DP (2 lists x 2 calls) happen before the assertion.
        assert_eq!(err.issued_calls().len(), 6);
    }

    #[test]
    fn sp_not_ulysses_times_ring_fails_split_assertion() {
        let bad = ParallelConfig {
            sp: 4,
            ulysses: 2,
            ring: 1,
            ..ParallelConfig::new(4)
        };
        let err = plan_initialize_model_parallel(bad, Version::V2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Each SP group must have size 2, got sizes [4]"
        );
        // V0 tolerates it (yunchang splits dit into u*r blocks).
        assert!(plan_initialize_model_parallel(bad, Version::V0).is_ok());
        let bad3 = ParallelConfig {
            sp: 4,
            ulysses: 3,
            ring: 1,
            ..ParallelConfig::new(4)
        };
        let err = plan_initialize_model_parallel(bad3, Version::V0).unwrap_err();
        assert_eq!(err.to_string(), "world_size 4 % sp_degree 3 == 0");
    }

    #[test]
    fn vae_parallel_always_fails() {
        // world == dit: the VAE ranks dit.. are outside the world (torch ValueError).
        let c = ParallelConfig {
            cfg: 2,
            vae_parallel_size: 1,
            ..ParallelConfig::new(2)
        };
        let err = plan_initialize_model_parallel(c, Version::V1).unwrap_err();
        assert!(matches!(
            err,
            PlanError::RankOutsideWorld {
                coordinator: "vae",
                ..
            }
        ));
        assert_eq!(err.python_exception(), "ValueError");
        // world > dit: the VAE ranks are in no DP list and assert first.
        let c = ParallelConfig { world_size: 3, ..c };
        let err = plan_initialize_model_parallel(c, Version::V1).unwrap_err();
        assert!(matches!(
            err,
            PlanError::RankInNoGroup {
                coordinator: "dp",
                ..
            }
        ));
    }

    #[test]
    fn zero_degree_is_guarded() {
        let c = ParallelConfig {
            ring: 0,
            ..ParallelConfig::new(2)
        };
        assert_eq!(
            plan_initialize_model_parallel(c, Version::V2),
            Err(PlanError::ZeroDegree { name: "ring" })
        );
    }

    #[test]
    fn huge_world_is_guarded() {
        let c = ParallelConfig {
            tp: usize::MAX,
            ..ParallelConfig::new(usize::MAX)
        };
        let err = plan_initialize_model_parallel(c, Version::V2).unwrap_err();
        assert_eq!(err.python_exception(), "SimulatorGuard");
        let c = ParallelConfig {
            tp: usize::MAX,
            cfg: 2,
            ..ParallelConfig::new(8)
        };
        let err = plan_initialize_model_parallel(c, Version::V2).unwrap_err();
        assert!(matches!(err, PlanError::WorldTooSmall { .. }));
    }

    #[test]
    fn xdit_pipeline_doubles_two_rank_lists() {
        let c = ParallelConfig {
            pp: 2,
            ..ParallelConfig::new(2)
        };
        let plan = plan_initialize_model_parallel(c, Version::V0).unwrap();
        let tags: Vec<String> = plan
            .calls
            .iter()
            .filter(|c| c.coordinator == "pp")
            .map(NewGroupCall::tag)
            .collect();
        assert_eq!(
            tags,
            [
                "pp.super.device",
                "pp.super.cpu",
                "pp.again.device_0_1",
                "pp.again.device_1_0",
                "pp.again.cpu_0_1",
                "pp.again.cpu_1_0",
                "pp.skip_device"
            ]
        );
        let pp = plan.coordinator("pp").unwrap();
        assert_eq!(pp.communicator_after_call - pp.first_call, 2);
    }

    #[test]
    fn v2_replica_and_encoder_dp_with_data_parallel() {
        let c = ParallelConfig {
            dp: 2,
            tp: 2,
            ..cfg(8, 2, 1, 1, 2)
        };
        let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
        assert_eq!(
            plan.groups["replica"],
            GroupKind::Created(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]])
        );
        assert_eq!(plan.groups["encoder_dp"], GroupKind::Alias("cfg".into()));
        let c = ParallelConfig {
            dp: 2,
            ..ParallelConfig::new(2)
        };
        let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
        assert_eq!(plan.groups["replica"], GroupKind::Alias("tp".into()));
        let c = ParallelConfig {
            tp: 2,
            ..ParallelConfig::new(2)
        };
        let plan = plan_initialize_model_parallel(c, Version::V2).unwrap();
        assert_eq!(plan.groups["encoder_dp"], GroupKind::Absent);
        assert!(!plan.memberships(0).contains_key("encoder_dp"));
    }

    #[test]
    fn cuda_communicator_construction_steps() {
        let plan = plan_initialize_model_parallel(cfg(4, 2, 1, 1, 2), Version::V2).unwrap();
        let g = plan.communicator_group("cfg", 3).unwrap();
        let steps = device_communicator_collectives(Platform::Cuda, Version::V2, &g);
        assert_eq!(
            steps,
            vec![
                ConstructionStep::Broadcast {
                    group: CommGroup::Cpu,
                    src: 1,
                    bytes: 128
                },
                ConstructionStep::NcclCommInitRank { nranks: 2, rank: 1 },
                ConstructionStep::AllReduce {
                    group: CommGroup::PyNccl,
                    elements: 1,
                    bytes: 4
                },
                ConstructionStep::StreamSynchronize,
            ]
        );
        assert!(device_communicator_collectives(Platform::Xpu, Version::V2, &g).is_empty());
        let tp = plan.communicator_group("tp", 0).unwrap();
        assert!(device_communicator_collectives(Platform::Cuda, Version::V2, &tp).is_empty());
        let dp = plan.communicator_group("dp", 0).unwrap();
        assert!(device_communicator_collectives(Platform::Cuda, Version::V2, &dp).is_empty());
    }

    #[test]
    fn cpu_shm_barriers_only_for_tp_names() {
        let g = CommunicatorGroup {
            coordinator: "tp",
            unique_name: "tp:0".into(),
            ranks: vec![0, 1],
            rank: 0,
            rank_in_group: 0,
            use_device_communicator: true,
        };
        let b = ConstructionStep::Barrier {
            group: CommGroup::Device,
        };
        assert_eq!(
            device_communicator_collectives(Platform::CpuX86Shm, Version::V0, &g),
            vec![b, b]
        );
        let g = CommunicatorGroup {
            unique_name: "cfg_group:2".into(),
            ..g
        };
        assert!(device_communicator_collectives(Platform::CpuX86Shm, Version::V0, &g).is_empty());
    }

    #[test]
    fn backend_table_per_version() {
        assert_eq!(
            torch_distributed_backend(Platform::Xpu, Version::V0),
            Ok("gloo")
        );
        assert_eq!(
            torch_distributed_backend(Platform::Xpu, Version::V2),
            Ok("xccl")
        );
        assert_eq!(
            torch_distributed_backend(Platform::Musa, Version::V1),
            Ok("nccl")
        );
        assert!(torch_distributed_backend(Platform::Other, Version::V2).is_err());
    }

    #[test]
    fn legacy_split_mixes_tp_pairs() {
        // Spec §3.19 / R11: w8 tp2 u2 → legacy Ulysses are TP pairs.
        let legacy = usp_groups_legacy_yunchang(2, 1, 8).unwrap();
        let ulysses: Vec<Vec<usize>> = legacy
            .iter()
            .filter(|g| g.axis == UspAxis::Ulysses)
            .map(|g| g.ranks.clone())
            .collect();
        assert_eq!(
            ulysses,
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
    }
}
