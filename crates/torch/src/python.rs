//! Which Python (with torch) torch mode runs: `--python`, else `$SCEN_PYTHON`, else the venv
//! made by scripts/install-torch-cpu.sh (`$SCEN_TORCH_VENV`, default
//! `$HOME/.cache/scen-torch/venv`). `probe` asks it for torch's version and backends.

use crate::TorchError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The venv the install script makes.
pub fn default_venv() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("SCEN_TORCH_VENV") {
        return Some(PathBuf::from(v));
    }
    Some(PathBuf::from(std::env::var_os("HOME")?).join(".cache/scen-torch/venv"))
}

/// The interpreter to use and where the choice came from.
pub fn find(explicit: Option<&Path>) -> Result<(PathBuf, &'static str), TorchError> {
    if let Some(p) = explicit {
        return Ok((p.to_path_buf(), "--python"));
    }
    if let Some(p) = std::env::var_os("SCEN_PYTHON") {
        return Ok((PathBuf::from(p), "$SCEN_PYTHON"));
    }
    match default_venv().map(|v| v.join("bin/python")) {
        Some(p) if p.exists() => Ok((p, "the scen-torch venv")),
        Some(p) => Err(TorchError::Unavailable(format!(
            "no Python with torch: {} does not exist; run scripts/install-torch-cpu.sh, or pass --python / set SCEN_PYTHON",
            p.display()
        ))),
        None => Err(TorchError::Unavailable(
            "no Python with torch: HOME is not set; pass --python or set SCEN_PYTHON".into(),
        )),
    }
}

/// What the interpreter's torch is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchInfo {
    pub python: PathBuf,
    pub version: String,
    /// Available distributed backends, e.g. `gloo`, `nccl`, `xccl`.
    pub backends: Vec<String>,
}

const PROBE: &str = "import torch, torch.distributed as d\nb=[n for n in ('gloo','nccl','mpi','ucc','xccl') if getattr(d, 'is_%s_available' % n, lambda: False)()]\nprint(torch.__version__)\nprint(','.join(b))\n";

/// Imports torch in `python` and reports its version and backends.
pub fn probe(python: &Path) -> Result<TorchInfo, TorchError> {
    let out = Command::new(python)
        .arg("-c")
        .arg(PROBE)
        .output()
        .map_err(|e| TorchError::Unavailable(format!("cannot start {}: {e}", python.display())))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").to_string();
        return Err(TorchError::Unavailable(format!(
            "{} cannot import torch ({last}); run scripts/install-torch-cpu.sh",
            python.display()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let version = lines.next().unwrap_or("").trim().to_string();
    let backends = lines
        .next()
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    Ok(TorchInfo {
        python: python.to_path_buf(),
        version,
        backends,
    })
}

/// The sglang version installed for `python` (package metadata, no import), if any.
pub fn sglang_version(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .arg("-c")
        .arg("import importlib.metadata as m\nprint(m.version('sglang'))")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// `scen doctor`'s torch lines.
pub fn doctor(explicit: Option<&Path>) -> String {
    match find(explicit).and_then(|(p, from)| probe(&p).map(|i| (i, from))) {
        Ok((i, from)) => format!(
            "torch: {} ({from}: {}), distributed backends: {}\nsglang: {}\n",
            i.version,
            i.python.display(),
            if i.backends.is_empty() {
                "none".to_string()
            } else {
                i.backends.join(", ")
            },
            match sglang_version(&i.python) {
                Some(v) => format!("{v} (sglang steps of version \"0.5.23\" run on it)"),
                None => "not installed (scripts/install-torch-cpu.sh --sglang)".into(),
            }
        ),
        Err(e) => format!("torch: not found — {e}\n"),
    }
}
