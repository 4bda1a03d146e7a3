//! The launcher of `scen run --hw`: one real process per local rank (scen re-executed as
//! `scen __hw-rank FILE` with torchrun's environment), a side channel collecting each rank's
//! events and wait records, and the watchdog oneCCL lacks.
//!
//! oneCCL never times out and never notices a dead peer (docs/hw.md), so the launcher decides
//! when a run is over: every unfinished rank waits, and each wait is hopeless (a peer it waits
//! for has ended or is inside another call) or past its deadline. Then it SIGKILLs the process
//! group, removes the killed ranks' /dev/shm files and builds the same Report as the simulator.
//!
//! No path leaves a process or a file behind: SIGINT/SIGTERM/SIGHUP end the run with a report
//! (scen-procs' `signals`); ranks die with the launcher even if it is SIGKILLed (scen-procs'
//! `group`), and a guard process then removes their /dev/shm files ([`reaper`]); rank logs
//! have no name on disk (scen-procs' `log`).

use crate::child::uses_device_backend;
use crate::launch_env;
use crate::net::unix_ms;
use crate::nodes::{announce_ends, remote};
use crate::probe::Msg;
use crate::procs::{self, RankProc};
use crate::rdzv::{self, Mesh, Remote};
use crate::watchdog::{self, State};
use crate::{reaper, HwError, HwOptions};
use scen_core::outcome::{Failure, Killer, Launcher, RankEnd};
use scen_core::report::Report;
use scen_core::report::{Mode, RunFacts};
use scen_core::scenario::Scenario;
use scen_procs::watch::{Watch, POLL};
use scen_procs::{exit, signals};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
/// How long a rank's messages may still arrive after its process exited.
const EXIT_SETTLE_MS: u64 = 500;
/// How long a rank that reported its end may take to exit before it is killed.
const EXIT_WAIT_MS: u64 = 3_000;

