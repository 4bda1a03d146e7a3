//! A rank's inbox: the messages that reached its process and have not been taken, in arrival
//! order per peer and tag, and what decides which of them a dying process leaves unread (its
//! peers then read a reset, not a close). The fabric (fabric.rs) files what its readers get
//! here and waits on its changes.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use tokio::sync::Notify;

/// Whether a rank's process still runs, shared by whoever kills it (the simulator's crash
/// faults, the rank's own abort) and its fabric: once killed, nothing reads what arrives.
#[derive(Clone, Default)]
pub struct Life(Rc<LifeState>);

#[derive(Default)]
struct LifeState {
    /// When the process was killed, in ms of its clock (0 without one).
    killed_at_ms: Cell<Option<u64>>,
    /// The clock the process runs on (the simulator's); none in real modes, where the kernel
    /// decides what stays unread.
    now_ms: Option<Box<dyn Fn() -> u64>>,
}

impl Life {
    /// A process on a virtual clock: a message that arrived in the millisecond of its death
    /// and was not taken counts as unread ([`Life::unread_at_death`]).
    pub fn on_clock(now_ms: impl Fn() -> u64 + 'static) -> Life {
        Life(Rc::new(LifeState {
            killed_at_ms: Cell::new(None),
            now_ms: Some(Box::new(now_ms)),
        }))
    }

    /// The process is killed: from now on what arrives stays unread.
    pub fn kill(&self) {
        self.0.killed_at_ms.set(Some(self.now_ms()));
    }

    pub fn killed(&self) -> bool {
        self.0.killed_at_ms.get().is_some()
    }

    fn now_ms(&self) -> u64 {
        self.0.now_ms.as_ref().map_or(0, |f| f())
    }

    /// Whether a message that arrived at `t_ms` and that the process never took was still in
    /// its socket when it died: it came in the millisecond of the death. A PyTorch process's
    /// gloo loop thread reads what arrives, but not at once: a notice that came 1 ms before
    /// the process sent itself SIGKILL stayed unread and reset its sender (user-path 7/457,
    /// real torch 2.15, 2 of 2 runs), and the simulator runs what happened in that ms as one
    /// instant. Never without a clock.
    pub(super) fn unread_at_death(&self, t_ms: u64) -> bool {
        self.0.now_ms.is_some() && self.0.killed_at_ms.get().is_some_and(|k| t_ms >= k)
    }
}

/// Messages waiting to be received, per source rank and tag, in arrival order. Keyed in two
/// levels so a lookup by `&str` needs no key of its own; a queue is dropped once emptied, so
/// a long run does not keep one per call it ever made.
type Queues = BTreeMap<usize, BTreeMap<String, VecDeque<Arrived>>>;

/// A message, when it arrived (ms of the process's clock; 0 without one) and its place in
/// the process's arrival order (from 1).
type Arrived = (u64, u64, Vec<u8>);

#[derive(Default)]
pub(super) struct Inbox {
    pub(super) queues: RefCell<Queues>,
    /// Peers whose connection ended: `true` if it was reset.
    pub(super) closed: RefCell<BTreeMap<usize, bool>>,
    /// Peers with an incoming connection still open (its reader reports their end).
    pub(super) incoming: RefCell<BTreeSet<usize>>,
    /// Peers whose message arrived after the process was killed (nothing reads it).
    pub(super) unread: RefCell<BTreeSet<usize>>,
    /// Messages that have arrived, and the place of the last one taken.
    pub(super) arrivals: Cell<u64>,
    pub(super) last_taken: Cell<u64>,
    /// The process died reading a message (gloo's size check): what arrived up to it is read.
    pub(super) read_upto: Cell<Option<u64>>,
    pub(super) life: Life,
    pub(super) changed: Notify,
}

impl Inbox {
    /// Whether `peer`'s end is known.
    pub(super) fn has_ended(&self, peer: usize) -> bool {
        self.closed.borrow().contains_key(&peer)
    }

    /// `peer`'s connection ended (`reset`: with a RST); receivers waiting on it wake.
    pub(super) fn ended(&self, peer: usize, reset: bool) {
        *self.closed.borrow_mut().entry(peer).or_insert(false) |= reset;
        self.changed.notify_waiters();
    }

    /// Whether a message from `peer` with `tag` has arrived (it stays).
    pub(super) fn has(&self, peer: usize, tag: &str) -> bool {
        let queues = self.queues.borrow();
        queues.get(&peer).is_some_and(|q| q.contains_key(tag))
    }

