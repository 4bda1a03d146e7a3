//! all_to_all split sizes across ranks: uneven splits are legal, disagreeing ones are not.
//!
//! Each rank passes its own `input_split_sizes` (rows to each member) and
//! `output_split_sizes` (rows from each member), so input shapes legitimately differ between
//! ranks. What must agree is every pair: sender `i`'s `input_split_sizes[j]` with receiver
//! `j`'s `output_split_sizes[i]`. Nothing in c10d compares them (DETAIL checks only the op
//! type of an all_to_all, R32; the flight recorder's analyser calls it `UNDECIDED`, R33), so
//! scen does, and points at the rank whose splits disagree with the most peers.

use super::check::{Consequence, Mismatch, MismatchKind, Side};
use super::record::CallRecord;
use std::collections::BTreeMap;

/// One pair that disagrees: `src` sends `sent` rows to `dst`, which expects `expected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    src: usize,
    dst: usize,
    /// Group ranks of both, for the split indices.
    src_g: usize,
    dst_g: usize,
    sent: usize,
    expected: usize,
}

impl Pair {
    fn involves(&self, r: usize) -> bool {
        self.src == r || self.dst == r
    }

    fn describe(&self) -> String {
        format!(
            "rank {} expects {} from rank {} (its output_split_sizes[{}]) but rank {} sends it {} \
             (its input_split_sizes[{}])",
            self.dst,
            rows(self.expected),
            self.src,
            self.src_g,
            self.src,
            self.sent,
            self.dst_g
        )
    }
}

fn rows(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

/// The pairs of one all_to_all call (one sequence number) whose splits disagree.
fn disagreements(members: &[usize], by_rank: &BTreeMap<usize, &CallRecord>) -> Vec<Pair> {
    // Looked up once per member: a call without splits (every collective but all_to_all)
    // costs O(members), not O(members^2).
    let splits: Vec<_> = members
        .iter()
        .map(|r| {
            by_rank
                .get(r)
                .and_then(|c| c.fp.splits.as_ref())
                .filter(|s| {
                    s.send_rows.len() == members.len() && s.recv_rows.len() == members.len()
                })
        })
        .collect();
    let mut out = Vec::new();
    if splits.iter().all(Option::is_none) {
        return out;
    }
    for (src_g, &src) in members.iter().enumerate() {
        for (dst_g, &dst) in members.iter().enumerate() {
            let (Some(s), Some(d)) = (splits[src_g], splits[dst_g]) else {
                continue;
            };
            let (sent, expected) = (s.send_rows[dst_g], d.recv_rows[src_g]);
            if sent != expected {
                out.push(Pair {
                    src,
                    dst,
                    src_g,
                    dst_g,
                    sent,
                    expected,
                });
            }
        }
    }
    out
}

/// The rank the disagreements point at: in the most of them; on a tie the receiver of the
/// first (its `output_split_sizes` are what a stale routing table usually gets wrong), then
/// the lowest rank.
fn culprit(pairs: &[Pair]) -> usize {
    let mut count: BTreeMap<usize, usize> = BTreeMap::new();
    for p in pairs {
        *count.entry(p.src).or_default() += 1;
        *count.entry(p.dst).or_default() += 1;
    }
    let most = count.values().copied().max().unwrap_or(0);
    let tied: Vec<usize> = count
        .iter()
        .filter(|(_, c)| **c == most)
        .map(|(r, _)| *r)
        .collect();
    if tied.len() == 1 {
        return tied[0];
    }
    pairs
        .iter()
        .map(|p| p.dst)
        .find(|d| tied.contains(d))
        .unwrap_or(tied[0])
}

/// What the backend does: measured for gloo (torch 2.15, docs/diagnosis.md), inferred for
/// the device backends.
fn consequence(backend: &str, pairs: &[Pair]) -> (Consequence, String) {
    let short = pairs.iter().any(|p| p.sent < p.expected);
    let long = pairs.iter().any(|p| p.sent > p.expected);
    if backend == "gloo" {
        if let Some(p) = pairs.iter().find(|p| p.src == p.dst) {
            return (
                Consequence::Errors,
                format!(
                    "gloo's alltoallv copies a rank's own chunk before it sends anything and \
                     enforces inLengthPerRank[myRank] == outLengthPerRank[myRank]: rank {} \
                     raises a RuntimeError, and its peers read `{}` when its process ends \
                     (measured, torch 2.15)",
                    p.src,
                    crate::c10d::error::CONNECTION_CLOSED
                ),
            );
        }
        if long {
            return (
                Consequence::Aborts,
                "gloo's pair refuses a message longer than the posted buffer and the receiving \
                 process aborts (measured, torch 2.15: \"terminate called after throwing an \
                 instance of 'gloo::EnforceNotMet' ... op.preamble.length <= op.nbytes. 16 vs \
                 8. Received data size doesn't match expected size. Is there a distributed \
                 collective mismatch in your code?\"); DETAIL does not check split sizes (R32)"
                    .into(),
            );
        }
        return (
            Consequence::CorruptsSilently,
            "gloo accepts a message shorter than the posted buffer: every rank completes and \
             the rows that never came keep the output tensor's old contents (measured, torch \
             2.15); DETAIL does not check split sizes (R32)"
                .into(),
        );
    }
    if short {
        return (
            Consequence::Hangs,
            "the device backend does not compare split sizes: the receiver waits for rows that \
             never come; xccl forever without TORCH_XCCL_BLOCKING_WAIT (R29), nccl until the \
             watchdog (R31)"
                .into(),
        );
    }
    let _ = long;
    (
        Consequence::CorruptsOrHangs,
        "the device backend does not compare split sizes: the extra rows land past the \
         receiver's chunk or the exchange stalls, depending on the algorithm [inf]"
            .into(),
    )
}

/// The split disagreement of one all_to_all call, if any.
pub fn check(members: &[usize], by_rank: &BTreeMap<usize, &CallRecord>) -> Option<Mismatch> {
    let pairs = disagreements(members, by_rank);
    let first = *pairs.first()?;
    let blamed = culprit(&pairs);
    let other = if first.src == blamed {
        first.dst
    } else {
        first.src
    };
    let (a, b) = (by_rank[&blamed], by_rank[&other]);
    let mut aspects: Vec<String> = pairs
        .iter()
        .filter(|p| p.involves(blamed))
        .map(Pair::describe)
        .collect();
    let rest = pairs.iter().filter(|p| !p.involves(blamed)).count();
    if rest > 0 {
        aspects.push(format!("{rest} more pair(s) between other ranks"));
    }
    let (consequence, why) = consequence(&a.backend, &pairs);
    Some(Mismatch {
        kind: MismatchKind::Splits,
        group: a.group.clone(),
        group_label: a.group_label.clone(),
        backend: a.backend.clone(),
        seq: a.seq,
        a: Side::of(a),
        b: Some(Side::of(b)),
        absent: None,
        aspects,
        consequence,
        why,
    })
}
