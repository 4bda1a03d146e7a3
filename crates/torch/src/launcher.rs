//! The launcher of `scen run --torch`: writes the program, starts the ranks through runner.py
//! (one real process per rank, torchrun's environment; with `launcher = "torchrun"` the runner
//! also hosts the store and tears the group down as torchrun's agent does), reads each rank's
//! progress lines, and is the watchdog: when no rank has reported anything for a bounded time,
//! it SIGKILLs the process group and reports the unfinished ranks as hanging where they were.
//! The run's shape (start, watch, end, report) is scen-procs' `run`, shared with `--hw`;
//! `TorchRun` is what torch mode supplies to it.

use crate::net::Endpoints;
use crate::spawn::Runner;
use crate::{eligible, python, translate, TorchError, TorchOptions};
use scen_core::observe::Observed;
use scen_core::outcome::{Failure, Killer, RankEnd, ScenLauncher};
use scen_core::report::Report;
use scen_core::report::{Mode, RunFacts};
use scen_core::runtime::torchrun;
use scen_core::scenario::fault::{apply_env, crash, ranks_of};
use scen_core::scenario::{FaultKind, Launcher, Scenario, StepKind};
use scen_core::trace::{Event, EventKind, Trace};
use scen_procs::run::{interrupted_note, Look, RankRun, Stop};
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
            | StepKind::SplitGroup { timeout_ms, .. }
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
    eligible::check(s)?;
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
    let ep = Endpoints::local(&sc).map_err(|e| io("picking ports", e))?;
    let dir = work_dir(o).map_err(|e| io("creating the run directory", e))?;
    let result = scen_procs::run::run(TorchRun::new(&sc, source, o, &py, &ep, &dir));
    if o.keep_dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// Whether the program's init goes through a file:// store (the prelude's file_url moves it).
fn file_rendezvous(s: &Scenario) -> bool {
    s.steps.iter().any(|st| {
        matches!(&st.kind, scen_core::scenario::StepKind::InitProcessGroup { init_method: Some(u), .. } if u.starts_with("file://"))
    })
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
    // file:// stores live under the run's directory, a directory per node (prelude's file_url).
    let node = s.world.ranks[rank].node;
    put(
        "SCEN_FILE_ROOT",
        dir.join("files")
            .join(format!("node{node}"))
            .display()
            .to_string(),
    );
    put("OMP_NUM_THREADS", "1".into());
    if s.world.launcher == Launcher::Torchrun {
        put("TORCHELASTIC_USE_AGENT_STORE", "True".into());
        put("TORCHELASTIC_RESTART_COUNT", "0".into());
        put("TORCHELASTIC_RUN_ID", "scen".into());
    }
    serde_json::Value::Object(env)
}

/// One run of `scen run --torch`: scen-procs' one shape of a real-mode run, torch's part.
struct TorchRun<'a> {
    s: &'a Scenario,
    source: Option<&'a str>,
    o: &'a TorchOptions,
    py: &'a Path,
    ep: &'a Endpoints,
    dir: &'a Path,
    runner: Option<Runner>,
    ranks: Vec<RankState>,
    trace: Trace,
    notes: Vec<String>,
    quiet_ms: u64,
    /// How far exits.jsonl was read.
    exits_offset: u64,
    /// The runner's fork time (the ranks' time zero), from its first line in exits.jsonl.
    epoch_unix_ms: Option<u64>,
    runner_done: bool,
    /// How long no rank had reported anything when the watchdog ended the run.
    silent_ms: u64,
    /// When scen stopped the run (wall clock), as the ranks' processes were killed.
    stop_unix_ms: u64,
}

