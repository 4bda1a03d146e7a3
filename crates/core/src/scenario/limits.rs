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
/// denoise_step: elements of a rank's activation (batch × seq × heads × head_dim).
pub const MAX_DENOISE_ELEMENTS: u64 = 1 << 24;
/// denoise_step: layers × activation elements summed over the program (simulation work).
pub const MAX_DENOISE_WORK: u64 = 1 << 28;
/// Any duration (sleep, latency, timeout, fault time): 30 days, the simulator's horizon.
pub const MAX_DURATION_MS: u64 = 30 * 24 * 3600 * 1000;

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
