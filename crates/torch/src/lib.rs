//! scen's torch mode: a scenario's program run on real PyTorch (`torch.distributed`, gloo on
//! CPU), reported in the same form as the simulator and `--hw`.
//!
//! [`translate`] writes the program as one Python file (also what `scen export --torch` writes;
//! sglang 0.5.23's start-up steps call real sglang through prelude_sglang.py),
//! [`launcher`] runs it as one real process per rank with torchrun's environment and is the
//! watchdog for hangs, [`eligible`] says what CPU PyTorch can run, [`python`] finds the
//! interpreter (`scen doctor`), [`zygote`] imports torch once for callers that make many runs.
//! Depends on scen-core and scen-procs (the process plumbing it shares with `--hw`: log
//! tails, free ports, process groups, signal names, the watch clock). See docs/torch.md.

#![forbid(unsafe_code)]

pub mod bench;
pub mod eligible;
pub mod launcher;
pub mod net;
pub mod python;
mod spawn;
pub mod translate;
pub mod zygote;

use scen_core::report::Report;
use scen_core::scenario::Scenario;
use std::path::PathBuf;

/// Options of `scen run --torch`.
#[derive(Debug, Clone, Default)]
pub struct TorchOptions {
    /// The interpreter (else $SCEN_PYTHON, else the install script's venv).
    pub python: Option<PathBuf>,
    /// How long no rank may report progress before the watchdog ends the run (default: the
    /// scenario's longest timeout or delay plus a grace).
    pub quiet_ms: Option<u64>,
    /// A hard limit on the run's wall time.
    pub max_wall_ms: Option<u64>,
    /// Keep the generated files (program, progress lines, logs) in this directory.
    pub keep_dir: Option<PathBuf>,
    /// Polled while the ranks run: an ending signal the caller caught (SIGINT, SIGTERM,
    /// SIGHUP). The launcher then kills every rank and still reports what it saw (the binary
    /// passes the handler it shares with `--hw`; this crate installs none).
    pub interrupted: Option<fn() -> Option<i32>>,
    /// Fork each run's runner from this zygote (torch imported once) instead of starting
    /// `python runner.py` (whose import of torch each run pays again); `python` is then only
    /// checked, the zygote's own interpreter runs the ranks. For callers that make many runs.
    pub zygote: Option<std::sync::Arc<zygote::Zygote>>,
}

#[derive(Debug, thiserror::Error)]
pub enum TorchError {
    /// No usable Python with torch; the text says how to get one.
    #[error("torch mode unavailable: {0}")]
    Unavailable(String),
    /// The scenario needs something CPU PyTorch does not have.
    #[error("this scenario cannot run in torch mode: {0}")]
    NotEligible(#[from] eligible::Ineligible),
    #[error("torch mode failed: {0}")]
    Io(String),
    /// The zygote (`TorchOptions::zygote`) died or stopped answering; the run's ranks died with it.
    #[error("torch-mode zygote {0}")]
    Zygote(String),
}

/// Runs `s` on real PyTorch. `source`: the scenario file's text, quoted in the program.
pub fn run(s: &Scenario, source: Option<&str>, o: &TorchOptions) -> Result<Report, TorchError> {
    launcher::launch(s, source, o)
}

/// The program alone, for the user's own torchrun (`scen export --torch`): any backend and
/// device (xccl on an XPU node, nccl on CUDA), not only what this machine can run.
pub fn export(s: &Scenario, source: Option<&str>) -> Result<String, TorchError> {
    eligible::check_translatable(s)?;
    let mut with_env = s.clone();
    scen_core::scenario::fault::apply_env(&mut with_env);
    Ok(translate::program(
        &with_env,
        source,
        &net::Endpoints::default(),
    ))
}
