//! `scen explore`: run many seeds of one scenario and group the outcomes into verdict classes.
//!
//! Each simulation is single-threaded and deterministic; seeds are spread over worker threads
//! and the results are gathered by seed, so the output is the same whatever `--jobs` is.
//! `--shard i/n` runs the seeds s with s % n == i; `--merge` adds shard outputs together.
//! `--launcher` explores under another launcher; under both, [`compare`] says whether the
//! verdict classes differ.

use scen_core::class::class_key;
use scen_core::scenario::{parse, Launcher, Scenario, ScenarioError};
use scen_core::verdict::describe_verdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One verdict class: how many seeds fell in it and the first one (to replay).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub key: String,
    pub count: u64,
    pub first_seed: u64,
    /// The first seed's per-rank verdicts.
    pub verdict: Vec<String>,
    pub trace_hash: String,
    /// The scenario's expectations hold for every seed in this class.
    pub expectations_hold: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exploration {
    pub scenario: String,
    pub file: String,
    /// `processes` or `torchrun`: the launcher every seed ran under.
    #[serde(default = "default_launcher")]
    pub launcher: String,
    pub seeds_run: u64,
    /// Seeds for which the scenario's expectations do not hold (`scen explore` then exits 1).
    pub seeds_failing: u64,
    /// Which shards this covers (`--shard i/n`: [i]; merged: every i), of `shard_count`.
    pub shards: Vec<u64>,
    pub shard_count: u64,
    /// Classes ordered by their first seed.
    pub classes: Vec<ClassSummary>,
    /// Seeds whose run ended in an internal error (no verdict), by seed: never a class.
    #[serde(default)]
    pub internal_errors: Vec<InternalSeed>,
}

fn default_launcher() -> String {
    Launcher::default().name().to_string()
}

/// A seed whose simulation hit a defect of scen instead of giving a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InternalSeed {
    pub seed: u64,
    pub detail: String,
}

/// One seed's result: a verdict, or an internal error.
enum SeedResult {
    Verdict(Outcome),
    Internal(String),
}

/// One seed's result.
struct Outcome {
    key: String,
    holds: bool,
    verdict: Vec<String>,
    hash: String,
}

/// The scenario as `explore` runs it: parsed, under `launcher` when one is given.
fn load(
    text: &str,
    file: &str,
    name: &str,
    launcher: Option<Launcher>,
) -> Result<Scenario, ScenarioError> {
    let mut s = parse(text, file, name)?;
    if let Some(l) = launcher {
        s.world.launcher = l;
    }
    Ok(s)
}

/// Runs `seeds` over `jobs` threads; `tick` is called once per finished seed (progress).
/// Why an exploration cannot run, shard outputs cannot merge, or a `--shard` is unreadable.
#[derive(Debug, thiserror::Error)]
pub enum ExploreError {
    #[error("{0}")]
    Scenario(String),
    #[error("seed {seed}: {source}")]
    Seed {
        seed: u64,
        source: scen_sim::SimError,
    },
    #[error("seed {0} did not run")]
    NotRun(u64),
    #[error("nothing to merge")]
    NothingToMerge,
    #[error("cannot merge explorations of different scenarios ({0} and {1})")]
    DifferentScenarios(String, String),
    #[error("cannot merge explorations under different launchers ({0} and {1})")]
    DifferentLaunchers(String, String),
    #[error("cannot merge shards of {0} and of {1} (every part must use the same --shard i/n)")]
    DifferentShardCounts(u64, u64),
    #[error("shard {shard}/{count} is given twice: its seeds would count twice")]
    ShardTwice { shard: u64, count: u64 },
    #[error("--shard {0}: expected i/n with 0 <= i < n (e.g. 0/4)")]
    BadShard(String),
}

/// `launcher` replaces the scenario's `[world] launcher` when given.
pub fn explore(
    text: &str,
    (file, name): (&str, &str),
    launcher: Option<Launcher>,
    (shard, shard_count): (u64, u64),
    seeds: &[u64],
    jobs: usize,
    tick: &(dyn Fn() + Sync),
) -> Result<Exploration, ExploreError> {
    let scenario =
        load(text, file, name, launcher).map_err(|e| ExploreError::Scenario(e.to_string()))?;
    let results = run_seeds(text, (file, name), launcher, seeds, jobs, tick);
    let mut tally = Tally::default();
    for (seed, r) in seeds.iter().zip(results) {
        tally.add(*seed, r.unwrap_or(Err(ExploreError::NotRun(*seed)))?);
    }
    let mut classes = tally.classes;
    classes.sort_by_key(|c| c.first_seed);
    Ok(Exploration {
        scenario: scenario.name,
        file: file.to_string(),
        launcher: scenario.world.launcher.name().to_string(),
        seeds_run: seeds.len() as u64,
        seeds_failing: tally.seeds_failing,
        shards: vec![shard],
        shard_count,
        classes,
        internal_errors: tally.internal_errors,
    })
}

