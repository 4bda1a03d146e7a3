//! The flight recorder both ways, against real PyTorch.
//!
//! Import: the dumps under tests/fixtures/fr were written by real PyTorch 2.15 (gloo, CPU;
//! scripts/make-fr-fixtures.sh runs tests/fixtures/fr/fr_job.py); for each situation
//! `scen import-fr` must say the same from the pickle and the JSON dumps, and the scenario it
//! writes must replay what really happened in the simulator. Export: `scen run --export-fr` dumps must be read by PyTorch's own
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
        .map(|l| {
            l.replace(".json", "")
                .replace("pickle", "X")
                .replace("json", "X")
        })
        .collect()
}

/// One real situation: its fixture, the import's extra arguments, what the import must say,
/// and what really happened, which the replay must reproduce (each rank's outcome line).
struct Situation {
    case: &'static str,
    args: &'static [&'static str],
    import_says: &'static [&'static str],
    replay_gives: &'static [&'static str],
}

const SITUATIONS: &[Situation] = &[
    Situation {
        // Rank 3 skips the second all_reduce; ranks 0-2 wait in it until gloo's 120 s timeout.
        case: "missing_rank",
        args: &[],
        import_says: &[
            "rank 0 on WORLD (0): last enqueued #2, started -, completed #1",
            "rank 3 on WORLD (0): last enqueued #1, started -, completed #1",
            "ranks 0-2 stuck",
            "rank 3: never joined all_reduce #2 on WORLD",
        ],
        replay_gives: &[
            "rank   0: fails in step 3 all_reduce",
            "rank   1: fails in step 3 all_reduce",
            "rank   2: fails in step 3 all_reduce",
            "Timed out waiting 120000ms",
            "rank   3: completes",
            "but rank 3 finished its program without calling #2",
        ],
    },
    Situation {
        // Rank 1 issues one all_reduce more than rank 0.
        case: "count_mismatch",
        args: &[],
        import_says: &[
            "rank 1 stuck",
            "rank 0: never joined all_reduce #2 on WORLD",
            "differ in collectives issued on this group: 2 vs 1",
        ],
        replay_gives: &[
            "rank   1: fails in step 3 all_reduce",
            "rank   0: completes",
        ],
    },
    Situation {
        // Rank 1 receives a broadcast of 4 floats into 8: real gloo completes it on both.
        case: "size_mismatch",
        args: &[],
        import_says: &[
            "rank 0 ran broadcast #2 on WORLD [broadcast f32[4] src=0]",
            "rank 1 ran broadcast #2 on WORLD [broadcast f32[8] src=0]",
            "differ in shape: [4] vs [8]",
            "real gloo: corrupts silently",
            "completed on ranks 0 and 1 despite the difference",
        ],
        replay_gives: &["rank   0: completes", "rank   1: completes"],
    },
    Situation {
        // Groups {0,1}, {1,2}, {0,2}; each rank first calls the one its partner is not in yet.
        // gloo's dumps do not list the members: the user gives them.
        case: "group_cycle",
        args: &["--group", "1=0,1", "--group", "2=1,2", "--group", "3=0,2"],
        import_says: &[
            "rank 0: stuck in step 5 all_reduce",
            "in all_reduce #1 on pg1 [never joined: 1; joined, not finished: 0]",
            "cycle: rank 0 (in all_reduce #1 on pg1) waits for rank 1 (in all_reduce #1 on pg2) \
             waits for rank 2 (in all_reduce #1 on pg3) waits for rank 0",
        ],
        replay_gives: &[
            "rank   0: fails in step 5 all_reduce",
            "rank   1: fails in step 6 all_reduce",
            "rank   2: fails in step 7 all_reduce",
            "Timed out waiting 1800000ms",
        ],
    },
    Situation {
        // Rank 2 skips the second all_reduce; ranks 0 and 1 fail there at gloo's 2 s timeout,
        // and gloo retires their entries as it retires completed ones.
        case: "gloo_timeout",
        args: &[],
        import_says: &[
            "all_reduce #2 on WORLD: rank(s) 0, 1 retired it, but rank(s) 2 never issued it",
            "rank 0 ran all_reduce #2 on WORLD [all_reduce f32[4]]",
            ", failed), but rank 2 finished its program without calling #2",
        ],
        replay_gives: &[
            "rank   0: fails in step 3 all_reduce",
            "rank   1: fails in step 3 all_reduce",
            "Timed out waiting 2000ms",
            "rank   2: completes",
        ],
    },
    Situation {
        // Rank 2 skips the second all_reduce, then dies while writing its dump (0 bytes).
        case: "abort_mid_dump",
        args: &["--allow-incomplete-ranks"],
        import_says: &[
            "nccl_trace_rank_2",
            "is empty (0 bytes: rank 2 died while writing its dump?)",
            "no dump for rank 2: it made the call(s) that completed on the others with it \
             (all_reduce #1 on WORLD)",
            "ranks 0, 1 stuck",
            "rank 2: never joined all_reduce #2 on WORLD",
        ],
        replay_gives: &[
            "rank   0: fails in step 3 all_reduce",
            "rank   1: fails in step 3 all_reduce",
            "rank   2: completes",
        ],
    },
];

