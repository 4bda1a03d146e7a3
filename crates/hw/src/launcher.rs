//! The launcher of `scen run --hw`: one real process per local rank (scen re-executed as
//! `scen __hw-rank FILE` with torchrun's environment), a side channel collecting each rank's
//! events and wait records, and the watchdog oneCCL lacks. Here: what a run needs from the
//! machine, where this launcher's ranks sit in the job, the job token and the launchers'
//! rendezvous; the run itself is scen-procs' one shape of a real-mode run, hw's part in
//! crate::run.
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
use crate::rdzv::{self, Mesh};
use crate::run::HwRun;
use crate::watchdog::State;
use crate::{HwError, HwOptions};
use scen_core::outcome::RankEnd;
use scen_core::report::Report;
use scen_core::report::{Mode, RunFacts};
use scen_core::scenario::{Launcher, Scenario, StepKind};
use std::io::Read;
use std::path::{Path, PathBuf};

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

/// The first file:// init_method of the program, if any (the rank refuses it too, should one
/// come from an expanded variable).
fn file_init_method(s: &Scenario) -> Option<&str> {
    s.steps.iter().find_map(|st| match &st.kind {
        StepKind::InitProcessGroup {
            init_method: Some(u),
            ..
        } if u.starts_with("file://") => Some(u.as_str()),
        _ => None,
    })
}

