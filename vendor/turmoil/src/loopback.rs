//! scen patch: a host's messages to itself (loopback), queued on the host instead of one tokio
//! task and one timer per message.
//!
//! Upstream, `send_loopback` spawns a task (`tokio::spawn`, on the host's runtime, not its
//! `LocalSet`) that sleeps one tick and then hands the message to the host. That costs a task
//! allocation, a timer registration and two polls per message, and a simulator whose ranks
//! share a host sends most of its messages that way.
//!
//! This module keeps the same messages in two FIFO lists on the host and delivers them from
//! the host's tick future ([`crate::rt`]) at exactly the points where tokio would have run
//! those tasks, so every message arrives at the same time and in the same order relative to
//! every other task as before:
//!
//! - tokio runs a `block_on` runtime's spawned tasks between polls of the `block_on` future
//!   (the host's `LocalSet`), at most `EVENT_INTERVAL` (61, current-thread runtime) of them
//!   before it polls that future again, and polls it again only if it was woken;
//! - a delivery task is spawned at the back of that run queue; its first run registers its
//!   timer (deadline: now + one tick, the end of the host's tick), in run order;
//! - at the end of the tick the timers fire in registration order (tokio's wheel is FIFO for
//!   equal deadlines) together with the tick's own sleep, which ends the tick; the woken
//!   delivery tasks are therefore the whole run queue when the host's next tick starts, and
//!   each one, when run, delivers its message.
//!
//! Hosts opt in with `Builder::loopback_queue` (upstream's tasks stay the default), which
//! needs a 1 ms tick: every task of a tick then runs at its first instant, so every delivery
//! task's timer would have been due at the tick's end.
//!
//! So a queued message is `spawned` (counts as one run-queue entry this tick, then waits for
//! the next tick) and then `due` (counts as one entry and is delivered). Nothing else runs on
//! the runtime's queue in scen (every other task is on the `LocalSet`), which is what makes
//! the count exact.

use std::collections::VecDeque;

use crate::envelope::Envelope;
use crate::host::Host;

/// How many runtime tasks tokio's current-thread scheduler runs between two polls of the
/// `block_on` future (`tokio::runtime::Builder::new_current_thread`'s default event interval).
pub(crate) const EVENT_INTERVAL: usize = 61;

/// One host's loopback messages (see the module comment).
#[derive(Default)]
pub(crate) struct Loopback {
    /// Messages sent last tick, delivered this tick in send order (run-queue entries that
    /// tokio's timer woke).
    due: VecDeque<Envelope>,
    /// Messages sent this tick, in send order; the first `registered` of them have had their
    /// run-queue turn (their timer is set), the rest still wait for it.
    next: VecDeque<Envelope>,
    registered: usize,
}

impl Loopback {
    /// Queues `envelope`, as a spawned delivery task would be (at the back of the run queue).
    pub(crate) fn send(&mut self, envelope: Envelope) {
        self.next.push_back(envelope);
    }

    /// Whether any run-queue entry is waiting for its turn.
    pub(crate) fn has_runnable(&self) -> bool {
        !self.due.is_empty() || self.registered < self.next.len()
    }

    /// scen patch (time jump): no message queued, due or sent.
    pub(crate) fn is_empty(&self) -> bool {
        self.due.is_empty() && self.next.is_empty()
    }

    /// The tick ended (its timers fired): this tick's messages are due next tick.
    pub(crate) fn end_tick(&mut self) {
        debug_assert!(
            !self.has_runnable(),
            "loopback queue: a message sent after the tick's last turn (from a task spawned \
             on the host's runtime? Builder::loopback_queue needs spawn_local)"
        );
        self.registered = 0;
        if self.due.is_empty() {
            // Keeps both allocations.
            std::mem::swap(&mut self.due, &mut self.next);
        } else {
            self.due.extend(self.next.drain(..));
        }
    }

    /// The host's runtime was replaced (crash, bounce): its tasks, and so these messages, are
    /// gone.
    pub(crate) fn clear(&mut self) {
        self.due.clear();
        self.next.clear();
        self.registered = 0;
    }
}

/// Gives up to `budget` run-queue entries of `host`'s loopback their turn, in queue order
/// (due messages first: they were queued at the tick's start, before anything this tick
/// sent), and returns how many had one.
pub(crate) fn run(host: &mut Host, budget: usize) -> usize {
    let mut ran = 0;
    while ran < budget {
        let Some(envelope) = host.loopback.due.pop_front() else {
            break;
        };
        ran += 1;
        deliver(host, envelope);
    }
    let lb = &mut host.loopback;
    let spawned = (budget - ran).min(lb.next.len() - lb.registered);
    lb.registered += spawned;
    ran + spawned
}

/// Hands `envelope` to `host`, and a refused TCP segment's reset back to its sender (as
/// upstream's delivery task did; UDP never answers).
fn deliver(host: &mut Host, envelope: Envelope) {
    let (src, dst) = (envelope.src, envelope.dst);
    if let Err(rst) = host.receive_from_network(envelope) {
        _ = host.receive_from_network(Envelope {
            src: dst,
            dst: src,
            message: rst,
        });
    }
}