impl<'a> TorchRun<'a> {
    fn new(
        s: &'a Scenario,
        source: Option<&'a str>,
        o: &'a TorchOptions,
        py: &'a Path,
        ep: &'a Endpoints,
        dir: &'a Path,
    ) -> TorchRun<'a> {
        TorchRun {
            s,
            source,
            o,
            py,
            ep,
            dir,
            runner: None,
            ranks: vec![RankState::default(); s.world.size()],
            trace: Trace::default(),
            notes: Vec::new(),
            quiet_ms: o.quiet_ms.unwrap_or_else(|| quiet_bound_ms(s)),
            exits_offset: 0,
            epoch_unix_ms: None,
            runner_done: false,
            silent_ms: 0,
            stop_unix_ms: 0,
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("runner.log")
    }

    /// Writes the program, the runner and its config (every rank's environment); returns the
    /// runner's and the config's paths.
    fn write_files(&self) -> Result<(PathBuf, PathBuf), TorchError> {
        let (s, ep, dir) = (self.s, self.ep, self.dir);
        let world = s.world.size();
        let prog = dir.join(format!("{}.py", s.name));
        std::fs::write(&prog, translate::program(s, self.source, ep))
            .map_err(|e| io("writing the program", e))?;
        let runner = dir.join("scen_runner.py");
        std::fs::write(&runner, RUNNER).map_err(|e| io("writing the runner", e))?;
        let torchrun = s.world.launcher == Launcher::Torchrun;
        let master_port = translate::world_env(s)
            .get("MASTER_PORT")
            .and_then(|p| p.parse::<u16>().ok())
            .map(|p| ep.port(p));
        let cfg = serde_json::json!({
            "program": prog.display().to_string(),
            "exits": dir.join("exits.jsonl").display().to_string(),
            "ranks": (0..world).map(|r| serde_json::json!({"rank": r, "env": rank_env(s, ep, dir, r)})).collect::<Vec<_>>(),
            "agent_store": if torchrun { serde_json::json!({"port": master_port, "world_size": world}) } else { serde_json::Value::Null },
            "teardown": torchrun,
            // Imported once before the fork, like torch: real sglang takes seconds to import.
            // (srt's modules load lazily inside initialize_model_parallel, ~10 s on a busy machine).
            "preload": if eligible::uses_sglang(s) { SGLANG_PRELOAD.to_vec() } else { vec![] },
        });
        let cfg_path = dir.join("config.json");
        std::fs::write(&cfg_path, cfg.to_string()).map_err(|e| io("writing the config", e))?;
        Ok((runner, cfg_path))
    }

    /// New lines of the ranks' progress files and of the runner's exit records; whether there
    /// were any.
    fn read_progress(&mut self) -> bool {
        let mut progressed = false;
        for (r, st) in self.ranks.iter_mut().enumerate() {
            for line in read_lines(&self.dir.join(format!("rank{r}.jsonl")), st) {
                progressed = true;
                absorb(self.s, r, st, &line, &mut self.trace);
            }
        }
        let mut tmp = RankState {
            offset: self.exits_offset,
            ..Default::default()
        };
        for line in read_lines(&self.dir.join("exits.jsonl"), &mut tmp) {
            progressed = true;
            self.take_exit_line(&line);
        }
        self.exits_offset = tmp.offset;
        progressed
    }

