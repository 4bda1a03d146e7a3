//! Evidence, not silence: what a watchdog over real processes knows of whether a rank waiting
//! inside a call can still return. On a loaded host a rank may take seconds to come back from a
//! call its peers have already completed; silence then says nothing. The call records say more:
//!
//! - a peer that **completed** the call the rank waits in has done its part of it: the rank is
//!   slow, not stuck (it returns once it runs); likewise a peer that made a call on the group
//!   of the device communicator the rank is still creating has returned from that creation
//!   (its members return from it together);
//! - a peer waiting in a call the rank completed is returning from it, and will move on;
//! - a peer that **ended** (finished, failed, died) without completing the call never will;
//! - a peer waiting in **another call**, where neither has completed the other's call, waits for
//!   something the rank will not do until it is freed itself: a real mismatch.
//!
//! Shared by the launchers of real runs (the hw watchdog); the simulator needs none of it (its
//! virtual clock only stops when nothing can move).

use crate::diagnose::record::{CallKey, CallKind, CallRecord, CallState};
use crate::observe::Observed;
use crate::trace::{Wait, WaitOn};

/// What one peer a rank waits for says about that wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// It completed the call the rank waits in.
    Done,
    /// It waits in the same call (same group and sequence number).
    With,
    /// It waits in a call the rank completed: it is returning from it.
    Behind,
    /// Neither waiting nor ended (between steps, sleeping, in host code): it may still come.
    Running,
    /// It ended without completing the call.
    Gone,
    /// It waits in another call, and neither has completed the other's call.
    Elsewhere,
}

impl Peer {
    /// Can the rank's wait never end on this peer's account?
    pub fn hopeless(self) -> bool {
        matches!(self, Peer::Gone | Peer::Elsewhere)
    }
}

/// The call record of rank `r`'s wait `w`: its latest record still started at that step with
/// the wait's sequence number. `None` for waits outside a call (stores, communicator init).
pub fn open_call<'a>(o: &'a Observed, r: usize, w: &Wait) -> Option<&'a CallRecord> {
    let seq = w.seq?;
    o.calls
        .iter()
        .rev()
        .find(|c| c.rank == r && c.state == CallState::Started && c.step == w.step && c.seq == seq)
}

/// The same call as `open` on rank `m`: the collective at its sequence number (same op), or
/// the other side of the transfer.
pub fn counterpart<'a>(o: &'a Observed, open: &CallRecord, m: usize) -> Option<&'a CallRecord> {
    let (kind, peer) = match open.kind {
        CallKind::Collective => (CallKind::Collective, None),
        CallKind::Send => (CallKind::Recv, Some(open.rank)),
        CallKind::Recv => (CallKind::Send, Some(open.rank)),
    };
    let key: CallKey = (m, open.group.clone(), kind, open.seq, peer);
    let c = o.calls.get(*o.call_index.get(&key)?)?;
    (kind != CallKind::Collective || c.fp.op == open.fp.op).then_some(c)
}

fn completed(c: Option<&CallRecord>) -> bool {
    c.is_some_and(|c| c.state == CallState::Completed)
}

/// For a wait in a device communicator's creation: when peer `p` started its first call on
/// the same group at that step or later, having returned from the creation (a rank creates a
/// group's communicator before it records a call on it). `None` if it has not.
fn past_init(o: &Observed, w: &Wait, p: usize) -> Option<u64> {
    if !matches!(w.on, WaitOn::DeviceInit) {
        return None;
    }
    let g = w.group.as_deref()?;
    o.calls
        .iter()
        .find(|c| {
            c.rank == p && c.step >= w.step && format!("{} ({})", c.group_label, c.group) == g
        })
        .map(|c| c.t_start_ms)
}

