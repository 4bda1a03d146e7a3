//! PyTorch's texts for gloo's monitored barrier, the user's `monitored_barrier` and the one
//! `TORCH_DISTRIBUTED_DEBUG=DETAIL` (R32) runs before each collective (gloo's texts, measured
//! with real torch 2.15), and for DETAIL's fingerprint mismatch. Each function is one text.

use super::{e, runtime, C10dError};

/// R32: the group's rank 0 after the members in `missing` (group ranks) did not check in.
pub fn monitored_barrier_missing(missing: &[usize], timeout_ms: u64) -> C10dError {
    let list: Vec<String> = missing.iter().map(usize::to_string).collect();
    runtime(format!(
        "[Rank 0]: Ranks {} failed to pass monitoredBarrier in {timeout_ms} ms",
        list.join(", ")
    ))
}

/// R32: a member whose rank 0 did not take its check-in in time (gloo's send timeout inside
/// the barrier), or, with `answer`, took it and did not answer in time (the receive's timeout;
/// user-path 7/465, real torch 2.15).
pub fn monitored_barrier_no_answer(me: usize, timeout_ms: u64, answer: bool) -> C10dError {
    let (line, op) = if answer { (78, "recv") } else { (129, "send") };
    runtime(format!(
        "Rank {me} successfully reached monitoredBarrier, but received errors while \
         waiting for send/recv from rank 0. Please check rank 0 logs for faulty \
         rank.\n Original exception: \n[/__w/pytorch/pytorch/third_party/gloo/gloo/\
         transport/tcp/unbound_buffer.cc:{line}] Timed out waiting {timeout_ms}ms for \
         {op} operation to complete"
    ))
}

/// `monitored_barrier` on rank 0: member `g` did not check in (or answer) within
/// `timeout_ms`; `original` is gloo's error for that one wait (ProcessGroupGloo's
/// `logAndThrow`: the first line is also logged).
pub fn monitored_barrier_rank_failed(g: usize, timeout_ms: u64, original: &C10dError) -> C10dError {
    runtime(format!(
        "{}\n Original exception: \n{}",
        monitored_barrier_rank_log(g, timeout_ms),
        original.message
    ))
}

/// `monitored_barrier(wait_all_ranks=True)` on rank 0: gloo's `LOG(ERROR)` line for one member
/// that did not pass (the error lists them all at the end).
pub fn monitored_barrier_rank_log(g: usize, timeout_ms: u64) -> String {
    format!("[Rank 0]: Rank {g} failed to pass monitoredBarrier in {timeout_ms} ms")
}

/// `monitored_barrier` on a member other than rank 0: its check-in or rank 0's answer failed
/// with `original` (its waits have the group's timeout, not the barrier's).
pub fn monitored_barrier_peer_errors(me: usize, original: &C10dError) -> C10dError {
    runtime(format!(
        "Rank {me} successfully reached monitoredBarrier, but received errors while \
         waiting for send/recv from rank 0. Please check rank 0 logs for faulty \
         rank.\n Original exception: \n{}",
        original.message
    ))
}

/// `monitored_barrier` on rank 0 with `wait_all_ranks=False`: the barrier's time was used up
/// before it could wait for member `g` (`processed`: the members that checked in).
pub fn monitored_barrier_no_time(g: usize, timeout_ms: u64, processed: &[usize]) -> C10dError {
    let info = if processed.is_empty() {
        "No ranks successfully processed in monitoredBarrier.".to_string()
    } else {
        let list: Vec<String> = processed.iter().map(usize::to_string).collect();
        format!("Successfully processed ranks: {}", list.join(", "))
    };
    runtime(format!(
        "Rank {g} timed out in monitoredBarrier after {timeout_ms} ms.\n{info}"
    ))
}

/// `monitored_barrier` on a group without a CPU backend (torch 2.15's distributed_c10d.py).
pub fn monitored_barrier_needs_cpu() -> C10dError {
    e(
        "ValueError",
        "monitored_barrier requires a group with a CPU-capable backend (e.g. GLOO).",
    )
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

/// The wrapper's monitored barrier raised a `std::runtime_error` (a gloo pair's I/O error, not
/// its own timeout, which is a `c10::Error` and passes unwrapped): ProcessGroupWrapper.cpp
/// `runCollectiveChecks` wraps it with the collective's fingerprint (real torch 2.15,
/// user-path 7/777).
pub fn detail_barrier_error(fingerprint: &str, inner: &C10dError) -> C10dError {
    runtime(format!(
        "ProcessGroupWrapper: Monitored Barrier encountered error running collective: \
         {fingerprint}. Error: \n{}",
        inner.message
    ))
}

/// scen's own: a fingerprint in the store that does not decode (another program wrote it).
pub fn malformed_fingerprint(group_rank: usize) -> C10dError {
    runtime(format!(
        "malformed DETAIL fingerprint from group rank {group_rank}"
    ))
}