    /// One line of exits.jsonl: the ranks' time zero, or how a rank's process exited.
    fn take_exit_line(&mut self, line: &str) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            return;
        };
        if let Some(e) = v["epoch_ms"].as_u64() {
            self.epoch_unix_ms = Some(e);
            return;
        }
        let r = v["rank"].as_u64().unwrap_or(0) as usize;
        if let Some(st) = self.ranks.get_mut(r) {
            st.exit = Some(Exit {
                signal: v["signal"].as_i64().map(|x| x as i32),
                code: v["code"].as_i64().map(|x| x as i32),
                t_ms: v["t"].as_u64().unwrap_or(0),
                by_agent: v["by_agent"].as_bool().unwrap_or(false),
            });
        }
    }

    /// When the run ended (ms since the ranks were forked, after torch's import): its last
    /// event or exit, or when scen stopped it (a signal, its watchdog, its wall limit).
    fn end_ms(&self, stop: Stop) -> u64 {
        let last_event = self.trace.events.iter().map(|e| e.t_ms).max().unwrap_or(0);
        let last_exit = self
            .ranks
            .iter()
            .filter_map(|r| r.exit.as_ref().map(|x| x.t_ms))
            .max()
            .unwrap_or(0);
        let stopped_ms = stop
            .by_launcher()
            .then(|| {
                self.epoch_unix_ms
                    .map(|e| self.stop_unix_ms.saturating_sub(e))
            })
            .flatten()
            .unwrap_or(0);
        last_event.max(last_exit).max(stopped_ms)
    }

    /// No rank started: the run's error (a signal came first, or the runner's last lines).
    fn none_started(&self, stop: Stop) -> TorchError {
        if let Some(sig) = stop.signal() {
            return TorchError::Io(format!(
                "interrupted: scen received {} before any rank started; nothing is left running",
                signal_name(sig)
            ));
        }
        let tail = scen_procs::log::tail_of_path(&self.log_path(), 6).unwrap_or_default();
        TorchError::Unavailable(format!(
            "no rank started under {}: {tail}",
            self.py.display()
        ))
    }

    /// Texts name the scenario's ports, not the free ones the run used.
    fn unmap_ports(&mut self) {
        let ep = self.ep;
        for st in self.ranks.iter_mut() {
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
        for e in self.trace.events.iter_mut() {
            e.text = ep.unmap_ports(&e.text);
        }
        if !ep.ports.is_empty() {
            let m: Vec<String> = ep
                .ports
                .iter()
                .map(|(a, b)| format!("{a} -> {b}"))
                .collect();
            self.notes.push(format!(
                "ports: the scenario's ran as free local ports ({}); texts above name the scenario's",
                m.join(", ")
            ));
        }
    }

    /// The notes every torch report has: how it was launched, the time scale, and a failed
    /// run's last output lines.
    fn run_notes(&mut self) {
        let (s, log_path) = (self.s, self.log_path());
        let notes = &mut self.notes;
        if self
            .ranks
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
                match (s.world.launcher, file_rendezvous(s)) {
                    (Launcher::Torchrun, false) => "torchrun: the agent hosts the TCPStore",
                    (Launcher::Processes, false) => "plain processes: rank 0 hosts the TCPStore",
                    (Launcher::Torchrun, true) => "torchrun, file:// rendezvous: each node's FileStore file under the run's directory",
                    (Launcher::Processes, true) => "plain processes, file:// rendezvous: each node's FileStore file under the run's directory",
                },
                self.py.display()
            ),
        );
    }
}

