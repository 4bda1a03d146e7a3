//! Group-name consistency: torch names a new group from a counter every process increments
//! (docs/rules/c10d.md#r18), so all ranks must make the same `new_group` calls in the same order. When one
//! rank makes another call (a skipped or swapped `new_group`, a rank-divergent start-up such as
//! sglang's Ulysses/Ring fallback), the same name stands for different groups on different ranks
//! from then on: gloo meshes wait for keys written under other names, xccl communicators pair
//! the wrong ranks. Nothing in torch reports this; this check names the first such call and the
//! ranks on each side.

use super::hang::ranges;
use super::planned::{PlannedRecord, Runs};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One `new_group` call of one rank that took a counter name (members and non-members alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub rank: usize,
    /// Times this rank reset its counter (`destroy_process_group()`); names restart after it.
    pub generation: u32,
    /// The counter value the call took; the group's name.
    pub index: u64,
    /// The rank list passed, sorted (shared by the thread's ranks: `crate::ranks`).
    pub ranks: crate::ranks::Ranks,
    /// The backend string passed (or the default group's).
    pub backend: String,
    /// The scenario's handle for it (`as = ...`, sglang's `tp`, ...), or `unnamed`.
    pub label: String,
    pub step: usize,
    pub line: usize,
    /// Which call took the counter value.
    #[serde(default)]
    pub call: GroupCall,
}

/// The calls that take a value of the group counter (R19, R40): a counter-named `new_group`, a
/// `use_local_synchronization` one (hashed with the counter, on its members only) and
/// `split_group` (hashed with it, on every rank that calls it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupCall {
    #[default]
    NewGroup,
    LocalSyncNewGroup,
    /// `ranks`: every list's ranks, as global ranks, in the call's order.
    SplitGroup,
}

impl GroupRecord {
    fn signature(&self) -> (&[usize], &str, GroupCall) {
        (&self.ranks, &self.backend, self.call)
    }

    fn describe(&self) -> String {
        let call = match self.call {
            GroupCall::NewGroup => "",
            GroupCall::LocalSyncNewGroup => " (use_local_synchronization)",
            GroupCall::SplitGroup => " (split_group of these ranks)",
        };
        format!("{} {:?} on {}{call}", self.label, self.ranks, self.backend)
    }
}

/// The first group name that means different groups on different ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupDivergence {
    pub name: String,
    /// The largest set of ranks agreeing on the call, and one record of theirs.
    pub majority: Vec<usize>,
    pub majority_call: GroupRecord,
    /// Another set and its call (the first rank that disagrees, and the ranks that agree with it).
    pub minority: Vec<usize>,
    pub minority_call: GroupRecord,
}

impl GroupDivergence {
    pub fn lines(&self, file: &str) -> Vec<String> {
        let side = |ranks: &[usize], r: &GroupRecord| {
            let who = if ranks.len() == 1 {
                format!("rank {}", ranks[0])
            } else {
                format!("ranks {}", ranges(ranks))
            };
            format!(
                "  {who}: {} ({file}:{}, step #{})",
                r.describe(),
                r.line,
                r.step + 1
            )
        };
        let counter_named = [&self.majority_call, &self.minority_call]
            .iter()
            .all(|c| c.call == GroupCall::NewGroup);
        let head = if counter_named {
            format!(
                "group names diverge at new_group call #{} (group \"{}\"): the ranks made different calls",
                self.majority_call.index, self.name
            )
        } else {
            // A hashed name (use_local_synchronization, split_group) takes the counter too.
            format!(
                "group names diverge at group counter {}: the ranks made different calls (new_group, split_group and use_local_synchronization groups each take the counter's value)",
                self.majority_call.index
            )
        };
        vec![
            head,
            side(&self.majority, &self.majority_call),
            side(&self.minority, &self.minority_call),
            format!(
                "  torch names groups from a counter every rank increments (R18): from this call on the same name is a different group on {} ranks, so gloo meshes and xccl communicators pair the wrong calls",
                if self.minority.len() == 1 { "these" } else { "these sets of" }
            ),
        ]
    }
}

/// The first `(generation, index)` at which ranks' calls differ, if any.
pub fn check(records: &[GroupRecord]) -> Option<GroupDivergence> {
    let mut log = GroupLog::default();
    for r in records {
        log.push(r.clone());
    }
    log.check()
}