/// Each seed's result, in `seeds`' order, from `jobs` worker threads (`None`: not run).
fn run_seeds(
    text: &str,
    (file, name): (&str, &str),
    launcher: Option<Launcher>,
    seeds: &[u64],
    jobs: usize,
    tick: &(dyn Fn() + Sync),
) -> Vec<Option<Result<SeedResult, ExploreError>>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<SeedResult, ExploreError>>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    std::thread::scope(|sc| {
        for _ in 0..jobs.max(1) {
            sc.spawn(|| {
                // Each worker parses its own copy: the model is single-threaded (Rc inside).
                let s = match load(text, file, name, launcher) {
                    Ok(s) => s,
                    Err(e) => {
                        let e = ExploreError::Scenario(e.to_string());
                        results.lock().expect("results")[0] = Some(Err(e));
                        return;
                    }
                };
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= seeds.len() {
                        break;
                    }
                    let out = run_seed(&s, seeds[i]);
                    results.lock().expect("results")[i] = Some(out);
                    tick();
                }
            });
        }
    });
    results.into_inner().expect("results")
}

/// One seed's run: its verdict's class, or the simulator's internal error (kept, not fatal).
fn run_seed(s: &Scenario, seed: u64) -> Result<SeedResult, ExploreError> {
    match scen_sim::simulate(s, Some(seed)) {
        Ok(r) => Ok(SeedResult::Verdict(Outcome {
            key: class_key(s, &r),
            holds: r.expectations_hold(),
            verdict: r
                .ranks
                .iter()
                .enumerate()
                .map(|(k, v)| format!("rank {k}: {}", describe_verdict(s, v)))
                .collect(),
            hash: r.trace_hash.clone(),
        })),
        Err(scen_sim::SimError::Internal { detail, .. }) => Ok(SeedResult::Internal(detail)),
        Err(source) => Err(ExploreError::Seed { seed, source }),
    }
}

/// The classes seen so far, in order of first appearance, and the seeds that failed.
#[derive(Default)]
struct Tally {
    classes: Vec<ClassSummary>,
    /// Class key -> index in `classes`.
    index: BTreeMap<String, usize>,
    internal_errors: Vec<InternalSeed>,
    seeds_failing: u64,
}

impl Tally {
    fn add(&mut self, seed: u64, r: SeedResult) {
        let o = match r {
            SeedResult::Verdict(o) => o,
            SeedResult::Internal(detail) => {
                return self.internal_errors.push(InternalSeed { seed, detail });
            }
        };
        self.seeds_failing += u64::from(!o.holds);
        match self.index.get(&o.key) {
            Some(&c) => {
                self.classes[c].count += 1;
                self.classes[c].expectations_hold &= o.holds;
            }
            None => {
                self.index.insert(o.key.clone(), self.classes.len());
                self.classes.push(ClassSummary {
                    key: o.key,
                    count: 1,
                    first_seed: seed,
                    verdict: o.verdict,
                    trace_hash: o.hash,
                    expectations_hold: o.holds,
                });
            }
        }
    }
}

/// Adds shard outputs together: counts summed, each class keeps its smallest first seed.
/// Refuses parts of different scenarios or shard counts, and a shard given twice.
pub fn merge(parts: Vec<Exploration>) -> Result<Exploration, ExploreError> {
    let mut it = parts.into_iter();
    let mut acc = it.next().ok_or(ExploreError::NothingToMerge)?;
    for p in it {
        if p.scenario != acc.scenario {
            return Err(ExploreError::DifferentScenarios(acc.scenario, p.scenario));
        }
        if p.launcher != acc.launcher {
            return Err(ExploreError::DifferentLaunchers(acc.launcher, p.launcher));
        }
        if p.shard_count != acc.shard_count {
            return Err(ExploreError::DifferentShardCounts(
                acc.shard_count,
                p.shard_count,
            ));
        }
        if let Some(dup) = p.shards.iter().find(|i| acc.shards.contains(i)) {
            return Err(ExploreError::ShardTwice {
                shard: *dup,
                count: acc.shard_count,
            });
        }
        acc.shards.extend(&p.shards);
        acc.seeds_run += p.seeds_run;
        acc.internal_errors.extend(p.internal_errors);
        acc.seeds_failing += p.seeds_failing;
        for c in p.classes {
            match acc.classes.iter_mut().find(|x| x.key == c.key) {
                Some(x) => {
                    x.count += c.count;
                    x.expectations_hold &= c.expectations_hold;
                    if c.first_seed < x.first_seed {
                        x.first_seed = c.first_seed;
                        x.verdict = c.verdict;
                        x.trace_hash = c.trace_hash;
                    }
                }
                None => acc.classes.push(c),
            }
        }
    }
    acc.classes.sort_by_key(|c| c.first_seed);
    acc.internal_errors.sort_by_key(|x| x.seed);
    acc.shards.sort_unstable();
    Ok(acc)
}

