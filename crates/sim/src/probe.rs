//! Collects what ranks report: trace events, wait records, how each rank ended.
//!
//! Shared by all hosts through an `Rc` — sound because turmoil runs every host on one thread.
//! It is observation only: no rank reads another rank's state through it.

use crate::net::Activity;
use scen_core::diagnose::hang::RankAt;
use scen_core::diagnose::record::CallKey;
use scen_core::diagnose::CallRecord;
use scen_core::runtime::rank::RankEnd;
use scen_core::trace::{Event, Probe, Trace, Wait};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

#[derive(Default)]
pub struct Observed {
    pub trace: Trace,
    pub waits: Vec<Option<Wait>>,
    /// The step each rank is in (or last ran).
    pub step: Vec<Option<usize>>,
    pub ends: Vec<Option<(RankEnd, u64)>>,
    pub first_stall: Option<scen_core::verdict::Stall>,
    pub final_stall: Option<scen_core::verdict::Stall>,
    /// Call records in the order they started; `call_index` finds one by key.
    pub calls: Vec<CallRecord>,
    pub call_index: BTreeMap<CallKey, usize>,
    /// Records and rank states at the first stall: the hang diagnosis' input.
    pub first_stall_calls: Option<(Vec<CallRecord>, Vec<RankAt>, u64)>,
}

#[derive(Clone)]
pub struct SimProbe {
    pub state: Rc<RefCell<Observed>>,
    pub activity: Activity,
}

impl SimProbe {
    pub fn new(ranks: usize, activity: Activity) -> Self {
        let o = Observed {
            trace: Trace::default(),
            waits: vec![None; ranks],
            step: vec![None; ranks],
            ends: vec![None; ranks],
            first_stall: None,
            final_stall: None,
            calls: Vec::new(),
            call_index: BTreeMap::new(),
            first_stall_calls: None,
        };
        SimProbe {
            state: Rc::new(RefCell::new(o)),
            activity,
        }
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
}
