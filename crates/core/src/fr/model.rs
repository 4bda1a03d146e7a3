//! PyTorch's flight-recorder dump, one rank's file, as data: what `_dump_fr_trace` (pickle) and
//! `_dump_fr_trace_json` write and `torchfrtrace` reads. Parsing accepts the versions PyTorch
//! 2.5-2.15 write (dump "2.3" to "2.10"): later versions only added keys (`thread_id`,
//! `thread_name`, `comm_lib_version` in place of `nccl_version`; docs/flight-recorder.md has the
//! table), the JSON dump writes
//! `pg_status` counters as strings and absent times as 0 where the pickle has ints and `None`,
//! and gloo's recorder never moves an entry past `scheduled` (it sets `retired` when the work
//! is done). Unknown keys are ignored; a missing required key is an error naming it.

use std::collections::BTreeMap;

/// The dump version scen writes (PyTorch 2.10+).
pub const VERSION: &str = "2.10";

/// One rank's dump.
#[derive(Debug, Clone, PartialEq)]
pub struct Dump {
    pub version: String,
    pub entries: Vec<Entry>,
    /// By pg name (NCCL) or "" (gloo): the group's desc and members.
    pub pg_config: BTreeMap<String, PgConfig>,
    /// By pg id: the rank's counters per group.
    pub pg_status: BTreeMap<String, PgStatus>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PgConfig {
    pub name: String,
    pub desc: String,
    pub ranks: Vec<usize>,
}

/// A group's sequence counters on one rank (-1: none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgStatus {
    pub last_enqueued: i64,
    pub last_started: i64,
    pub last_completed: i64,
}

/// One recorded collective or p2p call.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub record_id: u64,
    pub pg_id: u64,
    /// `(name, desc)`: ("0", "default_pg").
    pub pg_name: String,
    pub pg_desc: String,
    pub collective_seq_id: u64,
    pub p2p_seq_id: u64,
    pub op_id: u64,
    /// `nccl:all_reduce`, `gloo:broadcast`, `nccl:send 0->1`.
    pub profiling_name: String,
    pub is_p2p: bool,
    pub input_sizes: Vec<Vec<usize>>,
    pub input_dtypes: Vec<String>,
    pub output_sizes: Vec<Vec<usize>>,
    pub output_dtypes: Vec<String>,
    /// `scheduled`, `started`, `completed`.
    pub state: String,
    pub retired: bool,
    pub timeout_ms: u64,
    pub time_created_ns: u64,
    pub time_discovered_started_ns: Option<u64>,
    pub time_discovered_completed_ns: Option<u64>,
}

/// Why a dump cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not a pickle: {0}")]
    Pickle(String),
    #[error("not JSON: {0}")]
    Json(String),
    #[error("missing key `{0}`")]
    Missing(String),
    #[error("key `{key}`: expected {expected}, got {got}")]
    Type {
        key: String,
        expected: &'static str,
        got: String,
    },
    #[error("unsupported dump version `{0}` (scen reads 2.x)")]
    Version(String),
}

type J = serde_json::Value;

impl Dump {
    /// A pickled dump (`_dump_fr_trace`, the watchdog's `TORCH_FR_DUMP_TEMP_FILE` files).
    pub fn from_pickle(bytes: &[u8]) -> Result<Dump, ParseError> {
        let v = super::pickle::decode(bytes).map_err(|e| ParseError::Pickle(e.to_string()))?;
        Dump::from_value(&v)
    }

    /// A JSON dump (`_dump_fr_trace_json`).
    pub fn from_json(text: &[u8]) -> Result<Dump, ParseError> {
        let v: J = serde_json::from_slice(text).map_err(|e| ParseError::Json(e.to_string()))?;
        Dump::from_value(&v)
    }

    /// Either format: pickle files start with the protocol opcode 0x80.
    pub fn from_bytes(bytes: &[u8]) -> Result<Dump, ParseError> {
        if bytes.first() == Some(&0x80) {
            Dump::from_pickle(bytes)
        } else {
            Dump::from_json(bytes)
        }
    }

    fn from_value(v: &J) -> Result<Dump, ParseError> {
        let version = string(get(v, "version")?, "version")?;
        if !version.starts_with("2.") {
            return Err(ParseError::Version(version));
        }
        let entries = match v.get("entries") {
            Some(J::Array(a)) => a.iter().map(Entry::from_value).collect::<Result<_, _>>()?,
            Some(J::Null) | None => vec![],
            Some(o) => return Err(type_err("entries", "a list", o)),
        };
        let mut pg_config = BTreeMap::new();
        if let Some(J::Object(m)) = v.get("pg_config") {
            for (k, c) in m {
                pg_config.insert(k.clone(), PgConfig::from_value(c)?);
            }
        }
        let mut pg_status = BTreeMap::new();
        if let Some(J::Object(m)) = v.get("pg_status") {
            for (k, s) in m {
                pg_status.insert(
                    k.clone(),
                    PgStatus {
                        last_enqueued: int(get(s, "last_enqueued_collective")?, "pg_status")?,
                        last_started: int(get(s, "last_started_collective")?, "pg_status")?,
                        last_completed: int(get(s, "last_completed_collective")?, "pg_status")?,
                    },
                );
            }
        }
        Ok(Dump {
            version,
            entries,
            pg_config,
            pg_status,
        })
    }
}

