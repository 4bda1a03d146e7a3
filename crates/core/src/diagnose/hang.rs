//! Hang diagnosis: a wait-for graph over `(rank, group, seq)` at the moment no rank can move.
//!
//! For each stuck rank: the step and scenario line, the call (group, sequence number, op) it
//! waits in, and for that call which members never joined it (never reached that sequence
//! number, or reached it in another op: the culprits, as the flight recorder's "missing ranks"
//! and NCCL's "lagging ranks", R31/R33), which joined but did not finish, and which finished
//! it. Edges go from a stuck rank to the ranks whose action would free it; a cycle among them
//! is the deadlock's shape (e.g. ranks 0,1 enter group A then B while ranks 2,3 enter B then
//! A), which no PyTorch tool reports.

use super::record::{CallKey, CallKind, CallRecord, CallState};
use crate::trace::{Wait, WaitOn};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Where a rank is at the moment of the analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum RankAt {
    Stuck {
        step: usize,
        line: usize,
        label: String,
        wait: Wait,
    },
    Finished,
    Failed {
        step: usize,
        line: usize,
        label: String,
    },
    /// Not blocked: sleeping or between steps.
    Busy,
}

impl RankAt {
    /// `stuck in step 4 recv (file:30)`, `finished its program`.
    pub fn describe(&self, file: &str) -> String {
        match self {
            RankAt::Stuck { line, label, .. } => format!("stuck in {label} ({file}:{line})"),
            RankAt::Finished => "finished its program".into(),
            RankAt::Failed { line, label, .. } => format!("failed in {label} ({file}:{line})"),
            RankAt::Busy => "not blocked".into(),
        }
    }
}

/// The call a stuck rank waits in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CallAt {
    pub group: String,
    pub group_label: String,
    pub seq: u64,
    /// `all_reduce`, `barrier`, `send`: a barrier #3 and an all_gather #3 are two calls.
    pub op: String,
    /// `all_reduce #2 on WORLD`, `recv #1 2->3 on WORLD`.
    pub name: String,
    /// `(src, dst)` of a p2p call: a send and its recv are one call.
    pub pair: Option<(usize, usize)>,
}

