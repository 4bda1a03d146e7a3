//! Consistency checking: the calls of each group's members, compared fingerprint by fingerprint.
//!
//! Like `TORCH_DISTRIBUTED_DEBUG=DETAIL` (docs/rules/c10d.md#r32) it compares op type, sequence, dtype and
//! shape, but it also compares the broadcast root and the reduce op (DETAIL does not; the Intel
//! MPI checker does, docs/rules/anchors.md#s2-2), counts (a member that finished its program after fewer
//! calls) and send/recv pairing per `(src, dst)` sequence (DETAIL skips send/recv). It reports
//! the first divergence per group, with both sides and their scenario lines, and what the real
//! backend does with it ([`Consequence`], docs/diagnosis.md).

use super::record::{CallKind, CallRecord, CallState, Fingerprint};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod p2p;
use p2p::check_p2p;

/// What a real backend does with a mismatch (docs/diagnosis.md has the table and sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Consequence {
    /// Nobody completes: forever on xccl (R29), until the watchdog on nccl (R31), until the
    /// op timeout on gloo (R29).
    Hangs,
    /// The backend raises an error (gloo's pair enforces message sizes).
    Errors,
    /// Every rank completes, some with wrong data; no backend notices.
    CorruptsSilently,
    /// Unchecked: wrong data or a hang depending on the algorithm's message pattern.
    CorruptsOrHangs,
    /// A device-backend send nobody receives: lost without a trace when small; large sends
    /// block (docs/rules/oneccl.md §4: send before recv deadlocks at >= 16-64 KiB).
    LostOrHangs,
    /// The receiving process aborts (gloo's `EnforceNotMet` is thrown where nothing catches it).
    Aborts,
}

