//! scen's limits on what one scenario may ask for, checked when the file is loaded so that
//! `scen check` accepts only what `scen run` can run: every rank's tensors live in one process,
//! a simulated millisecond costs a step, and formulas are parsed and evaluated recursively.
//! Each limit is named in the error that enforces it; docs/scenario-format.md lists them.

use crate::c10d::collective::CollOp;

/// Ranks in the world (nodes × ranks_per_node).
pub const MAX_WORLD_SIZE: usize = 4096;
// sglang's planner is made for worlds up to its own guard: every world a scenario may ask for.
const _: () = assert!(MAX_WORLD_SIZE <= crate::sglang::parallel_state::MAX_WORLD_SIZE);
/// Steps in the program.
pub const MAX_STEPS: usize = 100_000;
/// Tensor data one rank holds for one step (inputs and outputs together).
pub const MAX_TENSOR_BYTES_PER_RANK: u64 = 256 << 20;
/// Tensor data all ranks hold together for one step.
pub const MAX_TENSOR_BYTES_TOTAL: u64 = 1 << 30;
/// Elements of one tensor.
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 28;
/// sglang's all-to-all steps (`all_to_all_4d`, `usp_all_to_all`) with values: elements of a
/// rank's input (every element is filled, moved and checked, with an index per element). With
/// symbolic payloads they move no elements and take up to [`MAX_TENSOR_ELEMENTS`].
pub const MAX_A2A_VALUE_ELEMENTS: u64 = 1 << 22;
/// denoise_step: elements of a rank's activation (batch × seq × heads × head_dim).
pub const MAX_DENOISE_ELEMENTS: u64 = 1 << 24;
/// denoise_step: layers × activation elements summed over the program (simulation work).
pub const MAX_DENOISE_WORK: u64 = 1 << 28;
/// Any duration (sleep, latency, timeout, fault time): 30 days, the simulator's horizon.
pub const MAX_DURATION_MS: u64 = 30 * 24 * 3600 * 1000;

/// What one run may allocate in all: `scen run` must fit a 4 GiB address space (the fuzzer's
/// limit, docs/fuzzing.md) with room for the binary, the stacks and the allocator's slack.
pub const MEMORY_BUDGET_BYTES: u64 = 3 << 30;
/// Copies of a collective's tensors (as [`coll_bytes_per_rank`] counts them: input and output)
/// a run holds at once: those and the messages in flight.
pub const TENSOR_COPIES: u64 = 2;
/// The simulator's own state, fitted to measurements with room to spare: max RSS of `scen run`
/// (gloo, init + one send) on the release build was 48 MiB at 512 ranks, 124 MiB at 1024,
/// 364 MiB at 2048 and 1.15 GiB at 4096; one more world-sized gloo group at 1024 ranks added
/// 37 MiB; the debug build starts at about 40 MiB. `tests/sim/memory.rs` checks the estimate
/// against the peak of generated worlds.
const STATE_BASE_BYTES: u64 = 64 << 20;
const STATE_PER_RANK_BYTES: u64 = 192 << 10;
/// Per ordered pair of ranks in the world (the store's and every rank's per-peer tables).
const STATE_PER_WORLD_PAIR_BYTES: u64 = 32;
/// Per ordered pair of members of each group (init_process_group's world group included).
const STATE_PER_GROUP_PAIR_BYTES: u64 = 40;
/// Per ordered pair of members of a group that runs an all-to-all, where every pair exchanges:
/// each pair's connection and its buffers (measured: a gloo all_to_all_single of 345 ranks
/// with one row each peaked at 805 MiB, about 7 KiB per pair).
const STATE_PER_EXCHANGING_PAIR_BYTES: u64 = 12 << 10;

/// What a run is expected to allocate at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryEstimate {
    /// The simulator's state: ranks, groups, the store.
    pub state_bytes: u64,
    /// The largest collective's tensors over all ranks, times [`TENSOR_COPIES`].
    pub tensor_bytes: u64,
}

impl MemoryEstimate {
    pub fn total(&self) -> u64 {
        self.state_bytes.saturating_add(self.tensor_bytes)
    }

    /// Tensor bytes over all ranks a collective may still hold within the budget (what a
    /// split-size formula is held to when it runs): at most [`MAX_TENSOR_BYTES_TOTAL`].
    pub fn tensor_room_bytes(&self) -> u64 {
        (MEMORY_BUDGET_BYTES.saturating_sub(self.state_bytes) / TENSOR_COPIES)
            .min(MAX_TENSOR_BYTES_TOTAL)
    }
}

/// The simulator state of a world of `world` ranks with groups of `group_members` each
/// (init_process_group's world group included).
/// `exchanging_members`: the members of each group that runs an all-to-all (once per group).
pub fn state_bytes(
    world: u64,
    group_members: impl IntoIterator<Item = u64>,
    exchanging_members: impl IntoIterator<Item = u64>,
) -> u64 {
    let pairs = |ms: &mut dyn Iterator<Item = u64>| {
        ms.fold(0u64, |a, m| a.saturating_add(m.saturating_mul(m)))
    };
    let group_pairs = pairs(&mut group_members.into_iter());
    let exchanging_pairs = pairs(&mut exchanging_members.into_iter());
    STATE_BASE_BYTES
        .saturating_add(world.saturating_mul(STATE_PER_RANK_BYTES))
        .saturating_add(
            world
                .saturating_mul(world)
                .saturating_mul(STATE_PER_WORLD_PAIR_BYTES),
        )
        .saturating_add(group_pairs.saturating_mul(STATE_PER_GROUP_PAIR_BYTES))
        .saturating_add(exchanging_pairs.saturating_mul(STATE_PER_EXCHANGING_PAIR_BYTES))
}

/// Bytes one rank holds for one collective step: the input and the output, where gathering,
/// scattering and all-to-all ops hold one chunk per rank of the (at most `world`-rank) group.
pub fn coll_bytes_per_rank(
    op: CollOp,
    elements: u64,
    elem_bytes: u64,
    count: u64,
    world: u64,
) -> u64 {
    let fan = match op {
        CollOp::AllReduce | CollOp::Reduce | CollOp::Broadcast | CollOp::AllReduceCoalesced => 2,
        _ => world.saturating_add(1),
    };
    elements
        .saturating_mul(elem_bytes)
        .saturating_mul(count)
        .saturating_mul(fan)
}

/// A byte count as "256 MiB".
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A store step's key, in bytes.
pub const MAX_STORE_KEY_BYTES: usize = 4096;
/// A `store_set` step's value, in bytes.
pub const MAX_STORE_VALUE_BYTES: usize = 1 << 20;
/// Keys of one `store_check` / `store_wait` step.
pub const MAX_STORE_KEYS: usize = 1024;
