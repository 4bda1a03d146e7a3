//! Collects what ranks report: trace events, wait records, how each rank ended.
//!
//! Shared by all hosts through an `Rc` — sound because turmoil runs every host on one thread.
//! It is observation only: no rank reads another rank's state through it. It is also where
//! faults on a rank's own progress act (the step gate): a crash as a step starts, a slow rank.

use crate::clock::VirtualClock;
use crate::faults::{crash_error, Acted, FaultPlan};
use crate::net::Activity;
use scen_core::diagnose::hang::RankAt;
use scen_core::diagnose::record::CallKey;
use scen_core::diagnose::{CallRecord, GroupRecord};
use scen_core::runtime::net::Clock;
use scen_core::runtime::rank::RankEnd;
use scen_core::trace::{Event, EventKind, Probe, Trace, Wait};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use tokio::sync::oneshot;

#[derive(Default)]
pub struct Observed {
    pub trace: Trace,
    pub waits: Vec<Option<Wait>>,
    /// The step each rank is in (or last ran).
    pub step: Vec<Option<usize>>,
    pub ends: Vec<Option<(RankEnd, u64)>>,
    pub first_stall: Option<scen_core::verdict::Stall>,
    pub final_stall: Option<scen_core::verdict::Stall>,
    /// Faults that acted, in order.
    pub acted: Vec<Acted>,
    /// Per rank: the switch that kills its running process.
    pub kills: Vec<Option<oneshot::Sender<()>>>,
    /// Call records in the order they started; `call_index` finds one by key.
    pub calls: Vec<CallRecord>,
    /// Every rank's counter-named `new_group` calls, in the order they were made.
    pub groups: Vec<GroupRecord>,
    pub call_index: BTreeMap<CallKey, usize>,
    /// Records and rank states at the first stall: the hang diagnosis' input.
    pub first_stall_calls: Option<(Vec<CallRecord>, Vec<RankAt>, u64)>,
}

#[derive(Clone)]
pub struct SimProbe {
    pub state: Rc<RefCell<Observed>>,
    pub activity: Activity,
    pub clock: VirtualClock,
    pub plan: Rc<RefCell<FaultPlan>>,
}

impl SimProbe {
    pub fn new(
        ranks: usize,
        activity: Activity,
        clock: VirtualClock,
        plan: Rc<RefCell<FaultPlan>>,
    ) -> Self {
        let o = Observed {
            waits: vec![None; ranks],
            step: vec![None; ranks],
            ends: vec![None; ranks],
            kills: (0..ranks).map(|_| None).collect(),
            ..Observed::default()
        };
        SimProbe {
            state: Rc::new(RefCell::new(o)),
            activity,
            clock,
            plan,
        }
    }

    /// Writes a fault's action to the trace and remembers it.
    pub fn fault_event(&self, fault: usize, rank: Option<usize>, step: Option<usize>, text: &str) {
        let t_ms = self.clock.now_ms();
        let label = self.plan.borrow().label(fault);
        self.event(Event {
            t_ms,
            rank,
            step,
            kind: EventKind::Fault,
            text: format!("{label}: {text}"),
        });
        self.state.borrow_mut().acted.push(Acted {
            fault,
            t_ms,
            text: text.to_string(),
        });
    }

    /// Kills a rank's process: it ends now, failed, and its task is dropped (sockets close).
    pub fn kill(&self, rank: usize, fault: usize) {
        let label = self.plan.borrow().label(fault);
        self.terminate(rank, crash_error(&label));
    }

    /// Ends a rank's process now, failed with `error`, dropping its task (sockets close).
    pub fn terminate(&self, rank: usize, error: String) {
        let t = self.clock.now_ms();
        let mut st = self.state.borrow_mut();
        if st.ends[rank].is_some() {
            return;
        }
        let step = st.waits[rank]
            .as_ref()
            .map(|w| w.step)
            .or(st.step[rank])
            .unwrap_or(0);
        st.waits[rank] = None;
        st.ends[rank] = Some((RankEnd::Failed { step, error }, t));
        if let Some(tx) = st.kills[rank].take() {
            let _ = tx.send(());
        }
        drop(st);
        self.activity.bump();
    }
}

impl Probe for SimProbe {
    fn event(&self, e: Event) {
        self.activity.bump();
        let mut s = self.state.borrow_mut();
        if let (Some(r), Some(step)) = (e.rank, e.step) {
            s.step[r] = Some(step);
        }
        s.trace.events.push(e);
    }

    fn set_wait(&self, rank: usize, w: Option<Wait>) {
        self.activity.bump();
        self.state.borrow_mut().waits[rank] = w;
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
        let mut s = self.state.borrow_mut();
        match s.call_index.get(&rec.key()).copied() {
            Some(i) => s.calls[i] = rec.clone(),
            None => {
                let i = s.calls.len();
                s.call_index.insert(rec.key(), i);
                s.calls.push(rec.clone());
            }
        }
    }

    fn group(&self, rec: &GroupRecord) {
        self.state.borrow_mut().groups.push(rec.clone());
    }
}
