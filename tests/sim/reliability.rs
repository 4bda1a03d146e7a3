//! Issue 12 through the binary: an internal error is never a verdict (exit 3, seed, replay),
//! outputs never destroy inputs, shrink writes only what check accepts, and each reproducer of
//! ../shared/fuzz-repro that needs a run (or a file on disk) gives a clear error or a correct
//! verdict. The load-time reproducers are cases in tests/sim/bad_input.rs.

use crate::common::{scen, scen_env};
use std::path::{Path, PathBuf};

/// A fresh directory under the target dir (removed first).
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("reliability-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const PANIC: (&str, &str) = ("SCEN_TEST_PANIC_RANK", "1");

#[test]
fn a_panic_in_a_rank_task_is_an_internal_error_not_a_verdict() {
    let f = "scenarios/five_ops_xccl_w2.toml";
    let (code, out, err) = scen_env(&["run", f, "--seed", "7"], &[PANIC]);
    assert_eq!(code, 3, "stdout: {out}\nstderr: {err}");
    assert!(!out.contains("outcome:"), "no verdict is printed: {out}");
    assert!(err.contains("internal error: panic at"), "{err}");
    assert!(err.contains("injected panic in rank 1's task"), "{err}");
    assert!(err.contains("seed: 7"), "{err}");
    assert!(
        err.contains(&format!("replay: scen replay {f} --seed 7")),
        "{err}"
    );

    let (code, out, _) = scen_env(&["run", f, "--format", "json"], &[PANIC]);
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let ie = &v["internal_error"];
    assert!(
        ie["detail"].as_str().unwrap().contains("injected panic"),
        "{v}"
    );
    assert_eq!(ie["seed"], 0);
    assert_eq!(ie["replay"], format!("scen replay {f} --seed 0"));

    let (code, _, err) = scen_env(&["replay", f, "--seed", "3"], &[PANIC]);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn explore_lists_internal_error_seeds_apart_and_exits_3() {
    let f = "scenarios/five_ops_xccl_w2.toml";
    let (code, out, _) = scen_env(&["explore", f, "--seeds", "2", "--jobs", "2"], &[PANIC]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("0 verdict classes"), "{out}");
    assert!(out.contains("internal errors: 2 seeds"), "{out}");
    assert!(
        out.contains("`scen replay scenarios/five_ops_xccl_w2.toml --seed 1`"),
        "{out}"
    );
    let (code, out, _) = scen_env(
        &["explore", f, "--seeds", "2", "--format", "json"],
        &[PANIC],
    );
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["internal_errors"].as_array().unwrap().len(), 2);
    assert_eq!(v["classes"].as_array().unwrap().len(), 0);
    // Without the hook the same exploration has classes and exits 0.
    let (code, out, _) = scen(&["explore", f, "--seeds", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("internal errors"), "{out}");
}

#[test]
fn help_documents_exit_code_3() {
    let (code, out, _) = scen(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("3  internal error"), "{out}");
}

/// Every output of every command, pointed at one of that command's inputs: exit 2, the
/// input unchanged, nothing else written (main.rs checks every command's paths, src/output.rs).
#[test]
fn outputs_never_replace_inputs_or_each_other() {
    let d = scratch("outputs");
    let original = std::fs::read_to_string("scenarios/two_group_cycle_xccl.toml").unwrap();
    let a = write(&d, "a.toml", &original);
    let suite = d.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    let s = write(&suite, "s.toml", &original);
    let dumps = d.join("dumps");
    std::fs::create_dir_all(&dumps).unwrap();
    let dump = write(&dumps, "nccl_trace_rank_0", "not read: refused before");
    let model = write(&d, "m.toml", "[links]\n");
    let suite_dir = suite.display().to_string();
    let dumps_dir = dumps.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", &a, "--graph", &a], &a),
        (vec!["run", &a, "--timeline", &a], &a),
        (vec!["run", &a, "--report", &a], &a),
        (vec!["run", &a, "--export-fr", &a], &a),
        (
            vec!["run", &a, "--model", &model, "--report", &model],
            &model,
        ),
        (vec!["run", &a, "--log-file", &a], &a),
        (vec!["check", &a, "--log-file", &a], &a),
        (vec!["shrink", &a, "--seed", "0", "-o", &a], &a),
        (vec!["export", "--torch", &a, "-o", &a], &a),
        (vec!["test", &a, "--junit", &a], &a),
        (vec!["test", &suite_dir, "--junit", &s], &s),
        (vec!["import-fr", &dumps_dir, "-o", &dump], &dump),
        (vec!["bench", "--model", &model, "-o", &model], &model),
        (vec!["record", "-o", &a, "--", "python3", &a], &a),
    ];
    for (args, input) in &cases {
        let before = std::fs::read(input).unwrap();
        let (code, _, err) = scen(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("refusing to overwrite"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(input).unwrap(),
            before,
            "{args:?} kept {input}"
        );
    }
    let g = d.join("g.out").display().to_string();
    let (code, _, err) = scen(&["run", &a, "--graph", &g, "--timeline", &g]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("same file as --graph"), "{err}");
    assert!(!Path::new(&g).exists());
    let left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 4, "nothing new beside the inputs: {left:?}");
}

#[test]
fn a_failed_export_names_the_path_and_reason_keeps_the_verdict_and_leaves_no_temp_file() {
    let d = scratch("export-fail");
    let a = write(
        &d,
        "a.toml",
        &std::fs::read_to_string("scenarios/two_group_cycle_xccl.toml").unwrap(),
    );
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (code, out, err) = scen(&["run", &a, "--graph", &sub.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        out.contains("outcome:"),
        "the verdict is still printed: {out}"
    );
    assert!(
        err.contains(&format!("cannot write {}", sub.display())),
        "{err}"
    );
    assert!(err.contains("is a directory"), "{err}");
    let missing = d.join("nope").join("g.dot").display().to_string();
    let (code, out, err) = scen(&["run", &a, "--timeline", &missing]);
    assert_eq!(code, 2);
    assert!(out.contains("outcome:"), "{out}");
    assert!(
        err.contains(&format!("cannot write {missing}: No such file")),
        "{err}"
    );
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("scen-tmp")),
        "no temp file left: {names:?}"
    );
    // A good path is written whole.
    let ok = d.join("g.dot").display().to_string();
    let (code, _, _) = scen(&["run", &a, "--graph", &ok]);
    assert_eq!(code, 0);
    assert!(std::fs::read_to_string(&ok).unwrap().starts_with("digraph"));
}

