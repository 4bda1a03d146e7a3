//! Every rank's steps as one program: ranks whose next steps are equal share a `[[step]]`
//! (written with `on` unless every rank runs it); a rank that diverges gets its own steps.
//! Each rank's steps keep their order, which is all a scenario's program order means for it
//! (a rank runs the steps that select it, in file order), so any merge is the same program;
//! this one keeps shared steps shared: a rank's own steps come before a step that other
//! ranks, further on, also reach.

use super::steps::StepDesc;
use std::collections::BTreeMap;

/// How far ahead a rank's remaining steps are searched for a step another rank is at.
const LOOKAHEAD: usize = 256;

/// One written step and the ranks that run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub step: StepDesc,
    pub ranks: Vec<usize>,
}

/// The merged steps, and for each rank the merged index of each of its own steps.
pub fn merge(
    per_rank: &BTreeMap<usize, Vec<StepDesc>>,
) -> (Vec<Merged>, BTreeMap<usize, Vec<usize>>) {
    let mut pos: BTreeMap<usize, usize> = per_rank.keys().map(|r| (*r, 0)).collect();
    let mut out: Vec<Merged> = Vec::new();
    let mut index: BTreeMap<usize, Vec<usize>> = per_rank.keys().map(|r| (*r, vec![])).collect();
    loop {
        // Candidates: the ranks at each distinct next step (BTreeMap: a fixed order).
        let mut at: BTreeMap<&StepDesc, Vec<usize>> = BTreeMap::new();
        for (r, steps) in per_rank {
            if let Some(s) = steps.get(pos[r]) {
                at.entry(s).or_default().push(*r);
            }
        }
        if at.is_empty() {
            break;
        }
        // Ready: no rank outside the candidate has its step still ahead of it.
        let ahead = |s: &StepDesc, ranks: &[usize]| {
            per_rank.iter().any(|(r, steps)| {
                !ranks.contains(r)
                    && steps[pos[r].min(steps.len())..]
                        .iter()
                        .take(LOOKAHEAD)
                        .any(|x| x == s)
            })
        };
        let best = |ready: bool| {
            at.iter()
                .filter(|(s, rs)| !ready || !ahead(s, rs))
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.1[0].cmp(&a.1[0])))
                .map(|(s, rs)| ((*s).clone(), rs.clone()))
        };
        let Some((step, ranks)) = best(true).or_else(|| best(false)) else {
            break;
        };
        for r in &ranks {
            index.get_mut(r).expect("rank").push(out.len());
            *pos.get_mut(r).expect("rank") += 1;
        }
        out.push(Merged { step, ranks });
    }
    (out, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(op: &str) -> StepDesc {
        StepDesc {
            op: op.into(),
            fields: vec![],
            at: "p.py:1".into(),
            notes: vec![],
        }
    }

    #[test]
    fn shared_steps_stay_shared_and_divergent_ones_are_per_rank() {
        let mut per = BTreeMap::new();
        per.insert(0, vec![s("init"), s("send"), s("barrier")]);
        per.insert(1, vec![s("init"), s("recv"), s("barrier")]);
        per.insert(2, vec![s("init"), s("barrier")]);
        let (m, idx) = merge(&per);
        let got: Vec<(String, Vec<usize>)> = m
            .iter()
            .map(|x| (x.step.op.clone(), x.ranks.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("init".into(), vec![0, 1, 2]),
                ("send".into(), vec![0]),
                ("recv".into(), vec![1]),
                ("barrier".into(), vec![0, 1, 2]),
            ]
        );
        assert_eq!(idx[&1], vec![0, 2, 3]);
    }

    #[test]
    fn every_rank_keeps_its_order_when_the_orders_cross() {
        let mut per = BTreeMap::new();
        per.insert(0, vec![s("a"), s("b")]);
        per.insert(1, vec![s("b"), s("a")]);
        let (m, idx) = merge(&per);
        for (r, steps) in &per {
            let mine: Vec<&StepDesc> = idx[r].iter().map(|i| &m[*i].step).collect();
            assert_eq!(mine, steps.iter().collect::<Vec<_>>());
            assert!(idx[r].windows(2).all(|w| w[0] < w[1]));
        }
    }
}
