//! `scen record` without torch: the committed recordings of examples/five_ops (made by
//! scripts/record-examples.sh from a real torchrun) load, simulate to the outcome recorded,
//! and the XPU/xccl re-targeted one runs; and the errors a user meets before anything is
//! recorded (launcher not found, a program that makes no torch.distributed call, a Python
//! without torch) are clear, exit 2, and leave no file. Recording real programs:
//! tests/torch/record.rs.

use super::common::{root, scen};

const RECORDED: &str = "examples/five_ops/five_ops_gloo_w4.recorded.toml";
const RETARGETED: &str = "examples/five_ops/five_ops_xccl_w4.retargeted.toml";
const FAILING: &str = "examples/skip_rank/skip_all_reduce_gloo_w2.recorded.toml";

#[test]
fn the_recorded_five_ops_simulates_to_the_recorded_outcome() {
    let (code, out, err) = scen(&["check", RECORDED]);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(root().join(RECORDED)).unwrap();
    assert!(text.contains("launcher = \"torchrun\"") && text.contains("platform = \"cpu\""));
    assert!(text.contains("backend = \"gloo\""), "{text}");
    // Every step names the line of the program that made it.
    let steps = text.matches("[[step]]").count();
    assert_eq!(
        steps,
        text.matches("[[step]]  # examples/five_ops/test_xpu_distributed.py:")
            .count()
    );
    let (code, out, err) = scen(&["run", RECORDED]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("4 completed, 0 failed, 0 hung") && out.contains("expectations: 4/4 hold"),
        "{out}"
    );
}

#[test]
fn the_retargeted_five_ops_runs_on_xccl_in_the_simulator() {
    let text = std::fs::read_to_string(root().join(RETARGETED)).unwrap();
    assert!(
        text.contains("platform = \"xpu\"") && text.contains("backend = \"xccl\""),
        "{text}"
    );
    assert!(!text.contains("device = \"cpu\""), "{text}");
    let (code, out, err) = scen(&["run", RETARGETED, "--trace"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 completed, 0 failed, 0 hung"), "{out}");
    assert!(out.contains("xccl"), "the trace shows xccl traffic: {out}");
}

/// The failing recording: the simulator gives what the real torchrun job did (rank 0 times out
/// in the all_reduce rank 1 skipped; the agent stops rank 1, waiting in new_group's store).
#[test]
fn the_recorded_skip_simulates_to_the_recorded_failure() {
    let text = std::fs::read_to_string(root().join(FAILING)).unwrap();
    assert!(text.contains("launcher = \"torchrun\""), "{text}");
    let (code, out, err) = scen(&["run", FAILING]);
    assert_eq!(code, 0, "the expectations hold: {out}{err}");
    assert!(
        out.contains("0 completed, 2 failed, 0 hung") && out.contains("expectations: 2/2 hold"),
        "{out}"
    );
    assert!(
        out.contains("rank   1: fails in step 4 new_group")
            && out.contains("SIGTERM: torchrun stopped the worker group after rank 0 failed"),
        "{out}"
    );
}

/// The five-op run's raw records were kept (`scen record --keep`, scripts/record-examples.sh):
/// `--from` translates them again without torch, into the committed recording byte for byte,
/// and re-targeted to XPU/xccl into the committed re-targeted one: a recording can be
/// re-targeted without running the job again.
#[test]
fn kept_records_translate_again_and_retarget_without_the_job() {
    let tmp = scratch("from");
    let d = tmp.path();
    let records = "examples/five_ops/records";
    for (out, extra, want) in [
        ("plain.toml", vec![], RECORDED),
        (
            "xpu.toml",
            vec!["--platform", "xpu", "--backend", "xccl"],
            RETARGETED,
        ),
    ] {
        let path = d.join(out).display().to_string();
        let mut args = vec!["record", "--from", records, "-o", &path];
        args.extend(extra);
        let (code, stdout, err) = scen(&args);
        assert_eq!(code, 0, "{stdout}{err}");
        assert!(
            err.contains("simulated (seed 0): 4 of 4 rank(s) end as recorded"),
            "{err}"
        );
        let got = std::fs::read_to_string(&path).unwrap();
        let committed = std::fs::read_to_string(root().join(want)).unwrap();
        assert_eq!(got, committed, "--from {records} {out} differs from {want}");
    }
    // A directory --keep did not write is named, exit 2.
    let path = d.join("x.toml").display().to_string();
    let (code, _, err) = scen(&["record", "--from", "examples/five_ops", "-o", &path]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run.json") && err.contains("--keep"), "{err}");
    assert!(!d.join("x.toml").exists());
}

/// A fresh directory, removed when the test ends (no file left behind in /tmp).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("scen-record-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn nothing_recorded_is_a_clear_error_and_writes_nothing() {
    let tmp = scratch("errors");
    let d = tmp.path();
    let out = d.join("job.toml").display().to_string();
    let (code, _, err) = scen(&[
        "record",
        "-o",
        &out,
        "--",
        "no-such-launcher-xyz",
        "prog.py",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("launcher `no-such-launcher-xyz` not found on PATH"),
        "{err}"
    );
    let (code, _, err) = scen(&["record", "-o", &out, "--", "sh", "-c", "true"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("made no torch.distributed call"), "{err}");
    // scen says which launcher it ran and where it found it: the first on PATH, nothing else.
    assert!(err.contains("scen record: running /"), "{err}");
    assert!(err.contains("sh (first on PATH)"), "{err}");
    // A Python launcher's ranks run that Python; scen names it.
    let (_, _, err) = scen(&["record", "-o", &out, "--", "python3", "-c", "pass"]);
    assert!(
        err.lines()
            .any(|l| l.contains("python3 (first on PATH); its Python: /") && l.ends_with("python3")),
        "{err}"
    );
    let has_torch = std::process::Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_torch {
        println!(
            "skip: the system python3 has torch; the missing-torch message is not tested here"
        );
    } else {
        let (code, _, err) = scen(&["record", "-o", &out, "--", "python3", "-c", "pass"]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("torch is not installed for") && err.contains("-m pip install torch"),
            "{err}"
        );
    }
    let (code, _, err) = scen(&[
        "record",
        "-o",
        &out,
        "--backend",
        "xccl",
        "--",
        "sh",
        "-c",
        "true",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(!std::path::Path::new(&out).exists());
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        0,
        "nothing left in {}",
        d.display()
    );
}
