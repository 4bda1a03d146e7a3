//! The virtual clock: turmoil's ticks plus jumps over idle time.
//!
//! turmoil advances time one tick per step, which would take millions of steps to reach a
//! 30-minute c10d timeout. Ranks wait on this clock instead; when the simulator sees that
//! nothing can happen but a timer, it jumps straight to the earliest deadline. Timers fire in
//! (deadline, registration) order, so runs stay deterministic.
//!
//! It also charges the timing model (core's `perf::model`): each message costs its sender
//! alpha + bytes/beta on its link class. The clock counts milliseconds, so each rank carries the
//! sub-millisecond remainder forward and sleeps whole milliseconds once they add up. TCPStore
//! round trips cost alpha + bytes/beta of the store class, carried per connection the same way
//! (core's store server charges them through `Clock::store_round_trip_us`).

use scen_core::perf::model::{LinkClass, TimingModel};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use tokio::sync::oneshot;

/// A pending timer: whom to wake, and whether it is a busy timer (`Clock::busy_until_ms`).
struct Timer {
    wake: oneshot::Sender<()>,
    busy: bool,
}

#[derive(Default)]
struct State {
    now_ms: Cell<u64>,
    seq: Cell<u64>,
    /// Pending timers by (deadline, registration).
    timers: RefCell<BTreeMap<(u64, u64), Timer>>,
    /// The timing model and each rank's node; `None`: messages are free.
    model: RefCell<Option<(TimingModel, Vec<usize>)>>,
    /// Per rank: microseconds charged but not yet slept.
    debt_us: RefCell<Vec<f64>>,
    /// Whether a loop of store requests may go as one request (`Clock::batches_store_loops`).
    batch_round_trips: Cell<bool>,
}

/// Cheap to clone; every rank on every node shares one.
#[derive(Clone, Default)]
pub struct VirtualClock {
    state: Rc<State>,
}

impl VirtualClock {
    /// Charges `model` from now on; `node_of[r]` is rank r's node.
    pub fn set_model(&self, model: TimingModel, node_of: Vec<usize>) {
        *self.state.debt_us.borrow_mut() = vec![0.0; node_of.len()];
        *self.state.model.borrow_mut() = Some((model, node_of));
    }

    /// Adds a message's cost to `rank`'s debt; returns the whole milliseconds to sleep now.
    fn debit(&self, rank: usize, peer: usize, device: bool, bytes: usize) -> u64 {
        let m = self.state.model.borrow();
        let Some((model, node_of)) = m.as_ref() else {
            return 0;
        };
        let same_node = node_of.get(rank) == node_of.get(peer);
        let us = model.message_us(LinkClass::of(device, same_node), bytes);
        let mut debt = self.state.debt_us.borrow_mut();
        let Some(d) = debt.get_mut(rank) else {
            return 0;
        };
        *d += us;
        let ms = (*d / 1000.0).floor();
        *d -= ms * 1000.0;
        ms as u64
    }

    /// Lets loops of store requests go as one request, each charged the round trip its client
    /// measured. Only where every round trip costs about the same: with latency drawn at random
    /// per message, a loop's round trips are simulated one by one, so the races `scen explore`
    /// finds keep their per-message randomness.
    pub fn set_batch_round_trips(&self, on: bool) {
        self.state.batch_round_trips.set(on);
    }

    pub fn set_now(&self, t_ms: u64) {
        self.state.now_ms.set(t_ms);
    }

    /// Fires every timer due at the current time; returns how many fired.
    pub fn fire_due(&self) -> usize {
        let now = self.state.now_ms.get();
        let mut fired = 0;
        loop {
            let mut timers = self.state.timers.borrow_mut();
            let Some(entry) = timers.first_entry() else {
                break;
            };
            if entry.key().0 > now {
                break;
            }
            let tx = entry.remove().wake;
            drop(timers);
            // A dropped receiver (the waiter was cancelled) is not progress.
            if tx.send(()).is_ok() {
                fired += 1;
            }
        }
        fired
    }

    /// The earliest pending deadline, skipping timers whose waiters are gone.
    pub fn next_deadline(&self) -> Option<u64> {
        let mut timers = self.state.timers.borrow_mut();
        timers.retain(|_, t| !t.wake.is_closed());
        timers.keys().next().map(|(t, _)| *t)
    }

    /// Whether some rank's wait stands for work under way (a busy timer is pending): the world
    /// is not stuck, only between two modelled events.
    pub fn busy_pending(&self) -> bool {
        let timers = self.state.timers.borrow();
        timers.values().any(|t| t.busy && !t.wake.is_closed())
    }

    fn timer(&self, t_ms: u64, busy: bool) -> impl Future<Output = ()> {
        let rx = if t_ms <= self.state.now_ms.get() {
            None
        } else {
            let (tx, rx) = oneshot::channel();
            let seq = self.state.seq.get();
            self.state.seq.set(seq + 1);
            self.state
                .timers
                .borrow_mut()
                .insert((t_ms, seq), Timer { wake: tx, busy });
            Some(rx)
        };
        async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
        }
    }
}

impl scen_core::net::Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.state.now_ms.get()
    }

    fn sleep_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        self.timer(t_ms, false)
    }

    fn busy_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        self.timer(t_ms, true)
    }

    fn batches_store_loops(&self) -> bool {
        self.state.batch_round_trips.get()
    }

    fn store_round_trip_us(&self, bytes: usize) -> f64 {
        self.state
            .model
            .borrow()
            .as_ref()
            .map_or(0.0, |(m, _)| m.message_us(LinkClass::Store, bytes))
    }

    fn charge(
        &self,
        rank: usize,
        peer: usize,
        device: bool,
        bytes: usize,
    ) -> impl Future<Output = ()> {
        let ms = self.debit(rank, peer, device, bytes);
        let wait = (ms > 0).then(|| self.sleep_until_ms(self.now_ms() + ms));
        async move {
            if let Some(w) = wait {
                w.await;
            }
        }
    }
}
