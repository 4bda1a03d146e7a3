//! The launcher of `scen run --hw`: one real process per local rank (scen re-executed as
//! `scen __hw-rank FILE` with torchrun's environment), a side channel collecting each rank's
//! events and wait records, and the watchdog oneCCL lacks.
//!
//! oneCCL never times out and never notices a dead peer (docs/hw.md), so the launcher decides
//! when a run is over: every unfinished rank waits, and each wait is hopeless (a peer it waits
//! for has ended or is inside another call) or past its deadline. Then it SIGKILLs the process
//! group, removes the killed ranks' /dev/shm files and builds the same Report as the simulator.

use crate::child::uses_device_backend;
use crate::launch_env;
use crate::net::unix_ms;
use crate::probe::Msg;
use crate::{HwError, HwOptions};
use scen_core::diagnose::record::CallState;
use scen_core::observe::Observed;
use scen_core::runtime::rank::RankEnd;
use scen_core::scenario::Scenario;
use scen_core::stall;
use scen_core::trace::{Event, EventKind, Wait};
use scen_core::verdict::{check_expectations, diagnose_run, rank_verdict, RankVerdict, Report};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Extra time a wait gets past its deadline before the launcher enforces it.
const DEADLINE_GRACE_MS: u64 = 1_000;
/// How long a rank's messages may still arrive after its process exited.
const EXIT_SETTLE_MS: u64 = 500;
/// How long a rank that reported its end may take to exit before it is killed.
const EXIT_WAIT_MS: u64 = 3_000;

/// The env oneccl-env.sh sets; used for ranks where the launcher's own env does not say.
const ONECCL_ENV: [(&str, &str); 10] = [
    ("CCL_PLUGIN", "ONECCL_LEGACY_CPU"),
    ("CCL_KVS_IFACE", "lo"),
    ("FI_PROVIDER", "tcp"),
    ("FI_TCP_IFACE", "lo"),
    // Not the shm transport: with it, the concurrent 2-rank sub-communicators of an 8-process
    // job (sglang_golden_w8_tp2_u2_r1_cfg2) stayed inside onecclCommInitRank; tcp on lo runs
    // it in 3.5 s. Set CCL_ATL_SHM=1 yourself for large-message speed.
    ("CCL_ATL_SHM", "0"),
    ("CCL_YIELD", "sched_yield"),
    ("CCL_PROCESS_LAUNCHER", "none"),
    ("CCL_LOG_LEVEL", "error"),
    ("CCL_KVS_CONNECTION_TIMEOUT", "30"),
    ("IPATH_NO_BACKTRACE", "1"),
];

/// Where oneCCL is: $ONECCL_ROOT, else the install script's default prefix if it is there.
pub fn oneccl_root() -> Option<PathBuf> {
    if let Some(r) = std::env::var_os("ONECCL_ROOT") {
        return Some(PathBuf::from(r));
    }
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".cache/oneccl-cpu");
    p.join("lib/libccl.so.2").exists().then_some(p)
}

/// What a run needs from the machine, checked before any process starts.
pub fn check_eligible(s: &Scenario, o: &HwOptions, external: bool) -> Result<(), HwError> {
    if !s.world.services.is_empty() {
        return Err(HwError::NotEligible(
            "it declares [[world.service]] (another job's TCPStore), which only the simulator provides".into(),
        ));
    }
    if !s.faults.is_empty() {
        return Err(HwError::NotEligible(
            "it declares [[faults]], which the simulator injects (on hardware, `--kill-rank R:S` SIGKILLs a real rank)".into(),
        ));
    }
    let nodes = s.world.nodes.len();
    let nnodes = o.nnodes.unwrap_or(if external { nodes } else { 1 });
    if nodes != nnodes {
        return Err(HwError::NotEligible(format!(
            "its world has {nodes} nodes; run it on {nodes} machines with `--nnodes {nodes} --node-rank I --master-addr A --master-port P` (one machine cannot stand in for several: node host names would not resolve)"
        )));
    }
    if let Some(n) = o.nproc_per_node {
        if n != s.world.ranks_per_node {
            return Err(HwError::Usage(format!(
                "--nproc-per-node {n} does not match the scenario's ranks_per_node = {}",
                s.world.ranks_per_node
            )));
        }
    }
    if o.node_rank.unwrap_or(0) >= nnodes {
        return Err(HwError::Usage(format!(
            "--node-rank {} is out of range for --nnodes {nnodes}",
            o.node_rank.unwrap_or(0)
        )));
    }
    if uses_device_backend(s) {
        let c = oneccl_sys::candidates_with_root(oneccl_root());
        oneccl_sys::Api::load_from(c).map_err(|e| HwError::Unavailable(e.to_string()))?;
    }
    if o.require_xpu {
        let p = level_zero_sys::probe().map_err(|e| HwError::NoXpu(e.to_string()))?;
        if p.devices.is_empty() {
            return Err(HwError::NoXpu(
                p.note
                    .unwrap_or_else(|| "Level Zero lists no device".into()),
            ));
        }
    }
    Ok(())
}

