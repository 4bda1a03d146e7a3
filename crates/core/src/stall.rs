//! Deadlock analysis at a moment when no rank can make progress.
//!
//! For each stuck rank: the step, what it waits on, and for each awaited peer what that peer is
//! doing (finished, failed, stuck elsewhere, or never reached the step) — the "who is to blame"
//! that real runs only give after a 30-minute timeout, if at all.

use crate::diagnose::hang::RankAt;
use crate::observe::Observed;
use crate::outcome::RankEnd;
use crate::scenario::Scenario;
use crate::verdict::{Stall, Stuck};

/// Builds the stall report; `None` when some unfinished rank is not blocked in a wait.
pub fn analyse(s: &Scenario, o: &Observed, t_ms: u64) -> Option<Stall> {
    let mut stuck = Vec::new();
    let mut others = Vec::new();
    let states = rank_states(s, o);
    for r in 0..o.ends.len() {
        if o.ends[r].is_some() {
            continue;
        }
        match &o.waits[r] {
            Some(w) => stuck.push(Stuck {
                rank: r,
                step: w.step,
                wait: w.clone(),
                peers: crate::diagnose::hang::store_clients_missing(w, &states)
                    .unwrap_or_else(|| w.peers.clone())
                    .iter()
                    .map(|p| peer_state(s, o, *p))
                    .collect(),
            }),
            None => others.push(format!("rank {r}: not blocked (sleeping or between steps)")),
        }
    }
    if stuck.is_empty() || !others.is_empty() {
        return None;
    }
    Some(Stall {
        t_ms,
        stuck,
        others,
    })
}

/// "rank 3, which finished its program" and the like.
pub fn peer_state(s: &Scenario, o: &Observed, p: usize) -> String {
    let label = |step: usize| s.steps.get(step).map(|st| st.label()).unwrap_or_default();
    if p >= o.ends.len() {
        return format!("rank {p}, which does not exist in this world");
    }
    match (&o.ends[p], &o.waits[p], o.step[p]) {
        (Some((RankEnd::Completed, _)), _, _) => format!("rank {p}, which finished its program"),
        (Some((RankEnd::Failed { step, failure }, _)), _, _) => {
            format!("rank {p}, which failed in {}: {failure}", label(*step))
        }
        (None, Some(w), _) => format!("rank {p}, itself stuck in {}: {}", label(w.step), w.what),
        (None, None, Some(step)) => format!("rank {p}, last in {}", label(step)),
        (None, None, None) => format!("rank {p}, which has not started any step"),
    }
}

/// Where every rank is now, for the wait-for graph.
pub fn rank_states(s: &Scenario, o: &Observed) -> Vec<RankAt> {
    (0..o.ends.len())
        .map(|r| match (&o.ends[r], &o.waits[r]) {
            (Some((RankEnd::Completed, _)), _) => RankAt::Finished,
            (Some((RankEnd::Failed { step, .. }, _)), _) => RankAt::Failed {
                step: *step,
                line: s.steps[*step].loc.line,
                label: s.steps[*step].label(),
            },
            (None, Some(w)) => RankAt::Stuck {
                step: w.step,
                line: s.steps[w.step].loc.line,
                label: s.steps[w.step].label(),
                wait: w.clone(),
            },
            (None, None) => RankAt::Busy,
        })
        .collect()
}
