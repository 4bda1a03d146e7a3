//! hw's part of the one real-mode run (scen-procs' `run`: start, watch, end, report): how a
//! rank process starts (`scen __hw-rank FILE` with torchrun's environment and oneCCL's), what
//! the side channel and a process's exit mean, the `--kill-rank` fault, what the watchdog may
//! decide (crate::watchdog) and, under torchrun, what its agent does (crate::agent). The
//! placement, job token and rendezvous that come before are the launcher's (launcher.rs).

use crate::agent::{Agent, AgentStore, WorkerEnv};
use crate::launcher::{oneccl_root, report, Place, JOB_TOKEN_ENV, ONECCL_ENV};
use crate::nodes::{announce_ends, remote};
use crate::probe::Msg;
use crate::procs::{self, RankProc};
use crate::rdzv::{Mesh, Remote};
use crate::watchdog::{self, State};
use crate::{reaper, HwError, HwOptions};
use scen_core::outcome::{Failure, Killer, RankEnd, ScenLauncher};
use scen_core::report::Report;
use scen_core::scenario::{Launcher, Scenario};
use scen_procs::run::{interrupted_note, Look, RankRun, Stop};
use scen_procs::watch::{unix_ms, Watch, POLL};
use scen_procs::{exit, signals};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a rank's messages may still arrive after its process exited.
const EXIT_SETTLE_MS: u64 = 500;
/// How long a rank that reported its end may take to exit before it is killed.
const EXIT_WAIT_MS: u64 = 3_000;

enum Input {
    Msg(Msg),
    Closed(usize),
    /// From another node's launcher (multi-node jobs, crate::rdzv).
    Remote(Remote),
}

/// One node's run of `scen run --hw`.
pub(crate) struct HwRun<'a> {
    s: &'a Scenario,
    file: &'a Path,
    o: &'a HwOptions,
    place: Place,
    token: Option<String>,
    mesh: Option<Mesh>,
    st: State,
    /// Armed from the start until the ranks are ended.
    signals: Option<signals::Guard>,
    /// The ending signal received during the run, read when the ranks are ended.
    interrupted: Option<i32>,
    rx: Option<mpsc::Receiver<Input>>,
    guard: Option<reaper::Guard>,
    procs: Vec<RankProc>,
    pgid: Option<i32>,
    /// `--kill-rank`: when the kill is due, and whether it was sent.
    kill_armed: Option<u64>,
    killed_by_hook: bool,
    /// Under torchrun started by scen (not by a real torchrun): this launcher is its agent.
    agent: Option<Agent>,
}

