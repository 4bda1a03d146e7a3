//! The differential oracle: programs nobody tuned scen to (gen.rs) run in the simulator and on
//! real PyTorch, compared rank by rank: the outcome class and step (completes, fails in #N as
//! raised / killed / exited, hangs in #N), the redacted text, and the result digests.
//!
//! `cargo test --test torch -- differential` runs the seeded sample (SAMPLE programs of seed 1):
//! it fails when a program differs that `differential_known.txt` does not list, or when a listed
//! one agrees now (a ratchet: fixed defects leave the list). The long mode,
//! `SCEN_DIFF_PROGRAMS=2000 SCEN_DIFF_SEED=7 cargo test --test torch -- differential`, runs that
//! many and prints the agreement figures; every differing program is kept in
//! target/differential/ with both sides in its header, to be shrunk into a regression scenario.

use super::{digests, load, redact};
use scen_core::report::Report;
use scen_core::scenario::StepKind;
use scen_core::verdict::RankVerdict;
use scen_torch::zygote::Zygote;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

#[path = "gen.rs"]
mod gen;

/// Programs of the sample `cargo test` runs.
const SAMPLE: u64 = 12;

/// One rank's facts: the outcome class with its step, and the (redacted) text.
fn rank_facts(r: &Report) -> Vec<(String, String)> {
    r.ranks
        .iter()
        .map(|v| match v {
            RankVerdict::Completed { .. } => ("completes".into(), String::new()),
            RankVerdict::Failed { step, failure, .. } => (
                format!("fails in #{} ({})", step + 1, failure.kind()),
                redact(&failure.text()),
            ),
            RankVerdict::Hung { step, .. } => (format!("hangs in #{}", step + 1), String::new()),
            RankVerdict::Elsewhere => ("elsewhere".into(), String::new()),
        })
        .collect()
}

/// How one program came out.
#[derive(Default)]
struct Tally {
    programs: usize,
    differing: Vec<u64>,
    ranks: usize,
    outcome_agree: usize,
    text_agree: usize,
    digest_diffs: usize,
}

/// Per rank (outcome agrees, text agrees); how many result digests differ; what differs.
type Compared = (Vec<(bool, bool)>, usize, Option<String>);

/// Runs program `k`; returns its per-rank (outcome agree, text agree) and a description of what
/// differs, if anything.
fn one(
    root: &Path,
    python: &Path,
    zygote: Option<&Arc<Zygote>>,
    seed: u64,
    k: u64,
) -> Result<Compared, String> {
    let p = gen::program(seed, k);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join(format!("gen_{seed}_{k}.toml"));
    std::fs::write(&file, &p.text).map_err(|e| e.to_string())?;
    let s = load(&file);
    scen_torch::eligible::check(&s).map_err(|e| format!("program {k} not eligible: {e}"))?;
    let sim = scen_sim::simulate(&s, None).map_err(|e| format!("program {k}: simulator: {e}"))?;
    let o = scen_torch::TorchOptions {
        python: Some(python.to_path_buf()),
        max_wall_ms: Some(120_000),
        zygote: zygote.cloned(),
        ..Default::default()
    };
    let real = scen_torch::run(&s, Some(&p.text), &o)
        .map_err(|e| format!("program {k}: torch mode: {e}"))?;
    let (a, b) = (rank_facts(&sim), rank_facts(&real));
    let per_rank: Vec<(bool, bool)> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x.0 == y.0, x == y))
        .collect();
    let (ds, dt) = (digests(&sim), digests(&real));
    // gloo's reduce uses the other ranks' tensors as scratch space (gloo_reduce_ops_w2.toml):
    // what they hold afterwards is not PyTorch's to promise.
    let scratch = |r: usize, st: usize| {
        matches!(s.steps.get(st).map(|x| &x.kind),
            Some(StepKind::Collective(c)) if c.op.name() == "reduce" && c.root != Some(r))
    };
    let digest_diffs = ds
        .iter()
        .filter(|(r, st, _)| !scratch(*r, *st))
        .filter(|(r, st, d)| dt.iter().any(|(r2, s2, d2)| r2 == r && s2 == st && d2 != d))
        .count();
    let differs = per_rank.iter().any(|(o, t)| !o || !t) || digest_diffs > 0;
    let diff = differs.then(|| {
        let mut h = format!("# program {seed}/{k}: {}\n", p.summary);
        for (r, (x, y)) in a.iter().zip(&b).enumerate() {
            let _ = writeln!(h, "#   rank {r} sim:   {} {}", x.0, x.1);
            let _ = writeln!(h, "#   rank {r} torch: {} {}", y.0, y.1);
        }
        if digest_diffs > 0 {
            let _ = writeln!(h, "#   {digest_diffs} result digest(s) differ");
        }
        let keep = root.join("target/differential");
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::write(
            keep.join(format!("gen_{seed}_{k}.toml")),
            format!("{h}{}", p.text),
        );
        h
    });
    Ok((per_rank, digest_diffs, diff))
}

/// The `seed/k` programs known to differ, each with the defect it shows.
fn known(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("tests/torch/differential_known.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

pub fn run(root: &Path, python: &Path, zygote: Option<&Arc<Zygote>>) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let long = env("SCEN_DIFF_PROGRAMS");
    let programs = long.unwrap_or(SAMPLE);
    let seed = env("SCEN_DIFF_SEED").unwrap_or(1);
    let runs = super::in_parallel((0..programs).rev().collect(), |k| {
        let r = one(root, python, zygote, seed, k);
        if let Ok((_, _, Some(d))) = &r {
            println!("differential: DIFFER\n{d}");
        }
        (k, r)
    });
    let mut t = Tally::default();
    let mut errors = Vec::new();
    for (k, r) in runs {
        match r {
            Ok((per_rank, digest_diffs, diff)) => {
                t.programs += 1;
                t.ranks += per_rank.len();
                t.outcome_agree += per_rank.iter().filter(|x| x.0).count();
                t.text_agree += per_rank.iter().filter(|x| x.1).count();
                t.digest_diffs += digest_diffs;
                if diff.is_some() {
                    t.differing.push(k);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    t.differing.sort_unstable();
    let pct = |a: usize| 100.0 * a as f64 / t.ranks.max(1) as f64;
    println!(
        "differential (seed {seed}): {} programs, {} ranks: outcome agreement {:.1}%, exact text agreement {:.1}%, {} result digest(s) differ; {} program(s) differ{}; {} could not run",
        t.programs,
        t.ranks,
        pct(t.outcome_agree),
        pct(t.text_agree),
        t.digest_diffs,
        t.differing.len(),
        if t.differing.is_empty() {
            String::new()
        } else {
            format!(" (kept in target/differential/: {:?})", t.differing)
        },
        errors.len()
    );
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    if long.is_some() {
        return Ok(());
    }
    let listed = known(root);
    let ids: Vec<String> = t.differing.iter().map(|k| format!("{seed}/{k}")).collect();
    let new: Vec<&String> = ids.iter().filter(|i| !listed.contains(i)).collect();
    let fixed: Vec<&String> = listed
        .iter()
        .filter(|l| l.starts_with(&format!("{seed}/")))
        .filter(|l| !ids.contains(l))
        .collect();
    if !new.is_empty() || !fixed.is_empty() {
        return Err(format!(
            "differing programs not in tests/torch/differential_known.txt: {new:?}; listed there but agreeing now (remove them): {fixed:?}"
        ));
    }
    Ok(())
}
