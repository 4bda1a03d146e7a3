//! The simulator's main loop: steps turmoil and, when nothing moves for long enough that no
//! message can be in flight, either jumps the clock to the next timer or fault or stops (nothing
//! will ever happen again). Its phases are named here: a step (or a time jump), the faults and
//! timers due, the end and the limits, the quiet time that must pass before a stall analysis,
//! the analysis, and the advance to the next timer or fault. Nothing here reads the wall clock
//! or iterates a hash map: the same seed takes the same steps.

use crate::clock::VirtualClock;
use crate::net::Activity;
use crate::probe::SimProbe;
use crate::{apply_due, internal, note, SimError, MAX_STEPS, MAX_VIRTUAL_MS};
use scen_core::scenario::{FaultKind, Scenario};
use scen_core::stall;
use scen_core::trace::WaitKey;
use scen_core::verdict::Stall;

/// What the loop keeps between two turns.
struct Driver<'a> {
    s: &'a Scenario,
    clock: &'a VirtualClock,
    probe: &'a SimProbe,
    activity: &'a Activity,
    /// Quiet steps needed before a stall analysis (no message can still be in flight).
    quiet_needed: u64,
    /// Quiet steps so far.
    quiet: u64,
    /// Virtual time skipped by advances to the next timer or fault.
    offset: u64,
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
}

/// Runs the simulation until every rank ended or nothing can happen any more; returns the
/// virtual time it ended at.
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
        quiet_needed: quiet_needed_ms(s),
        quiet: 0,
        offset: 0,
        steps: 0,
        last: activity.get(),
        last_stall: None,
        may_jump: s.sim.loopback_queue && !s.sim.random_order,
        ticks: 1,
    };
    apply_due(sim, s, probe, 0);
    loop {
        let (now, took) = d.step(sim, watch)?;
        let fault_due = probe.plan.borrow().next_ms().is_some_and(|t| t <= now);
        apply_due(sim, s, probe, now);
        let fired = clock.fire_due();
        if probe.state.borrow().ends.iter().all(|e| e.is_some()) {
            return Ok(now);
        }
        d.check_limits(now)?;
        if !d.quiet_long_enough(sim, now, took, fired, fault_due) {
            continue;
        }
        let (stall, new_stall) = d.look_for_stall(now);
        if !d.advance(sim, now, new_stall) {
            d.stop_for_good(now, stall);
            return Ok(now);
        }
    }
}

/// Long enough that no message can still be in flight, per-link latency faults included.
fn quiet_needed_ms(s: &Scenario) -> u64 {
    let link_max_ms = s
        .faults
        .iter()
        .filter_map(|f| match &f.kind {
            FaultKind::Latency {
                fixed_ms, max_ms, ..
            } => fixed_ms.or(*max_ms),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    s.sim.latency_max_ms.max(link_max_ms) + 3
}

impl Driver<'_> {
    /// One turn of turmoil (one step, or a time jump of `ticks` steps); returns the virtual
    /// time after it and how many steps it took.
    fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        watch: &internal::Watch,
    ) -> Result<(u64, u64), SimError> {
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
        self.steps += took;
        let now = self.steps + self.offset;
        self.clock.set_now(now);
        Ok((now, took))
    }

    /// Ranks are still running at the simulator's horizon: their outcome is unknown, so there
    /// is no verdict.
    fn check_limits(&self, now: u64) -> Result<(), SimError> {
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

    /// Counts the quiet steps (activity or a fired timer starts them over); before enough have
    /// passed, the next turn may jump over idle steps. Whether a stall analysis is due.
    fn quiet_long_enough(
        &mut self,
        sim: &turmoil::Sim<'_>,
        now: u64,
        took: u64,
        fired: usize,
        fault_due: bool,
    ) -> bool {
        if fired > 0 || self.activity.get() != self.last {
            self.last = self.activity.get();
            self.quiet = 0;
            return false;
        }
        self.quiet += took;
        if self.quiet >= self.quiet_needed {
            return true;
        }
        if self.may_jump && !fault_due {
            self.ticks = jump(
                sim,
                self.clock,
                self.probe,
                now,
                self.quiet_needed - self.quiet,
                MAX_STEPS - self.steps,
            );
        }
        false
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
    fn advance(&mut self, sim: &mut turmoil::Sim<'_>, now: u64, say_so: bool) -> bool {
        let (clock, probe) = (self.clock, self.probe);
        let next_fault = probe.plan.borrow().next_ms();
        let next = match (clock.next_deadline(), next_fault) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(t) = next else { return false };
        if say_so {
            let what = if next_fault == Some(t) {
                "fault"
            } else {
                "timeout"
            };
            let at = scen_core::trace::format_ms(t);
            let text = format!("advancing virtual time to the next {what} at {}", at.trim());
            note(probe, now, text);
        }
        self.offset += t.saturating_sub(now);
        clock.set_now(t);
        apply_due(sim, self.s, probe, t);
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

/// How many steps the simulation may take at once after step `now`, in which no rank did
/// anything, no timer fired and no fault applied: every rank's task is idle (a rank does I/O,
/// traces or sets a timer when it is woken), so the steps until the next message is handed to a
/// host, the next timer or fault, the quiet period's end (`quiet_left`, the stall check) or the
/// step limit (`steps_left`) change nothing but the clock. 1 (an ordinary step) when the next
/// step may deliver a message. The same steps are taken, the same messages delivered at the
/// same times, the same random draws made: traces are unchanged (their hashes too).
fn jump(
    sim: &turmoil::Sim<'_>,
    clock: &VirtualClock,
    probe: &SimProbe,
    now: u64,
    quiet_left: u64,
    steps_left: u64,
) -> u64 {
    // A message due in `d` ms is handed over by the step that brings the network there: the
    // `ceil(d)`-th from now; the ones before it are empty.
    let Some(msg) = (match sim.next_delivery() {
        None => Some(u64::MAX),
        Some(d) if d.is_zero() => None,
        Some(d) => Some((d.as_nanos().div_ceil(1_000_000) as u64).saturating_sub(1)),
    }) else {
        return 1;
    };
    // A timer or fault at `t` is handled after step `t`: jump there at most.
    let timer = clock
        .next_deadline()
        .map_or(u64::MAX, |t| t.saturating_sub(now));
    let fault = probe
        .plan
        .borrow()
        .next_ms()
        .map_or(u64::MAX, |t| t.saturating_sub(now));
    let horizon = MAX_VIRTUAL_MS.saturating_sub(now);
    [
        msg,
        timer,
        fault,
        quiet_left,
        steps_left,
        horizon,
        u32::MAX as u64,
    ]
    .into_iter()
    .min()
    .unwrap_or(1)
    .max(1)
}
