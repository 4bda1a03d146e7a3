//! The watchdog oneCCL lacks: decides from what the ranks reported when nothing more can
//! happen, and what each unfinished rank's end is then.
//!
//! A run is over when every unfinished rank waits and each wait is hopeless: past its deadline
//! (+ grace); or with no deadline and a peer that has ended without completing the call, or
//! waits in another call where neither has completed the other's (core's `stall_evidence`); or
//! a connect to a TCPStore whose host process is dead (c10d would retry until its timeout, 30
//! min by default, and then raise the connect-timeout error: the launcher raises it at once). A
//! rank whose process died inside a call is that call's culprit: its peers still in the same
//! call are victims, not something the others wait for.
//!
//! Evidence, not silence, decides: a rank still inside a call every peer of it has completed
//! is slow (a loaded host), not stuck, however long it has been quiet; only when it has not
//! returned [`RETURN_LIMIT_MS`] after the last of them (or, alone in the call, after it began)
//! is it stuck inside the device library.

use crate::probe::Msg;
use scen_core::diagnose::record::CallState;
use scen_core::observe::Observed;
use scen_core::outcome::{Failure, RankEnd};
use scen_core::probe::Fact;
use scen_core::scenario::Scenario;
use scen_core::stall;
use scen_core::stall_evidence;
use scen_core::trace::{Event, EventKind, Wait, WaitOn};
use std::collections::BTreeMap;

/// Extra time a wait gets past its deadline before the launcher enforces it.
pub const DEADLINE_GRACE_MS: u64 = 1_000;

/// How long a rank may take to return from a call every peer of it has completed (alone in
/// it: since it began) before it counts as stuck inside the device library. A loaded host
/// delays a return by seconds (issue 32 saw > 1 s); a real library hang exceeds any bound.
pub const RETURN_LIMIT_MS: u64 = 30_000;

/// What the launcher has heard, as core's observation (so core's stall analysis applies).
pub struct State {
    pub obs: Observed,
    /// Ranks whose end the watchdog decided (a deadline passed inside the device library).
    pub forced: Vec<usize>,
    /// Ranks whose process died (the launcher saw its exit) without reporting an end.
    pub died: Vec<usize>,
    /// TCPStore servers: port -> the rank whose process serves it.
    pub store_hosts: BTreeMap<u16, usize>,
    pub notes: Vec<String>,
}

impl State {
    pub fn new(world: usize, notes: Vec<String>) -> State {
        State {
            obs: Observed::new(world),
            forced: vec![],
            died: vec![],
            store_hosts: BTreeMap::new(),
            notes,
        }
    }

    /// A rank's process ended at `t_ms` without reporting how its program ended (the launcher
    /// counts that as progress on its watch).
    pub fn process_died(&mut self, rank: usize, failure: Failure, t_ms: u64) {
        let o = &mut self.obs;
        let step = o.waits[rank]
            .as_ref()
            .map(|w| w.step)
            .or(o.step[rank])
            .unwrap_or(0);
        o.ends[rank] = Some((RankEnd::Failed { step, failure }, t_ms));
        self.died.push(rank);
        // The call it was in ended with it.
        end_open_calls(o, rank, t_ms);
    }
}

impl State {
    /// The launcher raises `err` for rank `r`, waiting in `step`, at `t_ms` (what c10d would
    /// raise there, later): its end, the trace's error, and the call it was in ends failed, as
    /// its own record would have said.
    pub fn force_end(&mut self, r: usize, step: usize, err: Failure, t_ms: u64) {
        self.obs.trace.events.push(Event {
            t_ms,
            rank: Some(r),
            step: Some(step),
            kind: EventKind::Error,
            text: err.text(),
            tag: None,
        });
        self.obs.ends[r] = Some((RankEnd::Failed { step, failure: err }, t_ms));
        self.obs.waits[r] = None;
        self.forced.push(r);
        end_open_calls(&mut self.obs, r, t_ms);
    }
}

pub fn end_open_calls(o: &mut Observed, rank: usize, t_ms: u64) {
    for c in o.calls.iter_mut() {
        if c.rank == rank && c.state == CallState::Started {
            c.state = CallState::Failed;
            c.t_end_ms = Some(t_ms);
            c.t_end_us = Some(t_ms.saturating_mul(1000));
        }
    }
}