impl<'a> HwRun<'a> {
    pub(crate) fn new(
        s: &'a Scenario,
        file: &'a Path,
        o: &'a HwOptions,
        place: Place,
        token: Option<String>,
        mesh: Option<Mesh>,
        notes: Vec<String>,
    ) -> HwRun<'a> {
        let agent = (s.world.launcher == Launcher::Torchrun && !place.external).then(|| Agent {
            store: None,
            run_id: o.job_id.clone().unwrap_or_else(crate::launcher::job_token),
            stopped: vec![],
            timing: s.world.agent,
        });
        HwRun {
            s,
            file,
            o,
            agent,
            st: State::new(place.world, notes),
            place,
            token,
            mesh,
            signals: None,
            interrupted: None,
            rx: None,
            guard: None,
            procs: Vec::new(),
            pgid: None,
            kill_armed: None,
            killed_by_hook: false,
        }
    }

    /// Starts rank `rank` (local rank `lr`) in the ranks' process group.
    fn spawn_rank(
        &mut self,
        (rank, lr): (usize, usize),
        exe: &Path,
        probe_addr: &str,
        epoch: u64,
    ) -> Result<(), HwError> {
        let log =
            scen_procs::log::anonymous_log(&std::env::temp_dir(), &format!("scen-hw-rank{rank}"))
                .map_err(|e| HwError::Io(format!("creating a rank log: {e}")))?;
        let out = log.try_clone().map_err(|e| io("creating a rank log", e))?;
        let err = log.try_clone().map_err(|e| io("creating a rank log", e))?;
        let mut cmd = Command::new(exe);
        cmd.arg("__hw-rank")
            .arg(self.file)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(self.pgid.unwrap_or(0));
        self.rank_env(&mut cmd, (rank, lr), probe_addr, epoch);
        scen_procs::group::die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .map_err(|e| io(&format!("starting rank {rank} ({})", exe.display()), e))?;
        if let Some(g) = self.guard.as_mut() {
            g.watch(child.id());
        }
        self.pgid.get_or_insert(child.id() as i32);
        self.procs.push(RankProc {
            rank,
            child,
            log,
            exit: None,
            closed: false,
        });
        Ok(())
    }

    /// A rank's environment: torchrun's variables, oneCCL's (oneccl-env.sh's where the
    /// launcher's own env does not say), the side channel, the job token, `--rank-env`.
    fn rank_env(&self, cmd: &mut Command, (rank, lr): (usize, usize), probe: &str, epoch: u64) {
        let p = &self.place;
        cmd.env("RANK", rank.to_string())
            .env("LOCAL_RANK", lr.to_string())
            .env("WORLD_SIZE", p.world.to_string())
            .env("LOCAL_WORLD_SIZE", p.per_node.to_string())
            .env("GROUP_RANK", p.node_rank.to_string())
            .env("MASTER_ADDR", &p.master_addr)
            .env("MASTER_PORT", p.master_port.to_string())
            .env("CCL_LOCAL_RANK", lr.to_string())
            .env("CCL_LOCAL_SIZE", p.per_node.to_string())
            .env("SCEN_HW_PROBE", probe)
            .env("SCEN_HW_EPOCH_MS", epoch.to_string());
        match &self.agent {
            Some(a) => WorkerEnv {
                rank,
                world: p.world,
                nnodes: p.nnodes,
                per_node: p.per_node,
                run_id: &a.run_id,
            }
            .apply(cmd),
            // Started as plain processes: rank 0 hosts the store, whatever this launcher's env.
            None if !p.external => {
                cmd.env_remove("TORCHELASTIC_USE_AGENT_STORE");
            }
            None => {}
        }
        if let Some(t) = &self.token {
            cmd.env(JOB_TOKEN_ENV, t);
        }
        for (k, v) in ONECCL_ENV {
            if std::env::var_os(k).is_none() {
                cmd.env(k, v);
            }
        }
        if let Some(r) = oneccl_root() {
            cmd.env("ONECCL_ROOT", r);
        }
        cmd.envs(self.o.rank_env.iter().map(|(k, v)| (k, v)));
    }

    /// What arrived on the side channel and from the other launchers, waiting up to [`POLL`].
    fn take_inputs(&mut self, clock: &mut Watch) {
        let Some(rx) = self.rx.as_ref() else { return };
        let mut next = rx.recv_timeout(POLL).ok();
        while let Some(input) = next {
            let now = clock.now_ms();
            // A worker torchrun's agent stopped has ended: what it still says of its end is late.
            let stopped = |r: &usize| self.agent.as_ref().is_some_and(|a| a.stopped.contains(r));
            match input {
                Input::Msg(Msg::End { rank, .. } | Msg::Wait { rank, .. }) if stopped(&rank) => {}
                Input::Msg(m) => {
                    clock.progress(now);
                    watchdog::absorb(&mut self.st, m)
                }
                Input::Closed(rank) => {
                    clock.progress(now);
                    if let Some(p) = self.procs.iter_mut().find(|p| p.rank == rank) {
                        p.closed = true;
                    }
                }
                // Heartbeats are not progress (they come every second, stall or not).
                Input::Remote(r) => {
                    if let Some(m) = self.mesh.as_mut() {
                        if remote(&mut self.st, m, &self.place.local, r, now) {
                            clock.progress(now);
                        }
                    }
                }
            }
            next = rx.try_recv().ok();
        }
    }

    /// Rank processes that exited without reporting their end (once their last messages had
    /// time to arrive) end failed, by their exit.
    fn take_exits(&mut self, clock: &mut Watch, t: u64) {
        for p in self.procs.iter_mut() {
            if p.exit.is_none() {
                if let Ok(Some(status)) = p.child.try_wait() {
                    p.exit = Some((status, t));
                }
            }
            let Some((status, at)) = p.exit else { continue };
            if self.st.obs.ends[p.rank].is_none() && (p.closed || t >= at + EXIT_SETTLE_MS) {
                let failure = match (self.o.kill_rank_at, exit::code_and_signal(&status).1) {
                    (Some((rank, step)), Some(libc::SIGKILL))
                        if self.killed_by_hook && rank == p.rank =>
                    {
                        Failure::Killed {
                            signal: libc::SIGKILL,
                            by: Killer::Launcher {
                                reason: format!("--kill-rank {rank}:{}", step + 1),
                            },
                        }
                    }
                    _ => exit::failure(&status),
                };
                self.st.process_died(p.rank, failure, t);
                clock.progress(t);
            }
        }
    }

    /// `--kill-rank R:S`: SIGKILLs rank R `kill_delay_ms` after it started step S.
    fn kill_hook(&mut self, t: u64) {
        let Some((rank, step)) = self.o.kill_rank_at else {
            return;
        };
        if self.killed_by_hook {
            return;
        }
        let started = self.st.obs.step[rank].is_some_and(|s| s >= step);
        if started && self.kill_armed.is_none() {
            self.kill_armed = Some(t + self.o.kill_delay_ms);
        }
        if self.kill_armed.is_none_or(|at| t < at) {
            return;
        }
        let delay_ms = self.o.kill_delay_ms;
        if let Some(p) = self.procs.iter().find(|p| p.rank == rank) {
            tracing::warn!(
                rank,
                step = step + 1,
                "watchdog: --kill-rank: SIGKILL rank {rank} {delay_ms} ms into step {}",
                step + 1
            );
            // A child this launcher started and has not reaped.
            let _ = scen_procs::group::kill_process(p.child.id());
            self.st.notes.push(format!(
                "fault injected by the launcher: rank {rank} SIGKILLed {delay_ms} ms into step {}",
                step + 1
            ));
        }
        self.killed_by_hook = true;
    }

    /// torchrun's agent's check: a monitor interval after a failed worker exited (here or, for
    /// another node's ranks, `exit_ms` after their end was heard), it SIGTERMs the others.
    fn agent_check(&mut self, t: u64) {
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        let ends = &self.st.obs.ends;
        let failed = |r: usize| matches!(ends[r], Some((RankEnd::Failed { .. }, _)));
        let mut exits: Vec<(usize, u64)> = self
            .procs
            .iter()
            .filter(|p| failed(p.rank))
            .filter_map(|p| Some((p.rank, p.exit?.1)))
            .collect();
        exits.extend(
            (0..ends.len())
                .filter(|r| !self.place.local.contains(r))
                .filter_map(|r| match &ends[r] {
                    Some((RankEnd::Failed { .. }, at)) => {
                        Some((r, at + self.s.world.exit_ms_of(r)))
                    }
                    _ => None,
                }),
        );
        // Only a process still running can be stopped: one that exited has its own end.
        let running: Vec<usize> = self
            .procs
            .iter()
            .filter(|p| p.exit.is_none())
            .map(|p| p.rank)
            .collect();
        for r in agent.check(&mut self.st, exits, &running, t) {
            if let Some(p) = self.procs.iter().find(|p| p.rank == r) {
                // A child this launcher started and has not reaped.
                let _ = scen_procs::group::terminate_process(p.child.id());
            }
        }
    }

    /// Under torchrun, every verdict known is not the end yet while the agent has not acted on
    /// a failed worker and a worker process still runs (in its teardown: the check stops it,
    /// as the simulator's agent does).
    fn agent_to_act(&self) -> bool {
        let Some(agent) = self.agent.as_ref() else {
            return false;
        };
        let ends = &self.st.obs.ends;
        let failed = self
            .place
            .local
            .iter()
            .any(|r| matches!(ends[*r], Some((RankEnd::Failed { .. }, _))));
        agent.stopped.is_empty() && failed && self.procs.iter().any(|p| p.exit.is_none())
    }

    /// A signal ends the run: every unfinished rank ends failed where it was (its open call
    /// too), saying so.
    fn interrupt(&mut self, sig: i32, t: u64) {
        let st = &mut self.st;
        st.notes.push(interrupted_note("the launcher", sig));
        for &r in &self.place.local {
            if st.obs.ends[r].is_some() {
                continue;
            }
            let o = &mut st.obs;
            let (step, where_) = match (&o.waits[r], o.step[r]) {
                (Some(w), _) => (w.step, format!(" while it waited: {}", w.what)),
                (None, Some(step)) => (step, String::new()),
                (None, None) => (0, " before it started any step".into()),
            };
            o.ends[r] = Some((
                RankEnd::Failed {
                    step,
                    failure: Failure::Interrupted {
                        signal: sig,
                        launcher: ScenLauncher::Hw,
                        at: where_,
                    },
                },
                t,
            ));
            o.waits[r] = None;
            // The call it was in ends with it.
            watchdog::end_open_calls(o, r, t);
            st.forced.push(r);
        }
    }

    /// Lets ranks that reported their end exit (not after a signal: the user asked for an
    /// end), notes where the others' threads sleep (all a hang that does not repeat leaves).
    fn settle(&mut self) {
        let wait_ms = if self.interrupted.is_some() {
            0
        } else {
            EXIT_WAIT_MS
        };
        let settle_until = unix_ms() + wait_ms;
        let st = &self.st;
        while unix_ms() < settle_until
            && self.procs.iter_mut().any(|p| {
                st.obs.ends[p.rank].is_some()
                    && !st.forced.contains(&p.rank)
                    && p.exit.is_none()
                    && matches!(p.child.try_wait(), Ok(None))
            })
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        for p in self.procs.iter_mut() {
            if matches!(p.child.try_wait(), Ok(None)) {
                if let Some(threads) = scen_procs::threads::snapshot(p.child.id()) {
                    self.st
                        .notes
                        .push(format!("rank {} threads before SIGKILL: {threads}", p.rank));
                }
            }
        }
    }

    /// Kills the ranks still running, removes their /dev/shm files and notes what was done,
    /// with the failed ranks' last output lines and every rank's pid.
    fn kill_and_clean(&mut self) {
        let st = &mut self.st;
        let killed = procs::kill_all(self.pgid, &mut self.procs);
        let pids: Vec<u32> = self.procs.iter().map(|p| p.child.id()).collect();
        let removed = procs::remove_shm(&pids);
        if killed > 0 {
            tracing::warn!(
                killed,
                "watchdog: SIGKILLed {killed} rank process(es) still running"
            );
            st.notes.push(format!(
                "watchdog: SIGKILLed the {killed} rank process(es) still running (oneCCL has no timeout of its own)"
            ));
        }
        if removed > 0 {
            st.notes.push(format!(
                "removed {removed} /dev/shm file(s) left by rank processes"
            ));
        }
        for p in self.procs.iter() {
            procs::forward_rank_log(p.rank, &p.log);
            let failed = !matches!(st.obs.ends[p.rank], Some((RankEnd::Completed, _)));
            if failed {
                if let Some(tail) = scen_procs::log::tail(&p.log, 5) {
                    st.notes
                        .push(format!("rank {} output (last lines): {tail}", p.rank));
                }
            }
        }
        let pids: Vec<String> = self
            .procs
            .iter()
            .map(|p| format!("{}={}", p.rank, p.child.id()))
            .collect();
        st.notes
            .push(format!("rank processes (rank=pid): {}", pids.join(" ")));
    }

    /// The launcher has cleaned up (or is about to fail): the guard may go.
    fn finish_guard(&mut self) {
        if let Some(g) = self.guard.take() {
            g.done();
        }
    }

    /// A multi-node job: tells the other launchers how this node's ranks ended and that it
    /// leaves, and notes what they said of theirs.
    fn leave_the_mesh(&mut self) {
        let Some(m) = self.mesh.as_mut() else { return };
        let (st, local) = (&mut self.st, &self.place.local);
        announce_ends(m, st, local);
        let unfinished: Vec<usize> = local
            .iter()
            .copied()
            .filter(|r| st.obs.ends[*r].is_none())
            .collect();
        let why = match self.interrupted {
            Some(sig) => format!("its launcher received {}", signals::name(sig)),
            None => {
                "its launcher's watchdog stopped it (no rank could make progress, or --max-wall-s)"
                    .into()
            }
        };
        m.bye(unfinished, why);
        // What the other launchers said served this node's watchdog; their ranks' verdicts
        // are in their own reports (this one has no call records of theirs to diagnose).
        let heard: Vec<String> = (0..self.place.world)
            .filter(|r| !local.contains(r))
            .filter_map(|r| {
                let (end, _) = st.obs.ends[r].take()?;
                st.obs.waits[r] = None;
                Some(match end {
                    RankEnd::Completed => format!("rank {r} completed"),
                    RankEnd::Failed { step, failure } => {
                        format!("rank {r} failed at step {}: {}", step + 1, failure.text())
                    }
                })
            })
            .collect();
        if !heard.is_empty() {
            st.notes.push(format!(
                "heard from the other nodes' launchers: {}",
                heard.join("; ")
            ));
        }
    }
}

