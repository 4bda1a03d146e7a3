//! sglang's start-up in parity (a module of tests/torch.rs): torch mode runs it on real sglang
//! 0.5.23, and both modes must give every rank the same groups (the `done` text of each sglang
//! step lists the rank's group of every kind and how many `new_group` calls it made), and real
//! sglang's `new_group` calls, one trace line each (`new_group [0, 1] gloo`), must be the model's
//! plan call for call: the same ranks and backend argument, in the same order, on every rank.

use scen_core::report::Report;
use scen_core::scenario::{Platform, Scenario, SglangVersion, StepKind};
use scen_core::sglang::parallel_state::{self as ps, BackendChoice, ParallelConfig};
use scen_core::trace::EventKind;

fn is_sglang_step(k: &StepKind) -> bool {
    matches!(
        k,
        StepKind::InitDistributedEnvironment { .. } | StepKind::InitializeModelParallel { .. }
    )
}

fn done_text(r: &Report, rank: usize, step: usize) -> Option<&str> {
    r.trace
        .events
        .iter()
        .find(|e| e.kind == EventKind::Done && e.rank == Some(rank) && e.step == Some(step))
        .map(|e| e.text.as_str())
}

/// The model's `new_group` calls for the scenario's start-up, as real sglang's trace lines spell
/// them; `None` when the scenario is not one init_distributed_environment + one
/// initialize_model_parallel (nothing to compare call by call).
fn planned_calls(s: &Scenario) -> Option<Vec<String>> {
    let mut init = None;
    let mut imp = Vec::new();
    for st in &s.steps {
        match &st.kind {
            StepKind::InitDistributedEnvironment { version, .. } => init = Some(*version),
            StepKind::InitializeModelParallel {
                degrees, version, ..
            } => imp.push((*degrees, *version)),
            _ => {}
        }
    }
    let (Some(init), [(d, v)]) = (init, imp.as_slice()) else {
        return None;
    };
    let version: SglangVersion = v.unwrap_or(init);
    let config = ParallelConfig::from_degrees(s.world.size(), d);
    let plan = ps::plan_initialize_model_parallel(config, version).ok()?;
    let platform = match s.world.nodes[0].platform {
        Platform::Cpu => ps::Platform::Cpu,
        Platform::Xpu => ps::Platform::Xpu,
        Platform::Cuda => ps::Platform::Cuda,
    };
    let device = ps::torch_distributed_backend(platform, version).ok()?;
    Some(
        plan.calls
            .iter()
            .map(|c| {
                let backend = match c.backend {
                    BackendChoice::Device => device,
                    BackendChoice::Gloo => "gloo",
                    BackendChoice::Default => "default",
                };
                format!("{:?} {backend}", c.ranks)
            })
            .collect(),
    )
}

/// Differences in groups and `new_group` sequences, one text each (empty: they agree).
pub fn compare(s: &Scenario, sim: &Report, real: &Report) -> Vec<String> {
    let mut diffs = Vec::new();
    let steps: Vec<usize> = s
        .steps
        .iter()
        .filter(|st| is_sglang_step(&st.kind))
        .map(|st| st.index)
        .collect();
    if steps.is_empty() {
        return diffs;
    }
    let planned = planned_calls(s);
    for rank in 0..s.world.size() {
        for &step in &steps {
            if let (Some(a), Some(b)) = (done_text(sim, rank, step), done_text(real, rank, step)) {
                if a != b {
                    diffs.push(format!(
                        "rank {rank} step #{}: groups differ\n    sim:   {a}\n    torch: {b}",
                        step + 1
                    ));
                }
            }
        }
        let last = *steps.last().expect("non-empty");
        let (Some(want), Some(_)) = (&planned, done_text(real, rank, last)) else {
            continue;
        };
        let got: Vec<&str> = real
            .trace
            .events
            .iter()
            .filter(|e| e.rank == Some(rank) && e.kind == EventKind::Info)
            .filter_map(|e| e.text.strip_prefix("new_group "))
            .collect();
        if got.len() != want.len() {
            diffs.push(format!(
                "rank {rank}: real sglang made {} new_group calls, the model {}",
                got.len(),
                want.len()
            ));
        }
        if let Some(i) = got.iter().zip(want).position(|(g, w)| *g != w.as_str()) {
            diffs.push(format!(
                "rank {rank}: new_group call #{i}: real sglang `{}`, the model `{}`",
                got[i], want[i]
            ));
        }
    }
    diffs
}
