//! torchrun's elastic agent as every mode models it (`[world] launcher = "torchrun"`): the
//! simulator and scen's hw launcher both play the agent, so its rules live here, once
//! (torch/distributed/elastic/agent/server/api.py `_invoke_run`, local_elastic_agent.py).
//!
//! The agent hosts the job's TCPStore at MASTER_PORT before any worker starts
//! (TORCHELASTIC_USE_AGENT_STORE=True), checks its workers every `monitor_interval` (0.1 s) and,
//! once one has exited failed, stops every worker still running (SIGTERM) and ends the job
//! (max_restarts = 0, torchrun's default).

use crate::outcome::{Failure, Killer, RankEnd, SIGTERM};
use crate::scenario::Scenario;

/// The agent's `monitor_interval`: how often it looks at its workers' exits.
pub const MONITOR_INTERVAL_MS: u64 = 100;

/// The store's port as the launcher gives it: rank 0's MASTER_PORT, else torchrun's 29500.
pub fn agent_store_port(s: &Scenario) -> u16 {
    s.world
        .ranks
        .first()
        .and_then(|r| r.env.get("MASTER_PORT"))
        .and_then(|p| p.parse().ok())
        .unwrap_or(29500)
}

/// How a worker the agent stopped ends: SIGTERM, after rank `failed` failed.
pub fn stopped_by_agent(failed: usize) -> Failure {
    Failure::Killed {
        signal: SIGTERM,
        by: Killer::Agent { after_rank: failed },
    }
}

/// Whether the agent's stop decides a running worker's verdict, given how its program ended
/// so far: one still in its program, and one that completed or called `sys.exit(code)` and is
/// still in its teardown (its exit status is the SIGTERM, and torchrun lists it failed so:
/// real PyTorch 2.15, userpath 7/224). One that raised keeps its exception.
pub fn stop_decides(end: Option<&RankEnd>) -> bool {
    matches!(
        end,
        None | Some(RankEnd::Completed)
            | Some(RankEnd::Failed {
                failure: Failure::Exited { .. },
                ..
            })
    )
}

/// When the agent acts on a failed worker's exit (`[world] agent_check_ms`, `agent_stop_ms`):
/// its check sees the exit `check_ms` after the earliest one (anywhere within its interval; by
/// default a whole [`MONITOR_INTERVAL_MS`], the latest) and names the failure, and its SIGTERM
/// ends the workers still running `stop_ms` after that check (default at once). A recording
/// writes both as its run measured them: 0-29 ms and 37-64 ms in user-path 7/980, 7/1013,
/// 7/523, 7/358 and 7/863 (torch 2.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentTiming {
    pub check_ms: u64,
    pub stop_ms: u64,
}

impl Default for AgentTiming {
    fn default() -> Self {
        AgentTiming {
            check_ms: MONITOR_INTERVAL_MS,
            stop_ms: 0,
        }
    }
}

/// When the agent stops the others: its check after the earliest failed worker's exit, then
/// its stop ([`AgentTiming`]). `exits` are (rank, exit time in ms) of the workers that exited
/// failed. Returns the rank it names and when its stop takes effect. The rank it
/// names is the lowest of those whose exit that check sees: the check records every failed
/// worker at once, stamped with the same second, and the root cause is the first of the
/// earliest stamp in rank order (elastic/multiprocessing/api.py `_poll`,
/// errors/__init__.py `get_first_failure`).
pub fn stop_after(
    exits: impl IntoIterator<Item = (usize, u64)>,
    timing: AgentTiming,
) -> Option<(usize, u64)> {
    let exits: Vec<(usize, u64)> = exits.into_iter().collect();
    let first = exits.iter().map(|(_, t)| *t).min()?;
    let check = first + timing.check_ms;
    let root = exits
        .iter()
        .filter(|(_, t)| *t <= check)
        .map(|(r, _)| *r)
        .min()?;
    Some((root, check + timing.stop_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_failed_exit_decides_and_the_check_names_the_lowest_rank() {
        assert_eq!(stop_after([], AgentTiming::default()), None);
        assert_eq!(
            stop_after([(3, 500), (1, 400), (2, 400)], AgentTiming::default()),
            Some((1, 500))
        );
        // Running, or completed and in its teardown: the stop decides; raised: it keeps that.
        assert!(stop_decides(None) && stop_decides(Some(&RankEnd::Completed)));
        assert!(!stop_decides(Some(&RankEnd::raised(2, "ValueError", "x"))));
        // sys.exit(3), still in its teardown: the stop's SIGTERM is its exit status.
        let exited = RankEnd::Failed {
            step: 2,
            failure: crate::outcome::Failure::Exited { code: Some(3) },
        };
        assert!(stop_decides(Some(&exited)));
        // A lower rank that fails after the earliest, before the check, is the one named.
        assert_eq!(
            stop_after([(2, 10), (1, 60), (0, 200)], AgentTiming::default()),
            Some((1, 110))
        );
        // A recorded check 21 ms after the first exit names only what it saw, and its stop
        // takes effect 41 ms later (7/523).
        let t = AgentTiming {
            check_ms: 21,
            stop_ms: 41,
        };
        assert_eq!(stop_after([(2, 10), (1, 45)], t), Some((2, 72)));
        assert_eq!(
            stopped_by_agent(1).text(),
            "SIGTERM: torchrun stopped the worker group after rank 1 failed (signal 15)"
        );
    }
}
