//! The recorder's JSON lines (python/scen/recorder.py) read back: one [`Proc`] per process
//! file, its calls with how each ended and how the process ended. A line that is not a
//! record is an error naming file:line; a last line cut short (the process was killed while
//! writing it) is dropped, as the record it began never completed.

use super::RecordError;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// How one recorded call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEnd {
    Done,
    /// It raised: the exception's type and message.
    Error {
        exc: String,
        msg: String,
    },
    /// Still running when the process ended (killed or hung in it).
    Open,
}

/// One torch.distributed call of one process.
#[derive(Debug, Clone)]
pub struct Call {
    pub op: String,
    /// The user's `file:line`.
    pub at: String,
    /// The call's recorded arguments (recorder.py's `_describe`).
    pub args: Map<String, Value>,
    /// What it returned (`rank` of init, `handle` of new_group, `works`, recv's `src`).
    pub result: Map<String, Value>,
    pub end: CallEnd,
    /// Wall-clock ms when it was called and when it returned or raised (recordings made
    /// before scen recorded times have none).
    pub t_call_ms: Option<u64>,
    pub t_end_ms: Option<u64>,
    /// A master TCPStore the call made was freed before the program ended: when (wall-clock
    /// ms; recorder.py `_made_store`).
    pub t_freed_ms: Option<u64>,
}

/// An exception that ended the process.
#[derive(Debug, Clone, PartialEq)]
pub struct Raised {
    pub exc: String,
    pub msg: String,
    pub at: String,
    /// Wall-clock ms when it reached the interpreter's top.
    pub t_ms: Option<u64>,
}

/// The program ending its own process (recorder.py `_own_end`), after its last call.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnEnd {
    pub how: OwnEndKind,
    pub at: String,
    /// Wall-clock ms when it was called.
    pub t_ms: Option<u64>,
}

/// How the program ended its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnEndKind {
    /// `sys.exit(code)` / `exit(code)`: the interpreter's teardown, then this status.
    Exit { code: i32 },
    /// `os._exit(code)`: at once, without the interpreter's teardown.
    ExitNow { code: i32 },
    /// A signal to itself whose default action ends it (os.kill, os.abort, raise_signal).
    Signal(i32),
    /// Its program completed, then a signal of its own ended its process in the interpreter's
    /// teardown: gloo's abort at exit (`terminate called without an active exception`,
    /// SIGABRT), which only torchrun's agent sees (its worker status; user-path 7/1180).
    TeardownSignal(i32),
}

/// Everything one process recorded.
#[derive(Debug, Clone, Default)]
pub struct Proc {
    /// The record file, for messages.
    pub file: String,
    pub pid: u64,
    /// The launcher's environment (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID, ...).
    pub env: BTreeMap<String, String>,
    pub calls: Vec<Call>,
    pub raised: Option<Raised>,
    /// Its interpreter ran atexit handlers (a normal end or a raise, not a signal).
    pub exited: bool,
    /// Wall-clock ms of its atexit handlers.
    pub t_exit_ms: Option<u64>,
    /// Wall-clock ms when its process was gone, its teardown done (`scen record` saw its
    /// lifeline close: src/cmd/lifeline.rs).
    pub t_gone_ms: Option<u64>,
    /// Wall-clock ms when its program's globals were freed in its teardown (written where the
    /// program made a master TCPStore: its server closed then).
    pub t_globals_ms: Option<u64>,
    /// It ended its own process after its last call.
    pub own_end: Option<OwnEnd>,
    /// torchrun's agent process: the failed workers' exit statuses it saw, (pid, exitcode;
    /// negative: killed by that signal; when it noted it).
    pub worker_exits: Vec<WorkerExit>,
    /// This rank's exit status as torchrun's agent saw it, if the agent recorded it failed.
    pub agent_status: Option<i32>,
    /// Wall-clock ms when torchrun's agent noted that status (its check that saw the exit).
    pub agent_seen_ms: Option<u64>,
    /// The interpreter had no torch: its path.
    pub no_torch: Option<String>,
}

impl Proc {
    /// torchrun's agent ended its process with its SIGTERM (the worker status it noted).
    pub fn stopped_by_agent(&self) -> bool {
        self.agent_status == Some(-crate::outcome::SIGTERM)
    }

    /// The signal that ended its process, when torchrun's agent noted one that is not its own
    /// SIGTERM (the process's own: gloo's abort).
    pub fn own_fatal_signal(&self) -> Option<i32> {
        self.agent_status
            .filter(|&s| s < 0 && s != -crate::outcome::SIGTERM)
            .map(|s| -s)
    }

