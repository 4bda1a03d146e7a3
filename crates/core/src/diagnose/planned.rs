//! Group records of planned start-ups, kept as runs: sglang's start-up makes every `new_group`
//! call of its plan on every rank (O(W) calls on each of W ranks, members and non-members
//! alike). A record per call and rank, or even a rank bit per name, made the group log the
//! largest cost of a large world (issue 11). Here a rank that makes consecutive calls of one
//! shared list of calls under consecutive names adds one run (O(1) per call: a counter), and
//! ranks with identical runs form one class at check time. The name-consistency check
//! (`groups.rs`) expands a class into a record only at a name where sides differ, so every
//! divergence it reports is the one per-call records gave.

use super::groups::{GroupCall, GroupRecord, RankSet};
use std::collections::BTreeMap;
use std::rc::Rc;

/// A list of `new_group` calls that many ranks make in the same order from one shared
/// description (sglang's parallel-state plan), so a record can name a call by its index.
pub trait PlannedCalls {
    /// Call `i`'s rank list, as passed.
    fn ranks(&self, i: usize) -> &[usize];
    /// Which backend argument call `i` passes (a small number; equal numbers, equal arguments).
    fn backend_slot(&self, i: usize) -> usize;
    /// The handle `rank` gives call `i`'s group (its record's label), or `unnamed`.
    fn label(&self, i: usize, rank: usize) -> String;
}

/// One rank's planned `new_group` call, as the rank reports it.
pub struct PlannedRecord<'a> {
    pub rank: usize,
    /// `(generation, index)`: the counter name the call took.
    pub name: (u32, u64),
    pub source: &'a Rc<dyn PlannedCalls>,
    /// The call's index in `source`.
    pub call: usize,
    /// The backend string passed, as parsed (the record's `backend`).
    pub backend: &'a str,
    pub step: usize,
    pub line: usize,
}

/// The backend slots calls `calls` of `source` pass, each once, in increasing order. A rank
/// reports thousands of planned calls at once in a large sglang world and the slots are a few
/// small numbers: a bit mask, not a set of every call's slot.
fn distinct_slots(source: &dyn PlannedCalls, calls: std::ops::Range<usize>) -> Vec<usize> {
    let (mut mask, mut wide) = (0u64, std::collections::BTreeSet::new());
    for c in calls {
        match source.backend_slot(c) {
            s if s < 64 => mask |= 1 << s,
            s => {
                wide.insert(s);
            }
        }
    }
    let low = (0..64).filter(|s| mask & (1 << s) != 0);
    low.chain(wide).collect()
}

impl PlannedRecord<'_> {
    /// The per-call record this stands for.
    pub fn record(&self) -> GroupRecord {
        GroupRecord {
            rank: self.rank,
            generation: self.name.0,
            index: self.name.1,
            ranks: crate::ranks::of(self.source.ranks(self.call)),
            backend: self.backend.to_string(),
            label: self.source.label(self.call, self.rank),
            step: self.step,
            line: self.line,
            call: GroupCall::NewGroup,
        }
    }
}

/// Consecutive planned calls of one rank: names `first..first + count` took calls
/// `offset..offset + count` of one source.
struct Run {
    rank: usize,
    key: RunKey,
}

/// What ranks with identical runs share (their class).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RunKey {
    generation: u32,
    first: u64,
    count: u64,
    /// Index into [`Runs::sources`] (first-seen order: deterministic).
    source: usize,
    offset: usize,
    /// Backend slot → backend string, as the rank passed them.
    backends: BTreeMap<usize, String>,
    step: usize,
    line: usize,
}

/// Every rank's runs.
#[derive(Default)]
pub(super) struct Runs {
    sources: Vec<Rc<dyn PlannedCalls>>,
    runs: Vec<Run>,
    /// Rank → its last run (the one a next call may extend), `usize::MAX`: none.
    open: Vec<usize>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runs({} runs)", self.runs.len())
    }
}

impl Runs {
    /// Adds one call: extends the rank's last run where the call continues it, else starts one.
    pub(super) fn push(&mut self, r: &PlannedRecord) {
        let slot = r.source.backend_slot(r.call);
        if let Some(run) = self.open.get(r.rank).and_then(|i| self.runs.get_mut(*i)) {
            let k = &mut run.key;
            let continues = k.generation == r.name.0
                && k.first + k.count == r.name.1
                && k.offset + k.count as usize == r.call
                && (k.step, k.line) == (r.step, r.line)
                && ptr_eq(&self.sources[k.source], r.source);
            let known = k.backends.get(&slot).map(|b| b == r.backend);
            if continues && known != Some(false) {
                if known.is_none() {
                    k.backends.insert(slot, r.backend.to_string());
                }
                k.count += 1;
                return;
            }
        }
        let source = match self.sources.iter().position(|s| ptr_eq(s, r.source)) {
            Some(i) => i,
            None => {
                self.sources.push(r.source.clone());
                self.sources.len() - 1
            }
        };
        let key = RunKey {
            generation: r.name.0,
            first: r.name.1,
            count: 1,
            source,
            offset: r.call,
            backends: BTreeMap::from([(slot, r.backend.to_string())]),
            step: r.step,
            line: r.line,
        };
        if self.open.len() <= r.rank {
            self.open.resize(r.rank + 1, usize::MAX);
        }
        self.open[r.rank] = self.runs.len();
        self.runs.push(Run { rank: r.rank, key });
    }

