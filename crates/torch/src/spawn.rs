//! How one run's runner process starts and is watched: `python runner.py CONFIG` as a child
//! of this process (`scen run --torch`), or forked by a [`Zygote`] that imported torch once
//! (many-run callers). Either way it leads its own process group, which the launcher kills.

use crate::zygote::{Forked, Zygote};
use crate::TorchError;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// How long to wait for the zygote to reap a killed runner.
const REAP_LIMIT: Duration = Duration::from_secs(10);

/// A started runner process.
pub enum Runner {
    Own(Child),
    Forked(Arc<Zygote>, Forked),
}

impl Runner {
    /// Starts the runner of one run, its output (and its ranks') to `log`.
    pub fn start(
        py: &Path,
        zygote: Option<&Arc<Zygote>>,
        runner: &Path,
        config: &Path,
        log: &Path,
    ) -> Result<Runner, TorchError> {
        let io = |e: std::io::Error| TorchError::Io(format!("creating the log: {e}"));
        let out = std::fs::File::create(log).map_err(io)?;
        if let Some(z) = zygote {
            return Ok(Runner::Forked(z.clone(), z.fork(runner, config, log)?));
        }
        let err = out.try_clone().map_err(io)?;
        let child = Command::new(py)
            .arg(runner)
            .arg(config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| TorchError::Unavailable(format!("cannot start {}: {e}", py.display())))?;
        Ok(Runner::Own(child))
    }

    /// Its process group.
    pub fn pgid(&self) -> i32 {
        match self {
            Runner::Own(c) => c.id() as i32,
            Runner::Forked(_, f) => f.pid,
        }
    }

    /// Whether it has exited; an error if its zygote died.
    pub fn exited(&mut self) -> Result<bool, TorchError> {
        match self {
            Runner::Own(c) => Ok(matches!(c.try_wait(), Ok(Some(_)))),
            Runner::Forked(z, f) => z.ended(*f),
        }
    }

    /// Reaps it once its group was killed.
    pub fn reap(&mut self) {
        match self {
            Runner::Own(c) => {
                let _ = c.wait();
            }
            Runner::Forked(z, f) => z.reap(*f, REAP_LIMIT),
        }
    }
}
