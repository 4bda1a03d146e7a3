//! Seeded intra-node schedules: which ready rank of a node runs first, and in which order a
//! node's tasks see the messages that reached them at the same time.
//!
//! turmoil runs a node's tasks on one tokio `LocalSet`, first woken first run, so without help
//! every intra-node order is fixed (ranks in rank order, readers in the order their bytes were
//! sent) and no seed could show a race between ranks of one host. Real ranks are processes the
//! OS schedules in any order and wakes with some latency, and a TCPStore's server answers
//! whichever socket the kernel reports first. So a seed other than 0 draws at every scheduling
//! point:
//! - a number of yields (0–[`MAX_YIELDS`]): a yielding task goes to the back of its node's run
//!   queue, behind the tasks that were ready with it, without any virtual time passing;
//! - for a rank's process only, one time in [`LATE_ONE_IN`], a late wake-up: the rank runs
//!   [`LATE_MS`] later, as a process the OS did not run at once (one loopback message's time
//!   in this simulator), so ranks that real timing keeps within a millisecond of each other
//!   can reach a point in either order.
//!
//! Scheduling points: every wake-up of a rank's task (a message, a timer, a peer's exit, and
//! its start), and every read, write, connect and accept of a simulated socket (which is how
//! the TCPStore's connection tasks and the fabric's readers, spawned by core, are reached).
//! What stays fixed, as on a real host: program order within a task, the bytes of one
//! connection (a reader may see them later, never reordered: TCP is a byte stream), and when
//! the network delivers a message (only who looks first, and when a late rank looks, change).
//!
//! Seed 0 is the reference schedule: no yields and no late wake-ups, the order scen always
//! had, so a run with seed 0 (the default of `[sim] seed`) is unchanged. The draws come from a
//! SplitMix64 stream of the seed written here, not from a library generator whose algorithm
//! may change between versions, so a seed's trace stays the same across dependency updates.

use crate::clock::VirtualClock;
use scen_core::net::Clock;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

/// The most yields drawn at one scheduling point. With every ready task drawing 0..=3, any of
/// them can end up first or last among those ready with it.
pub const MAX_YIELDS: u64 = 3;

/// One wake-up of a rank in this many is late (on average).
pub const LATE_ONE_IN: u64 = 64;

/// How late a late wake-up is: one tick of the simulation.
pub const LATE_MS: u64 = 1;

/// A simulation's schedule: the reference order (seed 0) or a seeded perturbation of it.
/// Cheap to clone; every task of every node shares one stream of draws, which is
/// deterministic because the whole simulation runs on one thread in a fixed poll order.
#[derive(Clone, Default)]
pub struct Schedule(Option<Rc<Perturbed>>);

struct Perturbed {
    state: Cell<u64>,
    clock: VirtualClock,
}

impl Schedule {
    /// The schedule of `seed`: the reference order for 0, a perturbed one otherwise; late
    /// wake-ups sleep on `clock`.
    pub fn for_seed(seed: u64, clock: &VirtualClock) -> Schedule {
        if seed == 0 {
            return Schedule(None);
        }
        // Mixed so that neighbouring seeds start far apart in the stream.
        let mut s = seed;
        Schedule(Some(Rc::new(Perturbed {
            state: Cell::new(splitmix64(&mut s)),
            clock: clock.clone(),
        })))
    }

    /// Whether this schedule perturbs anything.
    pub fn perturbs(&self) -> bool {
        self.0.is_some()
    }

    /// The next draw of the stream, in `0..n` (always 0 for the reference schedule).
    fn next(&self, n: u64) -> u64 {
        match &self.0 {
            None => 0,
            Some(p) => {
                let mut s = p.state.get();
                let v = splitmix64(&mut s);
                p.state.set(s);
                v % n
            }
        }
    }

    /// How many times to yield at the next scheduling point.
    fn draw(&self) -> u64 {
        self.next(MAX_YIELDS + 1)
    }

