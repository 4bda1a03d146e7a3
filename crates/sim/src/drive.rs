//! The simulator's main loop: steps turmoil and moves the virtual clock. A step in which
//! something happens takes no virtual time (messages handed over, ranks run: one instant). Time
//! moves only while the world waits: by the steps a message in flight takes to arrive when
//! nothing else happens (a network latency, `[sim] latency_ms` or a latency fault: one tick of
//! 1 ms each), or, once nothing can happen and nothing is in flight, straight to the next timer
//! or fault. So a scenario's time is what its timing model charges, with no tick per round of
//! messages. The phases are named here: a step (or a jump over the steps a message in flight
//! takes), the faults and timers due, the end and the limits, the quiet that must hold before a
//! stall analysis, the analysis, and the advance to the next timer or fault. Nothing here reads
//! the wall clock or iterates a hash map: the same seed takes the same steps.

use crate::clock::{VirtualClock, NS_PER_MS};
use crate::net::Activity;
use crate::probe::SimProbe;
use crate::{apply_due, internal, note, SimError, MAX_STEPS, MAX_VIRTUAL_MS};
use scen_core::scenario::Scenario;
use scen_core::stall;
use scen_core::trace::WaitKey;
use scen_core::verdict::Stall;

/// Steps in a row in which nothing happened and nothing was in flight before the world counts
/// as waiting (a task woken at the end of a step runs in the next one).
const QUIET_STEPS: u64 = 2;

/// What the loop keeps between two turns.
struct Driver<'a> {
    s: &'a Scenario,
    clock: &'a VirtualClock,
    probe: &'a SimProbe,
    activity: &'a Activity,
    /// Quiet steps so far.
    quiet: u64,
    /// Virtual time, in ns.
    now_ns: u64,
    /// Steps turmoil took.
    steps: u64,
    /// The activity count at the last turn that saw activity.
    last: u64,
    /// The stall last reported: repeated identical stalls (e.g. connect retries) are noted once.
    last_stall: Option<Vec<(usize, WaitKey)>>,
    /// Time jumps (vendor/turmoil/PATCHES.md, "Time jumps"): with random node order every step
    /// draws an order, so every step is taken.
    may_jump: bool,
    /// Steps the next turn takes at once (more than 1: a time jump).
    ticks: u64,
    /// The next turn's steps are the world waiting for a message in flight: each is a tick of
    /// virtual time.
    waits_on_network: bool,
}

/// Runs the simulation until every rank ended or nothing can happen any more; returns the
/// virtual time it ended at, in ns.
pub(crate) fn drive(
    sim: &mut turmoil::Sim<'_>,
    s: &Scenario,
    clock: &VirtualClock,
    probe: &SimProbe,
    activity: &Activity,
    watch: &internal::Watch,
) -> Result<u64, SimError> {
    let mut d = Driver {
        s,
        clock,
        probe,
        activity,
        quiet: 0,
        now_ns: 0,
        steps: 0,
        last: activity.get(),
        last_stall: None,
        may_jump: s.sim.loopback_queue && !s.sim.random_order,
        ticks: 1,
        waits_on_network: false,
    };
    apply_due(sim, s, probe, 0);
    loop {
        let took = d.step(sim, watch)?;
        let now_ms = d.now_ns / NS_PER_MS;
        let fault_due = probe.plan.borrow().next_ms().is_some_and(|t| t <= now_ms);
        apply_due(sim, s, probe, now_ms);
        let fired = clock.fire_due();
        let agent = s.world.launcher == scen_core::scenario::Launcher::Torchrun;
        if probe.state.borrow().ends.iter().all(|e| e.is_some()) && !(agent && probe.agent_to_act())
        {
            return Ok(d.now_ns);
        }
        d.check_limits()?;
        if !d.quiet_long_enough(sim, took, fired, fault_due) {
            continue;
        }
        let (stall, new_stall) = d.look_for_stall(now_ms);
        if !d.advance(sim, new_stall) {
            d.stop_for_good(now_ms, stall);
            return Ok(d.now_ns);
        }
    }
}

