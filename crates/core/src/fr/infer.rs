//! What a job's dumps leave out, inferred from all of them together, each inference said in a
//! note: a group's members (gloo's recorder does not list them), which of gloo's retired calls
//! failed (gloo retires a timed-out call exactly as a completed one), and the calls of a rank
//! without a dump (those that completed on the others with it).

use super::import::{label, Group, Job, RankCall};
use crate::diagnose::hang::ranges;
use crate::diagnose::{CallKind, CallState};
use std::collections::{BTreeMap, BTreeSet};

/// Why a `--group` hint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("--group {name}: no dump has a call on group {name} (groups with calls: {known})")]
    Unknown { name: String, known: String },
    #[error("--group {name}={given}: rank {rank} has calls on group {name} but is not listed")]
    Excludes {
        name: String,
        given: String,
        rank: usize,
    },
    #[error("--group {name}={given}: the dumps list its members as {listed}")]
    Contradicts {
        name: String,
        given: String,
        listed: String,
    },
}

/// The groups the entries use, with their members: the dumps' `pg_config` where it lists the
/// group by name (NCCL, scen's own dumps), else the `--group` hint, else the whole job for the
/// default group, else the ranks that recorded calls on it (said in a note).
pub(super) fn groups(
    job: &Job,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, Group>, GroupError> {
    let mut out: BTreeMap<String, Group> = BTreeMap::new();
    for (rank, dump) in &job.dumps {
        for e in &dump.entries {
            let g = out.entry(e.pg_name.clone()).or_insert_with(|| Group {
                desc: e.pg_desc.clone(),
                ranks: vec![],
                backend: e.backend().to_string(),
                timeout_ms: 0,
                assumed: false,
            });
            g.timeout_ms = g.timeout_ms.max(e.timeout_ms);
            if !g.ranks.contains(rank) {
                g.ranks.push(*rank);
            }
        }
    }
    for (name, given) in &job.group_hints {
        let Some(g) = out.get(name) else {
            return Err(GroupError::Unknown {
                name: name.clone(),
                known: out.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        if let Some(r) = g.ranks.iter().find(|r| !given.contains(r)) {
            return Err(GroupError::Excludes {
                name: name.clone(),
                given: ranges(given),
                rank: *r,
            });
        }
    }
    for (name, g) in out.iter_mut() {
        let listed = job.dumps.values().find_map(|d| {
            d.pg_config
                .get(name.as_str())
                .map(|c| c.ranks.clone())
                .filter(|r| !r.is_empty())
        });
        let hint = job.group_hints.get(name);
        let default = g.desc == "default_pg" || name == "0";
        g.ranks = match (listed, hint) {
            (Some(l), Some(h)) if sorted(&l) != sorted(h) => {
                return Err(GroupError::Contradicts {
                    name: name.clone(),
                    given: ranges(h),
                    listed: ranges(&l),
                })
            }
            (Some(l), _) => l,
            (None, Some(h)) => sorted(h),
            (None, None) if default => (0..job.world).collect(),
            (None, None) => {
                let seen = sorted(&g.ranks);
                g.assumed = true;
                notes.push(format!(
                    "the dumps do not list the members of group {name} (gloo's recorder files \
                     pg_config under an empty name): taken as the rank(s) that recorded calls on \
                     it, {}; pass --group {name}=RANKS to give the real members",
                    ranges(&seen)
                ));
                seen
            }
        };
    }
    Ok(out)
}

fn sorted(r: &[usize]) -> Vec<usize> {
    let mut v = r.to_vec();
    v.sort();
    v.dedup();
    v
}

/// The highest sequence number each rank recorded per group.
fn last_seq(calls: &BTreeMap<usize, Vec<RankCall>>) -> BTreeMap<(usize, String), u64> {
    let mut out = BTreeMap::new();
    for (r, list) in calls {
        for c in list.iter().filter(|c| c.call.kind == CallKind::Collective) {
            let e = out.entry((*r, c.call.group.clone())).or_insert(0);
            *e = (*e).max(c.call.seq);
        }
    }
    out
}

/// A call some ranks retired though members never issued it: (op, those ranks, the members).
type Failed = (String, Vec<usize>, Vec<usize>);

/// gloo retires a call that timed out (or lost a peer) exactly as one that completed (state
/// `scheduled`, `retired`, no times; `pg_status` counts it completed). A collective cannot
/// complete while a member never issued it, so such a retired call failed: the cross-rank view
/// PyTorch's fr_trace takes (it reports the call as not joined by that member).
pub(super) fn gloo_failures(
    calls: &mut BTreeMap<usize, Vec<RankCall>>,
    groups: &BTreeMap<String, Group>,
    notes: &mut Vec<String>,
) {
    let last = last_seq(calls);
    let dumped: BTreeSet<usize> = calls.keys().copied().collect();
    let mut failed: BTreeMap<(String, u64), Failed> = BTreeMap::new();
    for (r, list) in calls.iter_mut() {
        for c in list.iter_mut() {
            let explicit = c.entry.state == "completed";
            if c.call.kind != CallKind::Collective || c.state != CallState::Completed || explicit {
                continue;
            }
            let g = &groups[&c.call.group];
            let absent: Vec<usize> = g
                .ranks
                .iter()
                .copied()
                .filter(|m| dumped.contains(m))
                .filter(|m| {
                    last.get(&(*m, c.call.group.clone())).copied().unwrap_or(0) < c.call.seq
                })
                .collect();
            if absent.is_empty() {
                continue;
            }
            c.state = CallState::Failed;
            let f = failed
                .entry((c.call.group.clone(), c.call.seq))
                .or_insert_with(|| (c.call.op.clone(), vec![], absent));
            f.1.push(*r);
        }
    }
    for ((group, seq), (op, ranks, absent)) in failed {
        let g = &groups[&group];
        notes.push(format!(
            "{op} #{seq} on {}: rank(s) {} retired it, but rank(s) {} never issued it; a \
             collective cannot complete without every member, so it failed there (gloo's \
             timeout, {} ms, or a peer's exit; gloo retires both as it retires a completed call)",
            label(&group, &g.desc),
            ranges(&ranks),
            ranges(&absent),
            g.timeout_ms
        ));
    }
}

/// A rank without a dump made every collective that completed on another member of its
/// groups (none completes without it); what it did after them is unknown. Gives each missing
/// rank those calls (possibly none), in the order they were created.
pub(super) fn missing_calls(
    missing: &[usize],
    groups: &BTreeMap<String, Group>,
    calls: &mut BTreeMap<usize, Vec<RankCall>>,
    notes: &mut Vec<String>,
) {
    for m in missing {
        let mut seen: BTreeMap<(String, u64), RankCall> = BTreeMap::new();
        for list in calls.values() {
            for c in list {
                let member = groups[&c.call.group].ranks.contains(m);
                if member && c.call.kind == CallKind::Collective && c.state == CallState::Completed
                {
                    seen.entry((c.call.group.clone(), c.call.seq))
                        .or_insert_with(|| c.clone());
                }
            }
        }
        let mut list: Vec<RankCall> = seen.into_values().collect();
        list.sort_by_key(|c| (c.entry.time_created_ns, c.call.group.clone(), c.call.seq));
        let names: Vec<String> = list
            .iter()
            .map(|c| {
                let g = &groups[&c.call.group];
                format!(
                    "{} #{} on {}",
                    c.call.op,
                    c.call.seq,
                    label(&c.call.group, &g.desc)
                )
            })
            .collect();
        notes.push(if names.is_empty() {
            format!(
                "no dump for rank {m}: no call completed with it, so it only inits in the scenario"
            )
        } else {
            format!(
                "no dump for rank {m}: it made the call(s) that completed on the others with it \
                 ({}); what it did next is unknown (the scenario has it stay alive)",
                names.join(", ")
            )
        });
        calls.insert(*m, list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gloo's entry for all_reduce #seq on the default group, retired (`scheduled`, no times).
    fn retired(seq: u64, created_ns: u64) -> RankCall {
        let mut c = crate::fr::import::tests::call("all_reduce", seq);
        c.entry.timeout_ms = 2000;
        c.entry.time_created_ns = created_ns;
        c
    }

    fn world(n: usize) -> BTreeMap<String, Group> {
        let g = Group {
            desc: "default_pg".into(),
            ranks: (0..n).collect(),
            backend: "gloo".into(),
            timeout_ms: 2000,
            assumed: false,
        };
        BTreeMap::from([("0".to_string(), g)])
    }

    /// tests/fixtures/fr/gloo_timeout: ranks 0 and 1 retired #2, rank 2 never issued it.
    #[test]
    fn a_retired_call_a_member_never_issued_failed() {
        let mut calls = BTreeMap::new();
        calls.insert(0, vec![retired(1, 10), retired(2, 20)]);
        calls.insert(1, vec![retired(1, 10), retired(2, 20)]);
        calls.insert(2, vec![retired(1, 10)]);
        let mut notes = vec![];
        gloo_failures(&mut calls, &world(3), &mut notes);
        let states = |r: usize| calls[&r].iter().map(|c| c.state).collect::<Vec<_>>();
        assert_eq!(states(0), vec![CallState::Completed, CallState::Failed]);
        assert_eq!(states(1), vec![CallState::Completed, CallState::Failed]);
        assert_eq!(states(2), vec![CallState::Completed]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with(
            "all_reduce #2 on WORLD: rank(s) 0, 1 retired it, but rank(s) 2 never issued it"
        ));
    }

    #[test]
    fn a_missing_rank_makes_the_calls_that_completed_with_it() {
        let mut calls = BTreeMap::new();
        let mut open = retired(2, 20);
        open.state = CallState::Started;
        calls.insert(0, vec![retired(1, 10), open]);
        let mut notes = vec![];
        missing_calls(&[1], &world(2), &mut calls, &mut notes);
        let got: Vec<u64> = calls[&1].iter().map(|c| c.call.seq).collect();
        assert_eq!(got, vec![1]);
        assert!(notes[0].contains("no dump for rank 1: it made the call(s) that completed on the others with it (all_reduce #1 on WORLD)"));
    }
}
