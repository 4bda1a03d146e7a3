//! The oracle's ranks live and die as real Python processes: a rank's process outlives its
//! program's last line by the interpreter's teardown (atexit, the process groups' and rank 0's
//! TCPStore server's destructors), which real ranks take about half a second for
//! (scripts/bench-torch-exit.py measures both side by side). A runner that ended its ranks with
//! `os._exit` (scen's before) makes a store host vanish at once, so peers still using it fail
//! where real PyTorch completes: this check fails if a rank exits within 100 ms of its end.
//! It holds for both ways a runner starts: `scen run --torch` (runner.py) and a runner forked
//! by the tests' zygote (crates/torch/src/zygote.rs).

use scen_torch::zygote::Zygote;
use std::path::Path;
use std::sync::Arc;

/// Floor for a teardown: `os._exit` takes a few ms, a real interpreter's teardown hundreds.
const TEARDOWN_FLOOR_MS: i64 = 100;

fn events(path: &Path) -> Result<Vec<serde_json::Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display())))
        .collect()
}

/// Runs `scenario` with `scen run --torch` (or, given a zygote, through the library with the
/// runner forked by it) and checks every rank's exit status and teardown time.
fn check_one(
    root: &Path,
    python: &Path,
    zygote: Option<&Arc<Zygote>>,
    scenario: &str,
    code: i64,
) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("scen-torch-exit-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let keep = dir.path().join("keep");
    match zygote {
        None => run_cli(root, python, scenario, &keep)?,
        Some(z) => {
            let s = super::load(&root.join(scenario));
            let o = scen_torch::TorchOptions {
                python: Some(python.to_path_buf()),
                keep_dir: Some(keep.clone()),
                max_wall_ms: Some(120_000),
                zygote: Some(z.clone()),
                ..Default::default()
            };
            scen_torch::run(&s, None, &o).map_err(|e| format!("{scenario} (zygote): {e}"))?;
        }
    }
    // (The runner's first line is its epoch, not an exit.)
    for exit in events(&keep.join("exits.jsonl"))? {
        let Some(rank) = exit["rank"].as_u64() else {
            continue;
        };
        let last = events(&keep.join(format!("rank{rank}.jsonl")))?
            .into_iter()
            .rfind(|e| e["ev"] == "end" || e["ev"] == "fail")
            .ok_or(format!("{scenario}: rank {rank} wrote no end"))?;
        let teardown_ms = exit["t"].as_i64().unwrap_or(0) - last["t"].as_i64().unwrap_or(0);
        if exit["code"].as_i64() != Some(code) {
            return Err(format!(
                "{scenario}: rank {rank} exited {exit}, a Python process exits {code}"
            ));
        }
        if teardown_ms < TEARDOWN_FLOOR_MS {
            return Err(format!(
                "{scenario}: rank {rank}'s process exited {teardown_ms} ms after its {} line: \
                 a real Python rank takes its interpreter's teardown (>= {TEARDOWN_FLOOR_MS} ms)",
                last["ev"]
            ));
        }
    }
    Ok(())
}

fn run_cli(root: &Path, python: &Path, scenario: &str, keep: &Path) -> Result<(), String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "--torch", scenario, "--python"])
        .arg(python)
        .arg("--keep")
        .arg(keep)
        .current_dir(root)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.code() != Some(0) {
        return Err(format!(
            "{scenario}: scen run --torch exited {:?}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(())
}

/// A completing program (exit 0) and a raising one (exit 1), each after its teardown, started
/// by `scen run --torch` and by the zygote.
pub fn ranks_exit_as_python_does(
    root: &Path,
    python: &Path,
    zygote: Option<&Arc<Zygote>>,
) -> Result<(), String> {
    for z in std::iter::once(None).chain(zygote.map(Some)) {
        check_one(
            root,
            python,
            z,
            "scenarios/five_ops_gloo_fallback_w4.toml",
            0,
        )?;
        check_one(
            root,
            python,
            z,
            "scenarios/gloo_new_group_rank_out_of_range.toml",
            1,
        )?;
    }
    Ok(())
}