impl PgConfig {
    fn from_value(v: &J) -> Result<PgConfig, ParseError> {
        let ranks = match get(v, "ranks")? {
            // Torch writes the list as Python text: "[0, 1, 2, 3]".
            J::String(s) => parse_rank_list(s)
                .ok_or_else(|| type_err("ranks", "[ints]", &J::String(s.clone())))?,
            J::Array(a) => a
                .iter()
                .map(|x| int(x, "ranks").map(|i| i as usize))
                .collect::<Result<_, _>>()?,
            o => return Err(type_err("ranks", "a list", o)),
        };
        Ok(PgConfig {
            name: v
                .get("name")
                .map(|n| string(n, "name"))
                .transpose()?
                .unwrap_or_default(),
            desc: v
                .get("desc")
                .map(|n| string(n, "desc"))
                .transpose()?
                .unwrap_or_default(),
            ranks,
        })
    }
}

fn parse_rank_list(s: &str) -> Option<Vec<usize>> {
    let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().ok())
        .collect()
}

impl Entry {
    fn from_value(v: &J) -> Result<Entry, ParseError> {
        let (pg_name, pg_desc) = match get(v, "process_group")? {
            J::Array(a) if a.len() == 2 => (
                string(&a[0], "process_group")?,
                string(&a[1], "process_group")?,
            ),
            o => return Err(type_err("process_group", "(name, desc)", o)),
        };
        let opt_u = |k: &str| -> Result<u64, ParseError> {
            match v.get(k) {
                None | Some(J::Null) => Ok(0),
                Some(x) => int(x, k).map(|i| i.max(0) as u64),
            }
        };
        let time = |k: &str| -> Result<Option<u64>, ParseError> {
            Ok(match v.get(k) {
                None | Some(J::Null) => None,
                Some(x) => Some(int(x, k)?.max(0) as u64).filter(|t| *t > 0),
            })
        };
        Ok(Entry {
            record_id: int(get(v, "record_id")?, "record_id")? as u64,
            pg_id: opt_u("pg_id")?,
            pg_name,
            pg_desc,
            collective_seq_id: int(get(v, "collective_seq_id")?, "collective_seq_id")? as u64,
            p2p_seq_id: opt_u("p2p_seq_id")?,
            op_id: opt_u("op_id")?,
            profiling_name: string(get(v, "profiling_name")?, "profiling_name")?,
            is_p2p: v.get("is_p2p").and_then(J::as_bool).unwrap_or(false),
            input_sizes: sizes(v.get("input_sizes"), "input_sizes")?,
            input_dtypes: strings(v.get("input_dtypes"), "input_dtypes")?,
            output_sizes: sizes(v.get("output_sizes"), "output_sizes")?,
            output_dtypes: strings(v.get("output_dtypes"), "output_dtypes")?,
            state: string(get(v, "state")?, "state")?,
            retired: v.get("retired").and_then(J::as_bool).unwrap_or(false),
            timeout_ms: opt_u("timeout_ms")?,
            time_created_ns: opt_u("time_created_ns")?,
            time_discovered_started_ns: time("time_discovered_started_ns")?,
            time_discovered_completed_ns: time("time_discovered_completed_ns")?,
        })
    }

    /// `all_reduce` from `nccl:all_reduce`, `send` from `nccl:send 0->1`.
    pub fn op(&self) -> &str {
        let name = self
            .profiling_name
            .split_once(':')
            .map(|(_, o)| o)
            .unwrap_or(&self.profiling_name);
        name.split_whitespace().next().unwrap_or(name)
    }

    /// `nccl` from `nccl:all_reduce`.
    pub fn backend(&self) -> &str {
        self.profiling_name
            .split_once(':')
            .map(|(b, _)| b)
            .unwrap_or("")
    }

    /// `(src, dst)` group ranks from a p2p profiling name: `nccl:send 0->1` (src->dst) or
    /// `nccl:recv 1<-0` (dst<-src), as `torchfrtrace` reads them.
    pub fn endpoints(&self) -> Option<(usize, usize)> {
        let tail = self.profiling_name.split_whitespace().nth(1)?;
        if let Some((s, d)) = tail.split_once("->") {
            return Some((s.parse().ok()?, d.parse().ok()?));
        }
        let (d, s) = tail.split_once("<-")?;
        Some((s.parse().ok()?, d.parse().ok()?))
    }
}

