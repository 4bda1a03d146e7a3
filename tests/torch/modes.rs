//! One program, three modes, one report: tests/fixtures/modes/world_size_differs.toml runs in the
//! simulator, in hardware mode (real processes, core's gloo over real TCP) and on real PyTorch,
//! and the three reports must agree section by section — each rank's outcome, step, failure
//! kind and exception class, the expectations, and the diagnosis' environment, group and
//! consistency sections — not only the outcomes. Every mode's report is made by core's one
//! builder (crates/core/src/report.rs); a mode that skipped part of it (torch mode once printed
//! no diagnosis at all) fails here. The wait-for graph is not compared: it is built from wait
//! records, which torch mode cannot see inside PyTorch.

use scen_core::report::Report;
use scen_core::verdict::RankVerdict;
use std::path::{Path, PathBuf};

const FIXTURE: &str = "tests/fixtures/modes/world_size_differs.toml";

/// The sections every mode must print alike, one line per fact.
fn sections(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = r
        .ranks
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            RankVerdict::Failed { step, failure, .. } => format!(
                "rank {i}: fails in #{} ({}, {})",
                step + 1,
                failure.kind(),
                failure.exception().unwrap_or("-")
            ),
            RankVerdict::Completed { .. } => format!("rank {i}: completes"),
            RankVerdict::Hung { step, .. } => format!("rank {i}: hangs in #{}", step + 1),
            RankVerdict::Elsewhere => format!("rank {i}: ran elsewhere"),
        })
        .collect();
    out.extend(
        r.expectations
            .iter()
            .map(|e| format!("expect rank {}: {} holds={}", e.rank, e.expected, e.holds)),
    );
    out.extend(
        r.diagnosis
            .env
            .iter()
            .map(|e| format!("env: {}", e.render())),
    );
    if let Some(g) = &r.diagnosis.groups {
        out.extend(g.lines(&r.file).into_iter().map(|l| format!("groups: {l}")));
    }
    out.extend(
        r.diagnosis
            .mismatches
            .iter()
            .map(|m| format!("mismatch: {}", m.render(&r.file))),
    );
    out
}

pub fn three_modes(root: &Path, python: &Path) -> Result<(), String> {
    let mut s = scen_core::scenario::load_file(&root.join(FIXTURE)).map_err(|e| e.to_string())?;
    s.file = FIXTURE.into();
    let sim = scen_sim::simulate(&s, None).map_err(|e| format!("sim: {e}"))?;
    let hw_opts = scen_hw::HwOptions {
        rank_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_scen"))),
        max_wall_ms: Some(60_000),
        ..scen_hw::HwOptions::default()
    };
    let hw = scen_hw::run(&s, &root.join(FIXTURE), &hw_opts).map_err(|e| format!("hw: {e}"))?;
    let torch_opts = scen_torch::TorchOptions {
        python: Some(python.to_path_buf()),
        max_wall_ms: Some(60_000),
        ..Default::default()
    };
    let torch = scen_torch::run(&s, None, &torch_opts).map_err(|e| format!("torch: {e}"))?;
    let want = sections(&sim);
    if !want
        .iter()
        .any(|l| l.starts_with("env: WORLD_SIZE differs"))
    {
        return Err(format!(
            "the simulator's report has no WORLD_SIZE diagnosis: {want:?}"
        ));
    }
    for (mode, r) in [("hw", &hw), ("torch", &torch)] {
        let got = sections(r);
        if got != want {
            return Err(format!(
                "{mode}'s report differs from the simulator's:\n      sim:   {want:?}\n      {mode}: {got:?}"
            ));
        }
    }
    Ok(())
}