/// The env oneccl-env.sh sets; used for ranks where the launcher's own env does not say.
pub(crate) const ONECCL_ENV: [(&str, &str); 10] = [
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
    if let Some(why) = s.sim.payloads.real_mode_refusal() {
        return Err(HwError::NotEligible(why));
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

enum Input {
    Msg(Msg),
    Closed(usize),
    /// From another node's launcher (multi-node jobs, [`rdzv`]).
    Remote(Remote),
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
    let nnodes = o.nnodes.unwrap_or(1);
    let multinode = external.is_none() && nnodes > 1;
    if multinode && o.master_port.is_none() {
        return Err(HwError::Usage(format!(
            "--nnodes {nnodes} needs --master-port P (the same on every node; node 0's launcher also serves the launchers' rendezvous on P+1) and --master-addr of node 0"
        )));
    }
    let master_port = match (o.master_port, &external) {
        (Some(p), _) => p,
        (None, Some(id)) => id.master_port,
        // Below the ephemeral range: no other process's bind(0) or outgoing connection is
        // handed it before rank 0's store binds it (CI saw EADDRINUSE with the OS's pick).
        (None, None) => scen_procs::port::below_ephemeral()
            .and_then(|l| Ok(l.local_addr()?.port()))
            .map_err(|e| HwError::Io(format!("picking MASTER_PORT: {e}")))?,
    };
    let master_addr = o
        .master_addr
        .clone()
        .or_else(|| external.as_ref().map(|id| id.master_addr.clone()))
        .unwrap_or_else(|| "127.0.0.1".into());
    // Every process of one job shares a token the TCPStore checks (docs/hw.md "The TCPStore
    // handshake"): the user's SCEN_HW_JOB_TOKEN if set; else one launcher draws it, node 0's
    // for a multi-node job (the others fetch it at the launchers' rendezvous); under
    // srun/mpirun it is derived from the job's id (rank 0 hosts the store, no launcher meets).
    let user_token = std::env::var(JOB_TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let mut mesh: Option<Mesh> = None;
    let token = match &external {
        Some(id) => match &user_token {
            Some(t) => Some(t.clone()),
            None => match launch_env::job_env_token(&launch_env::process_env(), id) {
                Some((t, from)) => {
                    notes.push(format!(
                        "job token derived from {from} (set SCEN_HW_JOB_TOKEN for a secret one)"
                    ));
                    Some(t)
                }
                None => {
                    notes.push(format!(
                        "no job token: {} gives no job id scen knows and SCEN_HW_JOB_TOKEN is unset, so the TCPStore accepts any scen process",
                        id.launcher
                    ));
                    None
                }
            },
        },
        None if multinode => {
            let bytes =
                std::fs::read(file).map_err(|e| HwError::Io(format!("{}: {e}", file.display())))?;
            let job_id = o
                .job_id
                .clone()
                .or_else(|| std::env::var(rdzv::JOB_ID_ENV).ok())
                .filter(|j| !j.is_empty());
            let id = rdzv::Identity::new(
                &bytes,
                job_id.as_deref(),
                nnodes,
                node_rank,
                per_node,
                &master_addr,
                master_port,
                o.rdzv_timeout_ms,
            );
            let outcome = if node_rank == 0 {
                rdzv::host(&id, user_token.is_none().then(job_token))
            } else {
                rdzv::join(&id, user_token.clone())
            }
            .map_err(HwError::Usage)?;
            let job_note = format!(
                "job {}: node {node_rank} of {nnodes} (ranks {local:?}); launchers' rendezvous at {master_addr}:{}",
                id.label,
                master_port as u32 + 1,
            );
            let token_from = if user_token.is_some() {
                "from SCEN_HW_JOB_TOKEN"
            } else if node_rank == 0 {
                "drawn by this launcher"
            } else {
                "fetched from node 0's launcher"
            };
            match outcome {
                rdzv::Outcome::Started { token, mesh: m } => {
                    notes.push(format!("{job_note}; job token {token_from}"));
                    mesh = Some(m);
                    token.or(user_token)
                }
                rdzv::Outcome::Failed { reason } => {
                    notes.push(job_note);
                    tracing::warn!("rendezvous failed: {reason}");
                    return Ok(rendezvous_failed(s, notes, &local, &reason));
                }
            }
        }
        None => Some(user_token.unwrap_or_else(job_token)),
    };
    let signals = signals::Guard::arm().map_err(|e| HwError::Io(e.to_string()))?;
    let epoch = unix_ms();
    let io = |what: &str, e: std::io::Error| HwError::Io(format!("{what}: {e}"));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("probe listener", e))?;
    let probe_addr = listener
        .local_addr()
        .map_err(|e| io("probe listener", e))?
        .to_string();
    let exe = match &o.rank_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| io("finding the scen binary", e))?,
    };
    let (tx, rx) = mpsc::channel::<Input>();
    if let Some(m) = &mesh {
        let tx = tx.clone();
        m.spawn_readers(move |r| tx.send(Input::Remote(r)).is_ok());
    }
    spawn_acceptor(listener, tx);
    let mut guard = match reaper::Guard::start(&exe) {
        Ok(g) => Some(g),
        Err(e) => {
            notes.push(format!(
                "no cleanup guard ({e}): if this launcher is SIGKILLed, /dev/shm files of its ranks may stay"
            ));
            None
        }
    };
    let root = oneccl_root();
    let mut procs: Vec<RankProc> = Vec::new();
    let mut pgid: Option<i32> = None;
    for &(rank, lr) in &local_ranks {
        let log =
            scen_procs::log::anonymous_log(&std::env::temp_dir(), &format!("scen-hw-rank{rank}"))
                .map_err(|e| HwError::Io(format!("creating a rank log: {e}")))?;
        let out = log.try_clone().map_err(|e| io("creating a rank log", e))?;
        let err = log.try_clone().map_err(|e| io("creating a rank log", e))?;
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
        if let Some(t) = &token {
            cmd.env(JOB_TOKEN_ENV, t);
        }
        scen_procs::group::die_with_parent(&mut cmd);
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
                procs::kill_all(pgid, &mut procs);
                finish_guard(guard);
                return Err(io(&format!("starting rank {rank} ({})", exe.display()), e));
            }
        };
        if let Some(g) = guard.as_mut() {
            g.watch(child.id());
        }
        pgid.get_or_insert(child.id() as i32);
        procs.push(RankProc {
            rank,
            child,
            log,
            exit: None,
            closed: false,
        });
    }
    let mut st = State::new(world, notes);
    let agent = crate::net::agent_store_env(&launch_env::process_env());
    if (local.contains(&0) || mesh.is_some()) && !agent {
        // With env:// (what the launcher sets), rank 0 serves the store at MASTER_PORT (under
        // torchrun's agent store the agent does).
        st.store_hosts.insert(master_port, 0);
    }
    let mut clock = Watch::new(epoch, o.max_wall_ms, Some(signals::interrupted_by));
    let end_ms = watch(
        s, o, &mut st, &mut procs, &rx, &local, &mut clock, &mut mesh,
    );
    let interrupted = signals.received();
    drop(signals);
    finish(&mut st, &mut procs, pgid, interrupted);
    finish_guard(guard);
    if let Some(m) = mesh.as_mut() {
        announce_ends(m, &st, &local);
        let unfinished: Vec<usize> = local
            .iter()
            .copied()
            .filter(|r| st.obs.ends[*r].is_none())
            .collect();
        let why = match interrupted {
            Some(sig) => format!("its launcher received {}", signals::name(sig)),
            None => {
                "its launcher's watchdog stopped it (no rank could make progress, or --max-wall-s)"
                    .into()
            }
        };
        m.bye(unfinished, why);
    }
    if mesh.is_some() {
        // What the other launchers said served this node's watchdog; their ranks' verdicts
        // are in their own reports (this one has no call records of theirs to diagnose).
        let heard: Vec<String> = (0..world)
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
    if local.len() < world {
        st.notes.push(format!(
            "this node ran ranks {local:?} only; the others' verdicts are in their own nodes' reports"
        ));
    }
    Ok(report(s, st, &local, end_ms))
}