impl RankRun for TorchRun<'_> {
    type Output = Report;
    type Error = TorchError;

    fn start(&mut self) -> Result<Watch, TorchError> {
        let (runner, cfg_path) = self.write_files()?;
        let log_path = self.log_path();
        let o = self.o;
        self.runner = Some(Runner::start(
            self.py,
            o.zygote.as_ref(),
            &runner,
            &cfg_path,
            &log_path,
        )?);
        Ok(Watch::new(unix_ms(), o.max_wall_ms, o.interrupted))
    }

    fn look(&mut self, clock: &mut Watch) -> Result<Look, TorchError> {
        std::thread::sleep(POLL);
        if self.read_progress() {
            clock.progress(clock.now_ms());
        }
        if self.runner_done {
            return Ok(Look::Over);
        }
        match self.runner.as_mut().map(Runner::exited).transpose()? {
            // Lines written just before the exit: one more pass.
            Some(true) => {
                self.runner_done = true;
                Ok(Look::Again)
            }
            _ => Ok(Look::Decide),
        }
    }

    /// The runner's exit is the ranks' end ([`Look::Over`]): a rank that reported its end may
    /// still be tearing its group down.
    fn all_ended(&self) -> bool {
        false
    }

    fn hopeless(&mut self, clock: &Watch, t_ms: u64) -> bool {
        let any_started = self.ranks.iter().any(|r| r.started);
        self.silent_ms = clock.silent_ms(t_ms);
        let bound_ms = if any_started {
            self.quiet_ms
        } else {
            START_LIMIT_MS
        };
        self.silent_ms >= bound_ms
    }

    fn stopped(&mut self, stop: Stop, _t_ms: u64) {
        let note = match stop {
            Stop::Ended => return,
            Stop::Interrupted(sig) => interrupted_note("scen", sig),
            Stop::Watchdog => format!(
                "watchdog: no rank reported progress for {} ms (bound {} ms: the scenario's longest timeout or delay + {QUIET_GRACE_MS} ms); SIGKILLed the process group",
                self.silent_ms, self.quiet_ms
            ),
            Stop::OutOfTime => format!(
                "stopped: the run reached the limit of {} ms; SIGKILLed the process group",
                self.o.max_wall_ms.unwrap_or(0)
            ),
        };
        self.notes.push(note);
    }

    /// The runner's process group: its ranks (killed even if the runner itself has exited).
    fn end(&mut self, _stop: Option<Stop>) {
        self.stop_unix_ms = unix_ms();
        if let Some(runner) = self.runner.as_mut() {
            let _ = scen_procs::group::kill_group(runner.pgid());
            runner.reap();
        }
    }

    fn report(mut self, stop: Stop, _t_ms: u64) -> Result<Report, TorchError> {
        if !self.ranks.iter().any(|r| r.started) {
            return Err(self.none_started(stop));
        }
        let end_ms = self.end_ms(stop);
        if let Some(sig) = stop.signal() {
            interrupt(&mut self.ranks, sig, end_ms);
        }
        let hung = matches!(stop, Stop::Watchdog | Stop::OutOfTime);
        let (s, ranks, trace, notes) = (self.s, &mut self.ranks, &mut self.trace, &mut self.notes);
        ends_from_exits(s, ranks, trace, notes, hung, end_ms);
        self.unmap_ports();
        self.run_notes();
        Ok(report(self.s, &self.ranks, self.trace, self.notes, end_ms))
    }
}

fn io(what: &str, e: std::io::Error) -> TorchError {
    TorchError::Io(format!("{what}: {e}"))
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
            tag: None,
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
    // The rank the agent names: the lowest of the workers whose failed exit its check saw,
    // all of them exits it did not cause (runner.py checks as torchrun does; core's
    // runtime::torchrun::stop_after).
    let failed_first = ranks.iter().position(|st| {
        st.exit
            .as_ref()
            .is_some_and(|x| !x.by_agent && (x.signal.is_some() || x.code.is_some_and(|c| c != 0)))
    });
    let mut hanging = Vec::new();
    for (r, st) in ranks.iter_mut().enumerate() {
        let step = st.step.unwrap_or(0);
        // A worker the agent stopped in its teardown, after its program completed, exits with
        // the agent's SIGTERM: torchrun reports it failed, and so does the simulator.
        let stopped_after_end = st.end.is_some()
            && torchrun::stop_decides(st.end.as_ref().map(|(e, _)| e))
            && st
                .exit
                .as_ref()
                .is_some_and(|x| x.by_agent && x.signal == Some(15));
        if stopped_after_end {
            st.end = None;
        }
        if st.end.is_none() {
            if let Some(x) = &st.exit {
                let failure = exit_failure(s, r, x, failed_first);
                trace.events.push(Event {
                    t_ms: x.t_ms,
                    rank: Some(r),
                    step: Some(step),
                    kind: EventKind::Error,
                    text: failure.text(),
                    tag: None,
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
            end_us: end_ms.saturating_mul(1000),
            local: None,
            env_ranks: &s.world.ranks,
            notes,
            gathered: true,
        },
    )
}
