//! Per-call records: the flight recorder's entry (docs/rules/c10d.md#r33) kept for every collective and
//! point-to-point call of every rank, with a fingerprint that also carries the root and the
//! reduce op (which `TORCH_DISTRIBUTED_DEBUG=DETAIL`, R32, does not compare).
//!
//! Ranks report a record through [`crate::probe::Probe::call`] when a call starts and again when
//! it ends; the collector keeps the latest state per [`CallRecord::key`].

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Collective,
    Send,
    Recv,
}

/// The flight recorder's `state` (R33), without `scheduled`: scen calls are synchronous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    Started,
    Completed,
    Failed,
}

impl CallState {
    pub fn name(self) -> &'static str {
        match self {
            CallState::Started => "started",
            CallState::Completed => "completed",
            CallState::Failed => "failed",
        }
    }
}

/// What must agree across the members of one call (R28): compared by [`super::check`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `all_reduce`, `broadcast`, `all_gather`, `barrier`, `send`, `recv`.
    pub op: String,
    /// `f32`, `bf16`, ...
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Bytes on the wire (numel x element size): what the transports actually compare.
    pub nbytes: usize,
    /// Broadcast source (global rank); `None` for rootless ops.
    pub root: Option<usize>,
    /// `SUM`, `MAX`, ... for reductions.
    pub reduce_op: Option<String>,
    /// all_to_all: rows this rank sends to and receives from each member. Uneven splits are
    /// legal (the input shapes then differ between ranks); what must agree is each sender's
    /// `input_split_sizes[j]` with receiver `j`'s `output_split_sizes[i]` (checked by
    /// [`super::check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub splits: Option<Splits>,
}

/// The split sizes of one all_to_all call on one rank, in rows, by group rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Splits {
    /// `input_split_sizes`: rows sent to each member.
    pub send_rows: Vec<usize>,
    /// `output_split_sizes`: rows expected from each member.
    pub recv_rows: Vec<usize>,
    /// Elements per row (the product of the shape past dim 0).
    pub row_elems: usize,
}

impl Fingerprint {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// `all_reduce f32[4] op=SUM`, `broadcast f32[4] src=0`.
impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}{:?}", self.op, self.dtype, self.shape)?;
        if let Some(r) = self.root {
            write!(f, " src={r}")?;
        }
        if let Some(o) = &self.reduce_op {
            write!(f, " op={o}")?;
        }
        Ok(())
    }
}

/// One call of one rank, as the flight recorder would hold it (R33), plus the scenario line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The global rank that made the call.
    pub rank: usize,
    /// The group's c10d name ("0" for WORLD) and its user label.
    pub group: String,
    pub group_label: String,
    /// Global ranks of the group, in group-rank order.
    pub group_ranks: crate::ranks::Ranks,
    pub backend: String,
    pub kind: CallKind,
    /// `collective_seq_id` for collectives; for p2p the sequence of `(src, dst)` on the group.
    pub seq: u64,
    /// p2p only: the other side (global rank).
    pub peer: Option<usize>,
    pub fp: Fingerprint,
    /// 0-based scenario step and the scenario line it starts on.
    pub step: usize,
    pub line: usize,
    pub state: CallState,
    pub t_start_ms: u64,
    pub t_end_ms: Option<u64>,
    /// The same times in microseconds: the simulator's clock follows its timing model below a
    /// millisecond, so a call of a fast collective starts and ends within one (timelines and
    /// flight-recorder dumps use these). Real modes: the milliseconds x 1000.
    #[serde(default)]
    pub t_start_us: u64,
    #[serde(default)]
    pub t_end_us: Option<u64>,
    /// p2p: the tag its send and recv are matched by (gloo); 0 for collectives.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tag: u32,
}

fn is_zero(t: &u32) -> bool {
    *t == 0
}

/// What identifies one call of one rank: `(rank, group, kind, seq, peer)`.
pub type CallKey = (usize, String, CallKind, u64, Option<usize>);

impl CallRecord {
    pub fn key(&self) -> CallKey {
        (
            self.rank,
            self.group.clone(),
            self.kind,
            self.seq,
            self.peer,
        )
    }

    /// `(src, dst)` of a p2p call.
    pub fn endpoints(&self) -> Option<(usize, usize)> {
        match (self.kind, self.peer) {
            (CallKind::Send, Some(p)) => Some((self.rank, p)),
            (CallKind::Recv, Some(p)) => Some((p, self.rank)),
            _ => None,
        }
    }

    /// `all_reduce #2 on WORLD`, `send #1 0->1 on WORLD`.
    pub fn call_name(&self) -> String {
        match self.endpoints() {
            Some((s, d)) if self.tag != 0 => format!(
                "{} #{} {s}->{d} tag {} on {}",
                self.fp.op, self.seq, self.tag, self.group_label
            ),
            Some((s, d)) => format!(
                "{} #{} {s}->{d} on {}",
                self.fp.op, self.seq, self.group_label
            ),
            None => format!("{} #{} on {}", self.fp.op, self.seq, self.group_label),
        }
    }

    /// One flight-recorder-like line: `WORLD (0) #2 r1 all_reduce f32[4] op=SUM completed @line 17`.
    pub fn render(&self) -> String {
        let p2p = match self.endpoints() {
            Some((s, d)) => format!(" {s}->{d}"),
            None => String::new(),
        };
        format!(
            "{} ({}) {}#{}{p2p} r{} {} {} line {}",
            self.group_label,
            self.group,
            if self.kind == CallKind::Collective {
                ""
            } else {
                "p2p "
            },
            self.seq,
            self.rank,
            self.fp,
            self.state.name(),
            self.line
        )
    }
}
