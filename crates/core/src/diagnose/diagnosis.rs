//! The diagnosis of a run, as the verdict carries it and reports print it: consistency
//! mismatches first (the cause), then the wait-for graph of the first stall (the effect).
//! Ranks in identical states print as one line ("ranks 1-15: ...") so a 16-rank hang fits a
//! screen.

use super::check::{self, Mismatch};
use super::env::{self, EnvDifference};
use super::groups::{self, GroupDivergence};
use super::hang::{self, ranges, Hang, RankAt};
use super::platform::{self, DeviceHint};
use super::record::CallRecord;
use crate::trace::WaitOn;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diagnosis {
    /// Rendezvous variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE) that differ between ranks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvDifference>,
    /// The first `new_group` call whose name means different groups on different ranks.
    pub groups: Option<GroupDivergence>,
    /// First divergence per group, then send/recv pairing problems.
    pub mismatches: Vec<Mismatch>,
    /// The wait-for graph at the first stall.
    pub hang: Option<Hang>,
    /// Tensor steps that failed on xpu only because the platform defaulted to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceHint>,
}

impl Diagnosis {
    /// `records`: every call record at the end of the run; `finished[r]`: rank r completed its
    /// program; `failed_at[r]`: when it failed (its process ended); `stall`: the records and
    /// rank states at the first stall, if there was one.
    pub fn build(
        records: &[CallRecord],
        finished: &[bool],
        failed_at: &[Option<u64>],
        stall: Option<(&[CallRecord], &[RankAt], u64)>,
    ) -> Diagnosis {
        Diagnosis {
            env: vec![],
            groups: None,
            mismatches: check::check(records, finished, failed_at),
            hang: stall.and_then(|(recs, ranks, t)| hang::analyse(recs, ranks, t)),
            device: None,
        }
    }

    /// Adds the group-name check over every rank's `new_group` records.
    pub fn with_groups(mut self, log: &groups::GroupLog) -> Diagnosis {
        self.groups = log.check();
        self
    }

    /// Adds the rendezvous-environment check over every rank's environment as it ran.
    pub fn with_env(mut self, ranks: &[crate::scenario::RankSpec]) -> Diagnosis {
        self.env = env::check(ranks);
        self
    }

    /// Adds the device check: a CPU program on the (default) xpu platform.
    /// `failed`: each failed rank, the step it failed in and why.
    pub fn with_device(
        mut self,
        s: &crate::scenario::Scenario,
        failed: &[(usize, usize, &crate::outcome::Failure)],
    ) -> Diagnosis {
        self.device = platform::check(s, failed);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.device.is_none()
            && self.env.is_empty()
            && self.groups.is_none()
            && self.mismatches.is_empty()
            && self.hang.is_none()
    }

    /// The human lines (no trailing newlines), grouped by identical state.
    pub fn lines(&self, file: &str) -> Vec<String> {
        let mut out: Vec<String> = self.device.iter().map(|d| d.render(file)).collect();
        out.extend(self.env.iter().map(|e| e.render()));
        if let Some(g) = &self.groups {
            out.extend(g.lines(file));
        }
        for m in &self.mismatches {
            out.push(m.render(file));
            out.push(format!("  {}", m.real()));
        }
        if let Some(h) = &self.hang {
            out.extend(hang_lines(h, file));
        }
        out
    }
}

fn who(ranks: &[usize]) -> String {
    if ranks.len() == 1 {
        format!("rank {}", ranks[0])
    } else {
        format!("ranks {}", ranges(ranks))
    }
}

