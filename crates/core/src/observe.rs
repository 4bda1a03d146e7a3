//! What a run's observer has seen of its ranks: trace events, what each rank waits on, the step
//! it is in, how it ended, its call and group records, and the stalls found so far.
//!
//! The simulator fills it from its probe, the hardware launcher from the ranks' side channel;
//! both hand it to `stall` and `verdict`, so one analysis serves every mode.

use crate::diagnose::hang::RankAt;
use crate::diagnose::record::CallKey;
use crate::diagnose::{CallRecord, GroupLog};
use crate::outcome::RankEnd;
use crate::probe::Fact;
use crate::trace::{Event, Trace, Wait};
use crate::verdict::Stall;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Observed {
    pub trace: Trace,
    pub waits: Vec<Option<Wait>>,
    /// The step each rank is in (or last ran).
    pub step: Vec<Option<usize>>,
    pub ends: Vec<Option<(RankEnd, u64)>>,
    pub first_stall: Option<Stall>,
    pub final_stall: Option<Stall>,
    /// Call records in the order they started; `call_index` finds one by key.
    pub calls: Vec<CallRecord>,
    /// Every rank's counter-named `new_group` calls, in the order they were made.
    pub groups: GroupLog,
    pub call_index: BTreeMap<CallKey, usize>,
    /// Typed facts the ranks reported (rank, fact), in the order they came.
    pub facts: Vec<(usize, Fact)>,
    /// Records and rank states at the first stall: the hang diagnosis' input.
    pub first_stall_calls: Option<(Vec<CallRecord>, Vec<RankAt>, u64)>,
}

impl Observed {
    /// Nothing seen yet of `ranks` ranks.
    pub fn new(ranks: usize) -> Self {
        Observed {
            waits: vec![None; ranks],
            step: vec![None; ranks],
            ends: vec![None; ranks],
            ..Observed::default()
        }
    }

    /// Appends an event; an event of a rank at a step says the rank is in that step.
    pub fn record_event(&mut self, e: Event) {
        if let (Some(r), Some(step)) = (e.rank, e.step) {
            if r < self.step.len() {
                self.step[r] = Some(step);
            }
        }
        self.trace.events.push(e);
    }

    /// A call record, new or an update of one already seen (same key).
    pub fn record_call(&mut self, rec: CallRecord) {
        match self.call_index.get(&rec.key()).copied() {
            Some(i) => self.calls[i] = rec,
            None => {
                self.call_index.insert(rec.key(), self.calls.len());
                self.calls.push(rec);
            }
        }
    }
}