pub fn absorb(st: &mut State, m: Msg) {
    match m {
        Msg::Hello { .. } => {}
        Msg::Event(e) => st.obs.record_event(e),
        Msg::Wait { rank, wait } => {
            if rank < st.obs.waits.len() {
                st.obs.waits[rank] = wait;
            }
        }
        Msg::End { rank, failed, t_ms } => {
            if rank < st.obs.ends.len() {
                st.obs.waits[rank] = None;
                let end = match failed {
                    None => RankEnd::Completed,
                    Some((step, failure)) => RankEnd::Failed { step, failure },
                };
                st.obs.ends[rank] = Some((end, t_ms));
            }
        }
        Msg::Call(rec) => st.obs.record_call(*rec),
        Msg::Group(rec) => st.obs.groups.push(rec),
        Msg::Fact { rank, fact } => {
            if let Fact::StoreServer { port } = fact {
                st.store_hosts.insert(port, rank);
            }
            st.obs.facts.push((rank, fact));
        }
        Msg::Note { text, .. } => {
            if !st.notes.contains(&text) {
                st.notes.push(text);
            }
        }
    }
}

/// Can nothing more happen? Every unfinished local rank waits, and each wait is hopeless
/// (module comment). If so, ends the ranks whose wait raises an error then, and records the stall.
pub fn stalled(s: &Scenario, st: &mut State, local: &[usize], t: u64) -> bool {
    let open: Vec<usize> = local
        .iter()
        .copied()
        .filter(|r| st.obs.ends[*r].is_none())
        .collect();
    if open.is_empty() || !open.iter().all(|r| hopeless(st, *r, t)) {
        return false;
    }
    note_stuck_returns(st, &open, t);
    blame_the_dead(st, &open);
    let o = &st.obs;
    let found = stall::analyse(s, o, t);
    let at_stall = (o.calls.clone(), stall::rank_states(s, o), t);
    // Waits past their deadline: the real process raises the timeout error there (blocking
    // wait); the device library cannot, so the launcher does it for the rank.
    for r in open {
        let w = st.obs.waits[r].clone().expect("waits");
        let (Some(d), Some(err)) = (w.deadline_ms, w.timeout_error.clone()) else {
            continue;
        };
        let at_ms = match dead_store_host(st, &w) {
            Some(host) if t < d => {
                tracing::warn!(
                    rank = r,
                    step = w.step + 1,
                    "watchdog: rank {r} connects to the TCPStore of dead rank {host}: raising {err:?} for it now"
                );
                st.notes.push(format!(
                    "rank {r}: its TCPStore's host, rank {host}, is dead: c10d would retry the connect until its timeout expired and then raise {err:?}; the launcher raised it now"
                ));
                t
            }
            _ => {
                tracing::warn!(
                    rank = r,
                    step = w.step + 1,
                    deadline_ms = d,
                    "watchdog: rank {r} is past its deadline in a wait the device library cannot time out: raising {err:?} for it"
                );
                d
            }
        };
        st.force_end(r, w.step, err, at_ms);
    }
    st.obs.first_stall_calls.get_or_insert(at_stall);
    if let Some(stall) = found {
        let ranks: Vec<String> = stall.stuck.iter().map(|x| x.rank.to_string()).collect();
        tracing::warn!(
            t_ms = t,
            "watchdog: stall: no rank can make progress; stuck ranks [{}]: ending the run",
            ranks.join(", ")
        );
        st.notes.push(format!(
            "stall: no rank can make progress; stuck ranks [{}] (the launcher's watchdog ends the run)",
            ranks.join(", ")
        ));
        st.obs.first_stall.get_or_insert_with(|| stall.clone());
        st.obs.final_stall = Some(stall);
    }
    true
}

/// Can rank `r`'s wait never end by itself before its deadline?
fn hopeless(st: &State, r: usize, t: u64) -> bool {
    let o = &st.obs;
    let Some(w) = &o.waits[r] else { return false };
    if let Some(since) = stall_evidence::returning(o, r, w) {
        // Only its own return is left: slow, not stuck, unless it never comes.
        return t >= since + RETURN_LIMIT_MS;
    }
    match w.deadline_ms {
        Some(d) => t >= d + DEADLINE_GRACE_MS || dead_store_host(st, w).is_some(),
        None => w
            .peers
            .iter()
            .any(|p| stall_evidence::peer(o, r, w, *p).hopeless()),
    }
}