/// Every rank's counter-named `new_group` calls, kept per name as the distinct calls made under
/// it and the ranks that made each. A start-up makes O(W) calls on each of W ranks
/// (sglang: every rank calls new_group for every group); storing each record was W^2 records
/// (issue 11: 24 M at 4096 ranks). A call reported as a record is one entry (and a bitset) per
/// name while the ranks agree; a planned call (sglang's) extends its rank's run
/// (`planned.rs`): O(1) per call, no state per name.
#[derive(Debug, Default)]
pub struct GroupLog {
    names: BTreeMap<(u32, u64), Vec<Side>>,
    runs: Runs,
}

/// One distinct call under a name: the record of the lowest rank that made it, and its ranks.
#[derive(Debug, Clone)]
struct Side {
    call: GroupRecord,
    ranks: RankSet,
}

impl GroupLog {
    /// Adds one rank's call.
    pub fn push(&mut self, rec: GroupRecord) {
        self.push_ref(&rec);
    }

    /// Adds one rank's planned call (its run grows by one).
    pub fn push_planned(&mut self, rec: &PlannedRecord) {
        self.runs.push(rec);
    }

    /// [`GroupLog::push_planned`] of `count` consecutive calls (see `Probe::planned_groups`).
    pub fn push_planned_many(
        &mut self,
        rec: &PlannedRecord,
        count: usize,
        backends: &[Option<String>],
    ) {
        self.runs.push_many(rec, count, backends);
    }

    /// Adds one rank's call, copying the record only where it starts or leads a side.
    pub fn push_ref(&mut self, rec: &GroupRecord) {
        let sides = self.names.entry((rec.generation, rec.index)).or_default();
        match sides
            .iter_mut()
            .find(|s| s.call.signature() == rec.signature())
        {
            Some(side) => {
                side.ranks.insert(rec.rank);
                if rec.rank < side.call.rank {
                    side.call = rec.clone();
                }
            }
            None => {
                let mut ranks = RankSet::default();
                ranks.insert(rec.rank);
                sides.push(Side {
                    call: rec.clone(),
                    ranks,
                });
            }
        }
    }

    /// The first name that means different groups on different ranks, if any: the largest
    /// set of agreeing ranks and the first other set (sets ordered by their lowest rank).
    /// Planned runs count as the records they stand for; a name only one class of runs
    /// covers (and no record) agrees by construction and costs nothing.
    pub fn check(&self) -> Option<GroupDivergence> {
        let classes = self.runs.classes();
        let mut names: Vec<(u32, u64)> = self.names.keys().copied().collect();
        for c in &classes {
            let (g, a, b) = c.span();
            names.extend((a..b).map(|i| (g, i)));
        }
        names.sort_unstable();
        names.dedup();
        let mut order: Vec<usize> = (0..classes.len()).collect();
        order.sort_by_key(|i| {
            let (g, a, _) = classes[*i].span();
            (g, a)
        });
        let (mut next, mut active) = (0, Vec::new());
        for name in names {
            while let Some(i) = order.get(next).filter(|i| {
                let (g, a, _) = classes[**i].span();
                (g, a) <= name
            }) {
                active.push(*i);
                next += 1;
            }
            active.retain(|i| {
                let (g, _, b) = classes[*i].span();
                name < (g, b)
            });
            let explicit = self.names.get(&name).map_or(&[][..], |s| &s[..]);
            if explicit.len() + active.len() < 2 {
                continue;
            }
            let mut sigs: Vec<(&[usize], &str, GroupCall)> =
                explicit.iter().map(|s| s.call.signature()).collect();
            sigs.extend(active.iter().map(|i| classes[*i].signature(name.1)));
            sigs.sort_unstable();
            sigs.dedup();
            if sigs.len() < 2 {
                continue;
            }
            let mut sides = explicit.to_vec();
            for c in active.iter().map(|i| &classes[*i]) {
                match sides
                    .iter_mut()
                    .find(|s| s.call.signature() == c.signature(name.1))
                {
                    Some(side) => {
                        side.ranks.union_with(&c.ranks);
                        if c.ranks.min() < side.call.rank {
                            side.call = c.record(name.1);
                        }
                    }
                    None => sides.push(Side {
                        call: c.record(name.1),
                        ranks: c.ranks.clone(),
                    }),
                }
            }
            return divergence(&sides);
        }
        None
    }
}

