//! Group-name consistency: torch names a new group from a counter every process increments
//! (c10d.md R18), so all ranks must make the same `new_group` calls in the same order. When one
//! rank makes another call (a skipped or swapped `new_group`, a rank-divergent start-up such as
//! sglang's Ulysses/Ring fallback), the same name stands for different groups on different ranks
//! from then on: gloo meshes wait for keys written under other names, xccl communicators pair
//! the wrong ranks. Nothing in torch reports this; this check names the first such call and the
//! ranks on each side.

use super::hang::ranges;
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
    /// The rank list passed, sorted.
    pub ranks: Vec<usize>,
    /// The backend string passed (or the default group's).
    pub backend: String,
    /// The scenario's handle for it (`as = ...`, sglang's `tp`, ...), or `unnamed`.
    pub label: String,
    pub step: usize,
    pub line: usize,
}

impl GroupRecord {
    fn signature(&self) -> (&[usize], &str) {
        (&self.ranks, &self.backend)
    }

    fn describe(&self) -> String {
        format!("{} {:?} on {}", self.label, self.ranks, self.backend)
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
        vec![
            format!(
                "group names diverge at new_group call #{} (group \"{}\"): the ranks made different calls",
                self.majority_call.index, self.name
            ),
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
    let mut by_name: BTreeMap<(u32, u64), Vec<&GroupRecord>> = BTreeMap::new();
    for r in records {
        by_name.entry((r.generation, r.index)).or_default().push(r);
    }
    by_name.into_values().find_map(|mut recs| {
        recs.sort_by_key(|r| r.rank);
        let mut sides: Vec<(Vec<usize>, &GroupRecord)> = Vec::new();
        for r in &recs {
            match sides
                .iter_mut()
                .find(|(_, c)| c.signature() == r.signature())
            {
                Some((ranks, _)) => ranks.push(r.rank),
                None => sides.push((vec![r.rank], r)),
            }
        }
        if sides.len() < 2 {
            return None;
        }
        let major = (0..sides.len())
            .max_by_key(|i| (sides[*i].0.len(), usize::MAX - i))
            .expect("two sides");
        let minor = (0..sides.len()).find(|i| *i != major).expect("two sides");
        Some(GroupDivergence {
            name: sides[major].1.index.to_string(),
            majority: sides[major].0.clone(),
            majority_call: sides[major].1.clone(),
            minority: sides[minor].0.clone(),
            minority_call: sides[minor].1.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rank: usize, index: u64, ranks: &[usize], label: &str) -> GroupRecord {
        GroupRecord {
            rank,
            generation: 0,
            index,
            ranks: ranks.to_vec(),
            backend: "gloo".into(),
            label: label.into(),
            step: 1,
            line: 10,
        }
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
        b.ranks = vec![0, 1, 2];
        b.generation = 1;
        a.generation = 0;
        assert_eq!(check(&[a, b]), None);
    }
}
