//! The virtual clock: the time of the next event, in nanoseconds.
//!
//! Ranks wait on this clock, not on turmoil's ticks. A turmoil step in which something happens
//! is an instant (messages handed over, ranks run); time moves only when the world waits: to
//! the earliest timer once nothing can happen before it, or, while a message with a network
//! latency is in flight and nothing else happens, by the steps it takes to arrive (drive.rs).
//! So a scenario's time is the timing model's: no tick is added per round of messages. Timers
//! fire in (deadline, registration) order, so runs stay deterministic.
//!
//! The timing model (core's `perf::model`) is charged here: a collective call costs each member
//! what `scen bench` predicts for it (core's `runtime::cost`, spent through `Clock::spend_us`),
//! a point-to-point message costs its sender alpha + bytes/beta on its link class
//! (`Clock::charge`), a TCPStore round trip alpha + bytes/beta of the store class (core's store
//! server, through `Clock::store_round_trip_us`). Spent time is a busy wait: modelled work under
//! way, not a stall.

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

/// Nanoseconds in a millisecond: the unit core's timeouts and traces count in.
pub const NS_PER_MS: u64 = 1_000_000;

#[derive(Default)]
struct State {
    now_ns: Cell<u64>,
    seq: Cell<u64>,
    /// Pending timers by (deadline in ns, registration).
    timers: RefCell<BTreeMap<(u64, u64), Timer>>,
    /// The timing model and each rank's node; `None`: messages are free.
    model: RefCell<Option<(TimingModel, Vec<usize>)>>,
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
        *self.state.model.borrow_mut() = Some((model, node_of));
    }

    /// Microseconds a message of `bytes` from `rank` to `peer` costs its sender.
    fn message_us(&self, rank: usize, peer: usize, device: bool, bytes: usize) -> f64 {
        let m = self.state.model.borrow();
        let Some((model, node_of)) = m.as_ref() else {
            return 0.0;
        };
        let same_node = node_of.get(rank) == node_of.get(peer);
        model.message_us(LinkClass::of(device, same_node), bytes)
    }

    /// Lets loops of store requests go as one request, each charged the round trip its client
    /// measured. Only where every round trip costs about the same: with latency drawn at random
    /// per message, a loop's round trips are simulated one by one, so the races `scen explore`
    /// finds keep their per-message randomness.
    pub fn set_batch_round_trips(&self, on: bool) {
        self.state.batch_round_trips.set(on);
    }

    pub fn now_ns(&self) -> u64 {
        self.state.now_ns.get()
    }

    pub fn set_now_ns(&self, t_ns: u64) {
        self.state.now_ns.set(t_ns);
    }

    /// Fires every timer due at the current time; returns how many fired.
    pub fn fire_due(&self) -> usize {
        let now = self.state.now_ns.get();
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

    /// The earliest pending deadline (ns), skipping timers whose waiters are gone.
    pub fn next_deadline_ns(&self) -> Option<u64> {
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

    fn timer(&self, t_ns: u64, busy: bool) -> impl Future<Output = ()> {
        let rx = if t_ns <= self.state.now_ns.get() {
            None
        } else {
            let (tx, rx) = oneshot::channel();
            let seq = self.state.seq.get();
            self.state.seq.set(seq + 1);
            self.state
                .timers
                .borrow_mut()
                .insert((t_ns, seq), Timer { wake: tx, busy });
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
        self.state.now_ns.get() / NS_PER_MS
    }

    fn now_us(&self) -> u64 {
        self.state.now_ns.get() / 1000
    }

    fn sleep_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        self.timer(t_ms.saturating_mul(NS_PER_MS), false)
    }

    fn busy_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        self.timer(t_ms.saturating_mul(NS_PER_MS), true)
    }

    fn spend_us(&self, us: f64) -> impl Future<Output = ()> {
        let ns = (us * 1000.0).round();
        // A model's cost past the clock's range (a fuzzed alpha of 2^63 µs) saturates.
        let wait = (ns >= 1.0).then(|| self.timer(self.now_ns().saturating_add(ns as u64), true));
        async move {
            if let Some(w) = wait {
                w.await;
            }
        }
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
        self.spend_us(self.message_us(rank, peer, device, bytes))
    }
}
