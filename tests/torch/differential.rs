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
//!
//! Real PyTorch does not repeat every run: two gloo waits with equal timeouts (the first to
//! fire closes the group's pairs, the other reads a closed connection) and a peer's teardown
//! racing a timeout are decided by scheduling. A program that differs is run on real PyTorch up
//! to RERUNS more times; one whose rerun agrees counts as agreeing, and the summary gives the
//! figures against the first run alone as well, with the number of programs whose real runs
//! differed from one another.
//!
//! `SCEN_DIFF_ONLY=282,514` (with `SCEN_DIFF_SEED`) runs just those programs, to look at a
//! difference again; their files land in target/differential/ when they still differ.
//!
//! `SCEN_DIFF_LAUNCHER=torchrun` (or `processes`) writes that `[world] launcher` into every
//! program, so the long mode measures agreement under torchrun's agent (its store, its
//! teardown) as well; the known list is for the default launcher, so the ratchet is off then.

use super::{claims::wrong_claims, digests, load, redact};
use scen_core::report::Report;
use scen_core::scenario::Scenario;
use scen_core::scenario::StepKind;
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
        .map(|v| {
            let (class, text) = v.facts();
            (class, redact(&text))
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
    /// Diagnosis claims about real gloo that the real run contradicts.
    wrong_claims: usize,
    /// Per-rank agreement with the first real run only.
    first_outcome_agree: usize,
    first_text_agree: usize,
    /// Programs whose real runs differed from one another.
    varying: usize,
}

/// How one program compared.
struct Compared {
    /// Per rank (outcome agrees, text agrees) with the first real run.
    first: Vec<(bool, bool)>,
    /// The same with the real run that agrees best (a rerun that matches, else the first).
    best: Vec<(bool, bool)>,
    digest_diffs: usize,
    /// Diagnosis claims the real run contradicts.
    claims: usize,
    /// The real runs differed from one another (what real PyTorch does not repeat).
    varies: bool,
    /// The program's header when no real run agrees with the simulator.
    diff: Option<String>,
}

/// One real run: its report, per-rank (outcome, text) agreement, digests that differ, and the
/// diagnosis claims it contradicts.
type RealRun = (Report, Vec<(bool, bool)>, usize, Vec<String>);

/// Real runs of a program that differs on its first run: gloo's equal timeouts and a peer's
/// teardown racing a timeout are decided by scheduling, run to run. A rerun that agrees shows
/// the model's verdict is one real PyTorch gives.
const RERUNS: usize = 2;

/// Runs program `k` in the simulator and on real PyTorch (again, up to [`RERUNS`] times, while
/// they differ) and compares them rank by rank.
fn one(
    root: &Path,
    python: &Path,
    zygote: Option<&Arc<Zygote>>,
    (seed, launcher): (u64, Option<&str>),
    k: u64,
) -> Result<Compared, String> {
    let p = gen::program(seed, k, launcher);
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
    let a = rank_facts(&sim);
    let mut runs: Vec<RealRun> = Vec::new();
    while runs.len() <= RERUNS {
        let real = scen_torch::run(&s, Some(&p.text), &o)
            .map_err(|e| format!("program {k}: torch mode: {e}"))?;
        let per_rank: Vec<(bool, bool)> = a
            .iter()
            .zip(&rank_facts(&real))
            .map(|(x, y)| (x.0 == y.0, x == y))
            .collect();
        let digest_diffs = digest_diffs(&s, &sim, &real);
        let claims = wrong_claims(&s, &sim, &real);
        let agrees =
            per_rank.iter().all(|(o, t)| *o && *t) && digest_diffs == 0 && claims.is_empty();
        runs.push((real, per_rank, digest_diffs, claims));
        if agrees {
            break;
        }
    }
    let varies = runs
        .windows(2)
        .any(|w| rank_facts(&w[0].0) != rank_facts(&w[1].0));
    let last = runs.last().expect("one run");
    let matched = last.1.iter().all(|(o, t)| *o && *t) && last.2 == 0 && last.3.is_empty();
    let (first_real, first, digest_diffs, claims) = &runs[0];
    let diff = (!matched).then(|| {
        let b = rank_facts(first_real);
        let mut h = format!("# program {seed}/{k}: {}\n", p.summary);
        for (r, (x, y)) in a.iter().zip(&b).enumerate() {
            let _ = writeln!(h, "#   rank {r} sim:   {} {}", x.0, x.1);
            let _ = writeln!(h, "#   rank {r} torch: {} {}", y.0, y.1);
        }
        if *digest_diffs > 0 {
            let _ = writeln!(h, "#   {digest_diffs} result digest(s) differ");
        }
        for c in claims {
            let _ = writeln!(h, "#   {c}");
        }
        if varies {
            let _ = writeln!(
                h,
                "#   real runs differ from one another ({} runs)",
                runs.len()
            );
        }
        let keep = root.join("target/differential");
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::write(
            keep.join(format!(
                "gen_{seed}_{k}{}.toml",
                launcher.map(|l| format!("_{l}")).unwrap_or_default()
            )),
            format!("{h}{}", p.text),
        );
        h
    });
    Ok(Compared {
        first: first.clone(),
        best: if matched {
            last.1.clone()
        } else {
            first.clone()
        },
        digest_diffs: if matched { 0 } else { *digest_diffs },
        claims: if matched { 0 } else { claims.len() },
        varies,
        diff,
    })
}

/// Result digests that differ between the two runs (not the scratch a non-dst rank of gloo's
/// `reduce` is left with: gloo_reduce_ops_w2.toml; what it holds is not PyTorch's to promise).
fn digest_diffs(s: &Scenario, sim: &Report, real: &Report) -> usize {
    let (ds, dt) = (digests(sim), digests(real));
    let scratch = |r: usize, st: usize| {
        matches!(s.steps.get(st).map(|x| &x.kind),
            Some(StepKind::Collective(c)) if c.op.name() == "reduce" && c.root != Some(r))
    };
    ds.iter()
        .filter(|(r, st, _)| !scratch(*r, *st))
        .filter(|(r, st, d)| dt.iter().any(|(r2, s2, d2)| r2 == r && s2 == st && d2 != d))
        .count()
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

/// `SCEN_DIFF_LAUNCHER`: `torchrun`, `processes`, or unset (the scenario default).
fn launcher_from_env() -> Result<Option<String>, String> {
    match std::env::var("SCEN_DIFF_LAUNCHER").ok().as_deref() {
        None | Some("") => Ok(None),
        Some(l @ ("torchrun" | "processes")) => Ok(Some(l.to_string())),
        Some(other) => Err(format!(
            "SCEN_DIFF_LAUNCHER=`{other}`: expected torchrun or processes"
        )),
    }
}

pub fn run(root: &Path, python: &Path, zygote: Option<&Arc<Zygote>>) -> Result<(), String> {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let long = env("SCEN_DIFF_PROGRAMS");
    let programs = long.unwrap_or(SAMPLE);
    let seed = env("SCEN_DIFF_SEED").unwrap_or(1);
    let launcher = launcher_from_env()?;
    // `SCEN_DIFF_ONLY=282,514`: just those programs of the seed (to look at one again).
    let only: Option<Vec<u64>> = std::env::var("SCEN_DIFF_ONLY")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let picked: Vec<u64> = match &only {
        Some(ks) => ks.iter().rev().copied().collect(),
        None => (0..programs).rev().collect(),
    };
    let runs = super::in_parallel(picked, |k| {
        let r = one(root, python, zygote, (seed, launcher.as_deref()), k);
        if let Ok(c) = &r {
            if let Some(d) = &c.diff {
                println!("differential: DIFFER\n{d}");
            }
            // One line per program, so a long run stopped early still gives its figures.
            let count = |v: &[(bool, bool)], f: fn(&(bool, bool)) -> bool| {
                v.iter().filter(|x| f(x)).count()
            };
            println!(
                "differential: done {seed}/{k}: ranks {}, outcome {}, text {}, first-run outcome {}, text {}, varies {}, claims {}",
                c.best.len(),
                count(&c.best, |x| x.0),
                count(&c.best, |x| x.1),
                count(&c.first, |x| x.0),
                count(&c.first, |x| x.1),
                u8::from(c.varies),
                c.claims
            );
        }
        (k, r)
    });
    let mut t = Tally::default();
    let mut errors = Vec::new();
    for (k, r) in runs {
        match r {
            Ok(c) => {
                t.programs += 1;
                t.ranks += c.best.len();
                t.outcome_agree += c.best.iter().filter(|x| x.0).count();
                t.text_agree += c.best.iter().filter(|x| x.1).count();
                t.first_outcome_agree += c.first.iter().filter(|x| x.0).count();
                t.first_text_agree += c.first.iter().filter(|x| x.1).count();
                t.digest_diffs += c.digest_diffs;
                t.wrong_claims += c.claims;
                t.varying += usize::from(c.varies);
                if c.diff.is_some() {
                    t.differing.push(k);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    t.differing.sort_unstable();
    let pct = |a: usize| 100.0 * a as f64 / t.ranks.max(1) as f64;
    println!(
        "differential (seed {seed}{}): {} programs, {} ranks: outcome agreement {:.1}%, exact text agreement {:.1}% (with the first real run only: {:.1}%, {:.1}%; {} program(s) whose real runs differ from one another), {} result digest(s) differ, {} diagnosis claim(s) contradicted; {} program(s) differ{}; {} could not run",
        launcher
            .as_deref()
            .map(|l| format!(", launcher {l}"))
            .unwrap_or_default(),
        t.programs,
        t.ranks,
        pct(t.outcome_agree),
        pct(t.text_agree),
        pct(t.first_outcome_agree),
        pct(t.first_text_agree),
        t.varying,
        t.digest_diffs,
        t.wrong_claims,
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
    if long.is_some() || launcher.is_some() || only.is_some() {
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