    /// When its program ended by itself: its exception reached the top, or it ended its own
    /// process (`sys.exit`, a signal to itself).
    pub fn own_end_ms(&self) -> Option<u64> {
        match (&self.raised, &self.own_end) {
            (Some(e), _) => e.t_ms,
            (None, Some(e)) => e.t_ms,
            (None, None) => None,
        }
    }

    /// The global rank: what init_process_group returned, else $RANK, else 0.
    pub fn rank(&self) -> usize {
        self.calls
            .iter()
            .find_map(|c| c.result.get("rank").and_then(Value::as_u64))
            .map(|r| r as usize)
            .or_else(|| self.env.get("RANK").and_then(|r| r.parse().ok()))
            .unwrap_or(0)
    }

    /// The world size: init's, else $WORLD_SIZE, else 1.
    pub fn world_size(&self) -> usize {
        self.calls
            .iter()
            .find_map(|c| c.result.get("world_size").and_then(Value::as_u64))
            .map(|r| r as usize)
            .or_else(|| self.env.get("WORLD_SIZE").and_then(|r| r.parse().ok()))
            .unwrap_or(1)
    }
}

fn text(m: &Map<String, Value>, k: &str) -> String {
    m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// Parses one process's record file.
pub fn parse(file: &str, content: &str) -> Result<Proc, RecordError> {
    let mut p = Proc {
        file: file.to_string(),
        ..Default::default()
    };
    let lines: Vec<&str> = content.lines().collect();
    let mut by_index: BTreeMap<u64, usize> = BTreeMap::new();
    for (n, line) in lines.iter().enumerate() {
        let bad = |message: String| RecordError::BadRecord {
            file: file.to_string(),
            line: n + 1,
            message,
        };
        let mut m: Map<String, Value> = match serde_json::from_str(line) {
            Ok(m) => m,
            // A process killed mid-write leaves its last line cut: that record never happened.
            Err(_) if n + 1 == lines.len() && !content.ends_with('\n') => break,
            Err(e) => return Err(bad(format!("not a JSON record: {e}"))),
        };
        let ev = text(&m, "ev");
        let index = m.get("i").and_then(Value::as_u64);
        let t_ms = m.remove("t").and_then(|t| t.as_u64());
        match ev.as_str() {
            "proc" => {
                p.pid = m.get("pid").and_then(Value::as_u64).unwrap_or(0);
                if let Some(Value::Object(env)) = m.get("env") {
                    p.env = env
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect();
                }
            }
            "call" => {
                // An exit the program caught (`except SystemExit`) did not end it.
                p.own_end = None;
                let i = index.ok_or_else(|| bad("a call without `i`".into()))?;
                let (op, at) = (text(&m, "op"), text(&m, "at"));
                if op.is_empty() {
                    return Err(bad("a call without `op`".into()));
                }
                for k in ["ev", "i", "op", "at"] {
                    m.remove(k);
                }
                by_index.insert(i, p.calls.len());
                p.calls.push(Call {
                    op,
                    at,
                    args: m,
                    result: Map::new(),
                    end: CallEnd::Open,
                    t_call_ms: t_ms,
                    t_end_ms: None,
                    t_freed_ms: None,
                });
            }
            "done" | "error" => {
                let c = &mut p.calls[recorded_call(&by_index, index, &ev).map_err(bad)?];
                c.t_end_ms = t_ms;
                if ev == "done" {
                    c.end = CallEnd::Done;
                    for k in ["ev", "i"] {
                        m.remove(k);
                    }
                    c.result = m;
                } else {
                    c.end = CallEnd::Error {
                        exc: text(&m, "exc"),
                        msg: text(&m, "msg"),
                    };
                }
            }
            // A batch_isend_irecv's work waits: the batch call runs again until "reclose".
            "reopen" | "reclose" => {
                let c = &mut p.calls[recorded_call(&by_index, index, &ev).map_err(bad)?];
                c.end = if ev == "reopen" {
                    CallEnd::Open
                } else {
                    CallEnd::Done
                };
                c.t_end_ms = if ev == "reopen" { None } else { t_ms };
            }
            // The master TCPStore a call made, freed before the program ended.
            "freed" => {
                let c = &mut p.calls[recorded_call(&by_index, index, &ev).map_err(bad)?];
                c.t_freed_ms = t_ms.or(c.t_end_ms).or(Some(0));
            }
            "raise" => {
                p.raised = Some(Raised {
                    exc: text(&m, "exc"),
                    msg: text(&m, "msg"),
                    at: text(&m, "at"),
                    t_ms,
                })
            }
            "exit" => {
                p.exited = true;
                p.t_exit_ms = t_ms;
            }
            "end" => p.own_end = Some(own_end(&m, t_ms).map_err(bad)?),
            "gone" => p.t_gone_ms = t_ms,
            "globals" => p.t_globals_ms = t_ms,
            "worker_exit" => p.worker_exits.push(worker_exit(&m, t_ms).map_err(bad)?),
            "no_torch" => p.no_torch = Some(text(&m, "python")),
            other => return Err(bad(format!("unknown record kind `{other}`"))),
        }
    }
    Ok(p)
}

/// Where call `index` (of an `ev` record about it) is in the process's calls.
fn recorded_call(
    by_index: &BTreeMap<u64, usize>,
    index: Option<u64>,
    ev: &str,
) -> Result<usize, String> {
    let i = index.ok_or_else(|| format!("`{ev}` without `i`"))?;
    by_index
        .get(&i)
        .copied()
        .ok_or_else(|| format!("`{ev}` of call {i}, which was not recorded"))
}

/// A failed worker's exit as torchrun's agent noted it: (pid, exitcode, when).
pub type WorkerExit = (u64, i32, Option<u64>);

/// A `worker_exit` record of torchrun's agent.
fn worker_exit(m: &Map<String, Value>, t: Option<u64>) -> Result<WorkerExit, String> {
    let pid = m.get("pid").and_then(Value::as_u64);
    let code = m
        .get("exitcode")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok());
    pid.zip(code)
        .map(|(p, c)| (p, c, t))
        .ok_or_else(|| "a `worker_exit` without `pid` and `exitcode`".to_string())
}

