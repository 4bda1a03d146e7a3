//! Collects what ranks report: trace events, wait records, how each rank ended.
//!
//! Shared by all hosts through an `Rc` — sound because turmoil runs every host on one thread.
//! It is observation only: no rank reads another rank's state through it. It is also where
//! faults on a rank's own progress act (the step gate): a crash as a step starts, a slow rank.

use crate::clock::VirtualClock;
use crate::faults::{crash, Acted, FaultPlan};
use crate::net::Activity;
use scen_core::diagnose::{CallRecord, GroupRecord, PlannedRecord};
use scen_core::net::Clock;
use scen_core::observe::Observed;
use scen_core::outcome::{Failure, RankEnd};
use scen_core::probe::{Fact, Probe};
use scen_core::runtime::torchrun;
use scen_core::trace::{Event, EventKind, Wait};
use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use tokio::sync::oneshot;

#[derive(Clone)]
pub struct SimProbe {
    pub state: Rc<RefCell<Observed>>,
    /// Faults that acted, in order.
    pub acted: Rc<RefCell<Vec<Acted>>>,
    /// Per rank: the switch that kills its running process.
    pub kills: Rc<RefCell<Vec<Option<oneshot::Sender<()>>>>>,
    pub activity: Activity,
    pub clock: VirtualClock,
    pub plan: Rc<RefCell<FaultPlan>>,
    /// Ranks whose process exited failed, and when (what torchrun's agent checks).
    pub failed_exits: Rc<RefCell<Vec<(usize, u64)>>>,
    /// torchrun agent checks still to come (each failed worker's exit schedules one).
    pub agent_checks: Rc<std::cell::Cell<usize>>,
}

impl SimProbe {
    pub fn new(
        ranks: usize,
        activity: Activity,
        clock: VirtualClock,
        plan: Rc<RefCell<FaultPlan>>,
    ) -> Self {
        SimProbe {
            state: Rc::new(RefCell::new(Observed::new(ranks))),
            acted: Rc::default(),
            kills: Rc::new(RefCell::new((0..ranks).map(|_| None).collect())),
            activity,
            clock,
            plan,
            failed_exits: Rc::default(),
            agent_checks: Rc::default(),
        }
    }

    /// Writes a fault's action to the trace and remembers it.
    pub fn fault_event(&self, fault: usize, rank: Option<usize>, step: Option<usize>, text: &str) {
        let t_ms = self.clock.now_ms();
        let label = self.plan.borrow().label(fault);
        tracing::info!(
            t_ms,
            kind = "fault",
            rank,
            step = step.map(|s| s + 1),
            "{label}: {text}"
        );
        self.event(Event {
            t_ms,
            rank,
            step,
            kind: EventKind::Fault,
            text: format!("{label}: {text}"),
            tag: None,
        });
        self.acted.borrow_mut().push(Acted {
            fault,
            t_ms,
            text: text.to_string(),
        });
    }

    /// Kills a rank's process: it ends now, failed, and its task is dropped (sockets close).
    pub fn kill(&self, rank: usize, fault: usize) {
        let label = self.plan.borrow().label(fault);
        self.terminate(rank, crash(fault, &label));
    }

    /// Ends a rank's process now, failed with `failure`, dropping its task (sockets close). A
    /// rank whose program already ended (its process in its teardown) keeps its verdict.
    pub fn terminate(&self, rank: usize, failure: Failure) {
        self.stop(rank, failure, false);
    }

    /// Whether `rank`'s process is still running (its program, or its teardown after it).
    pub fn process_alive(&self, rank: usize) -> bool {
        self.kills.borrow()[rank].is_some()
    }

    /// Whether the run must go on though every rank's verdict is known, under torchrun: the
    /// agent has a check to come (or a failed worker's process, still in its teardown, will
    /// exit and bring one) while a worker process is still in its teardown (the check stops it).
    pub fn agent_to_act(&self) -> bool {
        let kills = self.kills.borrow();
        let alive = |r: usize| kills[r].is_some();
        let st = self.state.borrow();
        let failing = (0..kills.len())
            .any(|r| alive(r) && matches!(st.ends[r], Some((RankEnd::Failed { .. }, _))));
        (self.agent_checks.get() > 0 || failing) && (0..kills.len()).any(alive)
    }

