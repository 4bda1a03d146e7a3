//! `[[faults]]` validation: which fields belong to which kind, ranges, and node/rank/step
//! references, each error naming file:line:col like the rest of load.rs.

use crate::scenario::limits;

use super::{Cx, R};
use crate::scenario::fault::{Fault, FaultKind, LinkSets};
use crate::scenario::model::{Selector, Step, World};
use crate::scenario::raw::RawFault;
use toml::Spanned;

/// A slow fault's largest factor: with step_ms up to 30 days, times stay far from overflow.
const MAX_SLOW_FACTOR: f64 = 1_000_000.0;

const KINDS: &str =
    "crash, crash_node, bounce, partition, hold, loss, latency, slow, late_start, env";

fn kind_fields(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "crash" => &["on", "at_step", "at_ms"],
        "crash_node" | "bounce" => &["node", "at_ms"],
        "partition" => &["a", "b", "at_ms", "until_ms", "oneway"],
        "hold" => &["a", "b", "at_ms", "until_ms"],
        "loss" => &["a", "b", "rate", "at_ms", "until_ms"],
        "latency" => &["a", "b", "fixed_ms", "max_ms"],
        "slow" => &["on", "factor", "step_ms"],
        "late_start" => &["on", "delay_ms"],
        "env" => &["on", "env"],
        _ => return None,
    })
}

