//! What a multi-node job's launchers tell each other, applied to this launcher's run: local
//! ranks' ends announced to the other nodes, and their ranks' ends, departures and losses
//! (relayed by node 0, crate::rdzv) taken into this node's watch state. Kept apart from the
//! launcher's own loop (launcher.rs) so each reads in one sitting.

use crate::rdzv::{self, Ctl, Mesh, Remote};
use crate::watchdog::State;
use scen_core::outcome::RankEnd;

/// Tells the other nodes' launchers of local ranks' ends (once each).
pub(crate) fn announce_ends(m: &mut Mesh, st: &State, local: &[usize]) {
    for &r in local {
        if let Some((end, _)) = &st.obs.ends[r] {
            let failed = match end {
                RankEnd::Completed => None,
                RankEnd::Failed { step, failure } => Some((*step, failure.clone())),
            };
            m.announce_end(r, failed);
        }
    }
}

/// Applies what another node's launcher said (node 0 relays it to the others). Returns whether
/// it was progress (anything but a heartbeat).
pub(crate) fn remote(st: &mut State, m: &mut Mesh, local: &[usize], r: Remote, t: u64) -> bool {
    let world = st.obs.ends.len();
    let theirs = |rank: &usize| *rank < world && !local.contains(rank);
    let gone = |st: &mut State, ranks: &[usize], text: &str| {
        for &rank in ranks.iter().filter(|r| theirs(r)) {
            if st.obs.ends[rank].is_none() {
                st.process_died(rank, rdzv::remote_failure(text.to_string()), t);
            }
        }
    };
    match r {
        Remote::Msg { from, ctl } => {
            if m.is_hub() && !matches!(ctl, Ctl::Beat) {
                m.broadcast(&ctl, Some(from));
            }
            match ctl {
                Ctl::End { rank, failed } if theirs(&rank) => {
                    if st.obs.ends[rank].is_none() {
                        st.obs.waits[rank] = None;
                        let end = match failed {
                            None => RankEnd::Completed,
                            Some((step, failure)) => {
                                st.died.push(rank);
                                RankEnd::Failed { step, failure }
                            }
                        };
                        st.obs.ends[rank] = Some((end, t));
                    }
                    true
                }
                Ctl::Gone { ranks, why, .. } => {
                    gone(st, &ranks, &why);
                    true
                }
                Ctl::Bye {
                    node,
                    unfinished,
                    why,
                } => {
                    if node == from {
                        m.said_bye(node);
                    }
                    let text = format!("node {node}'s launcher ended this rank unfinished: {why}");
                    gone(st, &unfinished, &text);
                    true
                }
                _ => false,
            }
        }
        Remote::Lost { node, why } => {
            if m.has_said_bye(node) {
                return false;
            }
            let ranks: Vec<usize> = (0..world)
                .filter(|r| m.node_of(*r) == node && st.obs.ends[*r].is_none())
                .collect();
            let text = format!(
                "node {node} (job {}) was lost: {why}; its launcher died or the network failed (its ranks die with their launcher)",
                m.label
            );
            tracing::warn!("launcher: {text}");
            st.notes
                .push(format!("{text}: ranks {ranks:?} counted as failed"));
            if m.is_hub() {
                m.broadcast(
                    &Ctl::Gone {
                        node,
                        ranks: ranks.clone(),
                        why: text.clone(),
                    },
                    None,
                );
            }
            gone(st, &ranks, &text);
            true
        }
    }
}