struct RankProc {
    rank: usize,
    child: Child,
    log: PathBuf,
    exit: Option<(ExitStatus, u64)>,
    closed: bool,
}

/// What the launcher has heard, as core's observation (so core's stall analysis applies).
struct State {
    obs: Observed,
    /// Ranks whose end the watchdog decided (a deadline passed inside the device library).
    forced: Vec<usize>,
    notes: Vec<String>,
    last_msg_ms: u64,
}

enum Input {
    Msg(Msg),
    Closed(usize),
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Runs the local ranks of `s` as processes and reports.
pub fn launch(s: &Scenario, file: &Path, o: &HwOptions) -> Result<Report, HwError> {
    let external = launch_env::detect(&launch_env::process_env())
        .map_err(|e| HwError::Usage(e.to_string()))?;
    check_eligible(s, o, external.is_some())?;
    let world = s.world.size();
    let mut per_node = s.world.ranks_per_node;
    let mut node_rank = o.node_rank.unwrap_or(0);
    // (global rank, local rank) of each process this launcher starts.
    let mut local_ranks: Vec<(usize, usize)> = (0..per_node)
        .map(|lr| (node_rank * per_node + lr, lr))
        .collect();
    let mut notes = Vec::new();
    if let Some(id) = &external {
        // Started by torchrun/srun/mpirun: this process is one rank; run just that one.
        if id.world_size != world {
            return Err(HwError::Usage(format!(
                "{} says WORLD_SIZE={} but the scenario's world has {world} ranks",
                id.launcher, id.world_size
            )));
        }
        local_ranks = vec![(id.rank, id.local_rank)];
        per_node = id.local_world_size;
        node_rank = id.rank / per_node.max(1);
        notes.push(format!(
            "started by {}: this process ran rank {} only",
            id.launcher, id.rank
        ));
    }
    let local: Vec<usize> = local_ranks.iter().map(|(r, _)| *r).collect();
    let epoch = unix_ms();
    let io = |what: &str, e: std::io::Error| HwError::Io(format!("{what}: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("probe listener", e))?;
    let probe_addr = listener
        .local_addr()
        .map_err(|e| io("probe listener", e))?
        .to_string();
    let master_port = match (o.master_port, &external) {
        (Some(p), _) => p,
        (None, Some(id)) => id.master_port,
        (None, None) => free_port().map_err(|e| io("picking MASTER_PORT", e))?,
    };
    let master_addr = o
        .master_addr
        .clone()
        .or_else(|| external.as_ref().map(|id| id.master_addr.clone()))
        .unwrap_or_else(|| "127.0.0.1".into());
    let exe = match &o.rank_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| io("finding the scen binary", e))?,
    };
    let logs = std::env::temp_dir().join(format!("scen-hw-{}-{epoch}", std::process::id()));
    std::fs::create_dir_all(&logs).map_err(|e| io("creating the log directory", e))?;
    let (tx, rx) = mpsc::channel::<Input>();
    spawn_acceptor(listener, tx);
    let root = oneccl_root();
    let mut procs: Vec<RankProc> = Vec::new();
    let mut pgid: Option<i32> = None;
    for &(rank, lr) in &local_ranks {
        let log = logs.join(format!("rank{rank}.log"));
        let out = std::fs::File::create(&log).map_err(|e| io("creating a rank log", e))?;
        let err = out.try_clone().map_err(|e| io("creating a rank log", e))?;
        let mut cmd = Command::new(&exe);
        cmd.arg("__hw-rank")
            .arg(file)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", lr.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_WORLD_SIZE", per_node.to_string())
            .env("GROUP_RANK", node_rank.to_string())
            .env("MASTER_ADDR", &master_addr)
            .env("MASTER_PORT", master_port.to_string())
            .env("CCL_LOCAL_RANK", lr.to_string())
            .env("CCL_LOCAL_SIZE", per_node.to_string())
            .env("SCEN_HW_PROBE", &probe_addr)
            .env("SCEN_HW_EPOCH_MS", epoch.to_string())
            .process_group(pgid.unwrap_or(0));
        for (k, v) in ONECCL_ENV {
            if std::env::var_os(k).is_none() {
                cmd.env(k, v);
            }
        }
        if let Some(r) = &root {
            cmd.env("ONECCL_ROOT", r);
        }
        cmd.envs(o.rank_env.iter().map(|(k, v)| (k, v)));
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                kill_all(pgid, &mut procs);
                return Err(io(&format!("starting rank {rank} ({})", exe.display()), e));
            }
        };
        pgid.get_or_insert(child.id() as i32);
        procs.push(RankProc {
            rank,
            child,
            log,
            exit: None,
            closed: false,
        });
    }
    let mut st = State {
        obs: Observed::new(world),
        notes,
        forced: vec![],
        last_msg_ms: 0,
    };
    let mut kill_armed: Option<u64> = None;
    let mut killed_by_hook = false;
    let now = || unix_ms().saturating_sub(epoch);
    let end_ms = loop {
        let mut next = rx.recv_timeout(Duration::from_millis(20)).ok();
        while let Some(input) = next {
            st.last_msg_ms = now();
            match input {
                Input::Msg(m) => absorb(&mut st, m),
                Input::Closed(rank) => {
                    if let Some(p) = procs.iter_mut().find(|p| p.rank == rank) {
                        p.closed = true;
                    }
                }
            }
            next = rx.try_recv().ok();
        }
        let t = now();
        for p in procs.iter_mut() {
            if p.exit.is_none() {
                if let Ok(Some(status)) = p.child.try_wait() {
                    p.exit = Some((status, t));
                }
            }
            if let Some((status, at)) = p.exit {
                if st.obs.ends[p.rank].is_none() && (p.closed || t >= at + EXIT_SETTLE_MS) {
                    let step = st.obs.waits[p.rank]
                        .as_ref()
                        .map(|w| w.step)
                        .or(st.obs.step[p.rank])
                        .unwrap_or(0);
                    st.obs.ends[p.rank] = Some((
                        RankEnd::Failed {
                            step,
                            error: describe_exit(status),
                        },
                        t,
                    ));
                    st.last_msg_ms = t;
                }
            }
        }
        if let Some((rank, step)) = o.kill_rank_at {
            if !killed_by_hook {
                let started = st.obs.step[rank].is_some_and(|s| s >= step);
                if started && kill_armed.is_none() {
                    kill_armed = Some(t + o.kill_delay_ms);
                }
                if kill_armed.is_some_and(|at| t >= at) {
                    if let Some(p) = procs.iter().find(|p| p.rank == rank) {
                        tracing::warn!(
                            rank,
                            step = step + 1,
                            "watchdog: --kill-rank: SIGKILL rank {rank} {} ms into step {}",
                            o.kill_delay_ms,
                            step + 1
                        );
                        // SAFETY: kill(2) on a child this launcher started and has not reaped.
                        unsafe { libc::kill(p.child.id() as i32, libc::SIGKILL) };
                        st.notes.push(format!(
                            "fault injected by the launcher: rank {rank} SIGKILLed {} ms into step {}",
                            o.kill_delay_ms,
                            step + 1
                        ));
                    }
                    killed_by_hook = true;
                }
            }
        }
        if local.iter().all(|r| st.obs.ends[*r].is_some()) {
            tracing::info!(t_ms = t, "watchdog: every local rank reported its end");
            break t;
        }
        if t >= st.last_msg_ms + o.quiet_ms && stalled(s, &mut st, &local, t) {
            break t;
        }
        if o.max_wall_ms.is_some_and(|m| t >= m) {
            tracing::warn!(
                t_ms = t,
                "watchdog: --max-wall-s reached: stopping every rank"
            );
            st.notes.push(format!(
                "stopped: the run reached the launcher's limit of {} ms",
                t
            ));
            break t;
        }
    };
    // Ranks that reported their end are finalizing oneCCL and exiting: give them a moment.
    let settle_until = now() + EXIT_WAIT_MS;
    while now() < settle_until
        && procs.iter_mut().any(|p| {
            st.obs.ends[p.rank].is_some()
                && !st.forced.contains(&p.rank)
                && p.exit.is_none()
                && matches!(p.child.try_wait(), Ok(None))
        })
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = kill_all(pgid, &mut procs);
    let removed = remove_shm(&procs);
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
    for p in &procs {
        forward_rank_log(p.rank, &p.log);
        let failed = !matches!(st.obs.ends[p.rank], Some((RankEnd::Completed, _)));
        if failed {
            if let Some(tail) = log_tail(&p.log, 5) {
                st.notes
                    .push(format!("rank {} output (last lines): {tail}", p.rank));
            }
        }
    }
    let pids: Vec<String> = procs
        .iter()
        .map(|p| format!("{}={}", p.rank, p.child.id()))
        .collect();
    st.notes
        .push(format!("rank processes (rank=pid): {}", pids.join(" ")));
    let _ = std::fs::remove_dir_all(&logs);
    if local.len() < world {
        st.notes.push(format!(
            "this node ran ranks {local:?} only; the others' verdicts are in their own nodes' reports"
        ));
    }
    Ok(report(s, st, &local, end_ms))
}

