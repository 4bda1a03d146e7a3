//! The CLI of torch mode: `scen run --torch`, `scen export --torch`, `--time-scale`, and the
//! torch lines of `scen doctor` (crates/torch does the work; docs/torch.md).

use scen::exit_code::Exit;
use scen_core::report::Report;
use scen_core::scenario::{Scenario, TimeScale};
use std::path::{Path, PathBuf};

/// Options shared by `run` and `export` for torch mode and the time scale.
#[derive(clap::Args, Clone)]
pub struct TorchArgs {
    /// Run on real PyTorch (torch.distributed, gloo on CPU) instead of the simulator.
    #[arg(long, conflicts_with = "hw")]
    pub torch: bool,
    /// Scale every timeout and delay by N/D (e.g. 1/600: 30 min -> 3 s), in the simulator and
    /// in torch mode alike; the report states the scale.
    #[arg(long, value_name = "N/D", value_parser = TimeScale::parse)]
    pub time_scale: Option<TimeScale>,
    /// The Python with torch (default $SCEN_PYTHON, else scripts/install-torch-cpu.sh's venv).
    #[arg(long, requires = "torch")]
    pub python: Option<PathBuf>,
    /// Keep torch mode's files (program, progress lines, log) in this directory.
    #[arg(long, requires = "torch", value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

impl TorchArgs {
    /// Applies `--time-scale` to the scenario (both modes run the scaled scenario).
    pub fn scale(&self, s: &mut Scenario) {
        if let Some(t) = self.time_scale {
            s.scale_times(t);
        }
    }

    pub fn run(&self, s: &Scenario, file: &Path) -> Result<Report, String> {
        let source = std::fs::read_to_string(file).ok();
        // Ctrl-C, SIGTERM, SIGHUP: the ranks are ended and the report still printed, with the
        // same handler and exit status (128 + signal) as --hw.
        let _guard = scen_procs::signals::Guard::arm().map_err(|e| e.to_string())?;
        let o = scen_torch::TorchOptions {
            python: self.python.clone(),
            keep_dir: self.keep.clone(),
            interrupted: Some(scen_procs::signals::interrupted_by),
            ..Default::default()
        };
        scen_torch::run(s, source.as_deref(), &o).map_err(|e| e.to_string())
    }
}

/// `scen export --torch FILE [-o OUT]`: the program alone (stdout without -o).
pub fn export(file: &Path, out: Option<&Path>, scale: Option<TimeScale>) -> Exit {
    let mut s = match scen_core::scenario::load_file(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Invalid;
        }
    };
    if let Some(t) = scale {
        s.scale_times(t);
    }
    let source = std::fs::read_to_string(file).ok();
    let text = match scen_torch::export(&s, source.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Exit::Invalid;
        }
    };
    match out {
        None => {
            print!("{text}");
            Exit::Ok
        }
        Some(path) => match scen::output::write_atomic(path, text.as_bytes()) {
            Ok(()) => {
                eprintln!(
                    "wrote {} (run: torchrun --nnodes {} --nproc-per-node {} {})",
                    path.display(),
                    s.world.nodes.len(),
                    s.world.ranks_per_node,
                    path.display()
                );
                Exit::Ok
            }
            Err(e) => super::fail(e.to_string()),
        },
    }
}

/// `scen doctor`'s torch lines.
pub fn doctor() -> String {
    scen_torch::python::doctor(None)
}
