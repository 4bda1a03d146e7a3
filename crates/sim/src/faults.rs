//! The fault plan: a scenario's `[[faults]]` turned into what the simulator does and when.
//!
//! Timed faults (crashes at a time, node crash/bounce, partitions, holds, loss windows) become
//! actions the driver applies to the turmoil `Sim` when virtual time reaches them; the driver
//! never jumps the clock past a pending action. Faults on a rank's own progress (crash when a
//! step starts, a slow rank) act through the probe's step gate. Static ones (per-link latency,
//! env overrides, late starts) act at time 0. Every action is written to the trace as it acts
//! and remembered, so the report can say which fault a failure followed.

use scen_core::scenario::fault::node_list;
use scen_core::scenario::fault::ranks_of;
pub use scen_core::scenario::fault::{apply_env, crash};
use scen_core::scenario::{Fault, FaultKind, LinkSets, Scenario};

/// Something the driver does to the network or the hosts at a time.
#[derive(Debug, Clone)]
pub enum Action {
    CrashRanks(Vec<usize>),
    CrashNode(usize),
    Bounce(usize),
    Cut { links: LinkSets, oneway: bool },
    Heal { links: LinkSets, oneway: bool },
    Hold(LinkSets),
    Release(LinkSets),
    Loss(LinkSets, f64),
}

#[derive(Debug, Clone)]
pub struct Timed {
    pub t_ms: u64,
    pub fault: usize,
    pub action: Action,
    pub text: String,
}

/// A fault that acted: for the trace (already written) and the report's attribution.
#[derive(Debug, Clone)]
pub struct Acted {
    pub fault: usize,
    pub t_ms: u64,
    pub text: String,
}

pub struct FaultPlan {
    pub file: String,
    pub faults: Vec<Fault>,
    /// Per rank: (step, fault) crash-when-starting pairs.
    crash_at_step: Vec<Vec<(usize, usize)>>,
    /// Per rank: (fault, extra ms per step).
    slow: Vec<Option<(usize, u64)>>,
    /// Per rank: (fault, delay).
    pub late: Vec<Option<(usize, u64)>>,
    /// Timed actions not yet applied, earliest last (popped from the end).
    pending: Vec<Timed>,
}

