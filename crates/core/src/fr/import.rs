//! A job's flight-recorder dumps in scen's terms: each entry becomes a [`CallRecord`], so the
//! diagnosis is core's own (consistency check, wait-for graph), and the calls become a scenario
//! that replays every rank's recorded calls (same groups, ops, sizes, dtypes, order).
//!
//! The scenario ([`super::replay`]) is written first, because its step numbers and lines are what
//! the records and the diagnosis point at. Steps come from merging the ranks' call lists: a call (group, sequence
//! number, fingerprint) becomes one step for every rank whose next call it is, once no rank still
//! has it further down its list; when no call qualifies (ranks disagree on the order) the lowest
//! rank's next call goes first, for the ranks that make it next.

use super::infer;
use super::model::{scen_dtype, Dump, Entry};
use crate::diagnose::check;
use crate::diagnose::hang::{self, ranges, RankAt};
use crate::diagnose::{CallKind, CallRecord, CallState, Diagnosis, Fingerprint};
use crate::trace::{Wait, WaitOn};
use std::collections::{BTreeMap, BTreeSet};

/// The dumps of one job, by global rank.
#[derive(Debug, Clone)]
pub struct Job {
    pub dumps: BTreeMap<usize, Dump>,
    /// Ranks in the job (from the groups' member lists and the dump ranks).
    pub world: usize,
    /// Members of groups the dumps do not list (`--group NAME=RANKS`), by group name.
    pub group_hints: BTreeMap<String, Vec<usize>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no dumps")]
    Empty,
    #[error("no dump for rank(s) {0} of {1} (pass --allow-incomplete-ranks to import anyway)")]
    MissingRanks(String, usize),
    #[error(transparent)]
    Group(#[from] super::infer::GroupError),
    #[error("rank {rank} record {record}: {why}")]
    Entry {
        rank: usize,
        record: u64,
        why: String,
    },
}

impl Job {
    pub fn new(dumps: BTreeMap<usize, Dump>) -> Result<Job, ImportError> {
        let last = *dumps.keys().last().ok_or(ImportError::Empty)?;
        let listed = dumps
            .values()
            .flat_map(|d| d.pg_config.values())
            .flat_map(|c| c.ranks.iter().copied())
            .max()
            .unwrap_or(0);
        Ok(Job {
            world: last.max(listed) + 1,
            dumps,
            group_hints: BTreeMap::new(),
        })
    }

    /// The members of groups the dumps do not list; the job grows to the highest rank named.
    pub fn with_group_hints(mut self, hints: BTreeMap<String, Vec<usize>>) -> Job {
        let top = hints.values().flatten().max().map_or(0, |r| r + 1);
        self.world = self.world.max(top);
        self.group_hints = hints;
        self
    }

    /// Ranks of the job without a dump.
    pub fn missing(&self) -> Vec<usize> {
        (0..self.world)
            .filter(|r| !self.dumps.contains_key(r))
            .collect()
    }

    pub fn require_complete(&self) -> Result<(), ImportError> {
        let m = self.missing();
        if m.is_empty() {
            Ok(())
        } else {
            Err(ImportError::MissingRanks(ranges(&m), self.world))
        }
    }
}

/// One recorded call, as the scenario and the records need it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Call {
    pub group: String,
    pub kind: CallKind,
    pub seq: u64,
    pub peer: Option<usize>,
    pub op: String,
    pub dtype: String,
    pub shape: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(super) struct RankCall {
    pub call: Call,
    pub entry: Entry,
    pub state: CallState,
}

/// A group as the dumps show it.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub desc: String,
    pub ranks: Vec<usize>,
    pub backend: String,
    pub timeout_ms: u64,
    /// Members taken as the ranks that recorded calls on it (the dumps do not list them).
    pub assumed: bool,
}

/// The import: the scenario text, the records and the diagnosis over them.
#[derive(Debug, Clone)]
pub struct Import {
    pub scenario: String,
    pub records: Vec<CallRecord>,
    pub ranks: Vec<RankAt>,
    pub diagnosis: Diagnosis,
    /// Per rank and group: `rank 0 on WORLD (0): last enqueued #2, started -, completed #1`.
    pub status: Vec<String>,
    /// What the dumps cannot tell and the scenario assumes.
    pub notes: Vec<String>,
}

/// `WORLD` for the default group, else `pg<name>` (a valid scenario handle).
pub(super) fn label(name: &str, desc: &str) -> String {
    if desc == "default_pg" || name == "0" {
        "WORLD".into()
    } else {
        format!("pg{name}")
    }
}

