//! `scen shrink`: make a failing run's scenario small while it fails the same way.
//!
//! Works on the TOML document: remove a fault, remove a step, drop a node or a rank per node,
//! narrow a fault's time window; keep each change whose scenario still loads and, run with the
//! same seed, gives the same verdict class (scen_core::class). Repeats until nothing more can
//! go. The result is written as a scenario file whose `[[expect]]` pins the shrunk verdict.

use scen_core::class::class_key;
use scen_core::report::Report;
use scen_core::scenario::{parse, Scenario};
use scen_core::verdict::RankVerdict;
use toml::{Table, Value};

pub struct Shrunk {
    pub text: String,
    pub removed: Vec<String>,
    pub class: String,
    pub steps_before: usize,
    pub steps_after: usize,
    pub faults_before: usize,
    pub faults_after: usize,
}

fn run(doc: &Table, file: &str, name: &str, seed: u64) -> Option<(Scenario, Report)> {
    let mut d = doc.clone();
    d.remove("expect");
    let text = toml::to_string(&d).ok()?;
    let s = parse(&text, file, name).ok()?;
    let r = scen_sim::simulate(&s, Some(seed)).ok()?;
    Some((s, r))
}

fn array_len(doc: &Table, key: &str) -> usize {
    doc.get(key)
        .and_then(|v| v.as_array())
        .map(|a| a.len())
        .unwrap_or(0)
}

fn describe_entry(v: &Value, field: &str) -> String {
    v.get(field)
        .and_then(|x| x.as_str())
        .unwrap_or("?")
        .to_string()
}

fn world_int(doc: &Table, key: &str) -> i64 {
    doc.get("world")
        .and_then(|w| w.get(key))
        .and_then(|v| v.as_integer())
        .unwrap_or(1)
}

/// Shrinks `text` (the scenario at `file`) for `seed`.
/// Why shrinking could not start or finish.
#[derive(Debug)]
pub enum ShrinkError {
    /// Bad input or nothing to shrink (exit 2).
    Input(String),
    /// The original run ended in an internal error (exit 3): there is no class to keep.
    Internal { seed: u64, detail: String },
}

impl From<String> for ShrinkError {
    fn from(s: String) -> Self {
        ShrinkError::Input(s)
    }
}

impl From<&str> for ShrinkError {
    fn from(s: &str) -> Self {
        ShrinkError::Input(s.to_string())
    }
}

pub fn shrink(text: &str, file: &str, name: &str, seed: u64) -> Result<Shrunk, ShrinkError> {
    // The shrunk file pins its seed in `[sim] seed`, a TOML integer (64-bit signed).
    let Ok(seed_value) = i64::try_from(seed) else {
        return Err(ShrinkError::Input(format!(
            "--seed {seed} is above {}, the largest seed a scenario file can hold (`[sim] seed` is a TOML integer); shrink a seed up to that",
            i64::MAX
        )));
    };
    let s0 = parse(text, file, name).map_err(|e| e.to_string())?;
    let r0 = scen_sim::simulate(&s0, Some(seed)).map_err(|e| match e {
        scen_sim::SimError::Internal { seed, detail } => ShrinkError::Internal { seed, detail },
        other => ShrinkError::Input(other.to_string()),
    })?;
    let class = class_key(&s0, &r0);
    if r0
        .ranks
        .iter()
        .all(|v| matches!(v, RankVerdict::Completed { .. }))
    {
        return Err(ShrinkError::Input(format!(
            "{file} with seed {seed}: every rank completes; there is no failure to shrink"
        )));
    }
    let mut doc: Table = text.parse().map_err(|e| format!("{file}: {e}"))?;
    let same =
        |d: &Table| run(d, file, name, seed).is_some_and(|(s, r)| class_key(&s, &r) == class);
    if !same(&doc) {
        return Err(ShrinkError::Input(format!(
            "{file}: the scenario does not reproduce its class once rewritten (please report)"
        )));
    }
    let removed = minimise(&mut doc, &same);
    let (s, r) = run(&doc, file, name, seed).ok_or("the shrunk scenario no longer runs")?;
    debug_assert_eq!(class_key(&s, &r), class);
    doc.remove("expect");
    let sim = doc
        .entry("sim")
        .or_insert_with(|| Value::Table(Table::new()));
    if let Some(t) = sim.as_table_mut() {
        t.insert("seed".into(), Value::Integer(seed_value));
    }
    let mut body = toml::to_string(&doc).map_err(|e| e.to_string())?;
    body.push_str(&expectations(&r));
    let header = header(text, file, seed, &class, &removed);
    Ok(Shrunk {
        text: format!("{header}{body}"),
        removed,
        class,
        steps_before: s0.steps.len(),
        steps_after: s.steps.len(),
        faults_before: s0.faults.len(),
        faults_after: s.faults.len(),
    })
}