fn absorb(st: &mut State, m: Msg) {
    match m {
        Msg::Hello { .. } => {}
        Msg::Event(e) => st.obs.record_event(e),
        Msg::Wait { rank, wait } => {
            if rank < st.obs.waits.len() {
                st.obs.waits[rank] = wait;
            }
        }
        Msg::End { rank, failed, t_ms } => {
            if rank < st.obs.ends.len() {
                st.obs.waits[rank] = None;
                let end = match failed {
                    None => RankEnd::Completed,
                    Some((step, error)) => RankEnd::Failed { step, error },
                };
                st.obs.ends[rank] = Some((end, t_ms));
            }
        }
        Msg::Call(rec) => st.obs.record_call(*rec),
        Msg::Group(rec) => st.obs.groups.push(rec),
        Msg::Note { text, .. } => {
            if !st.notes.contains(&text) {
                st.notes.push(text);
            }
        }
    }
}

/// Can nothing more happen? Every unfinished local rank waits, and each wait is hopeless: past
/// its deadline (+ grace), or with no deadline and a peer that has ended or waits in another call.
fn stalled(s: &Scenario, st: &mut State, local: &[usize], t: u64) -> bool {
    let o = &st.obs;
    let open: Vec<usize> = local
        .iter()
        .copied()
        .filter(|r| o.ends[*r].is_none())
        .collect();
    let same_call = |a: &Wait, b: &Wait| a.group == b.group && a.seq == b.seq;
    let hopeless = |r: usize| -> bool {
        let Some(w) = &o.waits[r] else { return false };
        match w.deadline_ms {
            Some(d) => t >= d + DEADLINE_GRACE_MS,
            None => w.peers.iter().any(|p| {
                o.ends.get(*p).is_some_and(|e| e.is_some())
                    || o.waits
                        .get(*p)
                        .and_then(|x| x.as_ref())
                        .is_some_and(|pw| !same_call(w, pw))
            }),
        }
    };
    if open.is_empty() || !open.iter().all(|r| hopeless(*r)) {
        return false;
    }
    let found = stall::analyse(s, o, t);
    let at_stall = (o.calls.clone(), stall::rank_states(s, o), t);
    // Waits past their deadline: the real process raises the timeout error there (blocking
    // wait); the device library cannot, so the launcher does it for the rank.
    for r in open {
        let w = st.obs.waits[r].clone().expect("waits");
        if let (Some(d), Some(err)) = (w.deadline_ms, w.timeout_error) {
            tracing::warn!(
                rank = r,
                step = w.step + 1,
                deadline_ms = d,
                "watchdog: rank {r} is past its deadline in a wait the device library cannot time out: raising {err:?} for it"
            );
            st.obs.trace.events.push(Event {
                t_ms: d,
                rank: Some(r),
                step: Some(w.step),
                kind: EventKind::Error,
                text: err.clone(),
            });
            st.obs.ends[r] = Some((
                RankEnd::Failed {
                    step: w.step,
                    error: err,
                },
                d,
            ));
            st.obs.waits[r] = None;
            st.forced.push(r);
            // The call the rank was in ends failed there, as its own record would have said.
            for c in st.obs.calls.iter_mut() {
                if c.rank == r && c.state == CallState::Started {
                    c.state = CallState::Failed;
                    c.t_end_ms = Some(d);
                }
            }
        }
    }
    st.obs.first_stall_calls.get_or_insert(at_stall);
    if let Some(stall) = found {
        let ranks: Vec<String> = stall.stuck.iter().map(|x| x.rank.to_string()).collect();
        tracing::warn!(
            t_ms = t,
            "watchdog: stall: no rank can make progress; stuck ranks [{}]: ending the run",
            ranks.join(", ")
        );
        st.notes.push(format!(
            "stall: no rank can make progress; stuck ranks [{}] (the launcher's watchdog ends the run)",
            ranks.join(", ")
        ));
        st.obs.first_stall.get_or_insert_with(|| stall.clone());
        st.obs.final_stall = Some(stall);
    }
    true
}