/// What peer `p` says about rank `r`'s wait `w`.
pub fn peer(o: &Observed, r: usize, w: &Wait, p: usize) -> Peer {
    let mine = open_call(o, r, w);
    if mine.is_some_and(|c| completed(counterpart(o, c, p))) || past_init(o, w, p).is_some() {
        return Peer::Done;
    }
    if o.ends.get(p).is_some_and(|e| e.is_some()) {
        return Peer::Gone;
    }
    let Some(pw) = o.waits.get(p).and_then(|x| x.as_ref()) else {
        return Peer::Running;
    };
    if pw.group == w.group && pw.seq == w.seq {
        return Peer::With;
    }
    let theirs = open_call(o, p, pw);
    if theirs.is_some_and(|c| completed(counterpart(o, c, r))) {
        return Peer::Behind;
    }
    Peer::Elsewhere
}

/// Rank `r` waits in a call (or a device communicator's creation) every peer of its wait has
/// completed (or that has no peers, as in a one-rank world): only its own return is left.
/// `Some(since)`: when the last of them completed it (the wait's start without peers). `None`
/// otherwise.
pub fn returning(o: &Observed, r: usize, w: &Wait) -> Option<u64> {
    let mut since = w.since_ms;
    if matches!(w.on, WaitOn::DeviceInit) {
        for p in &w.peers {
            since = since.max(past_init(o, w, *p)?);
        }
        return Some(since);
    }
    let mine = open_call(o, r, w)?;
    for p in &w.peers {
        let c = counterpart(o, mine, *p).filter(|c| c.state == CallState::Completed)?;
        since = since.max(c.t_end_ms.unwrap_or(since));
    }
    Some(since)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::record::Fingerprint;
    use crate::outcome::RankEnd;
    use crate::trace::WaitOn;

    fn rec(rank: usize, seq: u64, state: CallState, t_end_ms: Option<u64>) -> CallRecord {
        CallRecord {
            rank,
            group: "0".into(),
            group_label: "WORLD".into(),
            group_ranks: vec![0, 1].into(),
            backend: "xccl".into(),
            kind: CallKind::Collective,
            seq,
            peer: None,
            fp: Fingerprint {
                op: "all_reduce".into(),
                dtype: "f32".into(),
                shape: vec![4],
                nbytes: 16,
                root: None,
                reduce_op: Some("SUM".into()),
                splits: None,
            },
            step: seq as usize,
            line: 1,
            state,
            t_start_ms: 0,
            t_end_ms,
            t_start_us: 0,
            t_end_us: t_end_ms.map(|t| t * 1000),
            tag: 0,
        }
    }

    fn wait(seq: u64, peers: Vec<usize>) -> Wait {
        Wait {
            step: seq as usize,
            on: WaitOn::DeviceCall,
            what: format!("all_reduce #{seq}"),
            group: Some("WORLD (0)".into()),
            seq: Some(seq),
            peers,
            since_ms: 100,
            deadline_ms: None,
            timeout_error: None,
        }
    }

    /// Rank 0 is still inside all_reduce #47; rank 1 completed it and waits in #48: the
    /// false hang of issue 32 (a loaded host).
    fn one_ahead() -> Observed {
        let mut o = Observed::new(2);
        o.record_call(rec(0, 47, CallState::Started, None));
        o.record_call(rec(1, 47, CallState::Completed, Some(900)));
        o.record_call(rec(1, 48, CallState::Started, None));
        o.waits[0] = Some(wait(47, vec![1]));
        o.waits[1] = Some(wait(48, vec![0]));
        o
    }

    #[test]
    fn a_rank_behind_its_peers_is_slow_not_stuck() {
        let o = one_ahead();
        let w0 = o.waits[0].clone().expect("wait");
        let w1 = o.waits[1].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::Done);
        assert_eq!(peer(&o, 1, &w1, 0), Peer::Behind);
        assert_eq!(returning(&o, 0, &w0), Some(900));
        assert_eq!(returning(&o, 1, &w1), None);
    }

    #[test]
    fn a_peer_that_ended_after_completing_the_call_is_done_one_that_did_not_is_gone() {
        let mut o = one_ahead();
        o.ends[1] = Some((RankEnd::Completed, 950));
        o.waits[1] = None;
        let w0 = o.waits[0].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::Done);
        let mut o = Observed::new(2);
        o.record_call(rec(0, 1, CallState::Started, None));
        o.waits[0] = Some(wait(1, vec![1]));
        o.ends[1] = Some((RankEnd::Completed, 950));
        let w0 = o.waits[0].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::Gone);
        assert!(Peer::Gone.hopeless());
    }

    #[test]
    fn waits_in_different_calls_neither_completed_are_a_mismatch() {
        // Rank 1 skipped all_reduce #1's step: it waits in a barrier (#1 of another group).
        let mut o = Observed::new(2);
        o.record_call(rec(0, 1, CallState::Started, None));
        let mut other = rec(1, 1, CallState::Started, None);
        other.group = "1".into();
        other.step = 2;
        o.record_call(other);
        o.waits[0] = Some(wait(1, vec![1]));
        let mut w1 = wait(1, vec![0]);
        w1.group = Some("g (1)".into());
        w1.step = 2;
        o.waits[1] = Some(w1.clone());
        let w0 = o.waits[0].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::Elsewhere);
        assert_eq!(peer(&o, 1, &w1, 0), Peer::Elsewhere);
        assert!(Peer::Elsewhere.hopeless());
        assert_eq!(returning(&o, 0, &w0), None);
    }

    #[test]
    fn same_call_and_running_peers_are_not_hopeless() {
        let mut o = Observed::new(3);
        for r in 0..2 {
            o.record_call(rec(r, 3, CallState::Started, None));
            o.waits[r] = Some(wait(3, vec![1 - r, 2]));
        }
        let w0 = o.waits[0].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::With);
        assert_eq!(peer(&o, 0, &w0, 2), Peer::Running);
        assert!(!Peer::With.hopeless() && !Peer::Running.hopeless());
    }

    #[test]
    fn a_wait_without_peers_in_a_call_is_returning_since_it_began() {
        let mut o = Observed::new(1);
        o.record_call(rec(0, 1, CallState::Started, None));
        let w = wait(1, vec![]);
        assert_eq!(returning(&o, 0, &w), Some(100));
        // Not a call (a communicator's init): no evidence either way.
        let mut init = w.clone();
        init.seq = None;
        assert_eq!(returning(&o, 0, &init), None);
    }

    #[test]
    fn another_op_at_the_same_sequence_number_is_not_the_same_call() {
        let mut o = one_ahead();
        let mut barrier = rec(1, 47, CallState::Completed, Some(900));
        barrier.fp.op = "barrier".into();
        o.record_call(barrier);
        let w0 = o.waits[0].clone().expect("wait");
        assert_eq!(peer(&o, 0, &w0, 1), Peer::Elsewhere);
    }

    #[test]
    fn a_peer_calling_on_the_group_is_past_the_communicator_creation() {
        let mut o = Observed::new(2);
        let mut init = wait(1, vec![1]);
        init.on = WaitOn::DeviceInit;
        init.seq = None;
        o.waits[0] = Some(init.clone());
        // Rank 1 still creating it too: the same wait.
        o.waits[1] = Some(Wait {
            peers: vec![0],
            ..init.clone()
        });
        assert_eq!(peer(&o, 0, &init, 1), Peer::With);
        assert_eq!(returning(&o, 0, &init), None);
        // Rank 1 created it and called all_reduce #1 on it: rank 0 returns from the creation.
        let mut ar1 = rec(1, 1, CallState::Started, None);
        ar1.t_start_ms = 700;
        o.record_call(ar1);
        o.waits[1] = Some(wait(1, vec![0]));
        assert_eq!(peer(&o, 0, &init, 1), Peer::Done);
        assert_eq!(returning(&o, 0, &init), Some(700));
        // Alone in it (a one-rank world): only its own return is left, since it began.
        let alone = Wait {
            peers: vec![],
            ..init
        };
        assert_eq!(returning(&o, 0, &alone), Some(100));
    }
}