impl RankRun for HwRun<'_> {
    type Output = Report;
    type Error = HwError;

    fn start(&mut self) -> Result<Watch, HwError> {
        self.signals = Some(signals::Guard::arm().map_err(|e| HwError::Io(e.to_string()))?);
        let epoch = unix_ms();
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("probe listener", e))?;
        let probe_addr = listener
            .local_addr()
            .map_err(|e| io("probe listener", e))?
            .to_string();
        let exe = match &self.o.rank_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe().map_err(|e| io("finding the scen binary", e))?,
        };
        let (tx, rx) = mpsc::channel::<Input>();
        if let Some(m) = &self.mesh {
            let tx = tx.clone();
            m.spawn_readers(move |r| tx.send(Input::Remote(r)).is_ok());
        }
        spawn_acceptor(listener, tx);
        self.rx = Some(rx);
        self.host_agent_store(epoch)?;
        self.guard = start_guard(&exe, &mut self.st.notes);
        for lr in self.place.local_ranks.clone() {
            if let Err(e) = self.spawn_rank(lr, &exe, &probe_addr, epoch) {
                procs::kill_all(self.pgid, &mut self.procs);
                self.finish_guard();
                return Err(e);
            }
        }
        let plain = self.s.world.launcher == Launcher::Processes;
        if (self.place.local.contains(&0) || self.mesh.is_some()) && plain {
            // With env:// (what the launcher sets), rank 0 serves the store at MASTER_PORT
            // (under torchrun's agent store the agent does).
            self.st.store_hosts.insert(self.place.master_port, 0);
        }
        Ok(Watch::new(
            epoch,
            self.o.max_wall_ms,
            Some(signals::interrupted_by),
        ))
    }

    fn look(&mut self, clock: &mut Watch) -> Result<Look, HwError> {
        self.take_inputs(clock);
        let t = clock.now_ms();
        self.take_exits(clock, t);
        self.kill_hook(t);
        self.agent_check(t);
        if let Some(m) = self.mesh.as_mut() {
            announce_ends(m, &self.st, &self.place.local);
            m.tick(unix_ms());
        }
        Ok(Look::Decide)
    }

    fn all_ended(&self) -> bool {
        self.place
            .local
            .iter()
            .all(|r| self.st.obs.ends[*r].is_some())
            && !self.agent_to_act()
    }

    fn hopeless(&mut self, clock: &Watch, t_ms: u64) -> bool {
        let quiet = clock.silent_ms(t_ms) >= self.o.quiet_ms;
        if let Some(a) = self.agent.as_ref().filter(|_| quiet) {
            let running: Vec<usize> = self.procs.iter().map(|p| p.rank).collect();
            let port = self.place.master_port;
            if a.unserved_connects(&mut self.st, &running, port, t_ms) {
                return false;
            }
        }
        let stalled = quiet && watchdog::stalled(self.s, &mut self.st, &self.place.local, t_ms);
        if let Some(a) = self.agent.as_mut().filter(|_| stalled) {
            let world = &self.s.world;
            a.after_stall(&mut self.st, &self.place.local, |r| world.exit_ms_of(r));
        }
        stalled
    }

    fn stopped(&mut self, stop: Stop, t: u64) {
        match stop {
            Stop::Interrupted(sig) => {
                tracing::warn!(
                    t_ms = t,
                    "launcher: {} received: ending every rank",
                    signals::name(sig)
                );
                self.interrupt(sig, t);
            }
            Stop::Ended => {
                tracing::info!(t_ms = t, "watchdog: every local rank reported its end")
            }
            Stop::Watchdog => {
                crate::fr_dump::on_stall(self.s, &self.st.obs, self.o, &mut self.st.notes)
            }
            Stop::OutOfTime => {
                tracing::warn!(
                    t_ms = t,
                    "watchdog: --max-wall-s reached: stopping every rank"
                );
                self.st.notes.push(format!(
                    "stopped: the run reached the launcher's limit of {t} ms"
                ));
            }
        }
    }

    fn end(&mut self, _stop: Option<Stop>) {
        self.interrupted = self.signals.take().and_then(|g| g.received());
        self.settle();
        self.kill_and_clean();
        // The agent's store goes with its workers (torchrun's agent exits after them).
        if let Some(a) = self.agent.as_mut() {
            a.store = None;
        }
        self.finish_guard();
    }

    fn report(mut self, _stop: Stop, end_ms: u64) -> Result<Report, HwError> {
        self.leave_the_mesh();
        let (local, world) = (&self.place.local, self.place.world);
        if local.len() < world {
            self.st.notes.push(if self.place.external {
                "the other ranks' verdicts are in their own processes' reports".to_string()
            } else {
                format!(
                    "this node ran ranks {local:?} only; the others' verdicts are in their own nodes' reports"
                )
            });
        }
        Ok(report(self.s, self.st, local, end_ms))
    }
}

