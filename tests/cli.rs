//! The `scen` binary as users call it: exit codes 0 (expectations hold), 1 (they do not),
//! 2 (invalid input), and deterministic output for the same seed.

use std::path::Path;
use std::process::Command;

fn scen(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("scen runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn every_shipped_scenario_exits_zero() {
    let mut files: Vec<_> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    files.sort();
    for f in files {
        let (code, out, err) = scen(&["run", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{}:\n{out}{err}", f.display());
        assert!(out.contains(" mode, seed "), "the report prints its seed");
    }
}

#[test]
fn a_wrong_expectation_exits_one() {
    let text = std::fs::read_to_string("scenarios/device_id_gloo_xpu.toml").unwrap();
    let wrong = text
        .replace("outcome = \"fails\"", "outcome = \"completes\"")
        .replace("step = \"cpu_group\"\n", "")
        .replace(
            "error = \"RuntimeError: No backend type associated with device type xpu\"\n",
            "",
        );
    let dir = std::env::temp_dir().join(format!("scen-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wrong.toml");
    std::fs::write(&path, wrong).unwrap();
    let (code, out, _) = scen(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("expected completes, got fails"), "{out}");
}

#[test]
fn invalid_input_exits_two_naming_file_line_col() {
    let dir = std::env::temp_dir().join(format!("scen-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[world]\nranks_per_node = 2\n\n[[step]]\nop = \"all_reduce\"\nsrc = 1\n",
    )
    .unwrap();
    let (code, _, err) = scen(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml:6:7: `src` does not apply to all_reduce"),
        "{err}"
    );
    let (code, _, err) = scen(&["check", "no/such/file.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read the scenario"), "{err}");
}

#[test]
fn json_output_is_deterministic_for_a_seed() {
    let a = scen(&[
        "run",
        "scenarios/missing_rank_all_reduce.toml",
        "--format",
        "json",
        "--seed",
        "3",
    ]);
    let b = scen(&[
        "run",
        "scenarios/missing_rank_all_reduce.toml",
        "--format",
        "json",
        "--seed",
        "3",
    ]);
    assert_eq!(a.0, 0);
    assert_eq!(a.1, b.1);
    let v: serde_json::Value = serde_json::from_str(&a.1).unwrap();
    assert_eq!(v["seed"], 3);
    assert_eq!(v["ranks"][3]["outcome"], "completed");
}
