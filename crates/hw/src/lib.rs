//! scen's hardware mode: the same rank model over real processes, OS sockets and oneCCL.
//!
//! This crate holds the public shape the CLI calls. The launcher, the tokio store/fabric and the
//! oneCCL device groups land with the hardware-mode issue; until then `run` says so plainly
//! instead of pretending.

use scen_core::scenario::Scenario;
use scen_core::verdict::Report;

/// Options of `scen run --hw`.
#[derive(Debug, Clone, Default)]
pub struct HwOptions {
    pub nproc_per_node: Option<usize>,
    pub require_xpu: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum HwError {
    /// Hardware mode cannot run here; the text says what is missing and how to get it.
    #[error("hardware mode unavailable: {0}")]
    Unavailable(String),
}

/// Runs a scenario on real hardware.
pub fn run(_scenario: &Scenario, _opts: &HwOptions) -> Result<Report, HwError> {
    Err(HwError::Unavailable(
        "this build of scen has no hardware runner yet (it needs the oneCCL runtime: \
         scripts/install-oneccl-cpu.sh for CPU, the Intel oneAPI Base Toolkit for GPUs). \
         Run the scenario in the simulator with `scen run FILE`."
            .into(),
    ))
}