fn present(f: &RawFault) -> Vec<(&'static str, usize)> {
    fn p<T>(name: &'static str, v: &Option<Spanned<T>>) -> Option<(&'static str, usize)> {
        v.as_ref().map(|s| (name, s.span().start))
    }
    [
        p("on", &f.on),
        p("node", &f.node),
        p("a", &f.a),
        p("b", &f.b),
        p("at_ms", &f.at_ms),
        p("until_ms", &f.until_ms),
        p("at_step", &f.at_step),
        p("oneway", &f.oneway),
        p("rate", &f.rate),
        p("max_ms", &f.max_ms),
        p("fixed_ms", &f.fixed_ms),
        p("factor", &f.factor),
        p("step_ms", &f.step_ms),
        p("delay_ms", &f.delay_ms),
        p("env", &f.env),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl Cx<'_> {
    pub(super) fn fault(
        &self,
        index: usize,
        s: Spanned<RawFault>,
        world: &World,
        steps: &[Step],
    ) -> R<Fault> {
        let start = s.span().start;
        let f = s.into_inner();
        let Some(kind) = &f.kind else {
            return Err(self.err(
                start,
                format!("fault {} has no `kind` (one of: {KINDS})", index + 1),
            ));
        };
        let Some(allowed) = kind_fields(kind.get_ref()) else {
            return Err(self.at(
                kind,
                format!("unknown fault kind `{}` (one of: {KINDS})", kind.get_ref()),
            ));
        };
        for (name, at) in present(&f) {
            if !allowed.contains(&name) {
                return Err(self.err(
                    at,
                    format!(
                        "`{name}` does not apply to a {} fault (its fields: {})",
                        kind.get_ref(),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let k = self.fault_kind(kind, &f, world, steps)?;
        Ok(Fault {
            index,
            loc: self.loc(kind.span().start),
            kind: k,
        })
    }

    fn fault_kind(
        &self,
        kind: &Spanned<String>,
        f: &RawFault,
        world: &World,
        steps: &[Step],
    ) -> R<FaultKind> {
        let ws = world.size();
        let on = || -> R<Selector> {
            match &f.on {
                Some(sel) => self.selector(sel, ws),
                None => Err(self.at(kind, "this fault needs `on` (the ranks it hits)")),
            }
        };
        let n_nodes = world.nodes.len();
        Ok(match kind.get_ref().as_str() {
            "crash" => {
                let at_step = match &f.at_step {
                    Some(sr) => Some(self.step_ref(sr, steps)?),
                    None => None,
                };
                let at_ms = self.ms(&f.at_ms, "at_ms")?;
                if at_step.is_some() == at_ms.is_some() {
                    return Err(self.at(
                        kind,
                        "a crash fault needs exactly one of `at_step` and `at_ms`",
                    ));
                }
                FaultKind::Crash {
                    on: on()?,
                    at_step,
                    at_ms,
                }
            }
            "crash_node" | "bounce" => {
                let node = match &f.node {
                    Some(n) => self.node_index(n, n_nodes)?,
                    None => return Err(self.at(kind, "this fault needs `node`")),
                };
                let at_ms = self.ms(&f.at_ms, "at_ms")?.unwrap_or(0);
                if kind.get_ref() == "bounce" {
                    FaultKind::Bounce { node, at_ms }
                } else {
                    FaultKind::CrashNode { node, at_ms }
                }
            }
            "partition" | "hold" | "loss" => {
                let links = self.links(kind, f, n_nodes)?;
                let at_ms = self.ms(&f.at_ms, "at_ms")?.unwrap_or(0);
                let until_ms = self.ms(&f.until_ms, "until_ms")?;
                if let (Some(u), Some(s)) = (until_ms, &f.until_ms) {
                    if u <= at_ms {
                        return Err(self.at(s, "until_ms must be after at_ms"));
                    }
                }
                match kind.get_ref().as_str() {
                    "partition" => FaultKind::Partition {
                        links,
                        oneway: f.oneway.as_ref().is_some_and(|b| *b.get_ref()),
                        at_ms,
                        until_ms,
                    },
                    "hold" => FaultKind::Hold {
                        links,
                        at_ms,
                        until_ms,
                    },
                    _ => FaultKind::Loss {
                        links,
                        rate: match &f.rate {
                            Some(r) if (0.0..=1.0).contains(r.get_ref()) => *r.get_ref(),
                            Some(r) => return Err(self.at(r, "rate must be between 0.0 and 1.0")),
                            None => return Err(self.at(kind, "a loss fault needs `rate`")),
                        },
                        at_ms,
                        until_ms,
                    },
                }
            }
            "latency" => {
                let links = self.links(kind, f, n_nodes)?;
                let fixed_ms = self.ms(&f.fixed_ms, "fixed_ms")?;
                let max_ms = self.ms(&f.max_ms, "max_ms")?;
                if fixed_ms.is_some() == max_ms.is_some() {
                    return Err(self.at(
                        kind,
                        "a latency fault needs exactly one of `fixed_ms` and `max_ms`",
                    ));
                }
                FaultKind::Latency {
                    links,
                    fixed_ms,
                    max_ms,
                }
            }
            "slow" => FaultKind::Slow {
                on: on()?,
                factor: match &f.factor {
                    Some(x) if (1.0..=MAX_SLOW_FACTOR).contains(x.get_ref()) => *x.get_ref(),
                    Some(x) => {
                        return Err(self.at(
                            x,
                            format!("factor must be a number between 1.0 and {MAX_SLOW_FACTOR} (scen's limit)"),
                        ))
                    }
                    None => return Err(self.at(kind, "a slow fault needs `factor`")),
                },
                step_ms: self.ms(&f.step_ms, "step_ms")?.unwrap_or(1000),
            },
            "late_start" => FaultKind::LateStart {
                on: on()?,
                delay_ms: match self.ms(&f.delay_ms, "delay_ms")? {
                    Some(d) => d,
                    None => return Err(self.at(kind, "a late_start fault needs `delay_ms`")),
                },
            },
            _ => {
                let Some(env) = &f.env else {
                    return Err(self.at(kind, "an env fault needs `env = { NAME = \"value\" }`"));
                };
                let layer = self.env_layer(env.get_ref(), on()?)?;
                FaultKind::Env {
                    on: layer.on,
                    vars: layer.vars.into_iter().map(|(k, v, _)| (k, v)).collect(),
                }
            }
        })
    }

    fn ms(&self, v: &Option<Spanned<i64>>, what: &str) -> R<Option<u64>> {
        match v {
            None => Ok(None),
            Some(s) if (0..=limits::MAX_DURATION_MS as i64).contains(s.get_ref()) => {
                Ok(Some(*s.get_ref() as u64))
            }
            Some(s) => Err(self.at(
                s,
                format!(
                    "{what} must be between 0 and {} (scen's limit for a duration, 30 days)",
                    limits::MAX_DURATION_MS
                ),
            )),
        }
    }

    fn node_index(&self, n: &Spanned<i64>, n_nodes: usize) -> R<usize> {
        let v = *n.get_ref();
        if v < 0 || v as usize >= n_nodes {
            Err(self.at(
                n,
                format!(
                    "node {v} is out of range (nodes = {n_nodes}: node0..node{})",
                    n_nodes - 1
                ),
            ))
        } else {
            Ok(v as usize)
        }
    }

    fn node_set(&self, s: &Spanned<Vec<i64>>, n_nodes: usize) -> R<Vec<usize>> {
        let mut out = Vec::new();
        for v in s.get_ref() {
            if *v < 0 || *v as usize >= n_nodes {
                return Err(self.at(s, format!("node {v} is out of range (nodes = {n_nodes})")));
            }
            if !out.contains(&(*v as usize)) {
                out.push(*v as usize);
            }
        }
        out.sort();
        Ok(out)
    }

    /// `a` (default: every node) and `b` (default: every node not in `a`, or every node when `a`
    /// is every node — i.e. all inter-node links).
    fn links(&self, kind: &Spanned<String>, f: &RawFault, n_nodes: usize) -> R<LinkSets> {
        if n_nodes < 2 {
            return Err(self.at(
                kind,
                "link faults need at least 2 nodes (ranks on one node talk over loopback)",
            ));
        }
        let all: Vec<usize> = (0..n_nodes).collect();
        let a = match &f.a {
            Some(s) => self.node_set(s, n_nodes)?,
            None => all.clone(),
        };
        let b = match &f.b {
            Some(s) => self.node_set(s, n_nodes)?,
            None if a == all => all.clone(),
            None => all.iter().copied().filter(|n| !a.contains(n)).collect(),
        };
        if a.is_empty() || b.is_empty() {
            return Err(self.at(kind, "`a` and `b` must name at least one node each"));
        }
        Ok(LinkSets { a, b })
    }
}
