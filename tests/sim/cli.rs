//! The `scen` binary as users call it: exit codes 0 (expectations hold), 1 (they do not),
//! 2 (invalid input), and deterministic output for the same seed.

use crate::common::{root, scen};
use scen::exit_code::{Exit, TABLE};
use std::path::Path;
use std::process::Command;

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
        let launcher = scen_core::scenario::load_file(&f).unwrap().world.launcher;
        let header = format!(" mode, launcher {}, seed ", launcher.name());
        assert!(
            out.lines().next().is_some_and(|l| l.contains(&header)),
            "the header names the launcher and the seed: {out}"
        );
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
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-cli-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("wrong.toml");
    std::fs::write(&path, wrong).unwrap();
    let (code, out, _) = scen(&["run", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("expected completes, got fails"), "{out}");
}

#[test]
fn invalid_input_exits_two_naming_file_line_col() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-cli-bad-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
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
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["ranks"][3]["outcome"], "completes");
    assert_eq!(v["ranks"][3]["rank"], 3);
    assert_eq!(v["passed"], true);
}

/// `scen doctor` reports both libraries and what is missing; `--require-xpu` without a GPU is
/// a clear error (exit 2), not a silent host-buffer run.
#[test]
fn doctor_and_require_xpu() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
        .arg("doctor")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for section in ["Level Zero:", "oneCCL:", "environment:", "missing:"] {
        assert!(text.contains(section), "{section} missing in:\n{text}");
    }
    let no_gpu = level_zero_devices() == 0;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
        .args([
            "run",
            "--hw",
            "--require-xpu",
            "scenarios/five_ops_xccl_w2.toml",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    if no_gpu && !err.contains("oneCCL is not available") {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--require-xpu: no Intel GPU"), "{err}");
    }
}

fn level_zero_devices() -> usize {
    level_zero_sys::probe()
        .map(|p| p.devices.len())
        .unwrap_or(0)
}

/// `scen run FILE --trace | head -1`: the reader goes away; scen must not panic on the closed
/// pipe and must still end with the verdict's exit code.
#[test]
fn closed_stdout_is_no_panic_and_keeps_the_exit_code() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "scenarios/missing_rank_all_reduce.toml", "--trace"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn scen");
    drop(child.stdout.take()); // the reader exits before scen prints anything
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// README.md's exit table, row by row, against the one enum every command returns
/// (src/exit_code.rs): a code the README documents is one the command can give, and no other.
#[test]
fn the_readme_exit_table_is_the_code() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let head = "| command | 0 | 1 | 2 | 3 |";
    let rows: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != head)
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut documented: Vec<(String, Vec<Exit>)> = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let codes: Vec<Exit> = [Exit::Ok, Exit::Failed, Exit::Invalid, Exit::Internal]
            .into_iter()
            .zip(&cells[1..])
            .filter(|(_, cell)| **cell != "—")
            .map(|(e, _)| e)
            .collect();
        for name in cells[0].split(", ") {
            documented.push((name.trim_matches('`').to_string(), codes.clone()));
        }
    }
    let table: Vec<(String, Vec<Exit>)> = TABLE
        .iter()
        .map(|(n, c)| (n.to_string(), c.to_vec()))
        .collect();
    assert_eq!(
        documented, table,
        "README.md's exit table vs src/exit_code.rs"
    );
}

/// No command makes up a status: every exit goes through `Exit` (src/exit_code.rs).
#[test]
fn exit_codes_are_not_literals() {
    let mut found = Vec::new();
    let mut dirs = vec![root().join("src")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("src/exit_code.rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, l) in text.lines().enumerate() {
                    if l.contains("ExitCode::from(") && !l.contains("ExitCode::from(dispatch")
                        || l.contains("ExitCode::SUCCESS")
                        || l.contains("process::exit(")
                    {
                        found.push(format!("{}:{}: {l}", p.display(), i + 1));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "exit codes outside src/exit_code.rs:\n{}",
        found.join("\n")
    );
}

/// The README's sample run is what `scen run` prints for that scenario today.
#[test]
fn the_readme_sample_run_is_the_output() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("scen missing_rank_all_reduce — ")
        .expect("README shows a run of missing_rank_all_reduce");
    let end = start + readme[start..].find("\n```").expect("its code block ends");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["run", "scenarios/missing_rank_all_reduce.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("scen runs");
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        readme[start..end].trim_end(),
        got.trim_end(),
        "README.md's sample run is stale: paste the real output"
    );
}

#[test]
fn seed_is_refused_where_no_seed_decides_the_schedule() {
    // A real run's schedule is the OS's: a seed there would be accepted and mean nothing.
    for mode in ["--hw", "--torch"] {
        let (code, _, err) = scen(&[
            "run",
            mode,
            "--seed",
            "3",
            "scenarios/missing_rank_all_reduce.toml",
        ]);
        assert_eq!(code, 2, "{mode}: {err}");
        assert!(err.contains("--seed"), "{mode}: {err}");
    }
    let (code, out, _) = scen(&[
        "run",
        "--seed",
        "3",
        "scenarios/missing_rank_all_reduce.toml",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("seed 3"), "{out}");
}

/// `bench -o FILE` writes the sweep's report whatever `--format` prints (before, it wrote
/// nothing without `--calibrate`), and `--compare` reads what it wrote.
#[test]
fn bench_out_writes_the_report_compare_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let sweep = [
        "bench",
        "--op",
        "all_reduce,all_gather",
        "--sizes",
        "64K:1M:4",
    ];
    let (code, out, err) = scen(&[&sweep[..], &["-o", a]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("all_gather"), "human output as usual: {out}");
    let (code, _, err) = scen(&[&sweep[..], &["--nnodes", "2", "-o", b]].concat());
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = scen(&["bench", "--compare", a, b]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verdict:"), "{out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a).unwrap()).unwrap();
    assert_eq!(report["model_source"], "default", "{report}");
    // -o is a sweep's report: with --compare it has nothing to write.
    let (code, _, err) = scen(&["bench", "--compare", a, b, "-o", a]);
    assert_eq!(code, 2, "{err}");
}