/// The human summary.
pub fn render(e: &Exploration) -> String {
    let mut out = format!(
        "scen explore {} — {} (launcher {}): {} seeds, {} verdict class{}\n",
        e.scenario,
        e.file,
        e.launcher,
        e.seeds_run,
        e.classes.len(),
        if e.classes.len() == 1 { "" } else { "es" }
    );
    for (i, c) in e.classes.iter().enumerate() {
        out.push_str(&format!(
            "class {}: {} seed{} (first: seed {}, `scen replay {} --seed {}`, trace {})\n  {}\n",
            i + 1,
            c.count,
            if c.count == 1 { "" } else { "s" },
            c.first_seed,
            e.file,
            c.first_seed,
            c.trace_hash,
            c.key
        ));
        if !c.expectations_hold {
            out.push_str("  breaks the scenario's expectations\n");
        }
        for v in &c.verdict {
            out.push_str(&format!("    {v}\n"));
        }
    }
    if !e.internal_errors.is_empty() {
        out.push_str(&format!(
            "internal errors: {} seed{} ended in a defect of scen, not a verdict (exit 3):\n",
            e.internal_errors.len(),
            if e.internal_errors.len() == 1 {
                ""
            } else {
                "s"
            }
        ));
        for x in &e.internal_errors {
            out.push_str(&format!(
                "  seed {}: {} (`scen replay {} --seed {}`)\n",
                x.seed, x.detail, e.file, x.seed
            ));
        }
    }
    if e.shards.len() as u64 != e.shard_count {
        out.push_str(&format!(
            "shards: {} of {} ({:?})\n",
            e.shards.len(),
            e.shard_count,
            e.shards
        ));
    }
    if e.seeds_failing == 0 {
        out.push_str("expectations: hold for every seed\n");
    } else {
        out.push_str(&format!(
            "expectations: broken by {} of {} seeds (exit 1)\n",
            e.seeds_failing, e.seeds_run
        ));
    }
    out
}

/// `explore --launcher both`: the exploration under each launcher (the scenario's own first)
/// and whether their sets of verdict classes differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ByLauncher {
    pub explorations: Vec<Exploration>,
    pub verdict_classes_differ: bool,
}

/// Puts explorations of one scenario under different launchers side by side.
pub fn compare(explorations: Vec<Exploration>) -> ByLauncher {
    let keys = |e: &Exploration| -> Vec<String> {
        let mut k: Vec<String> = e.classes.iter().map(|c| c.key.clone()).collect();
        k.sort();
        k
    };
    let differ = explorations.windows(2).any(|w| keys(&w[0]) != keys(&w[1]));
    ByLauncher {
        explorations,
        verdict_classes_differ: differ,
    }
}

/// The human form of [`ByLauncher`]: each exploration, then one line per launcher with its
/// classes and one saying whether they differ.
pub fn render_by_launcher(b: &ByLauncher) -> String {
    let mut out: String = b.explorations.iter().map(render).collect();
    for e in &b.explorations {
        let keys: Vec<&str> = e.classes.iter().map(|c| c.key.as_str()).collect();
        out.push_str(&format!(
            "launcher {}: {} verdict class{}: {}\n",
            e.launcher,
            keys.len(),
            if keys.len() == 1 { "" } else { "es" },
            keys.join(" | ")
        ));
    }
    let names: Vec<&str> = b.explorations.iter().map(|e| e.launcher.as_str()).collect();
    out.push_str(&format!(
        "launchers: the verdict classes {} between {}\n",
        if b.verdict_classes_differ {
            "DIFFER"
        } else {
            "are the same"
        },
        names.join(" and ")
    ));
    out
}

/// `i/n` -> (i, n) with i < n.
pub fn parse_shard(s: &str) -> Result<(u64, u64), ExploreError> {
    let bad = || ExploreError::BadShard(s.to_string());
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}
