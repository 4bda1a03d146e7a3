//! The run as a Chrome/Perfetto trace (`scen run --timeline out.json`, Trace Event Format):
//! a process per rank with a "steps" track and a "calls" track, a slice per step and per
//! collective/p2p call in virtual time (µs), flow arrows from each send to its recv, stuck
//! steps and calls drawn to the end of the run and marked `stuck`.

use super::diagnosis::Diagnosis;
use super::record::{CallKind, CallRecord, CallState};
use crate::scenario::Scenario;
use crate::trace::{EventKind, Trace};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const STEPS_TID: u64 = 0;
const CALLS_TID: u64 = 1;

/// The trace document: `{"traceEvents": [...], "displayTimeUnit": "ms", ...}`.
pub fn render(
    s: &Scenario,
    trace: &Trace,
    records: &[CallRecord],
    diagnosis: &Diagnosis,
    end_ms: u64,
) -> Value {
    let mut ev: Vec<Value> = Vec::new();
    for r in 0..s.world.size() {
        ev.push(
            json!({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
            "args": {"name": format!("rank {r}")}}),
        );
        ev.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
            "args": {"sort_index": r}}),
        );
        ev.push(
            json!({"ph": "M", "name": "thread_name", "pid": r, "tid": STEPS_TID,
            "args": {"name": "steps"}}),
        );
        ev.push(
            json!({"ph": "M", "name": "thread_name", "pid": r, "tid": CALLS_TID,
            "args": {"name": "calls"}}),
        );
    }
    step_slices(s, trace, end_ms, &mut ev);
    call_slices(s, records, diagnosis, end_ms, &mut ev);
    flows(records, &mut ev);
    json!({
        "traceEvents": ev,
        "displayTimeUnit": "ms",
        "otherData": {"scenario": s.name, "file": s.file, "clock": "virtual"},
    })
}

fn us(ms: u64) -> u64 {
    ms * 1000
}

fn step_slices(s: &Scenario, trace: &Trace, end_ms: u64, ev: &mut Vec<Value>) {
    let mut open: BTreeMap<(usize, usize), (u64, String)> = BTreeMap::new();
    for e in &trace.events {
        let (Some(r), Some(step)) = (e.rank, e.step) else {
            continue;
        };
        let st = &s.steps[step];
        match e.kind {
            EventKind::Start => {
                open.insert((r, step), (e.t_ms, e.text.clone()));
            }
            EventKind::Done | EventKind::Error => {
                if let Some((t0, text)) = open.remove(&(r, step)) {
                    let failed = e.kind == EventKind::Error;
                    let mut v = json!({"ph": "X", "name": st.label(), "cat": "step",
                        "pid": r, "tid": STEPS_TID, "ts": us(t0), "dur": us(e.t_ms - t0),
                        "args": {"call": text, "line": st.loc.line,
                                 if failed { "error" } else { "result" }: e.text}});
                    if failed {
                        v["cname"] = json!("bad");
                    }
                    ev.push(v);
                }
            }
            EventKind::Warn | EventKind::Log => {
                ev.push(
                    json!({"ph": "i", "s": "t", "name": e.kind.name(), "cat": "note",
                    "pid": r, "tid": STEPS_TID, "ts": us(e.t_ms), "args": {"text": e.text}}),
                );
            }
            _ => {}
        }
    }
    for ((r, step), (t0, text)) in open {
        let st = &s.steps[step];
        ev.push(
            json!({"ph": "X", "name": format!("STUCK {}", st.label()), "cat": "step,stuck",
            "pid": r, "tid": STEPS_TID, "ts": us(t0), "dur": us(end_ms.saturating_sub(t0)),
            "cname": "terrible",
            "args": {"call": text, "line": st.loc.line, "stuck": true}}),
        );
    }
}

fn call_slices(
    s: &Scenario,
    records: &[CallRecord],
    diagnosis: &Diagnosis,
    end_ms: u64,
    ev: &mut Vec<Value>,
) {
    for c in records {
        let stuck = c.state == CallState::Started;
        let end_us = c.t_end_us.unwrap_or(us(end_ms));
        let mut args = json!({"group": format!("{} ({})", c.group_label, c.group),
            "seq": c.seq, "op": c.fp.op, "dtype": c.fp.dtype, "shape": c.fp.shape,
            "state": c.state.name(), "line": c.line, "file": s.file});
        if let Some(r) = c.fp.root {
            args["root"] = json!(r);
        }
        if let Some(o) = &c.fp.reduce_op {
            args["reduce_op"] = json!(o);
        }
        if let Some(p) = c.peer {
            args["peer"] = json!(p);
        }
        if stuck {
            args["stuck"] = json!(true);
            if let Some(h) = &diagnosis.hang {
                if let Some(st) = h.stuck.iter().find(|x| x.rank == c.rank) {
                    args["never_joined"] = json!(st.never_joined);
                    args["waits_for"] = json!(st.waits_for);
                }
            }
        }
        let mut v = json!({"ph": "X", "name": c.call_name(), "cat": "call",
            "pid": c.rank, "tid": CALLS_TID, "ts": c.t_start_us,
            "dur": end_us.saturating_sub(c.t_start_us), "args": args});
        match c.state {
            CallState::Started => v["cname"] = json!("terrible"),
            CallState::Failed => v["cname"] = json!("bad"),
            CallState::Completed => {}
        }
        ev.push(v);
    }
}

/// A flow arrow from each send's start to its recv's end (or start, if it never ended).
fn flows(records: &[CallRecord], ev: &mut Vec<Value>) {
    let mut recvs: BTreeMap<(String, usize, usize, u64), &CallRecord> = BTreeMap::new();
    for c in records.iter().filter(|c| c.kind == CallKind::Recv) {
        if let Some((s, d)) = c.endpoints() {
            recvs.insert((c.group.clone(), s, d, c.seq), c);
        }
    }
    let mut id = 0u64;
    for c in records.iter().filter(|c| c.kind == CallKind::Send) {
        let Some((s, d)) = c.endpoints() else {
            continue;
        };
        let Some(r) = recvs.get(&(c.group.clone(), s, d, c.seq)) else {
            continue;
        };
        id += 1;
        let name = format!("{} {s}->{d} #{}", c.group_label, c.seq);
        ev.push(json!({"ph": "s", "id": id, "name": name, "cat": "p2p",
            "pid": s, "tid": CALLS_TID, "ts": c.t_start_us}));
        ev.push(
            json!({"ph": "f", "bp": "e", "id": id, "name": name, "cat": "p2p",
            "pid": d, "tid": CALLS_TID, "ts": r.t_end_us.unwrap_or(r.t_start_us)}),
        );
    }
}