impl Driver<'_> {
    /// One turn of turmoil (one step, or a jump of `ticks` steps); returns how many steps it
    /// took. Steps the world spent waiting for a message in flight are virtual time.
    fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        watch: &internal::Watch,
    ) -> Result<u64, SimError> {
        // A step while a message with a latency is in flight is network time (a tick of 1 ms,
        // as turmoil counts that latency); without one, an instant.
        let network_time = std::mem::take(&mut self.waits_on_network) || sim.in_flight_later();
        if self.ticks > 1 {
            sim.advance(self.ticks as u32)
        } else {
            sim.step()
        }
        .map_err(|e| SimError::Turmoil(e.to_string()))?;
        if let Some(p) = watch.caught() {
            return Err(SimError::Internal { seed: 0, detail: p });
        }
        let took = std::mem::replace(&mut self.ticks, 1);
        self.steps += 1;
        if network_time {
            self.now_ns = self.now_ns.saturating_add(took * NS_PER_MS);
            self.clock.set_now_ns(self.now_ns);
        }
        Ok(took)
    }

    /// Ranks are still running at the simulator's horizon: their outcome is unknown, so there
    /// is no verdict.
    fn check_limits(&self) -> Result<(), SimError> {
        let now = self.now_ns / NS_PER_MS;
        if self.steps < MAX_STEPS && now < MAX_VIRTUAL_MS {
            return Ok(());
        }
        Err(SimError::Limit(format!(
            "the run reached the simulator's horizon ({} steps of at most {MAX_STEPS}, {} of at most {}) with ranks still running",
            self.steps,
            scen_core::trace::format_ms(now).trim(),
            scen_core::trace::format_ms(MAX_VIRTUAL_MS).trim()
        )))
    }

    /// Counts the quiet steps (activity or a fired timer starts them over). A quiet step with a
    /// message in flight is the world waiting for the network: the next turn's steps are
    /// virtual time, and it jumps over those that change nothing but the clock. Whether the
    /// world is quiet with nothing in flight long enough for a stall analysis.
    fn quiet_long_enough(
        &mut self,
        sim: &turmoil::Sim<'_>,
        took: u64,
        fired: usize,
        fault_due: bool,
    ) -> bool {
        if fired > 0 || fault_due || self.activity.get() != self.last {
            self.last = self.activity.get();
            self.quiet = 0;
            return false;
        }
        match sim.next_delivery() {
            None => {
                self.quiet += took;
                self.quiet >= QUIET_STEPS
            }
            Some(d) if d.is_zero() => {
                self.quiet = 0;
                false
            }
            Some(d) => {
                self.quiet = 0;
                self.wait_on_network(d);
                false
            }
        }
    }

    /// The world waits for a message due in `d`: the next turn's steps are virtual time, as
    /// many at once as change nothing but the clock (up to the step before the one that hands
    /// the message over), without passing the next timer or fault.
    fn wait_on_network(&mut self, d: std::time::Duration) {
        self.waits_on_network = true;
        if !self.may_jump {
            return;
        }
        let msg = (d.as_nanos().div_ceil(NS_PER_MS as u128) as u64).saturating_sub(1);
        let until = |t_ns: Option<u64>| {
            t_ns.map_or(u64::MAX, |t| t.saturating_sub(self.now_ns) / NS_PER_MS)
        };
        let timer = until(self.clock.next_deadline_ns());
        let fault = until(
            self.probe
                .plan
                .borrow()
                .next_ms()
                .map(|t| t.saturating_mul(NS_PER_MS)),
        );
        let horizon = MAX_VIRTUAL_MS.saturating_sub(self.now_ns / NS_PER_MS);
        self.ticks = [msg, timer, fault, horizon, u32::MAX as u64]
            .into_iter()
            .min()
            .unwrap_or(1)
            .max(1);
    }

    /// core's stall analysis (not while a rank waits on a busy timer: modelled work under way
    /// is not stuck); a stall not seen just before is noted, and the first one kept with the
    /// calls and rank states of that moment. Returns the stall and whether it is new.
    fn look_for_stall(&mut self, now: u64) -> (Option<Stall>, bool) {
        let (s, probe) = (self.s, self.probe);
        let stall = if self.clock.busy_pending() {
            None
        } else {
            stall::analyse(s, &probe.state.borrow(), now)
        };
        let signature = stall.as_ref().map(|st| {
            st.stuck
                .iter()
                .map(|x| (x.rank, x.wait.key()))
                .collect::<Vec<_>>()
        });
        let new_stall = signature.is_some() && signature != self.last_stall;
        self.last_stall = signature;
        if let Some(st) = stall.as_ref().filter(|_| new_stall) {
            let ranks: Vec<String> = st.stuck.iter().map(|x| x.rank.to_string()).collect();
            note(
                probe,
                now,
                format!(
                    "stall: no rank can make progress; stuck ranks [{}]",
                    ranks.join(", ")
                ),
            );
            let mut o = probe.state.borrow_mut();
            if o.first_stall.is_none() {
                let ranks = stall::rank_states(s, &o);
                o.first_stall_calls = Some((o.calls.clone(), ranks, now));
            }
            o.first_stall.get_or_insert_with(|| st.clone());
        }
        (stall, new_stall)
    }

    /// Moves the clock to the next timer or fault, applies what is due then and fires the
    /// timers (saying so after a new stall); false when there is none.
    fn advance(&mut self, sim: &mut turmoil::Sim<'_>, say_so: bool) -> bool {
        let (clock, probe) = (self.clock, self.probe);
        let next_fault = probe
            .plan
            .borrow()
            .next_ms()
            .map(|t| t.saturating_mul(NS_PER_MS));
        let next = match (clock.next_deadline_ns(), next_fault) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(t) = next else { return false };
        let now_ms = self.now_ns / NS_PER_MS;
        if say_so {
            let what = if next_fault == Some(t) {
                "fault"
            } else {
                "timeout"
            };
            let at = scen_core::trace::format_ms(t / NS_PER_MS);
            let text = format!("advancing virtual time to the next {what} at {}", at.trim());
            note(probe, now_ms, text);
        }
        self.now_ns = self.now_ns.max(t);
        clock.set_now_ns(self.now_ns);
        apply_due(sim, self.s, probe, self.now_ns / NS_PER_MS);
        clock.fire_due();
        self.quiet = 0;
        true
    }

    /// Nothing can happen any more: the stuck ranks (if any) wait forever.
    fn stop_for_good(&self, now: u64, stall: Option<Stall>) {
        if let Some(st) = stall {
            note(
                self.probe,
                now,
                "nothing can happen any more: the stuck ranks wait forever".to_string(),
            );
            self.probe.state.borrow_mut().final_stall = Some(st);
        }
    }
}