impl CallAt {
    /// The same call: one collective (group, seq, op) or one p2p transfer (group, src, dst,
    /// seq; its send and recv are one call).
    fn same_call(&self, other: &CallAt) -> bool {
        let op = |c: &CallAt| c.pair.is_none().then(|| c.op.clone());
        (&self.group, self.seq, self.pair, op(self))
            == (&other.group, other.seq, other.pair, op(other))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StuckRank {
    pub rank: usize,
    pub step: usize,
    pub line: usize,
    pub label: String,
    /// What the rank's wait record says.
    pub what: String,
    /// The collective or p2p call it is in; `None` for store waits and the like.
    pub call: Option<CallAt>,
    /// Members (or the p2p peer) that never reached this call.
    pub never_joined: Vec<usize>,
    /// Members in this call that have not finished it (the rank itself included).
    pub joined_not_finished: Vec<usize>,
    /// Members that finished this call (completed or failed it).
    pub finished: Vec<usize>,
    /// The ranks whose action would free this one (graph edges).
    pub waits_for: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hang {
    pub t_ms: u64,
    pub stuck: Vec<StuckRank>,
    /// Where every rank is at `t_ms` (by rank).
    pub ranks: Vec<RankAt>,
    /// A cycle of ranks in the wait-for graph (first rank repeated at the end), if any.
    pub cycle: Vec<usize>,
    /// Each member that never joined a call others wait in, with its last call there.
    pub absent: Vec<Absent>,
}

/// A member that never joined a call others wait in: NCCL's "lagging rank" (R31), with what
/// the desync report adds ("finished collective #s, but didn't join collective #s+1").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Absent {
    pub rank: usize,
    /// The call it never joined: `all_reduce #2 on WORLD`.
    pub call: String,
    /// Its last call of that kind on that group: `all_reduce #1, completed, line 16`.
    pub last: Option<String>,
}

/// Builds the wait-for graph from the records and rank states at a stall.
pub fn analyse(records: &[CallRecord], ranks: &[RankAt], t_ms: u64) -> Option<Hang> {
    let index: BTreeMap<CallKey, &CallRecord> = records.iter().map(|c| (c.key(), c)).collect();
    let mut stuck = Vec::new();
    for (r, at) in ranks.iter().enumerate() {
        if let RankAt::Stuck {
            step,
            line,
            label,
            wait,
        } = at
        {
            let mut s = stuck_rank(records, &index, r, *step, *line, label, wait);
            if let Some(missing) = store_clients_missing(wait, ranks) {
                s.never_joined = missing.clone();
                s.waits_for = missing;
            }
            stuck.push(s);
        }
    }
    if stuck.is_empty() {
        return None;
    }
    let cycle = find_cycle(&stuck);
    let absent = absentees(records, &stuck);
    Some(Hang {
        t_ms,
        stuck,
        ranks: ranks.to_vec(),
        cycle,
        absent,
    })
}

/// For the store host's wait for its clients: the awaited ranks that have not checked in.
/// The real store only counts ("3/4 clients joined"); scen knows who: a rank still
/// connecting (to this store or, with a wrong MASTER_PORT/ADDR, another address), one that
/// failed in that step, or one that was never launched.
pub fn store_clients_missing(wait: &Wait, ranks: &[RankAt]) -> Option<Vec<usize>> {
    if !matches!(wait.on, WaitOn::StoreWorkers { .. }) {
        return None;
    }
    let missing = wait
        .peers
        .iter()
        .copied()
        .filter(|p| match ranks.get(*p) {
            None => true,
            Some(RankAt::Stuck { wait: w, .. }) => {
                matches!(w.on, WaitOn::StoreConnect { .. })
            }
            Some(RankAt::Failed { step, .. }) => *step <= wait.step,
            Some(_) => false,
        })
        .collect();
    Some(missing)
}

/// The never-joined members of every stuck call, once each, with their last call there.
fn absentees(records: &[CallRecord], stuck: &[StuckRank]) -> Vec<Absent> {
    let mut seen: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut out = Vec::new();
    for s in stuck {
        let Some(call) = &s.call else { continue };
        let open = records
            .iter()
            .rev()
            .find(|c| c.rank == s.rank && c.state == CallState::Started && c.step == s.step);
        let Some(open) = open else { continue };
        for m in &s.never_joined {
            if !seen.insert((*m, call.name.clone())) {
                continue;
            }
            let last = records.iter().rev().find(|c| {
                c.rank == *m
                    && c.group == open.group
                    && match open.kind {
                        CallKind::Collective => c.kind == CallKind::Collective,
                        _ => {
                            c.kind != open.kind
                                && c.endpoints() == open.endpoints()
                                && c.tag == open.tag
                        }
                    }
            });
            out.push(Absent {
                rank: *m,
                call: call.name.clone(),
                last: last.map(|c| {
                    format!(
                        "{} #{}, {}, line {}",
                        c.fp.op,
                        c.seq,
                        c.state.name(),
                        c.line
                    )
                }),
            });
        }
    }
    out
}

fn stuck_rank(
    records: &[CallRecord],
    index: &BTreeMap<CallKey, &CallRecord>,
    rank: usize,
    step: usize,
    line: usize,
    label: &str,
    wait: &Wait,
) -> StuckRank {
    let mut s = StuckRank {
        rank,
        step,
        line,
        label: label.to_string(),
        what: wait.what.clone(),
        call: None,
        never_joined: vec![],
        joined_not_finished: vec![],
        finished: vec![],
        waits_for: wait.peers.clone(),
    };
    // The rank's open call: its latest record still started.
    let Some(open) = records
        .iter()
        .rev()
        .find(|c| c.rank == rank && c.state == CallState::Started && c.step == step)
    else {
        return s;
    };
    s.call = Some(CallAt {
        group: open.group.clone(),
        group_label: open.group_label.clone(),
        seq: open.seq,
        op: open.fp.op.clone(),
        name: open.call_name(),
        pair: open.endpoints(),
    });
    // The same call on member `m`: its collective at this seq, or the other side of the p2p.
    let key_of = |m: usize| -> CallKey {
        match open.kind {
            CallKind::Collective => (m, open.group.clone(), CallKind::Collective, open.seq, None),
            CallKind::Send => (m, open.group.clone(), CallKind::Recv, open.seq, Some(rank)),
            CallKind::Recv => (m, open.group.clone(), CallKind::Send, open.seq, Some(rank)),
        }
    };
    let members: Vec<usize> = match open.peer {
        Some(p) => {
            let mut v = vec![rank, p];
            v.sort();
            v
        }
        None => open.group_ranks.to_vec(),
    };
    for m in members {
        let rec = if m == rank {
            Some(open)
        } else {
            index.get(&key_of(m)).copied()
        };
        // A member at this sequence number in another op (a barrier where the others
        // all_gather) is in another call: it never joined this one.
        let other_op = |c: &&CallRecord| open.kind == CallKind::Collective && c.fp.op != open.fp.op;
        match rec.filter(|c| !other_op(c)).map(|c| c.state) {
            None => s.never_joined.push(m),
            Some(CallState::Started) => s.joined_not_finished.push(m),
            Some(_) => s.finished.push(m),
        }
    }
    if !s.never_joined.is_empty() {
        s.waits_for = s.never_joined.clone();
    }
    s
}

/// The first cycle found by a depth-first search in rank order, as a rank path.
///
/// Only waits between different calls count: inside one collective every member waits for
/// its algorithm's neighbours (a ring's predecessor, a tree's parent), which would close a
/// "cycle" around the ring although no rank waits for another call. The ranks stuck in one
/// call are therefore one node: each gets the out-edges of all of them that leave the call. A
/// call stuck on its own (a lost message, a size mismatch, a dead peer) has no cycle; the rest
/// of the report names why it is stuck.
fn find_cycle(stuck: &[StuckRank]) -> Vec<usize> {
    let call_of: BTreeMap<usize, &CallAt> = stuck
        .iter()
        .filter_map(|s| s.call.as_ref().map(|c| (s.rank, c)))
        .collect();
    let same = |a: usize, b: usize| match (call_of.get(&a), call_of.get(&b)) {
        (Some(x), Some(y)) => x.same_call(y),
        _ => a == b,
    };
    let edges: BTreeMap<usize, Vec<usize>> = stuck
        .iter()
        .map(|s| {
            let mut to: Vec<usize> = stuck
                .iter()
                .filter(|o| same(s.rank, o.rank))
                .flat_map(|o| o.waits_for.iter().copied())
                .filter(|m| !same(s.rank, *m))
                .collect();
            to.sort();
            to.dedup();
            (s.rank, to)
        })
        .collect();
    let mut done: BTreeSet<usize> = BTreeSet::new();
    for start in edges.keys() {
        let mut path = Vec::new();
        if let Some(c) = dfs(*start, &edges, &mut path, &mut done) {
            return c;
        }
    }
    vec![]
}

fn dfs(
    n: usize,
    edges: &BTreeMap<usize, Vec<usize>>,
    path: &mut Vec<usize>,
    done: &mut BTreeSet<usize>,
) -> Option<Vec<usize>> {
    if let Some(i) = path.iter().position(|p| *p == n) {
        let mut c = path[i..].to_vec();
        c.push(n);
        return Some(c);
    }
    if done.contains(&n) {
        return None;
    }
    path.push(n);
    for m in edges.get(&n).into_iter().flatten() {
        if let Some(c) = dfs(*m, edges, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(n);
    None
}

/// `0-2, 5, 7-9`: rank sets as reports print them.
pub fn ranges(ranks: &[usize]) -> String {
    let mut v: Vec<usize> = ranks.to_vec();
    v.sort();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i + 1 {
            format!("{}-{}", v[i], v[j])
        } else if j == i + 1 {
            format!("{}, {}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_runs() {
        assert_eq!(ranges(&[3, 1, 2, 5, 7, 8, 9, 0]), "0-3, 5, 7-9");
        assert_eq!(ranges(&[4, 5]), "4, 5");
        assert_eq!(ranges(&[]), "");
    }
}

#[cfg(test)]
mod graph_tests {
    use super::*;
    use crate::diagnose::record::Fingerprint;

    fn started(rank: usize, group: &str, seq: u64) -> CallRecord {
        CallRecord {
            rank,
            group: group.into(),
            group_label: group.into(),
            group_ranks: vec![0, 1, 2, 3].into(),
            backend: "xccl".into(),
            kind: CallKind::Collective,
            seq,
            peer: None,
            fp: Fingerprint {
                op: "all_reduce".into(),
                dtype: "f32".into(),
                shape: vec![4],
                nbytes: 16,
                root: None,
                reduce_op: Some("SUM".into()),
                splits: None,
            },
            step: 1,
            line: 7,
            state: CallState::Started,
            t_start_ms: 0,
            t_end_ms: None,
            t_start_us: 0,
            t_end_us: None,
            tag: 0,
        }
    }

    fn stuck(peer: usize) -> RankAt {
        RankAt::Stuck {
            step: 1,
            line: 7,
            label: "step 2 all_reduce".into(),
            wait: Wait {
                step: 1,
                on: WaitOn::Transfer {
                    dir: crate::trace::Dir::Recv,
                },
                what: "recv".into(),
                group: None,
                seq: Some(1),
                peers: vec![peer],
                since_ms: 0,
                deadline_ms: None,
                timeout_error: None,
            },
        }
    }

    #[test]
    fn opposite_group_orders_form_a_cycle() {
        let recs = vec![
            started(0, "A", 1),
            started(1, "A", 1),
            started(2, "B", 1),
            started(3, "B", 1),
        ];
        let ranks = vec![stuck(1), stuck(0), stuck(3), stuck(2)];
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert_eq!(h.stuck[0].never_joined, vec![2, 3]);
        assert_eq!(h.stuck[0].joined_not_finished, vec![0, 1]);
        assert_eq!(h.cycle, vec![0, 2, 0]);
    }

    #[test]
    fn ring_waits_inside_one_collective_are_no_cycle() {
        // All four joined all_reduce #1 on A; each waits for its ring predecessor's chunk.
        let recs: Vec<CallRecord> = (0..4).map(|r| started(r, "A", 1)).collect();
        let ranks: Vec<RankAt> = (0..4).map(|r| stuck((r + 3) % 4)).collect();
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert!(h.stuck.iter().all(|s| s.never_joined.is_empty()));
        assert_eq!(h.stuck[0].waits_for, vec![3]);
        assert!(h.cycle.is_empty(), "{:?}", h.cycle);
    }

    #[test]
    fn calls_waiting_for_each_other_are_a_cycle_even_through_ring_neighbours() {
        // Ranks 0,1 in A #2 wait for 2,3; ranks 2,3 in A #1 wait (ring) for 1 and 2.
        let recs = vec![
            started(0, "A", 2),
            started(1, "A", 2),
            started(2, "A", 1),
            started(3, "A", 1),
        ];
        let ranks = vec![stuck(3), stuck(0), stuck(1), stuck(2)];
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert_eq!(h.cycle, vec![0, 2, 0]);
    }

    #[test]
    fn a_member_in_another_op_at_the_same_seq_never_joined() {
        // Ranks 0-2 in all_gather #3; rank 3 took another branch: barrier #3.
        let mut recs: Vec<CallRecord> = (0..3).map(|r| started(r, "A", 3)).collect();
        for c in &mut recs {
            c.fp.op = "all_gather".into();
        }
        let mut other = started(3, "A", 3);
        other.fp.op = "barrier".into();
        recs.push(other);
        let ranks = vec![stuck(1), stuck(2), stuck(0), stuck(0)];
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert_eq!(h.stuck[0].never_joined, vec![3]);
        assert_eq!(h.stuck[0].joined_not_finished, vec![0, 1, 2]);
        assert_eq!(h.stuck[3].never_joined, vec![0, 1, 2]);
        assert_eq!(h.cycle, vec![0, 3, 0]);
        let absent = h.absent.iter().find(|a| a.rank == 3).expect("rank 3 named");
        assert_eq!(absent.call, "all_gather #3 on A");
        assert_eq!(absent.last.as_deref(), Some("barrier #3, started, line 7"));
    }

    #[test]
    fn a_send_and_its_recv_stuck_together_are_one_call_and_no_cycle() {
        let p2p = |rank: usize, kind: CallKind, peer: usize| {
            let mut c = started(rank, "A", 1);
            (c.kind, c.peer) = (kind, Some(peer));
            c.fp.op = if kind == CallKind::Send {
                "send"
            } else {
                "recv"
            }
            .into();
            c
        };
        let recs = vec![p2p(0, CallKind::Send, 1), p2p(1, CallKind::Recv, 0)];
        let ranks = vec![stuck(1), stuck(0)];
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert_eq!(h.stuck[0].joined_not_finished, vec![0, 1]);
        assert!(h.cycle.is_empty(), "{:?}", h.cycle);
    }

    #[test]
    fn waiting_on_a_finished_rank_is_no_cycle() {
        let recs = vec![started(0, "A", 2), started(1, "A", 2), started(2, "A", 2)];
        let ranks = vec![stuck(3), stuck(0), stuck(1), RankAt::Finished];
        let h = analyse(&recs, &ranks, 5).expect("hang");
        assert!(h.stuck.iter().all(|s| s.never_joined == vec![3]));
        assert!(h.cycle.is_empty());
    }
}
