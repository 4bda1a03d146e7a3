//! A run's call records as the flight-recorder dumps a real job in the same state would leave:
//! one [`Dump`] per rank with its entries (completed calls `completed` and retired, the call a
//! stuck rank is in `started`, a call that failed retired but not completed, as NCCL's watchdog
//! leaves a timed-out one), `pg_config` keyed by group name (as ProcessGroupNCCL writes it, which
//! `torchfrtrace` needs to match entries to groups) and `pg_status`. Times are the run's clock
//! (virtual in the simulator) in nanoseconds.

use super::model::{torch_dtype, Dump, Entry, PgConfig, PgStatus, VERSION};
use crate::diagnose::{CallKind, CallRecord, CallState};
use std::collections::BTreeMap;

/// `torchfrtrace`'s default file prefix (`TORCH_FR_DUMP_TEMP_FILE`'s basename).
pub const FILE_PREFIX: &str = "nccl_trace_rank_";

/// The recorder's backend name for scen's.
fn torch_backend(b: &str) -> &str {
    match b {
        "gloo" => "gloo",
        _ => "xccl",
    }
}

fn desc(group: &str, label: &str) -> String {
    if group == "0" {
        "default_pg".into()
    } else {
        label.to_string()
    }
}

fn pg_id(group: &str, ids: &BTreeMap<String, u64>) -> u64 {
    group.parse().unwrap_or_else(|_| ids[group])
}

/// `xccl:send 0->1` / `xccl:recv 1<-0` in group ranks, as ProcessGroupNCCL names p2p calls.
fn p2p_name(c: &CallRecord) -> Option<String> {
    let (src, dst) = c.endpoints()?;
    let local = |g: usize| c.group_ranks.iter().position(|m| *m == g).unwrap_or(g);
    let b = torch_backend(&c.backend);
    Some(match c.kind {
        CallKind::Recv => format!("{b}:recv {}<-{}", local(dst), local(src)),
        _ => format!("{b}:send {}->{}", local(src), local(dst)),
    })
}

/// One dump per rank in `0..world`, from every rank's call records.
pub fn dumps(world: usize, calls: &[CallRecord]) -> Vec<Dump> {
    let mut names: Vec<&str> = calls.iter().map(|c| c.group.as_str()).collect();
    names.sort();
    names.dedup();
    let ids: BTreeMap<String, u64> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), 1000 + i as u64))
        .collect();
    let world_ranks: Vec<usize> = (0..world).collect();
    (0..world)
        .map(|r| {
            let mut mine: Vec<&CallRecord> = calls.iter().filter(|c| c.rank == r).collect();
            mine.sort_by_key(|c| c.t_start_us);
            let mut pg_config = BTreeMap::new();
            pg_config.insert(
                "0".to_string(),
                PgConfig {
                    name: "0".into(),
                    desc: "default_pg".into(),
                    ranks: world_ranks.clone(),
                },
            );
            let mut pg_status: BTreeMap<String, PgStatus> = BTreeMap::new();
            let mut op_ids: BTreeMap<&str, u64> = BTreeMap::new();
            let mut coll_seq: BTreeMap<&str, u64> = BTreeMap::new();
            let mut entries = Vec::new();
            for (i, c) in mine.iter().enumerate() {
                let d = desc(&c.group, &c.group_label);
                pg_config.insert(
                    c.group.clone(),
                    PgConfig {
                        name: c.group.clone(),
                        desc: d.clone(),
                        ranks: c.group_ranks.to_vec(),
                    },
                );
                let op_id = op_ids.entry(&c.group).or_insert(0);
                *op_id += 1;
                let is_p2p = c.kind != CallKind::Collective;
                if !is_p2p {
                    coll_seq.insert(&c.group, c.seq);
                    let id = pg_id(&c.group, &ids).to_string();
                    let st = pg_status.entry(id).or_insert(PgStatus {
                        last_enqueued: -1,
                        last_started: -1,
                        last_completed: -1,
                    });
                    st.last_enqueued = st.last_enqueued.max(c.seq as i64);
                    st.last_started = st.last_started.max(c.seq as i64);
                    if c.state == CallState::Completed {
                        st.last_completed = st.last_completed.max(c.seq as i64);
                    }
                }
                let name = p2p_name(c)
                    .unwrap_or_else(|| format!("{}:{}", torch_backend(&c.backend), c.fp.op));
                let dtype = torch_dtype(&c.fp.dtype).to_string();
                let t0 = c.t_start_us * 1000;
                let (state, retired, done) = match c.state {
                    CallState::Completed => ("completed", true, c.t_end_us.map(|t| t * 1000)),
                    CallState::Started => ("started", false, None),
                    CallState::Failed => ("started", true, None),
                };
                entries.push(Entry {
                    record_id: i as u64,
                    pg_id: pg_id(&c.group, &ids),
                    pg_name: c.group.clone(),
                    pg_desc: d,
                    collective_seq_id: if is_p2p {
                        coll_seq.get(c.group.as_str()).copied().unwrap_or(0)
                    } else {
                        c.seq
                    },
                    p2p_seq_id: if is_p2p { c.seq } else { 0 },
                    op_id: *op_id,
                    profiling_name: name,
                    is_p2p,
                    input_sizes: vec![c.fp.shape.clone()],
                    input_dtypes: vec![dtype.clone()],
                    output_sizes: vec![c.fp.shape.clone()],
                    output_dtypes: vec![dtype],
                    state: state.into(),
                    retired,
                    timeout_ms: 1_800_000,
                    time_created_ns: t0,
                    time_discovered_started_ns: Some(t0),
                    time_discovered_completed_ns: done,
                });
            }
            Dump {
                version: VERSION.into(),
                entries,
                pg_config,
                pg_status,
            }
        })
        .collect()
}

