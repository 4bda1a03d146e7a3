//! The virtual clock: turmoil's ticks plus jumps over idle time.
//!
//! turmoil advances time one tick per step, which would take millions of steps to reach a
//! 30-minute c10d timeout. Ranks wait on this clock instead; when the simulator sees that
//! nothing can happen but a timer, it jumps straight to the earliest deadline. Timers fire in
//! (deadline, registration) order, so runs stay deterministic.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use tokio::sync::oneshot;

#[derive(Default)]
struct State {
    now_ms: Cell<u64>,
    seq: Cell<u64>,
    timers: RefCell<BTreeMap<(u64, u64), oneshot::Sender<()>>>,
}

/// Cheap to clone; every rank on every node shares one.
#[derive(Clone, Default)]
pub struct VirtualClock {
    state: Rc<State>,
}

impl VirtualClock {
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
            let tx = entry.remove();
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
        timers.retain(|_, tx| !tx.is_closed());
        timers.keys().next().map(|(t, _)| *t)
    }
}

impl scen_core::runtime::net::Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.state.now_ms.get()
    }

    fn sleep_until_ms(&self, t_ms: u64) -> impl Future<Output = ()> {
        let rx = if t_ms <= self.state.now_ms.get() {
            None
        } else {
            let (tx, rx) = oneshot::channel();
            let seq = self.state.seq.get();
            self.state.seq.set(seq + 1);
            self.state.timers.borrow_mut().insert((t_ms, seq), tx);
            Some(rx)
        };
        async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
        }
    }
}
