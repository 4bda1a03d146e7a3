//! `scen bench` end to end through the binary: the simulator's prediction (deterministic,
//! nccl-tests columns), patterns, --compare, bad arguments, the gloo host path on real processes
//! and sockets, and real oneCCL (skipped visibly without it; SCEN_HW_REQUIRED=1 makes that a
//! failure, as in tests/hw.rs). No timing is asserted: targets are measured by scripts/bench.sh.

use serde_json::Value;
use std::process::{Command, Output};

fn scen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(args)
        .output()
        .expect("scen runs")
}

fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("json")
}

#[test]
fn sim_bench_predicts_every_size_with_bus_bandwidth_and_is_deterministic() {
    let args = [
        "bench",
        "--op",
        "all_reduce,all_to_all",
        "--sizes",
        "4K:1M",
        "--ranks",
        "4",
        "--format",
        "json",
    ];
    let a = json(&scen(&args));
    assert_eq!(a, json(&scen(&args)), "same input, same prediction");
    let rows = a["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 9);
    for r in rows {
        let sim = &r["sim"];
        let (alg, bus) = (
            sim["algbw_gbps"].as_f64().unwrap(),
            sim["busbw_gbps"].as_f64().unwrap(),
        );
        let factor = if r["op"] == "all_reduce" { 1.5 } else { 0.75 };
        assert!((bus - alg * factor).abs() < 1e-9, "{r}");
        assert!(sim["time_us"].as_f64().unwrap() > 0.0);
        assert!(r.get("hw").is_none());
    }
    // Bigger messages take longer.
    let t = |i: usize| rows[i]["sim"]["time_us"].as_f64().unwrap();
    assert!(t(8) > t(0));
}

#[test]
fn human_table_has_the_nccl_tests_columns_and_patterns_report_per_step() {
    let o = scen(&["bench", "--sizes", "1M"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        out.contains("size") && out.contains("count") && out.contains("redop"),
        "{out}"
    );
    assert!(out.contains("sim_bus"), "{out}");
    let o = scen(&["bench", "--pattern", "wan-ulysses", "--ulysses", "2"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("per denoise step"), "{out}");
    assert!(
        out.contains("all_to_all_4D qkv [3, seq, heads, head_dim]"),
        "{out}"
    );
}

#[test]
fn compare_prints_buckets_and_a_verdict() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-bench-cmp-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let slow = dir.join("slow.toml");
    std::fs::write(&slow, "[links.intra]\nalpha_us = 10.0\nbeta_gbps = 10.0\n").unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let base = ["bench", "--sizes", "64K:64M", "--format", "json"];
    let oa = scen(&[&base[..], &["--model", slow.to_str().unwrap()]].concat());
    std::fs::write(&a, &oa.stdout).unwrap();
    std::fs::write(&b, scen(&base).stdout).unwrap();
    let o = scen(&[
        "bench",
        "--compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for want in ["<1 MiB", "1-10 MiB", ">10 MiB", "verdict:", "faster than"] {
        assert!(out.contains(want), "missing {want}: {out}");
    }
    std::fs::write(&a, "{ not json").unwrap();
    let o = scen(&[
        "bench",
        "--compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("a.json:1:"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_exit_2_with_a_reason() {
    for (args, want) in [
        (vec!["bench", "--sizes", "64M:4K"], "end is below the start"),
        (vec!["bench", "--op", "gossip"], "unknown op"),
        (
            vec!["bench", "--pattern", "wan-ulysses", "--ulysses", "3"],
            "not divisible",
        ),
        (vec!["bench", "--hw", "--env", "NOEQUALS"], "KEY=VALUE"),
        (
            vec!["bench", "--env", "CCL_ALLREDUCE=double_tree"],
            "no schedule for all_reduce `double_tree`",
        ),
    ] {
        let o = scen(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

fn check_hw_rows(v: &Value, raw: bool) {
    for r in v["rows"].as_array().unwrap() {
        assert_eq!(r["wrong"], 0, "{r}");
        assert!(r["hw"]["time_us"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r.get("raw").is_some(), raw, "{r}");
    }
}

#[test]
fn gloo_host_path_runs_every_op_on_real_processes_with_correct_values() {
    let o = scen(&[
        "bench", "--hw", "--path", "gloo", "--op", "all", "--sizes", "4K,64K", "--ranks", "3",
        "--warmup", "1", "--iters", "2", "--format", "json",
    ]);
    let v = json(&o);
    assert_eq!(v["path"], "gloo");
    assert_eq!(v["rows"].as_array().unwrap().len(), 12);
    check_hw_rows(&v, false);
}

#[test]
fn oneccl_bench_with_raw_baseline_gets_correct_values() {
    // oneCCL jobs: not beside a test that kills ranks (tests/hw.rs, ONECCL_JOBS).
    let _jobs = super::oneccl_jobs(false);
    let o = scen(&[
        "bench",
        "--hw",
        "--raw",
        "--op",
        "all_reduce,all_gather,all_to_all,broadcast",
        "--sizes",
        "4K,64K",
        "--nproc-per-node",
        "2",
        "--warmup",
        "1",
        "--iters",
        "3",
        "--format",
        "json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) && err.contains("hardware mode unavailable") {
        assert!(
            std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
            "SCEN_HW_REQUIRED=1 but {err}"
        );
        println!("skip: scen bench --hw on oneCCL: {err}");
        return;
    }
    let v = json(&o);
    assert_eq!(v["path"], "oneccl");
    assert_eq!(v["rows"].as_array().unwrap().len(), 8);
    check_hw_rows(&v, true);
}

/// The latest "completes at N.NNNs" of a human `scen run` report, in ms.
fn completes_ms(o: &Output) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    out.lines()
        .filter_map(|l| l.split("completes at ").nth(1))
        .filter_map(|t| t.trim_end_matches(['s', '"']).parse::<f64>().ok())
        .map(|s| (s * 1000.0).round() as u64)
        .max()
        .unwrap_or_else(|| panic!("no completion time in: {out}"))
}

#[test]
fn model_files_load_for_scenarios_and_bad_ones_name_file_line_col() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-bench-model-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(dir.join("models")).unwrap();
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/slow_inter_node_link_xccl.toml"),
    )
    .unwrap();
    // The scenario's own link keys replaced by a model file next to it.
    let (head, rest) = text.split_once("\n[world.links]\n").unwrap();
    let steps = &rest[rest.find("[[step]]").unwrap()..];
    let scenario = dir.join("s.toml");
    std::fs::write(
        &scenario,
        format!("{head}\n[world.links]\nmodel = \"models/slow.toml\"\n\n{steps}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("models/slow.toml"),
        "[links.inter]\nalpha_us = 20.0\nbeta_gbps = 0.5\n",
    )
    .unwrap();
    let fast = dir.join("fast.toml");
    std::fs::write(&fast, "[links.inter]\nalpha_us = 20.0\nbeta_gbps = 50.0\n").unwrap();
    let s = scenario.to_str().unwrap();
    let slow_run = scen(&["run", s]);
    assert!(slow_run.status.success(), "{slow_run:?}");
    let fast_run = scen(&["run", s, "--model", fast.to_str().unwrap()]);
    assert!(fast_run.status.success(), "{fast_run:?}");
    // Two 2 MiB messages at 0.5 GB/s cost ~8 ms more than at 50 GB/s.
    let (slow_ms, fast_ms) = (completes_ms(&slow_run), completes_ms(&fast_run));
    assert!(
        slow_ms >= fast_ms + 6,
        "slow {slow_ms} ms, fast {fast_ms} ms"
    );

    // Store round trips are charged too: 10 ms each makes the rendezvous visibly slower.
    let slow_store = dir.join("store.toml");
    std::fs::write(
        &slow_store,
        "[links.inter]\nalpha_us = 20.0\nbeta_gbps = 50.0\n[links.store]\nalpha_us = 10000.0\nbeta_gbps = 1.0\n",
    )
    .unwrap();
    let store_run = scen(&["run", s, "--model", slow_store.to_str().unwrap()]);
    assert!(store_run.status.success(), "{store_run:?}");
    let store_ms = completes_ms(&store_run);
    assert!(
        store_ms >= fast_ms + 30,
        "store {store_ms} ms, fast {fast_ms} ms"
    );

    // A bad model file: scen run (from the scenario and from --model) and scen bench name it.
    let bad = dir.join("models/slow.toml");
    std::fs::write(&bad, "[links.inter]\nalpha_us = 20.0\nbeta_gbps = 0\n").unwrap();
    let want = format!("{}:3:13:", bad.display());
    for args in [
        vec!["run", s],
        vec!["run", s, "--model", bad.to_str().unwrap()],
        vec!["bench", "--model", bad.to_str().unwrap()],
    ] {
        let o = scen(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(&want) && e.contains("beta_gbps must be a number from"),
            "{args:?}: {e}"
        );
    }
    // A missing one: the scenario's `model =` value is named.
    std::fs::remove_file(&bad).unwrap();
    let o = scen(&["run", s]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!("{s}:")) && e.contains("cannot read the model file"),
        "{e}"
    );
    let o = scen(&["bench", "--model", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibration_on_the_gloo_path_writes_a_model_the_prediction_reads_back() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-bench-cal-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("m.toml");
    let m = model.to_str().unwrap();
    let o = scen(&[
        "bench",
        "--hw",
        "--path",
        "gloo",
        "--calibrate",
        "--op",
        "all_reduce,all_gather",
        "--sizes",
        "256K,1M,4M",
        "--ranks",
        "2",
        "--warmup",
        "1",
        "--iters",
        "2",
        "--repeat",
        "2",
        "--model-out",
        m,
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "calibrated host:",
        "error after calibration, all_reduce on 2 ranks",
        "err%",
        "chosen by mean held-out error: line ",
        "held-out error, all_reduce on 2 ranks (each size predicted by a calibration that did not see it): ",
        "model error vs machine noise: held out (each size predicted by a calibration that did not see it) median ",
    ] {
        assert!(out.contains(want), "missing {want}: {out}");
    }
    let text = std::fs::read_to_string(&model).unwrap();
    assert!(
        text.contains("[links.host]") && text.contains("[[ops]]"),
        "{text}"
    );
    // The written model predicts the gloo path with its per-op costs.
    let o = scen(&[
        "bench",
        "--path",
        "gloo",
        "--model",
        m,
        "--op",
        "all_reduce",
        "--sizes",
        "1M",
        "--format",
        "json",
    ]);
    let v = json(&o);
    assert!(v["rows"][0]["sim"]["time_us"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn predictions_run_the_all_reduce_ccl_allreduce_names() {
    // oneCCL jobs: not beside a test that kills ranks (tests/hw.rs, ONECCL_JOBS).
    let _jobs = super::oneccl_jobs(false);
    // At 4 KiB oneCCL's table picks recursive doubling (2 exchanges of the whole buffer on 4
    // ranks); CCL_ALLREDUCE=ring makes it the ring (6 messages), which the prediction follows,
    // per size range where the value has ranges.
    let at_4k = |env: &[&str]| {
        let mut args = vec![
            "bench",
            "--op",
            "all_reduce",
            "--sizes",
            "4K",
            "--ranks",
            "4",
            "--format",
            "json",
        ];
        args.extend_from_slice(env);
        json(&scen(&args))["rows"][0]["sim"]["time_us"]
            .as_f64()
            .unwrap()
    };
    let table = at_4k(&[]);
    let ring = at_4k(&["--env", "CCL_ALLREDUCE=ring"]);
    assert!(ring > table, "ring {ring} vs table {table}");
    assert_eq!(
        at_4k(&[
            "--env",
            "CCL_ALLREDUCE=recursive_doubling:0-8192;ring:8193-max"
        ]),
        table
    );
    assert_eq!(at_4k(&["--env", "CCL_ALLREDUCE=ring:0-8192"]), ring);
}

/// A `--path torch` run's output, or None (with a visible skip line) when torch is not
/// installed here and SCEN_TORCH_REQUIRED is not 1; a oneCCL-needing run likewise for
/// SCEN_HW_REQUIRED.
fn torch_or_skip(what: &str, o: Output) -> Option<Output> {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    for (text, var) in [
        ("torch mode unavailable", "SCEN_TORCH_REQUIRED"),
        ("hardware mode unavailable", "SCEN_HW_REQUIRED"),
    ] {
        if o.status.code() == Some(2) && err.contains(text) {
            assert!(
                std::env::var(var).as_deref() != Ok("1"),
                "{var}=1 but {err}"
            );
            println!("skip: {what}: {err}");
            return None;
        }
    }
    Some(o)
}

const SMALL_TORCH: [&str; 13] = [
    "bench",
    "--hw",
    "--op",
    "all_reduce,all_gather,all_to_all",
    "--sizes",
    "64K:1M",
    "--nproc-per-node",
    "2",
    "--iters",
    "5",
    "--warmup",
    "2",
    "--path",
];

#[test]
fn torch_path_times_real_torch_distributed_with_no_wrong_values() {
    let mut args = SMALL_TORCH.to_vec();
    args.push("torch");
    let Some(o) = torch_or_skip("scen bench --path torch", scen(&args)) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("path torch (backend "), "{out}");
    assert!(out.contains("#wrong"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 3 * 5, "{out}");
    for r in rows {
        let cols: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(cols[8], "0", "#wrong of {r}");
        assert!(cols[5].parse::<f64>().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn oneccl_against_torch_compares_by_bucket_and_plots_both() {
    // oneCCL jobs: not beside a test that kills ranks (tests/hw.rs, ONECCL_JOBS).
    let _jobs = super::oneccl_jobs(false);
    let dir = tempfile::tempdir().unwrap();
    let small = |path: &str| {
        let mut a = SMALL_TORCH[..3].to_vec();
        a.extend([
            "all_reduce",
            "--sizes",
            "64K,2M",
            "--nproc-per-node",
            "2",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--format",
            "json",
            "--path",
            path,
        ]);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let mut files = Vec::new();
    for path in ["oneccl", "torch"] {
        let args = small(path);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(o) = torch_or_skip("scen bench --compare oneccl torch", scen(&args)) else {
            return;
        };
        let v = json(&o);
        assert_eq!(v["path"], path);
        check_hw_rows(&v, false);
        let f = dir.path().join(format!("{path}.json"));
        std::fs::write(&f, &o.stdout).unwrap();
        files.push(f);
    }
    let svg = dir.path().join("cmp.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_scen"))
        .args(["bench", "--compare"])
        .args(&files)
        .arg("--plot")
        .arg(&svg)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("A = ") && out.contains("path torch"), "{out}");
    assert!(
        out.contains("<1 MiB:") && out.contains("notes expect +0-10%"),
        "{out}"
    );
    assert!(
        out.contains("1-10 MiB:") && out.contains("notes expect +10-30%"),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("verdict: ")), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect();
    assert!(
        texts.iter().any(|t| t == "bus bandwidth (GB/s)"),
        "{texts:?}"
    );
    for f in &files {
        let name = f.display().to_string();
        let series = format!("{name} all_reduce");
        assert!(texts.contains(&series), "a series for {name}: {texts:?}");
    }
    // The reports have no prediction: no model series.
    assert!(!texts.iter().any(|t| t.ends_with("model)")), "{texts:?}");
}

#[test]
fn ab_runs_both_paths_in_turns_and_gives_a_noise_band() {
    // oneCCL jobs: not beside a test that kills ranks (tests/hw.rs, ONECCL_JOBS).
    let _jobs = super::oneccl_jobs(false);
    let o = scen(&[
        "bench",
        "--hw",
        "--ab",
        "oneccl,torch",
        "--op",
        "all_reduce",
        "--sizes",
        "256K",
        "--nproc-per-node",
        "2",
        "--iters",
        "3",
        "--warmup",
        "1",
        "--repeat",
        "2",
    ]);
    let Some(o) = torch_or_skip("scen bench --ab oneccl,torch", o) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("path oneccl") && out.contains("path torch"),
        "{out}"
    );
    assert!(out.contains("noise band "), "{out}");
}

/// The bare-loop baseline (scripts/bench-baseline.sh: oneCCL's C API on libccl.so.2, its own
/// launcher) builds with gcc, runs 2 ranks at small sizes with correct values, and its report
/// loads in `scen bench --compare` against scen's own measurement. Skips visibly without gcc or
/// oneCCL (a failure under SCEN_HW_REQUIRED=1).
#[test]
fn independent_baseline_builds_runs_and_compares() {
    // oneCCL jobs: not beside a test that kills ranks (tests/hw.rs, ONECCL_JOBS).
    let _jobs = super::oneccl_jobs(false);
    let root = std::env::var("ONECCL_ROOT").map_or_else(
        |_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/oneccl-cpu")
        },
        std::path::PathBuf::from,
    );
    let gcc = Command::new("gcc").arg("--version").output().is_ok();
    let lib = root.join("lib/libccl.so.2").exists();
    if !gcc || !lib {
        let why = format!(
            "gcc found: {gcc}; libccl.so.2 under {}: {lib}",
            root.display()
        );
        assert!(
            std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
            "SCEN_HW_REQUIRED=1 but {why}"
        );
        println!("skip: the bare-loop baseline needs gcc and oneCCL: {why}");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("scen-baseline-")
        .tempdir()
        .expect("temp dir");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-baseline.sh");
    let o = Command::new("bash")
        .arg(&script)
        .args([
            "--ranks",
            "2",
            "--op",
            "all_reduce,all_gather",
            "--sizes",
            "4K,64K",
        ])
        .args(["--warmup", "1", "--iters", "3"])
        .env("ONECCL_ROOT", &root)
        .env("BASELINE_BIN_DIR", dir.path().join("bin"))
        .output()
        .expect("bash runs");
    let v = json(&o);
    assert_eq!(v["path"], "baseline");
    assert_eq!(v["ranks"], 2);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert_eq!(r["wrong"], 0, "{r}");
        assert!(r["hw"]["time_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    let base = dir.path().join("baseline.json");
    std::fs::write(&base, &o.stdout).unwrap();
    let mine = dir.path().join("scen.json");
    let o = scen(&[
        "bench",
        "--op",
        "all_reduce,all_gather",
        "--sizes",
        "4K,64K",
        "--ranks",
        "2",
        "--format",
        "json",
    ]);
    std::fs::write(&mine, &o.stdout).unwrap();
    let o = scen(&[
        "bench",
        "--compare",
        base.to_str().unwrap(),
        mine.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("path baseline") && out.contains("verdict:"),
        "{out}"
    );
}