/// Says which of the stuck ranks never returned from a call only they were still in.
fn note_stuck_returns(st: &mut State, open: &[usize], t: u64) {
    for &r in open {
        let o = &st.obs;
        let Some(w) = &o.waits[r] else { continue };
        let Some(since) = stall_evidence::returning(o, r, w) else {
            continue;
        };
        let call = stall_evidence::open_call(o, r, w)
            .map(|c| c.call_name())
            .unwrap_or_else(|| w.what.clone());
        let after = if w.peers.is_empty() {
            "it began (no other rank is in it)"
        } else {
            "every other rank in it completed it"
        };
        let secs = (t - since.min(t)) / 1_000;
        tracing::warn!(
            rank = r,
            "watchdog: rank {r} has not returned from {call} {secs} s after {after}"
        );
        st.notes.push(format!(
            "rank {r} has not returned from {call} {secs} s after {after}: stuck inside the device library (the watchdog allows {} s)",
            RETURN_LIMIT_MS / 1_000
        ));
    }
}

/// For a wait connecting to a TCPStore: the rank that served it, if its process has died.
fn dead_store_host(st: &State, w: &Wait) -> Option<usize> {
    let WaitOn::StoreConnect { port, .. } = &w.on else {
        return None;
    };
    let host = *st.store_hosts.get(port)?;
    st.died.contains(&host).then_some(host)
}