impl Dump {
    /// As `_dump_fr_trace_json` writes it (pg_status counters as text, absent times 0).
    pub fn to_json(&self) -> String {
        use serde_json::{json, Map, Value};
        let entries: Vec<Value> = self
            .entries
            .iter()
            .map(|e| {
                json!({
                    "collective_seq_id": e.collective_seq_id,
                    "duration_ms": null,
                    "input_dtypes": e.input_dtypes,
                    "input_sizes": e.input_sizes,
                    "is_p2p": e.is_p2p,
                    "op_id": e.op_id,
                    "output_dtypes": e.output_dtypes,
                    "output_sizes": e.output_sizes,
                    "p2p_seq_id": e.p2p_seq_id,
                    "pg_id": e.pg_id,
                    "process_group": [e.pg_name, e.pg_desc],
                    "profiling_name": e.profiling_name,
                    "record_id": e.record_id,
                    "retired": e.retired,
                    "state": e.state,
                    "thread_id": "0",
                    "thread_name": "scen",
                    "time_created_ns": e.time_created_ns,
                    "time_discovered_completed_ns": e.time_discovered_completed_ns.unwrap_or(0),
                    "time_discovered_started_ns": e.time_discovered_started_ns.unwrap_or(0),
                    "timeout_ms": e.timeout_ms,
                })
            })
            .collect();
        let mut cfg = Map::new();
        for (k, c) in &self.pg_config {
            cfg.insert(
                k.clone(),
                json!({"desc": c.desc, "name": c.name, "ranks": rank_text(&c.ranks)}),
            );
        }
        let mut status = Map::new();
        for (k, s) in &self.pg_status {
            status.insert(
                k.clone(),
                json!({
                    "last_completed_collective": s.last_completed.to_string(),
                    "last_enqueued_collective": s.last_enqueued.to_string(),
                    "last_started_collective": s.last_started.to_string(),
                }),
            );
        }
        json!({
            "comm_lib_version": "",
            "entries": entries,
            "nccl_comm_state": {},
            "pg_config": cfg,
            "pg_status": status,
            "version": self.version,
        })
        .to_string()
    }