    /// The oldest message from `peer` with `tag`, if one has arrived.
    pub(super) fn take(&self, peer: usize, tag: &str) -> Option<Vec<u8>> {
        let mut queues = self.queues.borrow_mut();
        let by_tag = queues.get_mut(&peer)?;
        let q = by_tag.get_mut(tag)?;
        let m = q.pop_front();
        if q.is_empty() {
            by_tag.remove(tag);
            if by_tag.is_empty() {
                queues.remove(&peer);
            }
        }
        m.map(|(_, seq, data)| {
            self.last_taken.set(seq);
            data
        })
    }

    /// The process dies reading the message it took last ([`Fabric::died_reading`]).
    pub(super) fn died_reading(&self) {
        self.read_upto.set(Some(self.last_taken.get()));
    }

    /// Peers with a message still here that counts as unread at the process's death
    /// ([`Life::unread_at_death`]), and that came after the message it died reading, if any.
    pub(super) fn unread_at_death(&self) -> Vec<usize> {
        let queues = self.queues.borrow();
        let read_upto = self.read_upto.get().unwrap_or(0);
        queues
            .iter()
            .filter(|(_, by_tag)| {
                by_tag
                    .values()
                    .flatten()
                    .any(|(t, seq, _)| *seq > read_upto && self.life.unread_at_death(*t))
            })
            .map(|(peer, _)| *peer)
            .collect()
    }

    /// Files a message that arrived from `peer` and wakes the receivers (a killed process's
    /// stays unread).
    pub(super) fn put(&self, peer: usize, tag: &str, data: Vec<u8>) {
        if self.life.killed() {
            self.unread.borrow_mut().insert(peer);
            return;
        }
        self.arrivals.set(self.arrivals.get() + 1);
        let m = (self.life.now_ms(), self.arrivals.get(), data);
        let mut queues = self.queues.borrow_mut();
        let by_tag = queues.entry(peer).or_default();
        match by_tag.get_mut(tag) {
            Some(q) => q.push_back(m),
            None => {
                by_tag.insert(tag.to_string(), VecDeque::from([m]));
            }
        }
        drop(queues);
        self.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_inbox_keeps_arrival_order_per_peer_and_tag_and_forgets_empty_queues() {
        let inbox = Inbox::default();
        inbox.put(1, "a", vec![1]);
        inbox.put(2, "a", vec![2]);
        inbox.put(1, "a", vec![3]);
        inbox.put(1, "b", vec![4]);
        assert_eq!(inbox.take(1, "b"), Some(vec![4]));
        assert_eq!(inbox.take(1, "b"), None);
        assert_eq!(inbox.take(1, "a"), Some(vec![1]));
        assert_eq!(inbox.take(1, "a"), Some(vec![3]));
        assert_eq!(inbox.take(2, "a"), Some(vec![2]));
        assert!(inbox.queues.borrow().is_empty());
    }

    #[test]
    fn what_arrived_in_the_ms_of_a_death_and_was_not_taken_counts_as_unread() {
        let now = Rc::new(Cell::new(5u64));
        let clock = now.clone();
        let inbox = Inbox {
            life: Life::on_clock(move || clock.get()),
            ..Inbox::default()
        };
        inbox.put(1, "a", vec![1]); // at 5 ms: read before the death
        now.set(7);
        inbox.put(2, "a", vec![2]); // in the ms of the death, never taken
        inbox.put(3, "a", vec![3]); // in the ms of the death, but taken
        assert_eq!(inbox.take(3, "a"), Some(vec![3]));
        inbox.life.kill();
        assert_eq!(inbox.unread_at_death(), vec![2]);
        // Without a clock (real modes) the kernel decides: nothing counts.
        let real = Inbox::default();
        real.put(2, "a", vec![2]);
        real.life.kill();
        assert!(real.unread_at_death().is_empty());
    }

    #[test]
    fn what_came_before_the_message_a_process_died_reading_was_read() {
        let inbox = Inbox {
            life: Life::on_clock(|| 7),
            ..Inbox::default()
        };
        inbox.put(2, "a", vec![2]); // before the fatal message: the loop thread read it
        inbox.put(1, "a", vec![1]); // the message gloo's size check aborts on
        inbox.put(3, "a", vec![3]); // after it: unread
        assert_eq!(inbox.take(1, "a"), Some(vec![1]));
        inbox.died_reading();
        inbox.life.kill();
        assert_eq!(inbox.unread_at_death(), vec![3]);
    }

    #[test]
    fn a_killed_process_files_nothing_and_remembers_who_sent_it_unread_data() {
        let inbox = Inbox::default();
        inbox.put(1, "a", vec![1]);
        inbox.life.kill();
        inbox.put(2, "a", vec![2]);
        assert_eq!(inbox.take(2, "a"), None);
        assert_eq!(inbox.take(1, "a"), Some(vec![1]));
        assert_eq!(*inbox.unread.borrow(), BTreeSet::from([2]));
    }
}
