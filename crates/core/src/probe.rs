//! How ranks report to whoever runs them: events, waits, call and group records. Apart from
//! the trace (which it feeds) so that the trace depends on nothing above it, while the records
//! the probe carries stay with the diagnosis that reads them.

use crate::diagnose::record::CallRecord;
use crate::diagnose::{GroupRecord, PlannedRecord};
use crate::trace::{Event, Wait};
use serde::{Deserialize, Serialize};

/// A fact a rank reports for its runner and the report to act on, typed: its trace event says
/// the same in words, and nothing reads those words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// This rank's process serves a TCPStore on `port` (R16): a rank connecting there waits on
    /// this process.
    StoreServer { port: u16 },
    /// The `expect` of `step` does not apply on this rank: the call is on a group the rank is
    /// not in, a no-op (R27).
    ExpectNotApplied { step: usize },
    /// The rank's process spent `inside_us` of its `of_us` microseconds inside the device
    /// library's `calls` calls (hardware mode, measured around each call): the report's
    /// `device_time`.
    DeviceTime {
        library: String,
        inside_us: u64,
        of_us: u64,
        calls: u64,
    },
}

/// How ranks report to whoever runs them.
pub trait Probe: Clone + 'static {
    fn event(&self, e: Event);
    /// Sets (or clears) what `rank` is blocked on.
    fn set_wait(&self, rank: usize, w: Option<Wait>);
    /// Awaited by a rank right after it starts `step`: the runner's hook for faults that act
    /// on a rank's own progress (a slow rank's extra compute; a crash when it starts a step
    /// never completes). Runners without faults pass straight through.
    fn step_gate(&self, _rank: usize, _step: usize) -> impl std::future::Future<Output = ()> {
        std::future::ready(())
    }
    /// A typed fact about `rank` (see [`Fact`]). Runners that act on none ignore it.
    fn fact(&self, _rank: usize, _fact: &Fact) {}
    /// A collective or p2p call record, reported when the call starts and again when it ends
    /// (same rank, group, kind, seq and peer; new state). Runners that keep no flight record
    /// ignore it.
    fn call(&self, _rec: &CallRecord) {}
    /// The rank's program ended (its verdict, at `t_ms`); its process lives on for the
    /// scenario's `exit_ms` (the interpreter's teardown) before its sockets close.
    fn ended(&self, _rank: usize, _end: &crate::outcome::RankEnd, _t_ms: u64) {}
    /// A `new_group` call that took a name from the group counter (members and non-members).
    fn group(&self, _rec: &GroupRecord) {}
    /// [`Probe::group`] for a call of a list many ranks share (sglang's start-up plan): a runner
    /// that keeps runs of such calls (the simulator) adds it in O(1), without building its
    /// record. sglang's start-up makes O(W) calls on each of W ranks.
    fn planned_group(&self, rec: &PlannedRecord) {
        self.group(&rec.record());
    }
    /// `count` consecutive planned calls from `rec` (the names and call indexes advance
    /// together), call `i` passing `backends[source.backend_slot(i)]`: a rank's calls between
    /// two of its groups, in one report (the simulator adds them in O(1)).
    fn planned_groups(&self, rec: &PlannedRecord, count: usize, backends: &[Option<String>]) {
        for k in 0..count {
            let call = rec.call + k;
            let slot = rec.source.backend_slot(call);
            let backend = backends[slot].as_deref().expect("a checked backend");
            self.planned_group(&PlannedRecord {
                name: (rec.name.0, rec.name.1 + k as u64),
                call,
                backend,
                ..*rec
            });
        }
    }
}
