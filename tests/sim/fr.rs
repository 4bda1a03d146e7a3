//! The flight recorder both ways, against real PyTorch.
//!
//! Import: the dumps under tests/fixtures/fr were written by real PyTorch 2.15 (gloo, CPU;
//! scripts/make-fr-fixtures.sh runs tests/fixtures/fr/fr_job.py); `scen import-fr` must name the
//! same culprit from the pickle and the JSON dumps, and the scenario it writes must replay the
//! stall in the simulator. Export: `scen run --export-fr` dumps must be read by PyTorch's own
//! `torchfrtrace`, which must name the same missing rank as scen. Without torch that test prints
//! a `skip:` line; SCEN_TORCH_REQUIRED=1 (CI with torch) makes it fail instead.

use crate::common::{root, scen};
use std::path::PathBuf;
use std::process::Command;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("scen-fr-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
    fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
    fn s(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The diagnosis part of an import (without the lines naming paths).
fn diagnosis(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with("import-fr:") && !l.starts_with("wrote "))
        .map(|l| l.replace("pickle", "X").replace("json", "X"))
        .collect()
}

fn import(case: &str, enc: &str, tmp: &TempDir) -> (String, PathBuf) {
    let out = tmp.join(&format!("{case}-{enc}.toml"));
    let dir = format!("tests/fixtures/fr/{case}/{enc}");
    let (code, stdout, stderr) = scen(&["import-fr", &dir, "-o", &out.display().to_string()]);
    assert_eq!(code, 0, "import-fr {dir}: {stdout}{stderr}");
    (stdout, out)
}

#[test]
fn missing_rank_is_named_from_pickle_and_json_and_the_replay_reproduces_the_stall() {
    let tmp = TempDir::new("missing");
    let (p, scenario) = import("missing_rank", "pickle", &tmp);
    let (j, _) = import("missing_rank", "json", &tmp);
    assert_eq!(diagnosis(&p), diagnosis(&j), "pickle:\n{p}\njson:\n{j}");
    assert!(
        p.contains("rank 0 on WORLD (0): last enqueued #2, started -, completed #1"),
        "{p}"
    );
    assert!(
        p.contains("rank 3 on WORLD (0): last enqueued #1, started -, completed #1"),
        "{p}"
    );
    assert!(p.contains("ranks 0-2 stuck"), "{p}");
    assert!(
        p.contains("rank 3: never joined all_reduce #2 on WORLD"),
        "{p}"
    );
    assert!(
        j.contains("rank 3: never joined all_reduce #2 on WORLD"),
        "{j}"
    );
    // The replay: ranks 0-2 stay in the second all_reduce until gloo's timeout (the dump's
    // timeout_ms), rank 3 completes, and scen names rank 3 as the one that never called it.
    let (code, out, err) = scen(&["run", &scenario.display().to_string()]);
    assert_eq!(code, 0, "the replay's expectations hold:\n{out}{err}");
    for r in 0..3 {
        assert!(
            out.contains(&format!("rank   {r}: fails in #3 all_reduce")),
            "{out}"
        );
    }
    assert!(out.contains("Timed out waiting 120000ms"), "{out}");
    assert!(out.contains("rank   3: completes"), "{out}");
    assert!(
        out.contains("but rank 3 finished its program without calling #2"),
        "{out}"
    );
}

#[test]
fn count_mismatch_names_the_extra_call() {
    let tmp = TempDir::new("count");
    let (p, scenario) = import("count_mismatch", "pickle", &tmp);
    let (j, _) = import("count_mismatch", "json", &tmp);
    for out in [&p, &j] {
        assert!(out.contains("rank 1 stuck"), "{out}");
        assert!(
            out.contains("rank 0: never joined all_reduce #2 on WORLD"),
            "{out}"
        );
        assert!(
            out.contains("differ in collectives issued on this group: 2 vs 1"),
            "{out}"
        );
    }
    let (code, out, err) = scen(&["run", &scenario.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("rank   1: fails in #3 all_reduce"), "{out}");
    assert!(out.contains("rank   0: completes"), "{out}");
}

#[test]
fn size_mismatch_is_found_though_real_gloo_completed_it() {
    let tmp = TempDir::new("size");
    for enc in ["pickle", "json"] {
        let (out, scenario) = import("size_mismatch", enc, &tmp);
        assert!(
            out.contains("rank 0 ran broadcast #2 on WORLD [broadcast f32[4]]"),
            "{out}"
        );
        assert!(
            out.contains("rank 1 ran broadcast #2 on WORLD [broadcast f32[8]]"),
            "{out}"
        );
        assert!(out.contains("differ in shape: [4] vs [8]"), "{out}");
        // Both ranks' dumps say the broadcast completed (gloo retired it): the scenario keeps
        // what the dumps show as its expectations.
        let text = std::fs::read_to_string(&scenario).expect("scenario");
        assert!(text.contains("on = [0]\noutcome = \"completes\""), "{text}");
        assert!(text.contains("on = [1]\noutcome = \"completes\""), "{text}");
        assert!(text.contains("shape = [8]"), "{text}");
    }
}

#[test]
fn import_refuses_an_incomplete_job_unless_allowed() {
    let tmp = TempDir::new("incomplete");
    for r in 0..3 {
        std::fs::copy(
            root().join(format!(
                "tests/fixtures/fr/missing_rank/pickle/nccl_trace_rank_{r}"
            )),
            tmp.join(&format!("nccl_trace_rank_{r}")),
        )
        .expect("copy");
    }
    let (code, _, err) = scen(&["import-fr", &tmp.s()]);
    assert_eq!(code, 2);
    assert!(err.contains("no dump for rank(s) 3 of 4"), "{err}");
    let (code, out, err) = scen(&["import-fr", &tmp.s(), "--allow-incomplete-ranks"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("note: no dump for rank(s) 3"), "{out}");
    assert!(out.contains("never joined all_reduce #2 on WORLD"), "{out}");
}

#[test]
fn bad_dumps_are_named_not_panicked_on() {
    let tmp = TempDir::new("bad");
    std::fs::write(tmp.join("nccl_trace_rank_0"), b"\x80\x04garbage").expect("write");
    let (code, _, err) = scen(&["import-fr", &tmp.s()]);
    assert_eq!(code, 2);
    assert!(err.contains("nccl_trace_rank_0: not a pickle"), "{err}");
    std::fs::write(
        tmp.join("nccl_trace_rank_0"),
        br#"{"version": "2.10", "entries": [{}]}"#,
    )
    .expect("write");
    let (code, _, err) = scen(&["import-fr", &tmp.s()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing key `process_group`"), "{err}");
    let (code, _, err) = scen(&["import-fr", "no/such/dir"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no/such/dir: cannot read the directory"),
        "{err}"
    );
}

/// Python with torch: $SCEN_PYTHON, else the torch helper's venv. `None` after a skip line.
fn torch_python() -> Option<PathBuf> {
    let py = std::env::var_os("SCEN_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/scen-torch/venv/bin/python"))
        })?;
    let ok = Command::new(&py)
        .args(["-c", "import torch.distributed.flight_recorder.fr_trace"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return Some(py);
    }
    let why = format!("{} cannot import torch's flight recorder", py.display());
    assert!(
        std::env::var("SCEN_TORCH_REQUIRED").as_deref() != Ok("1"),
        "SCEN_TORCH_REQUIRED=1 but {why}"
    );
    println!("skip: torchfrtrace agreement test: {why} (set SCEN_PYTHON)");
    None
}

#[test]
fn exported_dumps_read_back_and_torchfrtrace_names_the_same_missing_rank() {
    let tmp = TempDir::new("export");
    let dir = tmp.join("dumps");
    let (code, out, err) = scen(&[
        "run",
        "scenarios/missing_rank_all_reduce.toml",
        "--export-fr",
        &dir.display().to_string(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("wrote 4 flight-recorder dumps"), "{err}");
    assert!(
        out.contains("rank 3: never joined all_reduce #2 on WORLD"),
        "{out}"
    );
    // scen reads its own dumps back to the same culprit.
    let (code, back, err) = scen(&["import-fr", &dir.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        back.contains("rank 3: never joined all_reduce #2 on WORLD"),
        "{back}"
    );
    // JSON too.
    let jdir = tmp.join("json");
    let (code, _, err) = scen(&[
        "run",
        "scenarios/missing_rank_all_reduce.toml",
        "--export-fr",
        &jdir.display().to_string(),
        "--fr-format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(jdir.join("nccl_trace_rank_3.json").is_file());
    // Same run, same bytes (virtual times).
    let again = tmp.join("again");
    let (code, _, err) = scen(&[
        "run",
        "scenarios/missing_rank_all_reduce.toml",
        "--export-fr",
        &again.display().to_string(),
    ]);
    assert_eq!(code, 0, "{err}");
    for r in 0..4 {
        let name = format!("nccl_trace_rank_{r}");
        assert_eq!(
            std::fs::read(dir.join(&name)).expect("dump"),
            std::fs::read(again.join(&name)).expect("dump"),
            "{name} differs between two runs"
        );
    }
    // p2p: a send nobody receives; the names carry group ranks as torch writes them.
    let pdir = tmp.join("p2p");
    let (code, out, err) = scen(&[
        "run",
        "scenarios/p2p_send_without_recv.toml",
        "--export-fr",
        &pdir.display().to_string(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, back, err) = scen(&["import-fr", &pdir.display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        back.contains("rank 0 ran send #2 0->1 on WORLD [send f32[4]]")
            && back.contains("but rank 1 never posted the matching recv"),
        "{back}"
    );

    let Some(py) = torch_python() else { return };
    let fr = Command::new(&py)
        .args(["-m", "torch.distributed.flight_recorder.fr_trace"])
        .arg(&dir)
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&fr.stdout),
        String::from_utf8_lossy(&fr.stderr)
    );
    assert!(fr.status.success(), "torchfrtrace failed:\n{text}");
    assert!(
        text.contains("Not all ranks joining collective, sequence number: 2"),
        "{text}"
    );
    assert!(text.contains("missing ranks: {3}"), "{text}");
    let fr = Command::new(&py)
        .args(["-m", "torch.distributed.flight_recorder.fr_trace"])
        .arg(&pdir)
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&fr.stdout),
        String::from_utf8_lossy(&fr.stderr)
    );
    assert!(
        fr.status.success(),
        "torchfrtrace failed on p2p dumps:\n{text}"
    );
    assert!(
        text.contains("collective: gloo:send 0->1") && text.contains("missing ranks: {1}"),
        "{text}"
    );
    println!("torchfrtrace agrees: missing ranks {{3}} at all_reduce #2");
}

#[test]
fn the_hw_watchdog_writes_dumps_at_a_hang() {
    let tmp = TempDir::new("hw");
    let rel = "scenarios/missing_rank_all_reduce.toml";
    let mut s = scen_core::scenario::load_file(&root().join(rel)).expect("scenario");
    s.file = rel.into();
    let o = scen_hw::HwOptions {
        rank_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_scen"))),
        max_wall_ms: Some(60_000),
        fr_dump_dir: Some(tmp.join("dumps")),
        ..Default::default()
    };
    let r = match scen_hw::run(&s, &root().join(rel), &o) {
        Ok(r) => r,
        Err(scen_hw::HwError::Unavailable(why)) => {
            assert!(
                std::env::var("SCEN_HW_REQUIRED").as_deref() != Ok("1"),
                "SCEN_HW_REQUIRED=1 but {why}"
            );
            println!("skip: hw watchdog dump test: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("watchdog: wrote 4 flight-recorder dumps")),
        "{:?}",
        r.notes
    );
    let (code, out, err) = scen(&["import-fr", &tmp.join("dumps").display().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ranks 0-2 stuck"), "{out}");
    assert!(
        out.contains("rank 3: never joined all_reduce #2 on WORLD"),
        "{out}"
    );
}
