//! What CPU PyTorch can run: gloo groups on CPU tensors, the store and rendezvous, and the
//! faults a real process can suffer (crash at a step or time, late start, per-rank env).
//! Anything else makes the scenario ineligible, with the reason (docs/torch.md, "Eligibility").

use scen_core::c10d::collective::CollOp;
use scen_core::scenario::env::expand_env;
use scen_core::scenario::{FaultKind, Platform, Scenario, Step, StepKind};

/// The device a tensor without `device` lives on: the node's accelerator (cpu on cpu nodes).
pub fn accel_device(s: &Scenario, _step: &Step) -> &'static str {
    if s.world.nodes.iter().all(|n| n.platform == Platform::Cpu) {
        "cpu"
    } else {
        s.world.nodes[0].platform.name()
    }
}

/// `Err(reason)` when torch mode cannot run `s` on CPU PyTorch.
pub fn check(s: &Scenario) -> Result<(), String> {
    check_with(s, true)
}

/// `Err(reason)` when `s` cannot be written as a torch program at all (`scen export`: any
/// backend and device, for the user's own GPU node).
pub fn check_translatable(s: &Scenario) -> Result<(), String> {
    check_with(s, false)
}

fn check_with(s: &Scenario, cpu: bool) -> Result<(), String> {
    if !s.world.services.is_empty() {
        return Err("it declares [[world.service]] (another job's TCPStore), which only the simulator provides".into());
    }
    for f in &s.faults {
        match &f.kind {
            FaultKind::Crash { .. } | FaultKind::LateStart { .. } | FaultKind::Env { .. } => {}
            other => {
                return Err(format!(
                    "{} is a `{}` fault: torch mode reproduces crash, late_start and env faults only (the others need the simulator's network and clock)",
                    f.label(&s.file),
                    other.name()
                ))
            }
        }
    }
    for st in &s.steps {
        let r = if cpu { step(s, st) } else { translatable(st) };
        r.map_err(|why| format!("step {} ({}:{}): {why}", st.label(), s.file, st.loc.line))?;
    }
    Ok(())
}

/// What the translation itself cannot express.
fn translatable(st: &Step) -> Result<(), String> {
    match &st.kind {
        StepKind::Collective(c)
            if matches!(
                c.op,
                CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced
            ) =>
        {
            Err(format!(
                "{} is not public torch.distributed API (only inside _coalescing_manager)",
                c.op.name()
            ))
        }
        StepKind::InitDistributedEnvironment { .. }
        | StepKind::InitializeModelParallel { .. }
        | StepKind::SpAllToAll { .. }
        | StepKind::BroadcastPyobj { .. }
        | StepKind::DenoiseStep { .. } => Err(format!(
            "`{}` is an sglang step: torch mode does not run sglang yet",
            st.kind.op_name()
        )),
        _ => Ok(()),
    }
}

fn backend_ok(s: &Scenario, b: &str) -> Result<(), String> {
    for r in &s.world.ranks {
        let v = expand_env(b, &r.env);
        for part in v.split(',') {
            let name = part.rsplit(':').next().unwrap_or("").trim();
            if name != "gloo" {
                return Err(format!(
                    "backend `{v}` names {name}, which CPU PyTorch cannot run (gloo only; run the exported program on a GPU node for nccl/xccl)"
                ));
            }
        }
    }
    Ok(())
}

fn cpu_device(s: &Scenario, st: &Step, d: &Option<String>) -> Result<(), String> {
    let dev = d.as_deref().unwrap_or(accel_device(s, st));
    if dev.starts_with("cpu") {
        Ok(())
    } else {
        Err(format!(
            "its tensor lives on `{dev}`; torch mode runs CPU tensors only"
        ))
    }
}

fn step(s: &Scenario, st: &Step) -> Result<(), String> {
    match &st.kind {
        StepKind::InitProcessGroup {
            backend,
            device_id,
            init_method,
            ..
        } => {
            match backend {
                Some(b) => backend_ok(s, b)?,
                None if accel_device(s, st) != "cpu" => return Err(
                    "no backend on an accelerator platform: PyTorch would pick the device backend"
                        .into(),
                ),
                None => {}
            }
            if let Some(d) = device_id {
                if !d.starts_with("cpu") {
                    return Err(format!("device_id `{d}` needs an accelerator"));
                }
            }
            if init_method
                .as_deref()
                .is_some_and(|u| u.starts_with("file://"))
            {
                return Err("file:// rendezvous is not modelled".into());
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
                return Err("new_group device_id needs an accelerator".into());
            }
            Ok(())
        }
        StepKind::Collective(c) => {
            if matches!(
                c.op,
                CollOp::AllGatherIntoTensorCoalesced | CollOp::ReduceScatterTensorCoalesced
            ) {
                return Err(format!(
                    "{} is not public torch.distributed API (only inside _coalescing_manager)",
                    c.op.name()
                ));
            }
            cpu_device(s, st, &c.tensor.device)
        }
        StepKind::Send { tensor, .. }
        | StepKind::Recv { tensor, .. }
        | StepKind::BatchP2p { tensor, .. } => cpu_device(s, st, &tensor.device),
        StepKind::SetDevice { .. } => Err("set_device needs an accelerator".into()),
        StepKind::InitDistributedEnvironment { .. }
        | StepKind::InitializeModelParallel { .. }
        | StepKind::SpAllToAll { .. }
        | StepKind::BroadcastPyobj { .. }
        | StepKind::DenoiseStep { .. } => Err(format!(
            "`{}` is an sglang step: torch mode does not run sglang yet",
            st.kind.op_name()
        )),
        StepKind::DestroyProcessGroup { .. }
        | StepKind::Barrier { .. }
        | StepKind::Wait { .. }
        | StepKind::Log { .. }
        | StepKind::Sleep { .. } => Ok(()),
    }
}
