//! Logs through `tracing`: where a log line is the behaviour (PyTorch's R27 warning for a
//! collective on a group the rank is not in) it is asserted with tracing-test; per-rank spans
//! reach `-v` and `--log-file`; and logging changes no trace, hash or report (no wall clock in
//! sim-mode log lines: two runs write byte-identical log files).

use crate::common::root;
use scen_core::scenario::{load_file, Scenario};
use std::process::Command;
use tracing_test::traced_test;

fn load(rel: &str) -> Scenario {
    load_file(&root().join(rel)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[traced_test]
fn the_r27_non_member_warning_is_a_warn_line_in_the_ranks_step_span() {
    let s = load("scenarios/collectives_gloo_cpu_w3.toml");
    scen_sim::simulate(&s, None).expect("runs");
    assert!(logs_contain(
        "Running all_reduce on global rank 1 which does not belong to the given group."
    ));
    logs_assert(|lines: &[&str]| {
        let hit = lines.iter().any(|l| {
            l.contains("WARN")
                && l.contains("rank{rank=1}")
                && l.contains("step{step=10")
                && l.contains("does not belong to the given group")
        });
        if hit {
            Ok(())
        } else {
            Err("no WARN line of rank 1 in step 10".into())
        }
    });
}

#[test]
fn logging_at_trace_level_changes_no_trace() {
    for rel in [
        "scenarios/missing_rank_all_reduce.toml",
        "scenarios/race_gloo_barrier_timeout_xccl_hang.toml",
        "scenarios/fault_crash_in_allreduce_gloo.toml",
    ] {
        let s = load(rel);
        let quiet = scen_sim::simulate(&s, Some(3)).expect("runs");
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(std::io::sink)
            .finish();
        let logged = tracing::subscriber::with_default(subscriber, || {
            scen_sim::simulate(&s, Some(3)).expect("runs")
        });
        assert_eq!(quiet.trace_hash, logged.trace_hash, "{rel}");
        assert_eq!(quiet.trace.render(), logged.trace.render(), "{rel}");
        assert_eq!(quiet.calls, logged.calls, "{rel}");
    }
}

#[test]
fn verbose_shows_rank_spans_and_log_file_is_deterministic() {
    let dir_tmp = tempfile::Builder::new()
        .prefix("scen-logging-")
        .tempdir()
        .expect("temp dir");
    let dir = dir_tmp.path().to_path_buf();
    std::fs::create_dir_all(&dir).expect("tmp");
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_scen"))
            .args(["run", "scenarios/missing_rank_all_reduce.toml"])
            .args(extra)
            .current_dir(root())
            .env_remove("RUST_LOG")
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(0));
        (
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (plain_out, plain_err) = run(&[]);
    assert!(plain_err.is_empty(), "no log without -v: {plain_err}");
    let (v_out, v_err) = run(&["-v"]);
    assert_eq!(plain_out, v_out, "the report is the same with -v");
    assert!(v_err.contains("rank{rank=3}:step{step=2}"), "{v_err}");
    assert!(v_err.contains("step{step=3 id=skipped_by_3}"), "{v_err}");
    let (a, b) = (dir.join("a.log"), dir.join("b.log"));
    run(&["-vv", "--log-file", a.to_str().expect("utf8")]);
    run(&["-vv", "--log-file", b.to_str().expect("utf8")]);
    let a_text = std::fs::read_to_string(&a).expect("log written");
    assert!(
        a_text.contains("call{group=0 label=WORLD seq=2 op=all_reduce}"),
        "{a_text}"
    );
    assert_eq!(a_text, std::fs::read_to_string(&b).expect("log written"));
    let _ = std::fs::remove_dir_all(&dir);
}
