//! `scen test` as a team uses it on its own scenario directory: pass, a changed scenario shows a
//! diff and exits 1, `--update` fixes it, JUnit for CI, snapshot location from scen.toml, and
//! invalid input exits 2.

use std::path::{Path, PathBuf};
use std::process::Command;

fn scen_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    scen_ci(dir, args, None)
}

/// `scen ARGS` in `dir`, with `CI` set to `ci` or unset (.ci/run sets it for the whole suite).
fn scen_ci(dir: &Path, args: &[&str], ci: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scen"));
    cmd.args(args).current_dir(dir).env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    let out = cmd.output().expect("scen runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A fresh project directory with two shipped scenarios under `suite/`.
fn project(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("scen-suite-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("suite")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["missing_rank_all_reduce", "mismatch_dtype_xccl"] {
        std::fs::copy(
            repo.join(format!("scenarios/{name}.toml")),
            dir.join(format!("suite/{name}.toml")),
        )
        .unwrap();
    }
    dir
}

#[test]
fn new_snapshots_then_a_change_shows_a_diff_and_update_fixes_it() {
    let dir = project("cycle");
    // No snapshots yet: said first, each scenario is NEW (its expectations hold), not FAILED;
    // exit 0, but 1 under CI; nothing is written.
    let (code, out, _) = scen_in(&dir, &["test", "suite"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("no snapshot yet ("), "{out}");
    assert!(
        out.contains("NEW      missing_rank_all_reduce: expectations hold; no snapshot yet"),
        "{out}"
    );
    assert!(!out.contains("FAILED"), "{out}");
    assert!(out.contains("2 without snapshot"), "{out}");
    let junit = dir.join("new.xml");
    let junit_arg = ["test", "suite", "--junit", junit.to_str().unwrap()];
    let (code, out, _) = scen_ci(&dir, &junit_arg, Some("true"));
    assert_eq!(code, 1, "{out}");
    // The summary line says why it failed and counts the scenarios without a snapshot as
    // failed, not "0 failed".
    assert!(
        out.contains(
            "test result: FAILED. 0 passed, 2 failed (2 without a snapshot: a failure under CI"
        ),
        "{out}"
    );
    assert!(
        out.contains("FAILED   missing_rank_all_reduce: expectations hold, but no snapshot"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("failures=\"2\"") && xml.contains("no snapshot yet"),
        "{xml}"
    );
    assert!(!dir.join("snapshots").exists());
    let (code, out, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("updated  missing_rank_all_reduce"), "{out}");
    let (code, out, _) = scen_in(&dir, &["test", "suite"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    // The snapshot has insta's header, so `cargo insta review` can read it.
    let snap = std::fs::read_to_string(dir.join("snapshots/missing_rank_all_reduce.snap")).unwrap();
    assert!(snap.starts_with("---\nsource: "), "{snap}");

    // Change the scenario: a new description and step label (the expectations still hold).
    let file = dir.join("suite/missing_rank_all_reduce.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("skipped_by_3", "rank_3_skips")
            .replace("the others hang forever", "the rest hang"),
    )
    .unwrap();
    let junit = dir.join("out.xml");
    let (code, out, _) = scen_in(
        &dir,
        &[
            "test",
            "suite",
            "-k",
            "missing",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED   missing_rank_all_reduce: ") && out.contains("snapshot: differs"),
        "{out}"
    );
    assert!(out.contains("\n-") && out.contains("\n+"), "a diff: {out}");
    assert!(!out.contains("mismatch_dtype_xccl"), "-k selects: {out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("tests=\"1\" failures=\"1\""), "{xml}");
    assert!(xml.contains("<failure"), "{xml}");

    let (code, out, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = scen_in(&dir, &["test", "suite"]);
    assert_eq!(code, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_expectation_fails_and_snapshots_can_live_beside_the_scenarios() {
    let dir = project("beside");
    std::fs::write(dir.join("scen.toml"), "[test]\nsnapshots = \"beside\"\n").unwrap();
    let (code, out, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 0, "{out}");
    assert!(dir.join("suite/mismatch_dtype_xccl.snap").is_file());
    let file = dir.join("suite/mismatch_dtype_xccl.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("outcome = \"completes\"", "outcome = \"fails\""),
    )
    .unwrap();
    let (code, out, _) = scen_in(&dir, &["test", "suite", "--jobs", "2"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("expectation: rank"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_input_exits_two() {
    let dir = project("invalid");
    std::fs::write(
        dir.join("suite/bad.toml"),
        "[world]\nranks_per_node = \"x\"\n",
    )
    .unwrap();
    let (code, out, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("INVALID  bad: "), "{out}");
    assert!(out.contains("bad.toml:2:"), "file:line:col: {out}");
    let (code, _, err) = scen_in(&dir, &["test", "no-such-dir"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no-such-dir: no such file or directory"),
        "{err}"
    );
    let (code, _, err) = scen_in(&dir, &["test", "suite", "-k", "zzz"]);
    assert_eq!(code, 2);
    assert!(err.contains("`zzz`"), "{err}");
    // --review needs a terminal (the test's stdin is not one).
    let (code, _, err) = scen_in(&dir, &["test", "suite", "--review"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--review") && err.contains("terminal"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--review` on a real terminal (a pseudo-terminal from util-linux `script`): an unknown answer
/// asks again, reject keeps the old snapshot (exit 1), accept writes the new one (exit 0).
#[test]
fn review_on_a_terminal_rejects_and_accepts() {
    let has_script = Command::new("script").arg("--version").output().is_ok();
    if !has_script {
        println!("skip: review_on_a_terminal_rejects_and_accepts: no `script` (util-linux) to make a terminal");
        return;
    }
    let dir = project("review");
    let (code, _, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 0);
    let snap = dir.join("snapshots/missing_rank_all_reduce.snap");
    let before = std::fs::read_to_string(&snap).unwrap();
    let file = dir.join("suite/missing_rank_all_reduce.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("skipped_by_3", "rank_3_skips")).unwrap();
    let review = |answers: &str| {
        use std::io::Write;
        let mut child = Command::new("script")
            .args(["-qec"])
            .arg(format!(
                "{} test suite --review",
                env!("CARGO_BIN_EXE_scen")
            ))
            .arg("/dev/null")
            .current_dir(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("script runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answers.as_bytes())
            .unwrap();
        let out = child.wait_with_output().expect("finishes");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, out) = review("huh\nr\n");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("`huh`: answer a, r, s or A"), "{out}");
    assert!(out.contains("rejected: missing_rank_all_reduce"), "{out}");
    assert_eq!(std::fs::read_to_string(&snap).unwrap(), before);
    let (code, out) = review("a\n");
    assert_eq!(code, Some(0), "{out}");
    assert!(std::fs::read_to_string(&snap)
        .unwrap()
        .contains("rank_3_skips"));
    let (code, _, _) = scen_in(&dir, &["test", "suite"]);
    assert_eq!(code, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_project_scen_toml_is_found_from_the_scenario_path_not_only_the_cwd() {
    let dir = project("elsewhere");
    std::fs::write(dir.join("scen.toml"), "[test]\nsnapshots = \"snaps\"\n").unwrap();
    let (code, out, _) = scen_in(&dir, &["test", "suite", "--update"]);
    assert_eq!(code, 0, "{out}");
    assert!(dir.join("snaps/missing_rank_all_reduce.snap").is_file());
    // From another directory, with an absolute path: the same snapshots, the same relative
    // scenario paths inside them, so everything passes and nothing is written where we stand.
    let other_tmp = tempfile::Builder::new()
        .prefix("scen-suite-other-")
        .tempdir()
        .expect("temp dir");
    let other = other_tmp.path().to_path_buf();
    std::fs::create_dir_all(&other).unwrap();
    let abs = dir.join("suite");
    let (code, out, _) = scen_in(&other, &["test", abs.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    assert!(!other.join("snapshots").exists());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}
