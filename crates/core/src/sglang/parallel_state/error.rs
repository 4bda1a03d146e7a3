//! Failures of sglang's start-up plan, each with the exception class and text the Python
//! raises, and the `new_group` calls every rank made before it (the hang that follows).

use thiserror::Error;

use super::super::rank_generator::{py_list, py_nested_list, RankGeneratorError};
use super::{NewGroupCall, MAX_WORLD_SIZE};

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
    /// `initialize_model_parallel`'s `RuntimeError` (docs/rules/sglang.md §3.15, sglang R10); the
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
    /// (docs/rules/sglang.md §4.22, sglang R4): ranks ≥ dit when `world_size > dit` fail in `_DP`.
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

    pub(super) fn with_issued_calls(mut self, calls: &[NewGroupCall]) -> Self {
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