    /// torchrun's agent stops `rank`'s process with `failure` (SIGTERM). A process still in its
    /// teardown after its program completed fails too: its exit status is the signal's, and
    /// torchrun reports the worker failed (real PyTorch 2.15 under torchrun: a rank SIGTERMed
    /// after its last line). One whose program raised keeps that verdict.
    pub fn stop_by_agent(&self, rank: usize, failure: Failure) {
        self.stop(rank, failure, true);
    }

    fn stop(&self, rank: usize, failure: Failure, completed_too: bool) {
        let t = self.clock.now_ms();
        let mut st = self.state.borrow_mut();
        let end = st.ends[rank].as_ref().map(|(e, _)| e);
        if completed_too && end.is_some() && torchrun::stop_decides(end) {
            let step = st.step[rank].unwrap_or(0);
            st.ends[rank] = Some((RankEnd::Failed { step, failure }, t));
        } else if st.ends[rank].is_none() {
            let step = st.waits[rank]
                .as_ref()
                .map(|w| w.step)
                .or(st.step[rank])
                .unwrap_or(0);
            st.waits[rank] = None;
            st.ends[rank] = Some((RankEnd::Failed { step, failure }, t));
        }
        drop(st);
        if let Some(tx) = self.kills.borrow_mut()[rank].take() {
            let _ = tx.send(());
        }
        self.activity.bump();
    }
}

impl Probe for SimProbe {
    fn event(&self, e: Event) {
        self.activity.bump();
        self.state.borrow_mut().record_event(e);
    }

    fn set_wait(&self, rank: usize, w: Option<Wait>) {
        self.activity.bump();
        self.state.borrow_mut().waits[rank] = w;
    }

    fn fact(&self, rank: usize, fact: &Fact) {
        self.state.borrow_mut().facts.push((rank, fact.clone()));
    }

    fn ended(&self, rank: usize, end: &RankEnd, t_ms: u64) {
        self.activity.bump();
        let mut st = self.state.borrow_mut();
        st.waits[rank] = None;
        if st.ends[rank].is_none() {
            st.ends[rank] = Some((end.clone(), t_ms));
        }
    }

    fn step_gate(&self, rank: usize, step: usize) -> impl Future<Output = ()> {
        let crash = self.plan.borrow().crash_at(rank, step);
        let slow = self.plan.borrow().slow(rank);
        let this = self.clone();
        async move {
            if let Some(f) = crash {
                this.fault_event(
                    f,
                    Some(rank),
                    Some(step),
                    &format!("crash rank {rank} as it starts this step (SIGKILL)"),
                );
                this.kill(rank, f);
                std::future::pending::<()>().await;
            }
            if let Some((f, extra_ms)) = slow.filter(|(_, ms)| *ms > 0) {
                this.fault_event(
                    f,
                    Some(rank),
                    Some(step),
                    &format!("slow rank {rank}: computes {extra_ms}ms longer before this step"),
                );
                let until = this.clock.now_ms() + extra_ms;
                this.clock.sleep_until_ms(until).await;
            }
        }
    }

    fn call(&self, rec: &CallRecord) {
        self.activity.bump();
        self.state.borrow_mut().record_call(rec.clone());
    }

    fn group(&self, rec: &GroupRecord) {
        self.state.borrow_mut().groups.push_ref(rec);
    }

    fn planned_group(&self, rec: &PlannedRecord) {
        self.state.borrow_mut().groups.push_planned(rec);
    }

    fn planned_groups(&self, rec: &PlannedRecord, count: usize, backends: &[Option<String>]) {
        let mut state = self.state.borrow_mut();
        state.groups.push_planned_many(rec, count, backends);
    }
}