pub(super) fn scen_backend(torch: &str) -> &'static str {
    match torch {
        "gloo" => "gloo",
        _ => "xccl",
    }
}

/// FR state to scen's: gloo never moves an entry past `scheduled` and sets `retired` when done;
/// NCCL/XCCL retire a timed-out entry without completing it.
pub(crate) fn state_of(e: &Entry) -> CallState {
    match (e.state.as_str(), e.retired) {
        ("completed", _) => CallState::Completed,
        ("scheduled", true) if e.time_discovered_started_ns.is_none() => CallState::Completed,
        (_, true) => CallState::Failed,
        _ => CallState::Started,
    }
}

/// Scen's op name for a profiling name's op.
fn scen_op(op: &str) -> Option<&'static str> {
    Some(match op {
        "all_reduce" | "allreduce" => "all_reduce",
        "broadcast" => "broadcast",
        "all_gather" | "allgather" => "all_gather",
        "_allgather_base" | "all_gather_into_tensor" => "all_gather_into_tensor",
        "reduce_scatter" => "reduce_scatter",
        "_reduce_scatter_base" | "reduce_scatter_tensor" => "reduce_scatter_tensor",
        "reduce" => "reduce",
        "gather" => "gather",
        "scatter" => "scatter",
        "all_to_all" | "alltoall" => "all_to_all",
        "all_to_all_single" | "alltoall_base" => "all_to_all_single",
        "barrier" => "barrier",
        "send" => "send",
        "recv" => "recv",
        _ => return None,
    })
}

fn rank_calls(
    rank: usize,
    dump: &Dump,
    groups: &BTreeMap<String, Group>,
) -> Result<Vec<RankCall>, ImportError> {
    let mut entries = dump.entries.clone();
    entries.sort_by_key(|e| e.record_id);
    let mut out = Vec::new();
    for e in entries {
        let err = |why: String| ImportError::Entry {
            rank,
            record: e.record_id,
            why,
        };
        let op = scen_op(e.op())
            .ok_or_else(|| err(format!("`{}` has no scen step", e.profiling_name)))?;
        let (kind, peer, seq) = match op {
            "send" | "recv" => {
                let (s, d) = e.endpoints().ok_or_else(|| {
                    err(format!(
                        "p2p `{}` names no `src->dst` / `dst<-src`",
                        e.profiling_name
                    ))
                })?;
                // The names count group ranks.
                let members = &groups[&e.pg_name].ranks;
                let global = |g: usize| {
                    members
                        .get(g)
                        .copied()
                        .ok_or_else(|| err(format!("group rank {g} is not in group {}", e.pg_name)))
                };
                if op == "send" {
                    (CallKind::Send, Some(global(d)?), e.p2p_seq_id)
                } else {
                    (CallKind::Recv, Some(global(s)?), e.p2p_seq_id)
                }
            }
            _ => (CallKind::Collective, None, e.collective_seq_id),
        };
        let torch_dtype = e.input_dtypes.first().or(e.output_dtypes.first());
        let dtype = match torch_dtype {
            Some(t) => {
                scen_dtype(t).ok_or_else(|| err(format!("dtype `{t}` has no scen dtype")))?
            }
            None => "f32",
        };
        let sizes = if op.starts_with("reduce_scatter") {
            &e.output_sizes
        } else {
            &e.input_sizes
        };
        out.push(RankCall {
            call: Call {
                group: e.pg_name.clone(),
                kind,
                seq,
                peer,
                op: op.to_string(),
                dtype: dtype.to_string(),
                shape: sizes.first().cloned().unwrap_or_default(),
            },
            state: state_of(&e),
            entry: e,
        });
    }
    Ok(out)
}

/// Merges the ranks' call lists into steps: `(ranks, call)` in replay order.
fn merge(calls: &BTreeMap<usize, Vec<RankCall>>) -> Vec<(Vec<usize>, Call)> {
    let mut pos: BTreeMap<usize, usize> = calls.keys().map(|r| (*r, 0)).collect();
    let mut steps = Vec::new();
    loop {
        let heads: BTreeMap<usize, &Call> = calls
            .iter()
            .filter_map(|(r, l)| l.get(pos[r]).map(|c| (*r, &c.call)))
            .collect();
        let Some(first) = heads.values().next() else {
            break;
        };
        // A head no rank still has further down its list.
        let ready = heads.values().find(|h| {
            calls
                .iter()
                .all(|(r, l)| l[pos[r]..].iter().skip(1).all(|c| &c.call != **h))
        });
        let pick: Call = (*ready.unwrap_or(first)).clone();
        let who: Vec<usize> = heads
            .iter()
            .filter(|(_, c)| ***c == pick)
            .map(|(r, _)| *r)
            .collect();
        for r in &who {
            *pos.get_mut(r).expect("rank") += 1;
        }
        steps.push((who, pick));
    }
    steps
}