    /// As `_dump_fr_trace` and the watchdog write it: a pickled dict, `process_group` a tuple.
    pub fn to_pickle(&self) -> Vec<u8> {
        use serde_pickle::{HashableValue as H, Value as P};
        let s = |x: &str| P::String(x.to_string());
        let i = |x: u64| P::I64(x as i64);
        let dict = |kv: Vec<(&str, P)>| {
            P::Dict(
                kv.into_iter()
                    .map(|(k, v)| (H::String(k.to_string()), v))
                    .collect(),
            )
        };
        let shapes = |v: &[Vec<usize>]| {
            P::List(
                v.iter()
                    .map(|d| P::List(d.iter().map(|x| P::I64(*x as i64)).collect()))
                    .collect(),
            )
        };
        let strs = |v: &[String]| P::List(v.iter().map(|x| s(x)).collect());
        let opt = |t: Option<u64>| t.map(i).unwrap_or(P::None);
        let entries = self
            .entries
            .iter()
            .map(|e| {
                dict(vec![
                    ("record_id", i(e.record_id)),
                    ("pg_id", i(e.pg_id)),
                    (
                        "process_group",
                        P::Tuple(vec![s(&e.pg_name), s(&e.pg_desc)]),
                    ),
                    ("collective_seq_id", i(e.collective_seq_id)),
                    ("p2p_seq_id", i(e.p2p_seq_id)),
                    ("op_id", i(e.op_id)),
                    ("profiling_name", s(&e.profiling_name)),
                    ("time_created_ns", i(e.time_created_ns)),
                    ("input_sizes", shapes(&e.input_sizes)),
                    ("input_dtypes", strs(&e.input_dtypes)),
                    ("output_sizes", shapes(&e.output_sizes)),
                    ("output_dtypes", strs(&e.output_dtypes)),
                    ("state", s(&e.state)),
                    (
                        "time_discovered_started_ns",
                        opt(e.time_discovered_started_ns),
                    ),
                    (
                        "time_discovered_completed_ns",
                        opt(e.time_discovered_completed_ns),
                    ),
                    ("retired", P::Bool(e.retired)),
                    ("timeout_ms", i(e.timeout_ms)),
                    ("is_p2p", P::Bool(e.is_p2p)),
                    ("thread_id", s("0")),
                    ("thread_name", s("scen")),
                    ("duration_ms", P::None),
                    ("frames", P::List(vec![])),
                ])
            })
            .collect();
        let cfg = P::Dict(
            self.pg_config
                .iter()
                .map(|(k, c)| {
                    (
                        H::String(k.clone()),
                        dict(vec![
                            ("name", s(&c.name)),
                            ("desc", s(&c.desc)),
                            ("ranks", s(&rank_text(&c.ranks))),
                        ]),
                    )
                })
                .collect(),
        );
        let status = P::Dict(
            self.pg_status
                .iter()
                .map(|(k, st)| {
                    (
                        H::String(k.clone()),
                        dict(vec![
                            ("last_enqueued_collective", P::I64(st.last_enqueued)),
                            ("last_started_collective", P::I64(st.last_started)),
                            ("last_completed_collective", P::I64(st.last_completed)),
                        ]),
                    )
                })
                .collect(),
        );
        let top = dict(vec![
            ("version", s(&self.version)),
            ("comm_lib_version", s("")),
            ("entries", P::List(entries)),
            ("nccl_comm_state", P::Dict(Default::default())),
            ("pg_config", cfg),
            ("pg_status", status),
        ]);
        serde_pickle::value_to_vec(&top, serde_pickle::SerOptions::new())
            .expect("a pickle of plain values always encodes")
    }
}

/// The two encodings torch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `_dump_fr_trace` and the watchdog's files; what `torchfrtrace` reads.
    Pickle,
    /// `_dump_fr_trace_json`.
    Json,
}

/// One file per dump, named as PyTorch names them: `nccl_trace_rank_R` (pickle) or
/// `nccl_trace_rank_R.json`, with its bytes.
pub fn files(dumps: &[Dump], format: Format) -> Vec<(String, Vec<u8>)> {
    dumps
        .iter()
        .enumerate()
        .map(|(r, d)| match format {
            Format::Pickle => (format!("{FILE_PREFIX}{r}"), d.to_pickle()),
            Format::Json => (format!("{FILE_PREFIX}{r}.json"), d.to_json().into_bytes()),
        })
        .collect()
}

/// Writes [`files`] into `dir` (created if missing), for a process without the CLI's output
/// module (`run --hw`'s watchdog). Each file is written whole or not at all (temp file, then
/// rename).
pub fn write_dir(
    dir: &std::path::Path,
    dumps: &[Dump],
    format: Format,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    for (name, bytes) in files(dumps, format) {
        let path = dir.join(&name);
        let tmp = dir.join(format!(".{name}.tmp"));
        if let Err(e) = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        out.push(path);
    }
    Ok(out)
}

/// `[0, 1, 2]`: member lists as torch writes them (Python's list text).
fn rank_text(r: &[usize]) -> String {
    format!("{r:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::Fingerprint;

    fn rec(rank: usize, seq: u64, state: CallState) -> CallRecord {
        CallRecord {
            rank,
            group: "0".into(),
            group_label: "WORLD".into(),
            group_ranks: vec![0, 1].into(),
            backend: "xccl".into(),
            kind: CallKind::Collective,
            seq,
            peer: None,
            fp: Fingerprint {
                op: "all_reduce".into(),
                dtype: "bf16".into(),
                shape: vec![2, 3],
                nbytes: 12,
                root: None,
                reduce_op: Some("SUM".into()),
                splits: None,
            },
            step: 1,
            line: 1,
            state,
            t_start_ms: seq,
            t_end_ms: Some(seq + 1),
            t_start_us: seq * 1000,
            t_end_us: Some((seq + 1) * 1000),
            tag: 0,
        }
    }

    #[test]
    fn pickle_and_json_round_trip_through_the_parser() {
        let calls = vec![
            rec(0, 1, CallState::Completed),
            rec(1, 1, CallState::Completed),
            rec(0, 2, CallState::Started),
        ];
        let d = dumps(2, &calls);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].entries[1].state, "started");
        assert_eq!(d[0].pg_status["0"].last_completed, 1);
        assert_eq!(d[0].pg_status["0"].last_enqueued, 2);
        assert_eq!(d[1].entries.len(), 1);
        for dump in &d {
            assert_eq!(&Dump::from_pickle(&dump.to_pickle()).unwrap(), dump);
            assert_eq!(&Dump::from_json(dump.to_json().as_bytes()).unwrap(), dump);
        }
    }
}
