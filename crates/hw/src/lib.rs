//! scen's hardware mode: the same rank model over real processes, OS sockets and oneCCL.
//!
//! `scen run --hw FILE` launches one process per local rank ([`launcher`]), each running core's
//! `run_rank` unchanged ([`child`]) with tokio TCP and the wall clock ([`net`]), xccl groups on
//! real oneCCL ([`oneccl`]) and a side channel to the launcher ([`probe`]). The launcher is the
//! watchdog oneCCL lacks ([`watchdog`]) and builds the simulator's kind of Report; its run has
//! scen-procs' one shape of a real-mode run, shared with torch mode (hw's part: run.rs). Signals end a
//! run with a report and ranks die with the launcher (scen-procs' process plumbing, shared with
//! torch mode; [`procs`] is hw's part); a guard process cleans up after a launcher that was
//! SIGKILLed ([`reaper`]). Under `launcher = "torchrun"` the launcher plays torchrun's agent
//! (agent.rs: its store, its workers' environment, its stop after a failure). `scen doctor`
//! ([`doctor`]) says what this machine has. See docs/hw.md.

mod agent;
pub mod bench;
pub mod child;
pub mod doctor;
pub mod fr_dump;
pub mod launch_env;
pub mod launcher;
pub mod net;
mod nodes;
pub mod oneccl;
pub mod probe;
pub mod procs;
pub mod rdzv;
pub mod reaper;
mod run;
pub mod watchdog;

use scen_core::report::Report;
use scen_core::scenario::Scenario;
use std::path::{Path, PathBuf};

/// Options of `scen run --hw`.
#[derive(Debug, Clone)]
pub struct HwOptions {
    pub nproc_per_node: Option<usize>,
    pub nnodes: Option<usize>,
    pub node_rank: Option<usize>,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    /// Fail unless Level Zero finds an Intel GPU (no host-buffer stand-in).
    pub require_xpu: bool,
    /// The binary to start ranks with (`<exe> __hw-rank FILE`); default: this executable.
    pub rank_exe: Option<PathBuf>,
    /// Fault injection (tests, demos): SIGKILL rank R once it has started step S (0-based),
    /// `kill_delay_ms` later.
    pub kill_rank_at: Option<(usize, usize)>,
    pub kill_delay_ms: u64,
    /// How long nothing must be heard before the watchdog may declare a stall.
    pub quiet_ms: u64,
    /// A hard limit on the run's wall time.
    pub max_wall_ms: Option<u64>,
    /// Extra environment for the rank processes (wins over the oneCCL defaults).
    pub rank_env: Vec<(String, String)>,
    /// Where the watchdog writes flight-recorder dumps when it declares a hang ([`fr_dump`]).
    pub fr_dump_dir: Option<PathBuf>,
    /// The job's name at the launchers' rendezvous (`--job-id`, else SCEN_HW_JOB_ID): launchers
    /// of one multi-node job must agree on it ([`rdzv`]).
    pub job_id: Option<String>,
    /// How long the launchers' rendezvous waits for every node (`--rdzv-timeout-s`).
    pub rdzv_timeout_ms: u64,
}

impl Default for HwOptions {
    fn default() -> Self {
        HwOptions {
            nproc_per_node: None,
            nnodes: None,
            node_rank: None,
            master_addr: None,
            master_port: None,
            require_xpu: false,
            rank_exe: None,
            kill_rank_at: None,
            kill_delay_ms: 300,
            quiet_ms: 1_000,
            max_wall_ms: None,
            rank_env: Vec::new(),
            fr_dump_dir: None,
            job_id: None,
            rdzv_timeout_ms: 600_000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HwError {
    /// Hardware mode cannot run here; the text says what is missing and how to get it.
    #[error("hardware mode unavailable: {0}")]
    Unavailable(String),
    /// The scenario uses something only the simulator has.
    #[error("this scenario cannot run in hardware mode: {0}")]
    NotEligible(String),
    /// `--require-xpu` and no Intel GPU.
    #[error("--require-xpu: no Intel GPU found through Level Zero ({0}); without --require-xpu, xpu tensors run as host buffers on oneCCL's CPU plugin")]
    NoXpu(String),
    #[error("{0}")]
    Usage(String),
    /// The launchers' rendezvous could not be held or joined.
    #[error(transparent)]
    Rdzv(#[from] rdzv::RdzvError),
    #[error("hardware mode failed: {0}")]
    Io(String),
}

/// Runs a scenario on real hardware. `file` is the scenario's path (rank processes load it).
pub fn run(scenario: &Scenario, file: &Path, opts: &HwOptions) -> Result<Report, HwError> {
    launcher::launch(scenario, file, opts)
}

/// `scen __hw-rank FILE`: the rank process the launcher starts. Returns the exit code.
pub fn rank_main(scenario: Scenario) -> i32 {
    let env = launch_env::process_env();
    let id = match launch_env::detect(&env) {
        Ok(Some(id)) => id,
        Ok(None) => {
            eprintln!("scen __hw-rank: no RANK/WORLD_SIZE in the environment (this subcommand is started by `scen run --hw`)");
            return 2;
        }
        Err(e) => {
            eprintln!("scen __hw-rank: {e}");
            return 2;
        }
    };
    if id.world_size != scenario.world.size() {
        eprintln!(
            "scen __hw-rank: WORLD_SIZE={} but the scenario's world has {} ranks",
            id.world_size,
            scenario.world.size()
        );
        return 2;
    }
    let (Some(probe), Some(epoch)) = (env.get("SCEN_HW_PROBE"), env.get("SCEN_HW_EPOCH_MS")) else {
        eprintln!("scen __hw-rank: SCEN_HW_PROBE/SCEN_HW_EPOCH_MS not set (started outside `scen run --hw`)");
        return 2;
    };
    let epoch = epoch.parse().unwrap_or_else(|_| net::unix_ms());
    child::run_child(scenario, &id, probe, epoch)
}