/// What the dumps say, ready for the scenario writer ([`super::replay`]) and the records.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub world: usize,
    pub missing: Vec<usize>,
    pub version: String,
    /// The torch backend of the job's groups (`gloo`, `nccl`, ...).
    pub backend: String,
    pub timeout_ms: u64,
    pub groups: BTreeMap<String, Group>,
    pub calls: BTreeMap<usize, Vec<RankCall>>,
    /// Replay order: the ranks that make each call.
    pub steps: Vec<(Vec<usize>, Call)>,
    /// Each rank's first call that did not complete.
    pub open: BTreeMap<usize, RankCall>,
    /// Ranks that completed every recorded call.
    pub finished: Vec<usize>,
}

/// Where each rank's call is in the scenario: `(rank, call)` -> (step index, line).
pub(super) type At = BTreeMap<(usize, Call), (usize, usize)>;

fn plan(job: &Job, notes: &mut Vec<String>) -> Result<Plan, ImportError> {
    let groups = infer::groups(job, notes)?;
    let mut calls = BTreeMap::new();
    for (r, d) in &job.dumps {
        calls.insert(*r, rank_calls(*r, d, &groups)?);
    }
    infer::gloo_failures(&mut calls, &groups, notes);
    infer::missing_calls(&job.missing(), &groups, &mut calls, notes);
    // Ranks whose every call completed finished (the dumps cannot say what they did next).
    let open: BTreeMap<usize, RankCall> = calls
        .iter()
        .filter_map(|(r, l): (&usize, &Vec<RankCall>)| {
            l.iter()
                .find(|c| c.state != CallState::Completed)
                .map(|c| (*r, c.clone()))
        })
        .collect();
    for (r, c) in &open {
        let g = &groups[&c.call.group];
        let all_in = g.ranks.iter().all(|m| {
            calls
                .get(m)
                .is_some_and(|l| l.iter().any(|o| o.call == c.call))
        });
        if g.assumed && c.state == CallState::Started && all_in {
            notes.push(format!(
                "rank {r} is stuck in {} #{} on {} though every rank known in that group made \
                 the call: the group has members the dumps do not show, and the replay cannot \
                 reproduce the stall without --group {}=RANKS",
                c.call.op,
                c.call.seq,
                label(&c.call.group, &g.desc),
                c.call.group
            ));
        }
    }
    let finished = calls
        .keys()
        .filter(|r| !open.contains_key(r))
        .copied()
        .collect();
    Ok(Plan {
        world: job.world,
        missing: job.missing(),
        version: job
            .dumps
            .values()
            .next()
            .map(|d| d.version.clone())
            .unwrap_or_default(),
        backend: groups
            .values()
            .map(|g| g.backend.clone())
            .next()
            .unwrap_or_else(|| "gloo".into()),
        timeout_ms: groups.values().map(|g| g.timeout_ms).max().unwrap_or(0),
        steps: merge(&calls),
        groups,
        calls,
        open,
        finished,
    })
}

/// Imports a job's dumps.
pub fn import(job: &Job, source: &str) -> Result<Import, ImportError> {
    let mut notes = Vec::new();
    let p = plan(job, &mut notes)?;
    let (scenario, at) = super::replay::scenario(&p, source);
    let records = records(job, &p, &at);
    let ranks = rank_states(job, &p, &at);
    let done: Vec<bool> = (0..p.world).map(|r| p.finished.contains(&r)).collect();
    let t_ms = records.iter().map(|c| c.t_start_ms).max().unwrap_or(0);
    let diagnosis = Diagnosis {
        env: vec![],
        groups: None,
        // A dump does not say how a rank that stopped dumping ended.
        mismatches: check::check(&records, &done, &[]),
        hang: hang::analyse(&records, &ranks, t_ms),
        device: None,
    };
    notes.extend(unnoticed(&diagnosis));
    Ok(Import {
        scenario,
        records,
        ranks,
        diagnosis,
        status: status_lines(job, &p.groups),
        notes,
    })
}

