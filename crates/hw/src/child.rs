//! One rank process: core's `run_rank`, unchanged, over OS sockets, the wall clock, oneCCL
//! device groups and the side-channel probe. Started by the launcher (`scen __hw-rank FILE`)
//! with torchrun's environment plus scen's own (SCEN_HW_PROBE, SCEN_HW_EPOCH_MS).

use crate::launch_env::RankIdentity;
use crate::net::{TokioNet, WallClock};
use crate::oneccl::{Backing, OneCcl};
use crate::probe::{Msg, SideProbe};
use scen_core::runtime::device::DeviceComms;
use scen_core::runtime::rank::{run_rank, RankEnd, RankEnv};
use scen_core::scenario::{Scenario, StepKind};
use std::rc::Rc;

/// Does the scenario use a device backend (xccl/nccl) anywhere? `init_process_group` without a
/// backend and backend strings read from the environment count, to be safe.
pub fn uses_device_backend(s: &Scenario) -> bool {
    let device = |b: &str| b.contains("ccl") || b.contains('$');
    s.steps.iter().any(|st| match &st.kind {
        StepKind::InitProcessGroup { backend, .. } => backend.as_deref().is_none_or(device),
        StepKind::NewGroup { backend, .. } => backend.as_deref().is_some_and(device),
        // sglang's start-up creates device groups on the platform's backend.
        StepKind::InitDistributedEnvironment { .. } => true,
        _ => false,
    })
}

/// What backs xpu tensors: Level Zero devices if the loader lists any, else host buffers.
/// The loader applies ZE_AFFINITY_MASK itself; of the devices it lists, this rank's is
/// `local_rank` (the `xpu:{LOCAL_RANK}` convention), or the only one when the mask leaves one.
pub fn backing(local_rank: usize) -> Backing {
    match level_zero_sys::probe() {
        Ok(p) if !p.devices.is_empty() => {
            let mine = &p.devices[if p.devices.len() == 1 {
                0
            } else {
                local_rank % p.devices.len()
            }];
            Backing::HostWithDevices {
                devices: p
                    .devices
                    .iter()
                    .map(|d| format!("{}: {}", d.index, d.name))
                    .collect(),
                selected: format!("{}: {} (uuid {})", mine.index, mine.name, mine.uuid_hex()),
            }
        }
        Ok(p) => Backing::HostForXpu {
            reason: p
                .note
                .unwrap_or_else(|| "Level Zero lists no device".into()),
        },
        Err(e) => Backing::HostForXpu {
            reason: e.to_string(),
        },
    }
}

/// Runs rank `id.rank` of `scenario`; returns the process exit code.
pub fn run_child(mut scenario: Scenario, id: &RankIdentity, probe_addr: &str, epoch: u64) -> i32 {
    let probe = match SideProbe::connect(probe_addr) {
        Ok(p) => p,
        Err(e) => {
            eprintln!(
                "scen rank {}: cannot reach the launcher at {probe_addr}: {e}",
                id.rank
            );
            return 2;
        }
    };
    probe.send(&Msg::Hello {
        rank: id.rank,
        pid: std::process::id(),
    });
    // The launcher is torchrun here: its MASTER_ADDR/MASTER_PORT replace the scenario's defaults.
    if let Some(spec) = scenario.world.ranks.get_mut(id.rank) {
        spec.env
            .insert("MASTER_ADDR".into(), id.master_addr.clone());
        spec.env
            .insert("MASTER_PORT".into(), id.master_port.to_string());
    }
    let clock = WallClock {
        epoch_unix_ms: epoch,
    };
    let d = if uses_device_backend(&scenario) {
        OneCcl::start(backing(id.local_rank))
    } else {
        OneCcl::unavailable(
            "oneCCL was not loaded: the scenario names no device backend".into(),
            backing(id.local_rank),
        )
    };
    if d.unavailable.is_none() {
        probe.send(&Msg::Note {
            rank: id.rank,
            text: d.describe(),
        });
    }
    let device: Option<Rc<dyn DeviceComms>> = Some(Rc::new(d));
    let penv = crate::launch_env::process_env();
    let agent_store = crate::net::agent_store_env(&penv);
    // Who hosts the store is the launcher's to say (scen's launcher, playing torchrun's agent
    // or not, or a real torchrun), not the file's: torchrun's agent exactly when it says so.
    scenario.world.launcher = if agent_store {
        scen_core::scenario::Launcher::Torchrun
    } else {
        scen_core::scenario::Launcher::Processes
    };
    if agent_store {
        // torchrun's agent hosts a PyTorch TCPStore at MASTER_PORT: every rank is its client
        // (in PyTorch's protocol) and nobody waits for workers, as the model's torchrun does.
        probe.send(&Msg::Note {
            rank: id.rank,
            text: format!(
                "TORCHELASTIC_USE_AGENT_STORE=True: the TCPStore is torchrun's agent's at {}:{} (PyTorch's protocol; this rank is a client only)",
                id.master_addr, id.master_port
            ),
        });
    }
    let net = TokioNet {
        host: id.host.clone(),
        bind_ip: id.bind_ip.clone(),
        job_token: std::env::var(crate::launcher::JOB_TOKEN_ENV)
            .ok()
            .filter(|t| !t.is_empty()),
        allow_torch_clients: penv
            .get(crate::net::ALLOW_TORCH_CLIENTS_ENV)
            .map(String::as_str)
            == Some("1"),
        agent_store_is_pytorch: agent_store,
    };
    let env = RankEnv {
        net,
        clock,
        probe: probe.clone(),
        scenario: Rc::new(scenario),
        proc_rank: id.rank,
        device,
        // A real process: the kernel resets its peers' connections when it is killed.
        life: Default::default(),
        files: None,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("scen rank {}: cannot start tokio: {e}", id.rank);
            return 2;
        }
    };
    let local = tokio::task::LocalSet::new();
    // The probe told the launcher of the rank's end when its program ended (`Probe::ended`).
    exit_status(&local.block_on(&rt, run_rank(env)))
}

/// The rank process's exit status: its program's own `sys.exit(code)` (an exit step), else 1
/// for a failure and 0 for a completed program.
fn exit_status(end: &RankEnd) -> i32 {
    match end {
        RankEnd::Failed {
            failure: scen_core::outcome::Failure::Exited { code: Some(c) },
            ..
        } => *c,
        RankEnd::Failed { .. } => 1,
        RankEnd::Completed => 0,
    }
}
