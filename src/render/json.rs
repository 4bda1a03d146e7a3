//! The JSON report, schema version 2 (`scen run --format json`, `--report FILE`): a stable,
//! documented view of a run (docs/report.md, docs/report.schema.json) built from core's
//! [`Report`]. It fixes what the internal form leaves to the reader: step numbers are 1-based
//! as in the human report and `[[expect]] step`, with the step's id beside them; outcomes are
//! spelled as expectations spell them (`completes`, `fails`, `hangs`); every group reference is
//! its c10d name (`group`, "0" for WORLD) plus its label (`group_label`); each rank says its rank.

use scen_core::diagnose::{CallKind, CallRecord};
use scen_core::report::Report;
use scen_core::scenario::Scenario;
use scen_core::trace::Wait;
use scen_core::verdict::{RankVerdict, Stall};
use serde::{Deserialize, Serialize};

/// 2: each failed rank's `failure` says why as data (raised, killed, exited, over_limit,
/// interrupted); `wait.timeout_error` is still its text. 1: `error` text only.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonReport {
    pub schema_version: u32,
    pub scenario: String,
    pub file: String,
    /// `sim`, `hw` or `torch`.
    pub mode: String,
    /// `processes` or `torchrun`: how the job was started (`[world] launcher`, `--launcher`).
    pub launcher: String,
    pub seed: u64,
    /// Every expectation holds (the exit code of `scen run` is 0 exactly then).
    pub passed: bool,
    /// The verdict class: the set of per-rank outcomes, as `scen explore` groups seeds.
    pub verdict_class: String,
    pub end_ms: u64,
    /// The same in microseconds (the simulator's clock follows its timing model below a
    /// millisecond; the real modes: `end_ms` x 1000).
    pub end_us: u64,
    pub ranks: Vec<JsonRank>,
    pub expectations: Vec<JsonExpectation>,
    pub first_stall: Option<JsonStall>,
    pub final_stall: Option<JsonStall>,
    pub calls: Vec<JsonCall>,
    pub diagnosis: JsonDiagnosis,
    pub notes: Vec<String>,
    pub trace_hash: String,
    pub trace: Vec<JsonEvent>,
    /// Per rank, its time inside the device library (hardware mode with device groups only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_time: Vec<JsonDeviceTime>,
}

/// How much of a rank process's time was inside the device library's calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonDeviceTime {
    pub rank: usize,
    pub library: String,
    /// Microseconds inside the library's calls (communicator creation included).
    pub inside_us: u64,
    /// Microseconds since the rank's process loaded the library.
    pub of_us: u64,
    pub calls: u64,
}