/// An `end` record: `how` is exit, os._exit or signal.
fn own_end(m: &Map<String, Value>, t_ms: Option<u64>) -> Result<OwnEnd, String> {
    let int = |k: &str| {
        m.get(k)
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| format!("an `end` record without an integer `{k}`"))
    };
    let how = match text(m, "how").as_str() {
        "exit" => OwnEndKind::Exit { code: int("code")? },
        "os._exit" => OwnEndKind::ExitNow { code: int("code")? },
        "signal" => OwnEndKind::Signal(int("signal")?),
        other => return Err(format!("an `end` record of unknown kind `{other}`")),
    };
    Ok(OwnEnd {
        how,
        at: text(m, "at"),
        t_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_their_ends_and_the_process_end_are_read() {
        let t = concat!(
            "{\"ev\": \"proc\", \"pid\": 7, \"env\": {\"RANK\": \"1\", \"WORLD_SIZE\": \"2\"}}\n",
            "{\"ev\": \"call\", \"i\": 0, \"op\": \"all_reduce\", \"at\": \"p.py:3\", \"group\": \"WORLD\"}\n",
            "{\"ev\": \"done\", \"i\": 0}\n",
            "{\"ev\": \"call\", \"i\": 1, \"op\": \"barrier\", \"at\": \"p.py:4\"}\n",
            "{\"ev\": \"error\", \"i\": 1, \"exc\": \"RuntimeError\", \"msg\": \"closed\"}\n",
            "{\"ev\": \"raise\", \"exc\": \"RuntimeError\", \"msg\": \"closed\", \"at\": \"p.py:4\"}\n",
            "{\"ev\": \"call\", \"i\": 2, \"op\": \"bar"
        );
        let p = parse("proc7.jsonl", t).unwrap();
        assert_eq!((p.rank(), p.world_size(), p.pid), (1, 2, 7));
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].end, CallEnd::Done);
        assert_eq!(p.calls[0].args["group"], "WORLD");
        assert!(matches!(&p.calls[1].end, CallEnd::Error { exc, .. } if exc == "RuntimeError"));
        assert_eq!(p.raised.as_ref().unwrap().at, "p.py:4");
        assert!(!p.exited);
    }

    #[test]
    fn a_broken_line_names_file_and_line() {
        let e = parse("proc1.jsonl", "{\"ev\": \"proc\"}\nnot json\n{}\n").unwrap_err();
        assert!(e.to_string().starts_with("proc1.jsonl:2: "), "{e}");
        let e = parse("proc1.jsonl", "{\"ev\": \"done\", \"i\": 4}\n").unwrap_err();
        assert!(
            e.to_string().contains("call 4, which was not recorded"),
            "{e}"
        );
    }
}
