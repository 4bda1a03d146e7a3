//! The trace: every observable thing a run did, in order, with its virtual time.
//!
//! A trace is the unit of reproducibility: the same scenario and seed give the same events,
//! byte for byte, and [`Trace::hash`] pins that. Ranks report events and what they are blocked
//! on ([`Wait`], typed: [`WaitOn`]) through a [`crate::probe::Probe`]; the simulator and the
//! hardware runner each collect them.

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
    /// What the event is where a reader must know it without parsing `text` (not part of the
    /// rendered trace, so not of its hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<EventTag>,
}

/// A typed name for an event a reader decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTag {
    /// R16's warning: a TCPStore client's connect failed and is retried. Whether it happens
    /// depends on which process started first (timing, not the model).
    ConnectRetry,
    /// TCPStore's log when a master cannot bind torchrun's agent-store port and goes on as its
    /// client: it names the port, which differs between modes (hw picks its own MASTER_PORT).
    AgentPortBind,
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
    /// What it waits in, typed: every decision about a wait (diagnosis, watchdog, verdict
    /// class) reads this, never [`Wait::what`].
    pub on: WaitOn,
    /// Human text, for reports only: "store get 'default_pg/0//1//cpu//1'", "recv from rank 2
    /// (all_reduce #3)".
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

/// What tells one wait from another, apart from when it began: its step, what it waits in,
/// its group and sequence number and the ranks it waits for.
pub type WaitKey = (usize, WaitOn, Option<String>, Option<u64>, Vec<usize>);

impl Wait {
    /// Two records with equal keys are the same wait (a stall seen again).
    pub fn key(&self) -> WaitKey {
        let (on, group, peers) = (self.on.clone(), self.group.clone(), self.peers.clone());
        (self.step, on, group, self.seq, peers)
    }
}

/// Which way a transfer goes, seen from the waiting rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dir {
    /// It waits for a message from the peer.
    Recv,
    /// It waits until the peer takes (or is ready for) its message.
    Send,
}

/// Why a rank waits on the TCPStore for a key: the c10d mechanism that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreUse {
    /// gloo's connectFullMesh: each member's address (R24).
    GlooMesh,
    /// A device communicator's unique id, set by its first member.
    UniqueId,
    /// A communicator's own bootstrap: each member's address.
    CommJoin,
    /// `store_based_barrier` after `new_group` (R17).
    StoreBarrier,
    /// `TORCH_DISTRIBUTED_DEBUG=DETAIL`'s monitoredBarrier before a collective (R32).
    MonitoredBarrier,
    /// The program's own `get` or `wait` on the default group's store (scenario/store.rs).
    Program,
}

/// What a rank waits in, for whom ([`Wait::peers`]) and on which store key or address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WaitOn {
    /// A message inside a collective's algorithm (or, for a send, its receiver's readiness).
    Transfer { dir: Dir },
    /// A transfer with a peer whose process has exited, which the device backend does not
    /// notice.
    ExitedPeer { dir: Dir },
    /// A collective whose members disagree in a way the backend does not check: it keeps
    /// waiting until a timeout rule applies. `why` names the difference.
    Unchecked { why: String },
    /// A point-to-point call (gloo's send waits for its recv to be posted).
    P2p { dir: Dir },
    /// A p2p recv whose send has another byte count: the device backend keeps waiting.
    P2pUnchecked,
    /// Inside the device library's collective.
    DeviceCall,
    /// A device communicator's init, waiting for its members.
    DeviceInit,
    /// A blocking get of `key` (the first key still missing of a loop of gets).
    StoreGet { key: String, used_by: StoreUse },
    /// Connecting to the TCPStore at `host:port` (R16).
    StoreConnect { host: String, port: u16 },
    /// The store host waiting for its clients to check in (`waitForWorkers`, R16).
    StoreWorkers { world_size: usize },
    /// A call a flight-recorder dump shows started and not finished (`scen import-fr`).
    Recorded,
}

impl WaitOn {
    /// The kind of wait as verdict classes name it: no numbers, ranks, keys or ports.
    pub fn class(&self) -> &'static str {
        match self {
            WaitOn::Transfer { dir } | WaitOn::ExitedPeer { dir } => match dir {
                Dir::Recv => "recv from rank",
                Dir::Send => "send to rank",
            },
            WaitOn::Unchecked { .. } => "unchecked mismatch",
            WaitOn::P2p { dir: Dir::Recv } => "recv",
            WaitOn::P2p { dir: Dir::Send } => "send",
            WaitOn::P2pUnchecked => "recv of another size",
            WaitOn::DeviceCall => "inside the device library",
            WaitOn::DeviceInit => "device communicator init",
            WaitOn::StoreGet { used_by, .. } => match used_by {
                StoreUse::GlooMesh => "store get",
                StoreUse::UniqueId => "store get unique id",
                StoreUse::CommJoin => "communicator init",
                StoreUse::StoreBarrier => "store based barrier",
                StoreUse::MonitoredBarrier => "DETAIL monitoredBarrier",
                StoreUse::Program => "the program's store wait",
            },
            WaitOn::StoreConnect { .. } => "connect to TCPStore",
            WaitOn::StoreWorkers { .. } => "TCPStore server waiting",
            WaitOn::Recorded => "in the call",
        }
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

    /// FNV-1a over the rendered trace: equal hashes mean byte-identical traces. Streamed
    /// event by event: a large world's rendered trace is hundreds of MiB (issue 31).
    pub fn hash(&self) -> u64 {
        let mut h = Fnv1a::default();
        let mut line = String::new();
        for e in &self.events {
            line.clear();
            let _ = writeln!(line, "{}", render_event(e));
            h.write(line.as_bytes());
        }
        h.0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streamed_hash_is_the_hash_of_the_rendered_trace() {
        let event = |t_ms, rank, text: &str| Event {
            t_ms,
            rank,
            step: rank,
            kind: EventKind::Info,
            text: text.into(),
            tag: None,
        };
        let trace = Trace {
            events: vec![event(0, None, "start"), event(1234, Some(3), "r3 done é")],
        };
        assert_eq!(trace.hash(), fnv1a(trace.render().as_bytes()));
        assert_eq!(Trace::default().hash(), fnv1a(b""));
    }
}