/// What a run needs from the machine, checked before any process starts.
pub fn check_eligible(s: &Scenario, o: &HwOptions, external: bool) -> Result<(), HwError> {
    if !s.world.services.is_empty() {
        return Err(HwError::NotEligible(
            "it declares [[world.service]] (another job's TCPStore), which only the simulator provides".into(),
        ));
    }
    if let Some(u) = file_init_method(s) {
        return Err(HwError::NotEligible(format!(
            "it rendezvouses through `{u}` (a FileStore), which the simulator and torch mode model and hardware mode does not: use env:// or tcp://"
        )));
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

/// Where this launcher's ranks sit in the job and how they find rank 0's store.
pub(crate) struct Place {
    pub world: usize,
    /// Processes per node (LOCAL_WORLD_SIZE).
    pub per_node: usize,
    pub node_rank: usize,
    pub nnodes: usize,
    /// (global rank, local rank) of each process this launcher starts.
    pub local_ranks: Vec<(usize, usize)>,
    /// Their global ranks.
    pub local: Vec<usize>,
    /// Several launchers, one per node, meet at a rendezvous ([`rdzv`]).
    pub multinode: bool,
    /// torchrun/srun/mpirun started this process as one rank (it runs that one).
    pub external: bool,
    pub master_addr: String,
    pub master_port: u16,
}

/// Runs the local ranks of `s` as processes and reports.
pub fn launch(s: &Scenario, file: &Path, o: &HwOptions) -> Result<Report, HwError> {
    let external = launch_env::detect(&launch_env::process_env())
        .map_err(|e| HwError::Usage(e.to_string()))?;
    check_eligible(s, o, external.is_some())?;
    let mut notes = Vec::new();
    let mut s = s.clone();
    s.world.launcher = job_launcher(&s, external.as_ref(), &mut notes);
    let s = &s;
    let place = place(s, o, external.as_ref(), &mut notes)?;
    let (token, mesh) = match job_token_and_mesh(file, o, external.as_ref(), &place, &mut notes)? {
        Joined::Yes { token, mesh } => (token, mesh),
        Joined::No { reason } => {
            tracing::warn!("rendezvous failed: {reason}");
            return Ok(rendezvous_failed(s, notes, &place.local, &reason));
        }
    };
    scen_procs::run::run(HwRun::new(s, file, o, place, token, mesh, notes))
}

/// Who hosts the store and stops the workers: under scen's own launcher the scenario's
/// `[world] launcher` (after `--launcher`), this launcher playing torchrun's agent; a process
/// torchrun/srun/mpirun started has what its launcher gives: torchrun's agent store exactly when
/// TORCHELASTIC_USE_AGENT_STORE=True (the ranks' own test), else rank 0's.
fn job_launcher(
    s: &Scenario,
    external: Option<&launch_env::RankIdentity>,
    notes: &mut Vec<String>,
) -> Launcher {
    let Some(id) = external else {
        return s.world.launcher;
    };
    let real = if crate::net::agent_store_env(&launch_env::process_env()) {
        Launcher::Torchrun
    } else {
        Launcher::Processes
    };
    if real != s.world.launcher {
        notes.push(format!(
            "the scenario's launcher is {} but {} started this process: {}",
            s.world.launcher.name(),
            id.launcher,
            match real {
                Launcher::Torchrun => "torchrun's agent hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE=True)",
                Launcher::Processes => "no torchrun agent hosts the TCPStore (TORCHELASTIC_USE_AGENT_STORE is not True); rank 0 does",
            }
        ));
    }
    real
}

/// Which ranks this launcher starts and where rank 0's store is: the scenario's node
/// `--node-rank`, or the one rank torchrun/srun/mpirun started this process as (`external`).
fn place(
    s: &Scenario,
    o: &HwOptions,
    external: Option<&launch_env::RankIdentity>,
    notes: &mut Vec<String>,
) -> Result<Place, HwError> {
    let world = s.world.size();
    let mut per_node = s.world.ranks_per_node;
    let mut node_rank = o.node_rank.unwrap_or(0);
    let mut local_ranks: Vec<(usize, usize)> = (0..per_node)
        .map(|lr| (node_rank * per_node + lr, lr))
        .collect();
    if let Some(id) = external {
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
    let nnodes = o.nnodes.unwrap_or(1);
    let multinode = external.is_none() && nnodes > 1;
    if multinode && o.master_port.is_none() {
        return Err(HwError::Usage(format!(
            "--nnodes {nnodes} needs --master-port P (the same on every node; node 0's launcher also serves the launchers' rendezvous on P+1) and --master-addr of node 0"
        )));
    }
    let master_port = match (o.master_port, external) {
        (Some(p), _) => p,
        (None, Some(id)) => id.master_port,
        // Below the ephemeral range: no other process's bind(0) or outgoing connection is
        // handed it before rank 0's store binds it (CI saw EADDRINUSE with the OS's pick).
        (None, None) => match (s.world.launcher, crate::agent::store_port_named_by_url(s)) {
            (Launcher::Torchrun, Some(p)) => {
                notes.push(format!(
                    "MASTER_PORT {p}: the scenario's init_method names torchrun's store there"
                ));
                p
            }
            _ => scen_procs::port::below_ephemeral()
                .and_then(|l| Ok(l.local_addr()?.port()))
                .map_err(|e| HwError::Io(format!("picking MASTER_PORT: {e}")))?,
        },
    };
    let master_addr = o
        .master_addr
        .clone()
        .or_else(|| external.map(|id| id.master_addr.clone()))
        .unwrap_or_else(|| "127.0.0.1".into());
    Ok(Place {
        world,
        per_node,
        node_rank,
        nnodes,
        local: local_ranks.iter().map(|(r, _)| *r).collect(),
        local_ranks,
        multinode,
        external: external.is_some(),
        master_addr,
        master_port,
    })
}

/// Whether the job came together: its token and, for a multi-node job, the launchers' mesh.
enum Joined {
    Yes {
        token: Option<String>,
        mesh: Option<Mesh>,
    },
    No {
        reason: String,
    },
}

/// Every process of one job shares a token the TCPStore checks (docs/hw.md "The TCPStore
/// handshake"): the user's SCEN_HW_JOB_TOKEN if set; else one launcher draws it, node 0's
/// for a multi-node job (the others fetch it at the launchers' rendezvous); under
/// srun/mpirun it is derived from the job's id (rank 0 hosts the store, no launcher meets).
fn job_token_and_mesh(
    file: &Path,
    o: &HwOptions,
    external: Option<&launch_env::RankIdentity>,
    place: &Place,
    notes: &mut Vec<String>,
) -> Result<Joined, HwError> {
    let user_token = std::env::var(JOB_TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let token = match external {
        Some(id) => match user_token {
            Some(t) => Some(t),
            None => external_job_token(id, notes),
        },
        None if place.multinode => return meet_launchers(file, o, place, user_token, notes),
        None => Some(user_token.unwrap_or_else(job_token)),
    };
    Ok(Joined::Yes { token, mesh: None })
}

/// The token of a job torchrun/srun/mpirun started, from its job id (None: it gives none).
fn external_job_token(id: &launch_env::RankIdentity, notes: &mut Vec<String>) -> Option<String> {
    match launch_env::job_env_token(&launch_env::process_env(), id) {
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
    }
}

/// A multi-node job: the launchers' rendezvous (node 0 hosts it, the others join).
fn meet_launchers(
    file: &Path,
    o: &HwOptions,
    place: &Place,
    user_token: Option<String>,
    notes: &mut Vec<String>,
) -> Result<Joined, HwError> {
    let (nnodes, node_rank) = (place.nnodes, place.node_rank);
    let bytes = std::fs::read(file).map_err(|e| HwError::Io(format!("{}: {e}", file.display())))?;
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
        place.per_node,
        &place.master_addr,
        place.master_port,
        o.rdzv_timeout_ms,
    );
    let outcome = if node_rank == 0 {
        rdzv::host(&id, user_token.is_none().then(job_token))
    } else {
        rdzv::join(&id, user_token.clone())
    }
    .map_err(HwError::Rdzv)?;
    let job_note = format!(
        "job {}: node {node_rank} of {nnodes} (ranks {:?}); launchers' rendezvous at {}:{}",
        id.label,
        place.local,
        place.master_addr,
        place.master_port as u32 + 1,
    );
    let token_from = if user_token.is_some() {
        "from SCEN_HW_JOB_TOKEN"
    } else if node_rank == 0 {
        "drawn by this launcher"
    } else {
        "fetched from node 0's launcher"
    };
    Ok(match outcome {
        rdzv::Outcome::Started { token, mesh } => {
            notes.push(format!("{job_note}; job token {token_from}"));
            Joined::Yes {
                token: token.or(user_token),
                mesh: Some(mesh),
            }
        }
        rdzv::Outcome::Failed { reason } => {
            notes.push(job_note);
            Joined::No { reason }
        }
    })
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
pub(crate) fn job_token() -> String {
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        // Unique enough to tell launches apart: pid and time.
        b[..4].copy_from_slice(&std::process::id().to_le_bytes());
        b[4..12].copy_from_slice(&unix_ms().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The node's report: what the watchdog observed, through core's one report builder.
pub(crate) fn report(s: &Scenario, st: State, local: &[usize], end_ms: u64) -> Report {
    scen_core::report::build(
        s,
        st.obs,
        RunFacts {
            mode: Mode::Hw,
            seed: s.sim.seed,
            end_ms,
            end_us: end_ms.saturating_mul(1000),
            local: Some(local),
            env_ranks: &s.world.ranks,
            notes: st.notes,
            gathered: true,
        },
    )
}
