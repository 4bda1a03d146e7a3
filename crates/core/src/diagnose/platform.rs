//! A CPU program run on an accelerator platform: a first-hour trap. A scenario without
//! `[world] platform` runs on `xpu`, so a tensor step that names no `device` puts its tensor on
//! xpu, and a gloo group then fails with PyTorch's own `No backend type associated with device
//! type xpu` (R4) on every rank. The text is right but says nothing of the scenario; this check
//! names the step and the fix (`[world] platform = "cpu"`, or `device = "cpu"` on the step).

use super::hang::ranges;
use crate::c10d::error::recognise;
use crate::outcome::Failure;
use crate::scenario::{Platform, Scenario, StepKind, TensorSpec};
use serde::Serialize;

/// Ranks whose tensor step failed for want of an xpu backend, its tensor on xpu only because
/// the node's platform is xpu and the step names no device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceHint {
    pub ranks: Vec<usize>,
    /// 1-based, as reports print steps.
    pub step: usize,
    pub step_label: String,
    pub line: usize,
}

impl DeviceHint {
    /// The diagnosis line.
    pub fn render(&self, file: &str) -> String {
        let who = if self.ranks.len() == 1 {
            format!("rank {}", self.ranks[0])
        } else {
            format!("ranks {}", ranges(&self.ranks))
        };
        format!(
            "{who}: {} ({file}:{}) made its tensor on xpu: the step names no `device` and the \
             node's platform is xpu (the default when `[world] platform` is unset), and its group \
             has no xpu backend (R4). For a CPU/gloo job set `[world] platform = \"cpu\"` (or \
             `device = \"cpu\"` on the step)",
            self.step_label, self.line
        )
    }
}

/// The tensor a step creates, if it creates one a device applies to.
fn tensor_of(kind: &StepKind) -> Option<&TensorSpec> {
    match kind {
        StepKind::Collective(c) => Some(&c.tensor),
        StepKind::BatchP2p { tensor, .. }
        | StepKind::Send { tensor, .. }
        | StepKind::Recv { tensor, .. } => Some(tensor),
        _ => None,
    }
}

/// The first step (in program order) whose ranks fell into the trap, with those ranks.
/// `failed`: each failed rank, the 0-based step it failed in and why, in rank order.
pub fn check(s: &Scenario, failed: &[(usize, usize, &Failure)]) -> Option<DeviceHint> {
    let mut hit: Option<DeviceHint> = None;
    for &(rank, step, failure) in failed {
        let Some(st) = s.steps.get(step) else {
            continue;
        };
        let on_xpu = s
            .world
            .ranks
            .get(rank)
            .and_then(|r| s.world.nodes.get(r.node))
            .is_some_and(|n| n.platform == Platform::Xpu);
        let defaulted = tensor_of(&st.kind).is_some_and(|t| t.device.is_none());
        if !(on_xpu && defaulted && recognise::is_no_backend_for_device(failure, "xpu")) {
            continue;
        }
        match &mut hit {
            Some(h) if h.step == step + 1 => h.ranks.push(rank),
            Some(h) if h.step <= step + 1 => {}
            _ => {
                hit = Some(DeviceHint {
                    ranks: vec![rank],
                    step: step + 1,
                    step_label: st.label(),
                    line: st.loc.line,
                })
            }
        }
    }
    hit
}
