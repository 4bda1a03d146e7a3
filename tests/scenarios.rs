//! Runs every scenario in scenarios/ in the simulator: its expectations must hold, its verdict
//! and trace must equal the insta snapshot in snapshots/, and a second run with the same seed
//! must give a byte-identical trace. `cargo insta review` when behaviour changes on purpose.

use scen_core::scenario::{load_file, Scenario};
use scen_core::verdict::{describe_verdict, Report};
use serde::Serialize;
use std::path::{Path, PathBuf};

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/ exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios found in {}", dir.display());
    files
}

fn load(path: &Path) -> Scenario {
    let rel = path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(path);
    let mut s = load_file(path).unwrap_or_else(|e| panic!("{e}"));
    s.file = rel.display().to_string();
    s
}

/// What a snapshot pins: the verdict per rank, the first stall, and the whole trace.
#[derive(Serialize)]
struct Snapshot {
    scenario: String,
    description: Option<String>,
    seed: u64,
    verdict: Vec<String>,
    first_stall: Vec<String>,
    expectations_hold: bool,
    /// Flight-recorder-like call records, one line each: group, seq, op, dtype/shape, state.
    calls: Vec<String>,
    /// Consistency mismatches and the wait-for graph, as `scen run` prints them.
    diagnosis: Vec<String>,
    trace_hash: String,
    /// Which fault each failure followed (scenarios with `[[faults]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
    trace: Vec<String>,
}

fn snapshot(s: &Scenario, r: &Report) -> Snapshot {
    let first_stall = r
        .first_stall
        .iter()
        .flat_map(|st| {
            st.stuck.iter().map(move |x| {
                format!(
                    "t={}ms rank {} in {}: {} <- waiting for: {}",
                    st.t_ms,
                    x.rank,
                    s.steps[x.step].label(),
                    x.wait.what,
                    x.peers.join("; ")
                )
            })
        })
        .collect();
    Snapshot {
        scenario: s.name.clone(),
        description: s.description.clone(),
        seed: r.seed,
        verdict: r
            .ranks
            .iter()
            .enumerate()
            .map(|(i, v)| format!("rank {i}: {}", describe_verdict(s, v)))
            .collect(),
        first_stall,
        expectations_hold: r.expectations_hold(),
        calls: r.calls.iter().map(|c| c.render()).collect(),
        diagnosis: r.diagnosis.lines(&s.file),
        trace_hash: r.trace_hash.clone(),
        notes: r.notes.clone(),
        trace: r
            .trace
            .render()
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect(),
    }
}

#[test]
fn every_scenario_holds_its_expectations_and_matches_its_snapshot() {
    for path in scenario_files() {
        let s = load(&path);
        let r = scen_sim::simulate(&s, None).expect("simulation runs");
        let failed: Vec<String> = r
            .expectations
            .iter()
            .filter(|e| !e.holds)
            .map(|e| format!("rank {}: expected {}, got {}", e.rank, e.expected, e.actual))
            .collect();
        assert!(
            failed.is_empty(),
            "{}: expectations do not hold:\n{}",
            s.file,
            failed.join("\n")
        );
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_yaml_snapshot!(s.name.clone(), snapshot(&s, &r));
        });
    }
}

#[test]
fn same_seed_gives_a_byte_identical_trace() {
    for path in scenario_files() {
        let s = load(&path);
        for seed in [0u64, 7] {
            let a = scen_sim::simulate(&s, Some(seed)).expect("run a");
            let b = scen_sim::simulate(&s, Some(seed)).expect("run b");
            assert_eq!(
                a.trace.render(),
                b.trace.render(),
                "{} seed {seed}: traces differ",
                s.file
            );
            assert_eq!(a.trace_hash, b.trace_hash);
            assert_eq!(
                a.calls, b.calls,
                "{} seed {seed}: call records differ",
                s.file
            );
            assert_eq!(
                a.diagnosis.lines(&s.file),
                b.diagnosis.lines(&s.file),
                "{} seed {seed}: diagnoses differ",
                s.file
            );
        }
    }
}