fn hang_lines(h: &Hang, file: &str) -> Vec<String> {
    let mut out = vec![format!(
        "wait-for graph at {}: {} stuck",
        crate::trace::format_ms(h.t_ms).trim(),
        who(&h.stuck.iter().map(|s| s.rank).collect::<Vec<_>>())
    )];
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for s in &h.stuck {
        let mut line = format!("stuck in {} ({file}:{})", s.label, s.line);
        match &s.call {
            Some(c) => {
                line.push_str(&format!(", in {}", c.name));
                let mut parts = Vec::new();
                if !s.never_joined.is_empty() {
                    parts.push(format!("never joined: {}", ranges(&s.never_joined)));
                }
                if !s.joined_not_finished.is_empty() {
                    parts.push(format!(
                        "joined, not finished: {}",
                        ranges(&s.joined_not_finished)
                    ));
                }
                if !s.finished.is_empty() {
                    parts.push(format!("finished it: {}", ranges(&s.finished)));
                }
                line.push_str(&format!(" [{}]", parts.join("; ")));
                // A size or kind mismatch the device backend does not check (link.rs): the
                // wait is the only place that says which bytes disagree.
                if let RankAt::Stuck { wait, .. } = &h.ranks[s.rank] {
                    if let WaitOn::Unchecked { why } = &wait.on {
                        line.push_str(&format!(
                            "; {why}; the backend does not check and keeps waiting"
                        ));
                    }
                }
            }
            None => {
                line.push_str(&format!(": {}", s.what));
                if !s.never_joined.is_empty() {
                    let launched = h.ranks.len();
                    let (here, absent): (Vec<usize>, Vec<usize>) =
                        s.never_joined.iter().partition(|r| **r < launched);
                    let mut parts = Vec::new();
                    if !here.is_empty() {
                        parts.push(format!("not joined: {}", ranges(&here)));
                    }
                    if !absent.is_empty() {
                        parts.push(format!(
                            "never launched: {} (only {launched} processes run)",
                            ranges(&absent)
                        ));
                    }
                    line.push_str(&format!(" [{}]", parts.join("; ")));
                }
            }
        }
        let timeout = match &h.ranks[s.rank] {
            RankAt::Stuck { wait, .. } => match wait.deadline_ms {
                Some(d) => format!("; times out at {}", crate::trace::format_ms(d).trim()),
                None => "; waits forever (no timeout applies)".into(),
            },
            _ => String::new(),
        };
        line.push_str(&timeout);
        if !groups.contains_key(&line) {
            order.push(line.clone());
        }
        groups.entry(line).or_default().push(s.rank);
    }
    for line in order {
        out.push(format!("  {}: {line}", who(&groups[&line])));
    }
    // The members that never joined (the culprits), with their last call there and where
    // they are now, as NCCL's desync report would say it (R31).
    let place = |r: usize| {
        h.ranks
            .get(r)
            .map(|a| a.describe(file))
            .unwrap_or_else(|| "does not exist in this world".into())
    };
    let mut lines: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |text: String, r: usize| match lines.iter_mut().find(|(t, _)| *t == text) {
        Some((_, rs)) => rs.push(r),
        None => lines.push((text, vec![r])),
    };
    for a in &h.absent {
        let last = match &a.last {
            Some(l) => format!("its last call there: {l}"),
            None => "no earlier call there".to_string(),
        };
        add(
            format!("never joined {} ({last}); {}", a.call, place(a.rank)),
            a.rank,
        );
    }
    // Other awaited ranks that are not stuck themselves.
    let mut others: Vec<usize> = h
        .stuck
        .iter()
        .flat_map(|s| s.waits_for.iter().copied())
        .filter(|r| !h.stuck.iter().any(|s| s.rank == *r))
        .filter(|r| !h.absent.iter().any(|a| a.rank == *r))
        .collect();
    others.sort();
    others.dedup();
    for r in others {
        add(place(r), r);
    }
    for (text, rs) in lines {
        out.push(format!("  {}: {text}", who(&rs)));
    }
    if !h.cycle.is_empty() {
        let call = |r: usize| {
            h.stuck
                .iter()
                .find(|s| s.rank == r)
                .map(|s| match &s.call {
                    Some(c) => c.name.clone(),
                    None => s.label.clone(),
                })
                .unwrap_or_default()
        };
        let path: Vec<String> = h
            .cycle
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if i + 1 == h.cycle.len() {
                    format!("rank {r}")
                } else {
                    format!("rank {r} (in {})", call(*r))
                }
            })
            .collect();
        out.push(format!("  cycle: {}", path.join(" waits for ")));
    }
    out
}