impl Consequence {
    pub fn text(self) -> &'static str {
        match self {
            Consequence::Hangs => "hangs",
            Consequence::Errors => "errors",
            Consequence::CorruptsSilently => "corrupts silently",
            Consequence::CorruptsOrHangs => "corrupts or hangs",
            Consequence::LostOrHangs => "loses the message or hangs",
            Consequence::Aborts => "aborts the receiving process",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MismatchKind {
    /// Two members ran different calls at the same sequence number.
    Fingerprint,
    /// A member finished its program without ever issuing a call the others issued.
    Count,
    /// A send and its recv disagree on the size or dtype.
    P2pSize,
    /// A send or recv whose counterpart was never posted.
    P2pUnmatched,
    /// all_to_all: a sender's `input_split_sizes[j]` differs from receiver `j`'s
    /// `output_split_sizes[i]`. `a` is the rank the disagreements point at.
    Splits,
}

/// One side of a mismatch: who ran what where.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub rank: usize,
    pub call: String,
    pub fp: Fingerprint,
    pub line: usize,
    pub state: CallState,
}

impl Side {
    pub(crate) fn of(r: &CallRecord) -> Side {
        Side {
            rank: r.rank,
            call: r.call_name(),
            fp: r.fp.clone(),
            line: r.line,
            state: r.state,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatch {
    pub kind: MismatchKind,
    pub group: String,
    pub group_label: String,
    pub backend: String,
    pub seq: u64,
    pub a: Side,
    /// The other side; `None` when it never made the call (count, unmatched p2p).
    pub b: Option<Side>,
    /// The rank that never made the call, for count and unmatched p2p.
    pub absent: Option<usize>,
    /// `op type: all_reduce vs broadcast`, one per differing aspect.
    pub aspects: Vec<String>,
    pub consequence: Consequence,
    /// Why, per backend, with the spec rule.
    pub why: String,
}

impl Mismatch {
    /// One line naming both ranks, both fingerprints and both scenario lines ([`Mismatch::real`]
    /// says what the backend does).
    pub fn render(&self, file: &str) -> String {
        let side = |s: &Side| {
            format!(
                "rank {} ran {} [{}] ({file}:{}, {})",
                s.rank,
                s.call,
                s.fp,
                s.line,
                s.state.name()
            )
        };
        let head = match self.kind {
            MismatchKind::Fingerprint => "collective mismatch",
            MismatchKind::Count => "collective count mismatch",
            MismatchKind::P2pSize => "send/recv size mismatch",
            MismatchKind::P2pUnmatched => "unmatched point-to-point",
            MismatchKind::Splits => {
                return format!(
                    "all_to_all split sizes disagree on group {} ({}) in {} ({file}:{}): rank {}'s \
                     splits do not match its peers': {}",
                    self.group_label,
                    self.group,
                    self.a.call,
                    self.a.line,
                    self.a.rank,
                    self.aspects.join("; ")
                )
            }
        };
        let mut s = format!(
            "{head} on group {} ({}): {}",
            self.group_label,
            self.group,
            side(&self.a)
        );
        if let Some(b) = &self.b {
            s.push_str(&format!(", but {}", side(b)));
        }
        if let Some(r) = self.absent {
            match self.kind {
                MismatchKind::Count => s.push_str(&format!(
                    ", but rank {r} finished its program without calling #{} on this group",
                    self.seq
                )),
                _ => s.push_str(&format!(
                    ", but rank {r} never posted the matching {}",
                    if self.a.fp.op == "send" {
                        "recv"
                    } else {
                        "send"
                    }
                )),
            }
        }
        if !self.aspects.is_empty() {
            s.push_str(&format!("; differ in {}", self.aspects.join(", ")));
        }
        s
    }

    /// What the real backend does with it: `real xccl: hangs (why, with the spec rule)`.
    pub fn real(&self) -> String {
        format!(
            "real {}: {} ({})",
            self.backend,
            self.consequence.text(),
            self.why
        )
    }
}

/// The differing aspects of two fingerprints, DETAIL-style but with root and reduce op.
pub fn aspects(a: &Fingerprint, b: &Fingerprint) -> Vec<String> {
    let mut v = Vec::new();
    let opt = |x: &Option<String>| x.clone().unwrap_or_else(|| "-".into());
    let optn = |x: &Option<usize>| x.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
    if a.op != b.op {
        v.push(format!("op type: {} vs {}", a.op, b.op));
    }
    if a.dtype != b.dtype {
        v.push(format!("dtype: {} vs {}", a.dtype, b.dtype));
    }
    match (&a.splits, &b.splits) {
        // Uneven splits make the input shapes differ legally (DETAIL does not compare
        // all_to_all shapes either, R32); the rows must have one size.
        (Some(x), Some(y)) => {
            if x.row_elems != y.row_elems {
                v.push(format!(
                    "row size: {} vs {} elements",
                    x.row_elems, y.row_elems
                ));
            }
        }
        _ => {
            if a.shape != b.shape {
                v.push(format!("shape: {:?} vs {:?}", a.shape, b.shape));
            }
        }
    }
    if a.root != b.root {
        v.push(format!("root: {} vs {}", optn(&a.root), optn(&b.root)));
    }
    if a.reduce_op != b.reduce_op {
        v.push(format!(
            "reduce op: {} vs {}",
            opt(&a.reduce_op),
            opt(&b.reduce_op)
        ));
    }
    v
}

/// A gloo broadcast whose receivers all have one buffer size, at least the root's: each takes
/// the root's elements into its first ones (what real gloo did, tests/fixtures/fr/size_mismatch).
fn gloo_broadcast_fits(by_rank: &BTreeMap<usize, &CallRecord>) -> bool {
    let Some(first) = by_rank.values().next() else {
        return false;
    };
    let Some(root) = first.fp.root.and_then(|r| by_rank.get(&r)) else {
        return false;
    };
    let receivers: BTreeSet<usize> = by_rank
        .values()
        .filter(|r| r.rank != root.rank)
        .map(|r| r.fp.nbytes)
        .collect();
    by_rank.values().all(|r| {
        r.backend == "gloo"
            && r.fp.op == "broadcast"
            && r.fp.dtype == root.fp.dtype
            && r.fp.root == root.fp.root
    }) && receivers.len() == 1
        && receivers.iter().all(|n| *n >= root.fp.nbytes)
}

/// What the real backend does when two members' collectives differ like `a` and `b`.
pub fn collective_consequence(
    backend: &str,
    a: &Fingerprint,
    b: &Fingerprint,
) -> (Consequence, String) {
    let gloo = backend == "gloo";
    let size_differs = match (&a.splits, &b.splits) {
        (Some(x), Some(y)) => {
            x.row_elems * a.nbytes / a.numel().max(1) != y.row_elems * b.nbytes / b.numel().max(1)
        }
        _ => a.nbytes != b.nbytes,
    };
    if a.op != b.op || size_differs {
        return if gloo {
            (
                Consequence::Errors,
                "gloo's tcp pair enforces each message's size: a rank that receives a message \
                 larger than its buffer aborts (SIGABRT, gloo::EnforceNotMet) and its peers read \
                 a reset connection; a smaller one lands in the buffer's first bytes; when no \
                 message flows it times out instead (R29)"
                    .into(),
            )
        } else {
            (
                Consequence::Hangs,
                "the device backend does not check: both sides wait for data that never comes \
                 (docs/rules/oneccl.md §4: all_reduce of 1024 vs 2048 floats hangs both ranks); xccl \
                 forever without TORCH_XCCL_BLOCKING_WAIT (R29), nccl until the watchdog (R31)"
                    .into(),
            )
        };
    }
    if a.dtype != b.dtype {
        return (
            Consequence::CorruptsSilently,
            "same byte count: every backend moves and reduces the bytes as its own dtype, no \
             check (DETAIL would catch the dtype, R32)"
                .into(),
        );
    }
    if a.root != b.root {
        return (
            Consequence::CorruptsOrHangs,
            "no backend checks the root (DETAIL neither, R32): each rank runs the tree of its \
             own root, so data goes to the wrong ranks or a rank waits for a sender that is not \
             its parent"
                .into(),
        );
    }
    if a.reduce_op != b.reduce_op {
        return (
            Consequence::CorruptsSilently,
            "no backend checks the reduce op (DETAIL neither, R32): each rank reduces its chunk \
             of the ring with its own op, so the result mixes both ops chunk by chunk"
                .into(),
        );
    }
    (
        Consequence::CorruptsSilently,
        "same bytes in another shape: the call runs, the result is read in the wrong shape \
         (DETAIL flags it, R32)"
            .into(),
    )
}

/// What gloo did with a mismatched call, where its members' records say: the run follows
/// gloo's own algorithms (algo/gloo), so a call every member completed is a silent corruption
/// (a shorter message lands in the first bytes of the posted buffer; no check fires), and one
/// a member did not complete is an error, whatever the fingerprints suggested. The differential
/// oracle (tests/torch/differential.rs) holds these claims to real PyTorch's runs.
fn observed_gloo(
    by_rank: &BTreeMap<usize, &CallRecord>,
    consequence: Consequence,
    why: String,
) -> (Consequence, String) {
    let failed: Vec<usize> = by_rank
        .values()
        .filter(|r| r.state != CallState::Completed)
        .map(|r| r.rank)
        .collect();
    let silent = matches!(consequence, Consequence::CorruptsSilently);
    match (failed.is_empty(), silent) {
        (true, true) | (false, false) => (consequence, why),
        (true, false) => (
            Consequence::CorruptsSilently,
            "every member ran the call to its end in gloo's own algorithm: each message is \
             received into the bytes its receive posted, a shorter one lands in the first bytes \
             and no check fires, so the results are wrong where the calls differ"
                .into(),
        ),
        (false, true) => (
            Consequence::Errors,
            format!(
                "gloo's own algorithm does not complete it on rank(s) {failed:?}: the members \
                 post other receives than their peers send, so a wait times out or a peer's \
                 larger message aborts its receiver ({why})"
            ),
        ),
    }
}

/// Checks every group's records. `finished[r]`: rank `r` completed its program; `failed_at[r]`:
/// when it failed (its process ended without completing it).
pub fn check(
    records: &[CallRecord],
    finished: &[bool],
    failed_at: &[Option<u64>],
) -> Vec<Mismatch> {
    let mut by_group: BTreeMap<&str, Vec<&CallRecord>> = BTreeMap::new();
    for r in records {
        by_group.entry(r.group.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for recs in by_group.values() {
        if let Some(m) = check_collectives(recs, finished) {
            out.push(m);
        }
        out.extend(check_p2p(recs, failed_at));
    }
    out
}

/// The first collective divergence of one group, comparing each member to the lowest rank
/// that made the call (as the flight recorder's analyser pairs from the first rank, R33).
fn check_collectives(recs: &[&CallRecord], finished: &[bool]) -> Option<Mismatch> {
    let colls: Vec<&CallRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.kind == CallKind::Collective)
        .collect();
    let first = colls.first()?;
    let members = &first.group_ranks;
    let mut at: BTreeMap<u64, BTreeMap<usize, &CallRecord>> = BTreeMap::new();
    for r in &colls {
        at.entry(r.seq).or_default().insert(r.rank, r);
    }
    for (seq, by_rank) in &at {
        let (_, reference) = by_rank.iter().next().expect("non-empty");
        for r in by_rank.values() {
            if !aspects(&reference.fp, &r.fp).is_empty() {
                let (consequence, why) = if gloo_broadcast_fits(by_rank) {
                    (
                        Consequence::CorruptsSilently,
                        "gloo's broadcast receivers take the root's shorter message into the start \
                         of their buffers and keep the rest: no error (real PyTorch 2.15, \
                         docs/flight-recorder.md)"
                            .to_string(),
                    )
                } else {
                    collective_consequence(&r.backend, &reference.fp, &r.fp)
                };
                let (consequence, why) = if r.backend == "gloo" {
                    observed_gloo(by_rank, consequence, why)
                } else {
                    (consequence, why)
                };
                return Some(Mismatch {
                    kind: MismatchKind::Fingerprint,
                    group: r.group.clone(),
                    group_label: r.group_label.clone(),
                    backend: r.backend.clone(),
                    seq: *seq,
                    a: Side::of(reference),
                    b: Some(Side::of(r)),
                    absent: None,
                    aspects: aspects(&reference.fp, &r.fp),
                    consequence,
                    why,
                });
            }
        }
        if let Some(m) = super::splits::check(members, by_rank) {
            return Some(m);
        }
        let absent = members
            .iter()
            .copied()
            .find(|m| !by_rank.contains_key(m) && finished.get(*m).copied().unwrap_or(false));
        if let Some(m) = absent {
            let issued = colls.iter().filter(|r| r.rank == m).count();
            return Some(Mismatch {
                kind: MismatchKind::Count,
                group: reference.group.clone(),
                group_label: reference.group_label.clone(),
                backend: reference.backend.clone(),
                seq: *seq,
                a: Side::of(reference),
                b: None,
                absent: Some(m),
                aspects: vec![format!(
                    "collectives issued on this group: {} vs {issued}",
                    colls.iter().filter(|r| r.rank == reference.rank).count()
                )],
                consequence: Consequence::Hangs,
                why: "every member must issue the same next collective (R28): the others wait \
                      for the missing member; gloo fails at its timeout (R29), nccl at the \
                      watchdog (R31), xccl waits forever (R29)"
                    .into(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn rec(rank: usize, seq: u64, op: &str, dtype: &str, numel: usize) -> CallRecord {
        let w = if dtype == "bf16" { 2 } else { 4 };
        CallRecord {
            rank,
            group: "0".into(),
            group_label: "WORLD".into(),
            group_ranks: vec![0, 1].into(),
            backend: "xccl".into(),
            kind: CallKind::Collective,
            seq,
            peer: None,
            fp: Fingerprint {
                op: op.into(),
                dtype: dtype.into(),
                shape: vec![numel],
                nbytes: numel * w,
                root: None,
                reduce_op: Some("SUM".into()),
                splits: None,
            },
            step: seq as usize,
            line: 10 + seq as usize + 100 * rank,
            state: CallState::Completed,
            t_start_ms: 0,
            t_end_ms: Some(1),
            t_start_us: 0,
            t_end_us: Some(1000),
            tag: 0,
        }
    }

    /// An all_to_all_single record of `rank` in a world of 3 with these split sizes (rows of 2).
    fn a2a(rank: usize, send: [usize; 3], recv: [usize; 3]) -> CallRecord {
        let rows: usize = send.iter().sum();
        let mut r = rec(rank, 1, "all_to_all_single", "f32", rows * 2);
        r.group_ranks = vec![0, 1, 2].into();
        r.fp.shape = vec![rows, 2];
        r.fp.reduce_op = None;
        r.fp.splits = Some(crate::diagnose::Splits {
            send_rows: send.to_vec(),
            recv_rows: recv.to_vec(),
            row_elems: 2,
        });
        r
    }

    #[test]
    fn uneven_splits_every_rank_agrees_on_are_legal() {
        // Rank r sends r + j + 1 rows to j: input shapes [6, 2], [9, 2], [12, 2].
        let v = vec![
            a2a(0, [1, 2, 3], [1, 2, 3]),
            a2a(1, [2, 3, 4], [2, 3, 4]),
            a2a(2, [3, 4, 5], [3, 4, 5]),
        ];
        assert_eq!(check(&v, &[true; 3], &[]), vec![]);
    }

    #[test]
    fn a_rank_whose_splits_disagree_is_the_one_blamed() {
        // Rank 2 expects 2 rows from rank 0, which sends it 1: a tie, the receiver is blamed.
        let v = vec![
            a2a(0, [1, 1, 1], [1, 1, 1]),
            a2a(1, [1, 1, 1], [1, 1, 1]),
            a2a(2, [1, 1, 1], [2, 1, 1]),
        ];
        let m = check(&v, &[true, true, false], &[]);
        assert_eq!((m[0].kind, m[0].a.rank), (MismatchKind::Splits, 2));
        assert_eq!(m[0].consequence, Consequence::Hangs);
        assert!(m[0]
            .render("f.toml")
            .contains("rank 2's splits do not match"));
        // Rank 1 sends 2 rows to both peers, which expect 1: rank 1 is in every disagreement.
        let v = vec![
            a2a(0, [1, 1, 1], [1, 1, 1]),
            a2a(1, [2, 1, 2], [1, 1, 1]),
            a2a(2, [1, 1, 1], [1, 1, 1]),
        ];
        let m = check(&v, &[true; 3], &[]);
        assert_eq!(m[0].a.rank, 1);
        assert_eq!(m[0].aspects.len(), 2);
        let mut gloo = v.clone();
        gloo.iter_mut().for_each(|r| r.backend = "gloo".into());
        assert_eq!(
            check(&gloo, &[true; 3], &[])[0].consequence,
            Consequence::Aborts
        );
    }

    #[test]
    fn identical_sequences_have_no_mismatch() {
        let v = vec![
            rec(0, 1, "all_reduce", "f32", 4),
            rec(1, 1, "all_reduce", "f32", 4),
        ];
        assert!(check(&v, &[true, true], &[]).is_empty());
    }

    #[test]
    fn the_first_divergence_is_reported_with_both_lines() {
        let v = vec![
            rec(0, 1, "all_reduce", "f32", 4),
            rec(1, 1, "all_reduce", "f32", 4),
            rec(0, 2, "all_reduce", "f32", 4),
            rec(1, 2, "all_reduce", "bf16", 8),
            rec(0, 3, "all_reduce", "f32", 4),
            rec(1, 3, "broadcast", "f32", 4),
        ];
        let m = check(&v, &[true, true], &[]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].seq, 2);
        assert_eq!((m[0].a.line, m[0].b.as_ref().unwrap().line), (12, 112));
        // f32[4] and bf16[8] carry the same bytes: reinterpreted, not a size error.
        assert_eq!(m[0].consequence, Consequence::CorruptsSilently);
        assert_eq!(
            m[0].aspects,
            vec!["dtype: f32 vs bf16", "shape: [4] vs [8]"]
        );
    }

    #[test]
    fn size_or_op_mismatch_hangs_on_device_backends_and_errors_on_gloo() {
        let a = rec(0, 1, "all_reduce", "f32", 4).fp;
        let b = rec(1, 1, "all_reduce", "f32", 8).fp;
        assert_eq!(collective_consequence("xccl", &a, &b).0, Consequence::Hangs);
        assert_eq!(collective_consequence("nccl", &a, &b).0, Consequence::Hangs);
        assert_eq!(
            collective_consequence("gloo", &a, &b).0,
            Consequence::Errors
        );
        let mut c = a.clone();
        c.reduce_op = Some("MAX".into());
        assert_eq!(
            collective_consequence("gloo", &a, &c).0,
            Consequence::CorruptsSilently
        );
        let mut d = a.clone();
        d.root = Some(1);
        assert_eq!(
            collective_consequence("xccl", &a, &d).0,
            Consequence::CorruptsOrHangs
        );
    }

    #[test]
    fn a_finished_rank_with_fewer_calls_is_a_count_mismatch_a_stuck_one_is_not() {
        let v = vec![
            rec(0, 1, "all_reduce", "f32", 4),
            rec(1, 1, "all_reduce", "f32", 4),
            rec(0, 2, "all_reduce", "f32", 4),
        ];
        let m = check(&v, &[false, true], &[]);
        assert_eq!((m[0].kind, m[0].absent), (MismatchKind::Count, Some(1)));
        assert!(check(&v, &[false, false], &[]).is_empty());
    }
}
