//! The trace: every observable thing a run did, in order, with its virtual time.
//!
//! A trace is the unit of reproducibility: the same scenario and seed give the same events,
//! byte for byte, and [`Trace::hash`] pins that. Ranks report events and what they are blocked
//! on through a [`Probe`]; the simulator and the hardware runner each collect them.

use crate::diagnose::record::CallRecord;
use crate::diagnose::{GroupRecord, PlannedRecord};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub t_ms: u64,
    /// `None` for the world itself (faults, services, the simulator's own notes).
    pub rank: Option<usize>,
    /// 0-based step index, when the event belongs to a step.
    pub step: Option<usize>,
    pub kind: EventKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A step began.
    Start,
    /// A step finished.
    Done,
    /// A step raised an error; the rank's program stops.
    Error,
    /// A warning PyTorch would print.
    Warn,
    /// A `log` step's line.
    Log,
    /// Model detail worth seeing (a group created, a store key set, a communicator built).
    Info,
    /// The run's end: hang analysis and verdict notes.
    Verdict,
    /// A `[[faults]]` entry acting (the simulator's fault plan).
    Fault,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Done => "done",
            EventKind::Error => "error",
            EventKind::Warn => "warn",
            EventKind::Log => "log",
            EventKind::Info => "info",
            EventKind::Verdict => "verdict",
            EventKind::Fault => "fault",
        }
    }
}

/// What a rank is blocked on right now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wait {
    pub step: usize,
    /// Human text: "store get 'default_pg/0//1//cpu//1'", "recv from rank 2 (all_reduce #3)".
    pub what: String,
    /// The c10d group involved, by name (and handle), if any.
    pub group: Option<String>,
    /// Collective sequence number on that group, if any.
    pub seq: Option<u64>,
    /// The ranks whose action would unblock this one.
    pub peers: Vec<usize>,
    pub since_ms: u64,
    /// When the real system would give up with an error; `None` = it waits forever.
    pub deadline_ms: Option<u64>,
    /// The error raised at the deadline (a Python exception).
    pub timeout_error: Option<crate::outcome::Failure>,
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
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Trace {
    pub events: Vec<Event>,
}

impl Trace {
    /// One line per event: `[   12.345s] r3 #4 done  all_reduce ...`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            let _ = writeln!(out, "{}", render_event(e));
        }
        out
    }

    /// FNV-1a over the rendered trace: equal hashes mean byte-identical traces.
    pub fn hash(&self) -> u64 {
        fnv1a(self.render().as_bytes())
    }
}

pub fn render_event(e: &Event) -> String {
    let who = match e.rank {
        Some(r) => format!("r{r}"),
        None => "--".to_string(),
    };
    let step = match e.step {
        Some(s) => format!("#{}", s + 1),
        None => "-".to_string(),
    };
    format!(
        "{} {:>4} {:>3} {:<7} {}",
        format_ms(e.t_ms),
        who,
        step,
        e.kind.name(),
        e.text
    )
}

/// `1800.000s`: virtual time as reports print it.
pub fn format_ms(t_ms: u64) -> String {
    format!("{:>5}.{:03}s", t_ms / 1000, t_ms % 1000)
}

pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write(bytes);
    h.0
}

/// FNV-1a fed in parts: the same value as [`fnv1a`] of the parts concatenated.
pub struct Fnv1a(pub u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf29ce484222325)
    }
}

impl Fnv1a {
    pub fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}