fn get<'a>(v: &'a J, key: &str) -> Result<&'a J, ParseError> {
    v.get(key).ok_or_else(|| ParseError::Missing(key.into()))
}

fn type_err(key: &str, expected: &'static str, got: &J) -> ParseError {
    let mut g = got.to_string();
    g.truncate(60);
    ParseError::Type {
        key: key.into(),
        expected,
        got: g,
    }
}

fn string(v: &J, key: &str) -> Result<String, ParseError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| type_err(key, "a string", v))
}

/// An int, or a string holding one (the JSON dump writes counters as strings).
fn int(v: &J, key: &str) -> Result<i64, ParseError> {
    match v {
        J::Number(n) => n.as_i64().ok_or_else(|| type_err(key, "an int", v)),
        J::String(s) => s.trim().parse().map_err(|_| type_err(key, "an int", v)),
        _ => Err(type_err(key, "an int", v)),
    }
}

fn strings(v: Option<&J>, key: &str) -> Result<Vec<String>, ParseError> {
    match v {
        None | Some(J::Null) => Ok(vec![]),
        Some(J::Array(a)) => a.iter().map(|x| string(x, key)).collect(),
        Some(o) => Err(type_err(key, "a list of strings", o)),
    }
}

fn sizes(v: Option<&J>, key: &str) -> Result<Vec<Vec<usize>>, ParseError> {
    match v {
        None | Some(J::Null) => Ok(vec![]),
        Some(J::Array(a)) => a
            .iter()
            .map(|t| match t {
                J::Array(d) => d
                    .iter()
                    .map(|x| int(x, key).map(|i| i.max(0) as usize))
                    .collect(),
                o => Err(type_err(key, "a list of shapes", o)),
            })
            .collect(),
        Some(o) => Err(type_err(key, "a list of shapes", o)),
    }
}

/// Torch's dtype names (`c10::ScalarType`) and scen's.
pub const DTYPES: [(&str, &str); 9] = [
    ("Float", "f32"),
    ("BFloat16", "bf16"),
    ("Half", "f16"),
    ("Double", "f64"),
    ("Long", "i64"),
    ("Int", "i32"),
    ("Char", "i8"),
    ("Byte", "u8"),
    ("Bool", "bool"),
];

pub fn scen_dtype(torch: &str) -> Option<&'static str> {
    DTYPES.iter().find(|(t, _)| *t == torch).map(|(_, s)| *s)
}

pub fn torch_dtype(scen: &str) -> &'static str {
    DTYPES
        .iter()
        .find(|(_, s)| *s == scen)
        .map(|(t, _)| *t)
        .unwrap_or("Float")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_parse_as_torch_writes_them() {
        assert_eq!(parse_rank_list("[0, 1, 2, 3]"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_rank_list("[]"), Some(vec![]));
        assert_eq!(parse_rank_list("0, 1"), None);
    }

    /// The shape PyTorch 2.5 writes (dump "2.3", NCCL): `nccl_version`, `duration_ms`, `frames`,
    /// no thread fields, `pg_config` keyed by group name, `None` times; and an NCCL entry the
    /// watchdog retired after a timeout without completing it.
    #[test]
    fn a_2_3_dump_parses() {
        let text = br#"{"version": "2.3", "nccl_version": "2.20.5",
          "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
          "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3,
                              "last_completed_collective": 2}},
          "entries": [{"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"],
            "collective_seq_id": 3, "p2p_seq_id": 0, "op_id": 3,
            "profiling_name": "nccl:all_reduce", "time_created_ns": 5,
            "input_sizes": [[2, 2]], "input_dtypes": ["BFloat16"],
            "output_sizes": [[2, 2]], "output_dtypes": ["BFloat16"],
            "state": "started", "duration_ms": null, "frames": [],
            "time_discovered_started_ns": 6, "time_discovered_completed_ns": null,
            "retired": true, "timeout_ms": 600000, "is_p2p": false}]}"#;
        let d = Dump::from_json(text).expect("2.3 dump");
        assert_eq!(d.pg_config["0"].ranks, vec![0, 1]);
        assert_eq!(d.pg_status["0"].last_completed, 2);
        let e = &d.entries[0];
        assert_eq!((e.op(), e.backend()), ("all_reduce", "nccl"));
        assert_eq!(e.time_discovered_started_ns, Some(6));
        assert_eq!(scen_dtype(&e.input_dtypes[0]), Some("bf16"));
        assert_eq!(
            crate::fr::import::state_of(e),
            crate::diagnose::CallState::Failed
        );
    }

    #[test]
    fn a_dump_without_version_is_refused() {
        let e = Dump::from_json(br#"{"entries": []}"#).unwrap_err();
        assert_eq!(e.to_string(), "missing key `version`");
        let e = Dump::from_json(br#"{"version": "3.0"}"#).unwrap_err();
        assert!(e.to_string().contains("unsupported dump version"));
    }
}