impl HwRun<'_> {
    /// Under torchrun, node 0's agent hosts the TCPStore before any worker starts.
    fn host_agent_store(&mut self, epoch: u64) -> Result<(), HwError> {
        let p = &self.place;
        let Some(agent) = self.agent.as_mut().filter(|_| p.node_rank == 0) else {
            return Ok(());
        };
        let local = p.master_addr == "127.0.0.1" || p.master_addr == "localhost";
        let bind_ip = if local { "127.0.0.1" } else { "0.0.0.0" };
        agent.store = Some(AgentStore::host(
            bind_ip,
            &p.master_addr,
            p.master_port,
            epoch,
        )?);
        self.st.notes.push(format!(
            "torchrun's agent (this launcher): TCPStore listening on {}:{} in PyTorch's protocol (TORCHELASTIC_USE_AGENT_STORE=True)",
            p.master_addr, p.master_port
        ));
        Ok(())
    }
}

fn io(what: &str, e: std::io::Error) -> HwError {
    HwError::Io(format!("{what}: {e}"))
}

/// The cleanup guard (crate::reaper), or a note saying why there is none.
fn start_guard(exe: &Path, notes: &mut Vec<String>) -> Option<reaper::Guard> {
    match reaper::Guard::start(exe) {
        Ok(g) => Some(g),
        Err(e) => {
            notes.push(format!(
                "no cleanup guard ({e}): if this launcher is SIGKILLed, /dev/shm files of its ranks may stay"
            ));
            None
        }
    }
}

/// The side channel: each rank's connection, one JSON message a line, until it closes.
fn spawn_acceptor(listener: TcpListener, tx: mpsc::Sender<Input>) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || read_rank(conn, tx));
        }
    });
}

fn read_rank(conn: std::net::TcpStream, tx: mpsc::Sender<Input>) {
    let mut rank = None;
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { break };
        let Ok(m) = serde_json::from_str::<Msg>(&line) else {
            continue;
        };
        if let Msg::Hello { rank: r, .. } = &m {
            rank = Some(*r);
        }
        if tx.send(Input::Msg(m)).is_err() {
            return;
        }
    }
    if let Some(r) = rank {
        let _ = tx.send(Input::Closed(r));
    }
}