    /// [`Runs::push`] of `count` consecutive calls from `r`'s (names and call indexes advance
    /// together; call `i` passes `backends[slot of i]`): the first as one call, the rest
    /// extend its run at once where every backend they pass agrees with the run's, as one
    /// push each would; else one push each.
    pub(super) fn push_many(
        &mut self,
        r: &PlannedRecord,
        count: usize,
        backends: &[Option<String>],
    ) {
        if count == 0 {
            return;
        }
        self.push(r);
        let rest = r.call + 1..r.call + count;
        let slots = distinct_slots(&**r.source, rest.clone());
        let run = &mut self.runs[self.open[r.rank]].key;
        let agrees = slots.iter().all(|s| {
            let passed = backends[*s].as_deref();
            run.backends
                .get(s)
                .is_none_or(|b| Some(b.as_str()) == passed)
        });
        if agrees {
            for s in slots {
                let passed = backends[s].as_deref().expect("a checked backend");
                run.backends.entry(s).or_insert_with(|| passed.to_string());
            }
            run.count += rest.len() as u64;
            return;
        }
        for (k, call) in rest.enumerate() {
            let backend = backends[r.source.backend_slot(call)].as_deref();
            self.push(&PlannedRecord {
                name: (r.name.0, r.name.1 + 1 + k as u64),
                call,
                backend: backend.expect("a checked backend"),
                ..*r
            });
        }
    }

    /// Ranks with identical runs, as classes.
    pub(super) fn classes(&self) -> Vec<Class<'_>> {
        let mut by_key: BTreeMap<&RunKey, RankSet> = BTreeMap::new();
        for run in &self.runs {
            by_key.entry(&run.key).or_default().insert(run.rank);
        }
        by_key
            .into_iter()
            .map(|(key, ranks)| Class {
                key,
                source: &*self.sources[key.source],
                ranks,
            })
            .collect()
    }
}

fn ptr_eq(a: &Rc<dyn PlannedCalls>, b: &Rc<dyn PlannedCalls>) -> bool {
    std::ptr::addr_eq(Rc::as_ptr(a), Rc::as_ptr(b))
}

/// Ranks whose runs are identical.
pub(super) struct Class<'a> {
    key: &'a RunKey,
    source: &'a dyn PlannedCalls,
    pub ranks: RankSet,
}