/// A rank process's own output (its log lines, with `-v` its spans) as INFO events of the
/// launcher, so `scen run --hw -v` and `--log-file` show every rank in one place.
fn forward_rank_log(rank: usize, path: &Path) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::info!(target: "scen_hw::rank_output", rank, "{line}");
    }
}

fn describe_exit(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (_, Some(sig)) => format!(
            "the rank's process was killed by signal {sig}{}",
            if sig == libc::SIGKILL {
                " (SIGKILL)"
            } else {
                ""
            }
        ),
        (Some(c), _) => format!("the rank's process exited with code {c} without reporting an end"),
        _ => "the rank's process ended".into(),
    }
}

fn spawn_acceptor(listener: TcpListener, tx: mpsc::Sender<Input>) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
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
            });
        }
    });
}

/// SIGKILLs the process group (only this launcher's rank processes are in it) and reaps them.
/// Returns how many were still running.
fn kill_all(pgid: Option<i32>, procs: &mut [RankProc]) -> usize {
    let mut running = 0;
    for p in procs.iter_mut() {
        if p.exit.is_none() && matches!(p.child.try_wait(), Ok(None)) {
            running += 1;
        }
    }
    if let Some(g) = pgid {
        if running > 0 {
            // SAFETY: kill(2) on the process group of this launcher's own children.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }
    for p in procs.iter_mut() {
        let _ = p.child.wait();
    }
    running
}

/// Removes `/dev/shm/<pid>:*` (oneCCL's shm transport files) of the rank processes.
fn remove_shm(procs: &[RankProc]) -> usize {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let prefixes: Vec<String> = procs.iter().map(|p| format!("{}:", p.child.id())).collect();
    let mut n = 0;
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if prefixes.iter().any(|p| name.starts_with(p)) && std::fs::remove_file(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

fn log_tail(path: &Path, lines: usize) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return None;
    }
    Some(all[all.len().saturating_sub(lines)..].join(" | "))
}

fn report(s: &Scenario, mut st: State, local: &[usize], end_ms: u64) -> Report {
    let o = &mut st.obs;
    o.trace.events.sort_by_key(|e| e.t_ms);
    let ranks: Vec<RankVerdict> = (0..s.world.size())
        .map(|r| rank_verdict(o.ends[r].as_ref(), o.waits[r].as_ref(), o.step[r]))
        .collect();
    let expectations = check_expectations(s, &ranks)
        .into_iter()
        .filter(|e| local.contains(&e.rank))
        .collect();
    for n in &st.notes {
        o.trace.events.push(Event {
            t_ms: end_ms,
            rank: None,
            step: None,
            kind: EventKind::Verdict,
            text: n.clone(),
        });
    }
    let (diagnosis, calls) =
        diagnose_run(&ranks, &o.calls, &o.groups, o.first_stall_calls.as_ref());
    Report {
        scenario: s.name.clone(),
        file: s.file.clone(),
        mode: "hw".into(),
        seed: s.sim.seed,
        ranks,
        first_stall: o.first_stall.clone(),
        final_stall: o.final_stall.clone(),
        end_ms,
        trace_hash: format!("{:016x}", o.trace.hash()),
        trace: o.trace.clone(),
        expectations,
        notes: st.notes,
        calls,
        diagnosis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scen_core::scenario::parse;

    fn scenario() -> Scenario {
        parse(
            "[world]\nranks_per_node = 3\nplatform = \"xpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\n[[step]]\nop = \"all_reduce\"\nfill = \"1\"\n",
            "t.toml",
            "t",
        )
        .expect("parses")
    }

    fn wait(seq: u64, peers: Vec<usize>, deadline_ms: Option<u64>) -> Wait {
        Wait {
            step: 1,
            what: format!("all_reduce #{seq}"),
            group: Some("WORLD (0)".into()),
            seq: Some(seq),
            peers,
            since_ms: 0,
            deadline_ms,
            timeout_error: deadline_ms.map(|_| "RuntimeError: timed out".into()),
        }
    }

    fn state() -> State {
        State {
            obs: Observed {
                waits: vec![None; 3],
                step: vec![Some(1); 3],
                ends: vec![None; 3],
                ..Default::default()
            },
            notes: vec![],
            forced: vec![],
            last_msg_ms: 0,
        }
    }

    #[test]
    fn ranks_in_the_same_call_with_live_peers_are_not_a_stall() {
        let s = scenario();
        let mut st = state();
        for r in 0..3 {
            let peers = (0..3).filter(|p| *p != r).collect();
            st.obs.waits[r] = Some(wait(2, peers, None));
        }
        assert!(!stalled(&s, &mut st, &[0, 1, 2], 10_000));
    }

    #[test]
    fn a_dead_peer_makes_every_waiting_rank_hopeless() {
        let s = scenario();
        let mut st = state();
        st.obs.ends[2] = Some((
            RankEnd::Failed {
                step: 1,
                error: "killed".into(),
            },
            5,
        ));
        st.obs.waits[0] = Some(wait(2, vec![1, 2], None));
        st.obs.waits[1] = Some(wait(2, vec![0, 2], None));
        assert!(stalled(&s, &mut st, &[0, 1, 2], 10_000));
        let stall = st.obs.final_stall.expect("a stall");
        assert_eq!(stall.stuck.len(), 2);
        assert!(stall.stuck[0].peers[1].starts_with("rank 2, which failed"));
    }

    #[test]
    fn a_wait_with_a_deadline_fails_with_its_timeout_error_only_after_the_grace() {
        let s = scenario();
        let mut st = state();
        st.obs.ends[2] = Some((RankEnd::Completed, 5));
        st.obs.waits[0] = Some(wait(2, vec![1, 2], Some(1_000)));
        st.obs.waits[1] = Some(wait(2, vec![0, 2], None));
        assert!(!stalled(
            &s,
            &mut st,
            &[0, 1, 2],
            1_000 + DEADLINE_GRACE_MS - 1
        ));
        assert!(stalled(&s, &mut st, &[0, 1, 2], 1_000 + DEADLINE_GRACE_MS));
        assert_eq!(
            st.obs.ends[0],
            Some((
                RankEnd::Failed {
                    step: 1,
                    error: "RuntimeError: timed out".into()
                },
                1_000
            ))
        );
    }
}