/// Mismatches whose calls completed on both sides: the real backend did not notice them.
fn unnoticed(d: &Diagnosis) -> Vec<String> {
    d.mismatches
        .iter()
        .filter_map(|m| {
            let b = m.b.as_ref()?;
            (m.a.state == CallState::Completed && b.state == CallState::Completed).then(|| {
                format!(
                    "the dumps show {} completed on ranks {} and {} despite the difference: the \
                     real backend did not notice it (see docs/flight-recorder.md)",
                    m.a.call, m.a.rank, b.rank
                )
            })
        })
        .collect()
}

/// One call record per entry, pointing at the scenario's steps; times from the dumps' clocks.
fn records(job: &Job, p: &Plan, at: &At) -> Vec<CallRecord> {
    let t0 = job
        .dumps
        .values()
        .flat_map(|d| d.entries.iter().map(|e| e.time_created_ns))
        .filter(|t| *t > 0)
        .min()
        .unwrap_or(0);
    let mut records = Vec::new();
    for (r, list) in &p.calls {
        for c in list {
            let g = &p.groups[&c.call.group];
            let (step, line) = at[&(*r, c.call.clone())];
            let esize = crate::dtype::DType::ALL
                .iter()
                .find(|d| d.name() == c.call.dtype)
                .map(|d| d.size_bytes())
                .unwrap_or(4);
            let numel: usize = c.call.shape.iter().product();
            let t_start_us = c.entry.time_created_ns.saturating_sub(t0) / 1000;
            let t_start_ms = t_start_us / 1000;
            records.push(CallRecord {
                rank: *r,
                group: c.call.group.clone(),
                group_label: label(&c.call.group, &g.desc),
                group_ranks: g.ranks.clone().into(),
                backend: scen_backend(&g.backend).into(),
                kind: c.call.kind,
                seq: c.call.seq,
                peer: c.call.peer,
                fp: Fingerprint {
                    op: c.call.op.clone(),
                    dtype: c.call.dtype.clone(),
                    shape: c.call.shape.clone(),
                    nbytes: numel * esize,
                    // As the scenario assumes: the group's first rank.
                    root: matches!(
                        c.call.op.as_str(),
                        "broadcast" | "scatter" | "reduce" | "gather"
                    )
                    .then(|| g.ranks.first().copied())
                    .flatten(),
                    reduce_op: None,
                    splits: a2a_splits(&c.call.op, &c.call.shape),
                },
                step,
                line,
                state: c.state,
                t_start_ms,
                t_end_ms: (c.state != CallState::Started).then_some(t_start_ms),
                t_start_us,
                t_end_us: (c.state != CallState::Started).then_some(t_start_us),
                tag: 0,
            });
        }
    }
    records
}

/// An all_to_all entry's sizes legally differ between ranks (uneven splits); a dump has no
/// split sizes, so only the row size is compared (the FR analyser's `UNDECIDED`, R33).
fn a2a_splits(op: &str, shape: &[usize]) -> Option<crate::diagnose::Splits> {
    (op.starts_with("all_to_all") || op.starts_with("alltoall")).then(|| crate::diagnose::Splits {
        send_rows: vec![],
        recv_rows: vec![],
        row_elems: shape.iter().skip(1).product(),
    })
}

/// Where each rank is at the dump: stuck in its open call, failed in it (retired without
/// completing), finished, or unknown (no dump).
fn rank_states(job: &Job, p: &Plan, at: &At) -> Vec<RankAt> {
    (0..p.world)
        .map(|r| match p.open.get(&r) {
            Some(c) if c.state == CallState::Failed => {
                let (step, line) = at[&(r, c.call.clone())];
                RankAt::Failed {
                    step,
                    line,
                    label: crate::scenario::step_label(step, &c.call.op, None),
                }
            }
            Some(c) => {
                let (step, line) = at[&(r, c.call.clone())];
                let g = &p.groups[&c.call.group];
                RankAt::Stuck {
                    step,
                    line,
                    label: crate::scenario::step_label(step, &c.call.op, None),
                    wait: Wait {
                        step,
                        on: WaitOn::Recorded,
                        what: format!(
                            "{} #{} on {}",
                            c.call.op,
                            c.call.seq,
                            label(&c.call.group, &g.desc)
                        ),
                        group: Some(c.call.group.clone()),
                        seq: Some(c.call.seq),
                        peers: g.ranks.iter().copied().filter(|m| *m != r).collect(),
                        since_ms: 0,
                        // gloo's timeout applies; NCCL's is the watchdog's, xccl has none (R29).
                        deadline_ms: (scen_backend(&g.backend) == "gloo" && g.timeout_ms > 0)
                            .then_some(g.timeout_ms),
                        timeout_error: None,
                    },
                }
            }
            None if job.dumps.contains_key(&r) => RankAt::Finished,
            None => RankAt::Busy,
        })
        .collect()
}