/// The divergence among a name's sides (two or more).
fn divergence(sides: &[Side]) -> Option<GroupDivergence> {
    let mut order: Vec<&Side> = sides.iter().collect();
    order.sort_by_key(|s| s.ranks.min());
    let major = (0..order.len()).max_by_key(|i| (order[*i].ranks.len(), usize::MAX - i))?;
    let minor = (0..order.len()).find(|i| *i != major)?;
    Some(GroupDivergence {
        name: order[major].call.index.to_string(),
        majority: order[major].ranks.to_vec(),
        majority_call: order[major].call.clone(),
        minority: order[minor].ranks.to_vec(),
        minority_call: order[minor].call.clone(),
    })
}

/// A set of ranks as a bitset: ranks of a large world arrive in scheduling order (node by
/// node), so an insert must not depend on their order.
#[derive(Debug, Default, Clone)]
pub(super) struct RankSet(Vec<u64>);

impl RankSet {
    pub(super) fn insert(&mut self, r: usize) {
        let (word, bit) = (r / 64, r % 64);
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        self.0[word] |= 1 << bit;
    }

    pub(super) fn union_with(&mut self, other: &RankSet) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (w, o) in self.0.iter_mut().zip(&other.0) {
            *w |= o;
        }
    }

    pub(super) fn min(&self) -> usize {
        self.0
            .iter()
            .position(|w| *w != 0)
            .map_or(usize::MAX, |i| i * 64 + self.0[i].trailing_zeros() as usize)
    }

    fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    fn to_vec(&self) -> Vec<usize> {
        (0..self.0.len() * 64)
            .filter(|r| self.0[r / 64] & (1 << (r % 64)) != 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rank: usize, index: u64, ranks: &[usize], label: &str) -> GroupRecord {
        GroupRecord {
            rank,
            generation: 0,
            index,
            ranks: ranks.into(),
            backend: "gloo".into(),
            label: label.into(),
            step: 1,
            line: 10,
            call: GroupCall::NewGroup,
        }
    }

    #[test]
    fn rank_sets_hold_ranks_inserted_in_any_order() {
        let mut s = RankSet::default();
        for r in [5, 3, 4, 9, 0, 1, 8, 7, 4, 2] {
            s.insert(r);
        }
        assert_eq!(s.to_vec(), vec![0, 1, 2, 3, 4, 5, 7, 8, 9]);
        assert_eq!((s.min(), s.len()), (0, 9));
        s.insert(6);
        s.insert(130);
        assert_eq!((s.min(), s.len()), (0, 11));
        assert_eq!(s.to_vec().last(), Some(&130));
    }

    #[test]
    fn identical_call_sequences_do_not_diverge_r18() {
        let recs: Vec<GroupRecord> = (0..4)
            .flat_map(|r| [rec(r, 1, &[0, 1], "a"), rec(r, 2, &[2, 3], "b")])
            .collect();
        assert_eq!(check(&recs), None);
    }

    #[test]
    fn a_skipped_call_is_named_at_the_first_shifted_name_r18() {
        // Rank 3 skips "a": its call #1 is "b"; ranks 0-2 made "a" #1 and "b" #2.
        let mut recs: Vec<GroupRecord> = (0..3)
            .flat_map(|r| [rec(r, 1, &[0, 1], "a"), rec(r, 2, &[2, 3], "b")])
            .collect();
        recs.push(rec(3, 1, &[2, 3], "b"));
        let d = check(&recs).expect("diverges");
        assert_eq!(d.name, "1");
        assert_eq!(d.majority, vec![0, 1, 2]);
        assert_eq!(d.minority, vec![3]);
        assert_eq!(d.minority_call.label, "b");
        let text = d.lines("x.toml").join("\n");
        assert!(
            text.contains("rank 3: b [2, 3] on gloo (x.toml:10"),
            "{text}"
        );
        assert!(text.contains("ranks 0-2: a [0, 1] on gloo"), "{text}");
    }

    #[test]
    fn a_counter_reset_starts_a_new_generation() {
        let mut a = rec(0, 1, &[0, 1], "a");
        let mut b = rec(1, 1, &[0, 1], "b2");
        b.ranks = vec![0, 1, 2].into();
        b.generation = 1;
        a.generation = 0;
        assert_eq!(check(&[a, b]), None);
    }
}
