//! Faults a scenario injects (`[[faults]]`): what they are, typed and validated.
//!
//! The model never applies a fault itself: the simulator does (crates/sim, fault plan). This
//! module only says what each fault is and how reports name it, so the text is written once.

use super::expr::interpolate;
use super::model::{Loc, Scenario, Selector, RANK_VARS};
use crate::outcome::{Failure, Killer, SIGKILL};

/// One `[[faults]]` entry.
#[derive(Debug, Clone)]
pub struct Fault {
    /// 0-based position among the faults; reports print it 1-based (`fault #2`).
    pub index: usize,
    pub loc: Loc,
    pub kind: FaultKind,
}

/// Two sets of nodes (by index); a link fault acts on every link between a node of `a` and a
/// node of `b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSets {
    pub a: Vec<usize>,
    pub b: Vec<usize>,
}

#[derive(Debug, Clone)]
pub enum FaultKind {
    /// The selected ranks' processes are killed (SIGKILL): when they start step `at_step`, or
    /// at virtual time `at_ms`.
    Crash {
        on: Selector,
        at_step: Option<usize>,
        at_ms: Option<u64>,
    },
    /// A whole node goes down at `at_ms` (turmoil `crash`): every rank on it dies.
    CrashNode { node: usize, at_ms: u64 },
    /// A node reboots at `at_ms` (turmoil `bounce`): its ranks die and start their program again.
    Bounce { node: usize, at_ms: u64 },
    /// Nothing crosses between `a` and `b` (or only `a` -> `b` when `oneway`) from `at_ms` until
    /// `until_ms` (never healed when `None`). Segments sent meanwhile are dropped.
    Partition {
        links: LinkSets,
        oneway: bool,
        at_ms: u64,
        until_ms: Option<u64>,
    },
    /// Messages between `a` and `b` are held from `at_ms` and delivered at `until_ms`.
    Hold {
        links: LinkSets,
        at_ms: u64,
        until_ms: Option<u64>,
    },
    /// Each message on the links is lost with probability `rate` (turmoil `fail_rate`): with
    /// turmoil's TCP, a lost segment breaks its connection for good.
    Loss {
        links: LinkSets,
        rate: f64,
        at_ms: u64,
        until_ms: Option<u64>,
    },
    /// Per-link latency for a link class: `fixed_ms` exactly, or up to `max_ms` (turmoil's
    /// exponential distribution between `[sim] latency_ms` min and this max).
    Latency {
        links: LinkSets,
        fixed_ms: Option<u64>,
        max_ms: Option<u64>,
    },
    /// The selected ranks compute `factor` times slower: before each step they spend
    /// `(factor - 1) * step_ms` more than the others (the model's nominal compute is `step_ms`).
    Slow {
        on: Selector,
        factor: f64,
        step_ms: u64,
    },
    /// The selected ranks' processes start `delay_ms` late.
    LateStart { on: Selector, delay_ms: u64 },
    /// Environment overrides for the selected ranks, exactly like `[[world.rank]] env`, applied
    /// on top of every other layer. Entries are (name, template).
    Env {
        on: Selector,
        vars: Vec<(String, String)>,
    },
}

impl FaultKind {
    /// The `kind = "..."` name.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Crash { .. } => "crash",
            FaultKind::CrashNode { .. } => "crash_node",
            FaultKind::Bounce { .. } => "bounce",
            FaultKind::Partition { .. } => "partition",
            FaultKind::Hold { .. } => "hold",
            FaultKind::Loss { .. } => "loss",
            FaultKind::Latency { .. } => "latency",
            FaultKind::Slow { .. } => "slow",
            FaultKind::LateStart { .. } => "late_start",
            FaultKind::Env { .. } => "env",
        }
    }
}

impl Fault {
    /// `fault #2 (scenarios/x.toml:14, crash)`: how reports name a fault.
    pub fn label(&self, file: &str) -> String {
        format!(
            "fault #{} ({}:{}, {})",
            self.index + 1,
            file,
            self.loc.line,
            self.kind.name()
        )
    }
}

/// `node0,node1`: node sets as trace lines print them.
pub fn node_list(nodes: &[usize]) -> String {
    nodes
        .iter()
        .map(|n| format!("node{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The ranks a selector picks, in rank order.
pub fn ranks_of(s: &Scenario, on: &Selector) -> Vec<usize> {
    s.world
        .ranks
        .iter()
        .filter(|r| on.matches(r, &s.world))
        .map(|r| r.rank)
        .collect()
}

fn rank_list(r: &[usize]) -> String {
    r.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Applies `env` faults to the scenario's rank environments (the same templates and layering
/// as `[[world.rank]] env`, on top of every layer); returns (fault, text) for the trace.
pub fn apply_env(s: &mut Scenario) -> Vec<(usize, String)> {
    let mut notes = Vec::new();
    let faults = s.faults.clone();
    for f in &faults {
        let FaultKind::Env { on, vars } = &f.kind else {
            continue;
        };
        let ranks = ranks_of(s, on);
        for r in &ranks {
            let spec = s.world.ranks[*r].clone();
            let world = s.world.clone();
            for (k, template) in vars {
                let v = interpolate(template, &RANK_VARS, &|name| {
                    super::model::rank_var(name, &spec, &world)
                })
                .unwrap_or_else(|_| template.clone());
                s.world.ranks[*r].env.insert(k.clone(), v);
            }
        }
        let set: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
        notes.push((
            f.index,
            format!(
                "environment override on rank {}: {}",
                rank_list(&ranks),
                set.join(" ")
            ),
        ));
    }
    notes
}

/// How a rank killed by crash fault `index` (labelled `label`) fails: SIGKILL, by that fault.
pub fn crash(index: usize, label: &str) -> Failure {
    Failure::Killed {
        signal: SIGKILL,
        by: Killer::Fault {
            index,
            label: label.to_string(),
        },
    }
}