#[test]
fn shrink_refuses_a_seed_toml_cannot_hold() {
    let d = scratch("shrink-seed");
    let out = d.join("x.toml").display().to_string();
    let (code, _, err) = scen(&[
        "shrink",
        "scenarios/mismatch_count_gloo.toml",
        "--seed",
        "18446744073709551615",
        "-o",
        &out,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("above 9223372036854775807"), "{err}");
    assert!(!Path::new(&out).exists(), "nothing written");
}

#[test]
fn shrink_keeps_the_error_text_not_only_the_exception_type() {
    // Removing init_process_group would turn "Connection closed by peer" into "Default
    // process group has not been initialized": both RuntimeErrors, different bugs.
    let d = scratch("shrink-class");
    let out = d.join("x.toml").display().to_string();
    let (code, _, err) = scen(&[
        "shrink",
        "scenarios/mismatch_count_gloo.toml",
        "--seed",
        "0",
        "-o",
        &out,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Connection closed by peer"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("init_process_group"), "{text}");
    let (code, _, err) = scen(&["check", &out]);
    assert_eq!(code, 0, "{err}");
    let (code, out2, _) = scen(&["run", &out]);
    assert_eq!(code, 0, "the shrunk file's expectations hold: {out2}");
}

#[test]
fn invalid_utf8_names_line_col_and_byte_offset() {
    let d = scratch("utf8");
    let p = d.join("bad.toml");
    std::fs::write(&p, b"[world]\nranks_per_node = 2\n# \xff\n").unwrap();
    let (code, _, err) = scen(&["check", &p.display().to_string()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml:3:3: not valid UTF-8: byte offset 29 (0xff)"),
        "{err}"
    );
}

const CPU2: &str = "[world]\nranks_per_node = 2\nplatform = \"cpu\"\n";

#[test]
fn init_with_a_world_size_below_the_launched_world_fails_those_ranks() {
    // 03: ranks 2 and 3 of 4 with world_size = 2 panicked the model (`expect("member")`).
    let d = scratch("r03");
    let f = write(
        &d,
        "s.toml",
        "[world]\nranks_per_node = 4\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\nworld_size = 2\n[[step]]\nop = \"all_reduce\"\n",
    );
    let (code, out, err) = scen(&["run", &f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(!err.contains("panic"), "{err}");
    assert!(
        out.contains("rank   2: fails in step 1 init_process_group")
            && out.contains(
                "ValueError: Rank 2 is out of range. Valid ranks are 0 to 1 (world_size=2)"
            ),
        "{out}"
    );
}

#[test]
fn a_long_connect_retry_does_not_exhaust_the_simulated_ports() {
    // 05: a rank retrying a wrong MASTER_PORT for 100000 s ran turmoil out of ports.
    let d = scratch("r05");
    let f = write(
        &d,
        "s.toml",
        "[world]\nranks_per_node = 4\n[[step]]\nid = \"init\"\nop = \"init_process_group\"\nbackend = \"xccl\"\ntimeout_s = 100000\n[[faults]]\nkind = \"env\"\non = [3]\nenv = { MASTER_PORT = \"29501\" }\n[[expect]]\non = [0]\noutcome = \"fails\"\nstep = \"init\"\nerror = \"3/4 clients joined\"\n[[expect]]\non = [3]\noutcome = \"fails\"\nstep = \"init\"\nerror = \"29501\"\n",
    );
    let (code, out, err) = scen(&["run", &f]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn many_ranks_connecting_at_once_fit_the_simulated_backlog() {
    // 04: 128 gloo ranks on one node overflowed turmoil's 64-connection backlog.
    let d = scratch("r04");
    let f = write(
        &d,
        "s.toml",
        "[world]\nranks_per_node = 128\nplatform = \"cpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n",
    );
    let (code, out, err) = scen(&["run", &f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("128 completed"), "{out}");
}

#[test]
fn refused_connects_for_half_an_hour_do_not_exhaust_a_full_nodes_ports() {
    // Issue 33: 127 ranks retried the late store host for 1790 s; every refused connect left
    // its socket behind in turmoil until node0's ports ran out (a panic, after 3 minutes).
    let d = scratch("r33-ports");
    let f = write(
        &d,
        "s.toml",
        "[world]\nranks_per_node = 128\nplatform = \"cpu\"\n[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n[[step]]\nop = \"barrier\"\n[[faults]]\nkind = \"late_start\"\non = [0]\ndelay_ms = 1790000\n",
    );
    let (code, out, err) = scen(&["run", &f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("128 completed"), "{out}");
}

#[test]
fn sizes_computed_while_running_are_refused_as_input_errors() {
    // 06a, 06b: formulas that check cannot bound aborted the process on allocation.
    let d = scratch("r06");
    let split = write(
        &d,
        "split.toml",
        &format!("{CPU2}[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n[[step]]\nop = \"all_to_all_single\"\ninput_split_sizes = \"1e15\"\noutput_split_sizes = \"1e15\"\n"),
    );
    let (code, _, err) = scen(&["run", &split]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("exceeds a limit of scen") && err.contains("input_split_sizes"),
        "{err}"
    );
    // Found by the fuzzer: 2^63 rows overflowed the byte count (a debug-build panic).
    let wide = write(
        &d,
        "wide.toml",
        &format!("{CPU2}[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\n[[step]]\nop = \"all_to_all_single\"\ninput_split_sizes = [1, 1]\noutput_split_sizes = \"2 ** 63\"\n"),
    );
    let (code, _, err) = scen(&["run", &wide]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("output_split_sizes"), "{err}");
    let ws = write(
        &d,
        "ws.toml",
        &format!("{CPU2}[[step]]\nop = \"init_process_group\"\nbackend = \"gloo\"\nworld_size = \"1e18\"\n"),
    );
    let (code, _, err) = scen(&["run", &ws]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over scen's limit of 4096 ranks"), "{err}");
}

#[test]
fn denoise_past_2_pow_24_elements_indexes_exactly() {
    // 12: element indexes went through f32 (exact to 2^24) and sliced out of range.
    let d = scratch("r12");
    let f = write(
        &d,
        "s.toml",
        "[world]\nranks_per_node = 2\n[[step]]\nop = \"init_distributed_environment\"\n[[step]]\nop = \"initialize_model_parallel\"\nulysses = 2\n[[step]]\nop = \"denoise_step\"\nseq = 32\nheads = 12\nhead_dim = 16384\nlayers = 1\n",
    );
    let (code, out, err) = scen(&["run", &f]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 completed"), "{out}");
}

#[test]
fn a_oneccl_algorithm_the_simulator_does_not_run_is_an_input_error() {
    // CCL_ALLREDUCE names an algorithm scen does not simulate: exit 2 naming the variable and
    // the rank, not a silent fallback to another algorithm.
    let d = scratch("ccl_algo");
    let f = write(
        &d,
        "s.toml",
        "[world]\nnodes = 2\nranks_per_node = 2\n[[step]]\nop = \"init_process_group\"\nbackend = \"xccl\"\n[[step]]\nop = \"all_reduce\"\n[[faults]]\nkind = \"env\"\non = [2]\nenv = { CCL_ALLREDUCE = \"double_tree\" }\n",
    );
    let (code, _, err) = scen(&["run", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("rank 2: CCL_ALLREDUCE=double_tree: scen does not simulate"),
        "{err}"
    );
}

#[test]
fn a_whole_gloo_group_timing_out_fits_a_4_gib_address_space() {
    // A gloo timeout closes the group's pairs. Telling every member opened a connection per
    // pair never used (O(W²)): these two inputs aborted the fuzzer's 4 GiB address space.
    for file in [
        "tests/fuzz_crashes/crash-batch-ring-timeouts-1000.toml",
        "tests/fuzz_crashes/crash-node-crash-1000-of-2000.toml",
    ] {
        let out = std::process::Command::new("prlimit")
            .arg("--as=4294967296")
            .arg(env!("CARGO_BIN_EXE_scen"))
            .args(["run", file])
            .current_dir(super::common::root())
            .output()
            .expect("prlimit runs scen");
        let err = String::from_utf8_lossy(&out.stderr);
        // 1: their expectations (from the mutated originals) do not hold; never an abort.
        assert_eq!(out.status.code(), Some(1), "{file}: {err}");
        assert!(!err.contains("memory allocation"), "{file}: {err}");
    }
}

#[test]
fn a_send_over_the_per_rank_tensor_limit_is_refused_at_check() {
    // 2^28 f32 (1 GiB) and its frame copy aborted the fuzzer's 4 GiB address space: the
    // per-rank limit counted collectives only.
    let (code, _, err) = scen(&["check", "tests/fuzz_crashes/crash-send-1-gib.toml"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("send needs about") && err.contains("limit of 256.0 MiB per rank"),
        "{err}"
    );
}