/// A step reference: 1-based number, id (if the scenario gave one), label, scenario line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRef {
    pub step: usize,
    pub step_id: Option<String>,
    pub step_label: String,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRank {
    pub rank: usize,
    /// `completes`, `fails` or `hangs`.
    pub outcome: String,
    /// The step it failed or hangs in; `null` when it completed.
    pub at: Option<StepRef>,
    /// When it completed or failed (virtual ms in sim mode); `null` when it hangs.
    pub t_ms: Option<u64>,
    /// The failure's text, as the human report prints it; `null` unless it failed.
    pub error: Option<String>,
    /// Why it failed, typed (docs/report.md); `null` unless it failed.
    pub failure: Option<scen_core::outcome::Failure>,
    pub wait: Option<JsonWait>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonWait {
    pub at: StepRef,
    pub what: String,
    pub group: Option<String>,
    pub group_label: Option<String>,
    pub seq: Option<u64>,
    pub peers: Vec<usize>,
    pub since_ms: u64,
    /// When the real system would raise an error; `null` = it waits forever.
    pub deadline_ms: Option<u64>,
    pub timeout_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonExpectation {
    pub rank: usize,
    pub expected: String,
    pub actual: String,
    pub holds: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonStall {
    pub t_ms: u64,
    pub stuck: Vec<JsonStuck>,
    pub others: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonStuck {
    pub rank: usize,
    pub wait: JsonWait,
    /// For each awaited peer: what that peer is doing.
    pub peers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonCall {
    pub rank: usize,
    pub group: String,
    pub group_label: String,
    pub group_ranks: Vec<usize>,
    pub backend: String,
    /// `collective`, `send` or `recv`.
    pub kind: String,
    pub seq: u64,
    pub peer: Option<usize>,
    pub op: String,
    pub dtype: String,
    pub shape: Vec<usize>,
    pub nbytes: usize,
    pub root: Option<usize>,
    pub reduce_op: Option<String>,
    pub at: StepRef,
    /// `started`, `completed` or `failed` (the flight recorder's states).
    pub state: String,
    pub t_start_ms: u64,
    pub t_end_ms: Option<u64>,
    /// The same in microseconds (the simulator's clock follows its timing model below a
    /// millisecond).
    pub t_start_us: u64,
    pub t_end_us: Option<u64>,
    /// A send or recv's tag, when not the default 0 (gloo pairs them by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonDiagnosis {
    /// The diagnosis as the human report prints it, one line each.
    pub lines: Vec<String>,
    /// The structured diagnosis (mismatches, wait-for graph). Not covered by the schema
    /// version: its fields may grow between releases.
    pub detail: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonEvent {
    pub t_ms: u64,
    /// `null` for the world itself (faults, services).
    pub rank: Option<usize>,
    /// 1-based step number, `null` outside steps.
    pub step: Option<usize>,
    pub kind: String,
    pub text: String,
}

/// The v1 view of a run.
pub fn build(s: &Scenario, r: &Report) -> JsonReport {
    JsonReport {
        schema_version: SCHEMA_VERSION,
        scenario: r.scenario.clone(),
        file: r.file.clone(),
        mode: r.mode.name().to_string(),
        launcher: r.launcher.name().to_string(),
        seed: r.seed,
        passed: r.expectations_hold(),
        verdict_class: scen_core::class::class_key(s, r),
        end_ms: r.end_ms,
        end_us: r.end_us,
        ranks: r
            .ranks
            .iter()
            .enumerate()
            .map(|(i, v)| rank(s, i, v))
            .collect(),
        expectations: r
            .expectations
            .iter()
            .map(|e| JsonExpectation {
                rank: e.rank,
                expected: e.expected.clone(),
                actual: e.actual.clone(),
                holds: e.holds,
            })
            .collect(),
        first_stall: r.first_stall.as_ref().map(|st| stall(s, st)),
        final_stall: r.final_stall.as_ref().map(|st| stall(s, st)),
        calls: r.calls.iter().map(|c| call(s, c)).collect(),
        diagnosis: JsonDiagnosis {
            lines: r.diagnosis.lines(&s.file),
            detail: serde_json::to_value(&r.diagnosis).unwrap_or(serde_json::Value::Null),
        },
        notes: r.notes.clone(),
        trace_hash: r.trace_hash.clone(),
        trace: r
            .trace
            .events
            .iter()
            .map(|e| JsonEvent {
                t_ms: e.t_ms,
                rank: e.rank,
                step: e.step.map(|i| i + 1),
                kind: serde_json::to_value(e.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                text: e.text.clone(),
            })
            .collect(),
        device_time: r
            .device_time
            .iter()
            .map(|d| JsonDeviceTime {
                rank: d.rank,
                library: d.library.clone(),
                inside_us: d.inside_us,
                of_us: d.of_us,
                calls: d.calls,
            })
            .collect(),
    }
}

fn step_ref(s: &Scenario, index: usize) -> StepRef {
    match s.steps.get(index) {
        Some(st) => StepRef {
            step: index + 1,
            step_id: st.id.clone(),
            step_label: st.label(),
            line: st.loc.line,
        },
        None => StepRef {
            step: index + 1,
            step_id: None,
            step_label: format!("step {}", index + 1),
            line: 0,
        },
    }
}

fn rank(s: &Scenario, i: usize, v: &RankVerdict) -> JsonRank {
    let base = JsonRank {
        rank: i,
        outcome: v.kind().to_string(),
        at: None,
        t_ms: None,
        error: None,
        failure: None,
        wait: None,
    };
    match v {
        RankVerdict::Completed { t_ms } => JsonRank {
            t_ms: Some(*t_ms),
            ..base
        },
        RankVerdict::Failed {
            step,
            failure,
            t_ms,
        } => JsonRank {
            at: Some(step_ref(s, *step)),
            t_ms: Some(*t_ms),
            error: Some(failure.text()),
            failure: Some(failure.clone()),
            ..base
        },
        RankVerdict::Hung { step, wait } => JsonRank {
            at: Some(step_ref(s, *step)),
            wait: wait.as_ref().map(|w| wait_v1(s, w)),
            ..base
        },
        RankVerdict::Elsewhere => base,
    }
}

/// A wait's group as the runtime names it ("LABEL (NAME)") split into name and label.
fn split_group(text: &str) -> (String, String) {
    match text.strip_suffix(')').and_then(|t| t.rsplit_once(" (")) {
        Some((label, name)) => (name.to_string(), label.to_string()),
        None => (text.to_string(), text.to_string()),
    }
}

fn wait_v1(s: &Scenario, w: &Wait) -> JsonWait {
    let (group, group_label) = match w.group.as_deref().map(split_group) {
        Some((n, l)) => (Some(n), Some(l)),
        None => (None, None),
    };
    JsonWait {
        at: step_ref(s, w.step),
        what: w.what.clone(),
        group,
        group_label,
        seq: w.seq,
        peers: w.peers.clone(),
        since_ms: w.since_ms,
        deadline_ms: w.deadline_ms,
        timeout_error: w.timeout_error.as_ref().map(|f| f.text()),
    }
}

fn stall(s: &Scenario, st: &Stall) -> JsonStall {
    JsonStall {
        t_ms: st.t_ms,
        stuck: st
            .stuck
            .iter()
            .map(|x| JsonStuck {
                rank: x.rank,
                wait: wait_v1(s, &x.wait),
                peers: x.peers.clone(),
            })
            .collect(),
        others: st.others.clone(),
    }
}

fn call(s: &Scenario, c: &CallRecord) -> JsonCall {
    JsonCall {
        rank: c.rank,
        group: c.group.clone(),
        group_label: c.group_label.clone(),
        group_ranks: c.group_ranks.to_vec(),
        backend: c.backend.clone(),
        kind: match c.kind {
            CallKind::Collective => "collective",
            CallKind::Send => "send",
            CallKind::Recv => "recv",
        }
        .to_string(),
        seq: c.seq,
        peer: c.peer,
        op: c.fp.op.clone(),
        dtype: c.fp.dtype.clone(),
        shape: c.fp.shape.clone(),
        nbytes: c.fp.nbytes,
        root: c.fp.root,
        reduce_op: c.fp.reduce_op.clone(),
        at: step_ref(s, c.step),
        state: c.state.name().to_string(),
        t_start_ms: c.t_start_ms,
        t_end_ms: c.t_end_ms,
        t_start_us: c.t_start_us,
        t_end_us: c.t_end_us,
        tag: (c.tag != 0).then_some(c.tag),
    }
}
