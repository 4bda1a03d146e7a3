//! PyTorch's texts for `TORCH_DISTRIBUTED_DEBUG=DETAIL` (R32): the monitored barrier the
//! wrapper runs before each collective (gloo's texts, measured with real torch 2.15) and the
//! fingerprint mismatch. Each function is one text, tagged with its rule.

use super::{runtime, C10dError};

/// R32: the group's rank 0 after the members in `missing` (group ranks) did not check in.
pub fn monitored_barrier_missing(missing: &[usize], timeout_ms: u64) -> C10dError {
    let list: Vec<String> = missing.iter().map(usize::to_string).collect();
    runtime(format!(
        "[Rank 0]: Ranks {} failed to pass monitoredBarrier in {timeout_ms} ms",
        list.join(", ")
    ))
}

/// R32: a member whose rank 0 never answered (gloo's send timeout inside the barrier).
pub fn monitored_barrier_no_answer(me: usize, timeout_ms: u64) -> C10dError {
    runtime(format!(
        "Rank {me} successfully reached monitoredBarrier, but received errors while \
         waiting for send/recv from rank 0. Please check rank 0 logs for faulty \
         rank.\n Original exception: \n[/__w/pytorch/pytorch/third_party/gloo/gloo/\
         transport/tcp/unbound_buffer.cc:129] Timed out waiting {timeout_ms}ms for \
         send operation to complete"
    ))
}

/// R32: the head of the mismatch text (`diff` follows it: docs/diagnosis.md says where real
/// PyTorch's diff differs from the spec's).
pub fn detail_mismatch(me: usize, mine: &str, other: usize, theirs: &str) -> String {
    format!(
        "Detected mismatch between collectives on ranks. Rank {me} is running collective: \
         {mine}, but Rank {other} is running collective: {theirs}."
    )
}

/// R32: the mismatch, [`detail_mismatch`]'s head and its diff, raised.
pub fn detail_error(text: String) -> C10dError {
    runtime(text)
}

/// scen's own: a fingerprint in the store that does not decode (another program wrote it).
pub fn malformed_fingerprint(group_rank: usize) -> C10dError {
    runtime(format!(
        "malformed DETAIL fingerprint from group rank {group_rank}"
    ))
}