/// A rank whose process died inside a call is what its peers in that call wait for; the peers
/// still waiting in the same call with them are not (they would go on if it had not died).
fn blame_the_dead(st: &mut State, open: &[usize]) {
    let o = &st.obs;
    let mut narrowed = Vec::new();
    for &r in open {
        let Some(w) = &o.waits[r] else { continue };
        if !w.peers.iter().any(|p| st.died.contains(p)) {
            continue;
        }
        let co_waiting = |p: usize| stall_evidence::peer(o, r, w, p) == stall_evidence::Peer::With;
        let (with_me, peers): (Vec<usize>, Vec<usize>) =
            w.peers.iter().copied().partition(|p| co_waiting(*p));
        if !with_me.is_empty() {
            narrowed.push((r, peers, with_me));
        }
    }
    for (r, peers, with_me) in narrowed {
        if let Some(w) = st.obs.waits[r].as_mut() {
            w.what = format!(
                "{} (ranks {with_me:?} wait in it too; it cannot finish without rank(s) {peers:?})",
                w.what
            );
            w.peers = peers;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scen_core::diagnose::record::CallRecord;
    use scen_core::scenario::parse;
    use scen_core::trace::Dir;

    fn timed_out() -> Failure {
        Failure::Raised {
            exception: "RuntimeError".into(),
            message: "timed out".into(),
        }
    }

    fn sigkill() -> Failure {
        Failure::process_exit(None, Some(9))
    }

    fn scenario() -> Scenario {
        parse(
            "[world]\nranks_per_node = 3\nplatform = \"xpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\n[[step]]\nop = \"all_reduce\"\nfill = \"1\"\n",
            "t.toml",
            "t",
        )
        .expect("parses")
    }

    fn wait(seq: u64, peers: Vec<usize>, deadline_ms: Option<u64>) -> Wait {
        Wait {
            step: 1,
            on: WaitOn::Transfer { dir: Dir::Recv },
            what: format!("all_reduce #{seq}"),
            group: Some("WORLD (0)".into()),
            seq: Some(seq),
            peers,
            since_ms: 0,
            deadline_ms,
            timeout_error: deadline_ms.map(|_| timed_out()),
        }
    }

    fn state() -> State {
        let mut st = State::new(3, vec![]);
        st.obs.step = vec![Some(1); 3];
        st
    }

    #[test]
    fn ranks_in_the_same_call_with_live_peers_are_not_a_stall() {
        let s = scenario();
        let mut st = state();
        for r in 0..3 {
            let peers = (0..3).filter(|p| *p != r).collect();
            st.obs.waits[r] = Some(wait(2, peers, None));
        }
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 10_000));
    }

    #[test]
    fn a_dead_peer_makes_every_waiting_rank_hopeless() {
        let s = scenario();
        let mut st = state();
        st.obs.ends[2] = Some((
            RankEnd::Failed {
                step: 1,
                failure: sigkill(),
            },
            5,
        ));
        st.obs.waits[0] = Some(wait(2, vec![1, 2], None));
        st.obs.waits[1] = Some(wait(2, vec![0, 2], None));
        assert!(stalled(&s, &mut st, &[0, 1, 2], 10_000));
        let stall = st.obs.final_stall.expect("a stall");
        assert_eq!(stall.stuck.len(), 2);
        assert!(stall.stuck[0].peers[1].starts_with("rank 2, which failed"));
    }

    #[test]
    fn a_wait_with_a_deadline_fails_with_its_timeout_error_only_after_the_grace() {
        let s = scenario();
        let mut st = state();
        st.obs.ends[2] = Some((RankEnd::Completed, 5));
        st.obs.waits[0] = Some(wait(2, vec![1, 2], Some(1_000)));
        st.obs.waits[1] = Some(wait(2, vec![0, 2], None));
        assert!(!stalled(
            &s,
            &mut st,
            &[0, 1, 2],
            1_000 + DEADLINE_GRACE_MS - 1
        ));
        assert!(stalled(&s, &mut st, &[0, 1, 2], 1_000 + DEADLINE_GRACE_MS));
        assert_eq!(
            st.obs.ends[0],
            Some((
                RankEnd::Failed {
                    step: 1,
                    failure: timed_out()
                },
                1_000
            ))
        );
    }

    #[test]
    fn a_rank_that_died_in_a_call_is_the_culprit_not_its_fellow_waiters() {
        let s = scenario();
        let mut st = state();
        for r in 0..3 {
            let peers = (0..3).filter(|p| *p != r).collect();
            st.obs.waits[r] = Some(wait(2, peers, None));
        }
        st.process_died(1, sigkill(), 50);
        assert!(stalled(&s, &mut st, &[0, 1, 2], 10_000));
        let stall = st.obs.final_stall.expect("a stall");
        for x in &stall.stuck {
            assert_eq!(x.wait.peers, vec![1], "rank {}", x.rank);
            assert_eq!(x.peers.len(), 1);
            assert!(
                x.peers[0].starts_with("rank 1, which failed"),
                "{:?}",
                x.peers
            );
        }
        let (_, ranks, _) = st.obs.first_stall_calls.expect("rank states at the stall");
        let hang = scen_core::diagnose::hang::analyse(&[], &ranks, 10_000).expect("a hang");
        assert_eq!(
            hang.cycle,
            Vec::<usize>::new(),
            "no cycle among the waiters"
        );
    }

    #[test]
    fn a_connect_to_a_dead_store_host_ends_at_once_with_the_connect_timeout_error() {
        let s = scenario();
        let mut st = state();
        st.store_hosts.insert(29_500, 0);
        st.process_died(0, sigkill(), 40);
        for r in 1..3 {
            let mut w = wait(0, vec![], Some(1_800_000));
            w.on = WaitOn::StoreConnect {
                host: "127.0.0.1".into(),
                port: 29_500,
            };
            w.group = None;
            w.timeout_error = Some(Failure::Raised {
                exception: "DistNetworkError".into(),
                message: "The client socket has timed out after 1800000ms while trying to connect to (127.0.0.1, 29500).".into(),
            });
            st.obs.waits[r] = Some(w);
        }
        assert!(stalled(&s, &mut st, &[0, 1, 2], 2_000));
        for r in 1..3 {
            match &st.obs.ends[r] {
                Some((RankEnd::Failed { failure, .. }, t_ms)) => {
                    let error = failure.text();
                    assert!(error.contains("client socket has timed out"), "{error}");
                    assert_eq!(*t_ms, 2_000);
                }
                other => panic!("rank {r}: {other:?}"),
            }
        }
        assert!(st.notes.iter().any(|n| n.contains("rank 0, is dead")));
    }

    #[test]
    fn a_connect_to_a_live_store_host_waits_for_its_deadline() {
        let s = scenario();
        let mut st = state();
        st.store_hosts.insert(29_500, 0);
        st.obs.waits[0] = Some(wait(2, vec![1, 2], None));
        for r in 1..3 {
            let mut w = wait(0, vec![], Some(1_800_000));
            w.on = WaitOn::StoreConnect {
                host: "127.0.0.1".into(),
                port: 29_500,
            };
            st.obs.waits[r] = Some(w);
        }
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 2_000));
    }

    fn record(rank: usize, seq: u64, state: CallState, t_end_ms: Option<u64>) -> CallRecord {
        CallRecord {
            rank,
            group: "0".into(),
            group_label: "WORLD".into(),
            group_ranks: vec![0, 1, 2].into(),
            backend: "xccl".into(),
            kind: scen_core::diagnose::record::CallKind::Collective,
            seq,
            peer: None,
            fp: scen_core::diagnose::record::Fingerprint {
                op: "all_reduce".into(),
                dtype: "f32".into(),
                shape: vec![1],
                nbytes: 4,
                root: None,
                reduce_op: Some("SUM".into()),
                splits: None,
            },
            step: 1,
            line: 1,
            state,
            t_start_ms: 0,
            t_end_ms,
            t_start_us: 0,
            t_end_us: t_end_ms.map(|t| t * 1000),
            tag: 0,
        }
    }

    /// Issue 32: on a loaded host rank 0 was still returning from all_reduce #47 when ranks 1
    /// and 2 had completed it and waited in #48; 1 s of silence made that a hang.
    #[test]
    fn a_rank_returning_from_a_call_its_peers_completed_is_slow_not_stuck() {
        let s = scenario();
        let mut st = state();
        st.obs.record_call(record(0, 47, CallState::Started, None));
        for r in 1..3 {
            st.obs
                .record_call(record(r, 47, CallState::Completed, Some(900)));
            st.obs.record_call(record(r, 48, CallState::Started, None));
            let peers = (0..3).filter(|p| *p != r).collect();
            st.obs.waits[r] = Some(wait(48, peers, None));
        }
        st.obs.waits[0] = Some(wait(47, vec![1, 2], None));
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 11_000));
        // A peer that completed the call and then ended is no reason either.
        st.obs.ends[2] = Some((RankEnd::Completed, 1_000));
        st.obs.waits[2] = None;
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 11_000));
        // Never returning is: stuck inside the library, and said so.
        assert!(!stalled(&s, &mut st, &[0, 1], 900 + RETURN_LIMIT_MS - 1));
        assert!(stalled(&s, &mut st, &[0, 1], 900 + RETURN_LIMIT_MS));
        assert!(
            st.notes
                .iter()
                .any(|n| n.starts_with("rank 0 has not returned from all_reduce #47")),
            "{:?}",
            st.notes
        );
    }

    #[test]
    fn a_rank_returning_past_its_deadline_is_not_timed_out_by_the_launcher() {
        let s = scenario();
        let mut st = state();
        st.obs.record_call(record(0, 5, CallState::Started, None));
        for r in 1..3 {
            st.obs
                .record_call(record(r, 5, CallState::Completed, Some(900)));
            st.obs.ends[r] = Some((RankEnd::Completed, 1_000));
        }
        st.obs.waits[0] = Some(wait(5, vec![1, 2], Some(1_000)));
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 10_000));
        assert_eq!(st.obs.ends[0], None);
    }

    #[test]
    fn ranks_in_different_calls_neither_completed_are_a_stall_at_once() {
        let s = scenario();
        let mut st = state();
        st.obs.record_call(record(0, 2, CallState::Started, None));
        st.obs.waits[0] = Some(wait(2, vec![1, 2], None));
        for r in 1..3 {
            st.obs
                .record_call(record(r, 1, CallState::Completed, Some(50)));
            st.obs.record_call(record(r, 3, CallState::Started, None));
            let peers = (0..3).filter(|p| *p != r).collect();
            st.obs.waits[r] = Some(wait(3, peers, None));
        }
        assert!(stalled(&s, &mut st, &[0, 1, 2], 2_000));
    }

    #[test]
    fn a_lone_rank_that_never_returns_is_stuck_after_the_return_limit() {
        let s = scenario();
        let mut st = state();
        st.obs.record_call(record(0, 1, CallState::Started, None));
        let mut w = wait(1, vec![], None);
        w.since_ms = 200;
        st.obs.waits[0] = Some(w);
        assert!(!stalled(&s, &mut st, &[0], 200 + RETURN_LIMIT_MS - 1));
        assert!(stalled(&s, &mut st, &[0], 200 + RETURN_LIMIT_MS));
        assert!(
            st.notes
                .iter()
                .any(|n| n.contains("it began (no other rank is in it)")),
            "{:?}",
            st.notes
        );
    }
}