    /// Whether a rank's wake-up is late: the sleep that makes it so.
    fn late(&self) -> Option<Pin<Box<dyn Future<Output = ()>>>> {
        let p = self.0.as_ref()?;
        if self.next(LATE_ONE_IN) != 0 {
            return None;
        }
        let clock = p.clock.clone();
        let until_ms = clock.now_ms() + LATE_MS;
        Some(Box::pin(async move { clock.busy_until_ms(until_ms).await }))
    }

    /// A gate for one sequence of scheduling points (one task, one direction of a socket).
    pub fn gate(&self) -> Gate {
        Gate {
            schedule: self.clone(),
            left: 0,
        }
    }

    /// Yields the drawn number of times (a scheduling point in an async fn).
    pub async fn point(&self) {
        let mut gate = self.gate();
        gate.arm();
        std::future::poll_fn(|cx| gate.poll(cx)).await
    }

    /// A rank's process: `fut` with a scheduling point at every wake-up (before each poll
    /// that follows a `Pending`, and before the first: tasks are spawned in rank order), where
    /// it may be late and then yields the drawn number of times.
    pub fn shuffled<F: Future>(&self, fut: F) -> Shuffled<F> {
        Shuffled {
            fut: Box::pin(fut),
            gate: self.gate(),
            woken: true,
            late: None,
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, one output per step.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Yields still owed before the next poll of whatever this gate guards.
pub struct Gate {
    schedule: Schedule,
    left: u64,
}

impl Gate {
    /// Draws the yields owed before the next poll (after a `Pending` or a finished operation).
    pub fn arm(&mut self) {
        self.left = self.schedule.draw();
    }

    /// `Pending` (and an immediate wake: the task goes to the back of the run queue) while
    /// yields are owed; `Ready` once they are paid.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.left == 0 {
            return Poll::Ready(());
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Guards one poll of an operation: pays the owed yields, polls, and re-arms on any result
    /// (`Pending`: the wake-up that ends it is a scheduling point; `Ready`: so is the next
    /// operation).
    pub fn around<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        if self.poll(cx).is_pending() {
            return Poll::Pending;
        }
        let r = op(cx);
        if self.schedule.perturbs() {
            self.arm();
        }
        r
    }
}

/// A future with a scheduling point at every wake-up ([`Schedule::shuffled`]).
pub struct Shuffled<F: Future> {
    fut: Pin<Box<F>>,
    gate: Gate,
    /// This poll follows a `Pending` (or is the first): a scheduling point.
    woken: bool,
    /// A late wake-up still running.
    late: Option<Pin<Box<dyn Future<Output = ()>>>>,
}

impl<F: Future> Future for Shuffled<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if std::mem::take(&mut this.woken) {
            this.late = this.gate.schedule.late();
            this.gate.arm();
        }
        if let Some(late) = this.late.as_mut() {
            if late.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.late = None;
        }
        if this.gate.poll(cx).is_pending() {
            return Poll::Pending;
        }
        let r = this.fut.as_mut().poll(cx);
        this.woken = r.is_pending();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_zero_never_yields_nor_is_late() {
        let s = Schedule::for_seed(0, &VirtualClock::default());
        assert!(!s.perturbs());
        assert!((0..1000).all(|_| s.draw() == 0 && s.late().is_none()));
    }

    #[test]
    fn a_seed_draws_the_same_yields_every_time_and_uses_every_count() {
        let draws = |seed| {
            let s = Schedule::for_seed(seed, &VirtualClock::default());
            (0..64).map(|_| s.draw()).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        let d = draws(7);
        assert!((0..=MAX_YIELDS).all(|k| d.contains(&k)), "{d:?}");
    }

    #[test]
    fn splitmix64_matches_its_reference_outputs() {
        // The first outputs for state 1234567 from the algorithm's published C code.
        let mut s = 1_234_567u64;
        let got: Vec<u64> = (0..3).map(|_| splitmix64(&mut s)).collect();
        assert_eq!(
            got,
            vec![
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }
}
