//! The launcher of `scen run --torch`: writes the program, starts the ranks through runner.py
//! (one real process per rank, torchrun's environment; with `launcher = "torchrun"` the runner
//! also hosts the store and tears the group down as torchrun's agent does), reads each rank's
//! progress lines, and is the watchdog: when no rank has reported anything for a bounded time,
//! it SIGKILLs the process group and reports the unfinished ranks as hanging where they were.

use crate::net::Endpoints;
use crate::spawn::Runner;
use crate::{eligible, python, translate, TorchError, TorchOptions};
use scen_core::observe::Observed;
use scen_core::outcome::{Failure, Killer, RankEnd, ScenLauncher};
use scen_core::report::Report;
use scen_core::report::{Mode, RunFacts};
use scen_core::scenario::fault::{apply_env, crash, ranks_of};
use scen_core::scenario::{FaultKind, Launcher, Scenario, StepKind};
use scen_core::trace::{Event, EventKind, Trace};
use scen_procs::signals::name as signal_name;
use scen_procs::watch::{unix_ms, Watch, POLL};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const RUNNER: &str = include_str!("runner.py");
/// Added to the scenario's longest timeout: real stores and gloo report a little late.
const QUIET_GRACE_MS: u64 = 8_000;
/// Modules of real sglang's start-up the runner imports before forking the ranks (measured with
/// sys.modules around initialize_model_parallel: srt's GroupCoordinator imports its communicators
/// lazily, ~900 modules, seconds that would otherwise fall between two new_group calls).
const SGLANG_PRELOAD: [&str; 12] = [
    "sglang.multimodal_gen.runtime.distributed.parallel_state",
    "sglang.multimodal_gen.runtime.distributed.parallel_groups",
    "sglang.srt.distributed.parallel_state",
    "sglang.srt.runtime_context",
    "sglang.srt.layers.dp_attention",
    "sglang.srt.distributed.device_communicators.custom_all_reduce",
    "sglang.srt.distributed.device_communicators.pymscclpp",
    "sglang.srt.distributed.device_communicators.pynccl",
    "sglang.srt.distributed.device_communicators.pynccl_allocator",
    "sglang.srt.distributed.device_communicators.torch_symm_mem",
    "sglang.srt.distributed.device_communicators.pcie_ipc_ar",
    "sglang.srt.distributed.device_communicators.xpu_communicator",
];
/// The time it takes the runner to import torch before any rank starts (not progress-bound).
const START_LIMIT_MS: u64 = 180_000;

/// What the launcher knows about one rank.
#[derive(Default, Clone)]
struct RankState {
    offset: u64,
    partial: String,
    started: bool,
    step: Option<usize>,
    step_text: String,
    end: Option<(RankEnd, u64)>,
    exit: Option<Exit>,
}

#[derive(Clone, Debug)]
struct Exit {
    signal: Option<i32>,
    code: Option<i32>,
    t_ms: u64,
    by_agent: bool,
}

/// The longest time a rank may legitimately be silent: a timeout, a sleep, a late start.
pub fn quiet_bound_ms(s: &Scenario) -> u64 {
    let default = s.time_scale.apply(1_800_000);
    let mut max = default;
    for st in &s.steps {
        let t = match &st.kind {
            StepKind::InitProcessGroup { timeout_ms, .. }
            | StepKind::NewGroup { timeout_ms, .. }
            | StepKind::InitDistributedEnvironment { timeout_ms, .. } => {
                timeout_ms.unwrap_or(default)
            }
            StepKind::Sleep { ms } => *ms,
            _ => 0,
        };
        max = max.max(t);
    }
    for f in &s.faults {
        if let FaultKind::LateStart { delay_ms, .. } = f.kind {
            max = max.max(delay_ms);
        }
    }
    max + QUIET_GRACE_MS
}

