//! The differential oracle: programs nobody tuned scen to (gen.rs) run in the simulator and on
//! real PyTorch, compared rank by rank: the outcome class and step (completes, fails in #N as
//! raised / killed / exited, hangs in #N), the redacted text, and the result digests.
//!
//! `cargo test --test torch -- differential` runs the seeded sample (SAMPLE programs of seed 1):
//! it fails when a program differs that `differential_known.txt` does not list, or when a listed
//! one agrees now (a ratchet: fixed defects leave the list). The long mode,
//! `SCEN_DIFF_PROGRAMS=2000 SCEN_DIFF_SEED=7 cargo test --test torch -- differential`, runs that
//! many and prints the agreement figures; every differing program is kept in
//! target/differential/ with both sides in its header, and minimised there (`.min.toml`: scen
//! shrink's steps, each candidate run on real PyTorch; on for the sample and SCEN_DIFF_ONLY,
//! SCEN_DIFF_SHRINK=1/0 for any run), the start of a regression scenario.
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

use super::{claims::wrong_claims, digests, load, redact, try_load};
use scen_core::report::Report;
use scen_core::scenario::Scenario;
use scen_core::scenario::StepKind;
use scen_torch::zygote::Zygote;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::gen;

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
    (seed, launcher, shrink): (u64, Option<&str>, bool),
    k: u64,
) -> Result<Compared, String> {
    let p = gen::program(seed, k, launcher);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join(format!("gen_{seed}_{k}.toml"));
    std::fs::write(&file, &p.text).map_err(|e| e.to_string())?;
    let s = load(&file);
    scen_torch::eligible::check(&s).map_err(|e| format!("program {k} not eligible: {e}"))?;
    let sim = scen_sim::simulate(&s, None).map_err(|e| format!("program {k}: simulator: {e}"))?;
    let o = real_options(python, zygote);
    let a = rank_facts(&sim);
    let mut runs: Vec<RealRun> = Vec::new();
    while runs.len() <= RERUNS {
        let real = scen_torch::run(&s, Some(&p.text), &o)
            .map_err(|e| format!("program {k}: torch mode: {e}"))?;
        let run = compare(&s, &sim, real);
        let agrees = Differs::of(&run) == Differs::Nothing;
        runs.push(run);
        if agrees {
            break;
        }
    }
    let varies = runs
        .windows(2)
        .any(|w| rank_facts(&w[0].0) != rank_facts(&w[1].0));
    let last = runs.last().expect("one run");
    let matched = Differs::of(last) == Differs::Nothing;
    let (first_real, first, digest_diffs, claims) = &runs[0];
    let diff = (!matched).then(|| {
        let mut h = String::new();
        let b = rank_facts(first_real);
        let _ = writeln!(h, "# program {seed}/{k}: {}", p.summary);
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
        let stem = format!(
            "gen_{seed}_{k}{}",
            launcher.map(|l| format!("_{l}")).unwrap_or_default()
        );
        let _ = std::fs::write(keep.join(format!("{stem}.toml")), format!("{h}{}", p.text));
        if shrink {
            let kind = Differs::of(&runs[0]);
            let m = minimised(&p.text, &stem, &o, kind);
            let _ = writeln!(
                h,
                "#   minimised: target/differential/{stem}.min.toml ({m})"
            );
            let _ = std::fs::write(keep.join(format!("{stem}.min.toml")), m.file);
        }
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
    // Differing programs are minimised (with real runs: about a minute each), by default in
    // the sample and for SCEN_DIFF_ONLY; SCEN_DIFF_SHRINK=1 or 0 says so for any run.
    let shrink = match std::env::var("SCEN_DIFF_SHRINK").ok().as_deref() {
        Some("1") => true,
        Some("0") => false,
        _ => long.is_none() || std::env::var_os("SCEN_DIFF_ONLY").is_some(),
    };
    // `SCEN_DIFF_ONLY=282,514`: just those programs of the seed (to look at one again).
    let only: Option<Vec<u64>> = std::env::var("SCEN_DIFF_ONLY")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let picked: Vec<u64> = match &only {
        Some(ks) => ks.iter().rev().copied().collect(),
        None => (0..programs).rev().collect(),
    };
    let runs = super::in_parallel(picked, |k| {
        let r = one(root, python, zygote, (seed, launcher.as_deref(), shrink), k);
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

/// The torch-mode options of every real run here.
fn real_options(python: &Path, zygote: Option<&Arc<Zygote>>) -> scen_torch::TorchOptions {
    scen_torch::TorchOptions {
        python: Some(python.to_path_buf()),
        max_wall_ms: Some(120_000),
        zygote: zygote.cloned(),
        ..Default::default()
    }
}

/// What a real run differs from the simulator in, most serious first: the minimiser keeps a
/// candidate only while it differs in the same way.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Differs {
    /// Some rank's outcome class or step.
    Outcome,
    /// Some rank's text (outcomes agree).
    Text,
    /// Result digests or the diagnosis's claims.
    Values,
    Nothing,
}

impl Differs {
    fn of((_, per_rank, digests, claims): &RealRun) -> Differs {
        if per_rank.iter().any(|x| !x.0) {
            Differs::Outcome
        } else if per_rank.iter().any(|x| !x.1) {
            Differs::Text
        } else if *digests > 0 || !claims.is_empty() {
            Differs::Values
        } else {
            Differs::Nothing
        }
    }
}

/// A minimised program: the file to keep (both sides in its header) and a summary.
struct Minimised {
    file: String,
    summary: String,
}

impl std::fmt::Display for Minimised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)
    }
}

/// One run of a program's text in the simulator and on real PyTorch, or None where it does
/// not load, is not torch-eligible or cannot run.
fn run_text(text: &str, stem: &str, o: &scen_torch::TorchOptions) -> Option<(Report, RealRun)> {
    let dir = tempfile::tempdir().ok()?;
    let file = dir.path().join(format!("{stem}.toml"));
    std::fs::write(&file, text).ok()?;
    let s = try_load(&file).ok()?;
    scen_torch::eligible::check(&s).ok()?;
    let sim = scen_sim::simulate(&s, None).ok()?;
    let real = scen_torch::run(&s, Some(text), o).ok()?;
    let run = compare(&s, &sim, real);
    Some((sim, run))
}

/// A real run compared with the simulator's: per rank (outcome agrees, text agrees), the
/// result digests that differ, the diagnosis claims it contradicts.
fn compare(s: &Scenario, sim: &Report, real: Report) -> RealRun {
    let per_rank = rank_facts(sim)
        .iter()
        .zip(&rank_facts(&real))
        .map(|(x, y)| (x.0 == y.0, x == y))
        .collect();
    let d = digest_diffs(s, sim, &real);
    let c = wrong_claims(s, sim, &real);
    (real, per_rank, d, c)
}

/// Minimises a differing program with scen shrink's steps (src/shrink.rs `minimise`): each
/// candidate runs in the simulator and on real PyTorch and is kept while it differs the same
/// way (`kind`). Real runs that vary can let a candidate through by chance, so the result is
/// run once more and says whether it still differs.
fn minimised(text: &str, stem: &str, o: &scen_torch::TorchOptions, kind: Differs) -> Minimised {
    let original = || Minimised {
        file: text.to_string(),
        summary: "could not be rewritten; kept whole".into(),
    };
    let Ok(mut doc) = text.parse::<toml::Table>() else {
        return original();
    };
    let same = |d: &toml::Table| {
        toml::to_string(d)
            .ok()
            .and_then(|t| run_text(&t, stem, o))
            .is_some_and(|(_, r)| Differs::of(&r) == kind)
    };
    let removed = scen::shrink::minimise(&mut doc, &same);
    let Ok(body) = toml::to_string(&doc) else {
        return original();
    };
    let Some((sim, last)) = run_text(&body, stem, o) else {
        return original();
    };
    let confirmed = Differs::of(&last) == kind;
    let mut h = format!(
        "# Minimised from {stem} (differs in {kind:?}): removed {}; its last real run {}.\n",
        if removed.is_empty() {
            "nothing".to_string()
        } else {
            removed.join(", ")
        },
        if confirmed {
            "differs the same way"
        } else {
            "did not (the difference varies run to run)"
        }
    );
    for (r, (x, y)) in rank_facts(&sim)
        .iter()
        .zip(&rank_facts(&last.0))
        .enumerate()
    {
        let _ = writeln!(h, "#   rank {r} sim:   {} {}", x.0, x.1);
        let _ = writeln!(h, "#   rank {r} torch: {} {}", y.0, y.1);
    }
    Minimised {
        file: format!("{h}{body}"),
        summary: format!(
            "{} removed{}",
            removed.len(),
            if confirmed { "" } else { ", last run agreed" }
        ),
    }
}