fn rank_list(r: &[usize]) -> String {
    r.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn links_text(l: &LinkSets, oneway: bool) -> String {
    let arrow = if oneway { "->" } else { "<->" };
    if l.a == l.b {
        format!("every link between {}", node_list(&l.a))
    } else {
        format!("{{{}}} {arrow} {{{}}}", node_list(&l.a), node_list(&l.b))
    }
}

/// The actions fault `f` takes at a time, in the order it takes them (a window's start, then
/// its end if it has one).
fn timed_actions(s: &Scenario, f: &Fault) -> Vec<Timed> {
    let at = |t_ms: u64, action: Action, text: String| Timed {
        t_ms,
        fault: f.index,
        action,
        text,
    };
    match &f.kind {
        FaultKind::Crash {
            on, at_ms: Some(t), ..
        } => {
            let ranks = ranks_of(s, on);
            let text = format!("crash rank {} (SIGKILL)", rank_list(&ranks));
            vec![at(*t, Action::CrashRanks(ranks), text)]
        }
        FaultKind::CrashNode { node, at_ms } => vec![at(
            *at_ms,
            Action::CrashNode(*node),
            format!("node{node} goes down: every process on it dies"),
        )],
        FaultKind::Bounce { node, at_ms } => vec![at(
            *at_ms,
            Action::Bounce(*node),
            format!("node{node} reboots: its ranks die and start their program again"),
        )],
        FaultKind::Partition {
            links,
            oneway,
            at_ms,
            until_ms,
        } => {
            let lt = links_text(links, *oneway);
            let (links, oneway) = (links.clone(), *oneway);
            let cut = Action::Cut {
                links: links.clone(),
                oneway,
            };
            let mut v = vec![at(
                *at_ms,
                cut,
                format!("partition {lt}: segments are dropped"),
            )];
            v.extend(until_ms.map(|u| {
                at(
                    u,
                    Action::Heal { links, oneway },
                    format!("partition {lt} heals"),
                )
            }));
            v
        }
        FaultKind::Hold {
            links,
            at_ms,
            until_ms,
        } => {
            let lt = links_text(links, false);
            let hold = Action::Hold(links.clone());
            let mut v = vec![at(
                *at_ms,
                hold,
                format!("hold {lt}: messages wait on the link"),
            )];
            v.extend(until_ms.map(|u| {
                let text = format!("release {lt}: held messages are delivered");
                at(u, Action::Release(links.clone()), text)
            }));
            v
        }
        FaultKind::Loss {
            links,
            rate,
            at_ms,
            until_ms,
        } => {
            let lt = links_text(links, false);
            let text = format!("loss {lt}: each message lost with p={rate} (a lost TCP segment breaks its connection)");
            let mut v = vec![at(*at_ms, Action::Loss(links.clone(), *rate), text)];
            v.extend(until_ms.map(|u| {
                at(
                    u,
                    Action::Loss(links.clone(), 0.0),
                    format!("loss {lt} ends"),
                )
            }));
            v
        }
        _ => vec![],
    }
}

impl FaultPlan {
    pub fn new(s: &Scenario) -> FaultPlan {
        let n = s.world.size();
        let mut plan = FaultPlan {
            file: s.file.clone(),
            faults: s.faults.clone(),
            crash_at_step: vec![Vec::new(); n],
            slow: vec![None; n],
            late: vec![None; n],
            pending: Vec::new(),
        };
        let mut timed = Vec::new();
        for f in &s.faults {
            plan.on_ranks(s, f);
            timed.extend(timed_actions(s, f));
        }
        // Earliest (time, fault, file order) last, so `pop` takes the next one.
        timed.sort_by_key(|t| (t.t_ms, t.fault));
        timed.reverse();
        plan.pending = timed;
        plan
    }

    /// Fault `f`'s part that acts on ranks' own progress: a crash when a step starts, a slow
    /// rank, a late start.
    fn on_ranks(&mut self, s: &Scenario, f: &Fault) {
        let i = f.index;
        match &f.kind {
            FaultKind::Crash {
                on,
                at_step: Some(step),
                ..
            } => {
                for r in ranks_of(s, on) {
                    self.crash_at_step[r].push((*step, i));
                }
            }
            FaultKind::Slow {
                on,
                factor,
                step_ms,
            } => {
                let extra = ((factor - 1.0) * *step_ms as f64).round() as u64;
                for r in ranks_of(s, on) {
                    self.slow[r] = Some((i, extra));
                }
            }
            FaultKind::LateStart { on, delay_ms } => {
                for r in ranks_of(s, on) {
                    self.late[r] = Some((i, *delay_ms));
                }
            }
            _ => {}
        }
    }

    pub fn label(&self, fault: usize) -> String {
        self.faults[fault].label(&self.file)
    }

    /// The fault that kills `rank` when it starts `step`, if any.
    pub fn crash_at(&self, rank: usize, step: usize) -> Option<usize> {
        self.crash_at_step
            .get(rank)?
            .iter()
            .find(|(s, _)| *s == step)
            .map(|(_, f)| *f)
    }

    pub fn slow(&self, rank: usize) -> Option<(usize, u64)> {
        self.slow.get(rank).copied().flatten()
    }

    /// When the next timed action is due.
    pub fn next_ms(&self) -> Option<u64> {
        self.pending.last().map(|t| t.t_ms)
    }

    /// Takes the actions due at or before `now_ms`, in order.
    pub fn take_due(&mut self, now_ms: u64) -> Vec<Timed> {
        let mut out = Vec::new();
        while self.pending.last().is_some_and(|t| t.t_ms <= now_ms) {
            out.extend(self.pending.pop());
        }
        out
    }
}

/// Every (x, y) node pair of a link set, each unordered pair once, x != y.
pub fn pairs(l: &LinkSets, oneway: bool) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &x in &l.a {
        for &y in &l.b {
            if x == y {
                continue;
            }
            let p = if oneway { (x, y) } else { (x.min(y), x.max(y)) };
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}