/// Runs the scenario; see the module comment.
pub fn launch(s: &Scenario, source: Option<&str>, o: &TorchOptions) -> Result<Report, TorchError> {
    eligible::check(s).map_err(TorchError::NotEligible)?;
    let (py, _) = python::find(o.python.as_deref())?;
    if !py.exists() {
        return Err(TorchError::Unavailable(format!(
            "{} does not exist",
            py.display()
        )));
    }
    if eligible::uses_sglang(s) {
        let want = eligible::SGLANG_VERSION;
        match python::sglang_version(&py) {
            Some(v) if v == want => {}
            found => {
                return Err(TorchError::Unavailable(format!(
                    "the scenario runs real sglang {want}, but {} has {}; run scripts/install-torch-cpu.sh --sglang",
                    py.display(),
                    found.map_or("none".to_string(), |v| format!("sglang {v}"))
                )))
            }
        }
    }
    let mut sc = s.clone();
    apply_env(&mut sc);
    let io = |what: &str, e: std::io::Error| TorchError::Io(format!("{what}: {e}"));
    let ep = Endpoints::local(&sc).map_err(|e| io("picking ports", e))?;
    let dir = work_dir(o).map_err(|e| io("creating the run directory", e))?;
    let result = run_in(&sc, source, o, &py, &ep, &dir);
    if o.keep_dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn work_dir(o: &TorchOptions) -> std::io::Result<PathBuf> {
    let dir = match &o.keep_dir {
        Some(d) => d.clone(),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            std::env::temp_dir().join(format!("scen-torch-{}-{nanos}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn rank_env(s: &Scenario, ep: &Endpoints, dir: &Path, rank: usize) -> serde_json::Value {
    let world = translate::world_env(s);
    let mut env = serde_json::Map::new();
    let mut put = |k: &str, v: String| {
        env.insert(k.to_string(), serde_json::Value::String(v));
    };
    // What torchrun gives the rank; the scenario's own values (an `env` fault's WORLD_SIZE) are
    // the program's ENV_OVERRIDES, applied by the prelude as under a plain torchrun.
    for (k, v) in translate::torchrun_identity(s, rank) {
        put(&k, v);
    }
    for k in ["MASTER_ADDR", "MASTER_PORT"] {
        if let Some(v) = world.get(k) {
            put(k, ep.env_value(k, v));
        }
    }
    put("SCEN_TORCH_PROGRESS", dir.display().to_string());
    put("OMP_NUM_THREADS", "1".into());
    if s.world.launcher == Launcher::Torchrun {
        put("TORCHELASTIC_USE_AGENT_STORE", "True".into());
        put("TORCHELASTIC_RESTART_COUNT", "0".into());
        put("TORCHELASTIC_RUN_ID", "scen".into());
    }
    serde_json::Value::Object(env)
}

fn run_in(
    s: &Scenario,
    source: Option<&str>,
    o: &TorchOptions,
    py: &Path,
    ep: &Endpoints,
    dir: &Path,
) -> Result<Report, TorchError> {
    let io = |what: &str, e: std::io::Error| TorchError::Io(format!("{what}: {e}"));
    let world = s.world.size();
    let prog = dir.join(format!("{}.py", s.name));
    std::fs::write(&prog, translate::program(s, source, ep))
        .map_err(|e| io("writing the program", e))?;
    let runner = dir.join("scen_runner.py");
    std::fs::write(&runner, RUNNER).map_err(|e| io("writing the runner", e))?;
    let exits = dir.join("exits.jsonl");
    let torchrun = s.world.launcher == Launcher::Torchrun;
    let master_port = translate::world_env(s)
        .get("MASTER_PORT")
        .and_then(|p| p.parse::<u16>().ok())
        .map(|p| ep.port(p));
    let cfg = serde_json::json!({
        "program": prog.display().to_string(),
        "exits": exits.display().to_string(),
        "ranks": (0..world).map(|r| serde_json::json!({"rank": r, "env": rank_env(s, ep, dir, r)})).collect::<Vec<_>>(),
        "agent_store": if torchrun { serde_json::json!({"port": master_port, "world_size": world}) } else { serde_json::Value::Null },
        "teardown": torchrun,
        // Imported once before the fork, like torch: real sglang takes seconds to import.
        // (srt's modules load lazily inside initialize_model_parallel, ~10 s on a busy machine).
        "preload": if eligible::uses_sglang(s) { SGLANG_PRELOAD.to_vec() } else { vec![] },
    });
    let cfg_path = dir.join("config.json");
    std::fs::write(&cfg_path, cfg.to_string()).map_err(|e| io("writing the config", e))?;
    let log_path = dir.join("runner.log");
    let mut runner = Runner::start(py, o.zygote.as_ref(), &runner, &cfg_path, &log_path)?;
    let pgid = runner.pgid();
    let mut ranks = vec![RankState::default(); world];
    let mut trace = Trace::default();
    let mut notes: Vec<String> = Vec::new();
    let quiet_ms = o.quiet_ms.unwrap_or_else(|| quiet_bound_ms(s));
    let mut clock = Watch::new(unix_ms(), o.max_wall_ms, o.interrupted);
    let mut exits_offset = 0u64;
    // The runner's fork time (the ranks' time zero), from its first line in exits.jsonl.
    let mut epoch_unix_ms: Option<u64> = None;
    let mut runner_done = false;
    let mut hung = false;
    let mut interrupted = None;
    let mut lost = None;
    loop {
        std::thread::sleep(POLL);
        let mut progressed = false;
        for (r, st) in ranks.iter_mut().enumerate() {
            for line in read_lines(&dir.join(format!("rank{r}.jsonl")), st) {
                progressed = true;
                absorb(s, r, st, &line, &mut trace);
            }
        }
        let mut tmp = RankState {
            offset: exits_offset,
            ..Default::default()
        };
        for line in read_lines(&exits, &mut tmp) {
            progressed = true;
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                if let Some(e) = v["epoch_ms"].as_u64() {
                    epoch_unix_ms = Some(e);
                    continue;
                }
                let r = v["rank"].as_u64().unwrap_or(0) as usize;
                if let Some(st) = ranks.get_mut(r) {
                    st.exit = Some(Exit {
                        signal: v["signal"].as_i64().map(|x| x as i32),
                        code: v["code"].as_i64().map(|x| x as i32),
                        t_ms: v["t"].as_u64().unwrap_or(0),
                        by_agent: v["by_agent"].as_bool().unwrap_or(false),
                    });
                }
            }
        }
        exits_offset = tmp.offset;
        if progressed {
            clock.progress(clock.now_ms());
        }
        if !runner_done {
            match runner.exited() {
                Ok(true) => {
                    runner_done = true;
                    // Lines written just before the exit: one more pass.
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    lost = Some(e);
                    break;
                }
            }
        }
        if runner_done {
            break;
        }
        if let Some(sig) = clock.interrupted() {
            interrupted = Some(sig);
            notes.push(format!(
                "interrupted: scen received {} and ended every rank; the report shows what was seen until then (exit status {})",
                signal_name(sig),
                128 + sig
            ));
            break;
        }
        let any_started = ranks.iter().any(|r| r.started);
        let silent = clock.silent_ms(clock.now_ms());
        if (any_started && silent >= quiet_ms) || (!any_started && silent >= START_LIMIT_MS) {
            hung = true;
            notes.push(format!(
                "watchdog: no rank reported progress for {} ms (bound {quiet_ms} ms: the scenario's longest timeout or delay + {QUIET_GRACE_MS} ms); SIGKILLed the process group",
                silent
            ));
            break;
        }
        if clock.out_of_time(clock.now_ms()) {
            hung = true;
            notes.push(format!(
                "stopped: the run reached the limit of {} ms; SIGKILLed the process group",
                clock.max_wall_ms().unwrap_or(0)
            ));
            break;
        }
    }
    // The runner's process group: its ranks (killed even if the runner itself has exited).
    let stop_unix_ms = unix_ms();
    let _ = scen_procs::group::kill_group(pgid);
    runner.reap();
    if let Some(e) = lost {
        return Err(e);
    }
    if !ranks.iter().any(|r| r.started) {
        if let Some(sig) = interrupted {
            return Err(TorchError::Io(format!(
                "interrupted: scen received {} before any rank started; nothing is left running",
                signal_name(sig)
            )));
        }
        let tail = scen_procs::log::tail_of_path(&log_path, 6).unwrap_or_default();
        return Err(TorchError::Unavailable(format!(
            "no rank started under {}: {tail}",
            py.display()
        )));
    }
    // Rank times count from the moment the ranks were forked (after torch's import).
    let last_event = trace.events.iter().map(|e| e.t_ms).max().unwrap_or(0);
    let last_exit = ranks
        .iter()
        .filter_map(|r| r.exit.as_ref().map(|x| x.t_ms))
        .max()
        .unwrap_or(0);
    // A run scen stopped (a signal, its watchdog, its wall limit) ended when it stopped it.
    let stopped_ms = (interrupted.is_some() || hung)
        .then(|| epoch_unix_ms.map(|e| stop_unix_ms.saturating_sub(e)))
        .flatten()
        .unwrap_or(0);
    let end_ms = last_event.max(last_exit).max(stopped_ms);
    if let Some(sig) = interrupted {
        interrupt(&mut ranks, sig, end_ms);
    }
    ends_from_exits(s, &mut ranks, &mut trace, &mut notes, hung, end_ms);
    // Texts name the scenario's ports, not the free ones the run used.
    for st in ranks.iter_mut() {
        if let Some((
            RankEnd::Failed {
                failure: Failure::Raised { message, .. },
                ..
            },
            _,
        )) = &mut st.end
        {
            *message = ep.unmap_ports(message);
        }
    }
    for e in trace.events.iter_mut() {
        e.text = ep.unmap_ports(&e.text);
    }
    if !ep.ports.is_empty() {
        let m: Vec<String> = ep
            .ports
            .iter()
            .map(|(a, b)| format!("{a} -> {b}"))
            .collect();
        notes.push(format!(
            "ports: the scenario's ran as free local ports ({}); texts above name the scenario's",
            m.join(", ")
        ));
    }
    if ranks
        .iter()
        .any(|r| !matches!(r.end, Some((RankEnd::Completed, _))))
    {
        if let Some(tail) = scen_procs::log::tail_of_path(&log_path, 4) {
            notes.push(format!("rank output (last lines): {tail}"));
        }
    }
    if !s.time_scale.is_identity() {
        notes.insert(
            0,
            format!(
                "time scale {}: every timeout and delay scaled",
                s.time_scale
            ),
        );
    }
    notes.insert(
        0,
        format!(
            "launched as {} (gloo on CPU, {})",
            match s.world.launcher {
                Launcher::Torchrun => "torchrun: the agent hosts the TCPStore",
                Launcher::Processes => "plain processes: rank 0 hosts the TCPStore",
            },
            py.display()
        ),
    );
    Ok(report(s, &ranks, trace, notes, end_ms))
}

/// A signal ended the run: every rank that had not ended fails where it was, saying so (as
/// `--hw` reports it), instead of being reported as hanging.
fn interrupt(ranks: &mut [RankState], sig: i32, end_ms: u64) {
    for st in ranks.iter_mut().filter(|st| st.end.is_none()) {
        let where_ = match st.step {
            Some(_) => format!(" in {}", st.step_text),
            None => " before it started any step".into(),
        };
        let failure = Failure::Interrupted {
            signal: sig,
            launcher: ScenLauncher::Torch,
            at: where_,
        };
        st.end = Some((
            RankEnd::Failed {
                step: st.step.unwrap_or(0),
                failure,
            },
            end_ms,
        ));
        // Its process died by our SIGKILL: that is not the rank's own end.
        st.exit = None;
    }
}

/// New complete lines of a progress file since the last read.
fn read_lines(path: &Path, st: &mut RankState) -> Vec<String> {
    let Ok(mut f) = std::fs::File::open(path) else {
        return vec![];
    };
    if f.seek(SeekFrom::Start(st.offset)).is_err() {
        return vec![];
    }
    let mut buf = String::new();
    if f.read_to_string(&mut buf).is_err() {
        return vec![];
    }
    st.offset += buf.len() as u64;
    st.partial.push_str(&buf);
    let mut out = Vec::new();
    while let Some(i) = st.partial.find('\n') {
        out.push(st.partial[..i].to_string());
        st.partial.drain(..=i);
    }
    out
}

fn absorb(s: &Scenario, rank: usize, st: &mut RankState, line: &str, trace: &mut Trace) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let ev = v["ev"].as_str().unwrap_or("");
    let step = v["step"].as_u64().map(|x| x as usize);
    let t = v["t"].as_u64().unwrap_or(0);
    let text = v["text"].as_str().unwrap_or("").to_string();
    let push = |trace: &mut Trace, kind: EventKind, text: String| {
        trace.events.push(Event {
            t_ms: t,
            rank: Some(rank),
            step,
            kind,
            text,
        })
    };
    match ev {
        "hello" => st.started = true,
        "start" => {
            st.started = true;
            st.step = step;
            st.step_text = step
                .and_then(|i| s.steps.get(i))
                .map(|x| x.label())
                .unwrap_or_default();
            push(trace, EventKind::Start, text);
        }
        "done" => push(trace, EventKind::Done, text),
        "log" => push(trace, EventKind::Log, text),
        // Real sglang's torch.distributed.new_group calls (prelude_sglang.py), in order.
        "new_group" => push(trace, EventKind::Info, format!("new_group {text}")),
        "crash" => push(trace, EventKind::Fault, text),
        "fail" => {
            push(trace, EventKind::Error, text.clone());
            // The prelude sends the exception's class and message apart (`exc`, `msg`).
            let exception = v["exc"].as_str().unwrap_or("Exception");
            let message = v["msg"].as_str().unwrap_or(&text).to_string();
            st.end = Some((RankEnd::raised(step.unwrap_or(0), exception, message), t));
        }
        "end" => st.end = Some((RankEnd::Completed, t)),
        _ => {}
    }
}

/// The crash fault that killed `rank` with SIGKILL, if the scenario has one for it.
fn crash_fault(s: &Scenario, rank: usize) -> Option<Failure> {
    s.faults.iter().find_map(|f| match &f.kind {
        FaultKind::Crash { on, .. } if ranks_of(s, on).contains(&rank) => {
            Some(crash(f.index, &f.label(&s.file)))
        }
        _ => None,
    })
}

/// How a rank that never reported its end ended, from its process's exit: a crash fault's
/// SIGKILL, torchrun's agent stopping the group, another signal, or an exit code.
fn exit_failure(s: &Scenario, rank: usize, x: &Exit, failed_first: Option<usize>) -> Failure {
    match (x.signal, x.by_agent) {
        (Some(9), _) if crash_fault(s, rank).is_some() => {
            crash_fault(s, rank).expect("checked just above")
        }
        // The agent's SIGTERM; a worker the agent signalled that died of another signal
        // first (its own SIGABRT) died of its own.
        (Some(signal @ 15), true) => Failure::Killed {
            signal,
            by: Killer::Agent {
                after_rank: failed_first.unwrap_or(0),
            },
        },
        (signal, _) => Failure::process_exit(x.code, signal),
    }
}

/// Ends the ranks whose process exited without a word (from its exit record), and notes the
/// ones still running when the watchdog ended the run.
fn ends_from_exits(
    s: &Scenario,
    ranks: &mut [RankState],
    trace: &mut Trace,
    notes: &mut Vec<String>,
    hung: bool,
    end_ms: u64,
) {
    let failed_first = ranks
        .iter()
        .enumerate()
        .filter_map(|(r, st)| match &st.end {
            Some((RankEnd::Failed { .. }, t)) => Some((*t, r)),
            _ => None,
        })
        .min()
        .map(|(_, r)| r);
    let mut hanging = Vec::new();
    for (r, st) in ranks.iter_mut().enumerate() {
        let step = st.step.unwrap_or(0);
        if st.end.is_none() {
            if let Some(x) = &st.exit {
                let failure = exit_failure(s, r, x, failed_first);
                trace.events.push(Event {
                    t_ms: x.t_ms,
                    rank: Some(r),
                    step: Some(step),
                    kind: EventKind::Error,
                    text: failure.text(),
                });
                st.end = Some((RankEnd::Failed { step, failure }, x.t_ms));
            }
        }
        if st.end.is_none() {
            hanging.push(format!("rank {r} in {}", st.step_text));
        }
    }
    if hung && !hanging.is_empty() {
        notes.push(format!(
            "hanging when the watchdog ended the run at {end_ms} ms: {}",
            hanging.join("; ")
        ));
    }
}

/// The run's report: the ranks' progress as an [`Observed`], through core's one report builder.
fn report(
    s: &Scenario,
    ranks: &[RankState],
    trace: Trace,
    notes: Vec<String>,
    end_ms: u64,
) -> Report {
    let mut o = Observed::new(ranks.len());
    o.trace = trace;
    for (r, st) in ranks.iter().enumerate() {
        o.step[r] = st.step;
        o.ends[r] = st.end.clone();
    }
    scen_core::report::build(
        s,
        o,
        RunFacts {
            mode: Mode::Torch,
            seed: s.sim.seed,
            end_ms,
            local: None,
            env_ranks: &s.world.ranks,
            notes,
            gathered: true,
        },
    )
}
