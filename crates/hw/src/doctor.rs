//! `scen doctor`: what this machine offers `scen run --hw`, and what is missing with its fix.

use crate::launcher::oneccl_root;
use std::fmt::Write;

/// The env that changes what oneCCL and Level Zero do.
fn relevant_env() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            k.starts_with("CCL_")
                || k.starts_with("FI_")
                || k.starts_with("ZE_")
                || k == "ONECCL_ROOT"
                || k == "IPATH_NO_BACKTRACE"
                || k == "LD_LIBRARY_PATH"
        })
        .collect();
    v.sort();
    v
}

pub fn report() -> String {
    let mut out = String::new();
    let mut missing: Vec<String> = Vec::new();
    let _ = writeln!(out, "Level Zero:");
    match level_zero_sys::probe() {
        Ok(p) => {
            let _ = writeln!(out, "  loader: {} ({} driver(s))", p.loader, p.drivers);
            if let Some(n) = &p.note {
                let _ = writeln!(out, "  {n}");
            }
            for d in &p.devices {
                let _ = writeln!(
                    out,
                    "  device {}: {} ({}, uuid {})",
                    d.index,
                    d.name,
                    d.device_type,
                    d.uuid_hex()
                );
            }
            if p.devices.is_empty() {
                let _ = writeln!(out, "  devices: none (xpu tensors run as host buffers on oneCCL's CPU plugin; --require-xpu fails)");
                missing.push("an Intel GPU with its Level Zero driver (intel-level-zero-gpu / the compute runtime) for real xpu buffers".into());
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  {e}");
            missing.push("the Level Zero loader: `apt-get install libze1` (scripts/install-oneccl-cpu.sh does it as root)".into());
        }
    }
    let _ = writeln!(out, "oneCCL:");
    let candidates = oneccl_sys::candidates_with_root(oneccl_root());
    let _ = writeln!(out, "  search: {}", candidates.join(", "));
    match oneccl_sys::Api::load_from(candidates) {
        Ok(api) => {
            let v = api.version().unwrap_or(0);
            let _ = writeln!(
                out,
                "  found: {} (version {}.{}.{})",
                api.path,
                v / 10000,
                (v / 100) % 100,
                v % 100
            );
        }
        Err(e) => {
            let _ = writeln!(out, "  not found: {e}");
            missing.push("oneCCL: run `scripts/install-oneccl-cpu.sh` (CPU, into $HOME/.cache/oneccl-cpu) or source the oneAPI setvars.sh".into());
        }
    }
    let _ = writeln!(out, "environment:");
    let env = relevant_env();
    if env.is_empty() {
        let _ = writeln!(out, "  (no CCL_*, FI_*, ZE_* set: `scen run --hw` sets the CPU defaults of scripts/oneccl-env.sh for its ranks)");
    }
    for (k, v) in env {
        let _ = writeln!(out, "  {k}={v}");
    }
    if std::env::var("CCL_YIELD").is_err() {
        let _ = writeln!(out, "  note: CCL_YIELD unset; ranks started by `scen run --hw` get sched_yield (the default spin is ~100x slower on few cores)");
    }
    let _ = writeln!(out, "missing:");
    if missing.is_empty() {
        let _ = writeln!(out, "  nothing: `scen run --hw` can run here");
    }
    for m in missing {
        let _ = writeln!(out, "  - {m}");
    }
    out
}
