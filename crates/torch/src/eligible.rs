//! What CPU PyTorch can run: gloo groups on CPU tensors, the store and rendezvous, the faults a
//! real process can suffer (crash at a step or time, late start, per-rank env), and sglang
//! 0.5.23's start-up steps (run on real sglang).
//! Anything else makes the scenario ineligible, with the reason (docs/torch.md, "Eligibility").

use scen_core::c10d::collective::CollOp;
use scen_core::scenario::env::expand_env;
use scen_core::scenario::{FaultKind, Platform, Scenario, SglangVersion, Step, StepKind};

/// The device a tensor without `device` lives on: the node's accelerator (cpu on cpu nodes).
pub fn accel_device(s: &Scenario, _step: &Step) -> &'static str {
    if s.world.nodes.iter().all(|n| n.platform == Platform::Cpu) {
        "cpu"
    } else {
        s.world.nodes[0].platform.name()
    }
}

/// Why torch mode cannot run a scenario (or cannot write it as a torch program at all).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ineligible {
    /// Its payloads are the simulator's own (core says why).
    #[error("{0}")]
    Payloads(String),
    #[error(
        "it declares [[world.service]] (another job's TCPStore), which only the simulator provides"
    )]
    Service,
    #[error("{label} is a `{kind}` fault: torch mode reproduces crash, late_start and env faults only (the others need the simulator's network and clock)")]
    Fault { label: String, kind: &'static str },
    /// One step, named with its file:line.
    #[error("step {label} ({file}:{line}): {why}")]
    Step {
        label: String,
        file: String,
        line: usize,
        why: StepIneligible,
    },
}