impl Class<'_> {
    /// The names the class covers: `(generation, first..end)`.
    pub fn span(&self) -> (u32, u64, u64) {
        let k = self.key;
        (k.generation, k.first, k.first + k.count)
    }

    /// The signature of the call the class made under `index` (inside its span).
    pub fn signature(&self, index: u64) -> (&[usize], &str, GroupCall) {
        let i = self.call(index);
        let slot = self.source.backend_slot(i);
        (
            self.source.ranks(i),
            &self.key.backends[&slot],
            GroupCall::NewGroup,
        )
    }

    /// The record of the class' lowest rank under `index`.
    pub fn record(&self, index: u64) -> GroupRecord {
        let (i, rank) = (self.call(index), self.ranks.min());
        let (ranks, backend, _) = self.signature(index);
        GroupRecord {
            rank,
            generation: self.key.generation,
            index,
            ranks: crate::ranks::of(ranks),
            backend: backend.to_string(),
            label: self.source.label(i, rank),
            step: self.key.step,
            line: self.key.line,
            call: GroupCall::NewGroup,
        }
    }

    fn call(&self, index: u64) -> usize {
        self.key.offset + (index - self.key.first) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::groups::{check, GroupLog};

    /// Calls over rank lists; call `i` passes backend `i % 2` ("gloo" / "xccl").
    struct Lists(Vec<Vec<usize>>);

    impl PlannedCalls for Lists {
        fn ranks(&self, i: usize) -> &[usize] {
            &self.0[i]
        }
        fn backend_slot(&self, i: usize) -> usize {
            i % 2
        }
        fn label(&self, i: usize, rank: usize) -> String {
            match self.0[i].contains(&rank) {
                true => format!("g{i}"),
                false => "unnamed".into(),
            }
        }
    }

    fn backend(i: usize) -> &'static str {
        ["gloo", "xccl"][i % 2]
    }

    /// Every rank's calls `(rank, name index, call index)` into a log of runs and as records.
    fn both(
        source: &Rc<dyn PlannedCalls>,
        calls: &[(usize, u64, usize)],
    ) -> (GroupLog, Vec<GroupRecord>) {
        let mut log = GroupLog::default();
        let mut recs = Vec::new();
        for (rank, index, call) in calls {
            let r = PlannedRecord {
                rank: *rank,
                name: (0, *index),
                source,
                call: *call,
                backend: backend(*call),
                step: 1,
                line: 7,
            };
            log.push_planned(&r);
            recs.push(r.record());
        }
        (log, recs)
    }

    fn lists() -> Rc<dyn PlannedCalls> {
        Rc::new(Lists(vec![
            vec![0, 1],
            vec![2, 3],
            vec![0, 2],
            vec![1, 3],
            vec![0, 1, 2, 3],
        ]))
    }

    #[test]
    fn identical_runs_agree_and_a_skipped_call_diverges_as_records_do_r18() {
        let source = lists();
        let all: Vec<_> = (0..4)
            .flat_map(|r| (0..5).map(move |c| (r, c as u64 + 1, c)))
            .collect();
        let (log, recs) = both(&source, &all);
        assert_eq!(log.check(), None);
        assert_eq!(check(&recs), None);
        // Rank 2 skips call 2: its names shift by one from there.
        let skipped: Vec<_> = all
            .iter()
            .filter(|(r, _, c)| !(*r == 2 && *c == 2))
            .map(|&(r, i, c)| (r, if r == 2 && c > 2 { i - 1 } else { i }, c))
            .collect();
        let (log, recs) = both(&source, &skipped);
        let d = log.check().expect("diverges");
        assert_eq!(Some(&d), check(&recs).as_ref());
        assert_eq!(
            (d.name.as_str(), d.majority.clone(), d.minority.clone()),
            ("3", vec![0, 1, 3], vec![2])
        );
        assert_eq!(
            (
                d.majority_call.label.as_str(),
                d.minority_call.label.as_str()
            ),
            ("g2", "unnamed")
        );
    }

    #[test]
    fn runs_and_records_of_one_call_are_one_side() {
        let source = lists();
        let mut log = GroupLog::default();
        // Rank 0 reports its calls as records, ranks 1-3 as runs; rank 3 makes another call 4.
        let mut recs = Vec::new();
        for rank in 0..4 {
            for c in 0..5 {
                let call = if rank == 3 && c == 4 { 3 } else { c };
                let r = PlannedRecord {
                    rank,
                    name: (0, c as u64 + 1),
                    source: &source,
                    call,
                    backend: backend(call),
                    step: 1,
                    line: 7,
                };
                recs.push(r.record());
                match rank {
                    0 => log.push(r.record()),
                    _ => log.push_planned(&r),
                }
            }
        }
        let d = log.check().expect("diverges");
        assert_eq!(Some(&d), check(&recs).as_ref());
        assert_eq!(
            (d.majority.clone(), d.minority.clone()),
            (vec![0, 1, 2], vec![3])
        );
        assert_eq!(d.majority_call.rank, 0);
        assert_eq!(d.minority_call.backend, "xccl");
    }

    /// Runs as comparable values.
    fn keys(runs: &Runs) -> Vec<(usize, RunKey)> {
        runs.runs.iter().map(|r| (r.rank, r.key.clone())).collect()
    }

    #[test]
    fn a_run_of_calls_at_once_is_the_calls_one_by_one() {
        let source = lists();
        let backends = [Some("gloo".to_string()), Some("xccl".to_string())];
        let (mut one, mut many) = (Runs::default(), Runs::default());
        // Rank 1: calls 0..5 in chunks 2 + 3; rank 3: 1 + 4, then a step's call again.
        for (rank, chunks) in [(1, vec![(0, 2), (2, 3)]), (3, vec![(0, 1), (1, 4), (0, 2)])] {
            let mut name = 10;
            for (first, count) in chunks {
                let rec = |call: usize, name: u64| PlannedRecord {
                    rank,
                    name: (0, name),
                    source: &source,
                    call,
                    backend: backend(call),
                    step: 1,
                    line: 7,
                };
                many.push_many(&rec(first, name), count, &backends);
                for k in 0..count {
                    one.push(&rec(first + k, name + k as u64));
                }
                name += count as u64;
            }
        }
        assert!(keys(&one) == keys(&many));
        assert_eq!(one.runs.len(), 3);
        // A backend that disagrees with the run's splits it where one push each would.
        let other = [Some("gloo".to_string()), Some("nccl".to_string())];
        let (mut one, mut many) = (Runs::default(), Runs::default());
        let rec = |call: usize, backend: &'static str| PlannedRecord {
            rank: 0,
            name: (0, call as u64),
            source: &source,
            call,
            backend,
            step: 1,
            line: 7,
        };
        for r in [&mut one, &mut many] {
            r.push(&rec(0, "gloo"));
            r.push(&rec(1, "xccl"));
        }
        many.push_many(&rec(2, "gloo"), 3, &other);
        for c in 2..5 {
            one.push(&rec(c, ["gloo", "nccl"][c % 2]));
        }
        assert!(keys(&one) == keys(&many));
        assert_eq!(one.runs.len(), 2);
    }
}