/// Removes what it can from the scenario document `doc` (faults, steps, per-node and per-rank
/// entries, nodes, ranks per node; narrows fault windows) while `same` holds for it, until
/// nothing more can go; returns what was removed. `scen shrink` keeps a seed's verdict class;
/// the differential oracle (tests/torch/differential.rs) keeps a difference from real PyTorch.
pub fn minimise(doc: &mut Table, same: &dyn Fn(&Table) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    loop {
        let before = removed.len();
        for key in ["faults", "step"] {
            let mut i = array_len(doc, key);
            while i > 0 {
                i -= 1;
                let mut cand = doc.clone();
                let arr = cand
                    .get_mut(key)
                    .and_then(|v| v.as_array_mut())
                    .expect("array");
                let gone = arr.remove(i);
                if arr.is_empty() {
                    cand.remove(key);
                }
                if same(&cand) {
                    let what = if key == "faults" {
                        format!("a {} fault", describe_entry(&gone, "kind"))
                    } else {
                        format!("a {} step", describe_entry(&gone, "op"))
                    };
                    removed.push(what);
                    *doc = cand;
                }
            }
        }
        for key in ["node", "rank", "service"] {
            remove_world_entries(doc, key, same, &mut removed);
        }
        for key in ["nodes", "ranks_per_node"] {
            let n = world_int(doc, key);
            if n > 1 {
                let mut cand = doc.clone();
                if let Some(w) = cand.get_mut("world").and_then(|w| w.as_table_mut()) {
                    w.insert(key.into(), Value::Integer(n - 1));
                }
                if same(&cand) {
                    removed.push(format!("world.{key} {n} -> {}", n - 1));
                    *doc = cand;
                }
            }
        }
        for i in 0..array_len(doc, "faults") {
            narrow(doc, i, same, &mut removed);
        }
        if removed.len() == before {
            break;
        }
    }
    removed
}

/// Tries removing each `[[world.<key>]]` entry (per-node/per-rank overrides, services).
fn remove_world_entries(
    doc: &mut Table,
    key: &str,
    same: &dyn Fn(&Table) -> bool,
    removed: &mut Vec<String>,
) {
    let len = |d: &Table| {
        d.get("world")
            .and_then(|w| w.get(key))
            .and_then(|v| v.as_array())
            .map(|a| a.len())
            .unwrap_or(0)
    };
    let mut i = len(doc);
    while i > 0 {
        i -= 1;
        let mut cand = doc.clone();
        if let Some(w) = cand.get_mut("world").and_then(|w| w.as_table_mut()) {
            if let Some(a) = w.get_mut(key).and_then(|v| v.as_array_mut()) {
                a.remove(i);
                if a.is_empty() {
                    w.remove(key);
                }
            }
        }
        if same(&cand) {
            removed.push(format!("a [[world.{key}]] entry"));
            *doc = cand;
        }
    }
}

/// Halves a fault's window from either end while the class holds.
fn narrow(doc: &mut Table, i: usize, same: &dyn Fn(&Table) -> bool, removed: &mut Vec<String>) {
    let get = |d: &Table, f: &str| {
        d.get("faults")
            .and_then(|v| v.as_array())
            .and_then(|a| a.get(i))
            .and_then(|x| x.get(f))
            .and_then(|x| x.as_integer())
    };
    let Some(until) = get(doc, "until_ms") else {
        return;
    };
    let at = get(doc, "at_ms").unwrap_or(0);
    for (field, value) in [
        ("until_ms", at + (until - at) / 2),
        ("at_ms", at + (until - at) / 2),
    ] {
        if value <= at && field == "until_ms" || value >= until && field == "at_ms" {
            continue;
        }
        let mut cand = doc.clone();
        if let Some(f) = cand
            .get_mut("faults")
            .and_then(|v| v.as_array_mut())
            .and_then(|a| a.get_mut(i))
            .and_then(|x| x.as_table_mut())
        {
            f.insert(field.into(), Value::Integer(value));
        }
        if same(&cand) {
            removed.push(format!(
                "narrowed fault #{}: {field} {} -> {value}",
                i + 1,
                if field == "until_ms" { until } else { at }
            ));
            *doc = cand;
            return;
        }
    }
}

fn header(text: &str, file: &str, seed: u64, class: &str, removed: &[String]) -> String {
    let mut h = format!(
        "# Shrunk by `scen shrink {file} --seed {seed}`:\n# the smallest scenario found that fails the same way.\n# Verdict class: {class}\n"
    );
    if removed.is_empty() {
        h.push_str("# Nothing could be removed.\n");
    } else {
        h.push_str("# Removed:\n");
        for r in removed {
            h.push_str(&format!("#   - {r}\n"));
        }
    }
    h.push_str("# The original's header:\n");
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        h.push_str(&format!(
            "#   {}\n",
            line.trim_start_matches('#').trim_start()
        ));
    }
    h.push('\n');
    h
}

/// `[[expect]]` entries pinning the run's verdict, one per distinct outcome.
fn expectations(r: &Report) -> String {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (rank, v) in r.ranks.iter().enumerate() {
        let e = match v {
            RankVerdict::Completed { .. } => "outcome = \"completes\"\n".to_string(),
            RankVerdict::Failed { step, failure, .. } => {
                format!(
                    "outcome = \"fails\"\nstep = {}\nerror = {}\n",
                    step + 1,
                    Value::String(failure.headline())
                )
            }
            RankVerdict::Hung { step, .. } => {
                format!("outcome = \"hangs\"\nstep = {}\n", step + 1)
            }
            // Never in the simulator, whose runs shrink works on.
            RankVerdict::Elsewhere => continue,
        };
        match groups.iter_mut().find(|(k, _)| *k == e) {
            Some((_, ranks)) => ranks.push(rank),
            None => groups.push((e, vec![rank])),
        }
    }
    let mut out = String::new();
    for (e, ranks) in groups {
        let on: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
        out.push_str(&format!("\n[[expect]]\non = [{}]\n{e}", on.join(", ")));
    }
    out
}