/// Each rank's last enqueued/started/completed sequence numbers per group: `pg_status` where
/// the dump has it, else counted from the entries.
fn status_lines(job: &Job, groups: &BTreeMap<String, Group>) -> Vec<String> {
    let show = |n: i64| {
        if n < 0 {
            "-".to_string()
        } else {
            format!("#{n}")
        }
    };
    let mut out = Vec::new();
    for (r, d) in &job.dumps {
        let mut pgs: BTreeSet<(u64, String)> = BTreeSet::new();
        for e in &d.entries {
            pgs.insert((e.pg_id, e.pg_name.clone()));
        }
        for (pg_id, name) in pgs {
            let desc = groups
                .get(&name)
                .map(|g| g.desc.clone())
                .unwrap_or_default();
            let (enq, start, done) = match d.pg_status.get(&pg_id.to_string()) {
                Some(s) => (s.last_enqueued, s.last_started, s.last_completed),
                None => {
                    let coll = d.entries.iter().filter(|e| e.pg_name == name && !e.is_p2p);
                    let last = |f: &dyn Fn(&Entry) -> bool| {
                        coll.clone()
                            .filter(|e| f(e))
                            .map(|e| e.collective_seq_id as i64)
                            .max()
                            .unwrap_or(-1)
                    };
                    (
                        last(&|_| true),
                        last(&|e| e.time_discovered_started_ns.is_some()),
                        last(&|e| state_of(e) == CallState::Completed),
                    )
                }
            };
            out.push(format!(
                "rank {r} on {} ({name}): last enqueued {}, started {}, completed {}",
                label(&name, &desc),
                show(enq),
                show(start),
                show(done)
            ));
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// gloo's entry for `op` #seq on the default group, retired (`scheduled`, no times).
    pub(in crate::fr) fn call(op: &str, seq: u64) -> RankCall {
        RankCall {
            call: Call {
                group: "0".into(),
                kind: CallKind::Collective,
                seq,
                peer: None,
                op: op.into(),
                dtype: "f32".into(),
                shape: vec![4],
            },
            entry: Entry {
                record_id: seq,
                pg_id: 0,
                pg_name: "0".into(),
                pg_desc: "default_pg".into(),
                collective_seq_id: seq,
                p2p_seq_id: 0,
                op_id: seq,
                profiling_name: format!("gloo:{op}"),
                is_p2p: false,
                input_sizes: vec![vec![4]],
                input_dtypes: vec!["Float".into()],
                output_sizes: vec![vec![4]],
                output_dtypes: vec!["Float".into()],
                state: "scheduled".into(),
                retired: true,
                timeout_ms: 1000,
                time_created_ns: 0,
                time_discovered_started_ns: None,
                time_discovered_completed_ns: None,
            },
            state: CallState::Completed,
        }
    }

    #[test]
    fn merge_keeps_every_ranks_order_and_shares_common_calls() {
        let mut calls = BTreeMap::new();
        calls.insert(0, vec![call("all_reduce", 1), call("all_reduce", 2)]);
        calls.insert(1, vec![call("all_reduce", 1)]);
        let steps = merge(&calls);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].0, vec![0, 1]);
        assert_eq!(steps[1].0, vec![0]);
    }

    #[test]
    fn merge_orders_opposite_group_orders_per_rank() {
        let on = |g: &str, seq| {
            let mut c = call("all_reduce", seq);
            c.call.group = g.into();
            c
        };
        let mut calls = BTreeMap::new();
        calls.insert(0, vec![on("A", 1), on("B", 1)]);
        calls.insert(1, vec![on("B", 1), on("A", 1)]);
        let steps = merge(&calls);
        // No call is ready for both; rank 0's next goes first, for rank 0 only.
        let order: Vec<(Vec<usize>, String)> =
            steps.into_iter().map(|(w, c)| (w, c.group)).collect();
        assert_eq!(
            order,
            vec![
                (vec![0], "A".to_string()),
                (vec![0, 1], "B".to_string()),
                (vec![1], "A".to_string()),
            ]
        );
    }
}