/// Why one step cannot run on CPU PyTorch (or be translated).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepIneligible {
    #[error("{0} is not public torch.distributed API (only inside _coalescing_manager)")]
    NotPublicApi(&'static str),
    #[error("backend `{value}` names {name}, which CPU PyTorch cannot run (gloo only; run the exported program on a GPU node for nccl/xccl)")]
    Backend { value: String, name: String },
    #[error("no backend on an accelerator platform: PyTorch would pick the device backend")]
    NoBackendOnAccelerator,
    #[error("device_id `{0}` needs an accelerator")]
    DeviceId(String),
    #[error("new_group device_id needs an accelerator")]
    NewGroupDeviceId,
    #[error("its tensor lives on `{0}`; torch mode runs CPU tensors only")]
    TensorDevice(String),
    #[error("set_device needs an accelerator")]
    SetDevice,
    #[error("real sglang picks the device backend on an accelerator platform; torch mode runs platform = \"cpu\" (gloo) only")]
    SglangOnAccelerator,
    #[error(
        "usp_fallback (parallel_groups failing to import) cannot be made to happen in real sglang"
    )]
    UspFallback,
    #[error("`{0}` is sglang traffic the model re-enacts; torch mode runs sglang's start-up (init_distributed_environment, initialize_model_parallel) only")]
    SglangTraffic(&'static str),
    #[error("sglang's start-up needs its init_distributed_environment step first (real sglang asserts its world group is initialized)")]
    SglangNoInit,
    #[error("sglang version `{0}` is a model of older code; torch mode runs real sglang {SGLANG_VERSION} (version = \"{SGLANG_VERSION}\")")]
    SglangVersion(&'static str),
    #[error("no sglang version: say version = \"{SGLANG_VERSION}\" to run real sglang")]
    SglangNoVersion,
}

/// Why torch mode cannot run `s` on CPU PyTorch, if it cannot.
pub fn check(s: &Scenario) -> Result<(), Ineligible> {
    if let Some(why) = s.sim.payloads.real_mode_refusal() {
        return Err(Ineligible::Payloads(why));
    }
    check_with(s, true)
}

/// Why `s` cannot be written as a torch program at all, if it cannot (`scen export`: any
/// backend and device, for the user's own GPU node).
pub fn check_translatable(s: &Scenario) -> Result<(), Ineligible> {
    check_with(s, false)
}

fn check_with(s: &Scenario, cpu: bool) -> Result<(), Ineligible> {
    if !s.world.services.is_empty() {
        return Err(Ineligible::Service);
    }
    for f in &s.faults {
        match &f.kind {
            FaultKind::Crash { .. } | FaultKind::LateStart { .. } | FaultKind::Env { .. } => {}
            other => {
                return Err(Ineligible::Fault {
                    label: f.label(&s.file),
                    kind: other.name(),
                })
            }
        }
    }
    for st in &s.steps {
        let r = if cpu {
            step(s, st)
        } else {
            translatable(s, st)
        };
        r.map_err(|why| Ineligible::Step {
            label: st.label(),
            file: s.file.clone(),
            line: st.loc.line,
            why,
        })?;
    }
    Ok(())
}

/// What the translation itself cannot express.
fn translatable(s: &Scenario, st: &Step) -> Result<(), StepIneligible> {
    match &st.kind {
        StepKind::Collective(c)
            if matches!(
                c.op,
                CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced
            ) =>
        {
            Err(StepIneligible::NotPublicApi(c.op.name()))
        }
        StepKind::InitDistributedEnvironment { .. }
        | StepKind::InitializeModelParallel { .. }
        | StepKind::SpAllToAll { .. }
        | StepKind::BroadcastPyobj { .. }
        | StepKind::DenoiseStep { .. } => sglang_step(s, st),
        _ => Ok(()),
    }
}

fn backend_ok(s: &Scenario, b: &str) -> Result<(), StepIneligible> {
    for r in &s.world.ranks {
        let v = expand_env(b, &r.env);
        for part in v.split(',') {
            let name = part.rsplit(':').next().unwrap_or("").trim();
            if name != "gloo" {
                return Err(StepIneligible::Backend {
                    value: v.clone(),
                    name: name.to_string(),
                });
            }
        }
    }
    Ok(())
}

fn cpu_device(s: &Scenario, st: &Step, d: &Option<String>) -> Result<(), StepIneligible> {
    let dev = d.as_deref().unwrap_or(accel_device(s, st));
    if dev.starts_with("cpu") {
        Ok(())
    } else {
        Err(StepIneligible::TensorDevice(dev.to_string()))
    }
}

fn step(s: &Scenario, st: &Step) -> Result<(), StepIneligible> {
    match &st.kind {
        StepKind::InitProcessGroup {
            backend, device_id, ..
        } => {
            // Any init_method runs: a file:// store moves under the run's directory (the
            // prelude's file_url).
            match backend {
                Some(b) => backend_ok(s, b)?,
                None if accel_device(s, st) != "cpu" => {
                    return Err(StepIneligible::NoBackendOnAccelerator)
                }
                None => {}
            }
            if let Some(d) = device_id {
                if !d.starts_with("cpu") {
                    return Err(StepIneligible::DeviceId(d.clone()));
                }
            }
            Ok(())
        }
        StepKind::NewGroup {
            backend, device_id, ..
        } => {
            if let Some(b) = backend {
                backend_ok(s, b)?;
            }
            if device_id.is_some() {
                return Err(StepIneligible::NewGroupDeviceId);
            }
            Ok(())
        }
        StepKind::Collective(c) => {
            if matches!(
                c.op,
                CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced
            ) {
                return Err(StepIneligible::NotPublicApi(c.op.name()));
            }
            cpu_device(s, st, &c.tensor.device)
        }
        StepKind::Send { tensor, .. }
        | StepKind::Recv { tensor, .. }
        | StepKind::BatchP2p { tensor, .. } => cpu_device(s, st, &tensor.device),
        StepKind::SetDevice { .. } => Err(StepIneligible::SetDevice),
        StepKind::InitDistributedEnvironment { .. }
        | StepKind::InitializeModelParallel { .. }
        | StepKind::SpAllToAll { .. }
        | StepKind::BroadcastPyobj { .. }
        | StepKind::DenoiseStep { .. } => {
            sglang_step(s, st)?;
            if accel_device(s, st) != "cpu" {
                return Err(StepIneligible::SglangOnAccelerator);
            }
            Ok(())
        }
        StepKind::DestroyProcessGroup { .. }
        | StepKind::SplitGroup { .. }
        | StepKind::ShrinkGroup { .. }
        | StepKind::SetTimeout { .. }
        | StepKind::Store(_)
        | StepKind::Barrier { .. }
        | StepKind::MonitoredBarrier { .. }
        | StepKind::Wait { .. }
        | StepKind::Log { .. }
        | StepKind::Sleep { .. }
        | StepKind::Raise { .. }
        | StepKind::Exit(_) => Ok(()),
    }
}

/// The sglang version torch mode runs for real (scripts/install-torch-cpu.sh --sglang).
pub const SGLANG_VERSION: &str = "0.5.23";

/// Whether the program calls real sglang (then the interpreter must have it).
pub fn uses_sglang(s: &Scenario) -> bool {
    s.steps.iter().any(|st| {
        matches!(
            st.kind,
            StepKind::InitDistributedEnvironment { .. } | StepKind::InitializeModelParallel { .. }
        )
    })
}

/// sglang's start-up runs on real sglang 0.5.23: only a scenario whose sglang version is
/// 0.5.23 (V0..V2 are models of older code no release installs), and only the start-up steps
/// (its traffic steps are the model's own re-enactment, with no public entry point to call).
fn sglang_step(s: &Scenario, st: &Step) -> Result<(), StepIneligible> {
    let pinned = SglangVersion::V0_5_23;
    let init_version = s.steps.iter().find_map(|x| match &x.kind {
        StepKind::InitDistributedEnvironment { version, .. } => Some(*version),
        _ => None,
    });
    let version = match &st.kind {
        StepKind::InitDistributedEnvironment { version, .. } => Some(*version),
        StepKind::InitializeModelParallel {
            version,
            usp_fallback,
            ..
        } => {
            if *usp_fallback {
                return Err(StepIneligible::UspFallback);
            }
            version.or(init_version)
        }
        _ => return Err(StepIneligible::SglangTraffic(st.kind.op_name())),
    };
    if init_version.is_none() {
        return Err(StepIneligible::SglangNoInit);
    }
    match version {
        Some(v) if v == pinned => Ok(()),
        Some(v) => Err(StepIneligible::SglangVersion(v.name())),
        None => Err(StepIneligible::SglangNoVersion),
    }
}