/// The job never came together: every rank fails before its first step with the
/// rendezvous's verdict (torchrun's agent raises RendezvousTimeoutError there).
fn rendezvous_failed(
    s: &Scenario,
    mut notes: Vec<String>,
    local: &[usize],
    reason: &str,
) -> Report {
    notes.push(format!("rendezvous failed: {reason}"));
    let mut st = State::new(s.world.size(), notes);
    for end in st.obs.ends.iter_mut() {
        *end = Some((
            RankEnd::Failed {
                step: 0,
                failure: scen_core::c10d::error::rendezvous_timeout(reason).into(),
            },
            0,
        ));
    }
    report(s, st, local, 0)
}

/// The environment variable that carries the job token to rank processes.
pub const JOB_TOKEN_ENV: &str = "SCEN_HW_JOB_TOKEN";

/// 128 random bits in hex, new for every launch.
fn job_token() -> String {
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        // Unique enough to tell launches apart: pid and time.
        b[..4].copy_from_slice(&std::process::id().to_le_bytes());
        b[4..12].copy_from_slice(&unix_ms().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The launcher's loop: absorbs what ranks say, notices exits, injects the kill fault, and
/// decides when the run is over. Returns the end time (ms since `epoch`).
#[allow(clippy::too_many_arguments)]
fn watch(
    s: &Scenario,
    o: &HwOptions,
    st: &mut State,
    procs: &mut [RankProc],
    rx: &mpsc::Receiver<Input>,
    local: &[usize],
    clock: &mut Watch,
    mesh: &mut Option<Mesh>,
) -> u64 {
    let mut kill_armed: Option<u64> = None;
    let mut killed_by_hook = false;
    loop {
        let mut next = rx.recv_timeout(POLL).ok();
        while let Some(input) = next {
            let now = clock.now_ms();
            match input {
                Input::Msg(m) => {
                    clock.progress(now);
                    watchdog::absorb(st, m)
                }
                Input::Closed(rank) => {
                    clock.progress(now);
                    if let Some(p) = procs.iter_mut().find(|p| p.rank == rank) {
                        p.closed = true;
                    }
                }
                // Heartbeats are not progress (they come every second, stall or not).
                Input::Remote(r) => {
                    if let Some(m) = mesh.as_mut() {
                        if remote(st, m, local, r, now) {
                            clock.progress(now);
                        }
                    }
                }
            }
            next = rx.try_recv().ok();
        }
        let t = clock.now_ms();
        for p in procs.iter_mut() {
            if p.exit.is_none() {
                if let Ok(Some(status)) = p.child.try_wait() {
                    p.exit = Some((status, t));
                }
            }
            if let Some((status, at)) = p.exit {
                if st.obs.ends[p.rank].is_none() && (p.closed || t >= at + EXIT_SETTLE_MS) {
                    let failure = match (o.kill_rank_at, exit::code_and_signal(&status).1) {
                        (Some((rank, step)), Some(libc::SIGKILL))
                            if killed_by_hook && rank == p.rank =>
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
                    st.process_died(p.rank, failure, t);
                    clock.progress(t);
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
                        // A child this launcher started and has not reaped.
                        let _ = scen_procs::group::kill_process(p.child.id());
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
        if let Some(m) = mesh.as_mut() {
            announce_ends(m, st, local);
            m.tick(unix_ms());
        }
        if let Some(sig) = clock.interrupted() {
            tracing::warn!(
                t_ms = t,
                "launcher: {} received: ending every rank",
                signals::name(sig)
            );
            interrupt(st, local, sig, t);
            return t;
        }
        if local.iter().all(|r| st.obs.ends[*r].is_some()) {
            tracing::info!(t_ms = t, "watchdog: every local rank reported its end");
            return t;
        }
        if clock.silent_ms(t) >= o.quiet_ms && watchdog::stalled(s, st, local, t) {
            crate::fr_dump::on_stall(s, &st.obs, o, &mut st.notes);
            return t;
        }
        if clock.out_of_time(t) {
            tracing::warn!(
                t_ms = t,
                "watchdog: --max-wall-s reached: stopping every rank"
            );
            st.notes.push(format!(
                "stopped: the run reached the launcher's limit of {} ms",
                t
            ));
            return t;
        }
    }
}

/// A signal ends the run: every unfinished rank ends failed where it was (its open call too),
/// saying so.
fn interrupt(st: &mut State, local: &[usize], sig: i32, t: u64) {
    let name = signals::name(sig);
    st.notes.push(format!(
        "interrupted: the launcher received {name} and ended every rank; the report shows what was seen until then (exit status {})",
        128 + sig
    ));
    for &r in local {
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
                    launcher: Launcher::Hw,
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

/// Lets ranks that reported their end exit, kills the rest, removes their /dev/shm files and
/// notes what was done.
fn finish(st: &mut State, procs: &mut [RankProc], pgid: Option<i32>, interrupted: Option<i32>) {
    // Ranks that reported their end are finalizing oneCCL and exiting: give them a moment
    // (not after a signal: the user asked for an end).
    let settle_until = unix_ms()
        + if interrupted.is_some() {
            0
        } else {
            EXIT_WAIT_MS
        };
    while unix_ms() < settle_until
        && procs.iter_mut().any(|p| {
            st.obs.ends[p.rank].is_some()
                && !st.forced.contains(&p.rank)
                && p.exit.is_none()
                && matches!(p.child.try_wait(), Ok(None))
        })
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Where the ranks that are about to be killed sleep: all a hang that does not repeat leaves.
    for p in procs.iter_mut() {
        if matches!(p.child.try_wait(), Ok(None)) {
            if let Some(threads) = scen_procs::threads::snapshot(p.child.id()) {
                st.notes
                    .push(format!("rank {} threads before SIGKILL: {threads}", p.rank));
            }
        }
    }
    let killed = procs::kill_all(pgid, procs);
    let pids: Vec<u32> = procs.iter().map(|p| p.child.id()).collect();
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
    for p in procs.iter() {
        procs::forward_rank_log(p.rank, &p.log);
        let failed = !matches!(st.obs.ends[p.rank], Some((RankEnd::Completed, _)));
        if failed {
            if let Some(tail) = scen_procs::log::tail(&p.log, 5) {
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
}

/// The launcher has cleaned up (or is about to fail): the guard may go.
fn finish_guard(guard: Option<reaper::Guard>) {
    if let Some(g) = guard {
        g.done();
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

/// The node's report: what the watchdog observed, through core's one report builder.
fn report(s: &Scenario, st: State, local: &[usize], end_ms: u64) -> Report {
    scen_core::report::build(
        s,
        st.obs,
        RunFacts {
            mode: Mode::Hw,
            seed: s.sim.seed,
            end_ms,
            local: Some(local),
            env_ranks: &s.world.ranks,
            notes: st.notes,
            gathered: true,
        },
    )
}