/// Whether `run` says `want` (`rank   N: what`) of rank N, alone or in a group of ranks that
/// ended the same way (`ranks 1, 2: what`, `ranks 0-3: what`).
fn has_rank_line(run: &str, want: &str) -> bool {
    let Some((who, what)) = want.split_once(": ") else {
        return run.contains(want);
    };
    let Some(rank) = who.trim_start_matches("rank").trim().parse::<usize>().ok() else {
        return run.contains(want);
    };
    run.lines().any(|l| {
        let l = l.trim_start();
        let Some((who, rest)) = l.split_once(": ") else {
            return false;
        };
        let listed = who
            .trim_start_matches("ranks")
            .trim_start_matches("rank")
            .split(',')
            .map(str::trim)
            .any(|part| match part.split_once('-') {
                Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                    (Ok(a), Ok(b)) => (a..=b).contains(&rank),
                    _ => false,
                },
                None => part.parse::<usize>() == Ok(rank),
            });
        listed && rest.starts_with(what)
    })
}

/// Every real situation, from the pickle (default stack traces) and the JSON dumps: the import
/// says what the dumps show, its scenario passes `scen check`, and its replay in the simulator
/// gives what really happened with the scenario's own expectations holding.
#[test]
fn every_real_situation_imports_and_replays_to_what_happened() {
    let tmp = TempDir::new("situations");
    for s in SITUATIONS {
        let mut seen = Vec::new();
        for enc in ["pickle", "json"] {
            let dir = format!("tests/fixtures/fr/{}/{enc}", s.case);
            let out = tmp.join(&format!("{}-{enc}.toml", s.case));
            let out_s = out.display().to_string();
            let mut args = vec!["import-fr", dir.as_str(), "-o", out_s.as_str()];
            args.extend(s.args);
            let (code, text, err) = scen(&args);
            assert_eq!(code, 0, "import-fr {dir}: {text}{err}");
            for want in s.import_says {
                assert!(text.contains(want), "{dir}: missing `{want}` in:\n{text}");
            }
            seen.push(diagnosis(&text));
            let (code, checked, err) = scen(&["check", &out_s]);
            assert_eq!(code, 0, "check {}: {checked}{err}", s.case);
            let (code, run, err) = scen(&["run", &out_s]);
            assert_eq!(
                code, 0,
                "{dir}: the replay's expectations hold:\n{run}{err}"
            );
            assert!(
                run.contains("expectations: ") && run.contains(" hold"),
                "{run}"
            );
            for want in s.replay_gives {
                assert!(
                    has_rank_line(&run, want),
                    "{dir} replay: missing `{want}` in:\n{run}"
                );
            }
        }
        assert_eq!(
            seen[0], seen[1],
            "{}: pickle and JSON imports differ",
            s.case
        );
        // The pickles are as the watchdog writes them: with stack traces (shared frames).
        let p0 = std::fs::read(root().join(format!(
            "tests/fixtures/fr/{}/pickle/nccl_trace_rank_0",
            s.case
        )))
        .expect("fixture");
        assert!(
            p0.windows(8).any(|w| w == b"filename"),
            "{}: no frames",
            s.case
        );
    }
}

/// Without `--group`, a gloo job's non-default groups are taken as the ranks that recorded
/// calls on them, and the import says where that cannot be the whole group.
#[test]
fn gloo_groups_without_members_are_named_in_notes() {
    let (code, out, err) = scen(&["import-fr", "tests/fixtures/fr/group_cycle/pickle"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("the dumps do not list the members of group 1")
            && out.contains("pass --group 1=RANKS"),
        "{out}"
    );
    assert!(
        out.contains("rank 0 is stuck in all_reduce #1 on pg1 though every rank known"),
        "{out}"
    );
    let (code, _, err) = scen(&[
        "import-fr",
        "tests/fixtures/fr/group_cycle/pickle",
        "--group",
        "1=1,2",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--group 1=1, 2: rank 0 has calls on group 1 but is not listed"),
        "{err}"
    );
    for bad in ["9=0,1", "1", "1=a"] {
        let (code, _, err) = scen(&[
            "import-fr",
            "tests/fixtures/fr/group_cycle/pickle",
            "--group",
            bad,
        ]);
        assert_eq!(code, 2, "--group {bad}: {err}");
        let name = bad.split('=').next().unwrap_or(bad);
        assert!(err.contains(&format!("--group {name}")), "{err}");
    }
}

/// A 0-byte dump is an error naming the file unless --allow-incomplete-ranks.
#[test]
fn an_empty_dump_needs_allow_incomplete_ranks() {
    let (code, _, err) = scen(&["import-fr", "tests/fixtures/fr/abort_mid_dump/pickle"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("nccl_trace_rank_2: empty (0 bytes")
            && err.contains("pass --allow-incomplete-ranks"),
        "{err}"
    );
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
    assert!(
        out.contains(
            "note: no dump for rank 3: it made the call(s) that completed on the others \
             with it (all_reduce #1 on WORLD)"
        ),
        "{out}"
    );
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
